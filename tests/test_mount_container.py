"""``patio mount container`` through the kernel: real FUSE mounts, real programs, no mocks.

Each test mounts an empty backend directory, runs programs against the mount (Python
subprocesses writing interleaved strided blocks of one shared file, ``fio`` jobs,
shell tools), stops the mount (``fusermount3 -u``, SIGINT or SIGTERM) and checks the
result three ways: byte for byte through the mount, through ``patio container
flatten`` of the backend container, and in the container's index (``patio container
stat --json``: one index log per writing process, a pattern index). Further tests
check sizes seen by other processes while a file is being written, truncation,
unlink (also while open), rename, readdir, chmod/chown, permissions for a non-root
user (``setpriv``), that a signal flushes the writers of files still open, and the
one-line errors.

Mounts start and end through ``patio._mount_harness`` and are always removed, also when
a test fails (the fixture's cleanup). Helpers shared with the tracing mount's tests come
from ``test_mount_trace``.
"""

from __future__ import annotations

import errno
import functools
import json
import mmap
import os
import re
import signal
import stat
import struct
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from patio._binary import patio_binary
from patio._mount_harness import MountProcess
from test_mount_trace import (
    IS_ROOT,
    NOBODY,
    as_nobody,
    one_line_error,
    patio,
    scratch,
    started,
    tool,
)

BLOCK = 4096


class ContainerMount(MountProcess):
    """One ``patio mount container`` process serving ``backend`` at ``mnt``."""

    def __init__(self, base: Path, *options: str, name: str = "mnt"):
        self.backend, self.mnt = base / "backend", base / name
        for d in (self.backend, self.mnt):
            d.mkdir(exist_ok=True)
            d.chmod(0o755)
        self.start([patio_binary(), "mount", "container", str(self.backend), str(self.mnt), *options])

    def stop(self, how: str = "fusermount") -> str:
        """Ends the mount and returns patio's stderr (with the summary)."""
        stderr = self.end(how)
        assert "failures" not in stderr, stderr
        return stderr


@pytest.fixture
def base() -> Iterator[Path]:
    with scratch("patio-container-", shared=True) as path:
        yield path


@pytest.fixture
def mount(base: Path) -> Iterator[Any]:
    """``mount(*options, name=…)`` starts a mount; all are removed afterwards."""
    with started(functools.partial(ContainerMount, base)) as start:
        yield start


def summary(stderr: str) -> dict[str, str]:
    """The unmount summary's ``key  value`` lines."""
    lines = [line.strip() for line in stderr.splitlines() if line.startswith("  ")]
    return dict(re.split(r"\s{2,}", line, maxsplit=1) for line in lines)


