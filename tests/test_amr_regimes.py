"""``bench/amr_regimes.py``: a tiny sweep's JSON cells and the thesis' placement rule."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "amr_regimes.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("amr_regimes", BENCH)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["amr_regimes"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_tiny_sweep_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    mod = _load()
    png = tmp_path / "r.png"
    argv = ["--datasets", "bisicles", "--scales", "1/27,1", "--clients", "1,8"]
    argv += ["--stores", "lustre8,wide248", "--advise-queries", "4", "--json", "--plot", str(png)]
    assert mod.main(argv) == 0
    res = json.loads(capsys.readouterr().out)
    assert len(res["cells"]) == 2 * 2 * 2
    c = res["cells"][0]
    for key in (
        "dataset",
        "store",
        "placement",
        "scale",
        "finest_box_bytes",
        "clients",
        "read_s",
        "best",
        "best_speedup",
        "cluster_of_contiguous",
        "seek_share",
        "chosen",
        "storage",
    ):
        assert key in c
    assert set(c["read_s"]) == {"original", "morton", "hilbert", "cluster", "contiguous"}
    assert c["storage"] == "model"
    for c in res["cells"]:
        # The contiguous read of the same bytes is never slower than any layout.
        assert all(c["read_s"]["contiguous"] <= v * (1 + 1e-9) for v in c["read_s"].values())
        want = "one target per file" if c["store"] == "wide248" else "striped over all targets"
        assert c["placement"] == want
    assert png.stat().st_size > 0


def test_placement_rule() -> None:
    mod = _load()
    sim, view, own = mod.make_store("wide248", 2 * 10**9)
    assert own and sim.params()["targets"] == 248 and view.params()["targets"] == 1
    sim, view, own = mod.make_store("cori248", 20 * 10**9)
    assert not own and sim.params()["stripe_size"] == 1 << 20 and sim.params()["bandwidth"] == 3e9
