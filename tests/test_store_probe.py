"""Cold reads and the storage probe: ``patio._coldcache`` takes written files out of the
page cache (fsync, then drop, checked with ``mincore``), and ``patio store probe``
calibrates the striped storage model on the real file system and saves it for
``--store probed``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from patio import _coldcache as coldcache


def _write(path: Path, nbytes: int) -> None:
    with open(path, "wb") as f:
        f.write(os.urandom(nbytes))  # no fsync: the pages are dirty


def test_drop_takes_a_freshly_written_file_out_of_the_page_cache(tmp_path: Path) -> None:
    path = tmp_path / "fresh.bin"
    _write(path, 8 << 20)
    resident, total = coldcache.resident_pages(path)
    assert total == (8 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert resident / total > 0.9, "a file just written is in the page cache"
    left = coldcache.drop([path, tmp_path / "missing"])
    if left > 0.5:
        pytest.skip(f"the file system of {tmp_path} keeps pages in memory (tmpfs?): "
                    f"{left:.0%} resident after fsync + POSIX_FADV_DONTNEED")
    assert left < 0.02
    assert coldcache.resident_fraction([path]) == left
    # Reading it back brings it in again: the measure is not stuck at zero.
    path.read_bytes()
    assert coldcache.resident_fraction([path]) > 0.9


def test_dontneed_without_fsync_is_the_warm_read_it_replaces(tmp_path: Path) -> None:
    """The bug this module fixes: DONTNEED on dirty pages leaves (most of) them."""
    path = tmp_path / "dirty.bin"
    _write(path, 8 << 20)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    before = coldcache.resident_fraction([path])
    after = coldcache.drop([path])
    assert after <= before
    if after > 0.5:
        pytest.skip(f"{tmp_path}'s file system cannot drop pages (tmpfs?)")
    assert after < 0.02


def test_empty_files_and_no_files() -> None:
    assert coldcache.resident_fraction([]) == 0.0
    assert coldcache.drop([]) == 0.0


def test_a_file_system_that_cannot_drop_is_reported_not_hidden() -> None:
    """tmpfs pages cannot leave memory: the drop says so (resident fraction 1)."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm (tmpfs) here")
    path = shm / f"patio-coldcache-{os.getpid()}"
    try:
        _write(path, 1 << 20)
        assert coldcache.drop([path]) == 1.0
    finally:
        path.unlink(missing_ok=True)