def container_stat(path: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(patio("container", "stat", str(path), "--json").stdout)
    return report


def flattened(path: Path, out: Path) -> bytes:
    patio("container", "flatten", str(path), str(out))
    return out.read_bytes()


def index_logs(container: Path) -> list[str]:
    return sorted(p.name for p in container.iterdir() if p.name.startswith("index."))


# ---- many processes, one file -------------------------------------------------------

STRIDED_WRITER = textwrap.dedent(
    """
    import os, struct, sys, time
    path, rank, procs, blocks, bs = sys.argv[1], *map(int, sys.argv[2:6])
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(blocks):
        block = struct.pack("<II", rank, i) * (bs // 8)
        assert os.pwrite(fd, block, (i * procs + rank) * bs) == bs
    if len(sys.argv) > 6:
        # Barrier: every process keeps the file open until all have written, so each
        # writes its own log set (a writer that starts after another ended takes over
        # the ended one's logs).
        barrier = sys.argv[6]
        open(os.path.join(barrier, str(rank)), "w").close()
        deadline = time.monotonic() + 60
        while len(os.listdir(barrier)) < procs and time.monotonic() < deadline:
            time.sleep(0.01)
    os.close(fd)
    """
)


def strided_expected(procs: int, blocks: int, bs: int = BLOCK) -> bytes:
    out = bytearray(procs * blocks * bs)
    for rank in range(procs):
        for i in range(blocks):
            at = (i * procs + rank) * bs
            out[at : at + bs] = struct.pack("<II", rank, i) * (bs // 8)
    return bytes(out)


@pytest.mark.parametrize("index", ["pattern", "raw"])
def test_processes_write_interleaved_strided_blocks(mount: Any, base: Path, index: str) -> None:
    # The layout as written, one log set per process: compaction (tested in
    # test_mount_container_life.py) would merge these small logs once the file is at rest.
    m = mount("--index", index, "--no-compact")
    procs, blocks = 4, 96
    path = m.mnt / "shared.dat"
    barrier = base / "barrier"
    barrier.mkdir()
    writers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                STRIDED_WRITER,
                str(path),
                str(r),
                str(procs),
                str(blocks),
                str(BLOCK),
                str(barrier),
            ]
        )
        for r in range(procs)
    ]
    assert all(w.wait(timeout=60) == 0 for w in writers)
    expected = strided_expected(procs, blocks)
    assert os.stat(path).st_size == len(expected)
    assert path.read_bytes() == expected
    # Reads of any size and alignment, from another process.
    reader = textwrap.dedent(
        f"""
        import os
        fd = os.open({str(path)!r}, os.O_RDONLY)
        print(os.pread(fd, 10000, 4000).hex(), os.pread(fd, 100, {len(expected) - 50}).hex())
        """
    )
    got = subprocess.run(
        [sys.executable, "-c", reader], capture_output=True, text=True, check=True, timeout=60
    ).stdout.split()
    assert got == [expected[4000:14000].hex(), expected[-50:].hex()]
    message = m.stop()
    assert summary(message)["files written"] == "1"
    assert summary(message)["writers"].startswith(f"{procs} ")

    container = m.backend / "shared.dat"
    assert flattened(container, base / "flat") == expected
    assert len(index_logs(container)) == procs, "one index log per writing process"
    report = container_stat(container)
    assert report["index_mode"] == index
    assert (report["writers"], report["writes"], report["size"]) == (
        procs,
        procs * blocks,
        len(expected),
    )
    assert report["damage"] == []
    if index == "pattern":
        assert report["tiles"] == 1 and report["loose_writes"] == 0
        assert report["compression_ratio"] > 10
    else:
        assert report["raw_entries"] == procs * blocks


