"""Tests for the Python bindings (``patio._native``, re-exported by ``patio``).

Property tests compare the Rust engine with plain-Python definitions: ``detect`` must
reproduce any int64 sequence, searches must agree with :func:`bisect.bisect_right`, and
``PatternMap`` / ``ExtentTable`` lookups must agree with a byte-by-byte reference model
of the same writes (later writes win). Codecs must round-trip, and damaged or crafted
bytes must raise ``ValueError`` - never crash the interpreter or raise a ``PanicException``.
"""

from __future__ import annotations

import bisect
import itertools
import os
import struct
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import patio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from patio import (
    LOOKUP_DATA,
    LOOKUP_HOLE,
    LOOKUP_UNMAPPED,
    ExtentTable,
    PatternMap,
    PatternSeq,
    PatternUnit,
    analyze_stream,
    detect,
    read_trace,
    write_trace_csv,
    write_trace_native,
)

I64_MIN, I64_MAX = -(2**63), 2**63 - 1
U64_MAX = 2**64 - 1
SETTINGS = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ----------------------------------------------------------------------- strategies

i64 = st.one_of(
    st.integers(I64_MIN, I64_MAX),
    st.sampled_from([I64_MIN, I64_MIN + 1, -1, 0, 1, I64_MAX - 1, I64_MAX]),
    st.integers(-1000, 1000),
)


def _clip(values: list[int]) -> list[int]:
    return [min(max(v, I64_MIN), I64_MAX) for v in values]


@st.composite
def patterned(draw: st.DrawFn) -> list[int]:
    """Concatenated runs the detector should compress: strided, repeated delta vectors,
    2-D strided, constant; with random literals between them."""
    out: list[int] = []
    for _ in range(draw(st.integers(0, 5))):
        kind = draw(st.sampled_from(["stride", "vector", "kd", "literal"]))
        start = draw(i64)
        if kind == "stride":
            d = draw(st.one_of(st.integers(-50, 50), i64))
            out += [start + i * d for i in range(draw(st.integers(1, 40)))]
        elif kind == "vector":
            ds = draw(st.lists(st.integers(-100, 100), min_size=1, max_size=6))
            v, run = start, [start]
            for _ in range(draw(st.integers(1, 8))):
                for d in ds:
                    v += d
                    run.append(v)
            out += run
        elif kind == "kd":
            rows, cols = draw(st.integers(1, 8)), draw(st.integers(1, 8))
            rs, cs = draw(st.integers(-1000, 1000)), draw(st.integers(-10, 10))
            out += [start + r * rs + c * cs for r in range(rows) for c in range(cols)]
        else:
            out += draw(st.lists(i64, max_size=5))
    return _clip(out)


int64_lists = st.one_of(st.lists(i64, max_size=120), patterned())


def _sorted_lists() -> st.SearchStrategy[list[int]]:
    return st.one_of(
        st.lists(i64, max_size=80).map(sorted),
        patterned().map(sorted),
        st.builds(
            lambda a, d, n: [a + i * d for i in range(n)],
            st.integers(-(10**6), 10**6),
            st.integers(0, 100),
            st.integers(0, 60),
        ),
    )


def _expand_unit(init: int, deltas: list[int], reps: int) -> list[int]:
    out = [init]
    if deltas and reps:
        for _ in range(reps):
            for d in deltas:
                out.append(out[-1] + d)
    return out


# ------------------------------------------------------------------------ PatternUnit


def test_unit_paper_example():
    u = PatternUnit(5, [2, 3], 2)
    assert repr(u) == str(u) == "[5, (2, 3)^2]"
    assert len(u) == 5 and list(u) == [5, 7, 10, 12, 15]
    assert u.to_numpy().tolist() == [5, 7, 10, 12, 15] and u.to_numpy().dtype == np.int64
    assert (u.init, u.deltas, u.reps, u.last) == (5, [2, 3], 2, 15)
    assert u[-1] == 15 and u[-5] == 5 and u[3] == 12
    for bad in (5, -6, 2**70, -(2**70)):
        with pytest.raises(IndexError):
            u[bad]
    with pytest.raises(TypeError):
        u[1.0]
    assert u.position_at_or_below(4) is None
    assert u.position_at_or_below(11) == 2
    assert u.position_at_or_below(10**18) == 4
    assert PatternUnit(0, [3, 4, 7], 2).predict_next(3) == [31, 35, 42]
    assert PatternUnit(7, [], 9).predict_next(3) == [] and len(PatternUnit(7, [], 9)) == 1
    assert repr(PatternUnit(7, [1], 0)) == "[7]"
    assert PatternUnit(5, [2, 3], 2) == u and hash(PatternUnit(5, [2, 3], 2)) == hash(u)


