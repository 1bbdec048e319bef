"""GPU tests of the Python package (NOT run by CI). All of them, on 2+ GPUs, in one command (README, "Python"):
    bash python/tests_gpu/run_device.sh .dev/py3/symmoe .dev/py3/include
or one by one after `pip install --no-build-isolation .`:
    python3 -m pytest -q python/tests_gpu                                               # one GPU
    torchrun --nproc-per-node 2 python/tests_gpu/ep_torchrun_check.py --dtypes bf16,fp8  # two processes, two GPUs
    torchrun --nproc-per-node 2 python/tests_gpu/ep_graph_timing.py                      # graph capture + timing
    torchrun --nproc-per-node 2 python/tests_gpu/mega_torchrun_check.py [--shape flash]  # fused layer
    torchrun --nproc-per-node 2 python/tests_gpu/deep_ep_style.py                        # import symmoe as deep_ep
    bash python/tests_gpu/run_deepep_test.sh     # DeepEP's own tests/elastic/test_ep.py, unmodified (carry .dev/deepep)
    bash python/tests_gpu/run_torch_ext.sh       # libtorch extension symmoe._torch_ep: build, tests, timing
Last run: nvidia-h200-x2, 2026-11-30, all passed (117 pytest, every torchrun script).
"""
import pytest

torch = pytest.importorskip("torch")


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        skip = pytest.mark.skip(reason="needs a Hopper GPU (sm_90)")
        for item in items:
            item.add_marker(skip)