def test_fio_jobs_write_every_fourth_block_then_verify(mount: Any, base: Path) -> None:
    """Four fio jobs (processes) write one file at interleaved 4 KiB blocks with crc32c
    headers; a second fio run verifies every block; the container holds one index log
    per job and a pattern index."""
    fio = tool("fio")
    # One log set per job, as written: no compaction, and no job takes over the logs of
    # one that ended before its first write (as a job started late on a loaded machine
    # would, with logs up to --compact-small-log taken over).
    m = mount("--compact-small-log", "0")
    jobs, per_job = 4, 128
    span = jobs * per_job * BLOCK
    job = [
        fio,
        "--name=strided",
        f"--filename={m.mnt / 'fio.dat'}",
        f"--rw=write:{(jobs - 1) * BLOCK}",  # skip the other jobs' blocks
        f"--bs={BLOCK}",
        f"--offset_increment={BLOCK}",  # job j starts at block j
        f"--numjobs={jobs}",
        f"--size={span - (jobs - 1) * BLOCK}",  # every job's range ends at the file's end
        f"--io_size={per_job * BLOCK}",
        "--ioengine=psync",
        "--fallocate=none",
        "--verify=crc32c",
        "--output-format=json",
    ]

    def run(*extra: str) -> dict[str, Any]:
        done = subprocess.run(
            [*job, *extra], capture_output=True, text=True, timeout=120, check=False, cwd=base
        )
        assert done.returncode == 0, done.stdout + done.stderr
        report: dict[str, Any] = json.loads(done.stdout[done.stdout.index("{") :])
        return report

    written = run("--do_verify=0")
    assert [j["write"]["total_ios"] for j in written["jobs"]] == [per_job] * jobs
    assert os.stat(m.mnt / "fio.dat").st_size == span
    verified = run("--verify_only")
    assert all(j["error"] == 0 for j in verified["jobs"])
    assert sum(j["read"]["io_bytes"] for j in verified["jobs"]) == span
    m.stop()

    container = m.backend / "fio.dat"
    assert len(index_logs(container)) == jobs
    report = container_stat(container)
    assert (report["writers"], report["writes"], report["size"]) == (jobs, jobs * per_job, span)
    assert report["index_mode"] == "pattern"
    assert report["tiles"] >= 1 and report["global_patterns"] >= 1
    assert report["compression_ratio"] > 10
    # The same bytes once more, read by a single fio process from the flattened copy.
    flat = base / "flat.dat"
    flattened(container, flat)
    done = subprocess.run(
        [*[a.replace(str(m.mnt / "fio.dat"), str(flat)) for a in job], "--verify_only"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=base,
    )
    assert done.returncode == 0, done.stdout + done.stderr


# ---- sizes and data while a file is being written ----------------------------------

COMMANDED_WRITER = textwrap.dedent(
    """
    import os, sys
    fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o640)
    for line in sys.stdin:
        op, *args = line.split()
        if op == "w":
            off, n, byte = map(int, args)
            assert os.pwrite(fd, bytes([byte]) * n, off) == n
        elif op == "t":
            os.ftruncate(fd, int(args[0]))
        elif op == "s":
            os.fsync(fd)
        elif op == "r":
            off, n = map(int, args)
            print(os.pread(fd, n, off).hex(), end=" ")
        print("ok", os.fstat(fd).st_size, flush=True)
    """
)


class Writer:
    """A process that keeps a file open and writes, truncates or reads on command."""

    def __init__(self, path: Path):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", COMMANDED_WRITER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def do(self, command: str) -> list[str]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline().split()
        assert reply[-2] == "ok", reply
        return reply

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        assert self.proc.wait(timeout=30) == 0


def test_sizes_and_data_seen_by_others_while_a_file_is_written(mount: Any) -> None:
    m = mount()
    path = m.mnt / "growing.dat"
    a, b = Writer(path), Writer(path)
    try:
        assert a.do("w 0 10000 1")[-1] == "10000"
        # Another process (this one) sees the size and the bytes before any close.
        assert os.stat(path).st_size == 10000
        assert b.do("w 20000 5000 2")[-1] == "25000"
        assert os.stat(path).st_size == 25000
        assert os.path.getsize(path) == 25000
        assert {e.name: e.stat().st_size for e in os.scandir(m.mnt)} == {"growing.dat": 25000}
        data = path.read_bytes()
        assert data == b"\1" * 10000 + bytes(10000) + b"\2" * 5000
        # Each writer reads the other's unflushed bytes, and its own.
        assert a.do("r 19990 20")[0] == (bytes(10) + b"\2" * 10).hex()
        assert b.do("r 9990 20")[0] == (b"\1" * 10 + bytes(10)).hex()
        # Truncation from one process shrinks the file for everybody; writes after it
        # by the other process land after it.
        assert a.do("t 15000")[-1] == "15000"
        assert os.stat(path).st_size == 15000
        assert b.do("w 12000 1000 3")[-1] == "15000"
        assert path.read_bytes() == b"\1" * 10000 + bytes(2000) + b"\3" * 1000 + bytes(2000)
        # Growing by truncation reads as zeros.
        assert b.do("t 40000")[-1] == "40000"
        assert os.stat(path).st_size == 40000
        assert path.read_bytes()[15000:] == bytes(25000)
        a.do("s")
        assert (m.backend / "growing.dat").is_dir()
        assert os.stat(path).st_mode & 0o777 == 0o640 & ~current_umask()
    finally:
        a.close()
        b.close()
    assert os.stat(path).st_size == 40000
    os.truncate(path, 11000)
    assert os.stat(path).st_size == 11000
    with open(path, "r+b") as f:  # writes after the truncation, new writer
        f.seek(10500)
        f.write(b"\4" * 1000)
    assert path.read_bytes() == b"\1" * 10000 + bytes(500) + b"\4" * 1000
    with open(path, "wb") as f:  # O_TRUNC
        f.write(b"again")
    assert path.read_bytes() == b"again"
    m.stop("SIGINT")
    assert flattened(m.backend / "growing.dat", m.backend.parent / "flat") == b"again"


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ---- namespace and metadata ---------------------------------------------------------


def fails(code: int, fn: Any, *args: Any) -> None:
    with pytest.raises(OSError) as info:
        fn(*args)
    assert info.value.errno == code, info.value


def test_readdir_rename_unlink_and_errors(mount: Any) -> None:
    m = mount()
    os.mkdir(m.mnt / "d")
    (m.mnt / "d" / "a").write_bytes(b"alpha")
    (m.mnt / "b").write_bytes(b"beta")
    assert sorted(os.listdir(m.mnt)) == ["b", "d"]
    kinds = {e.name: (e.is_file(), e.is_dir()) for e in os.scandir(m.mnt)}
    assert kinds == {"b": (True, False), "d": (False, True)}
    assert stat.S_ISREG(os.stat(m.mnt / "b").st_mode)
    # Backend: containers are directories with a marker; plain files are not shown.
    assert (m.backend / "b" / "PATIO").is_file() and (m.backend / "d" / "a" / "PATIO").is_file()
    (m.backend / "d" / "stray.txt").write_bytes(b"x")
    assert os.listdir(m.mnt / "d") == ["a"]

    os.rename(m.mnt / "d" / "a", m.mnt / "d" / "c")
    assert os.listdir(m.mnt / "d") == ["c"] and (m.mnt / "d" / "c").read_bytes() == b"alpha"
    os.rename(m.mnt / "b", m.mnt / "d" / "c")  # replaces a file
    assert (m.mnt / "d" / "c").read_bytes() == b"beta" and not (m.mnt / "b").exists()
    os.rename(m.mnt / "d", m.mnt / "e")  # a directory with a known file inside
    assert (m.mnt / "e" / "c").read_bytes() == b"beta"
    assert (m.backend / "e" / "c" / "PATIO").is_file() and not (m.backend / "d").exists()

    fails(errno.ENOENT, open, m.mnt / "missing")
    fails(errno.EEXIST, os.mkdir, m.mnt / "e")
    fails(errno.ENOTEMPTY, os.rmdir, m.mnt / "e")
    fails(errno.ENOTDIR, os.listdir, m.mnt / "e" / "c")
    fails(errno.EISDIR, open, m.mnt / "e", "w")
    fails(errno.EISDIR, os.unlink, m.mnt / "e")
    fails(errno.ENOTDIR, os.rmdir, m.mnt / "e" / "c")
    fails(errno.EPERM, os.symlink, "c", m.mnt / "e" / "link")
    fails(errno.EPERM, os.link, m.mnt / "e" / "c", m.mnt / "e" / "hard")
    os.mkdir(m.mnt / "f")
    fails(errno.EISDIR, os.rename, m.mnt / "e" / "c", m.mnt / "f")
    fails(errno.ENOTDIR, os.rename, m.mnt / "f", m.mnt / "e" / "c")

    os.unlink(m.mnt / "e" / "c")
    assert os.listdir(m.mnt / "e") == [] and os.listdir(m.backend / "e") == ["stray.txt"]
    os.unlink(m.backend / "e" / "stray.txt")
    os.rmdir(m.mnt / "e")
    assert sorted(os.listdir(m.mnt)) == sorted(os.listdir(m.backend)) == ["f"]
    m.stop()


def test_unlinked_file_stays_usable_while_open(mount: Any) -> None:
    m = mount()
    path = m.mnt / "tmp.dat"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, b"x" * 8192, 0)
        os.unlink(path)
        assert not path.exists() and os.listdir(m.mnt) == []
        os.pwrite(fd, b"y" * 100, 8192)
        assert os.pread(fd, 8292, 0) == b"x" * 8192 + b"y" * 100
        assert os.fstat(fd).st_size == 8292
        (hidden,) = os.listdir(m.backend)  # kept under a hidden name while open
        assert hidden.startswith(".patio-unlinked.")
        path.write_bytes(b"new file, same name")
        assert path.read_bytes() == b"new file, same name"
    finally:
        os.close(fd)
    deadline = time.monotonic() + 5  # release reaches the daemon after close returns
    while len(os.listdir(m.backend)) > 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert os.listdir(m.backend) == ["tmp.dat"]
    m.stop()


