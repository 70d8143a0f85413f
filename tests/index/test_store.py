"""Storage: round trip, atomic replacement, and rejection of corrupt or foreign directories."""
import errno
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from contextrag import ContextRAG
from contextrag.index import store
from contextrag.index.store import IndexFormatError


def _assert_same_index(a, b):
    assert a.chunk_ids == b.chunk_ids and a.chunk_texts == b.chunk_texts
    assert a.chunk_doc_ids == b.chunk_doc_ids and a.chunk_titles == b.chunk_titles
    assert a.item_ids == b.item_ids and a.item_texts == b.item_texts
    assert a.docs == b.docs
    for f in ("chunk_positions", "chunk_spans", "chunk_fitted", "embeddings", "attr_centroids",
              "item_kinds", "item_node"):
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    for f in ("item_members", "item_sources"):
        assert (getattr(a, f) != getattr(b, f)).nnz == 0, f
    ga, gb = a.graph, b.graph
    for f in ("kind", "parents", "attr", "intent", "score", "edge_src", "edge_dst", "edge_kind", "edge_weight"):
        np.testing.assert_array_equal(getattr(ga, f), getattr(gb, f), err_msg=f)
    assert (ga.members != gb.members).nnz == 0
    np.testing.assert_array_equal(a.context.dense(), b.context.dense())
    assert a.context.attr_names == b.context.attr_names
    np.testing.assert_array_equal(a.context.attr_group, b.context.attr_group)
    for ca, cb in zip(a.codebooks, b.codebooks):
        np.testing.assert_array_equal(ca, cb)
    np.testing.assert_array_equal(a.codes, b.codes)
    q = a.chunk_texts[3][:60]
    np.testing.assert_allclose(a.bm25_scores(q), b.bm25_scores(q), rtol=1e-6)
    assert a.config == b.config


def test_round_trip_equal(base, embedder, tmp_path):
    ix = base.index
    store.save(ix, tmp_path / "copy")
    again = store.load(tmp_path / "copy", embedder=embedder)
    _assert_same_index(ix, again)
    m = json.loads((store.snapshot_dir(tmp_path / "copy") / "manifest.json").read_text())
    assert m["format"] == "contextrag-index" and m["embedding"]["dim"] == 384
    assert m["counts"]["chunks"] == ix.n_chunks
    assert all(set(v) == {"xxh3_128", "bytes"} and len(v["xxh3_128"]) == 32 for v in m["files"].values())
    # no pickle anywhere: every stored .npy loads with allow_pickle=False
    for p in store.snapshot_dir(tmp_path / "copy").rglob("*.npy"):
        np.load(p, allow_pickle=False)


def test_snapshot_written_direct_equals_page_cache_write(base, embedder, tmp_path, monkeypatch):
    """Every safetensors file of a snapshot written with O_DIRECT has the checksum and size of the
    page-cache write, and the snapshot loads to the same index."""
    sums = {}
    for mode in ("0", "1"):
        monkeypatch.setenv("CONTEXTRAG_DIRECT_IO", mode)
        store.save(base.index, tmp_path / mode)
        m = json.loads((store.snapshot_dir(tmp_path / mode) / "manifest.json").read_text())
        sums[mode] = {k: v for k, v in m["files"].items() if k.endswith(".safetensors")}
    assert len(sums["1"]) >= 4 and sums["1"] == sums["0"]
    _assert_same_index(base.index, store.load(tmp_path / "1", embedder=embedder))


def test_failed_write_leaves_previous_index(fresh, embedder, monkeypatch):
    path = fresh.path
    before = store.load(path, embedder=embedder)
    entries_before = sorted(os.listdir(path))

    def boom(ix, p):
        p.write_bytes(b"half a database")
        raise RuntimeError("disk on fire")
    monkeypatch.setattr(store, "_write_sqlite", boom)
    with pytest.raises(RuntimeError, match="disk on fire"):
        fresh.add([{"id": "new1", "text": "A brand new paragraph about the Zyxwv river in Quorlandia."}])
    after = store.load(path, embedder=embedder)
    _assert_same_index(before, after)
    assert sorted(os.listdir(path)) == entries_before  # the temporary directory was removed


