"""The query hook: Config.w_spread changes the eq. 13 ranking as specified."""
from __future__ import annotations

import weakref
import numpy as np
import pytest

from contextrag.config import Config
from contextrag.query._view import CorpusView
from contextrag.query.hybrid import score_all, top_indices

TITLES = ["Sergei Tokarev", "Moscow State University", "Moscow Conservatory", "Leningrad State University"]
TEXTS = [
    "Sergei Tokarev was a Soviet ethnographer and professor at Moscow State University.",
    "Moscow State University is a public research university founded in 1755 by Mikhail Lomonosov.",
    "The Moscow Conservatory is a music school founded in 1866 in Moscow.",
    "Leningrad State University is a university founded in 1724 where many professors taught.",
]
QUESTION = "In what year was the university where Sergei Tokarev was a professor founded?"
# lexical-only test corpus: fixed BM25 and cosine so that the second hop (MSU) ranks last flat
BM25 = np.array([10.0, 2.0, 3.0, 5.0], np.float32)
E = np.eye(4, dtype=np.float32)
QVEC = np.array([[0.9, 0.2, 0.3, 0.3]], np.float32)


class FakeIndex:
    """The two fields the hook reads from an index (chunk texts and titles)."""

    def __init__(self):
        self.chunk_texts, self.chunk_titles = TEXTS, TITLES


@pytest.fixture
def view():
    ix = FakeIndex()
    v = CorpusView(ids=[f"c{i}" for i in range(4)], texts=TEXTS, kinds=np.array(["chunk"] * 4, dtype=object),
                   doc_ids=[f"d{i}" for i in range(4)], E=E, embed=lambda qs: QVEC,
                   bm25_raw=lambda q: BM25, source=weakref.ref(ix))
    v._ix = ix        # keep the fake index alive for the weakref
    return v


def ranking(view, cfg, mask=None):
    parts = score_all(view, QUESTION, QVEC, cfg, mask)
    return [TITLES[i] for i in top_indices(parts["score"], 4)], parts


def test_flat_when_off(view):
    order, parts = ranking(view, Config(w_fuzzy=0.0, w_spread=0.0))
    assert order == ["Sergei Tokarev", "Leningrad State University", "Moscow Conservatory", "Moscow State University"]
    assert not parts["spread"].any()
    expected = 0.3 * BM25 / BM25.max() + 0.5 * (QVEC @ E.T)[0]
    assert parts["score"] == pytest.approx(expected)


def test_spreading_brings_the_second_hop_up(view):
    order, parts = ranking(view, Config(w_fuzzy=0.0))            # default w_spread = 1
    assert order[:2] == ["Sergei Tokarev", "Moscow State University"]
    h = 0.3 * BM25 / BM25.max() + 0.5 * (QVEC @ E.T)[0]
    assert parts["score"] == pytest.approx(h / h.max() + parts["spread"])
    assert parts["spread"][1] > parts["spread"][3]               # shares a title, not just terms


def test_doc_filter_limits_seeds_and_results(view):
    mask = np.array([False, True, True, True])
    order, parts = ranking(view, Config(w_fuzzy=0.0), mask)
    assert "Sergei Tokarev" not in order[:3]
    assert parts["spread"][0] == 0
    assert np.isneginf(parts["score"][0])


def test_paper_config_has_no_spreading():
    assert Config.paper().w_spread == 0.0 and Config().w_spread > 0
    assert Config.paper().family_weights == {"rq": 1.0}
    with pytest.raises(ValueError):
        Config(w_spread=-1.0)
    with pytest.raises(ValueError):
        Config(spread_families={"title": 2.0})
