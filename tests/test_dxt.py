"""Tests for patio.dxt: reading Darshan DXT logs and writing patio trace CSV.

Every log in the shared trace folder (``../shared/traces`` beside the repository) is read
and compared with what PyDarshan reports directly; damaged and non-DXT inputs must give a
one-line DxtError (or exit status 2 from the command line), never a crash or a traceback.
"""

from __future__ import annotations

import csv
import functools
import io
import os
import random
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import patio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from patio.dxt import CSV_HEADER, DxtError, Stream, read_dxt, write_csv

darshan = pytest.importorskip("darshan")

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
LOGS = sorted(TRACES.glob("*.darshan")) if TRACES.is_dir() else []
MODULES = {"DXT_POSIX": "POSIX", "DXT_MPIIO": "MPIIO"}
Key = tuple[str, str, int, str]


def _log_ids(p: Path) -> str:
    return p.stem


@functools.cache
def _streams(path: Path) -> tuple[Stream, ...]:
    return tuple(read_dxt(path))


@functools.cache
def _pydarshan_rows(path: Path) -> dict[Key, list[tuple[int, int, float, float]]]:
    """Per stream key, the segments straight from PyDarshan, in its record order."""
    rows: dict[Key, list[tuple[int, int, float, float]]] = {}
    with darshan.DarshanReport(str(path), read_all=False) as report:
        mods = [m for m in MODULES if m in report.modules]
        for mod in mods:
            report.mod_read_all_dxt_records(mod)
        for mod in mods:
            for i in range(len(report.records[mod])):
                rec = report.records[mod][i]
                name = report.name_records.get(rec["id"], f"{rec['id']:016x}")
                for op in ("write", "read"):
                    segs = rec[f"{op}_segments"]
                    # The record's own count agrees with its segment list.
                    assert len(segs) == rec[f"{op}_count"]
                    if hasattr(segs, "to_dict"):
                        segs = segs.to_dict("records")
                    for s in segs:
                        rows.setdefault((MODULES[mod], name, int(rec["rank"]), op), []).append(
                            (s["offset"], s["length"], s["start_time"], s["end_time"])
                        )
    return rows


def _cli_env() -> dict[str, str]:
    """Environment for a child ``python -m patio...`` that imports this same patio."""
    env = dict(os.environ)
    root = str(Path(patio.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "patio.dxt", *args],
        check=False,
        capture_output=True,
        text=True,
        env=_cli_env(),
        timeout=300,
    )


def _assert_one_line_error(msg: str, path: Path) -> None:
    assert "\n" not in msg.strip(), msg
    assert str(path) in msg, msg


# --------------------------------------------------------------------------- real logs


def test_trace_folder_present() -> None:
    assert TRACES.is_dir(), f"shared trace folder missing: {TRACES}"
    assert LOGS, f"no .darshan logs in {TRACES}"


@pytest.mark.parametrize("log", LOGS, ids=_log_ids)
def test_streams_match_pydarshan(log: Path) -> None:
    streams = _streams(log)
    expected = _pydarshan_rows(log)
    assert len(streams) == len(expected)
    assert {s.key: len(s) for s in streams} == {k: len(v) for k, v in expected.items()}
    assert sum(len(s) for s in streams) == sum(len(v) for v in expected.values())


@pytest.mark.parametrize("log", LOGS, ids=_log_ids)
def test_stream_contents_are_pydarshans_ordered_by_start(log: Path) -> None:
    expected = _pydarshan_rows(log)
    for s in _streams(log):
        want = sorted(expected[s.key], key=lambda r: r[2])  # Python's sort is stable
        got = list(zip(s.offset.tolist(), s.length.tolist(), s.start.tolist(), s.end.tolist()))
        assert got == want, s.key


