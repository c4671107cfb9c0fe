"""``patio trace``: programs run under the LD_PRELOAD tracer, compared with what they did.

Each program's requests are known (C programs under ``tests/programs`` print their own
plan; the others are driven with known parameters: a Python script, ``dd``, fio, an
mpi4py MPI-IO program). The per-process raw captures are read here with an
independent reader of the documented format (docs/FORMATS.md, "Raw capture"), then
merged with ``patio trace merge`` and analysed with ``patio analyze --json``, which must
report the pattern the program used. Also: threads, fork and exec, dup2, descriptors
opened before the tracer started, errno and signal dispositions unchanged, fatal
signals, mid-run flushes and damaged captures.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from patio._binary import patio_binary

PROGRAMS = Path(__file__).resolve().parent / "programs"
MPIRUN = ["mpirun", "--oversubscribe", "--allow-run-as-root", "-n", "4"]


# ---- an independent reader of the raw capture format ------------------------------


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


@dataclass
class Record:
    op: str
    layer: str
    call: int
    path: str
    offset: int
    length: int
    start: int
    end: int
    tid: int


@dataclass
class Capture:
    rank: int
    pid: int
    ppid: int
    host: str
    exe: str
    records: list[Record]


def read_capture(path: Path) -> Capture:
    data = path.read_bytes()
    assert data[:8] == b"PRAW\x01\x00\x00\x00", data[:8]
    pos, paths, records = 8, {}, []
    header: tuple[Any, ...] | None = None
    record_bytes = 44
    while pos < len(data):
        length, crc = struct.unpack_from("<II", data, pos)
        payload = data[pos + 8 : pos + 8 + length]
        assert len(payload) == length and crc32c(payload) == crc, f"bad frame at {pos}"
        pos += 8 + length
        kind = payload[0]
        if kind == 1:
            assert header is None
            _clock, record_bytes, rank, pid, ppid, _t = struct.unpack_from("<BHiIIQ", payload, 1)
            at = 24
            (n,) = struct.unpack_from("<H", payload, at)
            host = payload[at + 2 : at + 2 + n].decode()
            at += 2 + n
            (n,) = struct.unpack_from("<H", payload, at)
            header = (rank, pid, ppid, host, payload[at + 2 : at + 2 + n].decode())
        elif kind == 2:
            (count,) = struct.unpack_from("<I", payload, 1)
            at = 5
            for _ in range(count):
                ident, n = struct.unpack_from("<II", payload, at)
                paths[ident] = payload[at + 8 : at + 8 + n].decode()
                at += 8 + n
        elif kind == 3:
            (count,) = struct.unpack_from("<I", payload, 1)
            assert len(payload) == 5 + count * record_bytes
            for i in range(count):
                off, ln, t0, t1, p, tid, op, layer, call = struct.unpack_from(
                    "<QQQQIIBBB", payload, 5 + i * record_bytes
                )
                op_name = ("read", "write")[op]
                layer_name = ("POSIX", "STDIO", "MPIIO")[layer]
                records.append(Record(op_name, layer_name, call, paths[p], off, ln, t0, t1, tid))
        else:
            raise AssertionError(f"unknown frame kind {kind}")
    assert header is not None
    return Capture(*header, records)


def captures(out: Path) -> list[Capture]:
    return [read_capture(p) for p in sorted(out.glob("*.praw"))]


def real(path: Path) -> str:
    """The path as the tracer records it: absolute, symbolic links resolved."""
    return os.path.realpath(path)


def requests(caps: list[Capture], path: Path) -> list[tuple[str, int, int]]:
    return [(r.op, r.offset, r.length) for c in caps for r in c.records if r.path == real(path)]


# ---- running things ------------------------------------------------------------------


@pytest.fixture(scope="session")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The C programs of tests/programs, compiled once."""
    out = tmp_path_factory.mktemp("programs")
    built = {}
    for source in sorted(PROGRAMS.glob("*.c")):
        exe = out / source.stem
        subprocess.run(
            ["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-pthread", "-o", str(exe), str(source)],
            check=True,
        )
        built[source.stem] = exe
    return built


