"""Tests for ``patio.Container`` (:mod:`patio.container`), the Python front end of the
log-structured container.

The reference model is a ``bytearray``: hypothesis draws random interleavings of writes
(single and strided, from ``bytes``, ``bytearray``, ``memoryview`` and NumPy buffers)
by several writer objects, flushes, publishes, writer reopens and truncates; every read
through a freshly opened reader (``read_at``, ``readinto`` into NumPy arrays,
``read_array``) must equal the model. The ordering rule of the container (a write is
ordered after another writer's write only when that writer flushed in between) is kept
by flushing the other writers before a writer writes, as an application must for
overlapping data. One property runs the writers as separate processes
(``multiprocessing``) writing disjoint ranges at the same time. Then the tools, the
buffer handling, threads, fork, and the errors.
"""

from __future__ import annotations

import errno
import io
import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import patio
import patio.container as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_mount_trace import NOBODY, skip_unless_nobody_imports_patio

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
IS_ROOT = os.geteuid() == 0
WRITERS = 3


def payload(seed: int, offset: int, n: int) -> bytes:
    """Bytes that differ by writer/seed and position (never all zero, so holes show)."""
    a = (np.arange(offset, offset + n, dtype=np.uint64) * 31 + seed) % 255 + 1
    return a.astype(np.uint8).tobytes()


def as_buffer(data: bytes, kind: str) -> Any:
    """``data`` as the kind of buffer a caller may pass to ``write_at``."""
    if kind == "bytes":
        return data
    if kind == "bytearray":
        return bytearray(data)
    if kind == "memoryview":
        return memoryview(bytearray(data))
    if kind == "readonly-memoryview":
        return memoryview(data)
    if kind == "numpy":
        return np.frombuffer(data, dtype=np.uint8).copy()
    if kind == "numpy-u4" and len(data) % 4 == 0:
        return np.frombuffer(data, dtype=np.uint32).copy()
    if kind == "numpy-strided":
        # A non-contiguous view: written through a copy.
        wide = np.zeros(2 * len(data), dtype=np.uint8)
        wide[::2] = np.frombuffer(data, dtype=np.uint8)
        return wide[::2]
    return data


BUFFER_KINDS = [
    "bytes",
    "bytearray",
    "memoryview",
    "readonly-memoryview",
    "numpy",
    "numpy-u4",
    "numpy-strided",
]


def assert_reads_equal(path: Path, model: bytearray, data: st.DataObject | None = None) -> None:
    """A fresh reader of ``path`` holds exactly ``model``."""
    with patio.Container(path) as c:
        assert c.size == len(model)
        whole = np.empty(len(model), dtype=np.uint8)
        assert c.readinto(whole) == len(model)
        assert whole.tobytes() == bytes(model)
        assert c.read_at(len(model) + 10, 0) == bytes(model)
        if data is not None:
            for _ in range(3):
                off = data.draw(st.integers(0, len(model) + 50), label="read offset")
                n = data.draw(st.integers(0, 5000), label="read length")
                assert c.read_at(n, off) == bytes(model[off : off + n])
                buf = bytearray(n)
                got = c.readinto(buf, off)
                assert got == len(model[off : off + n])
                assert bytes(buf[:got]) == bytes(model[off : off + n])


def apply(model: bytearray, offset: int, data: bytes) -> None:
    """A write into the model (empty writes extend nothing, as with ``os.pwrite``)."""
    if not data:
        return
    end = offset + len(data)
    if end > len(model):
        model.extend(bytes(end - len(model)))
    model[offset:end] = data


def resize(model: bytearray, size: int) -> None:
    if size < len(model):
        del model[size:]
    else:
        model.extend(bytes(size - len(model)))


# ------------------------------------------------------------------ model property

