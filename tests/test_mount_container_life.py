"""The container lifecycle through ``patio mount container``: compaction in the
background and by ``patio container compact``, against a model.

* A model-based test: random sequences of open (also ``O_TRUNC``), write, truncate,
  read, close from several processes, rename and unlink from the test itself, and
  ``patio container compact`` runs in between, on a mount whose background compaction
  thresholds are low (so it compacts all the time). Every read, from any process,
  must equal a byte-array model of the file; at the end every file flattens to its
  model and each container holds few logs.
* Growth regressions: 200 rewrites with ``open(…, "wb")`` and 200 appends by
  open/write/close keep the backend bounded (files and bytes).
* ``patio container compact --json`` on a container written with background
  compaction off.
"""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_cli import patio_binary
from test_mount_container import ContainerMount, flattened
from test_mount_trace import scratch, started

# A process that keeps descriptors by id and runs commands from stdin. Every write
# is followed by a one-byte read, which publishes it: writes of different processes
# are then ordered as issued (the mount's ordering rule), so the model is simply
# "apply in call order".
WORKER = textwrap.dedent(
    """
    import os, sys
    fds = {}
    for line in sys.stdin:
        op, *a = line.split()
        try:
            if op == "open":
                flags = os.O_RDWR | os.O_CREAT | (os.O_TRUNC if a[2] == "1" else 0)
                fds[a[0]] = os.open(a[1], flags, 0o644)
                out = ""
            elif op == "close":
                os.close(fds.pop(a[0]))
                out = ""
            elif op == "w":
                off, n, byte = map(int, a[1:])
                assert os.pwrite(fds[a[0]], bytes([byte]) * n, off) == n
                os.pread(fds[a[0]], 1, off)
                out = ""
            elif op == "t":
                os.ftruncate(fds[a[0]], int(a[1]))
                out = ""
            elif op == "r":
                off, n = map(int, a[1:])
                out = os.pread(fds[a[0]], n, off).hex()
            print("ok", out or "-", flush=True)
        except OSError as e:
            print("err", e.errno, flush=True)
    """
)


class Proc:
    def __init__(self) -> None:
        self.p = subprocess.Popen(
            [sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True,
        )

    def do(self, cmd: str) -> str:
        assert self.p.stdin and self.p.stdout
        self.p.stdin.write(cmd + "\n")
        self.p.stdin.flush()
        status, out = self.p.stdout.readline().split()
        assert status == "ok", f"{cmd}: errno {out}"
        return out

    def end(self) -> None:
        assert self.p.stdin
        self.p.stdin.close()
        assert self.p.wait(timeout=60) == 0


@pytest.fixture
def base() -> Iterator[Path]:
    with scratch("patio-life-") as path:
        yield path


@pytest.fixture
def mount(base: Path) -> Iterator[Any]:
    """``mount(*options)`` starts a container mount on ``base``; every mount started is
    cleaned up afterwards, whatever the test's outcome."""
    with started(functools.partial(ContainerMount, base)) as start:
        yield start


def compact(container: Path) -> dict[str, Any]:
    done = subprocess.run(
        [patio_binary(), "container", "compact", "--json", str(container)],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def logs(container: Path) -> int:
    return sum(1 for n in os.listdir(container) if n.startswith("index."))


def run_model(seed: int, ops: int) -> None:
    rng = random.Random(seed)
    base = Path(tempfile.mkdtemp(prefix="patio-life-", dir="/tmp"))
    m = ContainerMount(base, "--compact-max-logs", "2", "--compact-min-dead", "0")
    procs = [Proc() for _ in range(3)]
    # The model: file id → contents; the namespace name → file id; descriptors
    # (process, fd id) → file id.
    files: dict[int, bytearray] = {}
    names: dict[str, int] = {}
    fds: dict[tuple[int, str], int] = {}
    next_file = next_fd = 0
    try:
        for step in range(ops):
            op = rng.random()
            p = rng.randrange(len(procs))
            mine = [k for k in fds if k[0] == p]
            if op < 0.15 or not mine:
                name = rng.choice(["a", "b", "c"])
                trunc = rng.random() < 0.3
                if name not in names:
                    names[name] = next_file
                    files[next_file] = bytearray()
                    next_file += 1
                fd = f"f{next_fd}"
                next_fd += 1
                procs[p].do(f"open {fd} {m.mnt / name} {int(trunc)}")
                fds[(p, fd)] = names[name]
                if trunc:
                    files[names[name]].clear()
                continue
            key = rng.choice(mine)
            fid = files[fds[key]]
            if op < 0.25:
                procs[p].do(f"close {key[1]}")
                del fds[key]
            elif op < 0.55:
                off, n, byte = rng.randrange(0, 48 << 10), rng.randrange(1, 9000), step % 250 + 1
                procs[p].do(f"w {key[1]} {off} {n} {byte}")
                if len(fid) < off + n:
                    fid.extend(bytes(off + n - len(fid)))
                fid[off : off + n] = bytes([byte]) * n
            elif op < 0.65:
                size = rng.choice([0, rng.randrange(0, 60 << 10)])
                procs[p].do(f"t {key[1]} {size}")
                del fid[size:]
                fid.extend(bytes(size - len(fid)))
            elif op < 0.85:
                off, n = rng.randrange(0, 56 << 10), rng.randrange(1, 12000)
                got = procs[p].do(f"r {key[1]} {off} {n}")
                want = bytes(fid[off : off + n])
                assert (bytes.fromhex(got) if got != "-" else b"") == want, (
                    f"step {step}: read of {n} at {off} differs from the model"
                )
            elif op < 0.9 and names:
                a, b = rng.choice(sorted(names)), rng.choice(["a", "b", "c", "d"])
                if a != b:
                    os.rename(m.mnt / a, m.mnt / b)
                    names[b] = names.pop(a)
            elif op < 0.93 and names:
                a = rng.choice(sorted(names))
                os.unlink(m.mnt / a)
                del names[a]
            elif names:
                compact(m.backend / rng.choice(sorted(names)))
        for (p, fd) in list(fds):
            procs[p].do(f"close {fd}")
        for pr in procs:
            pr.end()
        for name, fid in names.items():
            assert (m.mnt / name).read_bytes() == bytes(files[fid]), name
        err = m.stop()
        for name, fid in names.items():
            container = m.backend / name
            assert flattened(container, base / f"{name}.flat") == bytes(files[fid]), name
            compact(container)
            assert logs(container) <= 1, os.listdir(container)
            assert flattened(container, base / f"{name}.flat") == bytes(files[fid]), name
        assert "compactions" in err, err
    finally:
        for pr in procs:
            if pr.p.poll() is None:
                pr.p.kill()
        m.cleanup()
        shutil.rmtree(base, ignore_errors=True)


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**32 - 1))
def test_random_operations_from_several_processes_match_the_model(seed: int) -> None:
    run_model(seed, 250)


