"""`patio query` and the indexed native trace on every shared Darshan log.

Each log is converted to an indexed ``.ptrace`` (version 2, the stream-set encoding)
and back to CSV: the requests must come back exactly and the times to the nanosecond.
Queries answered from the blocks (a whole stream, one request, the requests touching an
offset) must equal the same questions asked of the decoded trace, and damaged files must
give one clear error line with exit status 2.
"""

from __future__ import annotations

import csv
import json
import random
from pathlib import Path
from typing import Any

import pytest
from test_cli import LOGS, run

Request = tuple[int, int]


def _convert(log: Path, out: Path) -> None:
    done = run("convert", str(log), "-o", str(out))
    assert done.returncode == 0, done.stderr


def _streams(csv_path: Path) -> list[tuple[tuple[str, str, int, str], list[Request]]]:
    """Streams of a patio CSV trace, in file order (the order of `patio analyze`)."""
    streams: dict[tuple[str, str, int, str], list[Request]] = {}
    with csv_path.open(newline="") as f:
        for row in csv.DictReader(f):
            key = (row["module"], row["file"], int(row["rank"]), row["op"])
            streams.setdefault(key, []).append((int(row["offset"]), int(row["length"])))
    return list(streams.items())


def _query(trace: Path, *args: str) -> dict[str, Any]:
    done = run("query", str(trace), *args, "--json")
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


@pytest.fixture(scope="module", params=LOGS, ids=lambda p: p.stem)
def converted(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, Path]:
    log: Path = request.param
    d = tmp_path_factory.mktemp(log.stem)
    ptrace, csv_path = d / "t.ptrace", d / "t.csv"
    _convert(log, ptrace)
    _convert(log, csv_path)
    return ptrace, csv_path


def test_indexed_trace_round_trips(converted: tuple[Path, Path], tmp_path: Path) -> None:
    ptrace, csv_path = converted
    assert ptrace.read_bytes()[:6] == b"PTRC\x02\x00"
    back = tmp_path / "back.csv"
    _convert(ptrace, back)
    with csv_path.open(newline="") as a, back.open(newline="") as b:
        rows_a, rows_b = list(csv.reader(a)), list(csv.reader(b))
    assert len(rows_a) == len(rows_b)
    for x, y in zip(rows_a[1:], rows_b[1:]):
        assert x[:6] == y[:6]
        assert abs(float(x[6]) - float(y[6])) <= 1e-9 and abs(float(x[7]) - float(y[7])) <= 1.5e-9


def test_block_queries_equal_the_decoded_trace(converted: tuple[Path, Path]) -> None:
    ptrace, csv_path = converted
    streams = _streams(csv_path)
    rng = random.Random(15)
    picks = sorted(rng.sample(range(len(streams)), min(4, len(streams))))
    for k in picks:
        key, requests = streams[k]
        whole = _query(ptrace, "--stream", str(k))
        assert tuple(whole["stream"].values()) == key
        assert [tuple(r) for r in whole["requests"]] == requests
        assert whole["blocks_decoded"] >= 1
        i = rng.randrange(len(requests))
        one = _query(ptrace, "--stream", str(k), "--index", str(i))
        assert [tuple(r) for r in one["requests"]] == [requests[i]]
        assert one["blocks_decoded"] == 1
        x = requests[i][0] + requests[i][1] // 2
        touching = _query(ptrace, "--stream", str(k), "--offset", str(x))
        want = [(o, n) for o, n in requests if o <= x < o + n]
        assert [tuple(r) for r in touching["requests"]] == want
        assert touching["blocks_decoded"] <= whole["blocks_decoded"]


def test_query_errors_are_one_line(converted: tuple[Path, Path], tmp_path: Path) -> None:
    ptrace, _ = converted
    done = run("query", str(ptrace), "--stream", "1000000", "--json")
    assert done.returncode == 2 and "no stream 1000000" in done.stderr
    # A negative number is a bad value, not an unknown option with a usage block.
    for extra in (["--stream", "-1"], ["--stream", "0", "--index", "-1"],
                  ["--stream", "0", "--offset", "-1"]):
        done = run("query", str(ptrace), *extra)
        assert done.returncode == 2 and "invalid value '-1'" in done.stderr, done.stderr
        assert "Usage:" not in done.stderr
    data = bytearray(ptrace.read_bytes())
    for at in (8, len(data) // 2, len(data) - 1):
        bad = tmp_path / f"bad{at}.ptrace"
        damaged = bytearray(data)
        damaged[at] ^= 0xFF
        bad.write_bytes(bytes(damaged))
        # A query reads the keys and the blocks it needs, not the times at the end.
        queries = [["query", str(bad), "--stream", "0"]] if at == 8 else []
        for args in [["analyze", str(bad)], *queries]:
            done = run(*args)
            assert done.returncode == 2, (args, done.stdout)
            assert done.stderr.count("\n") == 1 and "patio: error:" in done.stderr, done.stderr
            assert "panicked" not in done.stderr
    for n in (5, 20):
        cut = tmp_path / f"cut{n}.ptrace"
        cut.write_bytes(bytes(data[:n]))
        done = run("query", str(cut), "--stream", "0")
        assert done.returncode == 2 and "byte" in done.stderr, done.stderr
