"""``patio._mount_harness``, the one way the tests and benchmarks run ``patio mount …``:
a mount that cannot start is an error carrying its stderr; ``end`` refuses an unclean
end; ``stats`` and ``live_stats`` give the counters the mount reports (checked against
the I/O a test did through it); ``kill`` and ``cleanup`` leave nothing mounted and no
process behind, also for a dead mount and a busy one (which ``fusermount3 -u`` refuses).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from patio._binary import patio_binary
from patio._mount_harness import MountError, MountProcess, is_mounted
from test_mount_trace import scratch

WRITES, BLOCK = 16, 4096


@pytest.fixture
def base() -> Iterator[Path]:
    with scratch("patio-harness-") as path:
        (path / "src").mkdir()
        (path / "mnt").mkdir()
        yield path


def prefetch(base: Path, *options: str) -> MountProcess:
    argv = [patio_binary(), "mount", "prefetch", str(base / "src"), str(base / "mnt"),
            "--policy", "readahead", "--direct-io", "--stats-json", str(base / "stats.json"),
            *options]  # fmt: skip
    return MountProcess(argv, base / "mnt", stats_file=base / "stats.json")


def gone(m: MountProcess) -> None:
    assert m.proc is not None and m.proc.poll() is not None
    assert not is_mounted(m.mnt) and not os.path.ismount(m.mnt)


def test_a_mount_that_cannot_start_is_an_error_with_its_stderr(base: Path) -> None:
    argv = [patio_binary(), "mount", "prefetch", str(base / "nope"), str(base / "mnt"),
            "--policy", "readahead"]  # fmt: skip
    with pytest.raises(MountError) as failed:
        MountProcess(argv, base / "mnt")
    message = str(failed.value)
    assert message.startswith("patio mount prefetch exited with status "), message
    assert "does not exist" in message and str(base / "nope") in message, message
    assert not is_mounted(base / "mnt")


def test_counters_live_and_at_the_end_match_the_writes(base: Path) -> None:
    with prefetch(base) as m:
        with open(m.mnt / "w.bin", "wb", buffering=0) as f:
            for i in range(WRITES):
                assert f.write(bytes([i]) * BLOCK) == BLOCK
        deadline = time.monotonic() + 5
        while (live := m.live_stats())["written_bytes"] < WRITES * BLOCK:
            assert time.monotonic() < deadline, live
            time.sleep(0.2)
        assert live["writes"] == WRITES and live["written_bytes"] == WRITES * BLOCK
        report = m.end("SIGINT")
        assert "patio: " in report and m.stdout == ""
        stats = m.stats()
        assert stats["writes"] == WRITES and stats["written_bytes"] == WRITES * BLOCK
    gone(m)
    expect = b"".join(bytes([i]) * BLOCK for i in range(WRITES))
    assert (base / "src" / "w.bin").read_bytes() == expect


def test_an_unclean_end_is_an_error_and_cleanup_removes_the_dead_mount(base: Path) -> None:
    m = prefetch(base)
    try:
        with pytest.raises(MountError) as failed:
            m.end("SIGKILL")
        message = str(failed.value)
        assert "exited with status -9" in message and "left" in message, message
        # Dead (its accesses fail with ENOTCONN) and still mounted.
        assert is_mounted(m.mnt)
        with pytest.raises(MountError, match="no statistics"):
            m.stats()
    finally:
        m.cleanup()
    gone(m)


def test_kill_detaches_what_the_crash_left(base: Path) -> None:
    m = prefetch(base)
    m.kill()
    gone(m)
    assert m.proc is not None and m.proc.returncode == -9
    m.cleanup()  # once more: nothing left to do, and no error


def test_cleanup_of_a_busy_mount_falls_back_to_signals(base: Path) -> None:
    (base / "src" / "held.bin").write_bytes(b"x" * BLOCK)
    m = prefetch(base)
    held = os.open(m.mnt / "held.bin", os.O_RDONLY)
    try:
        assert m.running()
        started = time.monotonic()
        m.cleanup()
        gone(m)
        assert time.monotonic() - started < 20
        # A clean end, with patio's own lazy detach: not a SIGKILL.
        assert m.proc is not None and m.proc.returncode == 0, m.stderr
        assert "lazily" in m.stderr, m.stderr
    finally:
        try:
            os.close(held)
        except OSError:  # ENOTCONN: the mount it was open on is gone
            pass
