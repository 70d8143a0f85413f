"""The lexical weights count the index's distinct text (index/distinct.py): a chunk every sentence of
which an earlier chunk holds adds to neither N nor any df, through build, add, delete and load."""
from __future__ import annotations

import numpy as np

from contextrag.index.distinct import ChunkSentences

N_BASE = 160  # = conftest.N_BASE (test modules here are not a package)


def _weights(ix) -> dict:
    return {name: dict(zip(f.attributes, f.weight.tolist())) for name, f in ix.lexical.families.items()}


def test_first_holders_of_sentences(hotpot_paragraphs):
    a, b, c, d = (p["text"].split(". ")[0] + "." for p in hotpot_paragraphs[:4])
    texts = [f"{a} {b}", c, f"{b}  {a}", f"{d} {a}", "", "– –"]
    cs = ChunkSentences.of_texts(texts)
    assert cs.n_chunks == 6 and cs.indptr.tolist() == [0, 2, 3, 5, 7, 7, 7]
    # the third repeats the first's sentences (whitespace aside); the last two hold no sentence
    assert cs.new_text().tolist() == [True, True, False, True, False, False]
    # without the first chunk the third is the first holder of its sentences
    kept = cs.kept(np.array([1, 2, 3, 4, 5]))
    assert kept.new_text().tolist() == [True, True, True, False, False]
    np.testing.assert_array_equal(kept.hashes, ChunkSentences.of_texts(texts[1:]).hashes)
    both = ChunkSentences.of_texts(texts[:2]).appended(texts[2:])
    np.testing.assert_array_equal(both.indptr, cs.indptr)
    np.testing.assert_array_equal(both.hashes, cs.hashes)
    assert ChunkSentences.of_texts([]).new_text().shape == (0,)


def test_a_document_ingested_twice_moves_no_weight(fresh, hotpot_paragraphs):
    """Adding a copy of a document (another id, the same title and text) leaves every weight as it
    was; counting every chunk would move them all (N grows). Deleting the original hands its
    sentences to the copy: the weights are still those of the corpus before."""
    ix = fresh.index
    before, n_before = _weights(ix), ix.lexical.distinct
    src = hotpot_paragraphs[5]
    fresh.add([dict(src, id="copy-of-p5")])
    ix = fresh.index
    assert ix.lexical.distinct == n_before and ix.n_chunks > len(ix.chunk_sentences.new_text().nonzero()[0])
    assert _weights(ix) == before
    from contextrag.index.lexical.families import lexical_families
    every = lexical_families(ix.chunk_titles, ix.chunk_texts, list(ix.lexical.families), stemmer=ix.config.stemmer)
    assert any(not np.allclose(every.families[n].weight, ix.lexical.families[n].weight) for n in every.families)
    fresh.delete([src["id"]])
    assert fresh.index.lexical.distinct == n_before
    assert _weights(fresh.index) == before
    from contextrag import ContextRAG
    again = ContextRAG.load(fresh.path, embedder=fresh.index.embedder)
    assert again.index.lexical.distinct == n_before and _weights(again.index) == before


def test_an_add_hashes_only_the_new_text(fresh, hotpot_paragraphs, monkeypatch):
    from contextrag.index import distinct
    seen = []
    real = distinct.split
    monkeypatch.setattr(distinct, "split", lambda text: seen.append(text) or real(text))
    new = hotpot_paragraphs[N_BASE:N_BASE + 3]
    n_old = fresh.index.n_chunks
    fresh.add(new)
    assert seen == list(fresh.index.chunk_texts[n_old:])
    seen.clear()
    fresh.delete([new[0]["id"]])
    assert seen == []


def test_an_index_without_sentence_hashes_gets_them_on_its_first_update(fresh, hotpot_paragraphs, caplog):
    """A snapshot written before the hashes were stored loads with the weights it has (every chunk
    counted); its first update hashes its chunks once (logged) and leaves what a build of the new
    corpus leaves."""
    import logging

    from contextrag import ContextRAG
    from contextrag.index.lexical.families import idf_weight
    ix = fresh.index
    ix.chunk_sentences = None
    ix.lexical.distinct = None
    for f in ix.lexical.families.values():
        f.weight = idf_weight(f.df, ix.n_chunks).astype(np.float32)
    fresh.save()
    rag = ContextRAG.load(fresh.path, embedder=ix.embedder)
    assert rag.index.chunk_sentences is None and rag.index.lexical.distinct is None
    for f in rag.index.lexical.families.values():
        np.testing.assert_allclose(f.weight, idf_weight(f.df, rag.index.n_chunks), rtol=1e-6)
    with caplog.at_level(logging.WARNING, logger="contextrag"):
        rag.add(hotpot_paragraphs[N_BASE:N_BASE + 2])
    assert "no sentence hashes" in caplog.text
    ix = rag.index
    fresh_hashes = ChunkSentences.of_texts(ix.chunk_texts)
    np.testing.assert_array_equal(ix.chunk_sentences.hashes, fresh_hashes.hashes)
    assert ix.lexical.distinct == fresh_hashes.new_text().sum() < ix.n_chunks
    from contextrag.index.lexical.families import counted_over, lexical_families
    ref = counted_over(lexical_families(ix.chunk_titles, ix.chunk_texts, list(ix.lexical.families),
                                        stemmer=ix.config.stemmer), fresh_hashes.new_text())
    for name, f in ref.families.items():
        g = ix.lexical.families[name]
        np.testing.assert_array_equal(g.weight, f.weight[[f.vocab[a] for a in g.attributes]])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="contextrag"):
        rag.delete([hotpot_paragraphs[N_BASE]["id"]])
    assert "no sentence hashes" not in caplog.text
    assert ContextRAG.load(fresh.path, embedder=ix.embedder).index.chunk_sentences.n_chunks == rag.index.n_chunks
