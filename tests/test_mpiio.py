"""Tests for ``libpatio_mpiio.so`` (``mpiio/``), patio's MPI-IO layer: unmodified MPI
programs (the IOR-like and mpi-tile-io-like readers of ``mpiio/examples``, PnetCDF's
``ncmpidump``) run under ``mpirun`` with the layer preloaded.

Reference models: the source file's bytes (what each rank must have read, through file
views, memory datatypes, individual pointers and short reads at the end of the file),
and the byte extents a file view gives (what each rank's MPIIO records must say).

What is checked: with nothing registered the programs' output is unchanged; traced, the
merged trace's MPIIO records equal the views' extents; a file reorganized from that
trace is served (statistics say so) with the same bytes; a stale source or a missing or
damaged container is read from the original with one warning per file per rank; a
process that is not an MPI program runs untouched with the layer loaded."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from patio import _mpirun
from test_mount_trace import patio

ROOT = Path(__file__).resolve().parents[1]
MPIIO = ROOT / "mpiio"
RANKS = 4
# ior_reader geometry: SEGMENTS segments of RANKS blocks of BLOCK bytes, read in TRANSFERs
BLOCK, TRANSFER, SEGMENTS = 16384, 2048, 3
# tile_reader geometry: TILES_X × TILES_Y tiles of TILE_H rows × TILE_W elements of ELEM bytes
TILES_X, TILES_Y, TILE_W, TILE_H, ELEM = 2, 2, 24, 16, 8
IOR_MODES = ["at", "at_all", "iread_at", "seek", "split", "nb", "view", "ordered", "shared"]
# shared-pointer modes: a block a call, then one block more after MPI_File_seek_shared
SHARED_MODES = ("ordered", "shared")
TILE_MODES = ["all", "indep", "rows"]


# ---- the programs and how they run ----------------------------------------------


@pytest.fixture(scope="module")
def layer() -> Path:
    """The layer and the example programs, built by ``make -C mpiio`` (a no-op when
    they are up to date)."""
    if shutil.which("mpicc") is None or _mpirun.command(RANKS) is None:
        pytest.skip("OpenMPI (mpicc, mpirun) is missing: run scripts/setup.sh")
    done = subprocess.run(["make", "-s", "-C", str(MPIIO)], capture_output=True, text=True,
                          timeout=600, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return MPIIO / "libpatio_mpiio.so"


def reorg_library(layer: Path) -> Path:
    """libpatio_reorg.so: ``$PATIO_REORG_LIB``, beside the layer, or in the
    installation's ``lib/patio``."""
    candidates = [
        Path(os.environ.get("PATIO_REORG_LIB", "/nonexistent")),
        layer.with_name("libpatio_reorg.so"),
        Path(sys.prefix) / "lib" / "patio" / "libpatio_reorg.so",
    ]
    for c in candidates:
        if c.is_file():
            return c
    pytest.skip("libpatio_reorg.so is not built (cargo build --release -p patio-reorg; "
                "set PATIO_REORG_LIB)")  # fmt: skip


