"""``patio mount cache`` through the kernel: real FUSE mounts, real processes, no mocks.

Each test mounts a temporary source directory with a cache directory beside it and
checks, against a byte-array model of the file, that every read through the mount
returns exactly the current bytes under random reads, writes and truncations made by
several processes (policies ``none``, ``lru`` and ``group``); that a change made to
the source behind the mount is seen; that the memory and disk budgets hold under
concurrent readers; that fio's crc32c verification passes through the mount; that a
second mount of the same cache directory starts warm, also after the daemon was
killed with SIGKILL; and that bad inputs are one-line errors.

Sources are read without a storage model (the local disk's own speed) so the tests
stay short; ``patio bench cache`` measures with the HDD-like model.
"""

from __future__ import annotations

import functools
import json
import multiprocessing
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
from test_mount_trace import one_line_error, patio, scratch, started, tool

SMALL = ["--memory", "1MiB", "--disk", "4MiB", "--segment", "256KiB", "--item", "16KiB"]
MEMORY, DISK = 1 << 20, 4 << 20


class CacheMount(MountProcess):
    """One ``patio mount cache`` process serving ``src`` at ``mnt``."""

    def __init__(self, base: Path, policy: str, *options: str, cache: str = "cache"):
        self.src, self.mnt, self.cache = base / "src", base / "mnt", base / cache
        self.stats_file = base / "stats.json"
        for d in (self.src, self.mnt):
            d.mkdir(exist_ok=True)
        args = [patio_binary(), "mount", "cache", str(self.src), str(self.mnt)]
        args += ["--cache-dir", str(self.cache), "--policy", policy]
        args += ["--stats-json", str(self.stats_file), *options]
        self.start(args)

    def stop(self) -> dict[str, Any]:
        """Ends the mount; returns the counters of ``--stats-json``."""
        self.end("SIGINT", timeout=60)
        return self.stats()


@pytest.fixture
def workdir() -> Iterator[Path]:
    with scratch("patio-cache-") as path:
        yield path


@pytest.fixture
def mount(workdir: Path) -> Iterator[Any]:
    """``mount(policy, *options, cache=…)`` starts a mount; all are removed afterwards."""
    with started(functools.partial(CacheMount, workdir)) as start:
        yield start


_FD: dict[str, int] = {}


def _op(path: str, op: str, offset: int, arg: Any) -> Any:
    """One operation in a worker process, on a descriptor the process keeps open."""
    fd = _FD.get(path)
    if fd is None:
        fd = _FD[path] = os.open(path, os.O_RDWR)
    if op == "read":
        return os.pread(fd, arg, offset)
    if op == "write":
        return os.pwrite(fd, arg, offset)
    os.ftruncate(fd, arg)
    return None


def _walk(path: str, offsets: list[int], length: int, rounds: int) -> list[tuple[int, bytes]]:
    fd = os.open(path, os.O_RDONLY)
    try:
        out = []
        for _ in range(rounds):
            for off in offsets:
                out.append((off, os.pread(fd, length, off)))
        return out
    finally:
        os.close(fd)


