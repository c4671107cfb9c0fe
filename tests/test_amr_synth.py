"""Tests for ``patio.amr.synth`` and ``patio bench amr``: synthetic hierarchies written as
Chombo files pass ``patio.amr.chombo``'s validation, levels nest, box counts match the
documented ones, the model keeps the original order on the cylinder case, and the
benchmark's JSON has the documented shape; bad input exits 2 with one line.

References: nesting is checked box by box (every refined box, coarsened, lies inside a
box of the level below); data is checked against :func:`patio.amr.synth.cell_values`
through ``read_box``; the window's contiguity against a direct scan of the boxes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from patio.amr import synth
from patio.amr.bench import main as bench_main
from patio.amr.chombo import read_box, read_hierarchy
from patio.amr.model import advise, selected, store


def assert_nested(g: synth.Geometry) -> None:
    for li in range(1, len(g.lo)):
        clo, chi = g.lo[li] // g.ratio, (g.hi[li] + 1) // g.ratio - 1
        plo, phi = g.lo[li - 1], g.hi[li - 1]
        for a in range(0, clo.shape[0], 512):
            inside = np.all(
                (clo[a : a + 512, None, :] >= plo[None]) & (chi[a : a + 512, None, :] <= phi[None]),
                axis=2,
            )
            assert inside.any(axis=1).all(), f"level {li} not nested in level {li - 1}"


def assert_file(path: Path, g: synth.Geometry) -> None:
    hier = read_hierarchy(path)  # validates offsets, overlaps, domains
    assert [lev.n for lev in hier.levels] == g.counts
    for li, lev in enumerate(hier.levels):
        assert np.array_equal(lev.lo, g.lo[li]) and np.array_equal(lev.hi, g.hi[li])
        assert np.array_equal(lev.domain_hi + 1, g.domain[li])
        for k in (0, lev.n // 2, lev.n - 1):
            ref = synth.cell_values(g.lo[li][k], g.hi[li][k], li, lev.ncomp)
            assert np.array_equal(read_box(path, hier, li, k), ref)


def test_bisicles_counts_nesting_and_file(tmp_path: Path) -> None:
    g = synth.bisicles()
    assert g.counts == [36, 557, 662, 1512, 3262]
    assert [int(d[0]) for d in g.domain] == [768, 1536, 3072, 6144, 12288]
    assert_nested(g)
    h = synth.geometry_hierarchy(g)
    total = sum(int(lev.box_bytes.sum()) for lev in h.levels)
    assert 1.2e9 < total < 1.6e9  # the thesis' ~1.3 GB per step, in the model
    synth.write(tmp_path / "bisicles.hdf5", g)
    assert_file(tmp_path / "bisicles.hdf5", g)


def test_chombo_benchmark_counts_and_file(tmp_path: Path) -> None:
    assert synth.chombo_benchmark(8).counts == [512, 16384, 98304]
    g = synth.chombo_benchmark(2)
    assert g.counts == [8, 256, 1536]
    assert_nested(g)
    synth.write(tmp_path / "chombo.hdf5", g)
    assert_file(tmp_path / "chombo.hdf5", g)


def test_cylinder_file_window_and_advise(tmp_path: Path) -> None:
    g = synth.cylinder()
    assert g.counts == [64, 240, 500]
    assert [d.tolist() for d in g.domain] == [[1024, 256], [2048, 512], [4096, 1024]]
    assert_nested(g)
    synth.write(tmp_path / "cyl.hdf5", g, components=2)
    assert_file(tmp_path / "cyl.hdf5", g)
    hier = synth.geometry_hierarchy(g)
    ((lo, hi),) = synth.queries("cylinder", g)
    for li, lev in enumerate(hier.levels):
        sel = selected(lev, lo * 2**li, (hi + 1) * 2**li - 1)
        assert sel.size and np.array_equal(sel, np.arange(sel[0], sel[-1] + 1))
    res = advise(hier, store("lustre"))
    assert res["chosen"] == "original"


def test_queries_inside_domain() -> None:
    for name in synth.DATASETS:
        g = synth.geometry(name, r=2)
        qs = synth.queries(name, g)
        assert len(qs) == {"bisicles": 11, "chombo": 5, "cylinder": 1}[name]
        for lo, hi in qs:
            assert np.all(lo >= 0) and np.all(hi < g.domain[0]) and np.all(lo <= hi)


def test_bad_input() -> None:
    with pytest.raises(ValueError):
        synth.geometry("nope")
    with pytest.raises(ValueError):
        synth.chombo_benchmark(0)


def test_bench_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_main(["--dataset", "cylinder", "--json", "--clients", "4"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["store"]["targets"] == 8
    (d,) = res["datasets"]
    assert d["name"] == "cylinder" and d["boxes"] == [64, 240, 500]
    assert set(d["read_s"]) == {"original", "morton", "hilbert", "cluster", "contiguous"}
    assert d["chosen"] == "original"
    assert d["model_error"]["queries"] >= 25
    assert all(v > 0 for v in d["read_s"].values())
    assert d["read_s"]["contiguous"] <= min(d["read_s"].values()) + 1e-12
    assert {o["boxes"] for o in res["ordering_s"]} == {3262, 98304}


def test_bench_real_disk_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--storage both``: a model row and a real row per dataset; the real row's speed-ups
    and model error follow from its own timings and the simulated ones; the files stay in
    ``--real-dir`` at the scale that fits ``--real-bytes``."""
    args = ["--dataset", "cylinder", "--json", "--storage", "both", "--real-clients", "2",
            "--reps", "1", "--real-bytes", "40MiB", "--real-dir", str(tmp_path)]  # fmt: skip
    assert bench_main(args) == 0
    res = json.loads(capsys.readouterr().out)
    model, real = res["datasets"]
    assert model["storage"] == "model" and real["storage"] == "real"
    layouts = {"original", "morton", "hilbert", "cluster", "contiguous"}
    assert set(real["read_s"]) == set(real["model_read_s"]) == layouts
    assert real["scale"] == "1/2" and real["clients"] == 2  # 2 x 31 MiB > 40 MiB at scale 1
    files = sorted((tmp_path / "cylinder").iterdir())
    assert [f.name for f in files] == ["step0.bin", "step1.bin"]
    assert all(f.stat().st_size == real["bytes"] for f in files)
    for k in layouts:
        assert real["speedup"][k] == pytest.approx(real["read_s"]["original"] / real["read_s"][k])
        assert real["model_error"][k] == pytest.approx(real["model_speedup"][k] / real["speedup"][k])
    assert 0.0 <= real["resident"] <= 1.0


@pytest.mark.parametrize("args", [["--dataset", "nope"], ["--clients", "0"],
                                  ["--storage", "real", "--real-bytes", "20%"],
                                  ["--store", "nvme"]])  # fmt: skip
def test_bench_bad_input_exit_2(args: list[str]) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "patio.amr.bench", *args],
        check=False,
        capture_output=True,
        text=True,
    )
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and "error" in p.stderr
