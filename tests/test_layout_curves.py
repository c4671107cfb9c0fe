"""patio.layout.curves: Morton and Hilbert codes against references, and curve ranks of grids."""

from __future__ import annotations

import numpy as np
import pytest
from hilbertcurve.hilbertcurve import HilbertCurve
from hypothesis import given, settings
from hypothesis import strategies as st
from patio.layout.curves import curve_rank, grid_bits, hilbert_encode, morton_encode


def morton_slow(point: list[int], bits: int) -> int:
    """Bit-by-bit reference: bit groups from the top, dimension 0 first in each group."""
    code = 0
    for b in range(bits - 1, -1, -1):
        for x in point:
            code = (code << 1) | ((x >> b) & 1)
    return code


@st.composite
def points(draw: st.DrawFn, dims: tuple[int, ...] = (1, 2, 3, 4)) -> tuple[np.ndarray, int]:
    d = draw(st.sampled_from(dims))
    bits = draw(st.integers(1, 64 // d))
    n = draw(st.integers(0, 30))
    pts = draw(st.lists(st.lists(st.integers(0, 2**bits - 1), min_size=d, max_size=d),
                        min_size=n, max_size=n))
    return np.array(pts, dtype=np.uint64).reshape(n, d), bits


@given(points())
@settings(max_examples=200, deadline=None)
def test_morton_matches_bitwise_reference(pb: tuple[np.ndarray, int]) -> None:
    pts, bits = pb
    got = morton_encode(pts, bits)
    assert got.dtype == np.uint64
    assert [int(v) for v in got] == [morton_slow([int(x) for x in p], bits) for p in pts]


def test_morton_convention() -> None:
    # (x0, x1) = (1, 0) with one bit: dimension 0 is the high bit of the group.
    assert morton_encode(np.array([[1, 0], [0, 1]]), 1).tolist() == [2, 1]
    assert morton_encode(np.array([[2, 1]]), 2).tolist() == [0b1001]


@given(points(dims=(2, 3)))
@settings(max_examples=200, deadline=None)
def test_hilbert_matches_hilbertcurve(pb: tuple[np.ndarray, int]) -> None:
    pts, bits = pb
    d = pts.shape[1]
    ref = HilbertCurve(bits, d).distances_from_points([[int(x) for x in p] for p in pts])
    assert [int(v) for v in hilbert_encode(pts, bits)] == [int(r) for r in ref]


@pytest.mark.parametrize("d,bits", [(2, 1), (2, 3), (2, 32), (3, 2), (3, 21), (4, 16)])
def test_hilbert_full_width_and_convention(d: int, bits: int) -> None:
    rng = np.random.default_rng(d * 100 + bits)
    pts = rng.integers(0, 2**bits, size=(100, d), dtype=np.uint64)
    ref = HilbertCurve(bits, d).distances_from_points([[int(x) for x in p] for p in pts])
    assert [int(v) for v in hilbert_encode(pts, bits)] == [int(r) for r in ref]


def test_hilbert_convention_2d() -> None:
    # hilbertcurve's order for p=1, n=2: (0,0), (0,1), (1,1), (1,0) as (point[0], point[1]).
    pts = np.array([[0, 0], [0, 1], [1, 1], [1, 0]])
    assert hilbert_encode(pts, 1).tolist() == [0, 1, 2, 3]


def test_hilbert_1d_is_identity() -> None:
    x = np.arange(64).reshape(-1, 1)
    assert hilbert_encode(x, 6).tolist() == list(range(64))


def test_encode_refuses_bad_input() -> None:
    with pytest.raises(ValueError):
        morton_encode(np.array([[4, 0]]), 2)
    with pytest.raises(ValueError):
        hilbert_encode(np.array([[-1, 0]]), 2)
    with pytest.raises(ValueError):
        morton_encode(np.zeros((1, 3), np.int64), 22)
    with pytest.raises(ValueError):
        hilbert_encode(np.zeros(3, np.int64), 2)


grids = st.lists(st.integers(1, 9), min_size=1, max_size=4).map(tuple)


@given(grids, st.sampled_from(["row", "morton", "hilbert"]))
@settings(max_examples=200, deadline=None)
def test_curve_rank_is_permutation(grid: tuple[int, ...], order: str) -> None:
    r = curve_rank(grid, order)
    n = int(np.prod(grid))
    assert r.dtype == np.int64 and r.shape == (n,)
    assert np.array_equal(np.sort(r), np.arange(n))
    if order == "row":
        assert np.array_equal(r, np.arange(n))


@given(grids, st.sampled_from(["morton", "hilbert"]))
@settings(max_examples=100, deadline=None)
def test_curve_rank_compacts_padded_codes(grid: tuple[int, ...], order: str) -> None:
    # The rank orders the occupied cells as their codes in the padded cube do.
    bits = grid_bits(grid)
    coords = np.indices(grid).reshape(len(grid), -1).T
    codes = (morton_encode if order == "morton" else hilbert_encode)(coords, bits)
    r = curve_rank(grid, order)
    assert np.array_equal(np.argsort(r), np.argsort(codes))


@pytest.mark.parametrize("grid", [(2, 2), (8, 8), (32, 32), (2, 2, 2), (4, 4, 4), (8, 8, 8),
                                  (4, 4, 4, 4)])
def test_adjacent_hilbert_ranks_are_grid_neighbours(grid: tuple[int, ...]) -> None:
    r = curve_rank(grid, "hilbert")
    coords = np.indices(grid).reshape(len(grid), -1).T
    path = coords[np.argsort(r)]
    steps = np.abs(np.diff(path, axis=0)).sum(axis=1)
    assert np.all(steps == 1)


def test_morton_rank_of_power_of_two_grid() -> None:
    assert curve_rank((4, 4), "morton").reshape(4, 4).tolist() == [
        [0, 1, 4, 5], [2, 3, 6, 7], [8, 9, 12, 13], [10, 11, 14, 15]]


def test_curve_rank_edge_cases() -> None:
    assert curve_rank((), "hilbert").tolist() == [0]
    assert curve_rank((0, 5), "morton").tolist() == []
    assert curve_rank((1,), "hilbert").tolist() == [0]
    with pytest.raises(ValueError):
        curve_rank((4, 4), "snake")
    with pytest.raises(ValueError):
        curve_rank((2**22, 2, 2), "morton")  # 22 bits x 3 dims > 64
    assert curve_rank((2**21, 1, 1), "row").shape == (2**21,)