def test_failed_build_over_existing_index_keeps_it(fresh, hotpot_paragraphs, embedder, small_config,
                                                  monkeypatch):
    path = fresh.path
    before = store.load(path, embedder=embedder)

    def boom(*a, **k):
        raise OSError("no space left on device")
    monkeypatch.setattr(store, "save_file", boom, raising=False)
    monkeypatch.setattr(store, "write_safetensors", boom)     # the snapshot's arrays are streamed by it
    import safetensors.numpy
    monkeypatch.setattr(safetensors.numpy, "save_file", boom)
    with pytest.raises(OSError, match="no space"):
        ContextRAG.build(hotpot_paragraphs[:20], path=path, config=small_config.replace(rq_sizes=(4, 2)),
                         embedder=embedder)
    _assert_same_index(before, store.load(path, embedder=embedder))
    assert not [p for p in os.listdir(path) if p.startswith(".tmp-")]


def test_killed_save_leaves_a_loadable_index(fresh, tmp_path):
    """Kill -9 a process in the middle of repeated saves; the index must load every time."""
    code = textwrap.dedent(f"""
        import sys
        from contextrag.index import store
        ix = store.load({fresh.path!r})
        print("ready", flush=True)
        while True:
            store.save(ix, {fresh.path!r})
    """)
    for delay in (0.05, 0.3, 0.9):
        p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        try:
            assert p.stdout.readline().strip() == "ready"
            import time
            time.sleep(delay)
        finally:
            p.kill()
            p.wait()
        ix = store.load(fresh.path)
        assert ix.n_chunks == fresh.index.n_chunks


def test_old_snapshots_and_leftovers_are_removed_after_a_save(fresh, tmp_path):
    """A save renames the snapshot it replaces and any leftovers (of killed saves, of removals a
    killed process left half done) out of the way and removes them in a thread: once it is done, the
    live snapshot and CURRENT are all that is left."""
    root = Path(fresh.path)
    before = store.current_snapshot(root)
    (root / ".tmp-deadbeef").mkdir()
    (root / ".tmp-deadbeef" / "arrays.safetensors").write_bytes(b"x" * 100)
    (root / ".old-0badcafe").mkdir()
    (root / ".old-0badcafe" / "manifest.json").write_text("{}")
    (root / ".CURRENT-12345678").write_text("snap-1-00000000\n")
    snap = store.save(fresh.index, root)
    assert snap.name != before and store.current_snapshot(root) == snap.name
    assert not (root / before).exists()                          # renamed away at once
    store.wait_removals()
    assert sorted(p.name for p in root.iterdir() if p.name != "LOCK") == sorted([snap.name, "CURRENT"])
    assert store.load(root).n_chunks == fresh.index.n_chunks


def _snap(path):
    return store.snapshot_dir(path)


def test_corrupt_manifest_rejected(fresh):
    m = _snap(fresh.path) / "manifest.json"
    m.write_text(m.read_text()[:100])
    with pytest.raises(IndexFormatError, match="corrupt"):
        store.load(fresh.path)


