"""Waiting for the library's background threads in tests."""
from __future__ import annotations


def wait_for_threads(*names: str, timeout: float = 20.0) -> None:
    """Until no thread of these names runs or is being started. The server's writer starts its
    release thread after answering, so a release thread may still be starting when the request
    returns (``Thread.join`` refuses a thread not yet started)."""
    import threading
    import time
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        threads = [t for t in threading.enumerate() if t.name in names]
        if not threads:
            return
        for t in threads:
            try:
                t.join(0.05)
            except RuntimeError:                 # listed while still starting
                time.sleep(0.01)
    raise AssertionError(f"threads {names} still running after {timeout} s")
