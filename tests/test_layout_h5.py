"""patio.h5 and patio.layout against h5py on the original: every read plan of every
replica kind returns what h5py returns (hypothesis), the knowledge base under
concurrent recorders, crash-safe builds, stale replicas never served, the budget."""

from __future__ import annotations

import io
import multiprocessing
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import patio.h5 as ph5
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from patio.layout import device, h5sel, planner, replicas
from patio.layout import kb as kbmod
from patio.layout.decide import Decider
from patio.layout.kb import KnowledgeBase, KnowledgeBaseError
from patio.layout.selection import Selection

pytestmark = [
    pytest.mark.filterwarnings("ignore::patio.h5.LayoutWarning"),
    pytest.mark.usefixtures("layout_dir"),
]


def make_file(path: Path, shape: tuple[int, ...], chunks: Any = None, dtype: str = "f8",
              name: str = "a", filtered: bool = False) -> np.ndarray:
    data = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    with h5py.File(path, "w") as f:
        if filtered:  # gzip + shuffle: chunks stored compressed, sizes from the index
            f.create_dataset(name, data=data, chunks=chunks, compression="gzip",
                             shuffle=True)
        else:
            f.create_dataset(name, data=data, chunks=chunks)
    return data


# ------------------------------------------------------------------ selection strategy
@st.composite
def index_args(draw: Any, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """h5py index arguments: ints, strided slices, one sorted fancy list or a 1-D mask,
    or a whole-array boolean mask."""
    if draw(st.integers(0, 9)) == 0:
        seed = draw(st.integers(0, 2**31))
        mask = np.random.default_rng(seed).random(shape) < 0.3
        return (mask,)
    args: list[Any] = []
    fancy_used = False
    for n in shape:
        k = draw(st.integers(0, 5))
        if k == 0:
            args.append(draw(st.integers(0, n - 1)))
        elif k == 1 and not fancy_used:
            fancy_used = True
            idx = sorted(set(draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n))))
            if draw(st.booleans()):
                m = np.zeros(n, bool)
                m[idx] = True
                args.append(m)
            else:
                args.append(idx)
        else:
            lo = draw(st.integers(0, n - 1))
            hi = draw(st.integers(lo + 1, n))
            step = draw(st.sampled_from([1, 1, 2, 3]))
            args.append(slice(lo, hi, step))
    return tuple(args)


SHAPES = [(13, 9), (6, 7, 5), (40,)]


