"""The scale benchmark's ablation of the lexical weights' N and its count of where the top 5 comes from
(bench/bench_scale.py)."""
from __future__ import annotations

import importlib.util
import math
import sys

import numpy as np
import pytest

from shared_data import REPO


@pytest.fixture
def bs(monkeypatch):
    from contextrag.index.lexical import families, incremental
    monkeypatch.setattr(families, "idf_weight", families.idf_weight)       # put back after the test
    monkeypatch.setattr(incremental, "idf_weight", incremental.idf_weight)
    monkeypatch.setattr(sys, "path", list(sys.path))
    spec = importlib.util.spec_from_file_location("bench_scale", REPO / "bench" / "bench_scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, families, incremental


def test_weights_as_if_sets_the_n_of_every_family_builder(bs):
    mod, families, incremental = bs
    texts = ["Paris is a city.", "Paris in spring.", "Lyon is a city too.", "Nothing here.", "More text."]
    before = families.title_family(["Paris", "", "Lyon", "", ""], texts)
    mod.weights_as_if(1_000_000)
    assert incremental.idf_weight is families.idf_weight
    w = families.idf_weight(np.array([1, 5, 1000]), 5000)
    np.testing.assert_allclose(w, [1.0, math.log(2e5) / math.log(1e6), 0.5], rtol=1e-12)
    np.testing.assert_allclose(families.idf_weight(np.array([5]), 4_000_000),
                               [math.log(8e5) / math.log(4e6)], rtol=1e-12)    # a bigger N is kept
    after = families.title_family(["Paris", "", "Lyon", "", ""], texts)
    j = after.vocab["paris"]
    assert after.df[j] == before.df[j] == 2
    # the mention's degree (chunk 1 names Paris; chunk 0 is its page, degree 1)
    assert after.incidence[1, j] == pytest.approx(math.log(1e6 / 2) / math.log(1e6), rel=1e-6)
    assert before.incidence[1, j] == pytest.approx(math.log(5 / 2) / math.log(5), rel=1e-6)
    assert after.incidence[0, j] == before.incidence[0, j] == 1.0


def test_weights_as_if_none_changes_nothing(bs):
    mod, families, _ = bs
    real = families.idf_weight
    mod.weights_as_if(None)
    assert families.idf_weight is real


def test_others_top5_counts_the_non_gold_documents_by_source(bs):
    mod, _, _ = bs
    ranked = ["A", "rc:1", "B", "rc:7", "C", "rc:9"]
    assert mod._others_top5(ranked, ["B", "Z"]) == {"hotpotqa": 2, "recombined": 2}
    assert mod._others_top5([], ["B"]) == {"hotpotqa": 0, "recombined": 0}


@pytest.mark.parametrize("which", ["linking", "added"])
def test_weights_as_if_one_part_of_the_attributes(bs, which):
    mod, families, _ = bs
    real = families.idf_weight
    df = np.array([5, 1000])                  # at 5,000 chunks: 0.81 links (w > 1/2), 0.19 does not
    own, big = real(df, 5000), real(df, 1_000_000)
    mod.weights_as_if(1_000_000, which)
    got = families.idf_weight(df, 5000)
    want = [big[0], own[1]] if which == "linking" else [own[0], big[1]]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert own[0] > 0.5 >= own[1] and big[0] > own[0] and big[1] > own[1]


def test_weights_as_if_names_a_bad_part(bs):
    mod, families, _ = bs
    real = families.idf_weight
    with pytest.raises(ValueError, match="which must be one of"):
        mod.weights_as_if(1_000_000, "some")
    assert families.idf_weight is real


def test_weights_as_if_exact_is_a_fixed_unit_for_any_size(bs):
    mod, families, _ = bs
    real = families.idf_weight
    df = np.array([1, 5, 6000])
    mod.weights_as_if(5522, exact=True)
    for n_docs in (1000, 5522, 1_000_000):     # the same weights whatever the index holds
        np.testing.assert_allclose(families.idf_weight(df, n_docs), real(df, 5522), rtol=1e-12)
    assert families.idf_weight(df, 1_000_000)[2] == 0.0      # more chunks than the unit: clipped at 0


def test_set_values_take_the_type_the_config_field_wants(bs):
    mod, _, _ = bs
    conv = mod._number_or_text
    assert conv("1") == 1 and isinstance(conv("1"), int)      # spread_steps=1 (Config wants an int)
    assert conv("0.5") == 0.5 and conv("0") == 0
    assert conv("False") is False and conv("true") is True     # spread_entities=False
    assert conv("exhaustive") == "exhaustive"
    from contextrag import Config
    Config(spread_steps=conv("1"), spread_entities=conv("False"), w_spread=conv("0"), scoring=conv("exhaustive"))
