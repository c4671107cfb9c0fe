"""Tests for ``patio.mpi``: containers written and read by the ranks of an MPI job.

``mpirun -n 4 --oversubscribe`` runs a script (OpenMPI and mpi4py come from
scripts/setup.sh) in which every rank writes its rank-strided part of one logical file
(N-1 strided, 4 KiB blocks, plus a few unaligned writes of its own), closes
collectively, then overwrites some of its neighbour's blocks through a second collective
open (8 writers in all, ordered by the collective close in between), and finally all
ranks open the container for reading with the split index load. Every rank verifies
every byte against the same reference model and that it read from disk exactly its
round-robin share of the index logs (``index_logs_read``, ``index_bytes_read`` equal to
the sizes of those files) and received the rest from the other ranks.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import pytest
from patio import _mpirun

RANKS = 4

SCRIPT = r"""
import json, os, sys
import numpy as np
from mpi4py import MPI
import patio.mpi

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
path, index = sys.argv[1], sys.argv[2]
BLOCK, ROWS = 4096, 48


def block(owner, i, n=BLOCK):
    return ((np.arange(n, dtype=np.uint32) * 7 + owner * 31 + i) % 251 + 1).astype(np.uint8)


# The reference model, the same on every rank.
model = np.zeros(ROWS * size * BLOCK + size * 1000, dtype=np.uint8)
for r in range(size):
    for i in range(ROWS):
        at = (i * size + r) * BLOCK
        model[at:at + BLOCK] = block(r, i)
    tail = ROWS * size * BLOCK + r * 1000 + 17
    model[tail:tail + 500] = block(r, 99, 500)
for r in range(size):  # phase 2: rank r overwrites every 5th block of rank r+1
    victim = (r + 1) % size
    for i in range(0, ROWS, 5):
        at = (i * size + victim) * BLOCK + 100
        model[at:at + 1000] = block(r, 1000 + i, 1000)
end = ROWS * size * BLOCK + (size - 1) * 1000 + 17 + 500
model = model[:end]

# Phase 1: every rank writes its strided part, collective close.
with patio.mpi.open(comm, path, "w", index=index) as c:
    assert c.mode == "w" and c.index == index
    for i in range(ROWS):
        c.write_at((i * size + rank) * BLOCK, block(rank, i))
    c.flush()  # collective
    tail = ROWS * size * BLOCK + rank * 1000 + 17
    c.pwrite(block(rank, 99, 500).tobytes(), tail)

# Phase 2: a new writer per rank, ordered after phase 1 by the collective close.
with patio.mpi.open(comm, path, "a") as c:
    victim = (rank + 1) % size
    for i in range(0, ROWS, 5):
        c.write_at((i * size + victim) * BLOCK + 100, memoryview(block(rank, 1000 + i, 1000)))

# Read with the split index load.
with patio.mpi.open(comm, path) as c:
    stats = c.stats()
    assert c.size == end, (c.size, end)
    got = c.read_array(np.uint8)
    assert np.array_equal(got, model), np.flatnonzero(got != model)[:10]
    # Independent reads of any part by any rank.
    mine = np.empty(BLOCK, dtype=np.uint8)
    for i in range(ROWS):
        at = (i * size + (rank + 2) % size) * BLOCK
        assert c.readinto(mine, at) == BLOCK
        assert np.array_equal(mine, model[at:at + BLOCK])
    writers = sorted(n for n in os.listdir(path) if n.startswith("index."))
    share = writers[rank::size]
    expect_read = sum(os.path.getsize(os.path.join(path, n)) for n in share)
    assert stats["index_logs_read"] == len(share), (stats, share)
    assert stats["index_bytes_read"] == expect_read, (stats, expect_read)
    assert stats["writers"] == len(writers) == 2 * size
    assert stats["index_bytes_received"] > 0 and stats["ranks"] == size
    with open(os.path.join(sys.argv[3], f"rank-{rank}.json"), "w") as out:
        json.dump({"rank": rank, "stats": stats}, out)