@pytest.mark.parametrize("log", LOGS, ids=_log_ids)
def test_stream_shape_and_order(log: Path) -> None:
    streams = _streams(log)
    keys = [s.key for s in streams]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)
    for s in streams:
        assert s.module in ("POSIX", "MPIIO")
        assert s.op in ("read", "write")
        assert isinstance(s.rank, int) and isinstance(s.file, str) and s.file
        assert len(s) > 0
        assert s.offset.dtype == np.uint64 and s.length.dtype == np.uint64
        assert s.start.dtype == np.float64 and s.end.dtype == np.float64
        assert s.offset.shape == s.length.shape == s.start.shape == s.end.shape
        assert np.all(np.diff(s.start) >= 0), s.key
        assert np.all(s.end >= s.start), s.key


@pytest.mark.parametrize("log", LOGS, ids=_log_ids)
def test_in_process_decoding_agrees(log: Path) -> None:
    isolated = _streams(log)
    direct = read_dxt(log, isolate=False)
    assert [s.key for s in direct] == [s.key for s in isolated]
    for a, b in zip(direct, isolated):
        for col in ("offset", "length", "start", "end"):
            assert np.array_equal(getattr(a, col), getattr(b, col))


@pytest.mark.parametrize("log", LOGS, ids=_log_ids)
def test_csv_round_trip(log: Path, tmp_path: Path) -> None:
    streams = _streams(log)
    out = tmp_path / "trace.csv"
    n = write_csv(streams, out)
    total = sum(len(s) for s in streams)
    assert n == total
    with out.open(newline="", encoding="utf-8") as f:
        assert f.readline() == CSV_HEADER + "\n"
        f.seek(0)
        reader = csv.reader(f)
        assert next(reader) == CSV_HEADER.split(",")
        rows = list(reader)
    assert len(rows) == total
    # Rows come grouped by stream, streams in key order, each in start-time order.
    i = 0
    for s in sorted(streams, key=lambda s: s.key):
        chunk = rows[i : i + len(s)]
        i += len(s)
        assert {(r[0], r[1], int(r[2]), r[3]) for r in chunk} == {s.key}
        assert [int(r[4]) for r in chunk] == s.offset.tolist()
        assert [int(r[5]) for r in chunk] == s.length.tolist()
        assert [float(r[6]) for r in chunk] == s.start.tolist()  # repr: exact round trip
        assert [float(r[7]) for r in chunk] == s.end.tolist()


def test_large_log_converts_quickly(tmp_path: Path) -> None:
    log = TRACES / "io_test5_hdf5_192ranks.darshan"
    if not log.exists():
        pytest.skip(f"{log.name} is not in the trace folder")
    t0 = time.perf_counter()
    proc = _run_cli(str(log), "-o", str(tmp_path / "out.csv"))
    elapsed = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert elapsed < 30, f"conversion took {elapsed:.1f} s"


# --------------------------------------------------------------------------- CSV writer


def _stream(
    file: str,
    offsets: list[int],
    starts: list[float],
    *,
    module: str = "POSIX",
    rank: int = 0,
    op: str = "read",
) -> Stream:
    return Stream(
        module=module,
        file=file,
        rank=rank,
        op=op,
        offset=np.array(offsets, dtype=np.uint64),
        length=np.full(len(offsets), 4096, dtype=np.uint64),
        start=np.array(starts, dtype=np.float64),
        end=np.array(starts, dtype=np.float64) + 0.5,
    )


def test_csv_quotes_awkward_file_names_and_orders_streams() -> None:
    a = _stream('odd, "name"\nwith newline', [0, 8192], [0.1, 0.2], rank=3, op="write")
    b = _stream("plain", [2**64 - 1], [1e-9], module="MPIIO")
    buf = io.StringIO(newline="")
    assert write_csv([a, b], buf) == 3
    text = buf.getvalue()
    assert text.splitlines()[0] == CSV_HEADER
    rows = list(csv.reader(io.StringIO(text, newline="")))[1:]
    assert rows == [
        ["MPIIO", "plain", "0", "read", str(2**64 - 1), "4096", "1e-09", "0.500000001"],
        ["POSIX", 'odd, "name"\nwith newline', "3", "write", "0", "4096", "0.1", "0.6"],
        ["POSIX", 'odd, "name"\nwith newline', "3", "write", "8192", "4096", "0.2", "0.7"],
    ]


