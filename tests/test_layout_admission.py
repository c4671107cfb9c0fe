"""eq 3.1 against the striped storage model it is fitted to, where the planner's
admission depends on it: the fitted constants price a transfer-bound read as the model
simulates it (every preset), and on an ECoG-like workload (label blocks spread over the
whole dataset, read whole rows at a time) the planner admits no replica that the
simulator, with the recorded reads issued at once, prices slower than the original."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import patio.h5 as ph5
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from patio.layout import bench, planner
from patio.layout import cost as costmodel
from patio.layout.cli import advise_report
from patio.layout.flatten import Extents
from patio.layout.kb import KnowledgeBase
from patio.layout.storage import physical_layout

pytestmark = [
    pytest.mark.filterwarnings("ignore::patio.h5.LayoutWarning"),
    pytest.mark.usefixtures("layout_dir"),
]


def eq31(model: object, consts: costmodel.Constants, ext: Extents) -> float:
    pages, runs = costmodel.counts(model, [ext])
    return float((pages * consts.t_pg + runs * consts.t_chk).max() + consts.t_lat)


def simulated(model: object, ext: Extents) -> float:
    return float(model.simulate([[(ext.offsets.astype(np.uint64),  # type: ignore[attr-defined]
                                   ext.lengths.astype(np.uint64))]])["seconds"])


@pytest.mark.parametrize("preset", ["hdd", "ssd", "lustre"])
@settings(max_examples=20, deadline=None)
@given(mib=st.integers(16, 256), start=st.integers(0, 64))
def test_fitted_constants_price_transfer_bound_reads_as_simulated(preset: str, mib: int,
                                                                  start: int) -> None:
    model = costmodel.storage_model(preset)
    consts = costmodel.fit_to_model(model)
    ext = Extents(np.array([start * 4096], np.int64), np.array([mib << 20], np.int64))
    assert eq31(model, consts, ext) == pytest.approx(simulated(model, ext), rel=0.25)


ROWS, COLS, BLOCK, LABELS = 32768, 256, 16, 24


def test_ecog_like_plan_is_never_slower_on_the_simulator(tmp_path: Path) -> None:
    path = tmp_path / "ecog.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("E", data=np.arange(ROWS * COLS, dtype="f8").reshape(ROWS, COLS))
    labels = np.random.default_rng(5).integers(0, LABELS, ROWS // BLOCK)
    masks = []
    for lab in (3, 11, 17, 20):
        mask = np.zeros(ROWS, bool)
        for b in np.flatnonzero(labels == lab):
            mask[b * BLOCK:(b + 1) * BLOCK] = True
        masks.append(mask)
    with ph5.File(path) as f:
        for m in masks:
            f["E"][m, :]
    kb = KnowledgeBase(path)
    kb.set_setting("budget", planner.parse_budget("100%"))
    kb.close()
    _, plans = advise_report(str(path))
    build, _, _ = planner.plan(plans, [], ROWS * COLS * 8)
    model = costmodel.storage_model("lustre")  # the default device's model
    with h5py.File(path) as f:
        src = f["E"]
        sels = [bench.h5sel.select(src, (m, slice(None)))[0] for m in masks]
        original = model.simulate(bench._requests(physical_layout(src), sels))["seconds"]
        shape = tuple(int(n) for n in src.shape)
    for prop in build:
        if prop.kind not in planner.CURVE_ORDER and prop.kind != "transposed":
            continue
        lay = planner._full_layout(prop, shape, 8)
        axes = prop.params.get("axes")
        reads = [s.permuted(tuple(axes)) for s in sels] if axes else sels
        replica = model.simulate(bench._requests(lay, reads))["seconds"]
        assert replica <= original, (prop.label(), replica, original)
