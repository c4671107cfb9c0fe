"""patio.h5's dataset and group wrappers kept per file opened read-only (``f[name]``
again returns the wrapper made the first time, without HDF5's lookup), against h5py
looking every name up anew; and the timing helpers of the kernels' recording column
(:func:`patio.layout.overhead.read_pair`, :func:`~patio.layout.overhead.record_overhead`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import patio.h5 as ph5
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from patio.layout.kb import KnowledgeBase
from patio.layout.overhead import read_pair, record_overhead

NAMES = ["a", "/a", "g", "/g", "g/b", "/g/b", "g/h", "g/h/c", "missing", "g/missing", "/"]
IN_G = ["b", "/a", "h", "h/c", "missing"]


@pytest.fixture()
def h5file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("PATIO_LAYOUT_DIR", str(tmp_path / "kb"))
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.arange(24.0).reshape(4, 6)
        f["g/b"] = np.arange(10, dtype="i4")
        f["g/h/c"] = np.ones((3, 3), "f4")
    return str(path)


def _same(got: Any, want: Any) -> None:
    """A patio.h5 object and an h5py object are the same dataset or group."""
    assert type(got).__name__ == type(want).__name__ or isinstance(want, h5py.Group)
    assert got.name == want.name
    if isinstance(want, h5py.Dataset):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got[()], want[()])
    else:
        assert sorted(got.keys()) == sorted(want.keys())


def _lookup(obj: Any, name: str) -> tuple[str, Any]:
    try:
        return "ok", obj[name]
    except Exception as e:  # noqa: BLE001 - the error type is compared with h5py's
        return "error", type(e)


def test_lookups_again_return_the_same_wrapper(h5file: str) -> None:
    with ph5.File(h5file) as f, h5py.File(h5file) as h:
        a = f["a"]
        assert f["a"] is a
        assert f["/a"] is not a and f["/a"].name == a.name  # another name, its own entry
        g = f["g"]
        assert f["g"] is g
        assert g["b"] is g["b"] and g["b"] is not f["g/b"]
        np.testing.assert_array_equal(f["g/b"][2:5], h["g/b"][2:5])
        np.testing.assert_array_equal(a[1:3, ::2], h["a"][1:3, ::2])


def test_closing_invalidates_the_wrappers(h5file: str) -> None:
    f = ph5.File(h5file)
    f["a"]
    f.close()
    h = h5py.File(h5file)
    h.close()
    want = _lookup(h, "a")
    got = _lookup(f, "a")
    assert want[0] == "error" and got == want


def test_files_opened_for_writing_look_names_up_anew(h5file: str) -> None:
    with ph5.File(h5file, "r+") as f:
        a = f["a"]
        assert f["a"] is not a
        f["a"][0, 0] = 99.0
        del f._f["g/b"]
        f._f["g/b"] = np.zeros(3)
        assert f["a"][0, 0] == 99.0
        np.testing.assert_array_equal(f["g/b"][()], np.zeros(3))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.tuples(st.booleans(), st.sampled_from(NAMES + IN_G)), max_size=40),
       cache=st.integers(1, 8))
def test_any_lookups_equal_h5py(h5file: str, monkeypatch: pytest.MonkeyPatch,
                                names: list[tuple[bool, str]], cache: int) -> None:
    """Any sequence of lookups, from the file or from group ``g``, with a cache of
    ``cache`` entries: every answer is h5py's (the object, or the error type)."""
    monkeypatch.setattr(ph5, "WRAPPER_CACHE", cache)
    with ph5.File(h5file) as f, h5py.File(h5file) as h:
        for from_group, name in names:
            got = _lookup(f["g"] if from_group else f, name)
            want = _lookup(h["g"] if from_group else h, name)
            assert got[0] == want[0], name
            if want[0] == "ok":
                _same(got[1], want[1])
            else:
                assert got[1] is want[1]
            assert len(f._session.wrappers or {}) <= cache


def test_read_pair_times_each_side_in_alternating_order() -> None:
    order: list[str] = []

    def slow() -> None:
        order.append("h5py")
        time.sleep(0.004)

    def fast() -> None:
        order.append("patio")

    for i in range(4):
        h, p = read_pair(slow, fast, i)
        assert h >= 0.004 > p
    assert order == ["patio", "h5py", "h5py", "patio"] * 2


def test_record_overhead_records_the_draw_once(h5file: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    kbdir = str(tmp_path / "kb-record")
    monkeypatch.setenv("PATIO_LAYOUT_DIR", kbdir)
    reads = [(slice(i, i + 2), slice(None)) for i in range(3)]
    out = record_overhead(h5file, "/a", reads, kbdir, passes=3)
    assert set(out) == {"per_read_s", "per_open_s", "paired_s", "record_s"}
    assert all(np.isfinite(v) and abs(v) < 5.0 for v in out.values())
    assert out["paired_s"] == pytest.approx(out["per_read_s"] + out["per_open_s"] / 3)
    assert out["record_s"] > 0
    with KnowledgeBase(h5file) as kb:  # the first pass's records, the others elsewhere
        kb.merge()
        assert kb.raw_rows() + sum(p.reads for p in kb.patterns()) == len(reads)


def test_own_time_leaves_out_h5py_reads_and_lookups(h5file: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """h5py's data reads and lookups slowed by 20 ms each: patio.h5's own time stays
    below one of them, while the reads take their whole time; its own work is counted
    (a read through the general path, a lookup, the open and close)."""
    slow_get = h5py.Dataset.__getitem__
    slow_lookup = h5py.Group.__getitem__

    def delayed(fn: Any) -> Any:
        def run(*a: Any, **kw: Any) -> Any:
            time.sleep(0.02)
            return fn(*a, **kw)
        return run

    with ph5.File(h5file) as f:
        monkeypatch.setattr(h5py.Dataset, "__getitem__", delayed(slow_get))
        monkeypatch.setattr(h5py.Group, "__getitem__", delayed(slow_lookup))
        t0 = time.perf_counter()
        before = f._session.own_s
        f["a"][1:3, 2]  # basic path: h5py's read
        f["g/b"][np.array([1, 4, 5])]  # general path: patio's parse, h5py's read
        elapsed = time.perf_counter() - t0
        own = f._session.own_s - before
        assert elapsed >= 0.06 and 0 < own < 0.02
        monkeypatch.undo()
    assert f._session.own_s > own