@pytest.mark.parametrize("policy", ["none", "lru", "group"])
def test_random_mix_from_several_processes_matches_a_model(
    mount: Any, workdir: Path, policy: str
) -> None:
    rng = random.Random(13)
    model = bytearray(rng.randbytes(3 << 20))
    (workdir / "src").mkdir()
    (workdir / "src" / "f.dat").write_bytes(model)
    m = mount(policy, *SMALL, "--link-j", "1", "--link-k", "2", "--build-after", "4")
    target = str(m.mnt / "f.dat")
    walk = [rng.randrange(0, 3 << 20) for _ in range(40)]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(3) as pool:
        for step in range(500):
            r = rng.random()
            if r < 0.05:
                off, data = (
                    rng.randrange(0, len(model) + 8192),
                    rng.randbytes(rng.randrange(1, 40000)),
                )
                assert pool.apply(_op, (target, "write", off, data)) == len(data)
                model[len(model) : off + len(data)] = bytes(max(0, off + len(data) - len(model)))
                model[off : off + len(data)] = data
            elif r < 0.07:
                size = rng.randrange(2 << 20, 4 << 20)
                pool.apply(_op, (target, "truncate", 0, size))
                del model[size:]
                model.extend(bytes(size - len(model)))
            else:
                off = (
                    walk[step % len(walk)]
                    if rng.random() < 0.8
                    else rng.randrange(0, len(model) + 100)
                )
                n = rng.randrange(1, 70000)
                got = pool.apply(_op, (target, "read", off, n))
                assert got == bytes(model[off : off + n]), (policy, step, off, n)
        # Concurrent readers, no writes: every one sees the model.
        jobs = [pool.apply_async(_walk, (target, walk[i::3], 20000, 3)) for i in range(3)]
        for job in jobs:
            for off, got in job.get(timeout=120):
                assert got == bytes(model[off : off + 20000])
    assert (workdir / "src" / "f.dat").read_bytes() == bytes(model)
    stats = m.stop()
    assert stats["policy"] == policy
    assert stats["peak_memory_bytes"] <= MEMORY
    if policy != "none":
        assert stats["group_hits"] + stats["plain_hits"] > 0
        assert stats["invalidated_items"] > 0
        assert os.path.getsize(m.cache / "segments.dat") <= DISK
        assert stats["slots_used"] <= stats["slots"]
    if policy == "group":
        assert stats["group_hits"] > 0 and stats["groups_built"] > 0
        assert stats["segment_writes"] > 0 and stats["grouping_io_bytes"] > 0


