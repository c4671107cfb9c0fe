"""Tests for ``patio reorg plan|apply``: a file reorganized from a trace of the processes
that read it is served byte for byte as the original by the container tools, the
library, the FUSE mount and ``patio.mpi``; each rank's planned pattern is one physical
read; writes after the reorganization behave like writes to a byte array; bad inputs
are one-line errors that leave nothing behind. And the pieces of ``patio bench reorg``:
the sieved original-file control, the held-out plan run, the speedups and the JSON.

The reference model is the source file's bytes (a ``bytes`` object, then a
``bytearray`` for writes after the reorganization)."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import patio as patio_lib
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from patio._files import host_name
from patio.reorg import sieve
from patio.reorg.bench import model_errors, ratios
from patio.reorg.cases import Case, ior, plan_run, tile
from test_container_mpi import RANKS, mpi_env, mpirun
from test_mount_container import ContainerMount, base  # noqa: F401  (fixture)
from test_mount_trace import IS_ROOT, one_line_error, patio

PIECE = 8192
PIECES = 16
HEADER = "module,file,rank,op,offset,length,start,end\n"


def ior_like(
    dir: Path, ranks: int = RANKS, pieces: int = PIECES, piece: int = PIECE
) -> tuple[Path, Path, bytes]:
    """A file read by ``ranks`` processes, each every ``ranks``-th piece (IOR
    segmented), and the MPI-IO trace of those reads under another path."""
    data = random.Random(5).randbytes(ranks * pieces * piece)
    src = dir / "data.bin"
    src.write_bytes(data)
    rows = [
        f"MPIIO,/lustre/run7/data.bin,{r},read,{(i * ranks + r) * piece},{piece},{i},{i + 0.5}\n"
        for r in range(ranks)
        for i in range(pieces)
    ]
    trace = dir / "run.csv"
    trace.write_text(HEADER + "".join(rows))
    return src, trace, data


def rank_extents(rank: int, ranks: int = RANKS) -> list[tuple[int, int]]:
    return [((i * ranks + rank) * PIECE, PIECE) for i in range(PIECES)]


def test_plan_json_names_the_patterns_and_apply_serves_the_source(tmp_path: Path) -> None:
    src, trace, data = ior_like(tmp_path)
    done = patio("reorg", "plan", str(trace), "--file", str(src), "--json")
    plan = json.loads(done.stdout)
    for key in ("file", "patterns", "remap_bytes", "table_bytes",
                "physical_extents_before", "physical_extents_after"):  # fmt: skip
        assert key in plan, key
    assert len(plan["patterns"]) == RANKS
    for p in plan["patterns"]:
        assert set(p) >= {"processes", "signature", "requests", "bytes"}
        assert p["requests"] == PIECES and p["bytes"] == PIECES * PIECE
        assert p["extents_before"] == PIECES and p["extents_after"] == 1
    assert plan["physical_extents_before"] == RANKS * PIECES
    assert plan["physical_extents_after"] == RANKS
    assert plan["remap_bytes"] < plan["table_bytes"]
    assert plan["module"] == "MPIIO" and plan["traced_file"] == "/lustre/run7/data.bin"

    out = tmp_path / "data.pc"
    applied = json.loads(patio("reorg", "apply", str(trace), "--file", str(src),
                               "-o", str(out), "--json").stdout)  # fmt: skip
    assert applied["bytes"] == len(data) and applied["index_bytes"] < 200
    assert src.read_bytes() == data
    # Nothing hidden is left beside OUT but the registration for the source.
    hidden = [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    assert hidden == [".data.bin.patio-reorg"]
    flat = tmp_path / "flat.bin"
    patio("container", "flatten", str(out), str(flat))
    assert flat.read_bytes() == data
    assert patio("container", "check", str(out)).returncode == 0

    rng = random.Random(1)
    with patio_lib.Container(out) as c:
        assert c.size == len(data)
        for _ in range(200):
            at, n = rng.randrange(len(data) + 100), rng.randrange(20_000)
            assert c.read_at(n, at) == data[at : at + n]
        for rank in range(RANKS):
            ext = rank_extents(rank)
            assert c.read_extents(ext) == b"".join(data[o : o + n] for o, n in ext)
        stats = c.stats()
        assert stats["extent_reads"] == RANKS and stats["physical_reads"] == RANKS
        with pytest.raises(patio_lib.ContainerError, match="past the end"):
            c.read_extents([(len(data) - 10, 20)])


CORNERS = [(0, 0), (0, 96), (96, 0), (96, 96)]


def test_overlapping_tiles_are_resolved_and_explained(tmp_path: Path) -> None:
    # A 256x256 array of 64-byte elements; 4 ranks read 2x2 tiles of 160x160
    # (overlapping by 64 rows and columns), one row at a time.
    n, tile, elem = 256, 160, 64
    data = random.Random(2).randbytes(n * n * elem)
    src = tmp_path / "grid.bin"
    src.write_bytes(data)
    rows = []
    for rank, (ty, tx) in enumerate(CORNERS):
        for i, y in enumerate(range(ty, ty + tile)):
            rows.append(f"POSIX,{src},{rank},read,{(y * n + tx) * elem},{tile * elem},{i},{i}\n")
    trace = tmp_path / "tiles.csv"
    trace.write_text(HEADER + "".join(rows))
    plan = json.loads(patio("reorg", "plan", str(trace), "--file", str(src), "--json",
                            "--store", "ssd").stdout)  # fmt: skip
    assert len(plan["patterns"]) == 4
    assert all(p["kind"] == "strided" for p in plan["patterns"])
    ceded = sum(c["bytes"] for p in plan["patterns"] for c in p["ceded"])
    # Each overlap byte is placed once: the tiles hold 4*160*160 elements, the grid 256*256.
    assert ceded == (4 * tile * tile - n * n) * elem
    text = patio("reorg", "plan", str(trace), "--file", str(src)).stdout
    assert "cedes" in text and "saves more" in text
    out = tmp_path / "grid.pc"
    # The same store as the plan: the placement follows the modelled savings.
    patio("reorg", "apply", str(trace), "--file", str(src), "-o", str(out), "--store", "ssd")
    with patio_lib.Container(out) as c:
        assert c.read_at(len(data), 0) == data
        for p in plan["patterns"]:
            rank = int(p["processes"][0].split()[1])
            ty, tx = CORNERS[rank]
            ext = [((y * n + tx) * elem, tile * elem) for y in range(ty, ty + tile)]
            before = c.stats()["physical_reads"]
            assert c.read_extents(ext) == b"".join(data[o : o + k] for o, k in ext)
            # At most the plan's physical extents (small gaps are read through).
            assert 1 <= c.stats()["physical_reads"] - before <= p["extents_after"]


MPI_SCRIPT = r"""
import json, sys
from mpi4py import MPI
import patio.mpi