write_op = st.tuples(
    st.just("write"),
    st.integers(0, WRITERS - 1),
    st.integers(0, 30_000),
    st.integers(0, 3000),
    st.integers(0, 254),
    st.sampled_from(BUFFER_KINDS),
)
strided_op = st.tuples(
    st.just("strided"),
    st.integers(0, WRITERS - 1),
    st.integers(1, WRITERS),  # writers taking part, round-robin
    st.integers(1, 700),  # block
    st.integers(2, 12),  # rows
    st.integers(0, 20_000),  # base
    st.integers(0, 254),
)
ops = st.lists(
    st.one_of(
        write_op,
        write_op,
        strided_op,
        st.tuples(st.just("flush"), st.integers(0, WRITERS - 1)),
        st.tuples(st.just("publish"), st.integers(0, WRITERS - 1)),
        st.tuples(st.just("reopen"), st.integers(0, WRITERS - 1)),
        st.tuples(st.just("truncate"), st.integers(0, WRITERS - 1), st.integers(0, 40_000)),
        st.tuples(st.just("tool-truncate"), st.integers(0, 40_000)),
        st.tuples(st.just("check")),
    ),
    max_size=30,
)


class Harness:
    """Writers of one container and the reference model, keeping the ordering rule."""

    def __init__(self, path: Path, index: str) -> None:
        self.path = path
        self.index = index
        self.writers: list[patio.Container | None] = [None] * WRITERS
        self.dirty = [False] * WRITERS
        self.model = bytearray()

    def writer(self, w: int) -> patio.Container:
        c = self.writers[w]
        if c is None:
            c = patio.Container(self.path, "a", index=self.index, index_buffer=7)
            self.writers[w] = c
        return c

    def others_flushed(self, w: int | None) -> None:
        for i, c in enumerate(self.writers):
            if i != w and self.dirty[i] and c is not None:
                (c.flush if i % 2 else c.publish)()
                self.dirty[i] = False

    def write(self, w: int, offset: int, data: bytes, kind: str) -> None:
        self.others_flushed(w)
        c = self.writer(w)
        assert c.write_at(offset, as_buffer(data, kind)) == len(data)
        if data:
            self.dirty[w] = True
        apply(self.model, offset, data)

    def publish_all(self) -> None:
        self.others_flushed(None)

    def close(self) -> None:
        for c in self.writers:
            if c is not None:
                c.close()


@pytest.mark.parametrize("index", ["pattern", "raw"])
@SETTINGS
@given(program=ops, data=st.data())
def test_container_matches_bytearray_model(
    tmp_path_factory: pytest.TempPathFactory, index: str, program: list[Any], data: Any
) -> None:
    path = tmp_path_factory.mktemp("model") / "c.patio"
    h = Harness(path, index)
    patio.Container(path, "w", index=index).close()
    try:
        for op in program:
            kind = op[0]
            if kind == "write":
                _, w, offset, n, seed, buf = op
                h.write(w, offset, payload(seed * 7 + w, offset, n), buf)
            elif kind == "strided":
                _, first, count, block, rows, base, seed = op
                # N-1 strided: writer (first + j) % WRITERS writes column j of each row.
                stride = block * count
                for r in range(rows):
                    for j in range(count):
                        w = (first + j) % WRITERS
                        off = base + r * stride + j * block
                        h.write(w, off, payload(seed + j, off, block), "bytes")
            elif kind in ("flush", "publish"):
                c = h.writers[op[1]]
                if c is not None:
                    (c.flush if kind == "flush" else c.publish)()
                    h.dirty[op[1]] = False
            elif kind == "reopen":
                c = h.writers[op[1]]
                if c is not None:
                    c.close()
                    h.writers[op[1]] = None
                    h.dirty[op[1]] = False
            elif kind == "truncate":
                _, w, size = op
                h.others_flushed(w)
                h.writer(w).truncate(size)
                h.dirty[w] = False
                resize(h.model, size)
            elif kind == "tool-truncate":
                h.publish_all()
                pc.truncate(path, op[1])
                resize(h.model, op[1])
            else:
                h.publish_all()
                assert_reads_equal(path, h.model, data)
        h.publish_all()
        assert_reads_equal(path, h.model, data)
        # Writers' view of the size counts their unflushed writes.
        for c in h.writers:
            if c is not None:
                assert c.size == len(h.model)
    finally:
        h.close()
    assert_reads_equal(path, h.model)
    assert pc.stat(path)["size"] == len(h.model)
    report = pc.check(path)
    assert report["clean"], report["damage"]


