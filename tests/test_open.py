"""Tests for ``patio.open`` (prefetching file objects, :mod:`patio.prefetch`).

The reference model is Python's own ``open(path, "rb")``: hypothesis draws random
sequences of ``seek``/``read``/``readinto``/``pread``/``tell`` (random and strided, so
that the policies do prefetch) and every policy must give the same bytes, positions and
exception types, while its counters stay consistent. Then the errors (bad paths with
errno and file name, bad arguments, closed files), models, the GIL and fork.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import patio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_mount_trace import NOBODY, skip_unless_nobody_imports_patio

POLICIES = ["none", "readahead", "stride", "markov", "pattern"]
SIZE = 96 * 1024
SETTINGS = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bytes]:
    path = tmp_path_factory.mktemp("open") / "data.bin"
    content = np.random.default_rng(7).integers(0, 256, SIZE, dtype=np.uint8).tobytes()
    path.write_bytes(content)
    return path, content


# ----------------------------------------------------------------------- operations

offsets = st.one_of(st.integers(0, SIZE + 100), st.sampled_from([0, SIZE - 1, SIZE]))
sizes = st.one_of(st.integers(0, 9000), st.sampled_from([0, 1, 4096, SIZE]))

random_op = st.one_of(
    st.tuples(st.just("seek"), st.integers(-SIZE - 10, SIZE + 10), st.integers(0, 2)),
    st.tuples(st.just("read"), st.one_of(sizes, st.just(-1), st.none())),
    st.tuples(st.just("readinto"), sizes, st.sampled_from(["bytearray", "memoryview", "numpy"])),
    st.tuples(st.just("pread"), sizes, offsets),
    st.tuples(st.just("tell")),
)


@st.composite
def strided(draw: st.DrawFn) -> list[tuple[Any, ...]]:
    """A strided run of seek + read (or preads): what a policy should predict."""
    start = draw(st.integers(0, SIZE // 2))
    stride = draw(st.integers(1, 8192))
    length = draw(st.integers(1, min(stride, 4096)))
    count = draw(st.integers(4, 24))
    positional = draw(st.booleans())
    ops: list[tuple[Any, ...]] = []
    for k in range(count):
        at = start + k * stride
        if positional:
            ops.append(("pread", length, at))
        else:
            ops += [("seek", at, 0), ("read", length)]
    return ops


operations = st.lists(
    st.one_of(random_op.map(lambda op: [op]), strided()), min_size=1, max_size=12
).map(lambda groups: [op for g in groups for op in g])


def apply(f: Any, op: tuple[Any, ...], pread: Any) -> Any:
    """Runs one operation; returns its result (or the exception's type)."""
    try:
        kind = op[0]
        if kind == "seek":
            return f.seek(op[1], op[2])
        if kind == "read":
            return f.read(op[1])
        if kind == "readinto":
            n, how = op[1], op[2]
            if how == "numpy":
                buf: Any = np.zeros(n, dtype=np.uint8)
            elif how == "memoryview":
                buf = memoryview(bytearray(n))
            else:
                buf = bytearray(n)
            got = f.readinto(buf)
            return got, bytes(buf)
        if kind == "pread":
            return pread(f, op[1], op[2])
        return f.tell()
    except Exception as e:  # noqa: BLE001 - the type is compared with the reference
        return type(e)


def engine_reads(ops: list[tuple[Any, ...]], size: int) -> tuple[int, int]:
    """Reads that reach the engine (non-empty, before the end) and their bytes, by the
    reference semantics of the operations."""
    pos, reads, nbytes = 0, 0, 0
    for op in ops:
        kind = op[0]
        if kind == "seek":
            at = {0: op[1], 1: pos + op[1], 2: size + op[1]}[op[2]]
            if at >= 0:
                pos = at
        elif kind in ("read", "readinto"):
            n = size - pos if op[1] is None or op[1] < 0 else op[1]
            got = max(0, min(n, size - pos))
            if got > 0:
                reads, nbytes, pos = reads + 1, nbytes + got, pos + got
        elif kind == "pread":
            got = max(0, min(op[1], size - op[2]))
            if got > 0:
                reads, nbytes = reads + 1, nbytes + got
    return reads, nbytes


def check_stats(s: dict[str, float], reads: int, nbytes: int) -> None:
    assert s["reads"] == reads, s
    assert s["hits"] + s["late_hits"] + s["misses"] == reads, s
    assert s["read_bytes"] == nbytes, s
    assert s["cache_bytes"] + s["demand_bytes"] == nbytes, s
    assert s["partial_hits"] <= s["misses"], s
    assert s["used_bytes"] <= s["prefetched_bytes"], s
    assert s["backend_requests"] >= s["demand_requests"], s
    assert 0.0 <= s["coverage"] <= 1.0, s
    # Accuracy is unknown (None) exactly when nothing was prefetched.
    assert (s["accuracy"] is None) == (s["prefetched_bytes"] == 0), s
    assert s["accuracy"] is None or 0.0 <= s["accuracy"] <= 1.0, s


@pytest.mark.parametrize("policy", POLICIES)
def test_reads_match_the_builtin_open(policy: str, data: tuple[Path, bytes]) -> None:
    path, content = data

    @SETTINGS
    @given(ops=operations)
    def run(ops: list[tuple[Any, ...]]) -> None:
        with open(path, "rb") as ref, patio.open(path, prefetch=policy) as f:
            for op in ops:
                want = apply(ref, op, lambda r, n, o: os.pread(r.fileno(), n, o))
                got = apply(f, op, lambda p, n, o: p.pread(n, o))
                assert got == want, (op, ops)
                assert f.tell() == ref.tell()
            check_stats(f.stats(), *engine_reads(ops, len(content)))
        final = f.stats()
        check_stats(final, *engine_reads(ops, len(content)))
        # Closed: unused prefetches are waste, and nothing was used twice.
        assert final["used_bytes"] + final["wasted_bytes"] <= final["prefetched_bytes"]

    run()


@pytest.mark.parametrize("policy", ["readahead", "stride", "pattern"])
def test_policies_prefetch_patterns_over_a_slow_store(
    policy: str, data: tuple[Path, bytes]
) -> None:
    path, content = data
    # Sequential for readahead, strided for the others.
    stride = 1024 if policy == "readahead" else 3072
    reads = SIZE // stride
    with patio.open(path, prefetch=policy, latency_ms=0.5, bandwidth_mbps=500) as f:
        for k in range(reads):
            f.seek(k * stride)
            assert f.read(1024) == content[k * stride : k * stride + 1024]
        s = f.stats()
    check_stats(s, reads, reads * 1024)
    assert s["misses"] < reads / 4, s
    assert s["coverage"] > 0.7, s


def test_none_never_prefetches(data: tuple[Path, bytes]) -> None:
    path, _ = data
    with patio.open(path, prefetch=None) as f:
        for k in range(20):
            f.read(1000)
        s = f.stats()
    assert s["misses"] == s["reads"] == 20
    assert s["prefetch_requests"] == 0 and s["prefetched_bytes"] == 0


# ----------------------------------------------------------------------- file object


def test_file_object_protocol(data: tuple[Path, bytes]) -> None:
    path, content = data
    assert patio.open is patio.prefetch.open and "open" in patio.__all__
    f = patio.open(path)
    assert isinstance(f, io.RawIOBase)
    assert f.readable() and f.seekable() and not f.writable()
    assert f.mode == "rb" and f.name == str(path) and f.policy == "pattern"
    assert f.size == SIZE
    assert "O_DIRECT" in f.io_mode
    with pytest.raises(io.UnsupportedOperation):
        f.fileno()
    with pytest.raises(io.UnsupportedOperation):
        f.write(b"x")
    # numpy arrays of any dtype are filled in place.
    arr = np.zeros(1000, dtype=np.float64)
    assert f.readinto(arr) == 8000
    assert arr.tobytes() == content[:8000]
    assert f.preadinto(arr[:10], 16) == 80 and arr[:10].tobytes() == content[16:96]
    assert f.tell() == 8000
    with pytest.raises(TypeError):
        f.readinto(b"read-only")
    with pytest.raises(TypeError):
        f.readinto(np.zeros((4, 4))[:, 1])  # not contiguous
    with pytest.raises(ValueError):
        f.seek(0, 7)
    with pytest.raises(TypeError):
        f.seek(1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        f.pread(-1, 0)
    with pytest.raises(ValueError):
        f.pread(1, -1)
    assert f.seek(-10, os.SEEK_END) == SIZE - 10
    assert f.read() == content[-10:]
    assert f.read() == b"" and f.read(5) == b""
    f.close()
    assert f.closed
    f.close()  # twice is fine
    assert "closed" in repr(f)


def test_buffered_reader_lines_and_iteration(tmp_path: Path) -> None:
    path = tmp_path / "lines.txt"
    lines = [f"line {i}\n".encode() for i in range(2000)]
    path.write_bytes(b"".join(lines))
    with io.BufferedReader(patio.open(path, prefetch="readahead")) as b:
        assert b.readline() == lines[0]
        assert list(b) == lines[1:]
    with io.TextIOWrapper(io.BufferedReader(patio.open(str(path).encode()))) as t:
        assert t.read().count("\n") == 2000


def test_closed_file_operations_raise_value_error(data: tuple[Path, bytes]) -> None:
    path, _ = data
    f = patio.open(path)
    f.read(100)
    f.close()
    ops = [
        lambda: f.read(1),
        lambda: f.read(),
        lambda: f.readinto(bytearray(4)),
        lambda: f.pread(1, 0),
        lambda: f.seek(0),
        lambda: f.tell(),
        lambda: f.readable(),
        lambda: f.__enter__(),
    ]
    for op in ops:
        with pytest.raises(ValueError, match="closed file"):
            op()
    assert f.stats()["reads"] == 1  # counters survive the close


def test_bad_paths_raise_os_errors_with_errno_and_name(tmp_path: Path) -> None:
    missing = tmp_path / "missing.bin"
    with pytest.raises(FileNotFoundError) as e:
        patio.open(missing)
    assert e.value.errno == 2 and e.value.filename == str(missing)
    with pytest.raises(IsADirectoryError) as d:
        patio.open(tmp_path)
    assert d.value.errno == 21 and d.value.filename == str(tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="not a regular file"):
        patio.open(fifo)


def test_unreadable_file_raises_permission_error(tmp_path: Path) -> None:
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"s3cret")
    secret.chmod(0o600)
    code = (
        "import patio, sys\n"
        "try:\n"
        f"    patio.open({str(secret)!r})\n"
        "except PermissionError as e:\n"
        "    sys.exit(0 if (e.errno, e.filename) == (13, sys.argv[1]) else 2)\n"
        "sys.exit(1)\n"
    )
    argv = [sys.executable, "-c", code, str(secret)]
    if os.geteuid() == 0:
        tmp_path.chmod(0o755)
        argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv]
    else:
        secret.chmod(0)
    env = {**os.environ, "PYTHONPATH": str(Path(patio.__file__).parents[1])}
    if os.geteuid() == 0:
        skip_unless_nobody_imports_patio(env)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "r"}, "invalid mode 'r'"),
        ({"mode": "rb+"}, "invalid mode"),
        ({"mode": "wb"}, "invalid mode"),
        ({"prefetch": "oracle"}, "patio replay"),
        ({"prefetch": "bogus"}, "must be one of"),
        ({"prefetch": "stride", "model": "m.bin"}, "learns no model"),
        ({"prefetch": "readahead", "save_model": "m.bin"}, "learns no model"),
        ({"latency_ms": -1.0}, "latency_ms"),
        ({"latency_ms": float("nan")}, "latency_ms"),
        ({"bandwidth_mbps": float("inf")}, "bandwidth_mbps"),
        ({"cache_mib": 0}, "cache_mib"),
        ({"concurrency": 0}, "concurrency"),
    ],
)
def test_bad_arguments_raise_value_error(
    data: tuple[Path, bytes], kwargs: dict[str, Any], message: str
) -> None:
    path, _ = data
    with pytest.raises(ValueError, match=message):
        patio.open(path, **kwargs)