def test_chmod_chown_and_times_are_the_container_directory_s(mount: Any) -> None:
    m = mount()
    path = m.mnt / "f"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o604)
    os.write(fd, b"data")
    os.close(fd)
    real = m.backend / "f"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o604 & ~current_umask()
    for mode in (0o640, 0o000, 0o755, 0o600):
        os.chmod(path, mode)
        assert stat.S_IMODE(os.stat(path).st_mode) == mode
        assert stat.S_IMODE(real.stat().st_mode) == mode
    assert path.read_bytes() == b"data"  # root reads a 0600 file it owns
    if IS_ROOT:
        os.chown(path, NOBODY, NOBODY)
        st = os.stat(path)
        assert (
            (st.st_uid, st.st_gid) == (NOBODY, NOBODY) == (real.stat().st_uid, real.stat().st_gid)
        )
    before = os.stat(path).st_mtime
    time.sleep(0.05)
    with open(path, "ab") as f:
        f.write(b"more")
    assert os.stat(path).st_mtime > before
    assert path.read_bytes() == b"datamore"
    m.stop()


@pytest.mark.skipif(not IS_ROOT, reason="switching to another uid needs root")
def test_permissions_are_enforced_for_other_users(mount: Any) -> None:
    m = mount("--allow-other")
    secret = m.mnt / "secret"
    secret.write_bytes(b"s3cret")
    os.chmod(secret, 0o600)
    denied = as_nobody("cat", str(secret))
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
    os.chmod(secret, 0o644)
    allowed = as_nobody("cat", str(secret))
    assert allowed.returncode == 0 and allowed.stdout == "s3cret"
    refused = as_nobody("sh", "-c", f"echo x >> {secret}")
    assert refused.returncode != 0 and "Permission denied" in refused.stderr
    refused = as_nobody("sh", "-c", f"echo x > {m.mnt}/mine")
    assert refused.returncode != 0 and "Permission denied" in refused.stderr
    os.mkdir(m.mnt / "pub", 0o755)
    os.chown(m.mnt / "pub", NOBODY, NOBODY)
    wrote = as_nobody("sh", "-c", f"umask 027; echo hi > {m.mnt}/pub/f; cat {m.mnt}/pub/f")
    assert wrote.returncode == 0 and wrote.stdout == "hi\n", wrote.stderr
    st = (m.backend / "pub" / "f").stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (NOBODY, NOBODY, 0o640)
    assert (m.mnt / "pub" / "f").read_bytes() == b"hi\n"
    m.stop()


