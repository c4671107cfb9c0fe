"""``patio mount prefetch`` through the kernel: real FUSE mounts, real reads, no mocks.

Each test mounts a temporary source directory holding a file of random bytes, reads it
through the mount with strided and random ``os.pread`` calls under one policy, in
direct-I/O mode (every read reaches the policy) and in cached mode (the kernel's page
cache and readahead in front), and checks that every read returned exactly the source's
bytes, that writes through the mount reach the source and drop what was prefetched
before them, and that the counters written with ``--stats-json`` add up. The slow store
runs with a small latency so that the tests stay short.

Mounts start and end through ``patio._mount_harness`` and are always removed, also when
a test fails (the fixture's cleanup). Helpers shared with the tracing mount's tests come
from ``test_mount_trace``.
"""

from __future__ import annotations

import functools
import os
import random
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from patio._binary import patio_binary
from patio._mount_harness import MountProcess
from test_mount_trace import one_line_error, patio, scratch, started

SIZE = 1 << 21
BLOCK = 16 << 10
STRIDE = 3 * BLOCK
STORE = ["--latency-ms", "1", "--bandwidth-mbps", "1000"]
MODES = {"direct": ["--direct-io"], "cached": []}


class PrefetchMount(MountProcess):
    """One ``patio mount prefetch`` process serving ``src`` at ``mnt``."""

    def __init__(self, base: Path, policy: str, *options: str):
        self.src, self.mnt = base / "src", base / "mnt"
        self.stats_file = base / "stats.json"
        for d in (self.src, self.mnt):
            d.mkdir(exist_ok=True)
        args = [patio_binary(), "mount", "prefetch", str(self.src), str(self.mnt)]
        args += ["--policy", policy, "--stats-json", str(self.stats_file), *options]
        self.start(args)

    def stop(self, how: str = "SIGINT") -> dict[str, Any]:
        """Ends the mount; returns the counters of ``--stats-json``."""
        self.end(how)
        return self.stats()


@pytest.fixture
def workdir() -> Iterator[Path]:
    with scratch("patio-prefetch-") as path:
        yield path


@pytest.fixture
def mount(workdir: Path) -> Iterator[Any]:
    """``mount(policy, *options)`` starts a mount; all are removed afterwards."""
    with started(functools.partial(PrefetchMount, workdir)) as start:
        yield start


def source_file(m: PrefetchMount, size: int = SIZE, seed: int = 1) -> bytes:
    data = random.Random(seed).randbytes(size)
    (m.src / "data.bin").write_bytes(data)
    return data


def strided_then_random(path: Path, data: bytes, seed: int) -> tuple[int, int, int]:
    """Strided reads over the whole file, then random ones (some past the end), each
    compared with ``data``; returns the reads, those that got bytes, and the bytes."""
    rng = random.Random(seed)
    fd = os.open(path, os.O_RDONLY)
    got: list[int] = []
    try:
        for off in range(0, len(data), STRIDE):
            chunk = os.pread(fd, BLOCK, off)
            assert chunk == data[off : off + BLOCK], off
            got.append(len(chunk))
        for _ in range(60):
            off = rng.randrange(len(data) + 3 * BLOCK)
            n = rng.randrange(1, 3 * BLOCK)
            chunk = os.pread(fd, n, off)
            assert chunk == data[off : off + n], (off, n)
            got.append(len(chunk))
    finally:
        os.close(fd)
    return len(got), sum(1 for n in got if n), sum(got)


def consistent(stats: dict[str, Any]) -> None:
    assert stats["hits"] + stats["late_hits"] + stats["misses"] == stats["requests"]
    assert stats["mount_reads"] == stats["requests"] + stats["passthrough_reads"]
    assert stats["passthrough_reads"] == 0 and stats["fallback_handles"] == 0
    assert stats["cache_bytes"] <= stats["read_bytes"]
    assert stats["prefetched_bytes"] == stats["used_bytes"] + stats["wasted_bytes"]
    assert stats["backend_bytes"] >= stats["demand_bytes"]
    assert 0.0 <= stats["coverage"] <= 1.0
    # Accuracy is null exactly when nothing was prefetched.
    assert (stats["accuracy"] is None) == (stats["prefetched_bytes"] == 0)
    assert stats["accuracy"] is None or 0.0 <= stats["accuracy"] <= 1.0


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("policy", ["none", "readahead", "stride", "pattern"])
def test_every_read_returns_the_source_bytes(mount: Any, policy: str, mode: str) -> None:
    m = mount(policy, *MODES[mode], *STORE)
    data = source_file(m)
    reads, with_bytes, nbytes = strided_then_random(m.mnt / "data.bin", data, seed=len(policy))
    stats = m.stop("fusermount" if policy == "stride" else "SIGINT")
    assert (m.src / "data.bin").read_bytes() == data
    consistent(stats)
    assert stats["policy"] == policy
    assert stats["fuse_mode"] == ("direct_io" if mode == "direct" else "cached")
    assert (stats["handles"], stats["files"]) == (1, 1)
    if mode == "direct":
        # Every application read reaches the engine unchanged.
        assert (stats["requests"], stats["read_bytes"]) == (reads, nbytes)
    else:
        # The kernel reads whole pages and reads ahead; cached pages never arrive.
        assert 0 < stats["requests"] and stats["read_bytes"] >= SIZE // 3
    if policy == "none":
        assert stats["prefetch_requests"] == 0 and stats["cache_bytes"] == 0
        assert stats["backend_requests"] == stats["demand_requests"]
        if mode == "direct":
            # Without prefetching each read that gets bytes is one backend request.
            assert stats["demand_requests"] == with_bytes
    elif mode == "direct" and policy in ("stride", "pattern"):
        # The strided part is predicted: most of it came from prefetches.
        strided_bytes = len(range(0, SIZE, STRIDE)) * BLOCK
        assert stats["cache_bytes"] >= strided_bytes // 2, stats
    assert "hits / late / misses" in m.stderr