def test_the_cache_budget_is_shared_and_changes_only_while_nothing_is_open(
    data: tuple[Path, bytes],
) -> None:
    path, _ = data
    with patio.open(path, cache_mib=16) as f:
        assert f.stats()["cache_budget_bytes"] == 16 << 20
        with pytest.raises(ValueError, match="shared by all open patio files"):
            patio.open(path, cache_mib=32)
        with patio.open(path, cache_mib=16) as g, patio.open(path) as h:
            assert g.stats()["cache_budget_bytes"] == h.stats()["cache_budget_bytes"]
    with patio.open(path, cache_mib=64) as f:
        assert f.stats()["cache_budget_bytes"] == 64 << 20
    assert patio.prefetch_stats()["cache_budget_bytes"] == 64 << 20


# ----------------------------------------------------------------------- models


@pytest.mark.parametrize("policy", ["markov", "pattern"])
def test_models_are_saved_and_loaded(policy: str, data: tuple[Path, bytes], tmp_path: Path) -> None:
    path, content = data
    model = tmp_path / f"{policy}.model"

    def run(**kwargs: Any) -> dict[str, float]:
        with patio.open(path, prefetch=policy, **kwargs) as f:
            for k in range(0, SIZE - 8192, 3 * 8192):
                assert f.pread(8192, k) == content[k : k + 8192]
            return f.stats()

    run(save_model=model)
    assert model.stat().st_size > 0
    # A store with latency: hints are issued before each demand read, so the workers start
    # the prefetch while the read waits. With an instant store the next read can come
    # before a worker has picked the prefetch up and take it over (a miss, nothing
    # prefetched) - a race, not a prediction failure.
    second = run(model=model, latency_ms=3)
    check_stats(second, len(range(0, SIZE - 8192, 3 * 8192)), second["read_bytes"])
    if policy == "markov":
        # The trained model predicts from the first read on.
        assert second["prefetched_bytes"] > 0
    garbage = tmp_path / "garbage"
    garbage.write_bytes(b"not a model at all")
    with pytest.raises(ValueError, match="not a saved"):
        patio.open(path, prefetch=policy, model=garbage)
    with pytest.raises(FileNotFoundError):
        patio.open(path, prefetch=policy, model=tmp_path / "missing")


