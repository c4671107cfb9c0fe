"""Background compaction under stress, through ``patio mount container``.

``patio bench stress`` runs random writes, reads, truncations down and up,
``copy_file_range``, reopens (also with ``O_TRUNC``), ``fstat`` and ``fsync`` on a few
files from several processes and threads, and checks every read and size against a
byte model of each file. Here it runs for seconds per case, with the mount's default
compaction and with thresholds that make it compact after nearly every truncation and
close; ``bench/container_stress.py`` runs it for minutes. The exerciser itself is
checked to catch a corrupted byte, and its bad inputs to be one-line errors.

Crash points: a mount killed (SIGKILL, by its fault-injection variable) at each
durable step of a compaction comes back, mounted again, with the file as the model
has it and no compaction leftovers once it compacts again.
"""

from __future__ import annotations

import functools
import json
import os
import random
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_cli import patio_binary
from test_mount_container import ContainerMount, summary
from test_mount_trace import one_line_error, scratch, started

SHAPES = {
    # xfstests' fsx: one process, one descriptor, one file.
    "fsx": ["--procs", "1", "--threads", "1", "--files", "1", "--skip", "reopen", "--size-checks"],
    # Several writers per file, ended and taken over all the time.
    "shared": ["--procs", "2", "--threads", "2", "--files", "3"],
}
AGGRESSIVE = ["--compact-max-logs", "2", "--compact-min-dead", "0"]


@pytest.fixture
def base() -> Iterator[Path]:
    with scratch("patio-stress-") as path:
        yield path


@pytest.fixture
def mount(base: Path) -> Iterator[Any]:
    with started(functools.partial(ContainerMount, base)) as start:
        yield start


def stress(target: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [patio_binary(), "bench", "stress", str(target), "--json", *args],
        capture_output=True, text=True, timeout=600, check=False,
    )


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("compaction", ["default", "aggressive"])
def test_random_operations_under_background_compaction_match_the_model(
    mount: Any, shape: str, compaction: str
) -> None:
    m = mount(*(AGGRESSIVE if compaction == "aggressive" else []))
    ops = 20_000
    done = stress(m.mnt, "--ops", str(ops), "--seed", str(len(shape) * 7 + len(compaction)),
                  *SHAPES[shape])
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["mismatches"] == 0, report["mismatch"]
    assert report["ops"] == ops
    counts = report["counts"]
    assert counts["truncate"] > 0 and counts["copy_file_range"] > 0 and counts["read"] > 0
    assert report["fallocate_supported"] and counts["fallocate"] > 0
    stats = summary(m.stop())
    # The compaction ran meanwhile (the point of the test).
    assert int(stats["compactions"].split()[0].replace(",", "")) > 0, stats


def test_the_exerciser_catches_a_corrupted_byte(base: Path) -> None:
    """On a plain directory the exerciser passes; with a thread scribbling into the
    file behind its back it reports a mismatch and fails."""
    plain = base / "plain"
    plain.mkdir()
    clean = stress(plain, "--ops", "5000", *SHAPES["fsx"])
    assert clean.returncode == 0, clean.stderr
    stop = threading.Event()

    def scribble() -> None:
        rng = random.Random(1)
        while not stop.is_set():
            try:
                fd = os.open(plain / "stress.0", os.O_WRONLY)
            except FileNotFoundError:
                continue
            try:
                size = os.fstat(fd).st_size
                if size > 16:
                    os.pwrite(fd, b"\xa5" * 8, rng.randrange(0, size - 8))
            finally:
                os.close(fd)
            stop.wait(0.001)

    t = threading.Thread(target=scribble)
    t.start()
    try:
        bad = stress(plain, "--ops", "200000", *SHAPES["fsx"])
    finally:
        stop.set()
        t.join()
    assert bad.returncode != 0
    assert "mismatch" in bad.stderr
    assert "last operations on the file" in bad.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/nonexistent/dir"], "not a directory"),
        (["{base}", "--skip", "bogus"], "not an operation"),
        (["{base}", "--max-op", "10", "--max-size", "5"], "--max-op"),
        (["{base}", "--procs", "0"], "at least 1"),
    ],
)
def test_bad_inputs_are_one_line_errors(base: Path, args: list[str], message: str) -> None:
    argv = [a.replace("{base}", str(base)) for a in args]
    done = subprocess.run([patio_binary(), "bench", "stress", *argv],
                          capture_output=True, text=True, timeout=60, check=False)
    one_line_error(done, message)


KILL_ENV = "PATIO_TEST_KILL_COMPACTION_AT"


@pytest.mark.parametrize("step", [1, 2, 3, 4, 5, 6, 7, 8])
def test_a_mount_killed_inside_a_compaction_comes_back_with_the_file(
    base: Path, mount: Any, monkeypatch: pytest.MonkeyPatch, step: int
) -> None:
    """The mount kills itself (SIGKILL) at a compaction's ``step``-th durable step
    (temporary logs written, data log renamed, published, each source file removed,
    truncations pruned, manifest removed). Every operation before is closed (so
    durable against a killed daemon); mounted again, the file equals the model — or,
    for the one operation the kill interrupted, the model before or after it."""
    monkeypatch.setenv(KILL_ENV, str(step))
    m = mount(*AGGRESSIVE)
    monkeypatch.delenv(KILL_ENV)
    path = m.mnt / "f"
    rng = random.Random(step)
    model = bytearray()
    candidates: list[bytes] = []
    for _ in range(400):
        before = bytes(model)
        op = rng.random()
        try:
            if op < 0.5:
                off, n = rng.randrange(0, 96 << 10), rng.randrange(1, 24 << 10)
                data = rng.randbytes(n)
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    os.pwrite(fd, data, off)
                finally:
                    os.close(fd)
                model.extend(bytes(max(0, off + n - len(model))))
                model[off : off + n] = data
            elif op < 0.8:
                size = rng.choice([0, rng.randrange(0, 128 << 10)])
                if path.exists():
                    os.truncate(path, size)
                    del model[size:]
                    model.extend(bytes(size - len(model)))
            else:
                data = rng.randbytes(rng.randrange(1, 64 << 10))
                path.write_bytes(data)
                model[:] = data
        except OSError:
            # The kill came during this operation.
            candidates = [before, bytes(model)]
            break
        # Long enough for the background compaction (20 ms after a close or
        # truncation, 100 ms once nobody has the file open) to start.
        try:
            m.proc.wait(timeout=0.15)
            candidates = [bytes(model)]
            break
        except subprocess.TimeoutExpired:
            pass
    assert candidates, f"no compaction reached step {step}"
    # The dead mount's point answers ENOTCONN until it is detached (the cleanup does).
    m.cleanup()
    again = mount(name="mnt2")
    got = (again.mnt / "f").read_bytes() if (again.mnt / "f").exists() else b""
    assert any(got == c for c in candidates), (len(got), [len(c) for c in candidates])
    # The next compaction (at rest) recovers what the killed one left; all clean.
    again.stop()
    check = subprocess.run([patio_binary(), "container", "check", str(again.backend / "f")],
                           capture_output=True, text=True, timeout=60, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    left = [n for n in os.listdir(again.backend / "f") if n.startswith((".compact.", "compacted."))]
    assert not left, left