def mpirun(
    program: str,
    args: list[str],
    preload: list[Path] | None = None,
    env: dict[str, str] | None = None,
    ranks: int = RANKS,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """``mpirun -n RANKS PROGRAM ARGS`` with ``LD_PRELOAD`` (for mpirun itself and every
    rank) and ``env`` exported to the ranks."""
    cmd = _mpirun.command(ranks)
    assert cmd is not None
    full = _mpirun.environment()
    full.pop("LD_PRELOAD", None)
    extra = dict(env or {})
    if preload:
        extra["LD_PRELOAD"] = " ".join(str(p) for p in preload)
    full.update(extra)
    for name in extra:
        cmd += ["-x", name]
    exe = str(MPIIO / "examples" / program) if "/" not in program else program
    done = subprocess.run([*cmd, exe, *args], capture_output=True, text=True, env=full,
                          timeout=300, check=False)  # fmt: skip
    if check:
        assert done.returncode == 0, done.stderr
    return done


def warnings_of(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.startswith("patio: MPI-IO:")]


# ---- reference models -------------------------------------------------------------


def make_ior(dir: Path) -> tuple[Path, bytes]:
    data = os.urandom(SEGMENTS * RANKS * BLOCK)
    src = dir / "ior.bin"
    src.write_bytes(data)
    return src, data


def make_tiles(dir: Path) -> tuple[Path, bytes]:
    data = os.urandom(TILES_X * TILES_Y * TILE_W * TILE_H * ELEM)
    src = dir / "tiles.bin"
    src.write_bytes(data)
    return src, data


def ior_args(src: Path, mode: str, dump: Path) -> list[str]:
    return [str(src), "--block", str(BLOCK), "--transfer", str(TRANSFER), "--segments",
            str(SEGMENTS), "--mode", mode, "--dump", str(dump)]  # fmt: skip


def tile_args(src: Path, mode: str, dump: Path, geometry: tuple[int, ...] | None = None) -> list[str]:
    tx, ty, tw, th, elem = geometry or (TILES_X, TILES_Y, TILE_W, TILE_H, ELEM)
    return [str(src), "--tiles-x", str(tx), "--tiles-y", str(ty), "--tile-w", str(tw),
            "--tile-h", str(th), "--elem", str(elem), "--mode", mode, "--dump", str(dump)]  # fmt: skip


def ior_extents(rank: int) -> list[tuple[int, int]]:
    """Rank ``rank``'s blocks: (offset, length)."""
    return [((s * RANKS + rank) * BLOCK, BLOCK) for s in range(SEGMENTS)]


def ior_model(data: bytes, rank: int, mode: str) -> bytes:
    """The bytes ``ior_reader --mode MODE`` dumps for ``rank``."""
    blocks = [data[o : o + n] for o, n in ior_extents(rank)]
    if mode == "seek":  # and a short read of the last TRANSFER/2 bytes
        return b"".join(blocks) + data[-(TRANSFER // 2) :]
    if mode in SHARED_MODES:  # the last segment again (ordered), segment 0 again (shared)
        return b"".join(blocks) + blocks[-1 if mode == "ordered" else 0]
    if mode != "view":
        return b"".join(blocks)
    whole = b"".join(blocks)
    pieces = [whole[i : i + TRANSFER] for i in range(0, len(whole), TRANSFER)]
    swapped = b"".join(pieces[i + 1] + pieces[i] for i in range(0, len(pieces), 2))
    return swapped + b"".join(reversed(pieces))


def tile_rows(rank: int, geometry: tuple[int, ...], ranks: int = RANKS) -> list[tuple[int, int]]:
    """The file extents of the tiles ``rank`` reads (one per tile row), in order."""
    tx, ty, tw, th, elem = geometry
    out = []
    for t in range(rank, tx * ty, ranks):
        row0, col0 = (t // tx) * th, (t % tx) * tw
        out += [(((row0 + i) * tx * tw + col0) * elem, tw * elem) for i in range(th)]
    return out


def tile_model(data: bytes, rank: int, geometry: tuple[int, ...]) -> bytes:
    return b"".join(data[o : o + n] for o, n in tile_rows(rank, geometry))


def dumps(dir: Path, ranks: int = RANKS) -> list[bytes]:
    return [(dir / f"rank{r}.bin").read_bytes() for r in range(ranks)]


def stats(dir: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text()) for p in sorted(dir.glob("mpiio.*.json"))]


# ---- (a) nothing registered: pass-through ----------------------------------------------


@pytest.mark.parametrize("program,mode", [("ior_reader", m) for m in IOR_MODES]
                         + [("tile_reader", m) for m in TILE_MODES])  # fmt: skip
def test_unregistered_files_pass_through_unchanged(
    tmp_path: Path, layer: Path, program: str, mode: str
) -> None:
    if program == "ior_reader":
        src, data = make_ior(tmp_path)
        args = lambda d: ior_args(src, mode, d)
        model = [ior_model(data, r, mode) for r in range(RANKS)]
    else:
        src, data = make_tiles(tmp_path)
        args = lambda d: tile_args(src, mode, d)
        geometry = (TILES_X, TILES_Y, TILE_W, TILE_H, ELEM)
        model = [tile_model(data, r, geometry) for r in range(RANKS)]
    plain, layered, counted = (tmp_path / n for n in ("plain", "layered", "counted"))
    for d in (plain, layered, counted):
        d.mkdir()
    without = mpirun(program, args(plain))
    with_layer = mpirun(program, args(layered), [layer],
                        {"PATIO_REORG_LIB": str(tmp_path / "absent.so")})  # fmt: skip
    assert with_layer.stdout == without.stdout and without.stdout.count("\n") == RANKS
    assert dumps(plain) == model and dumps(layered) == model
    # the missing libpatio_reorg.so: one warning per rank, nothing else
    assert len(warnings_of(with_layer)) == RANKS
    assert all("absent.so" in w for w in warnings_of(with_layer))
    # counted (PATIO_MPIIO_STATS): every call passed through, none served
    reorg = {"PATIO_REORG_LIB": str(layer.with_name("absent.so")),
             "PATIO_MPIIO_STATS": str(counted)}  # fmt: skip
    mpirun(program, args(counted), [layer], reorg)
    records = stats(counted)
    assert sorted(r["rank"] for r in records) == list(range(RANKS))
    assert all(r["served_calls"] == 0 and r["passed_calls"] > 0 for r in records)
    assert {r["file"] for r in records} == {str(src.resolve())}


def test_the_library_does_not_depend_on_mpi(layer: Path) -> None:
    needed = subprocess.run(["readelf", "-d", str(layer)], capture_output=True, text=True,
                            check=True).stdout  # fmt: skip
    assert "NEEDED" in needed and "libmpi" not in needed
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(layer)],
                               capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert not [s for s in undefined.split() if s.startswith(("MPI_", "PMPI_", "ompi_"))]


# ---- (e) processes that are not MPI programs ------------------------------------------


def test_processes_without_mpi_run_untouched(tmp_path: Path, layer: Path) -> None:
    env = dict(os.environ, LD_PRELOAD=str(layer), PATIO_MPIIO_STATS=str(tmp_path))
    for cmd in (["/bin/true"], [sys.executable, "-c", "print(6 * 7)"], ["sh", "-c", "echo ok"]):
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60,
                              check=False)  # fmt: skip
        assert done.returncode == 0 and done.stderr == "", (cmd, done.stderr)
    assert subprocess.run([sys.executable, "-c", "print(6 * 7)"], capture_output=True,
                          text=True, env=env, check=True).stdout == "42\n"  # fmt: skip
    # mpirun itself with the layer preloaded, starting programs that are not MPI programs
    done = mpirun("/bin/echo", ["hello"], [layer], ranks=2)
    assert done.stdout.split() == ["hello", "hello"] and warnings_of(done) == []
    assert list(tmp_path.iterdir()) == []



def test_another_mpi_gets_one_warning_and_every_call_untouched(layer: Path) -> None:
    """``foreign_mpi`` brings its own PMPI functions and reports another MPI library: the
    layer passes its calls through with their arguments and warns once."""
    program = str(MPIIO / "examples" / "foreign_mpi")
    alone = subprocess.run([program], capture_output=True, text=True, timeout=60, check=False)
    assert alone.returncode == 1 and "not preloaded" in alone.stderr
    done = subprocess.run([program], capture_output=True, text=True, timeout=60, check=False,
                          env=dict(os.environ, LD_PRELOAD=str(layer)))  # fmt: skip
    assert done.returncode == 0 and done.stdout == "passed through\n", done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("patio: MPI-IO: this process runs Another MPI")
    assert "passes through untouched" in lines[0]

# ---- (b) tracing -------------------------------------------------------------------


def traced(tmp_path: Path, layer: Path, program: str, args: list[str]) -> list[dict[str, str]]:
    """The merged trace's MPIIO rows of ``patio trace -- mpirun … PROGRAM ARGS``."""
    out = tmp_path / "captures"
    cmd = _mpirun.command(RANKS)
    assert cmd is not None
    env = _mpirun.environment()
    env["PATIO_REORG_LIB"] = str(layer.with_name("absent.so"))
    done = subprocess.run(
        [patio_bin(), "trace", "-o", str(out), "--", *cmd, "-x", "PATIO_REORG_LIB",
         str(MPIIO / "examples" / program), *args],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    merged = tmp_path / "run.csv"
    patio("trace", "merge", str(out), "-o", str(merged))
    with merged.open() as f:
        return [row for row in csv.DictReader(f) if row["module"] == "MPIIO"]


def patio_bin() -> str:
    from patio._binary import patio_binary

    return patio_binary()


def extents_by_rank(
    rows: list[dict[str, str]], path: Path, op: str = "read"
) -> dict[int, list[tuple[int, int]]]:
    out: dict[int, list[tuple[int, int]]] = {}
    for row in rows:
        assert row["file"] == str(path.resolve()), row
        if row["op"] != op:
            continue
        out.setdefault(int(row["rank"]), []).append((int(row["offset"]), int(row["length"])))
    return {r: sorted(v) for r, v in out.items()}


@pytest.mark.parametrize("mode", IOR_MODES)
def test_ior_reads_are_recorded_as_the_views_extents(tmp_path: Path, layer: Path, mode: str) -> None:
    src, _ = make_ior(tmp_path)
    dump = tmp_path / "dump"
    dump.mkdir()
    got = extents_by_rank(traced(tmp_path, layer, "ior_reader", ior_args(src, mode, dump)), src)
    size = SEGMENTS * RANKS * BLOCK
    for rank in range(RANKS):
        transfers = [(o + i, TRANSFER) for o, n in ior_extents(rank) for i in range(0, n, TRANSFER)]
        if mode == "view":  # read_all, then iread_at_all, of the same view
            want = ior_extents(rank) * 2
        elif mode in SHARED_MODES:  # a block a call, and one block again
            blocks = ior_extents(rank)
            want = blocks + [blocks[-1 if mode == "ordered" else 0]]
        elif mode == "seek":  # each block's first transfer re-read; a short read at the end
            again = [(o, TRANSFER) for o, _ in ior_extents(rank)]
            want = transfers + again + [(size - TRANSFER // 2, TRANSFER // 2)]
        else:
            want = transfers
        assert got[rank] == sorted(want), (rank, mode)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    tx=st.integers(1, 3), ty=st.integers(1, 3), tw=st.integers(1, 40), th=st.integers(1, 12),
    elem=st.sampled_from([1, 4, 8, 12]), mode=st.sampled_from(TILE_MODES),
)  # fmt: skip
def test_tile_reads_are_recorded_as_the_subarray_views_extents(
    tmp_path_factory: pytest.TempPathFactory, layer: Path, tx: int, ty: int, tw: int, th: int,
    elem: int, mode: str,
) -> None:  # fmt: skip
    tmp = tmp_path_factory.mktemp("tiles")
    geometry = (tx, ty, tw, th, elem)
    src = tmp / "tiles.bin"
    data = os.urandom(tx * ty * tw * th * elem)
    src.write_bytes(data)
    dump = tmp / "dump"
    dump.mkdir()
    got = extents_by_rank(traced(tmp, layer, "tile_reader", tile_args(src, mode, dump, geometry)), src)
    for rank in range(RANKS):
        rows = tile_rows(rank, geometry)
        if mode != "rows":  # one call per tile: adjacent rows of a call are one extent
            rows = merge_adjacent_per_tile(rows, th)
        assert got.get(rank, []) == sorted(rows), (rank, geometry, mode)
        assert (dump / f"rank{rank}.bin").read_bytes() == tile_model(data, rank, geometry)


def merge_adjacent_per_tile(rows: list[tuple[int, int]], th: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for t in range(0, len(rows), th):
        tile: list[tuple[int, int]] = []
        for o, n in rows[t : t + th]:
            if tile and tile[-1][0] + tile[-1][1] == o:
                tile[-1] = (tile[-1][0], tile[-1][1] + n)
            else:
                tile.append((o, n))
        out += tile
    return out


# ---- (c) registered files are served; (d) stale, missing, damaged containers ------------


def apply(src: Path, trace: Path, out: Path) -> None:
    """``patio reorg apply``: the container, registered for ``src``."""
    patio("reorg", "apply", str(trace), "--file", str(src), "-o", str(out))


def served_run(
    layer: Path, program: str, args: list[str], counted: Path, ordered: bool = False
) -> subprocess.CompletedProcess[str]:
    counted.mkdir()
    env = {"PATIO_REORG_LIB": str(reorg_library(layer)), "PATIO_MPIIO_STATS": str(counted)}
    if ordered:
        env["PATIO_MPIIO_ORDER"] = "1"
    return mpirun(program, args, [layer], env)


def trace_and_apply(tmp_path: Path, layer: Path, program: str) -> tuple[Path, bytes, Path]:
    """The source, its bytes and its registered container, reorganized from a traced run
    of ``program`` (collective reads through file views)."""
    reorg_library(layer)
    make = make_ior if program == "ior_reader" else make_tiles
    src, data = make(tmp_path)
    dump = tmp_path / "traced"
    dump.mkdir()
    args = ior_args(src, "at_all", dump) if program == "ior_reader" else tile_args(src, "all", dump)
    rows = traced(tmp_path, layer, program, args)
    assert rows, "no MPIIO records"
    out = tmp_path / f"{src.name}.pc"
    apply(src, tmp_path / "run.csv", out)
    return src, data, out


#: Modes of the example readers whose served reads are collective calls (they take turns
#: with PATIO_MPIIO_ORDER=1).
COLLECTIVE_MODES = {"at_all", "split", "nb", "view", "ordered", "all"}


@pytest.mark.parametrize("ordered", [False, True], ids=["at-once", "turns"])
@pytest.mark.parametrize("program", ["ior_reader", "tile_reader"])
def test_registered_files_are_served_with_the_same_bytes(
    tmp_path: Path, layer: Path, program: str, ordered: bool
) -> None:
    """Every way the example readers read, served from the container, gives the
    original's bytes; with PATIO_MPIIO_ORDER=1 the collective reads take turns."""
    src, data, _ = trace_and_apply(tmp_path, layer, program)
    geometry = (TILES_X, TILES_Y, TILE_W, TILE_H, ELEM)
    for mode in IOR_MODES if program == "ior_reader" else TILE_MODES:
        dump, counted = tmp_path / f"d-{mode}", tmp_path / f"s-{mode}"
        dump.mkdir()
        args = ior_args(src, mode, dump) if program == "ior_reader" else tile_args(src, mode, dump)
        done = served_run(layer, program, args, counted, ordered)
        assert warnings_of(done) == [], done.stderr
        for rank, got in enumerate(dumps(dump)):
            want = ior_model(data, rank, mode) if program == "ior_reader" else tile_model(data, rank, geometry)
            assert got == want, (mode, rank)
        records = stats(counted)
        assert len(records) == RANKS
        for r in records:
            rank = int(r["rank"])
            if mode == "shared":  # read_shared goes to MPI until the ordered read of the
                # last segment hands the layer the shared pointer (where MPI's reached):
                # that read and the one after seek_shared are served
                assert r["passed_calls"] == SEGMENTS - 1 and r["served_calls"] == 2, (mode, r)
                assert r["served_bytes"] == 2 * BLOCK, (mode, r)
                continue
            assert r["served_calls"] > 0 and r["passed_calls"] == 0, (mode, r)
            if ordered and mode == "nb":  # iread (independent), iread_all, iread_at_all
                assert 0 < r["turn_calls"] < r["served_calls"], (mode, r)
            else:
                turns = r["served_calls"] if ordered and mode in COLLECTIVE_MODES else 0
                assert r["turn_calls"] == turns, (mode, r)
            if program == "ior_reader":  # seek re-reads each block's first transfer
                read = len(ior_model(data, rank, mode)) + (SEGMENTS * TRANSFER if mode == "seek" else 0)
            else:
                read = len(tile_model(data, rank, geometry))
            assert r["served_bytes"] == read, (mode, r)
            assert 0 < r["physical_reads"] <= r["served_calls"] * 4, (mode, r)


STALE = ("changed", "stale", "modif", "mtime", "size")


def original_read_with_warnings(
    layer: Path, src: Path, data: bytes, dir: Path, words: tuple[str, ...]
) -> None:
    dump = dir / "dump"
    dump.mkdir(parents=True)
    done = served_run(layer, "ior_reader", ior_args(src, "at_all", dump), dir / "counted")
    lines = warnings_of(done)
    assert len(lines) == RANKS, done.stderr
    for line in lines:
        assert str(src) in line and line.endswith("reading the original"), line
        assert any(w in line for w in words), line
    assert dumps(dump) == [ior_model(data, r, "at_all") for r in range(RANKS)]
    assert all(r["served_calls"] == 0 for r in stats(dir / "counted"))


def test_stale_missing_or_damaged_containers_read_the_original(tmp_path: Path, layer: Path) -> None:
    src, data, _ = trace_and_apply(tmp_path, layer, "ior_reader")
    # the source rewritten with the same bytes: a new version, the container is stale
    st = src.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    original_read_with_warnings(layer, src, data, tmp_path / "stale", STALE)
    # registered again, then the container deleted
    second = tmp_path / "second.pc"
    apply(src, tmp_path / "run.csv", second)
    shutil.rmtree(second)
    original_read_with_warnings(layer, src, data, tmp_path / "missing", ("missing", "not found", "No such", "cannot"))
    # a damaged index: refused at open; a truncated data log: found at the first read
    for case, damage in (("index", "index."), ("data", "data.")):
        container = tmp_path / f"{case}.pc"
        apply(src, tmp_path / "run.csv", container)
        (part,) = [p for p in container.iterdir() if p.name.startswith(damage)]
        if case == "index":
            with part.open("r+b") as f:
                f.seek(8)
                f.write(b"garbage!garbage!")
        else:
            os.truncate(part, 1000)
        original_read_with_warnings(layer, src, data, tmp_path / case, ("damaged", "corrupt"))


# ---- (f) PnetCDF's ncmpidump: a real client ---------------------------------------------

CDL = """netcdf x {{
dimensions:
	y = {ny} ;
	x = {nx} ;
	z = {nz} ;
	t = UNLIMITED ;
variables:
	int a(y, x) ;
	double b(t, y) ;
	float c(x) ;
	double d(t, z) ;
data:
 a = {a} ;
 b = {b} ;
 c = {c} ;
}}
"""




def test_pnetcdf_dump_is_the_same_when_served(tmp_path: Path, layer: Path) -> None:
    if not (shutil.which("ncmpigen") and shutil.which("ncmpidump")):
        pytest.skip("PnetCDF's tools are missing (pnetcdf-bin: run scripts/setup.sh)")
    reorg = reorg_library(layer)
    # record variables b and d (fill values, 256 KiB a record) interleave record by
    # record: reading b is strided
    ny, nx, nz, nt = 64, 48, 32768, 40
    cdl = tmp_path / "x.cdl"
    cdl.write_text(CDL.format(
        ny=ny, nx=nx, nz=nz,
        a=", ".join(str(i * 7 % 1000) for i in range(ny * nx)),
        b=", ".join(f"{i * 0.25}" for i in range(nt * ny)),
        c=", ".join(str(i + 0.5) for i in range(nx)),
    ))  # fmt: skip
    nc = tmp_path / "f.nc"
    subprocess.run(["ncmpigen", "-v2", "-o", str(nc), str(cdl)], check=True, timeout=60)
    cmd = _mpirun.command(2)
    assert cmd is not None
    env = _mpirun.environment()

    def ncmpidump(outdir: Path, extra: dict[str, str], preload: bool) -> subprocess.CompletedProcess[str]:
        full = dict(env, **extra)
        if preload:
            full["LD_PRELOAD"] = str(layer)
        exports = [a for name in extra for a in ("-x", name)] + (["-x", "LD_PRELOAD"] if preload else [])
        done = subprocess.run([*cmd, "--output-filename", str(outdir), *exports, "ncmpidump", str(nc)],
                              capture_output=True, text=True, env=full, timeout=300, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done

    ncmpidump(tmp_path / "plain", {}, False)
    # traced (patio trace under mpirun: the layer records MPIIO requests)
    out = tmp_path / "captures"
    done = subprocess.run(
        [patio_bin(), "trace", "-o", str(out), "--", *cmd, "ncmpidump", str(nc)],
        capture_output=True, text=True, env=dict(env, PATIO_REORG_LIB=str(reorg)), timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    patio("trace", "merge", str(out), "-o", str(tmp_path / "run.csv"))
    with (tmp_path / "run.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["module"] == "MPIIO"]
    # every rank reads the whole file (its header read takes it all), so the planner sees
    # nothing to gain from the full trace: the container is planned from the strided
    # reads of variable b (one 8 × ny-byte row per record), and serves every byte
    b_rows = [r for r in rows if int(r["length"]) == 8 * ny]
    assert len(b_rows) == 2 * nt and len({int(r["offset"]) for r in b_rows}) == nt
    with (tmp_path / "b.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(b_rows)
    apply(nc, tmp_path / "b.csv", tmp_path / "f.nc.pc")
    counted = tmp_path / "counted"
    counted.mkdir()
    served = ncmpidump(tmp_path / "served", {"PATIO_REORG_LIB": str(reorg),
                                             "PATIO_MPIIO_STATS": str(counted)}, True)  # fmt: skip
    assert warnings_of(served) == []
    for rank in (0, 1):
        plain = (tmp_path / "plain" / "1" / f"rank.{rank}" / "stdout").read_text()
        assert plain.count("\n") > 10
        assert (tmp_path / "served" / "1" / f"rank.{rank}" / "stdout").read_text() == plain
    assert sum(int(r["served_calls"]) for r in stats(counted)) > 0


# ---- file views of every datatype kind -------------------------------------------------

TYPE_CASES = ["contiguous", "hvector", "hindexed", "indexed_block", "hindexed_block",
              "resized", "dup", "subarray_f", "struct", "nested", "darray", "darray_2d",
              "darray_f"]  # fmt: skip


def strided_trace(src: Path, path: Path, piece: int = 4096) -> Path:
    """A trace in which each rank read every RANKS-th piece of ``src``: the plan of a
    container that stores the file in another order than its own."""
    size = src.stat().st_size
    rows = ["module,file,rank,op,offset,length,start,end"]
    for rank in range(RANKS):
        for k, off in enumerate(range(rank * piece, size - piece + 1, RANKS * piece)):
            rows.append(f"MPIIO,{src.resolve()},{rank},read,{off},{piece},{k},{k + 0.5}")
    path.write_text("\n".join(rows) + "\n")
    return path


def test_views_of_every_datatype_kind_are_served_with_the_original_bytes(
    tmp_path: Path, layer: Path
) -> None:
    """The reference is MPI itself reading the original; served reads must give the same
    bytes (views flattened, pointers kept, the last read short at the end of the file)."""
    reorg_library(layer)
    src = tmp_path / "types.bin"
    src.write_bytes(os.urandom(64 * 1024 + 100))
    apply(src, strided_trace(src, tmp_path / "strided.csv"), tmp_path / "types.pc")
    for case in TYPE_CASES:
        plain, served, counted = (tmp_path / f"{n}-{case}" for n in ("plain", "served", "counted"))
        plain.mkdir()
        served.mkdir()
        want = mpirun("types_reader", [str(src), "--case", case, "--dump", str(plain)])
        got = served_run(layer, "types_reader", [str(src), "--case", case, "--dump", str(served)], counted)
        assert got.stdout == want.stdout, case
        assert dumps(served) == dumps(plain), case
        calls = [int(r["served_calls"]) for r in stats(counted)]
        assert warnings_of(got) == [] and all(c >= 2 for c in calls), (case, got.stderr)


@pytest.mark.parametrize("case", TYPE_CASES)
def test_records_of_views_hold_exactly_the_bytes_read(tmp_path: Path, layer: Path, case: str) -> None:
    """The MPIIO records of a rank, read from the file in the order recorded, are the
    bytes the rank received."""
    src = tmp_path / "types.bin"
    data = os.urandom(64 * 1024 + 100)
    src.write_bytes(data)
    dump = tmp_path / "dump"
    dump.mkdir()
    rows = traced(tmp_path, layer, "types_reader", [str(src), "--case", case, "--dump", str(dump)])
    for rank, got in enumerate(dumps(dump)):
        mine = [r for r in rows if int(r["rank"]) == rank]
        mine.sort(key=lambda r: float(r["start"]))  # stable: a call's records keep their order
        read = b"".join(data[int(r["offset"]) : int(r["offset"]) + int(r["length"])] for r in mine)
        assert read == (dump / f"rank{rank}.data").read_bytes(), (case, rank)


# ---- writes: passed through, traced, and the container made stale -------------------------


def written(size: int) -> bytes:
    """The file ``ior_reader --mode write`` leaves (every block written)."""
    return bytes((o * 7 + o // 4096) & 0xFF for o in range(size))


def test_writes_pass_through_are_traced_and_make_the_container_stale(
    tmp_path: Path, layer: Path
) -> None:
    src, data, _ = trace_and_apply(tmp_path, layer, "ior_reader")
    size = len(data)
    # the writer opens the registered file read-write and writes before it reads: its
    # writes go to the original, traced, and every read after the sync reads the original
    dump = tmp_path / "wdump"
    dump.mkdir()
    (tmp_path / "w").mkdir()
    rows = traced(tmp_path / "w", layer, "ior_reader", ior_args(src, "write", dump))
    model = written(size)
    assert src.read_bytes() == model
    wrote = extents_by_rank(rows, src, op="write")
    back = extents_by_rank(rows, src, op="read")
    for rank in range(RANKS):
        assert wrote[rank] == ior_extents(rank)
        assert back[rank] == ior_extents((rank + 1) % RANKS)
        want = b"".join(model[o : o + n] for o, n in ior_extents((rank + 1) % RANKS))
        assert (dump / f"rank{rank}.bin").read_bytes() == want
    # the next reader: the container is stale, the new bytes come from the original
    original_read_with_warnings(layer, src, model, tmp_path / "after", STALE)


def test_a_file_opened_read_write_is_served_until_mpi_says_a_write_must_be_seen(
    tmp_path: Path, layer: Path
) -> None:
    """``ior_reader --mode rw`` on a registered file opened read-write: its first reads are
    served; each rank sees its own writes at once (read back from the original); after
    sync-barrier-sync every rank sees every rank's writes, through the explicit, collective
    and ordered (shared-pointer) reads; nothing written is lost, and the next opener finds
    the container stale."""
    src, data, _ = trace_and_apply(tmp_path, layer, "ior_reader")
    model = written(len(data))
    dump, counted = tmp_path / "rw", tmp_path / "counted"
    dump.mkdir()
    done = served_run(layer, "ior_reader", ior_args(src, "rw", dump), counted)
    assert warnings_of(done) == [], done.stderr
    assert src.read_bytes() == model
    for rank in range(RANKS):
        mine = ior_extents(rank)
        nxt = ior_extents((rank + 1) % RANKS)
        want = (
            b"".join(data[o : o + n] for o, n in mine)
            + b"".join(model[o : o + n] for o, n in mine)
            + b"".join(model[o : o + n] for o, n in nxt)
            + model[rank * BLOCK : (rank + 1) * BLOCK]
        )
        assert (dump / f"rank{rank}.bin").read_bytes() == want, rank
    for r in stats(counted):  # the first reads from the container, the rest from the original
        assert r["served_calls"] == SEGMENTS and r["served_bytes"] == SEGMENTS * BLOCK, r
        assert r["passed_calls"] == 3 * SEGMENTS + 1, r
    original_read_with_warnings(layer, src, model, tmp_path / "after", STALE)


def test_writes_to_a_served_file_can_be_refused(tmp_path: Path, layer: Path) -> None:
    """``PATIO_MPIIO_WRITES=refuse``: opening a file with a current registered container
    for writing fails (MPI_ERR_READ_ONLY) with one warning per rank, and the file and
    its container stay as they were (the next reader is still served)."""
    src, data, _ = trace_and_apply(tmp_path, layer, "ior_reader")
    dump = tmp_path / "wdump"
    dump.mkdir()
    env = {"PATIO_REORG_LIB": str(reorg_library(layer)), "PATIO_MPIIO_WRITES": "refuse"}
    done = mpirun("ior_reader", ior_args(src, "write", dump), [layer], env, check=False)
    assert done.returncode != 0
    refusals = [w for w in warnings_of(done) if "refused (PATIO_MPIIO_WRITES=refuse)" in w]
    assert 1 <= len(refusals) <= RANKS and str(src) in refusals[0], done.stderr
    assert src.read_bytes() == data
    dump = tmp_path / "rdump"
    dump.mkdir()
    served = served_run(layer, "ior_reader", ior_args(src, "at", dump), tmp_path / "counted")
    assert warnings_of(served) == [], served.stderr
    assert all(r["served_calls"] > 0 for r in stats(tmp_path / "counted"))



# ---- prefetching -------------------------------------------------------------------


def prefetch_library(layer: Path) -> Path:
    """libpatio_prefetch.so: beside the reorganized-file library it is built with."""
    lib = reorg_library(layer).with_name("libpatio_prefetch.so")
    if not lib.is_file():
        pytest.skip("libpatio_prefetch.so is not built (cargo build --release -p patio-prefetch)")
    return lib


@pytest.mark.parametrize("served", [True, False], ids=["reorganized", "original"])
def test_independent_reads_are_prefetched_by_their_pattern(
    tmp_path: Path, layer: Path, served: bool
) -> None:
    """Per-row ``read_at`` (tile_reader --mode rows) and per-transfer ``read_at`` /
    ``iread_at`` (ior_reader) with ``PATIO_MPIIO_PREFETCH=pattern``: the bytes of the
    source whatever was read ahead; a served file reads the next rows with the current
    one (fewer physical reads than calls), an original file through the prefetch
    engine (read-ahead bytes used)."""
    geometry = (TILES_X, TILES_Y, 512, 64, ELEM)  # 64 rows of 4 KiB per tile: a pattern to learn
    tx, ty, tw, th, elem = geometry
    data = os.urandom(tx * ty * tw * th * elem)
    src = tmp_path / "tiles.bin"
    src.write_bytes(data)
    if served:
        dump = tmp_path / "traced"
        dump.mkdir()
        assert traced(tmp_path, layer, "tile_reader", tile_args(src, "all", dump, geometry))
        apply(src, tmp_path / "run.csv", tmp_path / "tiles.bin.pc")
    env = {"PATIO_REORG_LIB": str(reorg_library(layer)), "PATIO_PREFETCH_LIB": str(prefetch_library(layer)),
           "PATIO_MPIIO_PREFETCH": "pattern"}  # fmt: skip
    for mode in ("rows", "indep"):
        dump, counted = tmp_path / f"d-{mode}", tmp_path / f"s-{mode}"
        dump.mkdir()
        counted.mkdir()
        done = mpirun("tile_reader", tile_args(src, mode, dump, geometry), [layer],
                      dict(env, PATIO_MPIIO_STATS=str(counted)))  # fmt: skip
        assert warnings_of(done) == [], done.stderr
        for rank, got in enumerate(dumps(dump)):
            assert got == tile_model(data, rank, geometry), (mode, rank)
        records = stats(counted)
        assert len(records) == RANKS
        if mode == "indep" and not served:
            # the individual file pointer is MPI's: passed through, not prefetched
            assert all(r["served_calls"] == 0 for r in records), records
            continue
        for r in records:
            assert r["served_calls"] >= (th if mode == "rows" else 1), (mode, r)
            if mode == "rows":
                assert r["prefetched_bytes"] > 0 and r["prefetch_used_bytes"] > 0, r
            if served and mode == "rows":
                assert r["physical_reads"] < r["served_calls"], r


def test_patio_run_serves_an_unmodified_program(tmp_path: Path, layer: Path) -> None:
    """``patio run --mpiio --stats DIR -- mpirun …``: the command-line path a user takes
    (the layer, the libraries it loads and the statistics directory found by patio)."""
    src, data, _ = trace_and_apply(tmp_path, layer, "tile_reader")
    dump, counted = tmp_path / "dump", tmp_path / "counted"
    dump.mkdir()
    cmd = _mpirun.command(RANKS)
    assert cmd is not None
    env = _mpirun.environment()
    for var in ("LD_PRELOAD", "PATIO_REORG_LIB", "PATIO_PREFETCH_LIB"):
        env.pop(var, None)
    done = subprocess.run(
        [patio_bin(), "run", "--mpiio", "--prefetch", "pattern", "--stats", str(counted), "--",
         *cmd, str(MPIIO / "examples" / "tile_reader"), *tile_args(src, "rows", dump)],
        capture_output=True, text=True, env=env, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert warnings_of(done) == [], done.stderr
    geometry = (TILES_X, TILES_Y, TILE_W, TILE_H, ELEM)
    for rank, got in enumerate(dumps(dump)):
        assert got == tile_model(data, rank, geometry)
    assert all(r["served_calls"] > 0 for r in stats(counted))
    printed = subprocess.run([patio_bin(), "run", "--print-library"], capture_output=True,
                             text=True, check=True)  # fmt: skip
    assert printed.stdout.strip().endswith("libpatio_mpiio.so")
    bad = subprocess.run([patio_bin(), "run", "--mpiio", "--prefetch", "psychic", "--", "true"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert "unknown policy" in bad.stderr


# ---- Fortran programs: Open MPI's Fortran bindings call PMPI_* directly ----------------

FORTRAN_READERS = ["fortran_reader", "fortran08_reader"]  # `use mpi`, `use mpi_f08`


def fortran_reader(name: str) -> str:
    exe = MPIIO / "examples" / name
    if not exe.is_file():
        pytest.skip("no Fortran compiler (gfortran): run scripts/setup.sh")
    return name


def fortran_model(data: bytes, rank: int) -> bytes:
    """What ``fortran_reader`` dumps for ``rank``: its blocks, read five ways."""
    return b"".join(data[o : o + n] for o, n in ior_extents(rank)) * 5


@pytest.mark.parametrize("program", FORTRAN_READERS)
def test_fortran_programs_are_traced_and_served(tmp_path: Path, layer: Path, program: str) -> None:
    """A Fortran program's MPI-IO goes through the layer as a C program's does: its
    records are its views' extents, and with a registered container its reads (explicit,
    collective through a view, individual pointer, nonblocking, ordered) are served with
    the original's bytes."""
    fortran_reader(program)
    src, data = make_ior(tmp_path)

    def args(dump: Path) -> list[str]:
        return [str(src), str(BLOCK), str(SEGMENTS), str(dump)]

    dump = tmp_path / "traced"
    dump.mkdir()
    rows = traced(tmp_path, layer, program, args(dump))
    got = extents_by_rank(rows, src)
    for rank in range(RANKS):
        assert (dump / f"rank{rank}.bin").read_bytes() == fortran_model(data, rank)
        assert got[rank] == sorted(ior_extents(rank) * 5), rank
    apply(src, tmp_path / "run.csv", tmp_path / "ior.pc")
    served, counted = tmp_path / "served", tmp_path / "counted"
    served.mkdir()
    done = served_run(layer, program, args(served), counted)
    assert warnings_of(done) == [], done.stderr
    for rank in range(RANKS):
        assert (served / f"rank{rank}.bin").read_bytes() == fortran_model(data, rank)
    for r in stats(counted):
        assert r["passed_calls"] == 0 and r["served_bytes"] == 5 * SEGMENTS * BLOCK, r
