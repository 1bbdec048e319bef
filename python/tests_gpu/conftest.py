"""GPU tests of the Python package (NOT run by CI). All of them, on 2+ GPUs, in one command (README, "Python"):
    bash python/tests_gpu/run_device.sh .dev/pygpu/symmoe .dev/pygpu/include
or one by one after `pip install --no-build-isolation .`:
    python3 -m pytest -q python/tests_gpu                                               # one GPU
    torchrun --nproc-per-node 2 python/tests_gpu/ep_torchrun_check.py --dtypes bf16,fp8  # two processes, two GPUs
    torchrun --nproc-per-node 2 python/tests_gpu/ep_graph_timing.py                      # graph capture + timing
Last run: nvidia-h200-x2, 2026-11-29, all passed.
"""
import pytest

torch = pytest.importorskip("torch")


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        skip = pytest.mark.skip(reason="needs a Hopper GPU (sm_90)")
        for item in items:
            item.add_marker(skip)