comm = MPI.COMM_WORLD
src, pc, out = sys.argv[1:4]
PIECE, PIECES = int(sys.argv[4]), int(sys.argv[5])
ext = [((i * comm.size + comm.rank) * PIECE, PIECE) for i in range(PIECES)]
with open(src, "rb") as f:
    data = f.read()
with patio.mpi.open(comm, pc) as c:
    got = c.read_extents(ext)
    stats = c.stats()
ok = got == b"".join(data[o:o + n] for o, n in ext)
with open(f"{out}/rank-{comm.rank}.json", "w") as f:
    json.dump({"ok": ok, "physical_reads": stats["physical_reads"]}, f)
"""


def test_mpi_ranks_read_their_pattern_in_one_physical_read(tmp_path: Path) -> None:
    pytest.importorskip("mpi4py")
    src, trace, _ = ior_like(tmp_path)
    out = tmp_path / "data.pc"
    patio("reorg", "apply", str(trace), "--file", str(src), "-o", str(out))
    script = tmp_path / "ranks.py"
    script.write_text(MPI_SCRIPT)
    done = subprocess.run(
        [*mpirun(), sys.executable, str(script), str(src), str(out), str(tmp_path),
         str(PIECE), str(PIECES)],
        capture_output=True, text=True, env=mpi_env(), timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    reports = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(RANKS)]
    assert all(r["ok"] for r in reports)
    assert [r["physical_reads"] for r in reports] == [1] * RANKS


def test_the_mount_serves_the_logical_file_and_takes_writes(base: Path) -> None:  # noqa: F811
    (base / "backend").mkdir()
    src, trace, data = ior_like(base)
    patio(
        "reorg", "apply", str(trace), "--file", str(src), "-o", str(base / "backend" / "data.pc")
    )
    m = ContainerMount(base)
    try:
        path = m.mnt / "data.pc"
        assert path.stat().st_size == len(data)
        assert path.read_bytes() == data
        model = bytearray(data)
        rng = random.Random(3)
        fd = os.open(path, os.O_RDWR)
        try:
            for _ in range(100):
                at, n = rng.randrange(len(data)), rng.randrange(1, 30_000)
                assert os.pread(fd, n, at) == bytes(model[at : at + n])
                if rng.random() < 0.3:
                    w = rng.randbytes(rng.randrange(1, 5000))
                    os.pwrite(fd, w, at)
                    end = at + len(w)
                    model.extend(b"\0" * max(0, end - len(model)))
                    model[at:end] = w
        finally:
            os.close(fd)
        assert path.read_bytes() == bytes(model)
    finally:
        m.stop()
    flat = base / "flat.bin"
    patio("container", "flatten", str(base / "backend" / "data.pc"), str(flat))
    assert flat.read_bytes() == bytes(model)


def test_bad_inputs_are_one_line_errors_and_write_nothing(tmp_path: Path) -> None:
    src, trace, data = ior_like(tmp_path)
    out = tmp_path / "out.pc"

    def refused(*args: str, words: tuple[str, ...]) -> None:
        one_line_error(patio("reorg", *args, check=False), *words)
        assert not out.exists()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
        assert src.read_bytes() == data

    apply = ("apply", "-o", str(out), "--file", str(src))
    # A trace of a bigger file: offsets past the end.
    short = tmp_path / "short.bin"
    short.write_bytes(data[: len(data) // 2])
    one_line_error(patio("reorg", "plan", str(trace), "--file", str(short), check=False),
                   "no requests for", "short.bin", "/lustre/run7/data.bin")  # fmt: skip
    one_line_error(patio("reorg", "plan", str(trace), "--file", str(short), "--trace-file",
                         "/lustre/run7/data.bin", check=False),
                   "does not match", "past its end", "offset")  # fmt: skip
    # Another file.
    other = tmp_path / "other.csv"
    other.write_text(HEADER + "POSIX,/x/another.bin,0,read,0,10,0,1\n")
    refused(*apply, str(other), words=("no requests for", "another.bin"))
    # No recurring pattern: one process reading the file front to back.
    seq = tmp_path / "seq.csv"
    seq.write_text(HEADER + "".join(
        f"POSIX,{src},0,read,{i * 65536},65536,{i},{i}\n" for i in range(len(data) // 65536)))  # fmt: skip
    refused(*apply, str(seq), words=("no recurring", "already contiguous", "nothing to reorganize"))
    # An unreadable trace, an unknown store.
    refused(*apply, str(tmp_path / "missing.csv"), words=("missing.csv",))
    refused(*apply, str(trace), "--store", "tape", words=("--store",))
    # An existing output.
    out.mkdir()
    one_line_error(patio("reorg", *apply, str(trace), check=False), "already exists")
    assert list(out.iterdir()) == []
    out.rmdir()


@pytest.mark.skipif(not IS_ROOT, reason="mounting a small tmpfs needs root")
def test_no_space_left_removes_the_partial_output(tmp_path: Path) -> None:
    src, trace, data = ior_like(tmp_path, pieces=64, piece=65536)  # 16 MiB
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(small)],
                      capture_output=True, check=False).returncode != 0:  # fmt: skip
        pytest.skip("cannot mount a tmpfs here")
    try:
        done = patio("reorg", "apply", str(trace), "--file", str(src), "-o",
                     str(small / "data.pc"), check=False)  # fmt: skip
        one_line_error(done, "No space left")
        assert done.stderr.count("No space left") == 1, done.stderr
        assert list(small.iterdir()) == []
        assert src.read_bytes() == data
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_what_a_killed_apply_left_is_removed_by_the_next(tmp_path: Path) -> None:
    """A SIGKILLed ``reorg apply`` leaves its temporary output (named after its host
    and process); the next apply to the same output removes it. Another host's, or a
    living process's, is left alone."""
    src, trace, data = ior_like(tmp_path)
    out = tmp_path / "data.pc"
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = tmp_path / f".data.pc.reorg-{host_name()}.{dead.pid}-123"
    other_host = tmp_path / f".data.pc.reorg-elsewhere.{dead.pid}-123"
    alive = tmp_path / f".data.pc.reorg-{host_name()}.{os.getpid()}-123"
    for d in (left, other_host, alive):
        d.mkdir()
        (d / "data.x").write_bytes(b"partial")
    patio("reorg", "apply", str(trace), "--file", str(src), "-o", str(out))
    assert not left.exists()
    assert other_host.exists() and alive.exists()
    assert src.read_bytes() == data


TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"


def test_a_real_darshan_log_plans_one_pattern_per_rank(tmp_path: Path) -> None:
    # mpi_io_test: 32 ranks each read and write 4 blocks of 16 MiB, 512 MiB apart, in a
    # 2 GiB file written elsewhere; a sparse file of that size stands in for it.
    log = TRACES / "mpi_io_test_32ranks.darshan"
    assert log.exists(), f"shared trace missing: {log}"
    here = tmp_path / "test.out"
    with open(here, "wb") as f:
        f.truncate(2 << 30)
    plan = json.loads(patio("reorg", "plan", str(log), "--file", str(here), "--json").stdout)
    assert plan["traced_file"] == "/yellow/users/treddy/mpi_io_rough_work/test.out"
    assert plan["module"] == "MPIIO" and len(plan["patterns"]) == 32
    # Each rank reads and writes the same blocks: one pattern for both streams.
    assert all(len(p["processes"]) == 2 for p in plan["patterns"])
    assert plan["physical_extents_before"] == 256 and plan["physical_extents_after"] == 64
    assert plan["remap_bytes"] < 100 < plan["table_bytes"]


# ---- the benchmark harness (``patio bench reorg``) ----


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_batched_sieved_reads_return_the_requests_bytes_in_the_containers_reads(
    tmp_path: Path, data: st.DataObject
) -> None:
    """The original-file control reads exactly the requested bytes, and with the same
    sieving rule as the container: as many reads as ``read_extents`` issues for the same
    extents of a container that holds the file in one log, in order."""
    size = 3 << 20
    blob = random.Random(11).randbytes(size)
    path = tmp_path / "one.pc"
    if not path.exists():
        with patio_lib.Container(path, "w") as c:
            c.write_at(0, blob)
    n = data.draw(st.integers(1, 40), label="requests")
    extents = [
        (o, min(ln, size - o))
        for o, ln in data.draw(
            st.lists(st.tuples(st.integers(0, size - 1), st.integers(1, 300 << 10)), min_size=n, max_size=n),
            label="extents",
        )
    ]
    preads: list[tuple[int, int]] = []

    def pread(o: int, k: int) -> bytes:
        preads.append((o, k))
        return blob[o : o + k]

    got, reads = sieve.read(extents, pread)
    assert got == b"".join(blob[o : o + k] for o, k in extents)
    assert reads == len(preads) == len(sieve.runs(extents))
    with patio_lib.Container(path) as c:
        before = c.stats()["physical_reads"]
        assert c.read_extents(extents) == got
        assert c.stats()["physical_reads"] - before == reads
    # Gaps up to 256 KiB are read through; a longer one starts another read.
    assert len(sieve.runs([(0, 10), (10 + sieve.SIEVE_GAP, 10)])) == 1
    assert len(sieve.runs([(0, 10), (11 + sieve.SIEVE_GAP, 10)])) == 2


