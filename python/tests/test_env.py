"""SYMMOE_* knobs from Python: a misspelt name is named at import with the closest known one; a malformed value is
an error naming the variable (the planner reads the knobs through include/symmoe/env.hpp)."""
import os
import subprocess
import sys

import pytest

import symmoe


def run_python(code, **env):
    """`code` in a fresh interpreter with only the given SYMMOE_ variables (the caller's own, e.g. a device script's
    SYMMOE_SKIP_BUILD, are dropped: tests/scripts/check_script_knobs.py checks that those are known)."""
    full = {k: v for k, v in os.environ.items() if not k.startswith("SYMMOE_")}
    full.update(env)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=60)


def test_misspelt_knob_warns_at_import():
    r = run_python("import symmoe", SYMMOE_EP_SMSS="12")
    assert r.returncode == 0, r.stderr
    assert "unknown environment variable SYMMOE_EP_SMSS is ignored (did you mean SYMMOE_EP_SMS?)" in r.stderr


def test_known_knobs_do_not_warn():
    r = run_python("import symmoe", SYMMOE_EP_SMS="12", SYMMOE_GPU_KIND="nvidia-h200")
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr


def test_malformed_knob_value_names_the_variable(monkeypatch):
    monkeypatch.setenv("SYMMOE_BLOCK_M", "4294967312")
    with pytest.raises(symmoe.Error, match=r"SYMMOE_BLOCK_M must be an integer in \[0, 256\], got '4294967312'"):
        symmoe.plan("v3", ranks=8, tokens=128)
