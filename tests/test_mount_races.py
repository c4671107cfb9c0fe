"""Reads racing an extending write, on the mounts that read SOURCE with ``O_DIRECT``
(``patio mount cache`` and ``patio mount prefetch --direct-io``): one thread rereads
128 KiB while another extends the file with a write; no read may fail (the daemon
once retried a read at the old, unaligned end of the file with ``O_DIRECT`` and
answered ``EINVAL``) and no later read may be short where the file is longer, through
the same or a new descriptor. Each file is written through the mount, and its bytes
are kept as the model."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from patio._binary import patio_binary
from test_mount_cache import CacheMount
from test_mount_prefetch import PrefetchMount
from test_mount_trace import scratch, started

SIZE, WRITE_AT, WRITE_LEN = 0x3B422, 0x3861E, 0x6CB0


@pytest.fixture
def base() -> Iterator[Path]:
    with scratch("patio-races-") as path:
        yield path


MOUNTS = {
    "cache-lru": lambda base: CacheMount(base, "lru"),
    "cache-group": lambda base: CacheMount(base, "group"),
    "prefetch-readahead-direct": lambda base: PrefetchMount(base, "readahead", "--direct-io"),
}


@pytest.fixture
def mount(base: Path) -> Iterator[Any]:
    with started(lambda kind: MOUNTS[kind](base)) as start:
        yield start


@pytest.mark.parametrize("kind", sorted(MOUNTS))
def test_reads_racing_an_extending_write_neither_fail_nor_stop_short(
    mount: Any, kind: str
) -> None:
    m = mount(kind)
    for trial in range(40):
        name = f"f{trial}"
        data = bytearray(os.urandom(SIZE))
        (m.mnt / name).write_bytes(data)
        fd = os.open(m.mnt / name, os.O_RDWR)
        stop, errors = threading.Event(), []

        def reread(fd: int = fd, stop: threading.Event = stop, errors: list[int] = errors) -> None:
            while not stop.is_set():
                try:
                    os.pread(fd, 128 << 10, 0x20000)
                except OSError as e:
                    errors.append(e.errno)

        t = threading.Thread(target=reread)
        t.start()
        tail = os.urandom(WRITE_LEN)
        try:
            assert os.pwrite(fd, tail, WRITE_AT) == WRITE_LEN
        finally:
            stop.set()
            t.join()
        data[WRITE_AT:] = tail
        assert not errors, f"trial {trial}: reads failed with errno {set(errors)}"
        want = bytes(data[0x2FA05 : 0x2FA05 + 0xBB7F])
        assert os.pread(fd, 0xBB7F, 0x2FA05) == want, f"trial {trial}"
        os.close(fd)
        with open(m.mnt / name, "rb") as f:
            assert f.read() == bytes(data), f"trial {trial}: through a new descriptor"
        assert (m.src / name).read_bytes() == bytes(data)
    m.stop()




# fsx's shape (xfstests' fsx is not packaged here): one process, one descriptor kept
# open, random writes, reads, truncations, copies and fallocate on one file, the size
# checked after every operation and every read against a byte model — 30,000 operations
# with the seed numbers of the runs that failed (`fsx -N 30000 -S 3` on the cache mount).
FSX_SHAPE = ("--procs", "1", "--threads", "1", "--files", "1", "--skip", "reopen",
             "--size-checks", "--ops", "30000")


@pytest.mark.parametrize("kind", sorted(MOUNTS))
def test_fsx_shaped_runs_match_the_model(mount: Any, kind: str) -> None:
    seed = 3
    m = mount(kind)
    done = subprocess.run([patio_binary(), "bench", "stress", str(m.mnt), "--json",
                           "--seed", str(seed), *FSX_SHAPE],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["mismatches"] == 0, report["mismatch"]
    assert report["ops"] == 30000