def test_the_held_out_plan_run_reads_the_same_file_with_other_ranks_and_sizes() -> None:
    for case in (ior(16, 4, 1 << 20, 64 << 10), tile(8, 8, 256, 8)):
        plan = plan_run(case)
        assert plan.file_size == case.file_size
        assert plan.ranks > case.ranks
        assert plan.extents(0)[0][1] < case.extents(0)[0][1]
        # The two runs read the same bytes of the file, in other requests.
        def covered(c: Case) -> list[tuple[int, int]]:
            return sorted(e for r in range(c.ranks) for e in c.extents(r))

        assert sum(n for _, n in covered(plan)) == sum(n for _, n in covered(case))
        assert covered(plan) != covered(case)
    with pytest.raises(ValueError, match="even"):
        plan_run(tile(2, 2, 7, 8))


def test_speedups_name_the_best_original_method_and_the_models_error() -> None:
    rows = []
    for storage, secs in (("model", (40.0, 6.0, 8.0, 3.0)), ("real", (2.0, 1.0, 4.0, 2.0))):
        row = {"name": "tile", "store": "hdd", "held_out": True, "ranks": 64, "pieces_per_rank": 1024,
               "storage": storage}  # fmt: skip
        row.update(zip(("original_s", "original_batched_s", "collective_s", "reorganized_s"), secs))
        ratios(row)
        rows.append(row)
    model, real = rows
    assert model["best_original"] == "original_batched" and model["speedup_vs_best"] == 2.0
    assert model["speedup"] == 40.0 / 3.0 and model["speedup_vs_collective"] == 8.0 / 3.0
    assert real["best_original"] == "original_batched" and real["speedup_vs_best"] == 0.5
    model_errors(rows)
    assert model["model_error"] == real["model_error"] == 4.0


