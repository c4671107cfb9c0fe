"""Tests for ``patio.amr``: Chombo round trips, orderings, the model's choice, region
reads and the ``patio amr`` command line.

References: box data is compared box by box against the input file (matched by box
coordinates, not by the permutation under test); curve orders against a pure-Python
Morton interleave and the ``hilbertcurve`` package; region reads against box-by-box
reads; bad input through the real command line in a subprocess.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from hilbertcurve.hilbertcurve import HilbertCurve
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from patio.amr.chombo import LevelSpec, read_box, read_hierarchy, write_chombo
from patio.amr.cli import main
from patio.amr.model import choose, probe, store
from patio.amr.order import LAYOUTS, cluster_order, curve_order, order_boxes
from patio.amr.region import read_region, read_region_boxwise
from patio.amr.reorder import reorder

SHARED = Path("/work/shared/amr")
REAL = sorted(SHARED.glob("*.hdf5")) if SHARED.is_dir() else []


def tiles(rng: np.random.Generator, dom: np.ndarray, size: int, keep: float):
    """A random subset (at least one) of a tiling of ``0..dom-1`` by ``size`` cubes."""
    grid = np.indices(tuple(int(d) // size for d in dom)).reshape(len(dom), -1).T
    mask = rng.random(grid.shape[0]) < keep
    mask[rng.integers(grid.shape[0])] = True
    lo = grid[mask] * size
    return lo, lo + size - 1


def synthetic(
    path: Path, seed: int, dim: int = 2, nlevels: int = 3, ghost: int = 0, ncomp: int = 2
) -> None:
    rng = np.random.default_rng(seed)
    dom = np.full(dim, 16 if dim == 2 else 8, dtype=np.int64)
    specs = []
    for li in range(nlevels):
        size = int(rng.choice([2, 4])) if li else int(dom[0]) // 2
        lo, hi = tiles(rng, dom, size, 1.0 if li == 0 else 0.4)
        stored = hi - lo + 1 + 2 * ghost
        data = [rng.standard_normal((ncomp,) + tuple(int(s) for s in e)) for e in stored]
        specs.append(LevelSpec(lo, hi, [0] * dim, (dom - 1).tolist(), data, ghost=[ghost] * dim))
        dom = dom * 2
    write_chombo(path, specs, [f"c{i}" for i in range(ncomp)])


def assert_same_boxes(a: Path, b: Path) -> None:
    ha, hb = read_hierarchy(a), read_hierarchy(b)
    assert len(ha.levels) == len(hb.levels)
    for la, lb in zip(ha.levels, hb.levels):
        assert la.n == lb.n
        where = {tuple(lo) + tuple(hi): k for k, (lo, hi) in enumerate(zip(la.lo, la.hi))}
        assert len(where) == la.n
        for p in range(lb.n):
            k = where[tuple(lb.lo[p]) + tuple(lb.hi[p])]
            # Stored values, ghost cells included (region tests cover the interior cut).
            want = read_box(a, ha, la.index, k, interior=False)
            got = read_box(b, hb, lb.index, p, interior=False)
            assert np.array_equal(want, got)
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        assert dict(fa.attrs) == dict(fb.attrs)
        assert sorted(fa) == sorted(fb)
        for name in fa:
            if name.startswith("level_"):
                assert sorted(fa[name]) == sorted(fb[name])
                ga, gb = fa[name].attrs, fb[name].attrs
                assert {k: np.asarray(ga[k]).tolist() for k in ga} == {
                    k: np.asarray(gb[k]).tolist() for k in gb
                }


@pytest.mark.parametrize("layout", LAYOUTS + ("auto",))
def test_round_trip_shared(tmp_path: Path, layout: str) -> None:
    if not REAL:
        pytest.skip("shared AMR files not present")
    for src in REAL:
        out = tmp_path / f"{src.stem}.{layout}.hdf5"
        res = reorder(src, out, layout, queries=20)
        assert res["layout"] in LAYOUTS
        assert res["chosen_by"] == ("model" if layout == "auto" else "user")
        assert_same_boxes(src, out)


@pytest.mark.parametrize("dim,ghost", [(2, 0), (2, 1), (3, 0), (3, 2)])
def test_round_trip_synthetic(tmp_path: Path, dim: int, ghost: int) -> None:
    src = tmp_path / "in.hdf5"
    synthetic(src, seed=dim * 10 + ghost, dim=dim, ghost=ghost)
    for layout in LAYOUTS:
        out = tmp_path / f"{layout}.hdf5"
        reorder(src, out, layout)
        assert_same_boxes(src, out)
        # Offsets of the output are the cumulative sums of the permuted box sizes.
        with h5py.File(out, "r") as f:
            for name in f:
                if name.startswith("level_"):
                    offs = f[name]["data:offsets=0"][()]
                    assert offs[0] == 0 and offs[-1] == f[name]["data:datatype=0"].size


def test_what_a_killed_reorder_left_is_removed_by_the_next(tmp_path: Path) -> None:
    """A SIGKILLed ``amr reorder`` leaves its temporary file beside the output, named
    after its host and process; the next reorder into that directory removes it (not
    another host's, nor a living process's)."""
    from patio import _files

    src = tmp_path / "in.hdf5"
    synthetic(src, seed=5, dim=2, ghost=0)
    dead = subprocess.Popen(["true"])
    dead.wait()
    host = _files.host_name()
    left = tmp_path / f".patio-amr-{host}.{dead.pid}-abc.tmp"
    other = tmp_path / f".patio-amr-elsewhere.{dead.pid}-abc.tmp"
    alive = tmp_path / f".patio-amr-{host}.{os.getpid()}-abc.tmp"
    for f in (left, other, alive):
        f.write_bytes(b"partial")
    reorder(src, tmp_path / "out.hdf5", "hilbert")
    assert not left.exists()
    assert other.exists() and alive.exists()
    assert_same_boxes(src, tmp_path / "out.hdf5")


boxes_2d3d = st.integers(2, 3).flatmap(
    lambda d: st.lists(
        st.tuples(st.tuples(*[st.integers(0, 200)] * d), st.tuples(*[st.integers(1, 24)] * d)),
        min_size=1,
        max_size=60,
    )
)


@settings(max_examples=60, deadline=None)
@given(boxes=boxes_2d3d, nbytes=st.integers(1, 5000), thres=st.integers(1, 20000))
def test_orderings_are_permutations(
    boxes: list[tuple[tuple[int, ...], tuple[int, ...]]], nbytes: int, thres: int
) -> None:
    lo = np.array([b[0] for b in boxes], dtype=np.int64)
    hi = lo + np.array([b[1] for b in boxes], dtype=np.int64) - 1
    sizes = np.full(lo.shape[0], nbytes) * np.prod(hi - lo + 1, axis=1)
    for layout in LAYOUTS:
        perm = order_boxes(lo, hi, sizes, layout, threshold=thres)
        assert np.array_equal(np.sort(perm), np.arange(lo.shape[0]))
    perm, labels = cluster_order(lo, hi, sizes, thres)
    for c in np.unique(labels):
        members = labels == c
        assert members.sum() == 1 or sizes[members].sum() <= thres
        pos = np.nonzero(members[perm])[0]
        assert pos.max() - pos.min() + 1 == pos.size  # a cluster is stored contiguously


def morton_reference(cells: list[tuple[int, ...]], bits: int) -> list[int]:
    out = []
    for c in cells:
        code = 0
        for b in range(bits - 1, -1, -1):
            for x in c:
                code = (code << 1) | ((x >> b) & 1)
        out.append(code)
    return out


@settings(max_examples=40, deadline=None)
@given(
    dim=st.integers(2, 3),
    size=st.integers(1, 9),
    grid=st.integers(1, 12),
    keep=st.floats(0.1, 1.0),
    seed=st.integers(0, 2**31),
)
def test_curves_against_reference(dim: int, size: int, grid: int, keep: float, seed: int) -> None:
    """Equal boxes on a regular tiling: each box's unit is its tile, so the curve order is
    the reference order of the tile coordinates."""
    rng = np.random.default_rng(seed)
    lo, hi = tiles(rng, np.full(dim, grid * size), size, keep)
    shuffle = rng.permutation(lo.shape[0])
    lo, hi = lo[shuffle], hi[shuffle]
    cells = [tuple(int(x) // size for x in row) for row in lo]
    bits = max(1, (grid - 1).bit_length())
    hc = HilbertCurve(bits, dim)
    refs = {
        "morton": morton_reference(cells, bits),
        "hilbert": [int(hc.distance_from_point(list(c))) for c in cells],
    }
    for curve, codes in refs.items():
        want = sorted(range(len(cells)), key=lambda k: (codes[k], k))
        got = curve_order(lo, hi, curve, domain_lo=np.zeros(dim, np.int64),
                          domain_hi=np.full(dim, grid * size - 1, np.int64))
        assert got.tolist() == want


def test_virtual_grid_most_adjacent_rule() -> None:
    """A box straddling two units takes the one next to the other boxes."""
    lo = np.array([[0, 0], [0, 4], [0, 8], [4, 10]])
    hi = np.array([[3, 3], [3, 7], [3, 11], [7, 13]])
    from patio.amr.order import virtual_units

    units, unit = virtual_units(lo, hi, np.zeros(2, np.int64))
    assert unit.tolist() == [4, 4]
    # Box 3 covers units (1, 2) and (1, 3) equally; (1, 2) touches boxes 1 and 2.
    assert units[3].tolist() == [1, 2]


def test_cluster_scales() -> None:
    """98,304 equal 3-D boxes are clustered in seconds, not hours."""
    import time

    g = np.indices((64, 48, 32)).reshape(3, -1).T
    lo = g * 16
    t = time.perf_counter()
    perm, labels = cluster_order(lo, lo + 15, np.full(lo.shape[0], 98304), 1 << 20)
    assert time.perf_counter() - t < 30
    assert np.array_equal(np.sort(perm), np.arange(lo.shape[0]))
    assert np.bincount(labels).max() * 98304 <= 1 << 20


def test_probe_and_choice() -> None:
    w = probe(store("lustre"))
    assert 0 < w.alpha < w.beta < w.gamma
    assert w.seconds_per_byte > 0
    assert choose({"original": 10, "morton": 5, "hilbert": 5.4, "cluster": 5}) == "morton"
    assert choose({"original": 10, "morton": 8, "hilbert": 7, "cluster": 2}) == "cluster"
    assert choose({"original": 10, "morton": 9.5, "hilbert": 9.6, "cluster": 9.4}) == "original"
    assert choose({"original": 0, "morton": 0, "hilbert": 0, "cluster": 1}) == "original"


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 2**31),
    dim=st.integers(2, 3),
    ghost=st.integers(0, 1),
    corner=st.lists(st.integers(0, 7), min_size=6, max_size=6),
    span=st.lists(st.integers(0, 8), min_size=3, max_size=3),
)
def test_region_reads_equal_boxwise(
    tmp_path: Path, seed: int, dim: int, ghost: int, corner: list[int], span: list[int]
) -> None:
    path = tmp_path / f"h{seed}_{dim}_{ghost}.hdf5"
    if not path.exists():
        synthetic(path, seed, dim=dim, ghost=ghost)
    hier = read_hierarchy(path)
    lo = corner[:dim]
    hi = [min(a + s, int(hier.levels[0].domain_hi[d])) for d, (a, s) in enumerate(zip(lo, span))]
    lo = [min(a, b) for a, b in zip(lo, hi)]
    merged = read_region(path, hier, lo, hi)
    boxwise = read_region_boxwise(path, hier, lo, hi)
    for m, b in zip(merged, boxwise):
        assert np.array_equal(m.values, b.values, equal_nan=True)
        assert m.extents <= b.extents
    # The same region of a reordered file holds the same values.
    out = tmp_path / f"r{seed}_{dim}_{ghost}.hdf5"
    reorder(path, out, "hilbert")
    again = read_region(out, read_hierarchy(out), lo, hi)
    for m, b in zip(again, boxwise):
        assert np.array_equal(m.values, b.values, equal_nan=True)


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    return subprocess.run(
        [sys.executable, "-m", "patio._run", "amr", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def _break(path: Path, how: str) -> None:
    with h5py.File(path, "r+") as f:
        g = f["level_1"]
        if how == "missing":
            del g["data:offsets=0"]
        elif how == "offsets":
            offs = g["data:offsets=0"][()]
            offs[1] += 1
            g["data:offsets=0"][...] = offs
        elif how in ("overlap", "outside"):
            b = g["boxes"][()]
            if how == "overlap" and b.size > 1:
                b[1] = b[0]
            else:
                b[0]["lo_i"] += 10_000
                b[0]["hi_i"] += 10_000
            g["boxes"][...] = b
        elif how == "empty":
            del g["boxes"]
            g.create_dataset("boxes", data=np.zeros(0, dtype=f["level_0/boxes"].dtype))
        elif how == "dim":
            f["Chombo_global"].attrs["SpaceDim"] = np.int32(4)
        elif how == "nolevels":
            for k in list(f):
                if k.startswith("level_"):
                    del f[k]


@pytest.mark.parametrize(
    "how,expect",
    [
        ("text", "not an HDF5 file"),
        ("nolevels", "not a Chombo file"),
        ("missing", "level 1: missing dataset 'data:offsets=0'"),
        ("offsets", "level 1: data:offsets=0"),
        ("overlap", "level 1: boxes"),
        ("outside", "level 1: box 0 lies outside"),
        ("empty", "level 1: empty level"),
        ("dim", "unsupported dimensionality 4"),
    ],
)
def test_bad_input_cli(tmp_path: Path, how: str, expect: str) -> None:
    bad = tmp_path / "bad.hdf5"
    if how == "text":
        bad.write_text("not hdf5\n")
    else:
        synthetic(bad, seed=7, nlevels=2)
        with h5py.File(bad, "r+") as f:
            assert f["level_1/boxes"].shape[0] >= 2  # "overlap" needs two boxes
        _break(bad, how)
    before = digest(bad)
    out = tmp_path / "out.hdf5"
    for args in (
        ["inspect", str(bad)],
        ["advise", str(bad), "--json"],
        ["reorder", str(bad), "-o", str(out), "--layout", "cluster"],
        ["read", str(bad), "--region", "0,0", "3,3", "-o", str(tmp_path / "r.npy")],
    ):
        r = run_cli(*args)
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
        assert str(bad) in lines[0] and expect in lines[0], lines[0]
        assert r.stdout == ""
    assert digest(bad) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.hdf5"]


def test_cli_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    src = tmp_path / "in.hdf5"
    synthetic(src, seed=3, dim=2)
    before = digest(src)
    assert main(["reorder", str(src), "-o", str(src)]) == 2
    assert "output path equals the input" in capsys.readouterr().err
    assert main(["inspect", str(src), "--json", "--plot", str(tmp_path / "p.png")]) == 0
    info = json.loads(capsys.readouterr().out)
    assert [lv["level"] for lv in info["levels"]] == [0, 1, 2]
    assert (tmp_path / "p.png").stat().st_size > 0
    assert main(["advise", str(src), "--queries", "10", "--json"]) == 0
    adv = json.loads(capsys.readouterr().out)
    assert adv["chosen"] in LAYOUTS and set(adv["costs"]) == set(LAYOUTS)
    out = tmp_path / "out.hdf5"
    assert main(["reorder", str(src), "-o", str(out), "--layout", "morton", "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert set(rep) == {"layout", "chosen_by", "levels", "store", "store_targets",
                        "store_stripe_kib"}
    assert set(rep["levels"][0]) == {"level", "boxes", "jumps_before", "jumps_after"}
    assert_same_boxes(src, out)
    npy = tmp_path / "r.npy"
    assert main(["read", str(out), "--region", "2,2", "9,9", "--level", "1", "-o", str(npy)]) == 0
    got = np.load(npy)
    hier = read_hierarchy(src)
    want = read_region_boxwise(src, hier, [2, 2], [9, 9], [1])[0].values
    assert np.array_equal(got, want, equal_nan=True)
    npz = tmp_path / "all.npz"
    capsys.readouterr()
    assert main(["read", str(out), "--region", "0,0", "15,15", "-o", str(npz), "--json"]) == 0
    read = json.loads(capsys.readouterr().out)
    with np.load(npz) as z:
        assert sorted(z.files) == ["level_0", "level_1", "level_2"]
        assert [lv["level"] for lv in read["levels"]] == [0, 1, 2]
        for lv in read["levels"]:
            assert lv["shape"] == list(z[f"level_{lv['level']}"].shape)
            assert lv["reads"] >= 1 and lv["boxes"] >= 1
    assert digest(src) == before
