"""The thesis kernels through an unmodified C program (bench/h5_replay.c) with patio's
VOL connector, end to end at a tiny scale: ``bench/vol_kernels.py`` records one draw of
each kernel's reads through the connector, builds replicas with ``patio layout build``
and replays another draw natively and through the connector.

Reference model: the native connector's bytes of the same replay (the benchmark stops
unless every run through the connector delivers them, by FNV-1a of every element).
Checked here: every kernel ran and was byte-identical, replicas were built and served
reads where the model saw a gain (the MD atom selection), and the JSON carries what
docs/BENCHMARKS.md reports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_kernels_through_the_connector_deliver_the_native_bytes(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "vol_kernels.py"), "--scale",
                        "0.02", "--reps", "1", "--dir", str(tmp_path), "--out", str(out)],
                       capture_output=True, text=True, timeout=900, check=False)
    assert r.returncode == 0, r.stderr
    res = json.loads(out.read_text())
    rows = {row["kernel"]: row for row in res["rows"]}
    assert set(rows) == {"elements-A2", "climate-Q2", "massspec-A", "massspec-B",
                         "ecog-10pct", "md-atoms"}
    for row in rows.values():
        assert row["same_bytes"] and row["reads"] > 0
        assert row["native_s"] > 0 and row["vol_s"] > 0
        assert row["served"] <= row["reads"]
    md = rows["md-atoms"]
    assert md["replicas"] >= 1 and md["served"] > 0
    assert md["model_speedup"] > 1
    assert "md-atoms" in r.stdout  # the table
    assert list(tmp_path.iterdir()) == [out]  # its scratch removed


def test_a_bad_kernel_name_is_one_line() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "bench" / "vol_kernels.py"), "--kernels",
                        "nope"], capture_output=True, text=True, timeout=120, check=False)
    assert r.returncode == 2
    expected = ("vol_kernels: unknown kernel 'nope' (expected elements-A2, climate-Q2, "
                "massspec-A, massspec-B, ecog-10pct, md-atoms)")
    assert r.stderr.strip().splitlines() == [expected]