def test_a_change_behind_the_mount_is_seen(mount: Any, workdir: Path) -> None:
    (workdir / "src").mkdir()
    src = workdir / "src" / "g.dat"
    src.write_bytes(b"a" * 300_000)
    m = mount("group", *SMALL)
    with open(m.mnt / "g.dat", "rb", buffering=0) as f:
        for _ in range(3):
            assert f.read(300_000) == b"a" * 300_000
            f.seek(0)
        time.sleep(0.05)
        with open(src, "r+b") as w:  # same size, new bytes
            w.seek(100_000)
            w.write(b"b" * 1000)
        assert os.pread(f.fileno(), 2000, 99_500) == b"a" * 500 + b"b" * 1000 + b"a" * 500
        time.sleep(0.05)
        os.replace(_write(workdir / "src" / "new.tmp", b"c" * 1234), src)  # new inode
    with open(m.mnt / "g.dat", "rb") as f:
        assert f.read() == b"c" * 1234
    stats = m.stop()
    assert stats["stale_files"] >= 1


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_fio_verifies_crc32c_through_the_mount(mount: Any, workdir: Path) -> None:
    fio = tool("fio")
    m = mount("group", *SMALL)
    common = [fio, "--name=v", f"--filename={m.mnt / 'fio.dat'}", "--size=2m", "--bs=16k"]
    common += ["--verify=crc32c", "--ioengine=psync", "--randseed=7"]
    done = subprocess.run(
        [*common, "--rw=randwrite", "--do_verify=1"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=workdir,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for _ in range(2):  # the second pass is served by the cache
        done = subprocess.run(
            [*common, "--rw=randread", "--verify_only"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
            cwd=workdir,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "verify" not in done.stderr.lower() or "bad" not in done.stderr.lower()
    stats = m.stop()
    assert stats["reads"] > 0 and stats["writes"] > 0


def _read_walk(mnt: Path, expect: bytes, offsets: list[int]) -> None:
    with open(mnt / "w.dat", "rb", buffering=0) as f:
        for _ in range(3):
            for off in offsets:
                assert os.pread(f.fileno(), 8192, off) == expect[off : off + 8192]


def test_restart_is_warm_and_sigkill_then_remount_is_correct(mount: Any, workdir: Path) -> None:
    rng = random.Random(5)
    data = rng.randbytes(2 << 20)
    (workdir / "src").mkdir()
    (workdir / "src" / "w.dat").write_bytes(data)
    time.sleep(1.1)  # older than the table's one-second racy window
    offsets = [rng.randrange(0, (2 << 20) - 8192) for _ in range(30)]
    opts = [*SMALL, "--link-j", "1", "--link-k", "2", "--idle-ms", "200"]
    m = mount("group", *opts)
    _read_walk(m.mnt, data, offsets)
    time.sleep(0.8)  # an idle period: groups are written as segments
    first = m.stop()
    assert first["segment_writes"] > 0
    stat = patio("cache", "stat", str(m.cache), "--json")
    info = json.loads(stat.stdout)
    assert info["items"] > 0 and info["generation"] >= 1 and info["policy"] == "group"
    m = mount("group", *opts)
    _read_walk(m.mnt, data, offsets)
    time.sleep(0.8)  # an idle period: the table is saved
    m.kill()
    # Behind the killed mount's back, part of the file changes.
    changed = bytearray(data)
    changed[offsets[0] : offsets[0] + 4096] = b"z" * 4096
    (workdir / "src" / "w.dat").write_bytes(changed)
    m = mount("group", *opts)
    _read_walk(m.mnt, bytes(changed), offsets)
    third = m.stop()
    assert third["warm_items"] > 0
    assert third["stale_files"] >= 1
    # A damaged table: a cold start, said in one line, and correct data.
    table = m.cache / "table.bin"
    table.write_bytes(table.read_bytes()[:-3])
    m = mount("group", *opts)
    _read_walk(m.mnt, bytes(changed), offsets)
    fourth = m.stop()
    assert fourth["warm_items"] == 0 and "damaged" in fourth["cold_reason"]


def test_a_warm_restart_serves_from_the_segment_store(mount: Any, workdir: Path) -> None:
    data = random.Random(9).randbytes(1 << 20)
    (workdir / "src").mkdir()
    (workdir / "src" / "w.dat").write_bytes(data)
    time.sleep(1.1)
    offsets = list(range(0, (1 << 20) - 8192, 65536))
    m = mount("lru", *SMALL)
    _read_walk(m.mnt, data, offsets)
    m.stop()
    m = mount("lru", *SMALL)
    _read_walk(m.mnt, data, offsets)
    stats = m.stop()
    assert stats["warm_items"] > 0 and stats["bytes_from_segments"] > 0


def _tmpfs(path: Path, *opts: str) -> bool:
    path.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", ",".join(opts), "tmpfs", str(path)],
        check=False,
        capture_output=True,
    )
    return done.returncode == 0


def test_bad_inputs_are_one_line_errors(workdir: Path) -> None:
    src, mnt = workdir / "src", workdir / "mnt"
    src.mkdir()
    mnt.mkdir()

    def run(
        *extra: str, cache: Path = workdir / "cache", source: Path = src
    ) -> subprocess.CompletedProcess[str]:
        return patio(
            "mount", "cache", str(source), str(mnt), "--cache-dir", str(cache), *extra, check=False
        )

    one_line_error(run(source=workdir / "missing"), "does not exist")
    one_line_error(run("--disk", "1MiB"), "smaller than one segment")
    one_line_error(run("--memory", "1MiB"), "memory budget")
    one_line_error(run("--segment", "100KiB", "--item", "64KiB"), "multiple of the item size")
    one_line_error(run("--memory", "64MiB", "--memory-mib", "64"), "give only --memory")
    newer = workdir / "newer"
    newer.mkdir()
    (newer / "table.bin").write_bytes(b"PSGT" + (99).to_bytes(2, "little") + bytes(20))
    one_line_error(run(cache=newer), "newer patio")
    ro, full = workdir / "ro", workdir / "full"
    if _tmpfs(ro, "ro", "size=1m"):
        try:
            one_line_error(run(cache=ro / "c"), "read-only")
        finally:
            subprocess.run(["umount", str(ro)], check=False)
    if _tmpfs(full, "size=1m"):
        try:
            one_line_error(run(cache=full), "no space left")
            # A cache directory the failed start created is not left behind.
            one_line_error(run(cache=full / "new"), "no space left")
            assert not (full / "new").exists()
        finally:
            subprocess.run(["umount", str(full)], check=False)
    assert not os.path.ismount(mnt)
    one_line_error(patio("cache", "stat", str(workdir / "nothing"), check=False), "does not exist")
    for bad in ("3/2", "x/4", "2"):
        done = patio("bench", "cache", "--sweep-jk", bad, check=False)
        one_line_error(done, "--sweep-jk", "J/K")
    for flag, value, words in (
        ("--reps", "0", ("--reps", "at least 1")),
        ("--sizes", "2000", ("--sizes 2000", "at most 1000")),
        ("--tile-rows", "1", ("--tile-rows", "between")),
    ):
        done = patio("bench", "cache", flag, value, check=False)
        one_line_error(done, *words)


def test_group_caches_like_lru_and_builds_nothing_for_a_walk_that_fits(
    mount: Any, workdir: Path
) -> None:
    rng = random.Random(13)
    data = rng.randbytes(2 << 20)
    (workdir / "src").mkdir()
    (workdir / "src" / "w.dat").write_bytes(data)
    # ~100 scattered 16 KiB items: more than memory (1 MiB), less than the store (4 MiB).
    offsets = [rng.randrange(0, (2 << 20) - 8192) // 16384 * 16384 for _ in range(100)]
    once, again = offsets[:], offsets[:]
    rng.shuffle(again)
    counters = {}
    for policy in ("lru", "group"):
        # j = 3 of k = 3: two passes in different orders link nothing.
        m = mount(policy, *SMALL, "--link-j", "3", "--link-k", "3", cache=f"cache-{policy}")
        with open(m.mnt / "w.dat", "rb", buffering=0) as f:
            for off in once + again:
                assert os.pread(f.fileno(), 8192, off) == data[off : off + 8192]
        counters[policy] = m.stop()
    lru, group = counters["lru"], counters["group"]
    # (A stretch that happens to look strided may bring its next period ahead.)
    assert lru["source_bytes"] == len(set(offsets)) * 16384
    assert group["source_bytes"] - group["stride_bytes"] <= lru["source_bytes"]
    assert group["grouping_source_bytes"] == group["stride_bytes"]
    assert group["bytes_from_segments"] > 0 and group["group_hits"] == 0
    assert group["peak_memory_bytes"] <= MEMORY
    # A learned walk that fits the store: a whole-store LRU hits all of it after the first
    # pass, so no group segment is worth building (groups build only for what LRU would
    # miss); the items themselves are still written to the store as memory overflows.
    opts = [*SMALL, "--link-j", "1", "--link-k", "2", "--idle-ms", "200"]
    m = mount("group", *opts, cache="cache-walk")
    walk = sorted(set(offsets))[:40]
    rng.shuffle(walk)
    # Read first in file order, then twice as the walk.
    with open(m.mnt / "w.dat", "rb", buffering=0) as f:
        for order in (sorted(walk), walk, walk):
            for off in order:
                assert os.pread(f.fileno(), 8192, off) == data[off : off + 8192]
    time.sleep(0.8)  # an idle period: groups are written as segments
    stats = m.stop()
    # SOURCE read once per item, and for groups only a strided stretch's next period.
    assert stats["source_bytes"] <= len(walk) * 16384 + stats["stride_bytes"]
    assert stats["grouping_source_bytes"] == stats["stride_bytes"]
    assert stats["grouping_local_bytes"] == 0  # nothing moved in the store for groups
    assert stats["grouping_io_bytes"] == stats["stride_bytes"]


def test_successors_are_learned_across_processes(mount: Any, workdir: Path) -> None:
    """Each process reads the walk once: no process sees a successor twice, together
    they do (j = 2 of k = 4), so the walk forms groups only when two processes read it."""
    rng = random.Random(29)
    data = rng.randbytes(2 << 20)
    (workdir / "src").mkdir()
    (workdir / "src" / "m.dat").write_bytes(data)
    offsets = rng.sample(range(0, 2 << 20, 16384), 24)
    offsets.append(offsets[0])  # a loop: groups are its strongly connected parts
    ctx = multiprocessing.get_context("fork")
    built = {}
    for readers in (1, 2):
        opts = [*SMALL, "--link-j", "2", "--link-k", "4", "--idle-ms", "200"]
        m = mount("group", *opts, cache=f"cache-{readers}")
        target = str(m.mnt / "m.dat")
        for _ in range(readers):
            with ctx.Pool(1) as pool:  # a process of its own each time
                for off, got in pool.apply(_walk, (target, offsets, 8192, 1)):
                    assert got == data[off : off + 8192]
        time.sleep(0.8)  # an idle period: the groups are rebuilt
        stats = m.stop()
        built[readers] = stats["groups_built"] + stats["groups_reused"]
    assert built[1] == 0 and built[2] > 0, built
