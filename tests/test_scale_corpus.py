"""The benchmark corpus of any size (bench/scale_corpus.py): its recombined documents' title options."""
from __future__ import annotations

import importlib.util
import re

import pytest

from shared_data import REPO

NEEDS = ("hotpotqa_500.json", "multihoprag_small_corpus.json", "ultradomain_mix_contexts.json")


@pytest.fixture(scope="module")
def sc():
    spec = importlib.util.spec_from_file_location("scale_corpus", REPO / "bench" / "scale_corpus.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    try:
        d = mod.data_dir()
    except FileNotFoundError:
        pytest.skip("the shared data are not beside the repository")
    if not all((d / f).is_file() for f in NEEDS):
        pytest.skip("the shared data lack a corpus the recombination draws from")
    return mod, d


def test_titles_change_the_titles_only(sc):
    mod, d = sc
    n = 300
    pool, _ = mod.recombined(n, 3, d, titles="pool")
    own, _ = mod.recombined(n, 3, d, titles="own")
    none, _ = mod.recombined(n, 3, d, titles="none")
    assert [x["text"] for x in pool] == [x["text"] for x in own] == [x["text"] for x in none]
    assert [x["id"] for x in pool] == [x["id"] for x in own] == [x["id"] for x in none]
    assert all("title" not in x for x in none)
    # the pool's names: four documents each
    assert all(pool[i]["title"] == pool[i - i % 4]["title"] for i in range(n))
    assert len({x["title"] for x in pool}) == (n + 3) // 4
    # each document's own name: distinct, and (without its disambiguation) in its own text
    titles = [x["title"] for x in own]
    assert len(set(titles)) == n
    for x in own:
        name = re.sub(r" \(\d+\)$", "", x["title"])
        assert name in " ".join(x["text"].split()), (name, x["text"][:80])


def test_titles_must_be_a_known_option(sc):
    mod, d = sc
    with pytest.raises(ValueError, match="titles"):
        mod.recombined(10, 0, d, titles="random")