# ----------------------------------------------------------- several processes


def _process_writer(path: str, writes: list[tuple[int, int, int]], flush_every: int) -> None:
    with patio.Container(path, "a") as c:
        for i, (offset, n, seed) in enumerate(writes):
            c.pwrite(np.frombuffer(payload(seed, offset, n), dtype=np.uint8), offset)
            if flush_every and i % flush_every == flush_every - 1:
                c.flush()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    procs=st.integers(2, 4),
    block=st.integers(1, 5000),
    slots=st.integers(1, 40),
    order_seed=st.integers(0, 2**32 - 1),
    flush_every=st.integers(0, 5),
    index=st.sampled_from(["pattern", "raw"]),
)
def test_processes_write_one_container_at_once(
    tmp_path_factory: pytest.TempPathFactory,
    procs: int,
    block: int,
    slots: int,
    order_seed: int,
    flush_every: int,
    index: str,
) -> None:
    """``procs`` processes write disjoint blocks (strided for some, shuffled for
    others) at the same time, each through its own writer; the result is every block."""
    path = tmp_path_factory.mktemp("procs") / "c.patio"
    patio.Container(path, "w", index=index).close()
    rng = np.random.default_rng(order_seed)
    owner = rng.integers(0, procs, slots) if order_seed % 2 else np.arange(slots) % procs
    work: list[list[tuple[int, int, int]]] = [[] for _ in range(procs)]
    model = bytearray(slots * block)
    for s in range(slots):
        p = int(owner[s])
        n = block - (s % 3 == 2)  # some short blocks leave one-byte holes
        work[p].append((s * block, n, p + 1))
        model[s * block : s * block + n] = payload(p + 1, s * block, n)
    for p in range(procs):
        if p % 2:
            rng.shuffle(work[p])  # type: ignore[arg-type]
    ctx = multiprocessing.get_context("fork")
    children = [
        ctx.Process(target=_process_writer, args=(str(path), work[p], flush_every))
        for p in range(procs)
    ]
    for child in children:
        child.start()
    for child in children:
        child.join(60)
        assert child.exitcode == 0
    end = max((o + n for w in work for o, n, _ in w), default=0)
    del model[end:]
    assert_reads_equal(path, model)
    with patio.Container(path) as c:
        st_ = c.stats()
        assert st_["writers"] == procs + 1  # and the one that created it
        assert st_["writes"] == sum(1 for w in work for _, n, _ in w if n)
        assert len(c.writers()) == procs + 1


# ------------------------------------------------------------------- buffers


def test_numpy_round_trip_and_read_array(tmp_path: Path) -> None:
    path = tmp_path / "arr.patio"
    grid = np.arange(64 * 32, dtype=np.float64).reshape(64, 32)
    with patio.Container(path, "w") as c:
        for row in range(64):
            # Row r written by "rank" r % 4 in a strided order; 2-D slices are fine.
            assert c.write_at(row * 32 * 8, grid[row]) == 256
        c.write_at(grid.nbytes, grid[:, 0])  # a non-contiguous column: copied
    with patio.Container(path) as c:
        assert c.size == grid.nbytes + 64 * 8
        assert np.array_equal(c.read_array(np.float64, 64 * 32).reshape(64, 32), grid)
        assert np.array_equal(c.read_array("<f8", offset=grid.nbytes), grid[:, 0])
        assert np.array_equal(c.read_array(np.float64, 3, 8 * 33), grid.ravel()[33:36])
        tail = c.read_array(np.float64, 100, c.size - 16)
        assert tail.tolist() == grid[62:, 0].tolist()  # short at the end
        assert c.read_array(np.uint8, 5, c.size + 10).size == 0
        into = np.zeros((8, 32), dtype=np.float64)
        assert c.readinto(into, 8 * 32 * 8) == into.nbytes
        assert np.array_equal(into, grid[8:16])
        view = memoryview(bytearray(16))
        assert c.readinto(view[4:12], 0) == 8
        assert bytes(view[4:12]) == grid.ravel()[:1].tobytes()
        assert c.readinto(bytearray(0), 0) == 0
        with pytest.raises(TypeError):
            c.readinto(b"readonly", 0)
        with pytest.raises(TypeError):
            c.readinto(np.zeros(8)[::2], 0)
        with pytest.raises(TypeError):
            c.readinto(np.zeros(8).astype(object), 0)
        with pytest.raises(TypeError):
            c.read_array(object, 2)
        with pytest.raises(TypeError):
            c.readinto(np.zeros(2, dtype=[("a", "O"), ("b", "f8")]), 0)
        st_ = c.stats()
        assert st_["writes"] == 65 and st_["writers"] == 1


