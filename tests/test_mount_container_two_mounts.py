"""Two ``patio mount container`` processes over one backend (two nodes sharing a
parallel file system), and the consistency model between them: close-to-open, plus
``fsync`` on a descriptor ending that mount's cached view of the file (MPI-IO's
sync-barrier-sync rule: what a writer synced before the barrier, a reader that syncs
after it sees), and ``fstat`` never reporting more than reads return."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_mount_container import ContainerMount
from test_mount_trace import scratch, started

OLD, NEW, TAIL = b"\x01" * 16384, b"\x02" * 4096, b"\x03" * 4096


@pytest.fixture
def base() -> Iterator[Path]:
    with scratch("patio-two-mounts-") as path:
        yield path


@pytest.fixture
def mount(base: Path) -> Iterator[Any]:
    with started(functools.partial(ContainerMount, base)) as start:
        yield start


def written_by_b(a: Any, b: Any) -> int:
    """A has the file open and has read it; B overwrites its head, appends 4 KiB and
    fsyncs. Returns A's descriptor."""
    (a.mnt / "f").write_bytes(OLD)
    fa = os.open(a.mnt / "f", os.O_RDWR)
    assert os.pread(fa, len(OLD), 0) == OLD
    fb = os.open(b.mnt / "f", os.O_RDWR)
    try:
        os.pwrite(fb, NEW, 0)
        os.pwrite(fb, TAIL, len(OLD))
        os.fsync(fb)
    finally:
        os.close(fb)
    return fa


def test_fsync_after_another_mount_s_fsync_sees_its_writes(mount: Any) -> None:
    a, b = mount(name="a"), mount(name="b")
    fa = written_by_b(a, b)
    try:
        os.fsync(fa)
        assert os.pread(fa, 4096, 0) == NEW
        assert os.pread(fa, 4096, len(OLD)) == TAIL
        assert os.pread(fa, 8192, len(OLD) - 4096) == OLD[:4096] + TAIL
    finally:
        os.close(fa)
    a.stop()
    b.stop()


def test_a_read_never_stops_short_of_the_size_fstat_reports(mount: Any) -> None:
    a, b = mount(name="a"), mount(name="b")
    fa = written_by_b(a, b)
    try:
        # Past the attribute lifetime (1 s) A's fstat asks its daemon, which reads
        # the container's meta files and sees B's append.
        deadline = time.monotonic() + 10
        while os.fstat(fa).st_size != len(OLD) + len(TAIL):
            assert time.monotonic() < deadline, "A never saw the new size"
            time.sleep(0.2)
        assert os.pread(fa, 4096, len(OLD)) == TAIL
    finally:
        os.close(fa)
    # Close-to-open: opened again, A reads everything B wrote.
    assert (a.mnt / "f").read_bytes() == NEW + OLD[4096:] + TAIL
    a.stop()
    b.stop()