"""


def mpirun() -> list[str]:
    cmd = _mpirun.command(RANKS)
    if cmd is None:
        pytest.skip("mpirun is missing (OpenMPI: run scripts/setup.sh)")
    return cmd


def mpi_env() -> dict[str, str]:
    return _mpirun.environment()


@pytest.mark.parametrize("index", ["pattern", "raw"])
def test_ranks_write_strided_parts_and_read_with_a_split_index_load(
    tmp_path: Path, index: str
) -> None:
    pytest.importorskip("mpi4py")
    script = tmp_path / "ranks.py"
    script.write_text(SCRIPT)
    path = tmp_path / "shared.patio"
    done = subprocess.run(
        [*mpirun(), sys.executable, str(script), str(path), index, str(tmp_path)],
        capture_output=True, text=True, env=mpi_env(), timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    reports = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("rank-*.json"))]
    assert sorted(r["rank"] for r in reports) == list(range(RANKS))
    logs = sorted(p for p in path.iterdir() if p.name.startswith("index."))
    assert len(logs) == 2 * RANKS
    total = sum(p.stat().st_size for p in logs)
    # Each log was read from disk by exactly one rank.
    assert sum(r["stats"]["index_bytes_read"] for r in reports) == total
    assert sum(r["stats"]["index_logs_read"] for r in reports) == len(logs)
    for r in reports:
        s = r["stats"]
        assert s["index_disk_bytes"] == total and s["index"] == index
        assert s["index_bytes_read"] < total
    if index == "pattern":
        # The ranks' strided writes are pattern entries on disk, not one per write.
        assert reports[0]["stats"]["compression_ratio"] > 5


def test_a_failing_rank_fails_every_rank(tmp_path: Path) -> None:
    """A collective open of a path that is not a container raises on every rank
    (none waits forever in a later collective)."""
    pytest.importorskip("mpi4py")
    script = tmp_path / "fail.py"
    script.write_text(
        "import sys\n"
        "from mpi4py import MPI\n"
        "import patio, patio.mpi\n"
        "comm = MPI.COMM_WORLD\n"
        "try:\n"
        "    patio.mpi.open(comm, sys.argv[1])\n"
        "except (FileNotFoundError, RuntimeError) as e:\n"
        "    with open(f'{sys.argv[2]}/raised-{comm.rank}', 'w') as out:\n"
        "        out.write(f'raised {comm.rank} {type(e).__name__}')\n"
    )
    done = subprocess.run(
        [*mpirun(), sys.executable, str(script), str(tmp_path / "missing"), str(tmp_path)],
        capture_output=True, text=True, env=mpi_env(), timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = sorted(p.read_text() for p in tmp_path.glob("raised-*"))
    assert lines == [
        "raised 0 FileNotFoundError",
        *(f"raised {r} RuntimeError" for r in range(1, RANKS)),
    ]


ORDERED = r"""
import json, sys, time
import numpy as np
from mpi4py import MPI
import patio.mpi

comm = MPI.COMM_WORLD
rank, size = comm.rank, comm.size
path, out = sys.argv[1], sys.argv[2]
PART = 64 << 10
model = ((np.arange(size * 4 * PART, dtype=np.uint64) * 2654435761) >> 13).astype(np.uint8)
# Each rank writes 4 parts, the parts of all ranks interleaved in the logical file:
# rank r's data log holds parts r, r+size, ...
with patio.mpi.open(comm, path, "w") as c:
    for i in range(4):
        at = (i * size + rank) * PART
        c.write_at(at, model[at:at + PART])

events = []
turns_pace = patio.mpi.Turns.pace
def recorded(self, i, after):
    if after:
        events.append(("end", i, time.monotonic_ns()))
    turns_pace(self, i, after)
    if not after:
        events.append(("start", i, time.monotonic_ns()))
patio.mpi.Turns.pace = recorded
places = []
turns_schedule = patio.mpi.Turns.schedule
def scheduled(self, p):
    places.append([list(x) for x in p])
    return turns_schedule(self, p)
patio.mpi.Turns.schedule = scheduled

rng = np.random.default_rng(rank)
extents = []
if rank != size - 1:  # the last rank reads nothing but still takes part
    for _ in range(int(rng.integers(1, 12))):
        o = int(rng.integers(0, model.size - 1))
        extents.append((o, int(rng.integers(0, min(3 * PART, model.size - o)))))
with patio.mpi.open(comm, path) as c:
    got = c.read_extents_ordered(extents)
    want = b"".join(model[o:o + n].tobytes() for o, n in extents)
    assert got == want, rank
    reads = c.stats()["physical_reads"]
    # An extent past the end on one rank fails every rank, none waits forever.
    bad = [(model.size - 10, 20)] if rank == 1 else [(0, 10)]
    try:
        c.read_extents_ordered(bad)
        raised = None
    except (ValueError, RuntimeError) as e:
        raised = type(e).__name__
with open(f"{out}/ordered-{rank}.json", "w") as f:
    json.dump({"rank": rank, "events": events, "reads": reads, "raised": raised,
               "places": places[0]}, f)
"""


def test_ordered_reads_go_one_at_a_time_in_container_order(tmp_path: Path) -> None:
    """``read_extents_ordered``: every rank gets the bytes of its extents (random,
    overlapping other ranks', one rank with none), the physical reads of all ranks
    never overlap in time, and they start in container order (data log, offset) —
    checked from each read's start and end on the machine's monotonic clock. An
    extent past the end on one rank raises on every rank."""
    pytest.importorskip("mpi4py")
    script = tmp_path / "ordered.py"
    script.write_text(ORDERED)
    path = tmp_path / "ordered.patio"
    done = subprocess.run(
        [*mpirun(), sys.executable, str(script), str(path), str(tmp_path)],
        capture_output=True, text=True, env=mpi_env(), timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    reports = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("ordered-*.json"))]
    assert sorted(r["rank"] for r in reports) == list(range(RANKS))
    spans = []
    for r in reports:
        starts = {i: t for kind, i, t in r["events"] if kind == "start"}
        ends = {i: t for kind, i, t in r["events"] if kind == "end"}
        assert sorted(starts) == sorted(ends) == list(range(r["reads"]))
        assert len(r["places"]) == r["reads"]
        spans += [(starts[i], ends[i], tuple(r["places"][i][:2]), r["rank"]) for i in starts]
    spans.sort()
    assert len(spans) >= RANKS - 1
    for (_, end, place, _), (start, _, next_place, _) in itertools.pairwise(spans):
        assert end <= start, spans
        assert place <= next_place, spans
    assert sorted(r["raised"] for r in reports) == ["RuntimeError"] * (RANKS - 1) + ["ValueError"]
