"""Tests for ``patio._realdisk``: concurrent cold reads of the real disk for benchmarks.

Reference model: the bytes each client's extents hold in its file (a client reads all of
them, in one process per client); a short read is an error, not a faster client."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from patio._realdisk import ClientRead, run_clients, write_files

SIZE = 1 << 20


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    clients=st.integers(1, 4),
    extents=st.lists(st.tuples(st.integers(0, SIZE - 1), st.integers(1, 65536)), min_size=1, max_size=20),
)  # fmt: skip
def test_every_client_reads_all_its_bytes(
    tmp_path: Path, clients: int, extents: list[tuple[int, int]]
) -> None:
    files = [tmp_path / f"f{c}" for c in range(clients)]
    write_files(files, SIZE)
    ext = [(o, min(n, SIZE - o)) for o, n in extents]
    offs = np.array([o for o, _ in ext], np.int64)
    lens = np.array([n for _, n in ext], np.int64)
    r = run_clients([ClientRead(f, offs, lens) for f in files])
    assert r["bytes"] == clients * int(lens.sum())
    assert r["seconds"] > 0 and 0.0 <= r["resident"] <= 1.0


def test_files_hold_data_not_holes(tmp_path: Path) -> None:
    (f,) = files = [tmp_path / "data"]
    write_files(files, 3 * SIZE + 5)
    assert f.stat().st_size == 3 * SIZE + 5
    assert f.stat().st_blocks * 512 >= 3 * SIZE  # allocated: a hole would read no disk
    assert len(set(f.read_bytes()[: 1 << 16])) > 200
    mtime = f.stat().st_mtime_ns
    write_files(files, 3 * SIZE + 5)  # the right size already: kept
    assert f.stat().st_mtime_ns == mtime


def test_a_read_past_the_end_is_an_error(tmp_path: Path) -> None:
    (f,) = files = [tmp_path / "short"]
    write_files(files, 4096)
    with pytest.raises(OSError, match="of 8192 bytes read"):
        run_clients([ClientRead(f, np.array([0]), np.array([8192]))])


def test_a_missing_file_is_an_error_and_no_client_waits_for_it(tmp_path: Path) -> None:
    files = [tmp_path / "a", tmp_path / "b"]
    write_files(files, 4096)
    reads = [ClientRead(p, np.array([0]), np.array([1])) for p in [*files, tmp_path / "absent"]]
    with pytest.raises(OSError, match="cannot open .*absent"):
        run_clients(reads)
    assert not os.path.exists(tmp_path / "absent")