def patio(*args: str, **kw: Any) -> subprocess.CompletedProcess[str]:
    kw.setdefault("capture_output", True)
    return subprocess.run([patio_binary(), *args], check=False, text=True, timeout=120, **kw)


def trace(
    out: Path, *command: str | Path, only: Path | None = None, **kw: Any
) -> subprocess.CompletedProcess[str]:
    args = ["trace", "-o", str(out)]
    if only is not None:
        args += ["--only", str(only)]
    return patio(*args, "--", *map(str, command), **kw)


def merged_analysis(out: Path, tmp_path: Path) -> dict[tuple[str, str, int, str], dict[str, Any]]:
    target = tmp_path / f"{out.name}.ptrace"
    done = patio("trace", "merge", str(out), "-o", str(target), "--json")
    assert done.returncode == 0, done.stderr
    written = json.loads(done.stdout)
    assert written["output"] == str(target) and written["format"] == "ptrace"
    assert written["bytes"] == target.stat().st_size
    assert len(written["inputs"]) == len(list(out.glob("*.praw")))
    done = patio("analyze", str(target), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert written["streams"] == len(report["streams"])
    assert written["requests"] == sum(s["requests"] for s in report["streams"])
    return {(s["module"], s["file"], s["rank"], s["op"]): s for s in report["streams"]}


def planned(stdout: str) -> list[tuple[str, int, int]]:
    rows = [line.split() for line in stdout.splitlines() if line.startswith(("read ", "write "))]
    return [(op, int(off), int(ln)) for op, off, ln in rows]


# ---- programs --------------------------------------------------------------------


def test_c_program_strided_and_sequential(programs: dict[str, Path], tmp_path: Path) -> None:
    data, out = tmp_path / "data.bin", tmp_path / "t"
    done = trace(out, programs["strided"], data)
    assert done.returncode == 0, done.stderr
    assert "patio: traces in" in done.stderr and str(out) in done.stderr
    caps = captures(out)
    assert len(caps) == 1 and caps[0].rank == -1 and caps[0].exe == real(programs["strided"])
    assert requests(caps, data) == planned(done.stdout)
    streams = merged_analysis(out, tmp_path)
    pid = caps[0].pid
    writes = streams[("POSIX", real(data), pid, "write")]
    reads = streams[("POSIX", real(data), pid, "read")]
    assert writes["kind"] == "strided" and writes["signature"].startswith("[0, (2048)^63]")
    assert reads["kind"] == "strided" and reads["signature"].startswith("[100, (1536)^63]")


def test_stdio_program(programs: dict[str, Path], tmp_path: Path) -> None:
    data, out = tmp_path / "data.bin", tmp_path / "t"
    done = trace(out, programs["stdio"], data)
    assert done.returncode == 0, done.stderr
    caps = captures(out)
    assert requests(caps, data) == planned(done.stdout)
    assert {r.layer for r in caps[0].records if r.path == real(data)} == {"STDIO"}
    streams = merged_analysis(out, tmp_path)
    writes = streams[("STDIO", real(data), caps[0].pid, "write")]
    assert writes["kind"] == "contiguous" and writes["requests"] == 11


def test_python_program(tmp_path: Path) -> None:
    data, out = tmp_path / "data.bin", tmp_path / "t"
    data.write_bytes(os.urandom(100_000))
    script = tmp_path / "app.py"
    script.write_text(
        "import os, sys\n"
        "with open(sys.argv[1], 'rb', buffering=0) as f:\n"
        "    for _ in range(3):\n"
        "        f.read(4096)\n"
        "    f.seek(10000)\n"
        "    f.read(100)\n"
        "    f.seek(-50, os.SEEK_CUR)\n"
        "    f.read(100)\n"
        "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
        "for i in range(8):\n"
        "    os.pread(fd, 512, i * 8192)\n"
        "os.close(fd)\n"
    )
    done = trace(out, sys.executable, script, data, only=data)
    assert done.returncode == 0, done.stderr
    caps = captures(out)
    # --only keeps the interpreter's own files (modules, the script) out.
    assert {r.path for c in caps for r in c.records} == {real(data)}
    expected = [("read", o, 4096) for o in (0, 4096, 8192)] + [
        ("read", 10000, 100),
        ("read", 10050, 100),
    ]
    expected += [("read", i * 8192, 512) for i in range(8)]
    assert requests(caps, data) == expected


def test_dd(tmp_path: Path) -> None:
    src, dst, out = tmp_path / "in.bin", tmp_path / "out.bin", tmp_path / "t"
    src.write_bytes(os.urandom(64 * 4096))
    cmd = ["dd", f"if={src}", f"of={dst}", "bs=4096", "skip=3", "seek=2", "count=9"]
    done = trace(out, *cmd, "conv=notrunc", "status=none")
    assert done.returncode == 0, done.stderr
    caps = captures(out)
    assert requests(caps, src) == [("read", (3 + i) * 4096, 4096) for i in range(9)]
    assert requests(caps, dst) == [("write", (2 + i) * 4096, 4096) for i in range(9)]
    streams = merged_analysis(out, tmp_path)
    pid = caps[0].pid
    assert streams[("POSIX", real(src), pid, "read")]["kind"] == "contiguous"
    assert streams[("POSIX", real(dst), pid, "write")]["kind"] == "contiguous"


def test_the_retired_out_spelling_still_works_with_one_deprecation_line(tmp_path: Path) -> None:
    src = tmp_path / "in.bin"
    src.write_bytes(os.urandom(3 * 4096))
    # A traced command's own "--out" (here sh's $0) is the command's, not patio's.
    cmd = ["sh", "-c", f"dd if={src} of=/dev/null bs=4096 status=none", "--out"]
    old = patio("trace", "--out", str(tmp_path / "old"), "--", *cmd)
    new = patio("trace", "-o", str(tmp_path / "new"), "--", *cmd)
    assert old.returncode == 0 and new.returncode == 0, (old.stderr, new.stderr)
    deprecated = "patio: warning: --out is deprecated and will be removed; use --output"
    assert old.stderr.splitlines().count(deprecated) == 1, old.stderr
    assert "deprecated" not in new.stderr, new.stderr
    # dd's reads: three blocks, then the one at the end that returns nothing.
    expect = [("read", i * 4096, 4096) for i in range(3)] + [("read", 3 * 4096, 0)]
    assert requests(captures(tmp_path / "old"), src) == expect
    assert requests(captures(tmp_path / "new"), src) == expect


def test_fio_strided(tmp_path: Path) -> None:
    data, out = tmp_path / "fio.bin", tmp_path / "t"
    data.write_bytes(os.urandom(1 << 20))
    # rw=read:12k reads 4 KiB and skips 12 KiB: a 16 KiB stride; io_size stops it after
    # one pass (64 reads) through the 1 MiB file.
    job = [
        "fio", "--name=strided", f"--filename={data}", "--rw=read:12k", "--bs=4k",
        "--size=1M", "--io_size=256k", "--ioengine=psync", "--output=/dev/null",
    ]  # fmt: skip
    done = trace(out, *job, only=data)
    assert done.returncode == 0, done.stderr
    caps = captures(out)
    assert requests(caps, data) == [("read", i * 16384, 4096) for i in range(64)]
    (rank,) = {c.pid for c in caps if c.records}
    stream = merged_analysis(out, tmp_path)[("POSIX", real(data), rank, "read")]
    assert stream["kind"] == "strided"
    assert stream["signature"] == "[0, (16384)^63]"
    assert stream["length_signature"] == "[4096, (0)^63]"


def test_threads_share_a_descriptor(programs: dict[str, Path], tmp_path: Path) -> None:
    data, out, n = tmp_path / "data.bin", tmp_path / "t", 300
    data.write_bytes(os.urandom(2 * n * 4096))
    done = trace(out, programs["threads"], data, n)
    assert done.returncode == 0, done.stderr
    tids = {int(t): int(tid) for _, t, tid in (line.split() for line in done.stdout.splitlines())}
    (cap,) = captures(out)
    assert len(cap.records) == 2 * n
    for t, tid in tids.items():
        mine = [r for r in cap.records if r.tid == tid]
        assert [(r.offset, r.length) for r in mine] == [
            ((2 * i + t) * 4096, 4096) for i in range(n)
        ]
        assert all(a.start <= b.start for a, b in itertools.pairwise(mine))
        assert all(r.start <= r.end for r in mine)


def test_fork_and_exec(programs: dict[str, Path], tmp_path: Path) -> None:
    data, out = tmp_path / "data.bin", tmp_path / "t"
    dd = shutil.which("dd")
    assert dd
    done = trace(
        out, programs["forks"], data, dd, f"if={data}", "of=/dev/null", "bs=100", "status=none"
    )
    assert done.returncode == 0, done.stderr
    pids = dict(line.split() for line in done.stdout.splitlines())
    parent, child = int(pids["parent"]), int(pids["child"])
    caps = captures(out)
    by_pid: dict[int, list[Capture]] = {}
    for c in caps:
        by_pid.setdefault(c.pid, []).append(c)
    # The parent image, its exec'd dd (same pid, next file) and the child.
    assert sorted(len(v) for v in by_pid.values()) == [1, 2]
    assert by_pid[child][0].ppid == parent
    assert requests(by_pid[child], data) == [
        ("write", 200, 100),
        ("write", 300, 100),
        ("write", 5000, 50),
    ]
    first, then = sorted(by_pid[parent], key=lambda c: min(r.start for r in c.records))
    # After fork the position is shared with the child: the parent's third write is at 400.
    assert requests([first], data) == [("write", 0, 100), ("write", 100, 100), ("write", 400, 100)]
    assert requests([then], data) == [("read", o, 100) for o in range(0, 5000, 100)] + [
        ("read", 5000, 50),
        ("read", 5050, 0),
    ]
    assert {c.exe for c in by_pid[parent]} == {real(programs["forks"]), real(Path(dd))}
    streams = merged_analysis(out, tmp_path)
    assert streams[("POSIX", real(data), parent, "read")]["requests"] == 52
    assert streams[("POSIX", real(data), child, "write")]["requests"] == 3


def test_dup2_over_traced_descriptors(programs: dict[str, Path], tmp_path: Path) -> None:
    a, b, c, out = tmp_path / "a", tmp_path / "b", tmp_path / "c", tmp_path / "t"
    a.write_bytes(os.urandom(100))
    b.write_bytes(os.urandom(100))
    done = trace(out, programs["dup2s"], a, b, c, only=tmp_path)
    assert done.returncode == 0, done.stderr
    caps = captures(out)
    got = [(Path(r.path).name, r.op, r.offset, r.length) for cap in caps for r in cap.records]
    assert got == [
        ("b", "read", 0, 10),
        ("a", "read", 0, 10),
        ("a", "read", 10, 10),
        ("a", "read", 20, 10),
        ("c", "write", 0, 6),
    ]
    assert c.read_text() == "hello\n"


def test_descriptors_opened_before_the_tracer(tmp_path: Path) -> None:
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(10_000))
    # Inherited from this (untraced) process, positioned at 500.
    with data.open("rb") as stdin:
        stdin.seek(500)
        done = trace(
            tmp_path / "t1", "dd", "bs=1000", "count=3", "of=/dev/null", "status=none", stdin=stdin
        )
    assert done.returncode == 0, done.stderr
    assert requests(captures(tmp_path / "t1"), data) == [
        ("read", 500 + i * 1000, 1000) for i in range(3)
    ]
    # A shell redirect: the shell opens the file, dup2s it to 0 and execs dd.
    done = trace(
        tmp_path / "t2", "sh", "-c", f"dd bs=1000 count=3 of=/dev/null status=none < {data}"
    )
    assert done.returncode == 0, done.stderr
    assert requests(captures(tmp_path / "t2"), data) == [("read", i * 1000, 1000) for i in range(3)]


