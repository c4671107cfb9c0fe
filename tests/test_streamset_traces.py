"""The stream-set encoding behind every ``ratio`` patio reports round-trips every shared
trace: ``decode(encode(streams)) == streams``.

Each Darshan log of ``../shared/traces`` is read with PyDarshan (``patio.dxt``, the
reference), converted by the CLI to a native trace (``patio convert … -o t.ptrace``,
whose requests are the stream set ``patio analyze`` measures, encoded with the same
detector and options) and decoded again by the CLI (``patio convert t.ptrace -o
back.csv``); every stream's offsets and lengths must come back exactly, in order. The
random-streams property of the same encoding is ``crates/patio-core/tests/blockset.rs``.
"""

from __future__ import annotations

import collections
import csv
from pathlib import Path

import pytest
from patio.dxt import read_dxt
from test_cli import LOGS, TRACES, run

Key = tuple[str, str, int, str]


def decoded_streams(path: Path) -> dict[Key, list[tuple[int, int]]]:
    streams: dict[Key, list[tuple[int, int]]] = collections.defaultdict(list)
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            key = (row["module"], row["file"], int(row["rank"]), row["op"])
            streams[key].append((int(row["offset"]), int(row["length"])))
    return streams


def test_there_are_shared_traces() -> None:
    assert LOGS, f"no Darshan logs under {TRACES}: the shared folder must sit beside the repo"


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_every_stream_of_every_shared_trace_round_trips(log: Path, tmp_path: Path) -> None:
    encoded, back = tmp_path / "t.ptrace", tmp_path / "back.csv"
    for src, dst in [(log, encoded), (encoded, back)]:
        done = run("convert", str(src), "-o", str(dst))
        assert done.returncode == 0, done.stderr
    reference = {
        s.key: list(zip(s.offset.tolist(), s.length.tolist(), strict=True)) for s in read_dxt(log)
    }
    assert sum(map(len, reference.values())) > 0
    got = decoded_streams(back)
    assert got.keys() == reference.keys()
    for key, requests in reference.items():
        assert got[key] == requests, f"{log.name}: stream {key} changed in the round trip"
