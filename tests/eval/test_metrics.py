"""Metrics against hand-checked cases."""
import pytest

from contextrag.eval import metrics as M


@pytest.mark.parametrize("raw, norm", [
    ("The Eiffel Tower!", "eiffel tower"),
    ("  an  apple,   a pear ", "apple pear"),
    ("Théâtre   du Soleil.", "théâtre du soleil"),
    ("U.S.A.", "usa"),
    ("the", ""),
    ("There", "there"),          # 'the' inside a word is not an article
])
def test_normalize(raw, norm):
    assert M.normalize_answer(raw) == norm


def test_exact_match_and_aliases():
    assert M.exact_match("the Beatles", "Beatles") == 1.0
    assert M.exact_match("Beatles band", "Beatles") == 0.0
    assert M.exact_match("NYC", ["New York City", "NYC"]) == 1.0
    assert M.exact_match("1755.", ["1755"]) == 1.0


def test_token_f1_hand_checked():
    # pred "barack obama president" vs gold "barack obama": P=2/3, R=1 -> F1 = 0.8
    assert M.token_f1("Barack Obama, president", "Barack Obama") == pytest.approx(0.8)
    # repeated tokens count by multiplicity: pred "paris paris" vs "paris": P=1/2, R=1 -> 2/3
    assert M.token_f1("Paris Paris", "Paris") == pytest.approx(2 / 3)
    assert M.token_f1("London", "Paris") == 0.0
    # best over aliases: 'New York' vs ['Big Apple', 'New York City'] -> P=1, R=2/3 -> 0.8
    assert M.token_f1("New York", ["Big Apple", "New York City"]) == pytest.approx(0.8)
    # articles and punctuation vanish before counting
    assert M.token_f1("The  U.K.", "uk") == 1.0


def test_yes_no_get_no_partial_credit():
    assert M.token_f1("yes", "no") == 0.0
    assert M.token_f1("no it is not", "no") == 0.0      # gold 'no' needs exactly 'no'
    assert M.token_f1("no", "no") == 1.0
    assert M.exact_match("Yes.", "yes") == 1.0


def test_empty_answers():
    assert M.token_f1("", "Paris") == 0.0
    assert M.token_f1("the", "a") == 1.0                 # both normalise to nothing


def test_bad_answer_types():
    with pytest.raises(TypeError, match="answer"):
        M.exact_match(None, "x")
    with pytest.raises(TypeError, match="gold"):
        M.token_f1("x", [1, 2])
    with pytest.raises(ValueError, match="gold"):
        M.token_f1("x", [])


def H(doc, kind="chunk"):
    return {"doc_id": doc, "kind": kind}


def test_ranked_doc_ids_dedups_chunks_and_skips_virtual():
    hits = [H("a"), H("a"), H(None, "summary"), H("b"), H("x", "meet"), H("c"), H("b"), H("d", "join")]
    assert M.ranked_doc_ids(hits) == ["a", "b", "c"]


def test_recall_counts_documents_not_chunks():
    hits = [H("a"), H("a"), H("s", "bridge"), H("b"), H("c")]
    ranked = M.ranked_doc_ids(hits)
    # two chunks of 'a' take one document slot: the first 2 documents are a, b
    assert M.recall_at_k(ranked, ["b", "c"], 2) == 0.5
    assert M.recall_at_k(ranked, ["b", "c"], 3) == 1.0
    assert M.recall_at_k(ranked, ["a", "z"], 10) == 0.5
    assert M.recall_at_k(ranked, [], 5) is None
    assert M.complete_at_k(ranked, ["a", "b"], 2) == 1.0
    assert M.complete_at_k(ranked, ["a", "c"], 2) == 0.0


def test_strict_recall_charges_virtual_items_a_slot():
    hits = [H("s", "summary"), H("x", "meet"), H("a"), H("b")]
    assert M.recall_at_k(M.ranked_doc_ids(hits), ["a", "b"], 2) == 1.0
    assert M.strict_recall_at_k(hits, ["a", "b"], 2) == 0.0    # virtual doc ids never count
    assert M.strict_recall_at_k(hits, ["a", "b"], 3) == 0.5
    assert M.strict_recall_at_k(hits, ["x"], 4) == 0.0


def test_recall_rejects_bad_k():
    with pytest.raises(ValueError, match="k"):
        M.recall_at_k(["a"], ["a"], 0)
    with pytest.raises(ValueError, match="k"):
        M.recall_at_k(["a"], ["a"], True)


def test_percentile_matches_numpy():
    np = pytest.importorskip("numpy")
    v = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    for q in (0, 50, 95, 100):
        assert M.percentile(v, q) == pytest.approx(float(np.percentile(v, q)))
    assert M.percentile([], 50) is None
    with pytest.raises(ValueError, match="q"):
        M.percentile(v, 101)
