"""The package's version and its import discipline (CPU, no torch needed)."""
import re
import subprocess
import sys

import symmoe


def test_version_is_semver():
    assert re.fullmatch(r"\d+\.\d+\.\d+", symmoe.__version__), symmoe.__version__


def test_import_symmoe_does_not_import_torch():
    code = "import sys, symmoe; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