# ---- the end of a mount -------------------------------------------------------------

HOLDING_WRITER = textwrap.dedent(
    """
    import os, sys, time
    fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
    for i in range(64):
        os.pwrite(fd, bytes([i]) * 4096, i * 8192)
    print("written", flush=True)
    time.sleep(60)
    """
)


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT"])
def test_a_signal_flushes_writers_of_files_still_open(mount: Any, base: Path, how: str) -> None:
    m = mount()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDING_WRITER, str(m.mnt / "held.dat")],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout and holder.stdout.readline() == "written\n"
        # Busy: the first signal keeps the mount, the second detaches it lazily and the
        # writer is flushed before patio exits.
        m.proc.send_signal(getattr(signal, how))
        time.sleep(0.3)
        assert os.path.ismount(m.mnt)
        message = m.stop(how)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert "detached lazily" in message
    assert summary(message)["writers"] == "1 (1 still open at the end, flushed then)"
    expected = b"".join(bytes([i]) * 4096 + bytes(4096) for i in range(64))[:-4096]
    container = m.backend / "held.dat"
    assert flattened(container, base / "flat") == expected
    # Mounted again, the file reads the same.
    again = mount(name="mnt2")
    assert (again.mnt / "held.dat").read_bytes() == expected
    again.stop("SIGTERM")


def test_a_killed_writer_is_flushed_when_its_files_close(mount: Any) -> None:
    m = mount()
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDING_WRITER, str(m.mnt / "k.dat")],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout and holder.stdout.readline() == "written\n"
    holder.kill()
    holder.wait(timeout=30)
    message = m.stop("SIGTERM")
    assert summary(message)["writers"].startswith("1 (0 still open")
    assert container_stat(m.backend / "k.dat")["writes"] == 64


# ---- bad inputs ---------------------------------------------------------------------


