"""GPU-only tests: every test here is marked `gpu` and skips cleanly without a CUDA device."""
import pytest
import torch


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "/kernels/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(pytest.mark.gpu)
            if not torch.cuda.is_available():
                item.add_marker(pytest.mark.skip(reason="no CUDA device"))
