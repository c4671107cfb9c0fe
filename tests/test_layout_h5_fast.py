"""The fast paths of patio.h5's reads, each against the slow path it replaces: selections
made from ints, slices and Ellipsis without h5py's parser (the same selection as h5py's
parser makes, reads equal to h5py's on the original, with and without replicas), the
knowledge base read at open without the database lock (the rows the locked read gives,
never a torn read under a concurrent writer), the decision without replicas (the
original, priced on demand as the core prices it), and memo keys of boolean masks."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import patio.h5 as ph5
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from patio.layout import device, h5sel, replicas
from patio.layout import kb as kbmod
from patio.layout.decide import Decider
from patio.layout.flatten import flatten, merge_sorted
from patio.layout.kb import KnowledgeBase
from patio.layout.selection import Selection
from patio.layout.storage import physical_layout

SHAPE = (7, 5, 6)


def basic_index(n: int) -> Any:
    """One index of an axis of length ``n`` as a user writes it, valid or not."""
    ints = st.integers(-n - 2, n + 1)
    return st.one_of(
        ints, ints.map(np.int64), ints.map(np.int32),
        st.builds(slice, st.one_of(st.none(), st.integers(-n - 2, n + 2)),
                  st.one_of(st.none(), st.integers(-n - 2, n + 2)),
                  st.one_of(st.none(), st.integers(-1, 4))),
        st.just(Ellipsis))


@st.composite
def basic_args(draw: Any, shape: tuple[int, ...]) -> tuple[Any, ...]:
    k = draw(st.integers(0, len(shape) + 1))
    return tuple(draw(basic_index(shape[min(i, len(shape) - 1)])) for i in range(k))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: Any) -> Any:
    path = tmp_path_factory.mktemp("fast") / "f.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.arange(np.prod(SHAPE), dtype="f8").reshape(SHAPE),
                         chunks=(2, 5, 3))
    with h5py.File(path, "r") as f:
        yield f["a"]


@settings(max_examples=400, deadline=None)
@given(args=basic_args(SHAPE))
def test_basic_index_is_the_selection_h5py_makes(dataset: Any, args: tuple[Any, ...]) -> None:
    """Whenever h5py selects something from ints, slices and Ellipsis, the selection made
    without its parser is its selection (same slabs, output shape, JSON and count); it
    is None exactly where h5py raises or selects nothing."""
    fast = Selection.from_basic_index(SHAPE, args)
    try:
        want, hsel = h5sel.select(dataset, args)
    except Exception:  # noqa: BLE001 - h5py's own error: patio must leave it to h5py
        assert fast is None
        return
    if hsel.nselect == 0:
        assert fast is None
        return
    assert fast is not None
    assert fast == want and fast.out_shape == want.out_shape
    assert fast.to_json() == want.to_json()
    assert fast.nelements() == want.nelements() == hsel.nselect


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reads=st.lists(basic_args(SHAPE), min_size=1, max_size=8), data=st.data())
def test_basic_reads_with_replicas_equal_h5py(tmp_path_factory: Any, reads: list[Any],
                                               data: Any) -> None:
    """Ints, slices and Ellipsis through patio.h5 over a transposed, a re-chunked and a
    concatenated replica: the value and type h5py returns (or h5py's error), whichever
    copy serves them, and the same again when repeated (the remembered decision)."""
    path = tmp_path_factory.mktemp("rep") / "r.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.arange(np.prod(SHAPE), dtype="f4").reshape(SHAPE))
    os.environ["PATIO_LAYOUT_DIR"] = str(path.parent / "kb")
    kb = KnowledgeBase(path)
    kb.set_setting("device", device.model_device("ssd"))
    kind = data.draw(st.sampled_from(["transposed", "chunked", "concat"]))
    if kind == "transposed":
        replicas.build(kb, str(path), "/a", "transposed", {"axes": [2, 0, 1]})
    elif kind == "chunked":
        replicas.build(kb, str(path), "/a", "chunked", {"chunk": [1, 5, 6]})
    else:
        sets = [np.arange(1, 6), np.arange(0, 5), np.array([0, 2, 3, 5])]
        sel = Selection.union(SHAPE, [], (0, 0, 0))
        replicas.build(kb, str(path), "/a", "concat", sel=sel, axes_sets=sets)
    kb.close()
    with h5py.File(path, "r") as hf, ph5.File(path) as pf:
        assert pf._session.decider(pf["a"]._d) is not None
        for args in reads + reads:
            try:
                want = hf["a"][args]
            except Exception as e:  # noqa: BLE001
                with pytest.raises(type(e)):
                    pf["a"][args]
                continue
            got = pf["a"][args]
            assert type(got) is type(want)
            assert np.shape(got) == np.shape(want) and np.array_equal(got, want)


def test_read_without_the_lock_gives_the_locked_rows(tmp_path: Path) -> None:
    p = tmp_path / "u.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("a", data=np.zeros((8, 8)))
        f.create_dataset("b", data=np.ones((8, 8)))
    os.environ["PATIO_LAYOUT_DIR"] = str(tmp_path / "kb")
    kb = KnowledgeBase(p)
    replicas.build(kb, str(p), "/a", "transposed", {"axes": [1, 0]})
    replicas.build(kb, str(p), "/b", "transposed", {"axes": [1, 0]})
    kb.set_state(kb.replicas()[1].id, "stale", "test")
    got = kbmod._read_unlocked(kb.path)
    assert got is not None
    version, rows = got
    assert str(version) == str(kbmod.SCHEMA_VERSION)
    assert rows == kb.replicas(state="ready") and [r.dset for r in rows] == ["/a"]
    # A journal beside the database (a write in progress, or a killed writer's): the
    # read is not trusted, and opening falls back to the locked read.
    journal = kb.path.with_name(kb.path.name + "-journal")
    journal.write_bytes(b"")
    assert kbmod._read_unlocked(kb.path) is None
    journal.unlink()
    # Read again unchanged: the same rows (copies: a caller's note stays its own); after
    # a commit, the database's rows again.
    again = kbmod._read_unlocked(kb.path)
    assert again is not None and again[1] == rows
    again[1][0].note = "changed by a caller"
    assert kbmod._read_unlocked(kb.path)[1] == rows  # type: ignore[index]
    kb.set_state(rows[0].id, "stale", "test")
    assert kbmod._read_unlocked(kb.path) == (version, [])
    kb.set_state(rows[0].id, "ready", None)
    kb.close()
    # The same bytes as a new file (a knowledge base removed and made again): the header
    # is the same, the state - the layout core's one rule - is not, so rows read from the
    # old file are not reused.
    before = kbmod._state(kb.path)
    copy = kb.path.with_name("kb.sqlite.copy")
    copy.write_bytes(kb.path.read_bytes())
    os.replace(copy, kb.path)
    after = kbmod._state(kb.path)
    assert before is not None and after is not None
    assert after[40:] == before[40:] and after != before
    opened = KnowledgeBase(p, ready=True)
    assert [r.id for r in opened.ready_rows or []] == [rows[0].id]
    opened.close()


ROWS = 128


def _writer(path: str, rounds: int) -> None:
    """Rewrites every replica row's note (a page each) in one transaction, ``rounds``
    times."""
    kb = KnowledgeBase.__new__(KnowledgeBase)
    kb.path = Path(path)
    kb.db = kbmod._connect(kb.path)
    for i in range(rounds):
        with kb.transaction() as db:
            db.execute("UPDATE replica SET note=?", (f"{i:06d}" * 600,))
    kb.db.close()


def torn_reads(tmp_path: Path, rounds: int) -> tuple[int, int, int]:
    """(trusted, refused, torn) unlocked reads while a writer rewrites ROWS rows of a
    page each together, ``rounds`` times."""
    tmp_path.mkdir()
    p = tmp_path / "w.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("a", data=np.zeros((8, 8)))
    os.environ["PATIO_LAYOUT_DIR"] = str(tmp_path / "kb")
    kb = KnowledgeBase(p)
    replicas.build(kb, str(p), "/a", "transposed", {"axes": [1, 0]})
    cols = ("dset, kind, params, sel, points, path, bytes, meta_bytes, state, source, "
            "created, last_used, uses, benefit, note")
    with kb.transaction() as db:
        while db.execute("SELECT COUNT(*) FROM replica").fetchone()[0] < ROWS:
            db.execute(f"INSERT INTO replica({cols}) SELECT {cols} FROM replica")
        db.execute("UPDATE replica SET note=?", ("x" * 3600,))
    path = kb.path
    kb.close()
    proc = multiprocessing.get_context("fork").Process(target=_writer,
                                                       args=(str(path), rounds))
    proc.start()
    trusted = refused = torn = 0
    deadline = time.monotonic() + 120
    while proc.is_alive() and time.monotonic() < deadline:
        kbmod._SEEN.clear()  # every read a read of the database, not of the last one
        got = kbmod._read_unlocked(path)
        if got is None:
            refused += 1
        elif len(got[1]) >= ROWS and len({r.note for r in got[1]}) == 1:
            trusted += 1
        else:
            torn += 1
    proc.join(10)
    assert proc.exitcode == 0
    return trusted, refused, torn


def test_read_without_the_lock_is_never_torn_by_a_writer(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A writer rewrites many rows (a page each) together, over and over, while the
    unlocked read runs: every read it trusts shows all rows from one commit, and enough
    of them are trusted for the fast path to matter. Without the header and journal
    checks the same reads are torn (the test can tell)."""
    trusted, _, torn = torn_reads(tmp_path / "checked", 300)
    assert torn == 0 and trusted > 0
    monkeypatch.setattr(kbmod, "_state", lambda path: b"")
    _, _, torn = torn_reads(tmp_path / "unchecked", 300)
    assert torn > 0


def test_decision_without_replicas_is_the_original_priced_on_demand(tmp_path: Path) -> None:
    p = tmp_path / "d.h5"
    with h5py.File(p, "w") as f:
        f.create_dataset("a", data=np.arange(4096.0).reshape(64, 64), chunks=(8, 64))
    kb_dev = device.model_device("lustre")
    os.environ["PATIO_LAYOUT_DIR"] = str(tmp_path / "kb")
    kb = KnowledgeBase(p)
    kb.set_setting("device", kb_dev)
    model, consts = device.load(kb)
    kb.close()
    with h5py.File(p, "r") as f:
        d = Decider(f["a"], [], model, consts)
        for args in [(slice(3, 40, 3), 5), (np.array([1, 7, 30]), slice(None))]:
            sel, _ = h5sel.select(f["a"], args)
            c = d.choose(sel)
            assert c.name == "original" and c.replica is None and c.saved == 0.0
            assert c.sources == [None]
            assert c.seconds == pytest.approx(d.candidates(sel)[0].seconds)
            want = merge_sorted(flatten(physical_layout(f["a"]), sel))
            (got,) = c.extents
            assert np.array_equal(got.offsets, want.offsets)
            assert np.array_equal(got.lengths, want.lengths)
            assert np.array_equal(c.run(), f["a"][args])


def test_mask_keys_tell_sparse_masks_apart() -> None:
    """Boolean masks are mostly zeros: keys of masks that differ in one element are
    unequal and (their whole bytes hashed) hash apart, so a memo of many masks finds
    each at once."""
    n = 1 << 15
    keys = []
    for i in range(0, n, n // 64):
        m = np.zeros(n, bool)
        m[i + 1] = True
        keys.append(ph5._args_key((m, slice(None))))
    assert len(set(keys)) == len(keys)
    assert len({hash(k) for k in keys}) == len(keys)
    m = np.zeros(n, bool)
    m[1] = True
    assert ph5._args_key((m, slice(None))) == keys[0]
