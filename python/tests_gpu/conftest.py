"""GPU tests of the Python package (NOT run by CI; NOT YET RUN ON A GPU as of 2026-11-29).
Run on the GPU machine after building the package there (README, "Python"):
    PYTHONPATH=<build>/python python3 -m pytest -q python/tests_gpu
    torchrun --nproc-per-node 2 python/tests_gpu/ep_torchrun_check.py      # two processes, two GPUs
"""
import pytest

torch = pytest.importorskip("torch")


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        skip = pytest.mark.skip(reason="needs a Hopper GPU (sm_90)")
        for item in items:
            item.add_marker(skip)