@pytest.mark.parametrize("mode", sorted(MODES))
def test_writes_reach_the_source_and_replace_prefetched_bytes(mount: Any, mode: str) -> None:
    m = mount("stride", *MODES[mode], *STORE)
    data = bytearray(source_file(m, seed=7))
    path = m.mnt / "data.bin"
    reader = os.open(path, os.O_RDONLY)
    writer = os.open(path, os.O_WRONLY)
    try:
        # A strided stream the policy follows: what comes next is being prefetched.
        for i in range(12):
            off = i * STRIDE
            assert os.pread(reader, BLOCK, off) == data[off : off + BLOCK]
        time.sleep(0.05)
        # Overwrite the next strided blocks (partly) through another handle.
        for i in range(12, 16):
            off = i * STRIDE + 100
            new = bytes([i]) * 5000
            assert os.pwrite(writer, new, off) == len(new)
            data[off : off + len(new)] = new
        for i in range(12, 20):
            off = i * STRIDE
            assert os.pread(reader, BLOCK, off) == data[off : off + BLOCK], i
        # Shrink the file: reads stop at the new end; grow it: zeros appear.
        os.ftruncate(writer, 21 * STRIDE + 10)
        del data[21 * STRIDE + 10 :]
        for i in range(20, 23):
            off = i * STRIDE
            assert os.pread(reader, BLOCK, off) == bytes(data[off : off + BLOCK]), i
        os.ftruncate(writer, 22 * STRIDE)
        data.extend(bytes(22 * STRIDE - len(data)))
        off = 21 * STRIDE
        assert os.pread(reader, BLOCK, off) == bytes(data[off : off + BLOCK])
    finally:
        os.close(reader)
        os.close(writer)
    stats = m.stop()
    assert (m.src / "data.bin").read_bytes() == bytes(data)
    consistent(stats)
    assert stats["writes"] >= 4 and stats["written_bytes"] == 4 * 5000
    assert stats["invalidations"] >= 6
    assert (stats["handles"], stats["files"]) == (1, 1)
    if mode == "direct":
        assert stats["prefetch_requests"] > 0


def test_files_created_and_rewritten_through_the_mount(mount: Any) -> None:
    m = mount("pattern", "--direct-io")
    path = m.mnt / "new.bin"
    first = os.urandom(300_000)
    path.write_bytes(first)
    assert path.read_bytes() == first
    second = os.urandom(100_000)
    path.write_bytes(second)  # O_TRUNC: the old bytes must not come back
    assert path.read_bytes() == second
    fd = os.open(path, os.O_RDWR)
    try:
        for k in range(10):
            assert os.pread(fd, 4096, k * 8192) == second[k * 8192 : k * 8192 + 4096]
        os.pwrite(fd, b"z" * 4096, 10 * 8192)
        assert os.pread(fd, 4096, 10 * 8192) == b"z" * 4096
    finally:
        os.close(fd)
    stats = m.stop()
    consistent(stats)
    assert (m.src / "new.bin").read_bytes()[10 * 8192 : 10 * 8192 + 4096] == b"z" * 4096


