"""The ``patio`` command on real Darshan DXT logs, run as a user would run it.

Checks ``patio analyze`` against what PyDarshan itself reports (stream and request
counts for every bundled log), the documented JSON shape, the plot, and the one-line
errors for damaged logs and for a Python environment that lacks patio's dependencies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import venv
from pathlib import Path
from typing import Any

import pytest
from patio._binary import patio_binary
from patio.dxt import read_dxt

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces"
LOGS = sorted(TRACES.glob("*.darshan")) if TRACES.is_dir() else []
KINDS = {"contiguous", "strided", "kd-strided", "repeating deltas", "irregular"}


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = dict(os.environ, PATIO_PYTHON=sys.executable)
    full_env.update(env or {})
    return subprocess.run(
        [patio_binary(), *args],
        check=False,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=600,
    )


def analyze_json(path: Path) -> dict[str, Any]:
    done = run("analyze", str(path), "--json")
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_the_shared_traces_are_present() -> None:
    assert LOGS, f"no Darshan logs under {TRACES}: the shared folder must sit beside the repo"


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_analyze_matches_pydarshan(log: Path) -> None:
    streams = read_dxt(log)
    report = analyze_json(log)
    assert len(report["streams"]) == len(streams)
    requests = sum(len(s.offset) for s in streams)
    totals = report["totals"]
    assert totals["requests"] == requests
    assert totals["raw_bytes"] == 16 * requests
    assert totals["encoded_bytes"] > 0
    for key in ("ratio", "zlib_ratio", "bz2_ratio", "xz_ratio", "xz9e_ratio", "delta_xz_ratio"):
        assert totals[key] > 0, key
    assert abs(totals["ratio"] - totals["raw_bytes"] / totals["encoded_bytes"]) < 1e-9
    # The stream set beats the best generic coder on every record layout, in the same run.
    assert totals["best_generic_ratio"] == max(totals["generic"].values())
    assert totals["best_generic"] in totals["generic"]
    assert len(totals["generic"]) == 32  # 4 coders × 8 layouts (records and columns)
    assert totals["ratio"] >= totals["best_generic_ratio"], totals["best_generic"]
    by_key = {(s.module, s.file, s.rank, s.op): len(s.offset) for s in streams}
    for row in report["streams"]:
        assert by_key[(row["module"], row["file"], row["rank"], row["op"])] == row["requests"]
        assert row["kind"] in KINDS
        assert 0.0 <= row["coverage"] <= 1.0
        assert row["signature"]


def test_rank_strided_log_is_recognised() -> None:
    # mpi-io-test: every rank writes and reads 16 MiB blocks at a 512 MiB stride.
    report = analyze_json(TRACES / "mpi_io_test_32ranks.darshan")
    mpiio = [s for s in report["streams"] if s["module"] == "MPIIO"]
    assert mpiio and all(s["kind"] == "strided" for s in mpiio)
    assert all("(536870912)^3" in s["signature"] for s in mpiio)
    # 32 ranks doing the same thing: the pattern encoding beats every generic compressor.
    t = report["totals"]
    assert t["ratio"] > max(t["zlib_ratio"], t["xz_ratio"], t["delta_xz_ratio"])


def test_plot_is_written(tmp_path: Path) -> None:
    out = tmp_path / "figs" / "mpi.png"
    out.parent.mkdir()
    done = run("analyze", str(TRACES / "mpi_io_test_32ranks.darshan"), "--plot", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000



def test_plot_into_a_missing_directory_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "x.png"
    done = run("analyze", str(TRACES / "mpi_io_test_32ranks.darshan"), "--plot", str(out))
    assert done.returncode == 2
    assert "no directory" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "missing").exists()

def test_damaged_log_is_a_one_line_error(tmp_path: Path) -> None:
    data = (TRACES / "ior_hdf5_4ranks.darshan").read_bytes()
    cut = tmp_path / "cut.darshan"
    cut.write_bytes(data[: len(data) // 2])
    done = run("analyze", str(cut))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "cut.darshan" in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("patio: error:"), done.stderr


def test_python_without_dependencies_is_a_clear_error(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    venv.create(bare, with_pip=False)
    done = run(
        "analyze",
        str(TRACES / "ior_hdf5_4ranks.darshan"),
        env={"PATIO_PYTHON": str(bare / "bin" / "python3"), "PYTHONPATH": ""},
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "lacks the Python package" in done.stderr
    assert "scripts/setup.sh" in done.stderr


def test_a_killed_patio_takes_its_python_worker_with_it(tmp_path: Path) -> None:
    """``patio layout …`` runs a Python worker; killed with SIGKILL, patio takes it
    along (the worker gets SIGTERM) instead of leaving it to run to completion."""
    marker = tmp_path / "worker.pid"
    fake = tmp_path / "python"
    # A stand-in interpreter that records its pid and would run for a minute.
    fake.write_text(f"#!/bin/sh\necho $$ > {marker}\nexec sleep 60\n")
    fake.chmod(0o755)
    proc = subprocess.Popen([patio_binary(), "layout", "build", "x.h5"],
                            env=dict(os.environ, PATIO_PYTHON=str(fake)))
    deadline = time.monotonic() + 20
    while not (marker.exists() and marker.read_text().strip()):
        assert time.monotonic() < deadline, "the worker did not start"
        time.sleep(0.05)
    worker = int(marker.read_text())
    proc.kill()
    proc.wait(timeout=20)
    deadline = time.monotonic() + 20
    while Path(f"/proc/{worker}").exists() and \
            Path(f"/proc/{worker}/stat").read_text().split()[2] != "Z":
        assert time.monotonic() < deadline, "the worker outlived patio"
        time.sleep(0.05)
