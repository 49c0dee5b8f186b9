"""One test module at the XLA settings users get (tests/conftest.py: `JAXCONTACT_TEST_XLA`).

The suite compiles with XLA's fast-compile flags (`conftest.FAST_COMPILE`: no fusion
emitters, LLVM at -O0), which users never run. Here a fresh process runs MODULE, a module of
the solvers' driver that compiles in seconds and checks rounding-sensitive outcomes
(convergence judged DOF by DOF within a few ulps, a solve stopped by rounding, the scan and the
while loop agreeing), with those flags left out: the code XLA optimizes and fuses for users
passes the same checks.
"""

import os
import pathlib
import subprocess
import sys

from tests.conftest import FAST_COMPILE

ROOT = pathlib.Path(__file__).resolve().parent.parent
MODULE = "tests/solvers/test_base.py"


def _user_flags(flags):
    """XLA_FLAGS without the suite's fast-compile flags (whatever their values)."""
    return " ".join(f for f in flags.split() if f.split("=")[0] not in FAST_COMPILE)


def test_a_module_passes_at_the_xla_settings_users_get():
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTEST_", "JAXCONTACT_TEST_PROFILE"))}
    env.update(JAXCONTACT_TEST_XLA="user", XLA_FLAGS=_user_flags(env.get("XLA_FLAGS", "")))
    # the default verbosity (no -q) prints the conftest's header: the settings it ran at
    done = subprocess.run([sys.executable, "-m", "pytest", MODULE, "-o", "addopts=",
                           "-p", "no:cacheprovider", "-m", "not slow"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    header = next(line for line in out.splitlines() if line.startswith("XLA settings:"))
    assert header.startswith("XLA settings: user"), header
    assert not any(flag in header for flag in FAST_COMPILE), header
    assert " passed" in out and " failed" not in out, out[-2000:]