_names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20)
_times = st.floats(min_value=0, max_value=1e9, allow_nan=False, allow_infinity=False)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(_names, st.lists(st.tuples(st.integers(0, 2**64 - 1), _times), max_size=5)),
        max_size=4,
    )
)
def test_csv_round_trip_property(spec: list[tuple[str, list[tuple[int, float]]]]) -> None:
    streams = [
        _stream(name, [o for o, _ in reqs], [t for _, t in reqs], rank=i)
        for i, (name, reqs) in enumerate(spec)
    ]
    buf = io.StringIO(newline="")
    write_csv(streams, buf)
    rows = list(csv.DictReader(io.StringIO(buf.getvalue(), newline="")))
    want = [
        (s.file, s.rank, o, t)
        for s in sorted(streams, key=lambda s: s.key)
        for o, t in zip(s.offset.tolist(), s.start.tolist())
    ]
    got = [(r["file"], int(r["rank"]), int(r["offset"]), float(r["start"])) for r in rows]
    assert got == want


# --------------------------------------------------------------------------- bad input


def test_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "nope.darshan"
    with pytest.raises(DxtError, match="does not exist") as e:
        read_dxt(p)
    _assert_one_line_error(str(e.value), p)


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(DxtError, match="directory"):
        read_dxt(tmp_path)


def test_text_file(tmp_path: Path) -> None:
    p = tmp_path / "notes.darshan"
    p.write_text("this is not a darshan log, just some text that goes on for a while\n" * 20)
    with pytest.raises(DxtError, match="not a readable Darshan log") as e:
        read_dxt(p)
    _assert_one_line_error(str(e.value), p)


def test_empty_file(tmp_path: Path) -> None:
    p = tmp_path / "empty.darshan"
    p.write_bytes(b"")
    with pytest.raises(DxtError, match="empty") as e:
        read_dxt(p)
    _assert_one_line_error(str(e.value), p)


@pytest.mark.parametrize("log", LOGS, ids=_log_ids)
@pytest.mark.parametrize("fraction", [0.02, 0.5, 0.99])
def test_truncated_copy(log: Path, fraction: float, tmp_path: Path) -> None:
    data = log.read_bytes()
    p = tmp_path / f"cut-{log.name}"
    p.write_bytes(data[: max(1, int(len(data) * fraction))])
    with pytest.raises(DxtError, match="not a readable Darshan log") as e:
        read_dxt(p)
    _assert_one_line_error(str(e.value), p)


@pytest.mark.parametrize("log", LOGS, ids=_log_ids)
def test_zeroed_block_in_the_middle(log: Path, tmp_path: Path) -> None:
    """Damage inside compressed data must not read as a shorter, valid trace."""
    data = bytearray(log.read_bytes())
    mid = len(data) // 2
    data[mid : mid + 64] = bytes(64)
    p = tmp_path / f"zeroed-{log.name}"
    p.write_bytes(bytes(data))
    with pytest.raises(DxtError, match="not a readable Darshan log") as e:
        read_dxt(p)
    _assert_one_line_error(str(e.value), p)