def test_holes_read_as_zeros_and_reads_stop_at_the_end(tmp_path: Path) -> None:
    path = tmp_path / "holes.patio"
    with patio.Container(path, "w") as c:
        c.write_at(1000, b"x" * 10)
        c.write_at(5000, b"")  # empty writes extend nothing
        assert c.size == 1010
    with patio.Container(path) as c:
        assert c.read_at(2000, 0) == bytes(1000) + b"x" * 10
        assert c.read_at(5, 1010) == b"" and c.pread(5, 1 << 40) == b""
    pc.truncate(path, 3000)
    with patio.Container(path) as c:
        assert c.size == 3000 and c.read_at(3000, 0) == bytes(1000) + b"x" * 10 + bytes(1990)


def test_modes_w_truncates_and_a_keeps(tmp_path: Path) -> None:
    path = tmp_path / "m.patio"
    with patio.Container(path, "w") as c:
        c.write_at(0, b"abcdef")
    with patio.Container(path, "a") as c:
        c.write_at(6, b"gh")
    with patio.Container(path) as c:
        assert c.read_at(100, 0) == b"abcdefgh"
    with patio.Container(path, "w") as c:
        assert c.size == 0
        c.write_at(2, b"Z")
    with patio.Container(path) as c:
        assert c.read_at(100, 0) == b"\0\0Z"
        assert c.index == "pattern" and c.mode == "r" and c.writer_name is None
    raw = tmp_path / "r.patio"
    with patio.Container(raw, "a", index="raw") as c:
        assert c.index == "raw" and c.writer_name and c.writable() and not c.readable()
        stats = c.stats()
        assert stats["index"] == "raw" and stats["name"] == c.writer_name
    assert patio.Container(raw).index == "raw"
    empty = tmp_path / "empty"
    empty.mkdir()
    patio.Container(empty, "a").close()  # an empty directory may become a container
    assert patio.Container(empty).size == 0


def test_writer_truncate_orders_after_flushed_writes(tmp_path: Path) -> None:
    path = tmp_path / "t.patio"
    a = patio.Container(path, "w")
    b = patio.Container(path, "a")
    a.write_at(0, b"A" * 100)
    a.flush()
    b.truncate(10)  # after a's flushed writes
    b.write_at(20, b"B")  # after the truncation
    a.close()
    b.close()
    with patio.Container(path) as c:
        assert c.read_at(100, 0) == b"A" * 10 + bytes(10) + b"B"


def test_tools(tmp_path: Path) -> None:
    path = tmp_path / "tools.patio"
    with patio.Container(path, "w") as c:
        for i in range(100):
            c.write_at(i * 8192, payload(1, i * 8192, 4096))
    s = pc.stat(path)
    assert s["size"] == 99 * 8192 + 4096 and s["from_meta"] and s["mtime_ns"] > 0
    report = pc.check(path)
    assert report == {"logs": 1, "records": 1, "writes": 100, "clean": True, "damage": [],
                      "unindexed_tail_bytes": 0}  # fmt: skip
    flat = tmp_path / "flat.bin"
    assert pc.flatten(path, flat) == s["size"]
    with patio.Container(path) as c:
        assert flat.read_bytes() == c.read_at(s["size"], 0)
        stats = c.stats()
        assert stats["tiles"] + stats["global_patterns"] >= 1
        assert stats["compression_ratio"] > 10
    assert len(pc.list_writers(path)) >= 1
    pc.truncate(path, 5)
    assert pc.stat(path)["size"] == 5
    pc.remove(path)
    assert not path.exists()
    with pytest.raises(FileNotFoundError):
        pc.stat(path)