# ----------------------------------------------------------------------- threads, fork


def test_reads_release_the_gil(tmp_path: Path) -> None:
    paths = []
    for i in range(2):
        p = tmp_path / f"f{i}"
        p.write_bytes(bytes(8192))
        paths.append(p)
    files = [patio.open(p, prefetch="none", latency_ms=250) for p in paths]
    threads = [threading.Thread(target=f.read, args=(4096,)) for f in files]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    for f in files:
        f.close()
    # Two 250 ms reads (±10 % jitter) overlap: well under the 450 ms of two in a row.
    assert elapsed < 0.44, elapsed


def test_a_forked_child_reopens(data: tuple[Path, bytes]) -> None:
    path, _ = data
    code = (
        "import os, sys, patio\n"
        "path = sys.argv[1]\n"
        "f = patio.open(path)\n"
        "first = f.read(100)\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    try:\n"
        "        f.read(10)\n"
        "        os._exit(3)\n"
        "    except OSError:\n"
        "        pass\n"
        "    with patio.open(path) as g:\n"
        "        ok = g.read(100) == first and g.pread(10, 5) == first[5:15]\n"
        "    os._exit(0 if ok else 4)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "assert f.read(10) == open(path, 'rb').read()[100:110]\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(patio.__file__).parents[1])}
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", code, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
