"""``patio mount trace`` through the kernel: real FUSE mounts, real programs, no mocks.

Each test mounts a fresh source directory, runs a program against the mount (a Python
program with ``os.pread``, ``dd``, ``fio``), stops the mount (SIGINT, SIGTERM or
``fusermount3 -u``) and compares the trace with what the program did: the same
requests (file, pid, op, offset, length) and nothing else, the data in the source
directory byte for byte, and ``patio analyze --json`` naming the pattern. Further tests
check metadata seen through the mount while a file grows, namespace operations,
permission checks for a non-root user (``setpriv``), and the one-line errors.

Mounts start and end through ``patio._mount_harness`` and are always removed, also when
a test fails (the fixture's cleanup).
"""

from __future__ import annotations

import csv
import errno
import functools
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from patio._binary import patio_binary
from patio._mount_harness import MountProcess

REPO = Path(__file__).resolve().parents[1]
NOBODY = 65534
IS_ROOT = os.geteuid() == 0


def patio(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [patio_binary(), *args], capture_output=True, text=True, timeout=120, check=False
    )
    if check:
        assert done.returncode == 0, done.stderr
    return done


def tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin:/usr/bin:/bin")
    assert found, f"{name} is not installed: run scripts/setup.sh"
    return found


@contextmanager
def scratch(prefix: str, shared: bool = False) -> Iterator[Path]:
    """A directory under /tmp, removed afterwards; ``shared``: mode 0755 (not pytest's
    private tmp_path), so that an unprivileged user can reach a mount inside it."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    if shared:
        path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


M = TypeVar("M", bound=MountProcess)


@contextmanager
def started(make: Callable[..., M]) -> Iterator[Callable[..., M]]:
    """Yields ``start(...)``, which makes a mount with ``make``; every mount started is
    cleaned up afterwards (the tests' ``mount`` fixtures)."""
    mounts: list[M] = []

    def start(*args: Any, **kwargs: Any) -> M:
        m = make(*args, **kwargs)
        mounts.append(m)
        return m

    try:
        yield start
    finally:
        for m in mounts:
            m.cleanup()


class Mount(MountProcess):
    """One ``patio mount trace`` process serving ``src`` at ``mnt``."""

    def __init__(self, base: Path, out: str = "trace.ptrace", allow_other: bool = False):
        self.src = base / "src"
        self.mnt = base / "mnt"
        self.out = base / out
        for d in (self.src, self.mnt):
            d.mkdir(exist_ok=True)
            d.chmod(0o755)
        args = [patio_binary(), "mount", "trace", str(self.src), str(self.mnt)]
        args += ["--output", str(self.out)] + (["--allow-other"] if allow_other else [])
        self.start(args)

    def stop(self, how: str = "SIGINT") -> str:
        """Ends the mount and returns patio's stderr; the trace is then written."""
        stderr = self.end(how)
        assert "Traceback" not in stderr
        return stderr


@pytest.fixture
def base() -> Iterator[Path]:
    with scratch("patio-mount-", shared=True) as path:
        yield path


@pytest.fixture
def mount(base: Path) -> Iterator[Any]:
    """``mount(out=…, allow_other=…)`` starts a mount; all are removed afterwards."""
    with started(functools.partial(Mount, base)) as start:
        yield start


# ---- reading traces and reports --------------------------------------------------


def records(trace: Path) -> list[dict[str, Any]]:
    """The trace's records, through ``patio convert`` to the documented CSV."""
    if trace.suffix != ".csv":
        converted = trace.with_suffix(".converted.csv")
        patio("convert", str(trace), "-o", str(converted))
        trace = converted
    with trace.open(newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["rank"], r["offset"], r["length"] = int(r["rank"]), int(r["offset"]), int(r["length"])
        r["start"], r["end"] = float(r["start"]), float(r["end"])
    return rows


def requests(rows: list[dict[str, Any]], file: str, op: str, pid: int | None = None) -> list:
    """(offset, length) of one stream, in start-time order."""
    chosen = [r for r in rows if r["file"] == file and r["op"] == op]
    if pid is not None:
        chosen = [r for r in chosen if r["rank"] == pid]
    return [(r["offset"], r["length"]) for r in sorted(chosen, key=lambda r: r["start"])]


def streams(rows: list[dict[str, Any]]) -> set[tuple[str, str, int, str]]:
    return {(r["module"], r["file"], r["rank"], r["op"]) for r in rows}


def analyze(trace: Path) -> dict[tuple[str, int, str], dict[str, Any]]:
    report = json.loads(patio("analyze", str(trace), "--json").stdout)
    return {(s["file"], s["rank"], s["op"]): s for s in report["streams"]}


# ---- programs through the mount --------------------------------------------------

PYTHON_PROGRAM = textwrap.dedent(
    """
    import os, sys
    path, blocks, block, reads, read_len, stride = sys.argv[1], *map(int, sys.argv[2:])
    data = b"".join(bytes([i % 251]) * block for i in range(blocks))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    for i in range(blocks):
        assert os.write(fd, data[i * block:(i + 1) * block]) == block
    os.close(fd)
    fd = os.open(path, os.O_RDONLY)
    for i in range(reads):
        got = os.pread(fd, read_len, i * stride)
        assert got == data[i * stride:i * stride + read_len], i
    os.close(fd)
    """
)


@pytest.mark.parametrize(
    ("how", "out"),
    [("SIGINT", "trace.ptrace"), ("fusermount", "trace.ptrace"), ("SIGTERM", "trace.csv")],
)
def test_python_writes_then_strided_preads(mount: Any, how: str, out: str) -> None:
    m = mount(out=out)
    blocks, block, reads, read_len, stride = 64, 4096, 20, 1024, 12288
    argv = [str(x) for x in (m.mnt / "data.bin", blocks, block, reads, read_len, stride)]
    prog = subprocess.Popen([sys.executable, "-c", PYTHON_PROGRAM, *argv])
    assert prog.wait(timeout=60) == 0
    message = m.stop(how)
    assert "requests in 2 streams" in message

    expected = b"".join(bytes([i % 251]) * block for i in range(blocks))
    assert (m.src / "data.bin").read_bytes() == expected
    rows = records(m.out)
    # Exactly the program's requests, with its pid, and nothing else.
    assert streams(rows) == {
        ("FUSE", "data.bin", prog.pid, "write"),
        ("FUSE", "data.bin", prog.pid, "read"),
    }
    assert requests(rows, "data.bin", "write") == [(i * block, block) for i in range(blocks)]
    assert requests(rows, "data.bin", "read") == [(i * stride, read_len) for i in range(reads)]
    assert all(0 <= r["start"] <= r["end"] for r in rows)

    report = analyze(m.out)
    assert report[("data.bin", prog.pid, "write")]["kind"] == "contiguous"
    read = report[("data.bin", prog.pid, "read")]
    assert read["kind"] == "strided"
    assert read["signature"] == f"[0, ({stride})^{reads - 1}]"


def test_dd_with_block_size_skip_seek_and_count(mount: Any) -> None:
    m = mount()
    source = os.urandom(1 << 20)
    (m.src / "in.bin").write_bytes(source)
    bs, skip, seek, count = 8192, 5, 3, 12
    dd = subprocess.Popen(
        [
            tool("dd"),
            f"if={m.mnt / 'in.bin'}",
            f"of={m.mnt / 'out.bin'}",
            f"bs={bs}",
            f"skip={skip}",
            f"seek={seek}",
            f"count={count}",
            "status=none",
        ]
    )
    assert dd.wait(timeout=60) == 0
    # One request larger than the kernel's per-request limit: split, still contiguous.
    big = subprocess.Popen(
        [tool("dd"), "if=/dev/zero", f"of={m.mnt / 'big.bin'}", "bs=3M", "count=1", "status=none"]
    )
    assert big.wait(timeout=60) == 0
    m.stop("fusermount")

    out = (m.src / "out.bin").read_bytes()
    assert out == bytes(seek * bs) + source[skip * bs : (skip + count) * bs]
    rows = records(m.out)
    assert streams(rows) == {
        ("FUSE", "in.bin", dd.pid, "read"),
        ("FUSE", "out.bin", dd.pid, "write"),
        ("FUSE", "big.bin", big.pid, "write"),
    }
    assert requests(rows, "in.bin", "read") == [((skip + i) * bs, bs) for i in range(count)]
    assert requests(rows, "out.bin", "write") == [((seek + i) * bs, bs) for i in range(count)]
    pieces = requests(rows, "big.bin", "write")
    assert sum(n for _, n in pieces) == 3 << 20 and len(pieces) > 1
    assert all(o == p + n for (p, n), (o, _) in itertools.pairwise(pieces))

    report = analyze(m.out)
    assert report[("in.bin", dd.pid, "read")]["kind"] == "contiguous"
    assert report[("in.bin", dd.pid, "read")]["signature"].startswith(f"[{skip * bs}, ({bs})^")
    assert report[("out.bin", dd.pid, "write")]["kind"] == "contiguous"


def test_fio_strided_read_job(mount: Any) -> None:
    fio = tool("fio")
    m = mount()
    size, bs, gap = 1 << 20, 4096, 12288
    stride = bs + gap
    n = size // stride  # one pass over the file (fio would wrap around to move `size` bytes)
    data = os.urandom(size)
    (m.src / "fio.dat").write_bytes(data)
    done = subprocess.run(
        [
            fio,
            "--name=strided",
            f"--filename={m.mnt / 'fio.dat'}",
            f"--rw=read:{gap}",
            f"--bs={bs}",
            f"--size={size}",
            f"--io_size={n * bs}",
            "--ioengine=psync",
            "--invalidate=0",
            "--output-format=json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    job = json.loads(done.stdout[done.stdout.index("{") :])["jobs"][0]
    m.stop("SIGINT")

    assert (m.src / "fio.dat").read_bytes() == data
    assert job["read"]["total_ios"] == n
    rows = records(m.out)
    reads = [r for r in rows if r["op"] == "read"]
    assert {r["file"] for r in rows} == {"fio.dat"}
    assert not [r for r in rows if r["op"] == "write"]
    (pid,) = {r["rank"] for r in reads}
    assert requests(rows, "fio.dat", "read") == [(i * stride, bs) for i in range(n)]

    stream = analyze(m.out)[("fio.dat", pid, "read")]
    assert stream["kind"] == "strided"
    assert stream["signature"] == f"[0, ({stride})^{n - 1}]"


def test_threads_are_recorded_under_their_process(mount: Any) -> None:
    m = mount()
    (m.src / "t.bin").write_bytes(bytes(1 << 16))
    program = textwrap.dedent(
        f"""
        import os, threading
        fd = os.open({str(m.mnt / "t.bin")!r}, os.O_RDONLY)
        def part(k):
            for i in range(4):
                os.pread(fd, 512, (k * 4 + i) * 4096)
        ts = [threading.Thread(target=part, args=(k,)) for k in range(2)]
        [t.start() for t in ts]
        [t.join() for t in ts]
        """
    )
    prog = subprocess.Popen([sys.executable, "-c", program])
    assert prog.wait(timeout=60) == 0
    m.stop()
    rows = records(m.out)
    assert streams(rows) == {("FUSE", "t.bin", prog.pid, "read")}
    assert sorted(requests(rows, "t.bin", "read")) == [(i * 4096, 512) for i in range(8)]


# ---- metadata and namespace --------------------------------------------------------


def test_sizes_and_listing_while_a_file_grows(mount: Any) -> None:
    m = mount()
    path = m.mnt / "growing.bin"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o640)
    try:
        for k in range(1, 4):
            os.write(fd, b"x" * 10_000)
            assert os.stat(path).st_size == 10_000 * k
            assert os.fstat(fd).st_size == 10_000 * k
            assert (m.src / "growing.bin").stat().st_size == 10_000 * k
            listed = {e.name: e.stat().st_size for e in os.scandir(m.mnt)}
            assert listed == {"growing.bin": 10_000 * k}
        os.ftruncate(fd, 5000)
        assert os.stat(path).st_size == 5000 == (m.src / "growing.bin").stat().st_size
    finally:
        os.close(fd)
    assert (m.src / "growing.bin").stat().st_mode & 0o777 == 0o640 & ~current_umask()
    os.truncate(path, 123)
    os.utime(path, (1_000_000_000, 1_500_000_000.25))
    os.chmod(path, 0o604)
    st, real = os.stat(path), (m.src / "growing.bin").stat()
    assert st.st_size == real.st_size == 123
    assert st.st_mtime_ns == real.st_mtime_ns == 1_500_000_000_250_000_000
    assert st.st_atime_ns == real.st_atime_ns == 1_000_000_000_000_000_000
    assert st.st_mode == real.st_mode and real.st_mode & 0o777 == 0o604
    vfs = os.statvfs(m.mnt)
    assert vfs.f_blocks == os.statvfs(m.src).f_blocks
    m.stop()
    rows = records(m.out)
    assert requests(rows, "growing.bin", "write") == [(k * 10_000, 10_000) for k in range(3)]


def current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_mkdir_rename_unlink_and_errors_pass_through(mount: Any) -> None:
    m = mount()
    os.mkdir(m.mnt / "d")
    (m.mnt / "d" / "a").write_bytes(b"hello")
    os.rename(m.mnt / "d" / "a", m.mnt / "d" / "b")
    assert sorted(os.listdir(m.mnt / "d")) == ["b"]
    assert not (m.src / "d" / "a").exists() and (m.src / "d" / "b").read_bytes() == b"hello"
    os.rename(m.mnt / "d", m.mnt / "e")  # a directory with a known entry inside
    assert (m.mnt / "e" / "b").read_bytes() == b"hello"
    assert (m.src / "e" / "b").is_file() and not (m.src / "d").exists()
    os.symlink("b", m.mnt / "e" / "link")
    assert os.readlink(m.mnt / "e" / "link") == "b"
    assert (m.mnt / "e" / "link").read_bytes() == b"hello"
    os.link(m.mnt / "e" / "b", m.mnt / "e" / "hard")
    assert (m.src / "e" / "hard").stat().st_ino == (m.src / "e" / "b").stat().st_ino

    def fails(code: int, fn: Any, *args: Any) -> None:
        with pytest.raises(OSError) as info:
            fn(*args)
        assert info.value.errno == code, info.value

    fails(errno.ENOENT, open, m.mnt / "missing")
    fails(errno.EEXIST, os.mkdir, m.mnt / "e")
    fails(errno.ENOTEMPTY, os.rmdir, m.mnt / "e")
    fails(errno.ENOTDIR, os.listdir, m.mnt / "e" / "b")
    fails(errno.EISDIR, open, m.mnt / "e", "w")
    os.mkdir(m.mnt / "full")
    (m.mnt / "full" / "x").write_bytes(b"")
    os.mkdir(m.mnt / "empty")
    fails(errno.ENOTEMPTY, os.rename, m.mnt / "empty", m.mnt / "full")
    for name in ("b", "link", "hard"):
        os.unlink(m.mnt / "e" / name)
    os.rmdir(m.mnt / "e")
    assert not (m.src / "e").exists()
    assert sorted(os.listdir(m.mnt)) == sorted(os.listdir(m.src)) == ["empty", "full"]
    m.stop()
    rows = records(m.out)
    # Requests are recorded under the path the file was opened by; the kernel resolves
    # the symbolic link before opening, so reads through it count for its target.
    assert ("FUSE", "d/a", os.getpid(), "write") in streams(rows)
    assert {r["file"] for r in rows if r["op"] == "read"} == {"e/b"}


# ---- permissions -----------------------------------------------------------------


def skip_unless_nobody_imports_patio(env: dict[str, str]) -> None:
    """Skips the test when uid NOBODY cannot run this venv's Python with ``patio``
    (a checkout below a directory closed to other users, such as a 0700 temp dir)."""
    done = subprocess.run(
        [tool("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
         sys.executable, "-c", "import patio._native"],
        capture_output=True, text=True, timeout=60, check=False, env=env,
    )  # fmt: skip
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        pytest.skip(f"uid {NOBODY} cannot use this checkout's Python package: {last}")


def as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("setpriv"), f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.skipif(not IS_ROOT, reason="switching to another uid needs root")
def test_permissions_are_checked_for_other_users(mount: Any) -> None:
    m = mount(allow_other=True)
    secret = m.mnt / "secret"
    secret.write_bytes(b"s3cret")
    os.chmod(secret, 0o600)
    denied = as_nobody("cat", str(secret))
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
    os.chmod(secret, 0o644)
    assert (m.src / "secret").stat().st_mode & 0o777 == 0o644
    allowed = as_nobody("cat", str(secret))
    assert allowed.returncode == 0 and allowed.stdout == "s3cret"
    # Root bypasses mode bits on the mount as on any local file system.
    os.chmod(secret, 0)
    assert secret.read_bytes() == b"s3cret"
    assert as_nobody("cat", str(secret)).returncode != 0
    # Writing into a root-owned directory is refused; into one chowned to the user
    # (through the mount) it works, and the new file belongs to that user.
    refused = as_nobody("sh", "-c", f"echo x > {m.mnt}/mine")
    assert refused.returncode != 0 and "Permission denied" in refused.stderr
    os.mkdir(m.mnt / "pub", 0o755)
    os.chown(m.mnt / "pub", NOBODY, NOBODY)
    assert (m.src / "pub").stat().st_uid == NOBODY
    wrote = as_nobody("sh", "-c", f"umask 027; echo hi > {m.mnt}/pub/f; mkdir {m.mnt}/pub/sub")
    assert wrote.returncode == 0, wrote.stderr
    for name, mode in (("f", 0o640), ("sub", 0o750)):
        st = (m.src / "pub" / name).stat()
        assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (NOBODY, NOBODY, mode), name
    m.stop()
    rows = records(m.out)
    (pid,) = {r["rank"] for r in rows if r["file"] == "pub/f"}
    assert pid != os.getpid()
    assert {r["rank"] for r in rows if r["file"] == "secret" and r["op"] == "write"} == {
        os.getpid()
    }


@pytest.mark.skipif(not IS_ROOT, reason="switching to another uid needs root")
def test_without_allow_other_other_users_are_kept_out(mount: Any) -> None:
    m = mount()
    (m.mnt / "open").write_bytes(b"x")
    os.chmod(m.mnt / "open", 0o644)
    denied = as_nobody("cat", str(m.mnt / "open"))
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
    m.stop()


# ---- bad inputs ------------------------------------------------------------------


def one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("patio: error:"), done.stderr
    for word in words:
        assert word in lines[0], lines[0]


def test_bad_inputs_are_one_line_errors(base: Path) -> None:
    src, mnt, out = base / "src", base / "mnt", str(base / "t.ptrace")
    src.mkdir()
    mnt.mkdir()

    def run(s: Path, m: Path, o: str = out) -> subprocess.CompletedProcess[str]:
        return patio("mount", "trace", str(s), str(m), "--output", o, check=False)

    one_line_error(run(base / "nope", mnt), "nope", "does not exist")
    one_line_error(run(src, base / "nope"), "mount point", "does not exist")
    (mnt / "f").write_bytes(b"")
    one_line_error(run(src, mnt), "not empty")
    os.unlink(mnt / "f")
    one_line_error(run(src, base / "t.ptrace2"), "does not exist")
    (base / "file").write_bytes(b"")
    one_line_error(run(src, base / "file"), "not a directory")
    one_line_error(run(base / "file", mnt), "not a directory")
    (src / "inner").mkdir()
    one_line_error(run(src, src / "inner"), "inside the source")
    one_line_error(run(src, mnt, str(base / "no" / "t.ptrace")), "cannot write trace")
    one_line_error(run(src, mnt, str(mnt / "t.ptrace")), "inside the mount point")
    assert not os.path.ismount(mnt) and not (base / "t.ptrace").exists()


@pytest.mark.skipif(not IS_ROOT, reason="a private mount namespace needs root")
def test_fuse_unavailable_is_a_one_line_error(base: Path) -> None:
    src, mnt = base / "src", base / "mnt"
    src.mkdir()
    mnt.mkdir()
    cmd = f"{patio_binary()} mount trace {src} {mnt} --output {base / 't.ptrace'}"
    unshare = tool("unshare")
    for hide, words in (
        ("mount -t tmpfs none /dev", ("FUSE is unavailable", "/dev/fuse")),
        ("mount --bind /dev/null /dev/fuse", ("cannot mount a FUSE file system",)),
    ):
        done = subprocess.run(
            [unshare, "--mount", "--propagation", "private", "sh", "-c", f"{hide} && exec {cmd}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        one_line_error(done, *words)
    assert not os.path.ismount(mnt)


# ---- a killed mount: the journal ---------------------------------------------------

PHASED_PROGRAM = textwrap.dedent(
    """
    import os, sys
    path, n = sys.argv[1], int(sys.argv[2])
    fd = os.open(path, os.O_RDONLY)
    for phase in range(2):
        for i in range(n):
            k = phase * n + i
            assert os.pread(fd, 512, k * 1536) == bytes([k % 251]) * 512
        print(f"phase {phase}", flush=True)
        sys.stdin.readline()
    """
)


def journal_of(out: Path) -> Path:
    return out.with_name(f".{out.name}.journal")


def test_a_killed_mount_is_recovered_from_its_journal(mount: Any) -> None:
    """SIGKILL of the mount daemon: the reads flushed to its journal before the kill
    (everything older than a second) become the trace through `patio trace recover`;
    a new mount on the same output refuses to overwrite the journal meanwhile."""
    m = mount()
    n = 40
    (m.src / "d.bin").write_bytes(b"".join(bytes([k % 251]) * 1536 for k in range(2 * n)))
    prog = subprocess.Popen([sys.executable, "-c", PHASED_PROGRAM, str(m.mnt / "d.bin"),
                             str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert prog.stdin is not None and prog.stdout is not None
    assert prog.stdout.readline() == "phase 0\n"
    time.sleep(2.5)  # more than the flush period: phase 0 is in the journal
    prog.stdin.write("\n")
    prog.stdin.flush()
    assert prog.stdout.readline() == "phase 1\n"
    m.kill()
    prog.kill()
    prog.wait(30)
    assert not m.out.exists()
    journal = journal_of(m.out)
    assert journal.exists()

    again = patio("mount", "trace", str(m.src), str(m.mnt), "--output", str(m.out), check=False)
    one_line_error(again, "patio trace recover", str(journal))
    assert journal.exists() and not m.out.exists() and not os.path.ismount(m.mnt)

    done = patio("trace", "recover", str(m.out))
    rows = records(m.out)
    assert not journal.exists()
    got = requests(rows, "d.bin", "read", prog.pid)
    model = [(k * 1536, 512) for k in range(2 * n)]
    # Everything of phase 0 was flushed before the kill; of phase 1 at most a prefix
    # (what a flush took before the kill); nothing that was not read.
    assert n <= len(got) <= 2 * n and got == model[: len(got)]
    assert streams(rows) == {("FUSE", "d.bin", prog.pid, "read")}
    assert f"recovered {len(rows)} requests" in done.stdout

    one_line_error(patio("trace", "recover", str(m.out), check=False), "nothing to recover")
    # A new mount on the output works again, and a clean end leaves no journal.
    m2 = mount()
    m2.stop()
    assert not journal.exists() and m2.out.exists()


def test_a_journal_in_use_is_not_recovered(mount: Any) -> None:
    m = mount()
    journal = journal_of(m.out)
    assert journal.exists()  # the running mount appends to it
    one_line_error(patio("trace", "recover", str(m.out), check=False), "still running")
    assert journal.exists() and not m.out.exists()
    m.stop()
    assert not journal.exists() and m.out.exists()