def test_the_program_served_by_the_mpiio_layer_has_its_own_speedups() -> None:
    row = {"original_s": 40.0, "original_batched_s": 6.0, "collective_s": 8.0, "mpiio_s": 4.0}
    ratios(row)
    assert row["mpiio_speedup"] == 10.0 and row["mpiio_vs_collective"] == 2.0
    assert row["best_original"] == "original_batched" and row["mpiio_vs_best"] == 1.5
    assert "speedup" not in row  # no reorganized_s: the library read was not measured


def test_the_ordered_reorganized_read_has_its_own_speedups() -> None:
    row = {"original_s": 40.0, "original_batched_s": 6.0, "collective_s": 8.0, "reorganized_s": 5.0,
           "reorganized_ordered_s": 2.0}  # fmt: skip
    ratios(row)
    assert row["ordered_speedup"] == 20.0 and row["ordered_vs_collective"] == 4.0
    assert row["ordered_vs_best"] == 3.0 and row["speedup_vs_best"] == 1.2
    # The original read in the same order is one of the original methods.
    row["original_ordered_s"] = 3.0
    ratios(row)
    assert row["best_original"] == "original_ordered" and row["ordered_vs_best"] == 1.5


def test_sieved_reads_are_paced_in_their_order() -> None:
    data = bytes(range(256)) * 4096
    extents = [(5000, 100), (0, 10), (900_000, 50), (5100, 20)]
    calls: list[tuple[int, bool]] = []
    places: list[list[tuple[int, int, int]]] = []

    def schedule(p: list[tuple[int, int, int]]) -> Any:
        places.append(p)
        return lambda i, after: calls.append((i, after))

    got, reads = sieve.read(extents, lambda o, n: data[o : o + n], schedule=schedule)
    assert got == b"".join(data[o : o + n] for o, n in extents)
    assert places == [[(0, 0, 5120), (0, 900_000, 900_050)]] and reads == 2
    assert calls == [(0, False), (0, True), (1, False), (1, True)]


def test_bench_reorg_json_has_the_acceptance_keys_on_model_and_real_storage() -> None:
    pytest.importorskip("mpi4py")
    done = patio("bench", "reorg", "--case", "ior", "--store", "ssd", "--storage", "both",
                 "--run", "held-out", "--ranks", "2", "--segments", "2", "--block-kib", "128",
                 "--transfer-kib", "32", "--mode", "original", "--mode", "original_batched",
                 "--mode", "collective", "--mode", "reorganized", "--mode", "reorganized_ordered", "--mode", "original_ordered",
                 "--real-repeat", "1", "--json")  # fmt: skip
    rows = json.loads(done.stdout)["cases"]
    assert sorted(r["storage"] for r in rows) == ["model", "real"]
    for r in rows:
        for key in ("name", "store", "ranks", "original_s", "collective_s", "reorganized_s", "speedup",
                    "original_batched_s", "held_out", "speedup_vs_best", "model_error"):  # fmt: skip
            assert key in r, key
        assert r["held_out"] is True and r["plan_ranks"] == 4 and r["ranks"] == 2
        assert r["plan_store_targets"] == r["targets"] == 4  # planned on the measured model
        best = min(r["original_s"], r["original_batched_s"], r["original_ordered_s"], r["collective_s"])
        assert r["speedup_vs_best"] == pytest.approx(best / r["reorganized_s"])
        assert r["ordered_vs_best"] == pytest.approx(best / r["reorganized_ordered_s"])
        # Two 64 KiB pieces per segment and rank: one sieved read per segment.
        assert r["original_batched_physical_reads"] < r["original_physical_reads"]
    real = next(r for r in rows if r["storage"] == "real")
    assert real["resident_before_max"] < 0.05
    for args, word in ((("--storage", "tape"), "--storage"), (("--tile-elems", "7", "--case", "tile"), "even"),
                       (("--shift", "100"), "--shift")):  # fmt: skip
        bad = patio("bench", "reorg", *args, check=False)
        lines = bad.stderr.strip().splitlines()
        assert bad.returncode == 2 and len(lines) == 1 and word in lines[0], bad.stderr
        assert lines[0].startswith("patio bench reorg: error:")
