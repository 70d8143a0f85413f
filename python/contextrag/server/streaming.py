"""Helpers of the streamed chat reply: word-sized pieces of a text, and a sync generator (the LLM's
stream blocks) turned into an async iterator fed from a worker thread."""
from __future__ import annotations

import asyncio
import threading


def pieces(text: str):
    """The reply in word-sized pieces (whitespace kept), as a token stream would send it."""
    word = ""
    for ch in text:
        word += ch
        if ch.isspace():
            yield word
            word = ""
    if word:
        yield word


def tail_pieces(tail: str):
    """The sources under a streamed reply, a line at a time."""
    for line in tail.splitlines(keepends=True):
        if line:
            yield line


async def aiter_list(items):
    for x in items:
        yield x


async def chain(first, rest):
    if first is not None:
        yield first
    async for x in rest:
        yield x


def thread_stream(make, executor=None):
    """An async iterator over the sync generator ``make()``, which runs in a worker thread (the LLM
    stream blocks; ``executor``: the pool to run it in, else a thread of its own); items pass through
    a queue as they come. Closing it early stops the generator."""
    loop = asyncio.get_running_loop()
    q: asyncio.Queue = asyncio.Queue()
    stop = threading.Event()
    done = object()

    def put(item):
        try:
            loop.call_soon_threadsafe(q.put_nowait, item)
        except RuntimeError:          # the loop has closed (server shut down): nobody is listening
            stop.set()

    def work():
        gen = None
        try:
            gen = make()
            for x in gen:
                put((True, x))
                if stop.is_set():
                    break
        except BaseException as e:  # noqa: BLE001 - re-raised in the event loop
            put((False, e))
        finally:
            if gen is not None:
                gen.close()
            put((True, done))

    async def items():
        if executor is None:
            threading.Thread(target=work, name="contextrag-answer-stream", daemon=True).start()
        else:
            executor.submit(work)
        try:
            while True:
                ok, x = await q.get()
                if not ok:
                    raise x
                if x is done:
                    return
                yield x
        finally:
            stop.set()

    return items()
