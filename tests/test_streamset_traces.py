"""The stream-set encoding behind every ``ratio`` patio reports round-trips every shared
trace: ``decode(encode(streams)) == streams``.

Each Darshan log of ``../shared/traces`` is read with PyDarshan (``patio.dxt``, the
reference), converted by the CLI to a native trace (``patio convert … -o t.ptrace``,
whose requests are the stream set ``patio analyze`` measures, encoded with the same
detector and options) and decoded again by the CLI (``patio convert t.ptrace -o
back.csv``); every stream's offsets and lengths must come back exactly, in order. The
random-streams property of the same encoding is ``crates/patio-core/tests/blockset.rs``.

Synthetic extremes (identical requests, one request, many ranks of a few requests)
must come out smaller than every generic compressor variant on the same records, both
``patio analyze``'s and Python's own zlib, bz2 and xz in record and column order.
"""

from __future__ import annotations

import bz2
import collections
import csv
import json
import lzma
import struct
import zlib
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


# Synthetic extremes where fixed costs dominate: every request of a stream identical
# (two MPI-IO streams and the POSIX streams under them), one request, many ranks with
# a few requests each. Streams are (module, file, rank, op, [(offset, length), ...]).
Request = tuple[int, int]
SynthStream = tuple[str, str, int, str, list[Request]]


def identical_requests() -> list[SynthStream]:
    return [
        (module, "/scratch/out.dat", rank, "write", [(rank << 20, 1 << 20)] * 65_536)
        for module in ("MPIIO", "POSIX")
        for rank in range(2)
    ]


EXTREMES: dict[str, list[SynthStream]] = {
    "4_streams_x_65536_identical": identical_requests(),
    "1_stream_x_1_request": [("POSIX", "/scratch/one", 0, "write", [(0, 4096)])],
    "1_stream_x_1_far_request": [("POSIX", "/scratch/one", 0, "read", [(123_456_789, 1 << 20)])],
    "64_streams_x_3_requests": [
        ("POSIX", "/scratch/strided", r, "write", [((i * 64 + r) * 4096, 4096) for i in range(3)])
        for r in range(64)
    ],
}


def write_trace(path: Path, streams: list[SynthStream]) -> None:
    t = 0.0
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["module", "file", "rank", "op", "offset", "length", "start", "end"])
        for module, file, rank, op, requests in streams:
            for offset, length in requests:
                t += 1e-6
                w.writerow([module, file, rank, op, offset, length, f"{t:.6f}", f"{t + 5e-7:.6f}"])


def generic_sizes(streams: list[SynthStream]) -> dict[str, int]:
    """Python's own zlib, bz2 and xz over the 16-byte records of the streams in key
    order, as records and as columns, with and without delta-coded offsets: an
    independent check of the baselines ``patio analyze`` computes."""
    sizes: dict[str, int] = {}
    ordered = sorted(streams, key=lambda s: (s[0], s[1], s[2], s[3]))
    for delta in (False, True):
        offsets, lengths = [], []
        for *_, requests in ordered:
            prev = 0
            for offset, length in requests:
                offsets.append(((offset - prev) if delta else offset) % (1 << 64))
                lengths.append(length)
                prev = offset
        records = b"".join(struct.pack("<QQ", o, n) for o, n in zip(offsets, lengths, strict=True))
        columns = struct.pack(f"<{len(offsets)}Q", *offsets) + struct.pack(
            f"<{len(lengths)}Q", *lengths
        )
        for layout, data in (("records", records), ("columns", columns)):
            name = f"{'delta ' if delta else ''}{layout}"
            sizes[f"zlib -9, {name}"] = len(zlib.compress(data, 9))
            sizes[f"bz2 -9, {name}"] = len(bz2.compress(data, 9))
            sizes[f"xz -9, {name}"] = len(lzma.compress(data, preset=9))
            sizes[f"xz -9e, {name}"] = len(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    return sizes


@pytest.mark.parametrize("name", EXTREMES)
def test_synthetic_extremes_beat_every_generic_variant(name: str, tmp_path: Path) -> None:
    streams = EXTREMES[name]
    trace = tmp_path / f"{name}.csv"
    write_trace(trace, streams)
    done = run("analyze", str(trace), "--json")
    assert done.returncode == 0, done.stderr
    totals = json.loads(done.stdout)["totals"]
    encoded = totals["encoded_bytes"]
    # One block; against patio's own 32 generic variants (both orders, key and start
    # order) and against Python's coders on the same records and columns.
    assert totals["blocks"] == 1
    assert len(totals["generic"]) == 32
    assert totals["ratio"] >= totals["best_generic_ratio"], (encoded, totals["best_generic"])
    sizes = generic_sizes(streams)
    best = min(sizes, key=sizes.__getitem__)
    assert encoded <= sizes[best], f"{name}: stream set {encoded} B, {best} {sizes[best]} B"
    # Round trip through a native trace.
    native, back = tmp_path / "t.ptrace", tmp_path / "back.csv"
    for src, dst in [(trace, native), (native, back)]:
        done = run("convert", str(src), "-o", str(dst))
        assert done.returncode == 0, done.stderr
    got = decoded_streams(back)
    assert got == {(m, f, r, op): reqs for m, f, r, op, reqs in streams}