def mixed_reads(size: int) -> list[tuple[int, int]]:
    """Strided reads, then archive-like entries (a 60 B header, then its data,
    then a jump), then a sequential run: every part of the ``pattern`` policy acts."""
    rng = random.Random(5)
    reads = [(k * STRIDE, BLOCK) for k in range(16)]
    for _ in range(12):
        at = rng.randrange(size // 2, size - (64 << 10))
        reads += [(at, 60), (at + 60, rng.randrange(2000, 30_000))]
    reads += [(size // 4 + k * 8192, 8192) for k in range(24)]
    return reads


def test_mount_and_open_run_the_same_policy(mount: Any) -> None:
    """``patio mount prefetch --direct-io`` and ``patio.open`` build a file's policy the
    same way: the same reads over the same slow store give the same misses and
    prefetched bytes (reads wait until every prefetch has landed, so timing plays no
    part), and two policies differ."""
    import patio

    seen: dict[tuple[str, str], tuple[int, int, int]] = {}
    for policy in ("pattern", "readahead"):
        m = mount(policy, "--direct-io", *STORE)
        data = source_file(m, seed=3)
        reads = mixed_reads(len(data))
        fd = os.open(m.mnt / "data.bin", os.O_RDONLY)
        try:
            for off, n in reads:
                assert os.pread(fd, n, off) == data[off : off + n]
                time.sleep(0.01)
        finally:
            os.close(fd)
        s = m.stop()
        consistent(s)
        seen[policy, "mount"] = (s["requests"], s["misses"], s["cache_bytes"])
        with patio.open(
            m.src / "data.bin", prefetch=policy, latency_ms=1, bandwidth_mbps=1000
        ) as f:
            for off, n in reads:
                assert f.pread(n, off) == data[off : off + n]
                time.sleep(0.01)
        s = f.stats()
        seen[policy, "open"] = (s["reads"], s["misses"], s["cache_bytes"])
    for policy in ("pattern", "readahead"):
        assert seen[policy, "mount"] == seen[policy, "open"], (policy, seen)
    assert seen["pattern", "open"] != seen["readahead", "open"], seen


def test_markov_runs_from_a_model_trained_on_an_earlier_run(mount: Any, workdir: Path) -> None:
    m = mount("none")
    data = source_file(m, size=1 << 20)
    m.stop()
    # A recorded run of the same strided reads (the CSV trace format), replayed once
    # to train and save the Markov model.
    offsets = range(0, len(data), STRIDE)
    lines = ["module,file,rank,op,offset,length,start,end"]
    lines += [f"FUSE,data.bin,1,read,{o},{BLOCK},{i}.0,{i}.5" for i, o in enumerate(offsets)]
    trace, model = workdir / "run.csv", workdir / "markov.ppms"
    trace.write_text("\n".join(lines) + "\n")
    patio(
        "replay",
        str(trace),
        "--data",
        str(m.src / "data.bin"),
        "--policy",
        "markov",
        "--latency-ms",
        "0",
        "--compute-ratio",
        "0",
        "--save-model",
        str(model),
    )
    m = mount("markov", "--direct-io", "--model", str(model), *STORE)
    fd = os.open(m.mnt / "data.bin", os.O_RDONLY)
    try:
        for o in offsets:
            assert os.pread(fd, BLOCK, o) == data[o : o + BLOCK]
    finally:
        os.close(fd)
    stats = m.stop()
    consistent(stats)
    assert stats["requests"] == len(offsets) and stats["cache_bytes"] > 0


def test_bad_inputs_are_one_line_errors(workdir: Path) -> None:
    src, mnt = workdir / "src", workdir / "mnt"
    src.mkdir()
    mnt.mkdir()
    (workdir / "file").write_bytes(b"")
    junk = workdir / "junk.model"
    junk.write_bytes(b"not a model")

    def run(s: Path, m: Path, *options: str) -> subprocess.CompletedProcess[str]:
        args = ["mount", "prefetch", str(s), str(m), *options]
        return patio(*args, check=False)

    pattern = ("--policy", "pattern")
    one_line_error(run(workdir / "nope", mnt, *pattern), "nope", "does not exist")
    one_line_error(run(src, workdir / "file", *pattern), "mount point", "not a directory")
    one_line_error(run(src, workdir / "gone", *pattern), "mount point", "does not exist")
    one_line_error(run(src, mnt, "--policy", "bogus"), "unknown policy", "bogus")
    one_line_error(run(src, mnt, "--policy", "oracle"), "oracle", "future")
    one_line_error(run(src, mnt, "--policy", "markov"), "markov", "--model")
    one_line_error(run(src, mnt, "--policy", "none", "--model", str(junk)), "takes no model")
    one_line_error(run(src, mnt, "--policy", "markov", "--model", str(junk)), "markov model")
    one_line_error(
        run(src, mnt, "--policy", "markov", "--model", str(workdir / "absent")),
        "cannot read model",
    )
    one_line_error(run(src, mnt, *pattern, "--latency-ms=-1"), "--latency-ms")
    one_line_error(run(src, mnt, *pattern, "--memory", "0"), "--memory")
    one_line_error(run(src, mnt, *pattern, "--memory", "1MiB", "--cache-mib", "1"), "give only")
    one_line_error(
        run(src, mnt, *pattern, "--stats-json", str(workdir / "no" / "s.json")),
        "cannot write statistics",
    )
    one_line_error(
        run(src, mnt, *pattern, "--stats-json", str(mnt / "s.json")), "inside the mount point"
    )
    assert not os.path.ismount(mnt)