def test_compact_keeps_the_bytes_and_leaves_open_writers_alone(tmp_path: Path) -> None:
    path = tmp_path / "compact.patio"
    model = bytearray()
    for i in range(6):
        with patio.Container(path, "a" if i else "w") as c:
            data = payload(i, i * 3000, 5000)
            c.write_at(i * 3000, data)
            model[i * 3000 : i * 3000 + 5000] = data
    pc.truncate(path, 12_000)
    del model[12_000:]
    before = len(pc.list_writers(path))
    with patio.Container(path, "a") as live:
        live.write_at(0, b"live")
        live.flush()
        model[0:4] = b"live"
        report = live.compact()
        assert report["active_writers"] == 1 and not report["busy"]
        assert report["sources"] == before
        # Bytes the open writer overwrote stay: its record orders after them.
        assert report["live_bytes"] == 12_000
        assert report["bytes_after"] < report["bytes_before"]
    # The compacted set and the closed writer's logs become one.
    assert pc.compact(path)["sources"] == 2
    with patio.Container(path) as c:
        assert c.read_at(len(model) + 10, 0) == bytes(model)
    assert pc.check(path)["clean"]
    with pytest.raises(pc.ContainerError):
        pc.compact(tmp_path)


def test_damaged_index_is_reported_not_raised(tmp_path: Path) -> None:
    path = tmp_path / "d.patio"
    with patio.Container(path, "w") as c:
        c.write_at(0, b"a" * 100)
        c.flush()
        c.write_at(100, b"b" * 100)
    (log,) = [p for p in path.iterdir() if p.name.startswith("index.") and p.stat().st_size > 8]
    raw = bytearray(log.read_bytes())
    raw[-3] ^= 0xFF  # the second record's checksum fails
    log.write_bytes(bytes(raw))
    with patio.Container(path) as c:
        assert c.read_at(300, 0) == b"a" * 100  # the intact first record is used
        (d,) = c.damage()
        assert d["path"] == str(log) and d["lost_bytes"] > 0
        assert c.stats()["damaged_logs"] == 1
    report = pc.check(path)
    assert not report["clean"] and report["damage"][0]["path"] == str(log)


# ------------------------------------------------------------------- threads, fork


def test_threads_read_at_once(tmp_path: Path) -> None:
    path = tmp_path / "th.patio"
    n, block = 256, 4096
    with patio.Container(path, "w") as c:
        for i in range(n):
            c.write_at(i * block, payload(i, i * block, block))
    errors: list[BaseException] = []
    with patio.Container(path) as c:

        def reader(k: int) -> None:
            try:
                buf = np.empty(block, dtype=np.uint8)
                for i in range(k, n, 4):
                    assert c.readinto(buf, i * block) == block
                    assert buf.tobytes() == payload(i, i * block, block)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=reader, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors


def test_a_forked_child_cannot_use_its_parents_writer(tmp_path: Path) -> None:
    path = tmp_path / "fork.patio"
    c = patio.Container(path, "w")
    c.write_at(0, b"parent")
    pid = os.fork()
    if pid == 0:  # child
        code = 1
        try:
            c.write_at(10, b"child")
        except patio.ContainerError as e:
            code = 0 if "forked child" in str(e) else 2
        finally:
            del c  # dropping it in the child must not flush the parent's writer
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    c.close()
    with patio.Container(path) as r:
        assert r.read_at(100, 0) == b"parent"


# ---------------------------------------------------------------------- errors


