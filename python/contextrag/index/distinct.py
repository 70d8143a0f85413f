"""The index's distinct text: which chunks hold a sentence that no earlier chunk holds.

The lexical attributes' weight w(a) = log(N/df)/log(N) measures how rare an attribute is among the
chunks (docs/MULTIHOP.md). A corpus that repeats its text (a document ingested twice, syndicated news,
boilerplate, passages quoted across documents) counts every copy: N grows and so does the df of every
word of the repeated passages, and the weights then describe how often text was copied, not how rare
an attribute is in what the corpus says. So N and every df are counted over the chunks of new text
only: a chunk every sentence of which an earlier chunk already holds adds to neither. The incidence
itself is not changed (a repeated chunk still holds its attributes and is linked by them); only the
statistics the weights are computed from. A corpus without repeated sentences gets the weights it
had. Measured in docs/SCALING.md ("Statistics of the distinct text").

Each chunk's sentences (contextrag/sentences.py, stripped, whitespace runs as one space) are kept as
64-bit hashes (BLAKE2b), so an add hashes only the new chunks and a delete, which may hand a sentence
to a later holder, reads no text. Chunk order is the index's (a build's order, adds appended, a delete
keeping the order of the rest), so the result equals a fresh build of the same corpus.
"""
from __future__ import annotations

from dataclasses import dataclass
from hashlib import blake2b

import numpy as np

from ..sentences import split
from .layout import kept_rows


def _hash(sentence: str) -> int:
    return int.from_bytes(blake2b(" ".join(sentence.split()).encode("utf-8"), digest_size=8).digest(), "little")


@dataclass
class ChunkSentences:
    """Every chunk's sentence hashes, CSR-like: chunk i holds ``hashes[indptr[i]:indptr[i + 1]]``.
    Arrays may be memory-mapped (read-only): updates make new ones."""
    indptr: np.ndarray       # int64 (n + 1,)
    hashes: np.ndarray       # uint64

    @property
    def n_chunks(self) -> int:
        return int(self.indptr.size - 1)

    @classmethod
    def of_texts(cls, texts) -> "ChunkSentences":
        counts, flat = [], []
        for text in texts:
            hs = [_hash(s) for s in split(text)]
            counts.append(len(hs))
            flat += hs
        indptr = np.zeros(len(counts) + 1, np.int64)
        np.cumsum(counts, out=indptr[1:])
        return cls(indptr, np.asarray(flat, np.uint64).reshape(-1))

    def appended(self, texts) -> "ChunkSentences":
        """These chunks, then ``texts``'s (only the new texts are read)."""
        new = ChunkSentences.of_texts(texts)
        return ChunkSentences(np.concatenate([np.asarray(self.indptr, np.int64), self.indptr[-1] + new.indptr[1:]]),
                              np.concatenate([np.asarray(self.hashes, np.uint64), new.hashes]))

    def kept(self, keep: np.ndarray) -> "ChunkSentences":
        """The chunks ``keep`` (ascending), in their order."""
        indptr, hashes = kept_rows(np.asarray(self.indptr, np.int64), np.asarray(self.hashes), np.asarray(keep, np.int64))
        return ChunkSentences(indptr, hashes.astype(np.uint64, copy=False))

    def new_text(self) -> np.ndarray:
        """bool (n,): the chunk holds a sentence no earlier chunk holds (its first holder)."""
        out = np.zeros(self.n_chunks, bool)
        h = np.asarray(self.hashes)
        if h.size:
            _, first = np.unique(h, return_index=True)            # a sentence's first position, in chunk order
            out[np.searchsorted(self.indptr, first, side="right") - 1] = True
        return out


def distinct_rows(ix) -> np.ndarray | None:
    """bool (n,): ``ix``'s chunks of new text; None for an index without sentence hashes (one written
    before they were stored, until its first update: its statistics count every chunk)."""
    cs = getattr(ix, "chunk_sentences", None)
    if cs is None or cs.n_chunks != ix.n_chunks:
        return None
    return cs.new_text()
