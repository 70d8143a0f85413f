"""An index write turns NumPy's huge-page advice off where the kernel follows it, and puts it back
as it was (contextrag.index.hugepages)."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from contextrag.index import hugepages as hp

N_BASE = 160  # = conftest.N_BASE (test modules here are not a package)


@pytest.mark.parametrize("text, mode", [
    ("always defer defer+madvise [madvise] never\n", "madvise"),
    ("always [defer+madvise] madvise never", "defer+madvise"),
    ("[always] madvise never", "always"),
    ("always madvise never", None),
    ("", None),
])
def test_mode_reads_the_selected_choice(text, mode):
    assert hp._mode(text) == mode


@pytest.mark.parametrize("enabled, followed", [
    ("always [madvise] never", True),
    ("always [madvise] never\n", True),
    ("[always] madvise never", False),     # huge pages whatever the advice
    ("always madvise [never]", False),     # none whatever the advice
    ("", False),
])
def test_advice_followed_only_in_madvise_mode(enabled, followed):
    assert hp.advice_followed(enabled) is followed


def test_no_kernel_files_no_switch(monkeypatch):
    monkeypatch.setattr(hp, "_THP", "/nonexistent/transparent_hugepage")
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    assert hp.kernel_modes() == {"enabled": None, "defrag": None}
    assert hp.advice_followed() is False
    assert hp.wanted() is False


def test_kernel_modes_read_the_selected_choices(tmp_path, monkeypatch):
    (tmp_path / "enabled").write_text("always [madvise] never\n")
    (tmp_path / "defrag").write_text("always defer [defer+madvise] madvise never\n")
    monkeypatch.setattr(hp, "_THP", str(tmp_path))
    assert hp.kernel_modes() == {"enabled": "madvise", "defrag": "defer+madvise"}
    assert hp.advice_followed() is True


class Switch:
    """NumPy's switch as the module sees it: returns the previous setting, records every call."""

    def __init__(self, on: bool = True) -> None:
        self.on, self.calls = on, []

    def __call__(self, enabled: bool) -> bool:
        self.calls.append(enabled)
        prev, self.on = self.on, enabled
        return prev


@pytest.fixture
def switch(monkeypatch):
    s = Switch(True)
    monkeypatch.setattr(hp, "_setter", lambda: s)
    monkeypatch.setattr(hp, "advice_followed", lambda *a: True)
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    return s


def test_small_pages_turns_the_advice_off_and_back(switch):
    with hp.small_pages():
        assert switch.on is False
        with hp.small_pages():                 # nested: one switch
            assert switch.on is False
        assert switch.on is False
    assert switch.on is True and switch.calls == [False, True]


def test_small_pages_puts_back_what_was_there(switch):
    switch.on = False                          # the process had it off already: it stays off
    with hp.small_pages():
        assert switch.on is False
    assert switch.on is False


def test_small_pages_restores_after_an_error(switch):
    with pytest.raises(RuntimeError, match="boom"):
        with hp.small_pages():
            raise RuntimeError("boom")
    assert switch.on is True and hp._depth == 0


def test_small_pages_across_threads_restores_when_the_last_ends(switch):
    inside, leave = threading.Event(), threading.Event()

    def other():
        with hp.small_pages():
            inside.set()
            leave.wait(10)
    t = threading.Thread(target=other)
    t.start()
    assert inside.wait(10)
    with hp.small_pages():
        assert switch.on is False
    assert switch.on is False                  # the other thread is still inside
    leave.set()
    t.join(10)
    assert switch.on is True and switch.calls == [False, True]


def test_a_users_numpy_setting_is_left_alone(switch, monkeypatch):
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    with hp.small_pages():
        assert switch.on is True
    assert switch.calls == []


def test_the_real_numpy_switch_is_turned_off_and_back(monkeypatch):
    f = hp._setter()
    if f is None:
        pytest.skip("this NumPy has no huge-page switch")
    monkeypatch.setattr(hp, "advice_followed", lambda *a: True)
    monkeypatch.delenv("NUMPY_MADVISE_HUGEPAGE", raising=False)
    before = f(True)
    try:
        with hp.small_pages():
            assert f(False) is False           # it was off inside
            np.ones(1 << 20, np.float32).sum()
        assert f(True) is True                 # and on again after
    finally:
        f(before)


def test_updates_and_saves_run_without_the_advice(fresh, hotpot_paragraphs, switch, monkeypatch):
    from contextrag.index import store
    seen, real = [], store.save

    def save(*a, **k):
        seen.append(switch.on)
        return real(*a, **k)
    monkeypatch.setattr(store, "save", save)
    fresh.add(hotpot_paragraphs[N_BASE:N_BASE + 2])
    fresh.delete([hotpot_paragraphs[N_BASE]["id"]])
    assert seen == [False, False]
    assert switch.on is True and switch.calls == [False, True, False, True]


def test_a_build_keeps_the_advice_until_its_save(hotpot_paragraphs, embedder, small_config, switch, monkeypatch,
                                                 tmp_path):
    from contextrag import ContextRAG
    from contextrag.index import build, store
    seen = {}
    real_build, real_save = build.build_index, store.save

    def build_index(*a, **k):
        seen["stages"] = switch.on
        return real_build(*a, **k)

    def save(*a, **k):
        seen["save"] = switch.on
        return real_save(*a, **k)
    monkeypatch.setattr(build, "build_index", build_index)
    monkeypatch.setattr(store, "save", save)
    ContextRAG.build(hotpot_paragraphs[:40], path=tmp_path / "idx", config=small_config, embedder=embedder)
    assert seen == {"stages": True, "save": False}
    assert switch.on is True