def test_path_errors(tmp_path: Path) -> None:
    missing = tmp_path / "missing"
    with pytest.raises(FileNotFoundError) as e:
        patio.Container(missing)
    assert e.value.errno == errno.ENOENT and e.value.filename == str(missing)
    with pytest.raises(FileNotFoundError):
        patio.Container(tmp_path / "no" / "parent", "w")
    plain = tmp_path / "plain"
    plain.write_bytes(b"not a container")
    for mode in ("r", "w", "a"):
        with pytest.raises(NotADirectoryError) as e:
            patio.Container(plain, mode)
        assert e.value.filename == str(plain)
    other = tmp_path / "other"
    other.mkdir()
    (other / "file").write_bytes(b"x")
    for mode in ("r", "a", "w"):
        with pytest.raises(patio.ContainerError, match="not a patio container"):
            patio.Container(other, mode)
    assert sorted(p.name for p in other.iterdir()) == ["file"]
    for fn in (pc.stat, pc.check, pc.remove, pc.list_writers):
        with pytest.raises(patio.ContainerError):
            fn(other)
        with pytest.raises(FileNotFoundError):
            fn(missing)
    assert issubclass(patio.ContainerError, OSError)
    assert patio.ContainerError is pc.ContainerError


def test_damaged_marker(tmp_path: Path) -> None:
    path = tmp_path / "c.patio"
    patio.Container(path, "w").close()
    (path / "PATIO").write_bytes(b"PCON garbage")
    for mode in ("r", "a"):
        with pytest.raises(patio.ContainerError, match="PATIO"):
            patio.Container(path, mode)


def test_argument_errors(tmp_path: Path) -> None:
    path = tmp_path / "args.patio"
    for bad in ("rb", "x", "r+", ""):
        with pytest.raises(ValueError, match="mode"):
            patio.Container(path, bad)
    with pytest.raises(TypeError):
        patio.Container(path, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="index"):
        patio.Container(path, "w", index="zstd")
    with pytest.raises(ValueError, match="index_buffer"):
        patio.Container(path, "w", index_buffer=0)
    assert not path.exists()
    w = patio.Container(path, "w")
    with pytest.raises(ValueError, match="index"):
        patio.Container(path, "r", index="raw")
    with pytest.raises(ValueError, match="index mode is pattern"):
        patio.Container(path, "a", index="raw")
    for offset in (-1, 1 << 63):
        with pytest.raises(ValueError):
            w.write_at(offset, b"x")
    with pytest.raises(ValueError, match="2\\^63"):
        w.write_at((1 << 63) - 2, b"xyz")
    with pytest.raises(TypeError):
        w.write_at(0, "text")
    with pytest.raises(TypeError):
        w.write_at(0, np.array([None, 1], dtype=object))
    with pytest.raises(TypeError):
        w.write_at(1.5, b"x")  # type: ignore[arg-type]
    with pytest.raises(io.UnsupportedOperation):
        w.read_at(1, 0)
    with pytest.raises(io.UnsupportedOperation):
        w.readinto(bytearray(1))
    w.close()
    w.close()  # twice is fine
    with pytest.raises(ValueError, match="closed"):
        w.write_at(0, b"x")
    r = patio.Container(path)
    with pytest.raises(io.UnsupportedOperation):
        r.write_at(0, b"x")
    with pytest.raises(io.UnsupportedOperation):
        r.flush()
    with pytest.raises(ValueError):
        r.read_at(-1, 0)
    with pytest.raises(ValueError):
        r.read_at(1, -5)
    r.close()
    with pytest.raises(ValueError, match="closed"):
        r.read_at(1, 0)
    with pytest.raises(ValueError, match="closed"):
        _ = r.size
    with pytest.raises(ValueError):
        pc.truncate(path, -1)


@pytest.mark.skipif(not IS_ROOT, reason="switching to another uid needs root")
def test_permission_errors(tmp_path: Path) -> None:
    path = tmp_path / "secret.patio"
    with patio.Container(path, "w") as c:
        c.write_at(0, b"s3cret")
    path.chmod(0o700)
    tmp_path.chmod(0o755)
    script = (
        "import errno, sys, patio\n"
        "try:\n"
        "    patio.Container(sys.argv[1])\n"
        "except PermissionError as e:\n"
        "    assert e.errno == errno.EACCES and e.filename, e\n"
        "    print('ok')\n"
    )
    env = dict(os.environ, PYTHONPATH=str(Path(patio.__file__).parents[1]))
    skip_unless_nobody_imports_patio(env)
    done = subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         sys.executable, "-c", script, str(path)],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    if "Permission denied" in done.stderr and "python" in done.stderr.lower():
        pytest.skip(f"the venv's interpreter is not usable by uid {NOBODY}")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
