"""The tests of the kgate Python package. They need the kgate binary
(KGATE_BIN, kgate on PATH, or the build tree's build/tools/kgate) and NumPy;
the torch tests skip, saying so, where torch is not installed."""

import sys

# Keep bytecode out of the source tree even when PYTHONDONTWRITEBYTECODE is unset.
sys.dont_write_bytecode = True

pytest_plugins = ["pytester", "kgate.pytest_plugin"]