# A container's files besides its log sets (marker, truncation log, two lock files),
# and the allocation slack of the bytes bound: a few blocks for each file.
FIXED = 4
SLACK = (FIXED + 3) * 4096


def backend_footprint(container: Path) -> tuple[int, int]:
    entries = list(container.iterdir())
    return len(entries), sum(e.stat().st_blocks * 512 for e in entries)


def stop_and_drain(m: ContainerMount) -> str:
    """Stops the mount (its compaction worker finishes what is queued first)."""
    return m.stop()


def test_two_hundred_rewrites_keep_the_backend_bounded(base: Path, mount: Any) -> None:
    m = mount()
    data = b""
    for i in range(200):
        data = bytes([i % 251 + 1]) * (256 << 10)
        with open(m.mnt / "ckpt", "wb") as f:
            f.write(data)
    assert (m.mnt / "ckpt").read_bytes() == data
    err = stop_and_drain(m)
    files, used = backend_footprint(m.backend / "ckpt")
    # Nobody has the file open: marker, truncation log, two lock files, one log set.
    assert files <= FIXED + 3, sorted(os.listdir(m.backend / "ckpt"))
    assert used <= 2 * len(data) + SLACK, (used, err)
    assert flattened(m.backend / "ckpt", base / "flat") == data


def test_two_hundred_appends_keep_the_backend_bounded(base: Path, mount: Any) -> None:
    m = mount()
    want = b""
    for i in range(200):
        line = f"line {i}\n".encode()
        with open(m.mnt / "log", "ab") as f:
            f.write(line)
        want += line
    assert (m.mnt / "log").read_bytes() == want
    stop_and_drain(m)
    container = m.backend / "log"
    assert logs(container) == 1, sorted(os.listdir(container))
    files, used = backend_footprint(container)
    assert files <= FIXED + 3
    assert used <= 2 * len(want) + SLACK, used
    assert flattened(container, base / "flat") == want


@pytest.mark.parametrize(
    ("options", "want_logs"),
    [((), 1), (("--no-compact",), 1), (("--no-compact", "--compact-small-log", "0"), 5)],
)
def test_log_takeover_follows_compact_small_log_with_or_without_compaction(
    base: Path, mount: Any, options: tuple[str, ...], want_logs: int
) -> None:
    """Five processes in turn append to one file: each new writer takes over the ended
    one's log set while it is at most --compact-small-log bytes - also under
    --no-compact, where 0 keeps one log set per writer."""
    m = mount(*options)
    want = b""
    for i in range(5):
        line = f"writer {i}\n".encode()
        subprocess.run(
            [sys.executable, "-c", "import sys; open(sys.argv[1], 'ab').write(sys.argv[2].encode())",
             str(m.mnt / "log"), line.decode()],
            check=True,
        )  # fmt: skip
        want += line
    assert (m.mnt / "log").read_bytes() == want
    stop_and_drain(m)
    assert logs(m.backend / "log") == want_logs, sorted(os.listdir(m.backend / "log"))
    assert flattened(m.backend / "log", base / "flat") == want


def test_compact_command_rewrites_what_the_mount_left(base: Path, mount: Any) -> None:
    m = mount("--no-compact")
    want = bytearray()
    for i in range(30):
        with open(m.mnt / "f", "r+b" if i else "wb") as f:
            f.seek(i * 1000)
            f.write(bytes([i + 1]) * 1500)
        want[i * 1000 : i * 1000 + 1500] = bytes([i + 1]) * 1500
    with open(m.mnt / "f", "r+b") as f:
        f.truncate(20_000)
    del want[20_000:]
    assert "compactions    0" in stop_and_drain(m)
    container = m.backend / "f"
    # Each open's writer took over the logs the previous close ended: one log set,
    # holding every byte written (most of them overwritten or truncated since).
    assert logs(container) == 1
    report = compact(container)
    assert report["sources"] == 1 and report["active_writers"] == 0
    assert report["live_bytes"] == 20_000
    assert report["disk_bytes_after"] < report["disk_bytes_before"]
    assert report["size"] == 20_000
    assert logs(container) == 1
    assert flattened(container, base / "flat") == bytes(want)
    again = compact(container)
    assert again["sources"] == 0
    text = subprocess.run(
        [patio_binary(), "container", "compact", str(container)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert text.returncode == 0 and "nothing to compact" in text.stdout
    bad = subprocess.run(
        [patio_binary(), "container", "compact", str(base)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert bad.returncode != 0
    assert len(bad.stderr.strip().splitlines()) == 1 and "not a patio container" in bad.stderr