def test_errno_return_values_and_signal_dispositions_unchanged(
    programs: dict[str, Path], tmp_path: Path
) -> None:
    plain = subprocess.run(
        [programs["errnos"], tmp_path / "plain.bin"], capture_output=True, text=True, check=True
    )
    traced = trace(tmp_path / "t", programs["errnos"], tmp_path / "traced.bin")
    assert traced.returncode == 0, traced.stderr
    assert traced.stdout == plain.stdout
    assert "write ok                     ret=10 errno=777" in traced.stdout
    # Python installs its SIGINT handler only over SIG_DFL: it must still see SIG_DFL.
    # Both start from the default disposition (a test run started in the background
    # inherits SIGINT ignored, which is kept across exec, traced or not).
    code = "import signal; print(signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))"
    default = {"preexec_fn": lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)}
    plain = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, **default
    )
    traced = trace(tmp_path / "t2", sys.executable, "-c", code, **default)
    assert traced.stdout == plain.stdout and "default_int_handler" in traced.stdout


@pytest.mark.parametrize(("how", "status"), [("abort", 134), ("segv", 139), ("term", 143)])
def test_fatal_signals_flush_and_keep_the_status(
    programs: dict[str, Path], tmp_path: Path, how: str, status: int
) -> None:
    data, out = tmp_path / "data.bin", tmp_path / "t"
    data.write_bytes(os.urandom(10 * 1024))
    done = trace(out, programs["crash"], data, 7, how)
    assert done.returncode == status, done.stderr
    assert requests(captures(out), data) == [("read", i * 1024, 1024) for i in range(7)]