def test_unit_errors():
    with pytest.raises(ValueError, match="non-decreasing"):
        PatternUnit(9, [-3], 3).position_at_or_below(3)
    with pytest.raises(ValueError, match="64-bit range"):
        PatternUnit(I64_MAX - 1, [1], 2)
    with pytest.raises(ValueError, match="64-bit range"):
        PatternUnit(0, [2**62, 2**62], 2**62)
    with pytest.raises(ValueError, match="2\\^64"):
        PatternUnit(0, [0, 0], U64_MAX)
    with pytest.raises(OverflowError):
        PatternUnit(0, [1], -1)
    huge = PatternUnit(3, [0], U64_MAX - 1)  # 2^64 - 1 values
    with pytest.raises(OverflowError):
        len(huge)
    assert huge[U64_MAX - 1] == 3 and huge[-1] == 3
    with pytest.raises(MemoryError):
        huge.to_numpy()
    with pytest.raises(MemoryError):
        PatternUnit(0, [1], 3).predict_next(2**62)


@SETTINGS
@given(
    init=i64,
    deltas=st.lists(st.one_of(st.integers(-20, 20), i64), max_size=5),
    reps=st.one_of(st.integers(0, 12), st.sampled_from([2**40, U64_MAX])),
    probes=st.lists(i64, max_size=6),
)
def test_unit_matches_python_model(init, deltas, reps, probes):
    if deltas and reps > 12:  # too long to expand: only construction must not crash
        try:
            u = PatternUnit(init, deltas, reps)
        except ValueError:
            return
        assert u[0] == init
        return
    values = _expand_unit(init, deltas, reps)
    if any(not I64_MIN <= v <= I64_MAX for v in values):
        with pytest.raises(ValueError):
            PatternUnit(init, deltas, reps)
        return
    u = PatternUnit(init, deltas, reps)
    assert len(u) == len(values) and u.to_numpy().tolist() == values
    assert [u[i] for i in range(-len(values), len(values))] == values + values
    assert u.last == values[-1]
    if all(d >= 0 for d in deltas):
        for x in probes + values + [v - 1 for v in values]:
            x = min(max(x, I64_MIN), I64_MAX)
            i = bisect.bisect_right(values, x) - 1
            assert u.position_at_or_below(x) == (None if i < 0 else i)
    elif deltas and reps:
        with pytest.raises(ValueError):
            u.position_at_or_below(0)
    expected, v = [], values[-1]
    for j in range(7 if deltas and reps else 0):
        v += deltas[j % len(deltas)]
        if not I64_MIN <= v <= I64_MAX:
            break
        expected.append(v)
    assert u.predict_next(7) == expected


# ----------------------------------------------------------------- detect / PatternSeq


def test_detect_paper_figure_8():
    xs = [0, 3, 7, 14, 17, 21, 28, 31, 35, 42, 46, 50, 54, 58]
    seq = detect(np.array(xs, dtype=np.int64))
    assert seq.pieces() == ["[0, (3, 4, 7)^3]", "[46, (4)^3]"]
    assert seq.coverage == 1.0 and seq.is_sorted
    assert [str(u) for u in seq.units()] == seq.pieces()
    assert list(seq) == xs and seq[-1] == 58
    assert seq.position_at_or_below(20) == 4 and seq.position_at_or_below(-1) is None
    assert "PatternSeq(len=14" in repr(seq)
    kd = [1000 + i * 100 + j * 8 for i in range(50) for j in range(4)]
    assert detect(kd).pieces() == ["[1000, (100)^49 × (8)^3]"]
    empty = detect([])
    assert len(empty) == 0 and empty.pieces() == [] and empty.expand().tolist() == []
    assert empty.position_at_or_below(0) is None and empty.coverage == 1.0


