"""The layout core's C ABI from C: tests/c/layout_capi.c compiled with
``-Wall -Wextra -Werror`` against ``crates/patio-layout/include/patio_layout.h`` and the
release ``libpatio_layout.so`` (built by scripts/setup.sh), run, and its checks -
flattening against a hand-computed reference, a choice between an array and its
transposed replica, plans with every replica kind carried out as pieces (copy, source
selection, buffer destination, axis order, byte extents), and error codes for null
pointers, wrong ranks, selections outside the array, unsorted index sets, short
buffers, unknown presets, pieces out of range and stale plans - must all hold."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIB = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "libpatio_layout.so"


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_the_c_abi_from_a_c_program(tmp_path: Path) -> None:
    assert LIB.exists(), f"{LIB} missing: scripts/setup.sh builds it"
    exe = tmp_path / "layout_capi"
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror",
                    f"-I{ROOT / 'crates' / 'patio-layout' / 'include'}",
                    str(ROOT / "tests" / "c" / "layout_capi.c"), f"-L{LIB.parent}",
                    "-lpatio_layout", "-o", str(exe)], check=True)
    env = dict(os.environ, LD_LIBRARY_PATH=str(LIB.parent))
    r = subprocess.run([str(exe)], check=False, capture_output=True, text=True, env=env,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
