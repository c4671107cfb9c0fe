"""patio.layout.flatten: run-level flattening equals the per-element reference exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from patio.layout.flatten import (
    HDF5_CHUNK_CACHE_BYTES,
    Chunked,
    Contiguous,
    Extents,
    Layout,
    describe,
    flatten,
    flatten_reference,
    flatten_sorted,
    merge_sorted,
)
from patio.layout.selection import Hyperslab, Selection

ORDERS = ["row", "morton", "hilbert"]


# -- strategies ----------------------------------------------------------------------------

@st.composite
def shapes(draw: st.DrawFn) -> tuple[int, ...]:
    d = draw(st.integers(1, 4))
    top = {1: 40, 2: 12, 3: 7, 4: 5}[d]
    return tuple(draw(st.lists(st.integers(1, top), min_size=d, max_size=d)))


@st.composite
def hyperslabs(draw: st.DrawFn, shape: tuple[int, ...]) -> Hyperslab:
    start, stride, count, block = [], [], [], []
    for n in shape:
        b = draw(st.integers(1, n))
        s = draw(st.integers(0, n - b))
        stv = draw(st.integers(b, max(b, n)))
        cmax = (n - s - b) // stv + 1
        c = draw(st.integers(1, cmax))
        start.append(s)
        stride.append(stv)
        count.append(c)
        block.append(b)
    return Hyperslab(tuple(start), tuple(stride), tuple(count), tuple(block))


@st.composite
def selections(draw: st.DrawFn, shape: tuple[int, ...]) -> Selection:
    kind = draw(st.sampled_from(["slab", "box", "union", "points"]))
    if kind == "points":
        k = draw(st.integers(0, 25))
        pts = [[draw(st.integers(0, n - 1)) for n in shape] for _ in range(k)]
        return Selection.from_points(shape, np.array(pts, dtype=np.int64).reshape(k, len(shape)))
    if kind == "box":
        lo = [draw(st.integers(0, n - 1)) for n in shape]
        hi = [draw(st.integers(lo_ + 1, n)) for lo_, n in zip(lo, shape)]
        return Selection.hyperslab(shape, Hyperslab.box(lo, hi))
    if kind == "slab":
        return Selection.hyperslab(shape, draw(hyperslabs(shape)))
    slabs = draw(st.lists(hyperslabs(shape), min_size=2, max_size=4))
    return Selection.union(shape, slabs, (sum(s.nelements() for s in slabs),))


@st.composite
def layouts(draw: st.DrawFn, shape: tuple[int, ...]) -> Layout:
    itemsize = draw(st.sampled_from([1, 4, 8]))
    base = draw(st.sampled_from([0, 512, 12345]))
    kind = draw(st.sampled_from(["contiguous", "chunked", "chunked", "holes", "shuffled"]))
    if kind == "contiguous":
        return Contiguous(shape, itemsize, base)
    chunk = tuple(draw(st.integers(1, n + 1)) for n in shape)
    # Read in part (no chunk cache) or whole (chunks that fit HDF5's default cache).
    cache = draw(st.sampled_from([0, HDF5_CHUNK_CACHE_BYTES]))
    lay = Chunked.in_order(shape, itemsize, chunk, draw(st.sampled_from(ORDERS)), base, cache)
    if kind == "holes":
        mask = np.array(draw(st.lists(st.booleans(), min_size=len(lay.addresses),
                                      max_size=len(lay.addresses))))
        return Chunked(shape, itemsize, chunk, np.where(mask, -1, lay.addresses),
                       chunk_cache=cache)
    if kind == "shuffled":
        perm = np.array(draw(st.permutations(range(len(lay.addresses)))), dtype=np.int64)
        return Chunked(shape, itemsize, chunk, base + perm * lay.chunk_bytes, chunk_cache=cache)
    return lay


@st.composite
def chunk_aligned(draw: st.DrawFn, lay: Chunked) -> Selection:
    """Boxes and strided slabs whose dimensions are often exactly one whole chunk (the runs
    then span several chunk rows)."""
    start, stride, count, block = [], [], [], []
    for n, c in zip(lay.shape, lay.chunk):
        whole = list(range(n // c))
        if whole and draw(st.booleans()):
            start.append(c * draw(st.sampled_from(whole)))
            stride.append(1)
            count.append(1)
            block.append(c)
        else:
            h = draw(hyperslabs((n,)))
            start.append(h.start[0])
            stride.append(h.stride[0])
            count.append(h.count[0])
            block.append(h.block[0])
    slab = Hyperslab(tuple(start), tuple(stride), tuple(count), tuple(block))
    return Selection.hyperslab(lay.shape, slab)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Layout, Selection]:
    shape = draw(shapes())
    lay = draw(layouts(shape))
    if isinstance(lay, Chunked) and draw(st.booleans()):
        return lay, draw(chunk_aligned(lay))
    return lay, draw(selections(shape))


def sort_merge_slow(e: Extents) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for o, n in sorted(zip(e.offsets.tolist(), e.lengths.tolist())):
        if out and o <= out[-1][1]:
            out[-1][1] = max(out[-1][1], o + n)
        else:
            out.append([o, o + n])
    return [(a, b - a) for a, b in out]


# -- properties ----------------------------------------------------------------------------

@given(cases())
@settings(max_examples=600, deadline=None)
def test_flatten_equals_reference(case: tuple[Layout, Selection]) -> None:
    layout, sel = case
    got = flatten(layout, sel)
    ref = flatten_reference(layout, sel)
    assert got == ref, (layout, sel)
    assert got.offsets.dtype == np.int64 and got.lengths.dtype == np.int64


@given(cases())
@settings(max_examples=300, deadline=None)
def test_flatten_sorted_is_sorted_merged_reference(case: tuple[Layout, Selection]) -> None:
    layout, sel = case
    got = flatten_sorted(layout, sel)
    want = sort_merge_slow(flatten_reference(layout, sel))
    assert list(zip(got.offsets.tolist(), got.lengths.tolist())) == want


@given(shapes(), st.data())
@settings(max_examples=200, deadline=None)
def test_dense_box_contiguous_run_count(shape: tuple[int, ...], data: st.DataObject) -> None:
    lo = [data.draw(st.integers(0, n - 1)) for n in shape]
    hi = [data.draw(st.integers(a + 1, n)) for a, n in zip(lo, shape)]
    ext = flatten(Contiguous(shape, 8), Selection.hyperslab(shape, Hyperslab.box(lo, hi)))
    partial = [j for j in range(len(shape)) if (lo[j], hi[j]) != (0, shape[j])]
    k = max(partial, default=0)
    want = int(np.prod([hi[j] - lo[j] for j in range(k)], dtype=np.int64))
    assert len(ext) == want
    assert ext.nbytes() == 8 * int(np.prod([b - a for a, b in zip(lo, hi)]))


# -- examples ------------------------------------------------------------------------------

def test_strided_example() -> None:
    lay = Contiguous((6, 7), 4, 100)
    sel = Selection.hyperslab((6, 7), Hyperslab((1, 0), (2, 3), (2, 2), (1, 2)))
    # rows 1 and 3, columns 0,1 and 3,4
    assert flatten(lay, sel) == Extents(np.array([128, 140, 184, 196]), np.array([8, 8, 8, 8]))


def test_buffer_order_crosses_chunks() -> None:
    # 4x4 in 2x2 chunks, row order: the whole array reads row by row, two chunks per row.
    lay = Chunked.in_order((4, 4), 1, (2, 2), "row", chunk_cache=0)
    ext = flatten(lay, Selection.all((4, 4)))
    # (1,2..3) ends chunk (0,1) at byte 8 where chunk (1,0) begins: those two merge.
    assert ext.offsets.tolist() == [0, 4, 2, 6, 12, 10, 14]
    assert ext.lengths.tolist() == [2, 2, 2, 4, 2, 2, 2]
    assert flatten_sorted(lay, Selection.all((4, 4))) == Extents(np.array([0]), np.array([16]))


def test_row_chunks_merge_across_chunks() -> None:
    # Chunks of whole-row pieces written in row order are plain row-major storage.
    lay = Chunked.in_order((6, 8), 4, (1, 4), "row", 64, chunk_cache=0)
    assert flatten(lay, Selection.all((6, 8))) == Extents(np.array([64]), np.array([192]))


def test_unallocated_chunks_cost_nothing() -> None:
    # Elements in unallocated chunks produce no extent, so what surrounds them merges.
    lay = Chunked((4, 4), 8, (2, 2), np.array([0, -1, -1, 100]), chunk_cache=0)
    ext = flatten(lay, Selection.all((4, 4)))
    assert ext == Extents(np.array([0, 100]), np.array([32, 32]))
    assert flatten(Chunked((4, 4), 8, (2, 2), np.full(4, -1)), Selection.all((4, 4))) == Extents(
        np.zeros(0, np.int64), np.zeros(0, np.int64))


def test_points_and_duplicates() -> None:
    lay = Contiguous((10,), 8)
    sel = Selection.from_points((10,), np.array([[3], [4], [4], [5], [0]]))
    ext = flatten(lay, sel)
    assert list(zip(ext.offsets.tolist(), ext.lengths.tolist())) == [(24, 16), (32, 16), (0, 8)]
    assert flatten_sorted(lay, sel) == Extents(np.array([0, 24]), np.array([8, 24]))


def test_scalar_and_empty() -> None:
    lay = Contiguous((), 8, 40)
    sel = Selection.hyperslab((), Hyperslab((), (), (), ()))
    assert flatten(lay, sel) == flatten_reference(lay, sel) == Extents([40], [8])
    empty = Selection.from_points((5, 5), np.zeros((0, 2), np.int64))
    assert len(flatten(Contiguous((5, 5), 4), empty)) == 0
    assert len(flatten_sorted(Contiguous((5, 5), 4), empty)) == 0


def test_rejects_selection_outside_the_array() -> None:
    lay = Contiguous((5, 5), 4)
    with pytest.raises(ValueError):
        flatten(lay, Selection.hyperslab((5, 5), Hyperslab.box((0, 3), (2, 6))))
    with pytest.raises(ValueError):
        flatten(lay, Selection.from_points((5, 5), np.array([[5, 0]])))
    with pytest.raises(ValueError):
        flatten(lay, Selection.all((5, 6)))
    with pytest.raises(ValueError):
        Chunked((4, 4), 4, (2, 2), np.zeros(3, np.int64))


def test_in_order_addresses_follow_curve() -> None:
    lay = Chunked.in_order((8, 8), 2, (4, 4), "hilbert", 1000)
    # Hilbert over a 2x2 chunk grid: (0,0), (0,1), (1,1), (1,0).
    assert lay.addresses.tolist() == [1000, 1032, 1096, 1064]
    assert lay.grid == (2, 2) and lay.chunk_bytes == 32
    assert lay == Chunked.in_order((8, 8), 2, (4, 4), "hilbert", 1000)
    assert lay != Chunked.in_order((8, 8), 2, (4, 4), "morton", 1000)


def test_merge_sorted_overlaps() -> None:
    e = Extents(np.array([10, 0, 5, 30, 12]), np.array([5, 5, 3, 1, 1]))
    assert merge_sorted(e) == Extents(np.array([0, 10, 30]), np.array([8, 5, 1]))


def test_describe_is_pattern_sized() -> None:
    shape = (4096, 4096)
    ext = flatten(Contiguous(shape, 8), Selection.hyperslab(shape, Hyperslab.box((0, 7), (4096, 8))))
    d = describe(ext)
    assert d["runs"] == 4096 and d["raw_bytes"] == 16 * 4096
    assert d["encoded_bytes"] < 100
    assert describe(Extents(np.zeros(0, np.int64), np.zeros(0, np.int64)))["runs"] == 0


# -- large selections never enumerate elements ---------------------------------------------

@pytest.fixture
def no_enumeration(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(self: Selection) -> np.ndarray:
        raise AssertionError("flatten enumerated every element")

    monkeypatch.setattr(Selection, "element_coords", refuse)
    monkeypatch.setattr(Selection, "linear_indices", refuse)


@pytest.mark.usefixtures("no_enumeration")
def test_large_contiguous_without_enumeration() -> None:
    shape = (4096, 4096)
    lay = Contiguous(shape, 8)
    col = flatten(lay, Selection.hyperslab(shape, Hyperslab.box((0, 100), (4096, 101))))
    assert len(col) == 4096 and np.all(col.lengths == 8)
    assert np.array_equal(col.offsets, (np.arange(4096) * 4096 + 100) * 8)
    box = flatten(lay, Selection.hyperslab(shape, Hyperslab.box((1024, 1024), (3072, 3072))))
    assert len(box) == 2048 and np.all(box.lengths == 2048 * 8)
    whole = flatten(lay, Selection.all(shape))
    assert whole == Extents(np.array([0]), np.array([4096 * 4096 * 8]))
    rows = flatten(lay, Selection.hyperslab(shape, Hyperslab.box((10, 0), (2058, 4096))))
    assert rows == Extents(np.array([10 * 4096 * 8]), np.array([2048 * 4096 * 8]))


@pytest.mark.usefixtures("no_enumeration")
@pytest.mark.parametrize("order", ORDERS)
def test_large_chunked_without_enumeration(order: str) -> None:
    shape = (4096, 4096)
    lay = Chunked.in_order(shape, 8, (64, 64), order, chunk_cache=0)
    box = flatten(lay, Selection.hyperslab(shape, Hyperslab.box((1000, 1000), (3048, 3048))))
    assert box.nbytes() == 2048 * 2048 * 8
    srt = flatten_sorted(lay, Selection.hyperslab(shape, Hyperslab.box((0, 0), (2048, 2048))))
    assert srt.nbytes() == 2048 * 2048 * 8
    if order != "row":  # a quadrant of a curve order is one contiguous range of chunks
        assert len(srt) == 1


@given(shapes(), st.data())
@settings(max_examples=200, deadline=None)
def test_unions_of_many_boxes_in_contiguous_layouts(shape: tuple[int, ...],
                                                     data: st.DataObject) -> None:
    """The vectorised path for unions of more than eight boxes (fancy-indexed blocks)."""
    n = data.draw(st.integers(9, 24))
    slabs = []
    for _ in range(n):
        lo = [data.draw(st.integers(0, s - 1)) for s in shape]
        hi = [data.draw(st.integers(a + 1, s)) for a, s in zip(lo, shape)]
        if data.draw(st.booleans()):  # full trailing dimensions, as fancy indexing gives
            lo[1:] = [0] * (len(shape) - 1)
            hi[1:] = list(shape[1:])
        slabs.append(Hyperslab.box(lo, hi))
    sel = Selection.union(shape, slabs, (sum(s.nelements() for s in slabs),))
    itemsize = data.draw(st.sampled_from([1, 4, 8]))
    lay = Contiguous(shape, itemsize, data.draw(st.integers(0, 4096)))
    assert flatten(lay, sel) == flatten_reference(lay, sel)