@SETTINGS
@given(xs=int64_lists, window=st.integers(1, 40))
def test_detect_expand_is_identity(xs, window):
    seq = detect(xs, window=window)
    out = seq.expand()
    assert out.dtype == np.int64 and out.tolist() == xs
    assert len(seq) == len(xs)
    assert detect(np.array(xs, dtype=np.int64), window) == seq
    for i in range(0, len(xs), max(1, len(xs) // 10)):
        assert seq[i] == xs[i] and seq[i - len(xs)] == xs[i]
    with pytest.raises(IndexError):
        seq[len(xs)]
    assert 0.0 <= seq.coverage <= 1.0
    back = PatternSeq.decode(seq.encode())
    assert back == seq and back.expand().tolist() == xs and back.pieces() == seq.pieces()


@SETTINGS
@given(xs=_sorted_lists(), probes=st.lists(i64, max_size=8), window=st.integers(1, 40))
def test_position_at_or_below_matches_bisect(xs, probes, window):
    seq = detect(xs, window=window)
    assert seq.is_sorted
    for x in probes + xs + [x + 1 for x in xs if x < I64_MAX] + [x - 1 for x in xs if x > I64_MIN]:
        i = bisect.bisect_right(xs, x) - 1
        assert seq.position_at_or_below(x) == (None if i < 0 else i), x


def test_unsorted_sequences_refuse_search():
    seq = detect([5, 3, 9])
    assert not seq.is_sorted
    with pytest.raises(ValueError, match="non-decreasing"):
        seq.position_at_or_below(4)
    with pytest.raises(ValueError, match="window"):
        detect([1, 2, 3], window=0)


@SETTINGS
@given(xs=int64_lists, data=st.data())
def test_seq_corrupt_bytes_raise_value_error(xs, data):
    blob = detect(xs).encode()
    for cut in range(len(blob)):
        with pytest.raises(ValueError):
            PatternSeq.decode(blob[:cut])
    with pytest.raises(ValueError):
        PatternSeq.decode(blob + b"\x00")
    pos = data.draw(st.integers(0, len(blob) - 1))
    flipped = bytearray(blob)
    flipped[pos] ^= data.draw(st.integers(1, 255))
    _decode_seq_or_value_error(bytes(flipped))


@SETTINGS
@given(blob=st.binary(max_size=64))
def test_seq_random_bytes_never_crash(blob):
    _decode_seq_or_value_error(blob)


def _decode_seq_or_value_error(blob: bytes) -> None:
    """Decoding either fails with ValueError or gives a sequence whose queries work."""
    try:
        seq = PatternSeq.decode(blob)
    except ValueError as e:
        assert "patio-core bug" not in str(e), e
        return
    n = seq.__len__() if len(blob) else 0
    for i in (0, 1, n // 2, n - 1):
        if 0 <= i < n:
            seq[i]
    if seq.is_sorted:
        for x in (I64_MIN, -1, 0, 1, I64_MAX):
            seq.position_at_or_below(x)
    seq.pieces()
    assert PatternSeq.decode(seq.encode()) == seq
    if n <= 10**6:
        assert seq.expand().shape == (n,)


def test_seq_expansion_too_large_is_memory_error():
    # One node [0, (0)^(2^62)]: 2^62 + 1 values in a few bytes.
    seq = detect([7, 7, 7, 7])
    assert seq.pieces() == ["[7, (0)^3]"]
    blob = seq.encode()
    assert blob.endswith(b"\x03\x0e")  # reps 3, then init 7 (zigzag 14)
    huge = PatternSeq.decode(blob[:-2] + b"\x80\x80\x80\x80\x80\x80\x80\x80\x40" + b"\x0e")
    assert huge[2**62] == 7 and huge.pieces() == ["[7, (0)^4611686018427387904]"]
    assert len(huge) == 2**62 + 1
    with pytest.raises(MemoryError):
        huge.expand()


# ------------------------------------------------------------------- input conversion


@SETTINGS
@given(
    xs=st.lists(st.integers(0, 100), max_size=40),
    dtype=st.sampled_from(
        [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64, ">i8"]
    ),
)
def test_integer_dtypes_are_converted(xs, dtype):
    arr = np.array(xs, dtype=dtype)
    assert detect(arr).expand().tolist() == xs
    assert detect(arr[::2]).expand().tolist() == xs[::2]
    assert detect(np.array(xs, dtype=object)).expand().tolist() == xs
    table = ExtentTable.build(arr, arr, arr, arr)
    assert table == ExtentTable.build(xs, xs, xs, xs)


def test_wrong_inputs_are_clear_errors():
    with pytest.raises(TypeError, match="dtype float64"):
        detect(np.array([1.0, 2.0]))
    with pytest.raises(TypeError, match="dtype bool"):
        detect(np.array([True, False]))
    with pytest.raises(TypeError, match=r"values\[1\] must be an int"):
        detect([1, 2.5])
    with pytest.raises(TypeError):
        detect("123")
    with pytest.raises(TypeError, match="sequence of ints"):
        detect(5)
    with pytest.raises(ValueError, match="one-dimensional"):
        detect(np.zeros((2, 2), dtype=np.int64))
    with pytest.raises(OverflowError, match=r"values\[0\]"):
        detect(np.array([2**63], dtype=np.uint64))
    with pytest.raises(OverflowError):
        detect([2**63])
    assert detect(np.array([I64_MAX], dtype=np.uint64)).expand().tolist() == [I64_MAX]
    with pytest.raises(OverflowError, match=r"logical\[1\] = -1"):
        PatternMap.build(np.array([0, -1]), [1, 1], [0, 0], [0, 0])
    with pytest.raises(ValueError, match="differ in length"):
        PatternMap.build([0, 10], [1], [0, 0], [0, 0])
    with pytest.raises(ValueError, match="differ in length"):
        analyze_stream([0, 1], [1])
    with pytest.raises(TypeError, match="dtype float64"):
        PatternMap.build(np.zeros(2), np.ones(2), np.zeros(2), np.zeros(2))
    with pytest.raises(TypeError):
        PatternMap.decode("not bytes")


# ----------------------------------------------------------------------------- maps


@st.composite
def extent_lists(draw: st.DrawFn) -> list[tuple[int, int, int, int]]:
    """Writes in order: N-1 strided rounds, random (possibly overlapping) writes, writes
    that continue the previous one, or a mix."""
    mode = draw(st.sampled_from(["strided", "random", "disjoint", "mixed"]))
    out: list[tuple[int, int, int, int]] = []
    if mode in ("strided", "mixed"):
        writers, block = draw(st.integers(1, 4)), draw(st.integers(1, 48))
        gap, rounds = draw(st.integers(0, 20)), draw(st.integers(1, 10))
        for i in range(rounds):
            for w in range(writers):
                out.append(((i * writers + w) * (block + gap), block, i * block, w))
    if mode in ("random", "mixed"):
        for _ in range(draw(st.integers(0, 25))):
            if out and draw(st.booleans()):
                lo, n, p, c = out[-1]
                out.append((lo + n, draw(st.integers(0, 64)), p + n, c))  # continues
            else:
                out.append(
                    (
                        draw(st.integers(0, 2000)),
                        draw(st.integers(0, 200)),
                        draw(st.integers(0, 2**40)),
                        draw(st.integers(0, 3)),
                    )
                )
    if mode == "disjoint":
        at = 0
        for _ in range(draw(st.integers(0, 25))):
            at += draw(st.integers(0, 50))
            n = draw(st.integers(1, 60))
            out.append((at, n, draw(st.integers(0, 2**40)), draw(st.integers(0, 3))))
            at += n
        out = draw(st.permutations(out))
    return out


def _model(extents: list[tuple[int, int, int, int]], size: int) -> list[tuple[int, ...]]:
    """Reference model: the answer at every offset in [0, size], from a per-byte owner
    array in which later writes overwrite earlier ones."""
    chunk: list[int | None] = [None] * size
    phys = [0] * size
    for lo, n, p, c in extents:
        for j in range(n):
            chunk[lo + j], phys[lo + j] = c, p + j
    answers: list[tuple[int, ...]] = [("unmapped",)] * (size + 1)
    next_data, run = None, 0
    for x in reversed(range(size)):
        if chunk[x] is None:
            answers[x] = ("hole", next_data - x) if next_data is not None else ("unmapped",)
            continue
        continues = x + 1 < size and chunk[x + 1] == chunk[x] and phys[x + 1] == phys[x] + 1
        run = run + 1 if continues else 1
        answers[x] = ("data", chunk[x], phys[x], run)
        next_data = x
    return answers


def _columns(extents, base=0):
    cols = list(zip(*extents)) if extents else [(), (), (), ()]
    logical = np.array([base + v for v in cols[0]], dtype=np.uint64)
    return (logical, *(np.array(c, dtype=np.uint64) for c in cols[1:]))


def _as_tuples(many: dict[str, np.ndarray]) -> list[tuple[int, ...]]:
    out = []
    for k, c, p, n in zip(*(many[f].tolist() for f in ("kind", "chunk", "physical", "length"))):
        if k == LOOKUP_DATA:
            out.append(("data", c, p, n))
        elif k == LOOKUP_HOLE:
            assert c == p == 0
            out.append(("hole", n))
        else:
            assert k == LOOKUP_UNMAPPED and c == p == n == 0
            out.append(("unmapped",))
    return out


@SETTINGS
@given(
    extents=extent_lists(),
    window=st.integers(1, 40),
    base=st.sampled_from([0, 12345, 2**62, 2**63 - 5000]),
)
def test_maps_match_reference_model(extents, window, base):
    size = max((lo + n for lo, n, _, _ in extents), default=0)
    expected = _model(extents, size)
    cols = _columns(extents, base)
    pmap = PatternMap.build(*cols, window=window)
    table = ExtentTable.build(*cols)
    mapped = [x for x in range(size) if expected[x][0] == "data"]
    first = base + mapped[0] if mapped else None
    end = base + mapped[-1] + 1 if mapped else 0
    assert pmap.end == table.end == end

    offsets = np.arange(base, base + size + 1, dtype=np.uint64)
    for m in (pmap, table):
        assert _as_tuples(m.lookup_many(offsets)) == expected
    # Scalar lookups at every extent boundary.
    for lo, n, _, _ in extents:
        for x in {lo - 1, lo, lo + n - 1, lo + n, lo + n + 1}:
            if 0 <= x <= size:
                assert pmap.lookup(base + x) == table.lookup(base + x) == expected[x]
    # Before the base, and far past the end.
    before = [0, base - 1] if base else []
    after = [base + size + 7, 2**63 - 1, 2**63, U64_MAX]
    for x in before + after:
        want = ("hole", first - x) if first is not None and x < first else ("unmapped",)
        assert pmap.lookup(x) == table.lookup(x) == want, x
    both = np.array(before + after, dtype=np.uint64)
    assert _as_tuples(pmap.lookup_many(both)) == _as_tuples(table.lookup_many(both))

    # Both normalise the writes the same way.
    for a, b in zip(pmap.extents(), table.extents()):
        assert a.dtype == np.uint64 and a.tolist() == b.tolist()
    assert pmap.stats()["extents"] == len(table)
    assert len(pmap.describe()) == pmap.stats()["entries"]

    # Codecs round-trip.
    assert PatternMap.decode(pmap.encode()) == pmap
    assert ExtentTable.decode(table.encode()) == table
    again = PatternMap.decode(pmap.encode())
    assert _as_tuples(again.lookup_many(offsets)) == expected


def test_map_n1_strided_is_one_entry():
    writers, rounds, block = 64, 100, 4096
    i, w = np.divmod(np.arange(writers * rounds, dtype=np.uint64), np.uint64(writers))
    logical = (i * writers + w) * block
    pmap = PatternMap.build(logical, np.full_like(logical, block), i * block, w)
    stats = pmap.stats()
    assert stats["entries"] == 1 and stats["extents"] == writers * rounds
    assert stats["encoded_bytes"] < 80
    assert pmap.lookup(block * 65 + 10) == ("data", 1, block + 10, block - 10)
    assert pmap.lookup(pmap.end) == ("unmapped",)
    table = ExtentTable.build(logical, np.full_like(logical, block), i * block, w)
    probe = np.arange(0, pmap.end + 100, 997, dtype=np.uint64)
    assert _as_tuples(pmap.lookup_many(probe)) == _as_tuples(table.lookup_many(probe))
    assert "PatternMap(entries=1" in repr(pmap) and "ExtentTable(extents=" in repr(table)


def test_map_limits():
    # Logical ends must stay below 2^63 for the pattern map; the table takes the full range.
    with pytest.raises(ValueError, match="2\\^63"):
        PatternMap.build([2**63 - 1], [2], [0], [0])
    assert ExtentTable.build([2**63], [10], [0], [0]).lookup(2**63 + 3) == ("data", 0, 3, 7)
    # Ranges that wrap past 2^64 are refused, logically or physically.
    with pytest.raises(ValueError, match="2\\^64"):
        ExtentTable.build([U64_MAX - 1], [5], [0], [0])
    with pytest.raises(ValueError, match="physical"):
        PatternMap.build([0], [10], [U64_MAX - 5], [0])
    with pytest.raises(ValueError, match="2\\^64"):
        PatternMap.build([0], [10], [U64_MAX - 9], [0])
    top = PatternMap.build([0, 100], [10, 10], [U64_MAX - 10, 0], [U64_MAX, 0])
    assert top.lookup(3) == ("data", U64_MAX, U64_MAX - 7, 7)
    assert top.lookup(50) == ("hole", 50)
    with pytest.raises(OverflowError):
        top.lookup(-1)
    with pytest.raises(ValueError, match="window"):
        PatternMap.build([0], [1], [0], [0], window=0)
    empty = PatternMap.build([], [], [], [])
    assert empty.lookup(0) == ("unmapped",) and empty.end == 0
    assert [c.tolist() for c in empty.extents()] == [[], [], [], []]
    assert PatternMap.decode(empty.encode()) == empty


@SETTINGS
@given(extents=extent_lists(), data=st.data())
def test_map_corrupt_bytes_raise_value_error(extents, data):
    cols = _columns(extents)
    for cls in (PatternMap, ExtentTable):
        m = cls.build(*cols)
        blob = m.encode()
        cuts = data.draw(st.lists(st.integers(0, len(blob) - 1), min_size=1, max_size=8))
        for cut in cuts + [0, 19, len(blob) - 1]:
            with pytest.raises(ValueError):
                cls.decode(blob[: max(cut, 0)])
        pos = data.draw(st.integers(0, len(blob) - 1))
        flipped = bytearray(blob)
        flipped[pos] ^= data.draw(st.integers(1, 255))
        with pytest.raises(ValueError):
            cls.decode(bytes(flipped))


# CRC32C (Castagnoli), to craft blobs whose checksum is valid around a damaged payload.
_CRC_TABLE = []
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _reblob(blob: bytes, payload: bytes) -> bytes:
    return blob[:8] + struct.pack("<QI", len(payload), _crc32c(payload)) + payload


def test_crc32c_matches_the_core():
    m = PatternMap.build([0, 10], [5, 5], [0, 5], [0, 0])
    blob = m.encode()
    assert _reblob(blob, blob[20:]) == blob


@SETTINGS
@given(extents=extent_lists(), data=st.data())
def test_crafted_blobs_with_valid_checksums_never_crash(extents, data):
    """Damage the payload, fix up length and checksum: decoding must still either fail
    with ValueError or give a map whose lookups work."""
    cols = _columns(extents)
    for cls in (PatternMap, ExtentTable):
        blob = cls.build(*cols).encode()
        payload = bytearray(blob[20:])
        for _ in range(data.draw(st.integers(1, 3))):
            op = data.draw(st.sampled_from(["flip", "insert", "delete"]))
            pos = data.draw(st.integers(0, len(payload)))
            if op == "insert" or not payload:
                payload[pos:pos] = data.draw(st.binary(min_size=1, max_size=4))
            elif op == "delete":
                del payload[min(pos, len(payload) - 1)]
            else:
                payload[min(pos, len(payload) - 1)] ^= data.draw(st.integers(1, 255))
        try:
            m = cls.decode(_reblob(blob, bytes(payload)))
        except ValueError:  # includes the guard's message for a core panic, see below
            continue
        probes = [0, 1, 4095, 4096, 2**40, 2**63 - 1, 2**63, U64_MAX]
        for x in probes:
            m.lookup(x)
        m.lookup_many(np.array(probes, dtype=np.uint64))
        assert m.end >= 0
        if cls is PatternMap:
            m.describe()
            m.stats()


def test_empty_literal_runs_are_refused():
    # Piece count 1, literal tag 0, 0 values: never written by an encoder.
    with pytest.raises(ValueError, match="empty literal run"):
        PatternSeq.decode(b"\x01\x00\x00")


def test_map_with_empty_literal_run_is_a_plain_value_error():
    # One entry whose logical piece is an empty literal run, three empty columns.
    payload = b"\x01" + b"\x01\x00\x00" + b"\x00\x00\x00"
    with pytest.raises(ValueError) as e:
        PatternMap.decode(_reblob(b"PMAP\x01\x00\x00\x00", payload))
    assert "patio-core bug" not in str(e.value)


@SETTINGS
@given(payload=st.binary(max_size=48))
def test_random_payloads_with_valid_checksums_never_crash(payload):
    for cls, magic in ((PatternMap, b"PMAP"), (ExtentTable, b"PXTB")):
        blob = _reblob(magic + b"\x01\x00\x00\x00" + bytes(12), payload)
        try:
            m = cls.decode(blob)
        except ValueError as e:
            assert "patio-core bug" not in str(e), e
            continue
        for x in (0, 1, 2**63, U64_MAX):
            m.lookup(x)


def test_lookup_many_from_threads():
    n = 20_000
    logical = np.arange(n, dtype=np.uint64) * 16
    pmap = PatternMap.build(logical, np.full(n, 8, np.uint64), logical // 2, logical % 3)
    probe = np.arange(0, n * 16 + 32, 3, dtype=np.uint64)
    want = pmap.lookup_many(probe)
    results: list[dict] = []

    def work() -> None:
        results.append(pmap.lookup_many(probe))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4
    for r in results:
        for k in want:
            assert np.array_equal(r[k], want[k])


# ------------------------------------------------------------------------- analysis


def test_analyze_stream():
    a = analyze_stream(np.arange(0, 1000, 10, dtype=np.uint64), [10] * 100)
    assert set(a) == {"requests", "kind", "signature", "length_signature", "coverage", "segments"}
    assert a["requests"] == 100 and a["kind"] == "contiguous" and a["coverage"] == 1.0
    strided = analyze_stream(np.arange(0, 1000, 10), np.full(100, 4, dtype=np.int32))
    assert strided["kind"] == "strided" and strided["signature"] == "[0, (10)^99]"
    assert strided["length_signature"] == "[4, (0)^99]"
    kd = [r * 10_000 + c * 64 for r in range(20) for c in range(50)]
    assert analyze_stream(kd, [8] * 1000)["kind"] == "kd-strided"
    rng = np.random.default_rng(7)
    rand = analyze_stream(rng.integers(0, 10**9, 300, dtype=np.uint64), [1] * 300)
    assert rand["kind"] == "irregular"
    segs = rand["segments"]
    assert segs[0][0] == 0 and segs[-1][1] == 300
    assert all(a[1] == b[0] for a, b in itertools.pairwise(segs))
    assert analyze_stream([], [])["requests"] == 0


# ---------------------------------------------------------------------------- traces

_names = st.text(alphabet=st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12)


@st.composite
def trace_streams(draw: st.DrawFn) -> list[dict]:
    streams = []
    for _ in range(draw(st.integers(0, 4))):
        n = draw(st.integers(0, 30))
        if draw(st.booleans()):
            offsets = draw(st.lists(st.integers(0, 2**63), min_size=n, max_size=n))
        else:
            a, d = draw(st.integers(0, 2**40)), draw(st.integers(0, 2**20))
            offsets = [a + i * d for i in range(n)]
        lengths = draw(st.lists(st.integers(0, 2**32), min_size=n, max_size=n))
        starts = draw(st.lists(st.floats(0, 1e4, allow_nan=False), min_size=n, max_size=n))
        streams.append(
            {
                "module": draw(st.sampled_from(["POSIX", "MPIIO", "STDIO"])),
                "file": draw(st.one_of(_names, st.sampled_from(['/data/a,"b".h5', "/x"]))),
                "rank": draw(st.integers(-1, 5)),
                "op": draw(st.sampled_from(["read", "write"])),
                "offset": np.array(offsets, dtype=np.uint64),
                "length": lengths,
                "start": np.array(starts),
                "end": np.array(starts) + 0.25,
            }
        )
    return streams


def _normalised(streams: list[dict]) -> list[dict]:
    """What the trace model makes of streams: equal keys merged, keys sorted, records
    stably sorted by start time, empty streams dropped."""
    merged: dict[tuple, dict[str, list]] = {}
    for s in streams:
        key = (s["module"], s["file"], s["rank"], s["op"])
        m = merged.setdefault(key, {f: [] for f in ("offset", "length", "start", "end")})
        for f in m:
            m[f].extend(np.asarray(s[f]).tolist())
    out = []
    for key in sorted(merged):
        m = merged[key]
        if not m["offset"]:
            continue
        order = np.argsort(np.array(m["start"]), kind="stable")
        rec = dict(zip(("module", "file", "rank", "op"), key))
        for f in m:
            rec[f] = [m[f][i] for i in order]
        out.append(rec)
    return out


def _assert_same_streams(got: list[dict], want: list[dict], time_tol: float) -> None:
    assert [(s["module"], s["file"], s["rank"], s["op"]) for s in got] == [
        (s["module"], s["file"], s["rank"], s["op"]) for s in want
    ]
    for g, w in zip(got, want):
        assert g["offset"].dtype == g["length"].dtype == np.uint64
        assert g["start"].dtype == g["end"].dtype == np.float64
        assert g["offset"].tolist() == list(w["offset"])
        assert g["length"].tolist() == list(w["length"])
        for f in ("start", "end"):
            assert np.allclose(g[f], w[f], rtol=0, atol=time_tol)


@SETTINGS
@given(streams=trace_streams())
def test_trace_round_trips(streams):
    with tempfile.TemporaryDirectory() as d:
        want = _normalised(streams)
        csv_path, native_path = Path(d) / "t.csv", Path(d) / "t.ptrace"
        write_trace_csv(streams, csv_path)
        got, damage = read_trace(csv_path)
        assert damage is None
        _assert_same_streams(got, want, 0.0)
        write_trace_native(streams, str(native_path), window=8)
        got, damage = read_trace(native_path)
        assert damage is None
        _assert_same_streams(got, want, 1e-9)
        again, _ = read_trace(native_path, format="native")
        _assert_same_streams(again, want, 1e-9)


def test_trace_damage_and_errors(tmp_path):
    streams = [
        {
            "module": "POSIX",
            "file": f"/f{k}",
            "rank": k,
            "op": "write",
            "offset": np.arange(50, dtype=np.uint64) * 8192,
            "length": np.full(50, 4096, dtype=np.uint64),
            "start": np.arange(50) * 0.5,
            "end": np.arange(50) * 0.5 + 0.25,
        }
        for k in range(2)
    ]
    path = tmp_path / "t.ptrace"
    write_trace_native(streams, path)
    raw = path.read_bytes()
    (tmp_path / "cut.ptrace").write_bytes(raw[:-3])
    got, damage = read_trace(tmp_path / "cut.ptrace")
    assert len(got) == 1 and got[0]["file"] == "/f0"
    assert "dropped everything from byte" in damage
    (tmp_path / "bad.ptrace").write_bytes(b"nope" + raw[4:])
    with pytest.raises(ValueError, match="bad.ptrace.*magic"):
        read_trace(tmp_path / "bad.ptrace")
    (tmp_path / "bad.csv").write_text(
        "module,file,rank,op,offset,length,start,end\nPOSIX,f,0,x,1,2,0,1\n"
    )
    with pytest.raises(ValueError, match="bad.csv:2:.*op"):
        read_trace(tmp_path / "bad.csv")
    with pytest.raises(FileNotFoundError):
        read_trace(tmp_path / "missing.csv")
    with pytest.raises(FileNotFoundError):
        write_trace_csv(streams, tmp_path / "no" / "dir.csv")
    with pytest.raises(ValueError, match="format"):
        read_trace(path, format="json")

    def bad(**change):
        s = dict(streams[0], **change)
        return [s]

    with pytest.raises(ValueError, match=r'streams\[0\].op must be "read" or "write"'):
        write_trace_csv(bad(op="append"), tmp_path / "x.csv")
    with pytest.raises(ValueError, match="differ in length"):
        write_trace_csv(bad(end=np.zeros(3)), tmp_path / "x.csv")
    with pytest.raises(ValueError, match="non-finite"):
        write_trace_csv(bad(start=np.full(50, np.nan)), tmp_path / "x.csv")
    with pytest.raises(ValueError, match="beyond 2\\^64"):
        write_trace_csv(bad(offset=np.full(50, U64_MAX, dtype=np.uint64)), tmp_path / "x.csv")
    with pytest.raises(ValueError, match='no field "rank"'):
        write_trace_csv([{k: v for k, v in streams[0].items() if k != "rank"}], tmp_path / "x.csv")
    with pytest.raises(TypeError, match="single mapping"):
        write_trace_csv(streams[0], tmp_path / "x.csv")


def test_dxt_streams_are_written_as_they_are(tmp_path):
    from patio.dxt import Stream

    s = Stream(
        module="MPIIO",
        file="/scratch/out.h5",
        rank=3,
        op="read",
        offset=np.array([0, 4096, 8192], dtype=np.uint64),
        length=np.array([4096, 4096, 4096], dtype=np.uint64),
        start=np.array([0.1, 0.2, 0.3]),
        end=np.array([0.15, 0.25, 0.35]),
    )
    write_trace_native([s], tmp_path / "d.ptrace")
    (got,), damage = read_trace(tmp_path / "d.ptrace")
    assert damage is None
    assert (got["module"], got["file"], got["rank"], got["op"]) == s.key
    assert got["offset"].tolist() == s.offset.tolist()
    assert np.allclose(got["end"], s.end, rtol=0, atol=1e-9)


_TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
_SMALL_LOGS = [p for p in sorted(_TRACES.glob("*.darshan")) if p.stat().st_size < 250_000]


@pytest.mark.parametrize("log", _SMALL_LOGS, ids=lambda p: p.stem)
def test_real_dxt_logs_round_trip_natively(log, tmp_path):
    pytest.importorskip("darshan")
    from patio.dxt import DxtError, read_dxt

    try:
        streams = read_dxt(log)
    except DxtError as e:
        pytest.skip(f"no DXT data: {e}")
    out = tmp_path / "log.ptrace"
    write_trace_native(streams, out)
    got, damage = read_trace(out)
    assert damage is None
    want = [
        {
            f: getattr(s, f)
            for f in ("module", "file", "rank", "op", "offset", "length", "start", "end")
        }
        for s in streams
    ]
    _assert_same_streams(got, _normalised(want), 1e-9)


# ---------------------------------------------------------------------------- package


def test_package_exports():
    for name in patio._NATIVE_NAMES:
        assert name in patio.__all__ and getattr(patio, name) is getattr(patio._native, name)
    assert patio._native.__version__ == patio.__version__
    assert patio.DEFAULT_WINDOW == 32


def test_missing_extension_is_a_clear_import_error():
    code = (
        "import sys; sys.modules['patio._native'] = None\n"
        "import patio, patio.dxt\n"
        "assert patio.__all__ == ['__version__'], patio.__all__\n"
        "try:\n"
        "    patio.detect\n"
        "except ImportError as e:\n"
        "    assert 'patio._native' in str(e) and 'maturin' in str(e), e\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
        "try:\n"
        "    from patio import PatternMap\n"
        "except ImportError:\n"
        "    pass\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
        "try:\n"
        "    patio.nonexistent\n"
        "except AttributeError:\n"
        "    pass\n"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "python"), env.get("PYTHONPATH", "")]
    )
    r = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, env=env
    )
    assert r.returncode == 0, r.stderr + r.stdout