def test_random_damage_never_crashes(tmp_path: Path) -> None:
    """Bit flips, overwritten runs and cuts: a DxtError or a clean read, never a crash."""
    candidates = [p for p in LOGS if p.stat().st_size < 100_000] or LOGS[:1]
    rng = random.Random(20240601)
    p = tmp_path / "damaged.darshan"
    for i in range(40):
        src = candidates[i % len(candidates)]
        data = bytearray(src.read_bytes())
        how = i % 3
        if how == 0:
            for _ in range(rng.randint(1, 12)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        elif how == 1:
            at = rng.randrange(len(data))
            data[at : at + 200] = bytes(rng.randrange(256) for _ in data[at : at + 200])
        else:
            del data[rng.randrange(len(data)) :]
        p.write_bytes(bytes(data))
        try:
            streams = read_dxt(p)
        except DxtError as e:
            _assert_one_line_error(str(e), p)
        else:
            assert all(len(s) > 0 for s in streams)


def _logs_without_dxt() -> list[Path]:
    """Real logs with no DXT module: from the shared folder, else PyDarshan's examples."""
    found = []
    example_dir = Path(darshan.__file__).resolve().parent / "examples" / "example_logs"
    for group in (LOGS, sorted(example_dir.glob("*.darshan"))):
        for p in group:
            with darshan.DarshanReport(str(p), read_all=False) as r:
                if not any(m in r.modules for m in MODULES):
                    found.append(p)
        if found:
            break
    return found


def test_log_without_dxt() -> None:
    logs = _logs_without_dxt()
    if not logs:
        pytest.skip("no real Darshan log without DXT is available")
    for p in logs:
        with pytest.raises(DxtError, match="has no DXT trace data") as e:
            read_dxt(p)
        _assert_one_line_error(str(e.value), p)
        assert "DXT_ENABLE_IO_TRACE=1" in str(e.value)


# --------------------------------------------------------------------------- command line


def test_cli_garbage_exits_2_with_one_line(tmp_path: Path) -> None:
    p = tmp_path / "garbage.darshan"
    p.write_bytes(bytes(random.Random(7).randrange(256) for _ in range(5000)))
    proc = _run_cli(str(p), "-o", str(tmp_path / "out.csv"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("patio: error: ") and str(p) in lines[0]
    assert proc.stdout == ""
    assert not (tmp_path / "out.csv").exists()


def test_cli_truncated_log_exits_2(tmp_path: Path) -> None:
    if not LOGS:
        pytest.skip("no logs")
    log = LOGS[0]
    p = tmp_path / "half.darshan"
    p.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    proc = _run_cli(str(p))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith("patio: error: ")


def test_cli_writes_stdout_and_file(tmp_path: Path) -> None:
    if not LOGS:
        pytest.skip("no logs")
    log = min(LOGS, key=lambda p: p.stat().st_size)
    total = sum(len(s) for s in _streams(log))
    proc = _run_cli(str(log))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == CSV_HEADER
    assert len(list(csv.reader(io.StringIO(proc.stdout, newline="")))) == total + 1
    out = tmp_path / "t.csv"
    proc = _run_cli(str(log), "-o", str(out))
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""
    assert out.read_text(encoding="utf-8") == "\n".join(lines) + "\n"


def test_cli_unwritable_output_exits_2(tmp_path: Path) -> None:
    if not LOGS:
        pytest.skip("no logs")
    log = min(LOGS, key=lambda p: p.stat().st_size)
    proc = _run_cli(str(log), "-o", str(tmp_path / "no" / "such" / "dir" / "t.csv"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith("patio: error: cannot write")


def test_counts_agree_with_record_counters() -> None:
    """Per log, the total segment count equals the sum of write_count + read_count."""
    for log in LOGS:
        want = Counter[str]()
        with darshan.DarshanReport(str(log), read_all=False) as r:
            for mod in (m for m in MODULES if m in r.modules):
                r.mod_read_all_dxt_records(mod)
                for i in range(len(r.records[mod])):
                    rec = r.records[mod][i]
                    want[MODULES[mod]] += rec["write_count"] + rec["read_count"]
        got = Counter[str]()
        for s in _streams(log):
            got[s.module] += len(s)
        assert got == want, log.name


def test_a_missing_darshan_library_is_not_called_a_damaged_log(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import darshan

    def no_library(*args: object, **kwargs: object) -> None:
        raise OSError("cannot load library 'libdarshan-util.so': No such file or directory")

    monkeypatch.setattr(darshan, "DarshanReport", no_library)
    log = LOGS[0]
    with pytest.raises(DxtError) as e:
        read_dxt(log, isolate=False)
    assert "libdarshan-util" in str(e.value) and "the log itself was not read" in str(e.value)
    assert "not a readable Darshan log" not in str(e.value)