@pytest.fixture(scope="module")
def replica_setup(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Files (contiguous, chunked, chunked with gzip + shuffle) with one replica of
    every kind, built through the real builder."""
    base = tmp_path_factory.mktemp("reps")
    os.environ["PATIO_LAYOUT_DIR"] = str(base / "kb")
    out = {}
    for shape in SHAPES:
        for variant in ("contiguous", "chunked", "gzip"):
            chunks = None if variant == "contiguous" else tuple(max(1, n // 3) for n in shape)
            p = base / f"f{len(shape)}{variant}.h5"
            data = make_file(p, shape, chunks, filtered=variant == "gzip")
            kb = KnowledgeBase(p)
            nd = len(shape)
            if nd >= 2:
                replicas.build(kb, str(p), "/a", "transposed", {"axes": list(range(nd))[::-1]})
            chunk = [max(1, n // 2) for n in shape]
            for kind in ("chunked", "zorder", "hilbert"):
                replicas.build(kb, str(p), "/a", kind, {"chunk": chunk})
            # Product concat replicas: a box, and every other index of axis 0.
            axes_box = [np.arange(n // 4, n - n // 4) for n in shape]
            replicas.build(kb, str(p), "/a", "concat", axes_sets=axes_box)
            axes_strided = [np.arange(0, shape[0], 2)] + [np.arange(n) for n in shape[1:]]
            replicas.build(kb, str(p), "/a", "concat", axes_sets=axes_strided)
            if nd >= 2:  # a family stored with its varying axis outermost
                family = [np.arange(n) for n in shape]
                family[-1] = np.arange(0, shape[-1], 3)
                replicas.build(kb, str(p), "/a", "concat",
                               {"axes": [nd - 1] + list(range(nd - 1))}, axes_sets=family)
            # Two halves along axis 0: combined for requests that span both.
            half = shape[0] // 2
            for rows in (np.arange(0, half), np.arange(half, shape[0] - 1)):
                replicas.build(kb, str(p), "/a", "concat",
                               axes_sets=[rows] + [np.arange(n) for n in shape[1:]])
            pts = np.stack(np.unravel_index(np.arange(0, data.size, 3), shape), axis=1)
            replicas.build(kb, str(p), "/a", "concat", sel=Selection.from_points(shape, pts))
            kb.close()
            out[(shape, variant)] = (p, data)
    return out


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_plan_of_every_replica_equals_h5py(replica_setup: dict[str, Any],
                                                 data: Any) -> None:
    key = data.draw(st.sampled_from(sorted(replica_setup, key=str)))
    path, _ = replica_setup[key]
    shape = key[0]
    args = data.draw(index_args(shape))
    os.environ["PATIO_LAYOUT_DIR"] = str(Path(path).parent / "kb")
    kb = KnowledgeBase(path)
    reps = [replicas.Replica.load(r) for r in kb.replicas(state="ready")]
    model, consts = device.load(kb)
    with h5py.File(path, "r") as f:
        want = f["a"][args]
        sel, _ = h5sel.select(f["a"], args)
        decider = Decider(f["a"], reps, model, consts)
        cands = decider.candidates(sel)
        assert cands[0].name == "original"
        for c in cands:
            got = c.run()
            assert np.shape(got) == np.shape(want), c.name
            assert np.array_equal(got, want), c.name
        # The full replicas are always eligible for product selections.
        names = {c.name.split("#")[0] for c in cands}
        if h5sel.product_axes(sel) is not None and len(shape) >= 2:
            assert {"transposed", "chunked", "zorder", "hilbert"} <= names
    for r in reps:
        r.close()
    kb.close()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_patio_h5_reads_equal_h5py(replica_setup: dict[str, Any], data: Any) -> None:
    key = data.draw(st.sampled_from(sorted(replica_setup, key=str)))
    path, _ = replica_setup[key]
    args = data.draw(index_args(key[0]))
    os.environ["PATIO_LAYOUT_DIR"] = str(Path(path).parent / "kb")
    with h5py.File(path, "r") as f:
        want = f["a"][args]
    with ph5.File(path) as f:
        got = f["a"][args]
        out = np.empty(np.shape(want), dtype=f["a"].dtype)
        if out.ndim:
            f["a"].read_direct(out, args)
            assert np.array_equal(out, want)
    assert np.shape(got) == np.shape(want)
    assert np.array_equal(got, want)


def test_errors_are_h5pys(tmp_path: Path) -> None:
    p = tmp_path / "e.h5"
    make_file(p, (5, 6))
    with h5py.File(p) as f, ph5.File(p) as g:
        for args in [(slice(0, 2), 9), (7,), ([3, 1],), (0, 0, 0)]:
            with pytest.raises(Exception) as ours:
                g["a"][args]
            with pytest.raises(Exception) as theirs:
                f["a"][args]
            assert type(ours.value) is type(theirs.value)
            assert str(ours.value) == str(theirs.value)
        with pytest.raises(KeyError):
            g["missing"]


# ------------------------------------------------------------------ knowledge base
def test_reads_are_recorded_and_compacted_into_families(tmp_path: Path) -> None:
    p = tmp_path / "t.h5"
    make_file(p, (50, 20, 30))
    with ph5.File(p) as f:
        for t in range(50):
            f["a"][t, 5:15, 2:20]
        for _ in range(3):
            f["a"][:, 4, 7]
    kb = KnowledgeBase(p)
    kb.compact()
    pats = kb.patterns("/a")
    assert kb.raw_rows() == 0
    fam = [p_ for p_ in pats if len(p_.starts) == 50]
    assert len(fam) == 1 and fam[0].reads == 50
    assert [int(s) for s in fam[0].starts] == list(range(50))
    col = [p_ for p_ in pats if p_.reads == 3]
    assert len(col) == 1
    assert len(pats) == 2  # 53 reads, two pattern rows
    kb.close()


def _record_worker(path: str, n: int) -> None:
    with ph5.File(path) as f:
        for i in range(n):
            f["a"][i % 10, :]


def test_knowledge_base_with_concurrent_recorders(tmp_path: Path) -> None:
    p = tmp_path / "c.h5"
    make_file(p, (10, 8))
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_record_worker, args=(str(p), 300)) for _ in range(4)]
    for pr in procs:
        pr.start()
    for pr in procs:
        pr.join(60)
        assert pr.exitcode == 0
    kb = KnowledgeBase(p)
    kb.compact()
    assert sum(p_.reads for p_ in kb.patterns()) == 1200
    assert max(p_.procs for p_ in kb.patterns()) == 4
    kb.close()


def test_bad_knowledge_bases(tmp_path: Path, layout_dir: Path) -> None:
    p = tmp_path / "k.h5"
    make_file(p, (4, 4))
    kb = KnowledgeBase(p)
    with kb.transaction() as db:
        db.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    kb.close()
    with pytest.raises(KnowledgeBaseError, match="newer"):
        KnowledgeBase(p)
    # patio.h5 still reads, warns once, records nothing.
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with ph5.File(p) as f:
            assert np.array_equal(f["a"][1:3], np.arange(16.0).reshape(4, 4)[1:3])
    assert any("newer" in str(x.message) for x in w)
    kbfile = KnowledgeBase.__new__(KnowledgeBase)
    path = next(layout_dir.glob("k.h5-*/kb.sqlite"))
    for extra in path.parent.glob("kb.sqlite-*"):
        extra.unlink()
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(KnowledgeBaseError, match="damaged"):
        KnowledgeBase(p)
    del kbfile


# ------------------------------------------------------------------ builds and staleness
def test_replica_files_are_plain_hdf5_in_curve_order(tmp_path: Path) -> None:
    p = tmp_path / "z.h5"
    data = make_file(p, (64, 48))
    kb = KnowledgeBase(p)
    for kind in ("zorder", "hilbert", "chunked"):
        rid = replicas.build(kb, str(p), "/a", kind, {"chunk": [8, 8]})
        row = next(r for r in kb.replicas() if r.id == rid)
        with h5py.File(row.path) as f:
            assert np.array_equal(f["data"][...], data)
            from patio.layout import curves
            from patio.layout.storage import physical_layout

            lay = physical_layout(f["data"])
            order = {"chunked": "row", "zorder": "morton", "hilbert": "hilbert"}[kind]
            rank = curves.curve_rank(lay.grid, order)
            # Chunk addresses ascend in curve order: the curve is the physical order.
            assert np.all(np.diff(lay.addresses[np.argsort(rank)]) > 0)
    rid = replicas.build(kb, str(p), "/a", "transposed", {"axes": [1, 0]})
    row = next(r for r in kb.replicas() if r.id == rid)
    with h5py.File(row.path) as f:
        assert np.array_equal(f["data"][...], data.T)
    kb.close()


BUILD_AND_WAIT = """
import sys, time
from patio import _files
from patio.layout import replicas
from patio.layout.kb import KnowledgeBase
real = _files.commit
def slow(tmp, final):
    print("writing", flush=True)
    time.sleep(30)
    real(tmp, final)
_files.commit = slow
kb = KnowledgeBase(sys.argv[1])
replicas.build(kb, sys.argv[1], "/a", "chunked", {"chunk": [16, 16]})
"""


def test_a_build_killed_leaves_no_replica_in_use(tmp_path: Path) -> None:
    p = tmp_path / "k.h5"
    data = make_file(p, (128, 128))
    proc = subprocess.Popen([sys.executable, "-c", BUILD_AND_WAIT, str(p)],
                            stdout=subprocess.PIPE, env=os.environ.copy())
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"writing"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    kb = KnowledgeBase(p)
    rows = kb.replicas()
    assert [r.state for r in rows] == ["building"]
    assert not kb.replicas(state="ready")
    with ph5.File(p) as f:
        assert np.array_equal(f["a"][3:9, ::5], data[3:9, ::5])
        assert f._session.decider(f["a"]._d) is None
    assert replicas.cleanup(kb) == [rows[0].id]
    assert not list((kb.dir / "replicas").iterdir())
    kb.close()


def test_stale_replicas_are_never_served(tmp_path: Path) -> None:
    p = tmp_path / "s.h5"
    make_file(p, (32, 32))
    kb = KnowledgeBase(p)
    rid = replicas.build(kb, str(p), "/a", "transposed", {"axes": [1, 0]})
    kb.close()
    # Changed outside patio: the covered bytes differ.
    with h5py.File(p, "r+") as f:
        f["a"][:, 3] = -1.0
    with ph5.File(p) as f:
        assert np.array_equal(f["a"][:, 3], np.full(32, -1.0))
    kb = KnowledgeBase(p)
    assert next(r for r in kb.replicas() if r.id == rid).state == "stale"
    # Touched without a change: stays current.
    rid2 = replicas.build(kb, str(p), "/a", "transposed", {"axes": [1, 0]})
    kb.close()
    os.utime(p, (time.time() + 5, time.time() + 5))
    with ph5.File(p) as f:
        f["a"][:, 2]
        d = f._session.decider(f["a"]._d)
        assert d is not None and [r.row.id for r in d.replicas] == [rid2]
    # Written through patio.h5: stale before the write lands.
    with ph5.File(p, "r+") as f:
        f["a"][0, :] = 7.0
        assert np.array_equal(f["a"][0, :], np.full(32, 7.0))
    kb = KnowledgeBase(p)
    assert next(r for r in kb.replicas() if r.id == rid2).state == "stale"
    kb.close()


def test_a_rewrite_with_its_modification_time_restored_is_seen(tmp_path: Path) -> None:
    """Rewritten in place (same size, same inode) and the mtime put back, as ``cp -p``,
    ``rsync -t`` or a restore from backup do: the change time still moves, so the
    replica's checksum is taken again, the replica goes stale and the new values come
    back (in a new process, as a user would see it)."""
    p = tmp_path / "r.h5"
    make_file(p, (32, 32))
    kb = KnowledgeBase(p)
    rid = replicas.build(kb, str(p), "/a", "transposed", {"axes": [1, 0]})
    kb.close()
    st = os.stat(p)
    with h5py.File(p, "r+") as f:
        f["a"][:, :] = -f["a"][:, :]
        want = f["a"][:, :]
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(p)
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)
    code = (
        "import sys, numpy as np, patio.h5 as ph5\n"
        "with ph5.File(sys.argv[1]) as f:\n"
        "    np.save(sys.stdout.buffer, f['a'][:, :])\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True,
                         check=True, timeout=120).stdout
    assert np.array_equal(np.load(io.BytesIO(out)), want)
    kb = KnowledgeBase(p)
    assert next(r for r in kb.replicas() if r.id == rid).state == "stale"
    kb.close()


def test_an_open_file_sees_another_process_rewrite_its_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """HDF5 file locking off (as on many cluster file systems): another process
    rewrites the dataset while ``patio.h5`` has the file open and has served reads
    from a replica; the next read through the open file returns the new values, as
    h5py does, and the replica is marked stale."""
    monkeypatch.setenv("HDF5_USE_FILE_LOCKING", "FALSE")
    p = tmp_path / "o.h5"
    make_file(p, (32, 32))
    kb = KnowledgeBase(p)
    rid = replicas.build(kb, str(p), "/a", "transposed", {"axes": [1, 0]})
    kb.close()
    with ph5.File(p) as f, h5py.File(p, "r") as plain:
        before = f["a"][:, 3]
        d = f._session.decider(f["a"]._d)
        assert d is not None and [r.row.id for r in d.replicas] == [rid]
        code = (
            "import sys, h5py\n"
            "with h5py.File(sys.argv[1], 'r+') as g:\n"
            "    g['a'][:, :] = -g['a'][:, :] - 1.0\n"
        )
        subprocess.run([sys.executable, "-c", code, str(p)], check=True, timeout=120)
        assert np.array_equal(plain["a"][:, 3], -before - 1.0)
        assert np.array_equal(f["a"][:, 3], -before - 1.0)
    kb = KnowledgeBase(p)
    assert next(r for r in kb.replicas() if r.id == rid).state == "stale"
    kb.close()


def test_missing_and_damaged_replicas_fall_back_to_the_original(tmp_path: Path) -> None:
    p = tmp_path / "d.h5"
    data = make_file(p, (16, 16))
    kb = KnowledgeBase(p)
    r1 = replicas.build(kb, str(p), "/a", "transposed", {"axes": [1, 0]})
    r2 = replicas.build(kb, str(p), "/a", "hilbert", {"chunk": [4, 4]})
    rows = {r.id: r for r in kb.replicas()}
    kb.close()
    os.unlink(rows[r1].path)
    Path(rows[r2].path).write_bytes(b"\0" * 100)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        with ph5.File(p) as f:
            assert np.array_equal(f["a"][:, 1], data[:, 1])
    msgs = " ".join(str(x.message) for x in w)
    assert "missing" in msgs and "damaged" in msgs
    kb = KnowledgeBase(p)
    states = {r.id: r.state for r in kb.replicas()}
    assert states == {r1: "missing", r2: "damaged"}
    kb.close()


def test_build_plans_within_the_budget_and_serves_from_replicas(tmp_path: Path) -> None:
    p = tmp_path / "b.h5"
    data = make_file(p, (512, 512))
    with ph5.File(p) as f:
        for j in range(0, 512, 37):
            f["a"][:, j]  # columns of a row-major array
    kb = KnowledgeBase(p)
    kb.compact()
    kb.set_setting("budget", planner.parse_budget("150%"))
    # Page-bound storage: a column from a transposed copy saves milliseconds per read,
    # far above the decision overhead admission weighs it against, whatever the load.
    kb.set_setting("device", device.model_device("ssd"))
    kb.close()
    rc = subprocess.run([sys.executable, "-m", "patio._run", "layout", "build", str(p),
                         "--json"], capture_output=True, text=True, env=os.environ.copy(), check=False)
    assert rc.returncode == 0, rc.stderr
    import json

    out = json.loads(rc.stdout)
    assert out["built"], out
    assert out["used_bytes"] <= out["budget_bytes"]
    with ph5.File(p) as f:
        col = f["a"][:, 74]
        d = f._session.decider(f["a"]._d)
        assert d is not None
        choice = d.choose(h5sel.select(f["a"]._d, (slice(None), 74))[0])
        assert choice.replica is not None
    assert np.array_equal(col, data[:, 74])
    # A tighter budget evicts rather than exceeding it.
    rc = subprocess.run([sys.executable, "-m", "patio._run", "layout", "build", str(p),
                         "--budget", "1%", "--json"], capture_output=True, text=True,
                        env=os.environ.copy(), check=False)
    kb = KnowledgeBase(p)
    used = sum(r.bytes + r.meta_bytes for r in kb.replicas(state="ready"))
    assert used <= planner.budget_bytes(kb, p.stat().st_size)
    kb.close()


def test_parse_budget() -> None:
    assert planner.parse_budget("20%") == {"percent": 20.0}
    assert planner.parse_budget("2GiB") == {"bytes": float(2 << 30)}
    assert planner.parse_budget("500M") == {"bytes": 500e6}
    assert planner.parse_budget("4096") == {"bytes": 4096.0}
    for bad in ("", "x", "-5M", "12 apples"):
        with pytest.raises(ValueError):
            planner.parse_budget(bad)


def test_a_repeated_selection_reuses_its_decision(tmp_path: Path) -> None:
    p = tmp_path / "m.h5"
    data = make_file(p, (64, 64))
    kb = KnowledgeBase(p)
    replicas.build(kb, str(p), "/a", "transposed", {"axes": [1, 0]})
    kb.close()
    with ph5.File(p) as f:
        d = f._session.decider(f["a"]._d)
        calls = []

        class Counting:
            """The layout core's decider, counting the decisions asked of it."""

            def __init__(self, inner: Any) -> None:
                self.inner = inner

            def choose(self, sel: Any) -> Any:
                calls.append(sel)
                return self.inner.choose(sel)

        d._native = Counting(d._native)
        for _ in range(3):
            assert np.array_equal(f["a"][:, 5], data[:, 5])
            assert np.array_equal(f["a"][2:3, 5], data[2:3, 5])
            assert np.array_equal(f["a"][2, 5], data[2, 5])
    assert len(calls) == 3  # one decision per distinct selection and result shape


def test_several_replicas_combine_in_one_read(tmp_path: Path) -> None:
    p = tmp_path / "two.h5"
    data = make_file(p, (40, 30, 20))
    kb = KnowledgeBase(p)
    for rows in (np.arange(0, 20), np.arange(20, 35)):
        replicas.build(kb, str(p), "/a", "concat",
                       axes_sets=[rows, np.arange(30), np.arange(5, 15)])
    reps = [replicas.Replica.load(r) for r in kb.replicas(state="ready")]
    model, consts = device.load(kb)
    with h5py.File(p) as f:
        d = Decider(f["a"], reps, model, consts)
        for args, tail in [((slice(None), slice(None), slice(5, 15)), True),
                           ((slice(3, 30), slice(2, 9), slice(6, 14)), False)]:
            sel, _ = h5sel.select(f["a"], args)
            cands = {c.name: c for c in d.candidates(sel)}
            combined = [c for n, c in cands.items() if n.startswith("combined(")]
            assert len(combined) == 1
            assert combined[0].name.endswith("+original)") == tail
            assert np.array_equal(combined[0].run(), data[args])
            assert np.array_equal(d.choose(sel).run(), data[args])
    for r in reps:
        r.close()
    kb.close()


@settings(max_examples=200, deadline=None)
@given(a=st.lists(st.integers(0, 50), max_size=40), b=st.lists(st.integers(0, 50), max_size=40),
       wide=st.booleans())
def test_index_array_keys_are_equal_exactly_when_the_arrays_are(a: list[int], b: list[int],
                                                                 wide: bool) -> None:
    x = np.asarray(a, np.int64)
    y = np.asarray(b, np.int64 if wide else np.int32)
    kx, ky = ph5._args_key((slice(None), x)), ph5._args_key((slice(None), y))
    same = x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
    assert (kx == ky) == same
    if same:
        assert hash(kx) == hash(ky)
    assert ph5._args_key((slice(None), x.copy())) == kx


def test_admission_weighs_the_decision_time_a_replica_adds(tmp_path: Path) -> None:
    p = tmp_path / "adm.h5"
    make_file(p, (256, 256))
    with ph5.File(p) as f:
        for j in range(0, 256, 37):
            f["a"][:, j]
    kb = KnowledgeBase(p)
    kb.compact()
    model, consts = device.model_device("ssd"), None
    kb.set_setting("device", model)
    model, consts = device.load(kb)
    with h5py.File(p) as f:
        dp = planner.evaluate(kb, f, "/a", model, consts, [])
    kb.close()
    assert dp.proposals and all(prop.marginal_s >= 0 for prop in dp.proposals)
    assert all(row["overhead_s"] > 0 for row in dp.rows)
    build, _, _ = planner.plan([dp], [], 1 << 40)
    assert build
    # The same proposals, each adding more to every decision than it saves: none admitted.
    saved = sum(r["weight"] * (r["best_now"] - min(v for v in r["costs"].values()
                                                  if v is not None)) for r in dp.rows)
    for prop in dp.proposals:
        prop.marginal_s = 2 * saved / sum(r["weight"] for r in dp.rows)
    build, _, rejected = planner.plan([dp], [], 1 << 40)
    assert build == [] and rejected == []


@settings(max_examples=60, deadline=None)
@given(shape=st.lists(st.integers(1, 7), min_size=1, max_size=3), data=st.data())
def test_fancy_selections_made_at_once_equal_their_boxes(shape: list[int], data: Any) -> None:
    """The union h5py hands over for a fancy index, made from its block list at once
    (``Selection.boxes``), equals the union of one box per block: same selection, JSON,
    element count and core selection."""
    from h5py._hl import selections as h5py_selections
    from patio.layout.selection import Hyperslab

    axis = data.draw(st.integers(0, len(shape) - 1))
    idx = sorted(data.draw(st.sets(st.integers(0, shape[axis] - 1), min_size=1)))
    args: list[Any] = [data.draw(st.sampled_from([slice(None), 0, slice(0, n, 2)]))
                       if j != axis else np.asarray(idx) for j, n in enumerate(shape)]
    hsel = h5py_selections.select(tuple(shape), tuple(args))
    got = h5sel.from_space(tuple(shape), hsel.id, tuple(hsel.array_shape))
    if got.kind != "union":
        return  # one regular hyperslab: not a block list
    blocks = np.asarray(hsel.id.get_select_hyper_blocklist(), np.int64)
    want = Selection.union(shape, [Hyperslab.box(b[0], b[1] + 1) for b in blocks],
                           tuple(hsel.array_shape))
    assert got == want
    assert got.to_json() == want.to_json()
    assert got.nelements() == want.nelements() == int(hsel.id.get_select_npoints())
    assert got.native().nblocks() == want.native().nblocks()
    assert got.native().nelements() == want.native().nelements()


def test_opening_reads_the_ready_replicas_with_the_schema_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """patio.h5 reads a file's ready replicas once, with the schema check at open, for
    every dataset it then reads; a replica that fails or a write makes it read them
    again (and a failed one is then no longer among them)."""
    p = tmp_path / "r.h5"
    data = make_file(p, (16, 12))
    with h5py.File(p, "a") as f:
        f.create_dataset("b", data=data + 1)
    kb = KnowledgeBase(p)
    for name in ("/a", "/b"):
        replicas.build(kb, str(p), name, "transposed", {"axes": [1, 0]})
    kb.close()
    queries: list[Any] = []
    real = kbmod._replica_rows

    def counting(db: Any, *a: Any, **kw: Any) -> Any:
        queries.append((a, kw))
        return real(db, *a, **kw)

    monkeypatch.setattr(kbmod, "_replica_rows", counting)
    with ph5.File(p, "a") as f:
        assert np.array_equal(f["a"][:, 3], data[:, 3])
        assert np.array_equal(f["b"][:, 3], data[:, 3] + 1)
        assert f["a"][:, 4].shape == (16,) and f["b"][2:5, 4].shape == (3,)
        assert len(queries) == 1 and queries[0] == ((), {"state": "ready"})
        assert {d.replicas[0].row.dset for d in f._session.deciders.values()} == {"/a", "/b"}
        f["b"][0, 0] = -1.0  # a write: /b's replicas stale, the replicas read again
        assert np.array_equal(f["b"][:, 3], data[:, 3] + 1)
        assert len(queries) == 2 and f._session.deciders["/b"] is None


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_ints_and_slices_read_as_h5py_and_recorded(tmp_path_factory: Any, data: Any) -> None:
    """Ints, slices and Ellipsis from the original go through h5py's own read: the same
    value and type as h5py's (scalars included), and every such read is recorded."""
    path = tmp_path_factory.mktemp("s") / "s.h5"
    shape = (7, 5, 3)
    make_file(path, shape, chunks=(2, 5, 3))
    os.environ["PATIO_LAYOUT_DIR"] = str(path.parent / "kb")
    ax = [st.one_of(st.integers(-n, n - 1),
                    st.builds(slice, st.one_of(st.none(), st.integers(-n, n)),
                              st.one_of(st.none(), st.integers(-n, n)),
                              st.one_of(st.none(), st.integers(1, 3))))
          for n in shape]
    reads = data.draw(st.lists(st.tuples(*ax), min_size=1, max_size=5))
    reads.append((Ellipsis, 1))
    with h5py.File(path, "r") as f:
        want = [f["a"][a] for a in reads]
    with ph5.File(path) as f:
        got = [f["a"][a] for a in reads]
    for g, w in zip(got, want):
        assert type(g) is type(w) and np.shape(g) == np.shape(w) and np.array_equal(g, w)
    kb = KnowledgeBase(path)
    kb.compact()
    assert sum(p_.reads for p_ in kb.patterns("/a")) == sum(
        1 for w in want if np.size(w) > 0)
    kb.close()