def test_st_blocks_counts_what_is_stored_not_the_holes(mount: Any) -> None:
    m = mount()
    path = m.mnt / "sparse"
    fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
    try:
        os.pwrite(fd, b"a" * 4096, 0)
        os.pwrite(fd, b"b" * 4096, 1 << 62)
    finally:
        os.close(fd)
    st = os.stat(path)
    assert st.st_size == (1 << 62) + 4096
    # Two 4 KiB writes: a few blocks of logs, not size/512 (4 EiB for du).
    assert 0 < st.st_blocks * 512 < 1 << 20, st.st_blocks
    du = subprocess.run(["du", "-k", str(path)], capture_output=True, text=True, check=True)
    assert int(du.stdout.split()[0]) < 1024, du.stdout


def kernel_at_least(major: int, minor: int) -> bool:
    found = re.match(r"(\d+)\.(\d+)", os.uname().release)
    return found is not None and (int(found[1]), int(found[2])) >= (major, minor)


def test_shared_writable_mmap_reads_and_writes_through_the_container(mount: Any) -> None:
    """Files are opened FOPEN_DIRECT_IO; the mount asks for FUSE_DIRECT_IO_ALLOW_MMAP, so
    kernels from 6.6 on map them shared and writable (older ones refuse with ENODEV)."""
    m = mount()
    path = m.mnt / "mapped.dat"
    size = 16 * BLOCK
    model = bytearray(size)
    model[: 2 * BLOCK] = bytes(range(256)) * (2 * BLOCK // 256)
    path.write_bytes(bytes(model[: 2 * BLOCK]))
    fd = os.open(path, os.O_RDWR)
    try:
        os.ftruncate(fd, size)
        if not kernel_at_least(6, 6):
            fails(errno.ENODEV, mmap.mmap, fd, size, mmap.MAP_SHARED)
            return
        with mmap.mmap(fd, size, mmap.MAP_SHARED) as mapped:
            assert mapped[: 2 * BLOCK] == model[: 2 * BLOCK], "reads through the map"
            for offset, data in [(3 * BLOCK + 100, b"x" * 5000), (15 * BLOCK + 7, b"tail")]:
                mapped[offset : offset + len(data)] = data
                model[offset : offset + len(data)] = data
            mapped.flush()
    finally:
        os.close(fd)
    assert path.read_bytes() == model
    m.stop()
    assert flattened(m.backend / "mapped.dat", m.mnt.parent / "flat") == model


def test_a_mount_point_that_is_already_a_mount_is_refused(mount: Any, base: Path) -> None:
    m = mount()
    other = base / "other"
    other.mkdir()
    # The mount is empty, so only its being a mount point can refuse it.
    assert os.listdir(m.mnt) == []
    done = patio("mount", "container", str(other), str(m.mnt), check=False)
    one_line_error(done, "already a mount point")
    assert os.path.ismount(m.mnt)
    m.stop()
    assert not os.path.ismount(m.mnt)


def test_bad_inputs_are_one_line_errors(base: Path) -> None:
    backend, mnt = base / "backend", base / "mnt"
    backend.mkdir()
    mnt.mkdir()

    def run(b: Path, m: Path, *extra: str) -> subprocess.CompletedProcess[str]:
        return patio("mount", "container", str(b), str(m), *extra, check=False)

    one_line_error(run(base / "nope", mnt), "backend directory", "does not exist")
    one_line_error(run(backend, base / "nope"), "mount point", "does not exist")
    (base / "file").write_bytes(b"")
    one_line_error(run(base / "file", mnt), "not a directory")
    one_line_error(run(backend, base / "file"), "not a directory")
    (mnt / "f").write_bytes(b"")
    one_line_error(run(backend, mnt), "not empty")
    os.unlink(mnt / "f")
    (backend / "inner").mkdir()
    one_line_error(run(backend, backend / "inner"), "inside the source")
    one_line_error(run(backend, mnt, "-o", "ro,bogus"), "-o bogus", "unsupported")
    (backend / "c").mkdir()
    (backend / "c" / "PATIO").write_bytes(b"")
    one_line_error(run(backend / "c", mnt), "itself a patio container")
    done = run(backend, mnt, "--index", "zip")
    assert done.returncode == 2 and "zip" in done.stderr
    assert not os.path.ismount(mnt)