def test_exit_status_is_forwarded(tmp_path: Path) -> None:
    assert trace(tmp_path / "t", "sh", "-c", "exit 7").returncode == 7
    missing = trace(tmp_path / "t", tmp_path / "no-such-program")
    assert missing.returncode == 2 and "patio: error: cannot run" in missing.stderr
    usage = patio("trace")
    assert usage.returncode == 2 and "COMMAND" in usage.stderr


def test_mid_run_flushes_and_damaged_captures(programs: dict[str, Path], tmp_path: Path) -> None:
    data, out = tmp_path / "data.bin", tmp_path / "t"
    env = dict(os.environ, PATIO_TRACE_BUFFER="8")  # flush every 8 records: many frames
    done = trace(out, programs["strided"], data, env=env)
    assert done.returncode == 0, done.stderr
    (raw,) = out.glob("*.praw")
    full = planned(done.stdout)
    assert requests([read_capture(raw)], data) == full
    blob = raw.read_bytes()
    # Frame boundaries, to cut inside the last frame and to damage a middle one.
    starts, pos = [], 8
    while pos < len(blob):
        starts.append(pos)
        pos += 8 + struct.unpack_from("<I", blob, pos)[0]
    assert len(starts) > 10
    raw.write_bytes(blob[:-5])
    torn = tmp_path / "torn.csv"
    done = patio("trace", "merge", str(out), "-o", str(torn))
    assert done.returncode == 0
    assert "warning" in done.stderr and "torn frame" in done.stderr and raw.name in done.stderr
    kept = len(torn.read_text().splitlines()) - 1
    assert kept == len(full) - (len(full) % 8 or 8)  # only the last frame is lost
    damaged = bytearray(blob)
    middle = starts[len(starts) // 2]
    damaged[middle + 12] ^= 0xFF
    raw.write_bytes(bytes(damaged))
    done = patio("trace", "merge", str(out), "-o", str(torn))
    assert done.returncode == 0 and "checksum mismatch" in done.stderr
    assert 0 < len(torn.read_text().splitlines()) - 1 < kept
    # A file that is not a capture at all is skipped with a warning.
    (out / "junk.praw").write_bytes(b"not a capture")
    done = patio("trace", "merge", str(out), "-o", str(torn))
    assert done.returncode == 0 and "junk.praw: skipped" in done.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    done = patio("trace", "merge", str(empty), "-o", str(torn))
    assert done.returncode == 2 and "no raw captures" in done.stderr


def test_convert_and_direct_reading(programs: dict[str, Path], tmp_path: Path) -> None:
    data, out = tmp_path / "data.bin", tmp_path / "t"
    assert trace(out, programs["strided"], data).returncode == 0
    merged = tmp_path / "m.ptrace"
    assert patio("trace", "merge", str(out), "-o", str(merged)).returncode == 0
    done = patio("trace", "convert", str(merged), "--to", "csv")
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "m.csv").read_text().splitlines()
    assert lines[0] == "module,file,rank,op,offset,length,start,end"
    assert len(lines) - 1 == len(requests(captures(out), data))
    # A single capture is a trace too.
    (raw,) = out.glob("*.praw")
    done = patio("analyze", str(raw), "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["totals"]["requests"] == len(lines) - 1
    again = tmp_path / "again.csv"
    assert patio("trace", "convert", str(raw), "--to", "csv", "-o", str(again)).returncode == 0
    assert again.read_text() == (tmp_path / "m.csv").read_text()


MPI_APP = """
import sys
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
rank, size = comm.Get_rank(), comm.Get_size()
block, count = 4096, 16
buf = np.full(block, rank, dtype=np.uint8)
fh = MPI.File.Open(comm, sys.argv[1], MPI.MODE_CREATE | MPI.MODE_WRONLY)
for i in range(count):
    fh.Write_at_all((i * size + rank) * block, buf)
fh.Close()
"""


@pytest.mark.parametrize("fcoll", ["individual", "default"])
def test_mpi_io_shared_file(tmp_path: Path, fcoll: str) -> None:
    """4 ranks write 16 blocks of 4 KiB each at rank-strided offsets with Write_at_all.

    With OpenMPI's `individual` collective component each rank's own requests reach
    POSIX: rank r writes [r·4096, (16384)^15]. With the default (collective buffering)
    aggregators write the combined data; the trace must still account for every byte
    exactly once, in patterned streams."""
    assert shutil.which("mpirun"), "OpenMPI is missing: run scripts/setup.sh"
    app, data, out = tmp_path / "app.py", tmp_path / "shared.bin", tmp_path / "t"
    app.write_text(MPI_APP)
    env = dict(os.environ, OMPI_MCA_btl_vader_single_copy_mechanism="none")
    if fcoll != "default":
        env["OMPI_MCA_fcoll"] = fcoll
    cmd = [*MPIRUN, patio_binary(), "trace", "-o", str(out), "--only", str(data), "--"]
    done = subprocess.run(
        [*cmd, sys.executable, str(app), str(data)],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert data.stat().st_size == 4 * 16 * 4096
    caps = captures(out)
    assert sorted(c.rank for c in caps if c.records) == [0, 1, 2, 3] or fcoll == "default"
    # the bytes that reached the file: POSIX records (the MPI-IO layer's MPIIO records
    # of the same writes are checked against the views in test_mpiio.py)
    written = sorted(
        (r.offset, r.length)
        for c in caps
        for r in c.records
        if r.op == "write" and r.layer == "POSIX"
    )
    end = 0
    for offset, length in written:
        assert offset == end, "every byte written exactly once"
        end += length
    assert end == data.stat().st_size
    streams = merged_analysis(out, tmp_path)
    mine = {key: s for key, s in streams.items() if key[1] == real(data) and key[3] == "write"}
    if fcoll == "individual":
        assert {key[2] for key in mine} == {0, 1, 2, 3}
        for (_, _, rank, _), s in mine.items():
            assert s["kind"] == "strided"
            assert s["signature"] == f"[{rank * 4096}, (16384)^15]"
    else:
        assert mine and all(s["kind"] in {"contiguous", "strided"} for s in mine.values())


def test_reader_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283
