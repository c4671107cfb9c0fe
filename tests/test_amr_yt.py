"""yt reads the files ``patio amr reorder`` writes: the original and every reordered
layout give identical field values on every level and cell (matched by level and global
start index, never by box position), on the two real Chombo files in /work/shared/amr
and on a small synthetic 3-D hierarchy (the Chombo benchmark's unit region, r = 1)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

yt = pytest.importorskip("yt")

from patio.amr import synth
from patio.amr.chombo import read_hierarchy
from patio.amr.order import LAYOUTS
from patio.amr.reorder import reorder

SHARED = Path("/work/shared/amr")
REAL = sorted(SHARED.glob("*.hdf5")) if SHARED.is_dir() else []
yt.set_log_level(50)


def grid_values(path: Path) -> dict[tuple[int, tuple[int, ...], str], np.ndarray]:
    ds = yt.load(str(path))
    fields = [f for f in ds.field_list if f[0] == "chombo"]
    out = {}
    for g in ds.index.grids:
        key = (int(g.Level), tuple(int(x) for x in g.get_global_startindex()))
        for f in fields:
            out[key + (f[1],)] = np.asarray(g[f].d)
    return out


def check(src: Path, tmp: Path) -> None:
    ref = grid_values(src)
    nboxes = sum(lev.n for lev in read_hierarchy(src).levels)
    assert len({k[:2] for k in ref}) == nboxes
    for layout in LAYOUTS:
        dst = tmp / f"{layout}.hdf5"
        reorder(src, dst, layout)
        got = grid_values(dst)
        assert got.keys() == ref.keys(), layout
        for k, v in ref.items():
            assert np.array_equal(got[k], v, equal_nan=True), (layout, k)


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_real_files(path: Path, tmp_path: Path) -> None:
    check(path, tmp_path)


def test_synthetic_3d(tmp_path: Path) -> None:
    src = tmp_path / "unit3d.hdf5"
    synth.write(src, synth.chombo_benchmark(1), components=2)
    check(src, tmp_path)
    hier = read_hierarchy(tmp_path / "cluster.hdf5")
    assert not np.array_equal(hier.levels[2].lo, read_hierarchy(src).levels[2].lo)
