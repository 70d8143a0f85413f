"""Pieces of an index update run side by side on two threads.

An update's graph side (context rows, nodes, centroids), its word side (stored words, lexical
families) and BM25's postings read and write different fields of the index, as do the spreading incidence's
rows and its columns when a save prepares them. Their large copies and sparse conversions
release the GIL, so on two cores they overlap: each side is seconds at a million chunks
(docs/SCALING.md). Each side computes what it computes alone, so the result is the same bits as
running them one after the other (tested). The stages' seconds an update reports (``timings``) are
then each side's own, and overlap: their sum is more than the update's wall time.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, wait
from typing import Callable, TypeVar

A = TypeVar("A")
B = TypeVar("B")


def two_lanes(here: Callable[[], A], there: Callable[[], B]) -> tuple[A, B]:
    """(here(), there()) side by side (:func:`lanes`); an error in either is raised once both have
    stopped (``here``'s first)."""
    a, b = lanes(here, there)
    return a, b  # type: ignore[return-value]


def lanes(*tasks: Callable[[], object], workers: int = 2) -> list:
    """[task() for task in tasks], run on ``workers`` threads: each task starts, in the order given,
    as soon as a thread is free, so a short third piece fills whichever lane ends first (which one
    does depends on the machine's memory more than on the code). An error in any is raised once all
    have stopped (the first failed task's, in the order given)."""
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="contextrag-update") as pool:
        futs = [pool.submit(t) for t in tasks]
        wait(futs)
        return [f.result() for f in futs]
