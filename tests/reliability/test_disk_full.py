"""A real full disk: a small tmpfs mounted for the test (skipped where mounting is not permitted),
filled to several levels, under build, add and sync. Every failure is one clear error saying the
disk is full, and the index on disk stays the one before: loadable, same documents, answering."""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import uuid
import warnings

import pytest
from hash_embedder import HashEmbedder, tiny_config

SIZE = 8 << 20


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    run = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mnt)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here ({run.stderr.strip()[:100]})")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def _fill(mnt, leave: int) -> None:
    """Fill the file system until ``leave`` bytes remain free (roughly: tmpfs counts pages)."""
    with open(mnt / f"filler-{uuid.uuid4().hex[:6]}", "wb") as f:
        free = shutil.disk_usage(mnt).free - leave
        block = b"\0" * (1 << 16)
        with contextlib.suppress(OSError):
            while free > 0:
                free -= f.write(block[:min(len(block), free)])
            f.flush()
            os.fsync(f.fileno())


def _unfill(mnt) -> None:
    for p in mnt.glob("filler-*"):
        p.unlink()


def _is_clean_disk_error(e: BaseException) -> bool:
    return isinstance(e, OSError) and e.errno == errno.ENOSPC and "previous index is unchanged" in str(e)


LEVELS = [0, 16 << 10, 96 << 10, 256 << 10, 600 << 10]


def test_add_and_sync_on_a_full_disk_leave_the_old_index(small_disk, tiny, paragraphs, tmp_path):
    from contextrag import ContextRAG
    from contextrag.index import store
    idx = small_disk / "idx"
    shutil.copytree(tiny, idx)
    rag = ContextRAG.load(idx, embedder=HashEmbedder())
    before = sorted(rag.index.docs)
    folder = tmp_path / "notes"
    folder.mkdir()
    for i, p in enumerate(paragraphs[40:44]):
        (folder / f"n{i}.txt").write_text(p["text"])
    failures = 0
    for leave in LEVELS:
        _fill(small_disk, leave)
        for what, change in (("add", lambda: rag.add(paragraphs[44:50], replace=True)),
                             ("sync", lambda: rag.sync_folder(folder))):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    change()
            except Exception as e:   # noqa: BLE001 - the error is what is checked
                assert _is_clean_disk_error(e), f"{what} with {leave} bytes free: {type(e).__name__}: {e}"
                failures += 1
                again = ContextRAG.load(idx, embedder=HashEmbedder())
                assert sorted(again.index.docs) == sorted(rag.index.docs)     # in memory as on disk
                assert again.retrieve("Which magazine was started first?", k=3)
            else:
                rag = ContextRAG.load(idx, embedder=HashEmbedder())           # it fit: the new state
        leftovers = [p.name for p in idx.iterdir() if p.name.startswith((".tmp-", ".CURRENT-"))]
        assert leftovers == [], leftovers
        assert len([p for p in idx.iterdir() if store._SNAP_RE.match(p.name)]) == 1   # no orphan snapshot
        _unfill(small_disk)
    assert failures >= 4                     # the small levels do not fit a save
    assert set(ContextRAG.load(idx, embedder=HashEmbedder()).index.docs) >= set(before)
    rag.add(paragraphs[44:50], replace=True)                # with room again, the next write goes through
    assert {p["id"] for p in paragraphs[44:50]} <= set(ContextRAG.load(idx, embedder=HashEmbedder()).index.docs)


@pytest.mark.parametrize("direct_io", ["auto", "1"])     # "1": every file written with O_DIRECT
def test_build_on_a_full_disk_leaves_nothing_half_written(small_disk, paragraphs, monkeypatch, direct_io):
    from contextrag import ContextRAG
    monkeypatch.setenv("CONTEXTRAG_DIRECT_IO", direct_io)
    for leave in LEVELS[:3]:
        _fill(small_disk, leave)
        path = small_disk / f"new{leave}"
        with pytest.raises(OSError) as e:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ContextRAG.build(paragraphs[:40], path=path, config=tiny_config(), embedder=HashEmbedder())
        assert _is_clean_disk_error(e.value), f"{type(e.value).__name__}: {e.value}"
        assert not path.exists() or [p.name for p in path.iterdir() if p.name != "LOCK"] == []
        _unfill(small_disk)