def test_truncated_arrays_rejected(fresh):
    a = _snap(fresh.path) / "arrays.safetensors"
    data = a.read_bytes()
    a.write_bytes(data[: len(data) // 2])
    with pytest.raises(IndexFormatError, match="truncated"):
        store.load(fresh.path)


def test_checksum_mismatch_rejected(fresh):
    a = _snap(fresh.path) / "arrays.safetensors"
    data = bytearray(a.read_bytes())
    data[-5] ^= 0xFF
    a.write_bytes(bytes(data))
    with pytest.raises(IndexFormatError, match="checksum"):
        store.load(fresh.path)


def test_missing_file_rejected(fresh):
    os.remove(_snap(fresh.path) / "meta.sqlite")
    with pytest.raises(IndexFormatError, match="missing"):
        store.load(fresh.path)


def test_foreign_and_newer_directories_rejected(fresh, tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("hello")
    with pytest.raises(IndexFormatError, match="not a contextrag index"):
        store.load(foreign)
    with pytest.raises(ValueError, match="not a contextrag index"):
        store.save(fresh.index, foreign)        # refuses to write into someone else's folder
    assert os.listdir(foreign) == ["notes.txt"]
    with pytest.raises(FileNotFoundError):
        store.load(tmp_path / "nothing-here")
    (foreign / "manifest.json").write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(IndexFormatError, match="not a contextrag index manifest"):
        store.load(foreign)
    m = _snap(fresh.path) / "manifest.json"
    d = json.loads(m.read_text())
    d["format_version"] = store.FORMAT_VERSION + 1
    m.write_text(json.dumps(d))
    with pytest.raises(IndexFormatError, match="newer contextrag"):
        store.load(fresh.path)


def test_bad_current_pointer_rejected(fresh):
    (fresh.path and open(os.path.join(fresh.path, "CURRENT"), "w")).write("../../etc\n")
    with pytest.raises(IndexFormatError, match="CURRENT"):
        store.load(fresh.path)


def test_snapshot_copied_elsewhere_loads(fresh, tmp_path):
    dst = tmp_path / "snapcopy"
    shutil.copytree(_snap(fresh.path), dst)
    ix = store.load(dst)
    assert ix.n_chunks == fresh.index.n_chunks
    assert sp.issparse(ix.item_members)


def test_manifest_covers_its_own_bytes(fresh, embedder):
    m = _snap(fresh.path) / "manifest.json"
    body = m.read_text()
    d = json.loads(body)
    assert len(d["manifest_sha256"]) == 64
    m.write_text(body.replace('"seed": 0', '"seed": 1', 1))       # still valid JSON, different config
    with pytest.raises(IndexFormatError, match="own checksum"):
        store.load(fresh.path)
    m.write_text(body.replace("\n", "\r\n", 1))                    # even whitespace counts
    with pytest.raises(IndexFormatError, match="own checksum"):
        store.load(fresh.path)
    # an index written before the self-checksum (format version 1) still loads
    d.pop("manifest_sha256")
    d["format_version"] = 1
    m.write_text(json.dumps(d, indent=2))
    assert store.load(fresh.path, embedder=embedder).n_chunks == fresh.index.n_chunks


def test_current_must_name_one_snapshot_exactly(fresh):
    cur = os.path.join(fresh.path, "CURRENT")
    name = open(cur).read()
    for bad in (name.strip(), name + "\n", " " + name, name.strip() + "\x0b\n"):
        with open(cur, "w") as f:
            f.write(bad)
        with pytest.raises(IndexFormatError, match="CURRENT"):
            store.load(fresh.path)


def test_writer_lock_arguments_and_location(fresh, tmp_path):
    with pytest.raises(ValueError, match="lock timeout"):
        with store.writer_lock(fresh.path, timeout=-1):
            pass
    with store.writer_lock(tmp_path / "new-index") as root:       # a new directory may be locked
        assert (root / "LOCK").is_file()
    store.save(fresh.index, tmp_path / "new-index")               # a directory holding only LOCK is writable
    assert store.current_snapshot(tmp_path / "new-index").startswith("snap-")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="not a contextrag index"):
        with store.writer_lock(foreign):
            pass
    assert os.listdir(foreign) == ["notes.txt"]


def test_streamed_safetensors_load_and_hash(tmp_path):
    """store.write_safetensors writes what safetensors reads (odd shapes, empty arrays, every dtype),
    hashes exactly the file's bytes, and aligns every array so a memory map gives views, not copies."""
    from safetensors.numpy import load_file
    rng = np.random.default_rng(0)
    arrays = {"f64": rng.random((3, 5)), "i8": np.arange(-3, 4, dtype=np.int8), "empty": np.zeros((0, 4), np.float32),
              "u8": rng.integers(0, 255, 13).astype(np.uint8), "f32": rng.random(7).astype(np.float32),
              "i64": np.arange(11, dtype=np.int64), "i32": np.arange(9, dtype=np.int32)[::2],   # not contiguous
              "f16": np.ones(3, np.float16), "u32": np.arange(5, dtype=np.uint32), "b": np.array([True, False])}
    p = tmp_path / "x.safetensors"
    entry = store.write_safetensors(p, arrays, {"version": 3})
    assert entry == {store._FILE_SUM: store.file_sum(p), "bytes": p.stat().st_size}
    import xxhash
    assert entry[store._FILE_SUM] == xxhash.xxh3_128(p.read_bytes()).hexdigest()
    back = load_file(str(p))
    assert set(back) == set(arrays)
    for k, v in arrays.items():
        np.testing.assert_array_equal(back[k], v, err_msg=k)
    mapped = store.map_arrays(p)
    for k, v in mapped.items():
        np.testing.assert_array_equal(v, arrays[k], err_msg=k)
        assert v.size == 0 or not v.flags.owndata, k            # a view of the map: aligned
    with pytest.raises(TypeError, match="dtype"):
        store.write_safetensors(tmp_path / "y", {"c": np.zeros(2, np.complex64)})


def _direct_allowed(d) -> bool:
    """Whether d's file system takes O_DIRECT writes (tmpfs before Linux 6.6 does not)."""
    if not hasattr(os, "O_DIRECT"):
        return False
    try:
        fd = os.open(d / "probe", os.O_WRONLY | os.O_CREAT | os.O_DIRECT, 0o644)
    except OSError:
        return False
    os.close(fd)
    os.unlink(d / "probe")
    return True


needs_direct = pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT on this platform")


def _odd_arrays():
    rng = np.random.default_rng(1)
    return {"f32": rng.random((1001, 7), dtype=np.float32), "i64": rng.integers(-9, 9, 4099),
            "u8": rng.integers(0, 255, 8191).astype(np.uint8), "empty": np.zeros((0, 3), np.int32),
            "i32": np.arange(4097, dtype=np.int32)[::3]}


@pytest.fixture
def direct_sinks(monkeypatch):
    """The paths the direct writer opened, in order (it is otherwise the real one)."""
    made = []

    class Spy(store._DirectSink):
        def __init__(self, path):
            made.append(path)
            super().__init__(path)
    monkeypatch.setattr(store, "_DirectSink", Spy)
    return made


@needs_direct
@pytest.mark.parametrize("buf", [4096, 8192, 1 << 23])
def test_direct_writes_equal_buffered(tmp_path, monkeypatch, direct_sinks, buf):
    """Written with O_DIRECT (staged in aligned blocks; arrays crossing the staging buffer, a last block
    padded then truncated) the file is byte for byte the page-cache write, with the same entry."""
    arrays = _odd_arrays()
    monkeypatch.setattr(store, "_DIRECT_BUF", buf)
    monkeypatch.setenv("CONTEXTRAG_DIRECT_IO", "0")
    e0 = store.write_safetensors(tmp_path / "page.st", arrays, {"v": 1})
    assert direct_sinks == []
    monkeypatch.setenv("CONTEXTRAG_DIRECT_IO", "1")
    e1 = store.write_safetensors(tmp_path / "direct.st", arrays, {"v": 1})
    assert direct_sinks == [tmp_path / "direct.st"]
    assert (tmp_path / "direct.st").read_bytes() == (tmp_path / "page.st").read_bytes()
    assert e1 == e0 == {store._FILE_SUM: store.file_sum(tmp_path / "direct.st"), "bytes": e0["bytes"]}
    for k, v in store.map_arrays(tmp_path / "direct.st").items():
        np.testing.assert_array_equal(v, arrays[k], err_msg=k)


@needs_direct
def test_direct_write_size_threshold(tmp_path, monkeypatch, direct_sinks):
    """``auto`` (the default) writes only large files with O_DIRECT."""
    monkeypatch.delenv("CONTEXTRAG_DIRECT_IO", raising=False)
    store.write_safetensors(tmp_path / "small.st", _odd_arrays())
    assert direct_sinks == []
    monkeypatch.setattr(store, "_DIRECT_MIN", 1024)
    store.write_safetensors(tmp_path / "large.st", _odd_arrays())
    assert direct_sinks == [tmp_path / "large.st"]
    assert (tmp_path / "large.st").read_bytes() == (tmp_path / "small.st").read_bytes()


@pytest.mark.parametrize("where", ["open", "write"])
def test_direct_refused_falls_back_to_the_page_cache(tmp_path, monkeypatch, where):
    """A file system that refuses O_DIRECT (EINVAL at open, or at the first write) gets the same file
    through the page cache; any other error is the caller's, with no descriptor left open."""
    arrays = _odd_arrays()
    monkeypatch.setenv("CONTEXTRAG_DIRECT_IO", "0")
    ref = store.write_safetensors(tmp_path / "ref.st", arrays)
    real_open, real_pwrite = os.open, os.pwrite

    def fake_open(path, flags, *a, **k):
        if where == "open" and flags & getattr(os, "O_DIRECT", 0):
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_open(path, flags, *a, **k)

    def fake_pwrite(fd, data, off):
        if where == "write":
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwrite(fd, data, off)
    monkeypatch.setattr(os, "open", fake_open)
    monkeypatch.setattr(os, "pwrite", fake_pwrite)
    monkeypatch.setenv("CONTEXTRAG_DIRECT_IO", "1")
    assert store.write_safetensors(tmp_path / "x.st", arrays) == ref
    assert (tmp_path / "x.st").read_bytes() == (tmp_path / "ref.st").read_bytes()


@needs_direct
def test_direct_write_errors_propagate(tmp_path, monkeypatch):
    calls = []

    def full(fd, data, off):
        calls.append(fd)
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "pwrite", full)
    monkeypatch.setattr(store, "_DIRECT_BUF", 4096)
    monkeypatch.setenv("CONTEXTRAG_DIRECT_IO", "1")
    if not _direct_allowed(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    with pytest.raises(OSError) as e:
        store.write_safetensors(tmp_path / "x.st", _odd_arrays())
    assert e.value.errno == errno.ENOSPC and calls
    with pytest.raises(OSError):
        os.fstat(calls[0])                          # closed


def test_direct_io_setting_is_checked(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTEXTRAG_DIRECT_IO", "yes")
    with pytest.raises(ValueError, match="CONTEXTRAG_DIRECT_IO must be 'auto', '0' or '1'"):
        store.write_safetensors(tmp_path / "x.st", _odd_arrays())


@needs_direct
def test_short_direct_writes_go_on(tmp_path, monkeypatch):
    """A direct write that stops short (as near a full disk) is continued from where it stopped."""
    if not _direct_allowed(tmp_path):
        pytest.skip("this file system refuses O_DIRECT")
    real = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, data, off: real(fd, memoryview(data)[:4096], off))
    monkeypatch.setattr(store, "_DIRECT_BUF", 16384)
    monkeypatch.setenv("CONTEXTRAG_DIRECT_IO", "1")
    arrays = _odd_arrays()
    e = store.write_safetensors(tmp_path / "x.st", arrays)
    assert e == {store._FILE_SUM: store.file_sum(tmp_path / "x.st"), "bytes": (tmp_path / "x.st").stat().st_size}
    for k, v in store.map_arrays(tmp_path / "x.st").items():
        np.testing.assert_array_equal(v, arrays[k], err_msg=k)
