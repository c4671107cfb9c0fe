"""The layout knowledge base where it is shared: many processes recording at once, merges
racing recorders, recorders killed mid-write, two FUSE mounts of one directory, and the
record-log format (round trip, every truncation point, every damaged byte).

The reference model of every concurrent test is the list of reads each process made:
after the final merge the knowledge base must count each of them exactly once (per
pattern family: reads, members, processes), and no record log may be left behind.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from patio._binary import patio_binary
from patio.layout import kblog
from patio.layout.kb import KnowledgeBase, kb_dir
from patio.layout.selection import Hyperslab, Selection
from test_mount_trace import Mount, records, scratch, started

SHAPE = (10, 8)


def make_file(path: Path) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.arange(80.0).reshape(SHAPE))
        f.create_dataset("b", data=np.arange(80.0).reshape(SHAPE))


def plan(worker: int, n: int) -> list[tuple[str, str, int]]:
    """The reads of one worker: (dataset, "row"|"col", index). Rows of /a are one family
    (start along axis 0), columns of /b another (start along axis 1)."""
    out = []
    for i in range(n):
        if (i + worker) % 3:
            out.append(("/a", "row", (i * 7 + worker) % SHAPE[0]))
        else:
            out.append(("/b", "col", (i * 5 + worker) % SHAPE[1]))
    return out


def model(workers: int, n: int) -> dict[tuple[str, str], tuple[int, set[int]]]:
    """Reads and members per family, from the plans alone."""
    out: dict[tuple[str, str], tuple[int, set[int]]] = {}
    for w in range(workers):
        for dset, kind, k in plan(w, n):
            reads, members = out.get((dset, kind), (0, set()))
            members.add(k)
            out[(dset, kind)] = (reads + 1, members)
    return out


def read_through_h5(path: str, worker: int, n: int) -> None:
    import patio.h5 as ph5

    with ph5.File(path) as f:
        for dset, kind, k in plan(worker, n):
            got = f[dset][k, :] if kind == "row" else f[dset][:, k]
            want = np.arange(80.0).reshape(SHAPE)
            assert np.array_equal(got, want[k, :] if kind == "row" else want[:, k])


def merge_loop(path: str, seconds: float) -> None:
    """A merger racing the recorders (as `layout status` run meanwhile would)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        with KnowledgeBase(path) as kb:
            kb.compact()
        time.sleep(0.01)


def check_against_model(path: Path, workers: int, n: int) -> None:
    with KnowledgeBase(path) as kb:
        kb.compact()
        got: dict[tuple[str, str], tuple[int, set[int], int]] = {}
        for p in kb.patterns():
            kind = "row" if p.axis == 0 else "col"
            assert (p.dset, kind) not in got, "one family per dataset"
            got[(p.dset, kind)] = (p.reads, {int(s) for s in p.starts}, p.procs)
        want = model(workers, n)
        assert {k: v[:2] for k, v in got.items()} == want
        assert all(procs == workers for *_, procs in got.values())
        assert dict(kb.datasets()) == {d: r for (d, _), (r, _) in want.items()}
        assert kb.raw_rows() == 0
        assert kb.pending_logs() == 0
        assert kb.db.execute("SELECT COUNT(*) FROM record_log").fetchone()[0] == 0


# ------------------------------------------------------------ many processes at once
def test_many_processes_record_at_once_while_others_merge(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """8 recorders x 400 reads through patio.h5, beside the data (no PATIO_LAYOUT_DIR),
    with two processes merging in a loop meanwhile: every read counted exactly once."""
    monkeypatch.delenv("PATIO_LAYOUT_DIR", raising=False)
    p = tmp_path / "shared.h5"
    make_file(p)
    ctx = multiprocessing.get_context("spawn")
    mergers = [ctx.Process(target=merge_loop, args=(str(p), 6.0)) for _ in range(2)]
    procs = [ctx.Process(target=read_through_h5, args=(str(p), w, 400)) for w in range(8)]
    for pr in mergers + procs:
        pr.start()
    for pr in procs + mergers:
        pr.join(120)
        assert pr.exitcode == 0
    assert kb_dir(p) == tmp_path / ".patio-layout" / "shared.h5"
    check_against_model(p, 8, 400)
    # The database is a rollback-journal one (never WAL): nothing needs shared memory.
    db = sqlite3.connect(kb_dir(p) / "kb.sqlite")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    db.close()
    assert not list(kb_dir(p).glob("kb.sqlite-shm"))


# ------------------------------------------------------------ killed recorders
RECORDER = """
import os, sys
from patio.layout.kb import KnowledgeBase
from patio.layout.selection import Hyperslab, Selection
kb = KnowledgeBase(sys.argv[1])
batch, batches = int(sys.argv[2]), int(sys.argv[3])
sel = Selection.hyperslab((10, 8), Hyperslab.box((3, 0), (4, 8)))
for i in range(batches):
    kb.record([("/a", sel, 64, os.getpid(), "r", float(i), 0.0)] * batch)
    print(i + 1, flush=True)
if sys.argv[4] == "exit":
    os._exit(0)  # no end frame: as if killed between two batches
kb.close()
"""


def record_in_child(path: Path, batch: int, batches: int, end: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", RECORDER, str(path), str(batch),
                             str(batches), end], stdout=subprocess.PIPE, text=True)


def total_reads(path: Path) -> int:
    with KnowledgeBase(path) as kb:
        kb.compact()
        return sum(p.reads for p in kb.patterns())


def test_sigkill_mid_recording_loses_at_most_the_unfinished_batch(tmp_path: Path,
                                                                   layout_dir: Path) -> None:
    p = tmp_path / "k.h5"
    make_file(p)
    other = record_in_child(p, 50, 4, "close")
    assert other.wait(60) == 0
    child = record_in_child(p, 100, 100_000, "close")
    assert child.stdout is not None
    done = 0
    while done < 20:
        done = int(child.stdout.readline())
    child.send_signal(signal.SIGKILL)
    child.wait(30)
    done = max([done] + [int(x) for x in child.stdout.read().split()])
    got = total_reads(p) - 200  # the other recorder's four batches are all there
    assert got in (done * 100, (done + 1) * 100)  # killed after a write, before its print
    with KnowledgeBase(p) as kb:
        assert kb.pending_logs() == 0  # the killed writer is gone: its log merged, removed


def frame_ends(log: Path) -> list[int]:
    dec, _ = kblog.read_log(log, 0)
    assert dec.problem is None
    return [f.end for f in dec.frames]


@pytest.mark.parametrize("damage", ["truncate", "garbage", "flip"])
def test_a_torn_tail_loses_only_its_own_record(tmp_path: Path, layout_dir: Path,
                                               damage: str) -> None:
    p = tmp_path / "t.h5"
    make_file(p)
    for batch, batches in ((50, 10), (40, 5)):
        assert record_in_child(p, batch, batches, "exit").wait(60) == 0
    logs = sorted((kb_dir(p) / "records").glob("*.log"))
    assert len(logs) == 2
    victim = next(x for x in logs if len(frame_ends(x)) == 10)
    ends = frame_ends(victim)
    data = victim.read_bytes()
    cut = (ends[5] + ends[6]) // 2  # inside the seventh frame: six survive
    if damage == "truncate":
        victim.write_bytes(data[:cut])
    elif damage == "garbage":
        victim.write_bytes(data[:ends[5]] + os.urandom(300))
    else:  # a flipped byte inside the seventh frame: it and everything after are dropped
        victim.write_bytes(data[:cut] + bytes([data[cut] ^ 0x40]) + data[cut + 1:])
    assert total_reads(p) == 6 * 50 + 5 * 40
    with KnowledgeBase(p) as kb:
        assert kb.pending_logs() == 0


def test_a_log_merged_partly_is_continued_not_repeated(tmp_path: Path,
                                                        layout_dir: Path) -> None:
    """A merge that meets a half-written frame stops before it; the next merge starts
    there (the writer is alive, so its log stays until its end frame)."""
    p = tmp_path / "m.h5"
    make_file(p)
    sel = Selection.hyperslab(SHAPE, Hyperslab.box((2, 0), (3, 8)))
    kb = KnowledgeBase(p)
    kb.record([("/a", sel, 64, 1, "r", 0.0, 0.0)] * 30)
    log = kb.log.path
    assert log is not None
    whole = log.read_bytes()
    frame = kblog.encode_reads([("/a", sel.to_json(), None, 8, 64, 2, "r", 1.0, 0.0)] * 7)
    with open(log, "ab") as f:
        f.write(frame[:-5])  # a writer in the middle of its write
    other = KnowledgeBase(p)
    assert other.merge() == 30
    with open(log, "ab") as f:
        f.write(frame[-5:])
    assert other.merge() == 7
    assert len(log.read_bytes()) == len(whole) + len(frame)
    other.close()
    kb.close()  # the end frame; the log is then merged (nothing new) and removed
    assert total_reads(p) == 37
    assert not log.exists()


def test_a_schema_1_database_in_wal_mode_is_taken_over(tmp_path: Path,
                                                        layout_dir: Path) -> None:
    p = tmp_path / "w.h5"
    make_file(p)
    kb = KnowledgeBase(p)
    sel = Selection.hyperslab(SHAPE, Hyperslab.box((1, 0), (2, 8)))
    kb.record([("/a", sel, 64, 1, "r", 0.0, 0.0)])
    kb.compact()
    kb.db.execute("UPDATE meta SET value='1' WHERE key='schema_version'")
    kb.db.execute("DROP TABLE record_log")
    kb.db.close()
    old = sqlite3.connect(kb.path)
    assert old.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    old.close()
    with KnowledgeBase(p) as kb2:
        assert kb2.db.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert kb2.db.execute("SELECT value FROM meta").fetchone()[0] == "2"
        assert sum(x.reads for x in kb2.patterns()) == 1


# ------------------------------------------------------------ two mounts
class SharedMount(Mount):
    """A `patio mount trace` of a given source directory at a mountpoint of its own."""

    def __init__(self, src: Path, mnt: Path, out: Path) -> None:
        self.src, self.mnt, self.out = src, mnt, out
        mnt.mkdir()
        mnt.chmod(0o755)
        self.start([patio_binary(), "mount", "trace", str(src), str(mnt), "--output", str(out)])


READER = ("import sys; sys.path.insert(0, sys.argv[3]);"
          "from test_layout_kb_shared import read_through_h5 as r;"
          "r(sys.argv[1], int(sys.argv[2]), 300)")


def test_recording_through_two_mounts_of_one_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two `patio mount trace` mounts of one source directory (as two nodes see one
    file system: each mount locks on its own, so POSIX locks taken through one are not
    seen through the other); four recorders through each at once, the knowledge base
    beside the data, so its logs, lock and database are reached through both mounts."""
    monkeypatch.delenv("PATIO_LAYOUT_DIR", raising=False)
    with scratch("patio-kb-two-", shared=True) as base, started(SharedMount) as start:
        src = base / "src"
        src.mkdir()
        src.chmod(0o755)
        make_file(src / "f.h5")
        mounts = [start(src, base / f"mnt{i}", base / f"t{i}.csv") for i in (1, 2)]
        env = {k: v for k, v in os.environ.items() if k != "PATIO_LAYOUT_DIR"}
        here = str(Path(__file__).parent)
        procs = [subprocess.Popen([sys.executable, "-c", READER,
                                   str(mounts[w % 2].mnt / "f.h5"), str(w), here], env=env)
                 for w in range(8)]
        for pr in procs:
            assert pr.wait(180) == 0
        for m in mounts:
            m.stop()
        check_against_model(src / "f.h5", 8, 300)
        # Both mounts carried the recording: each trace has writes to record logs.
        for m in mounts:
            logs = {r["file"] for r in records(m.out) if r["op"] == "write"
                    and r["file"].startswith(".patio-layout/f.h5/records/")}
            assert len(logs) >= 4, logs


# ------------------------------------------------------------ the format
text = st.text(st.characters(codec="utf-8"), max_size=12)
rows_st = st.lists(st.tuples(
    text, text, st.one_of(st.none(), st.binary(min_size=1, max_size=20)),
    st.integers(0, 2**62), st.integers(0, 2**62), st.integers(-2**31, 2**31), text,
    st.floats(allow_nan=False), st.floats(allow_nan=False)), max_size=6)


@settings(max_examples=200, deadline=None)
@given(st.lists(rows_st, max_size=6), st.booleans(), st.data())
def test_record_log_round_trip_and_every_truncation(frames: list[list[Any]], end: bool,
                                                    data: st.DataObject) -> None:
    blob = kblog.header() + b"".join(kblog.encode_reads(r) for r in frames)
    if end:
        blob += kblog.encode_end()
    assert kblog.check_header(blob[:kblog.HEADER.size], "x")
    h = kblog.HEADER.size
    whole = kblog.decode(blob[h:], h)
    assert whole.problem is None and whole.end == len(blob)
    assert [f.rows for f in whole.frames if f.kind == kblog.KIND_READS] == frames
    assert whole.finished == end
    ends = [f.end for f in whole.frames]
    # Any truncation point: exactly the frames that end before it, and reading stops
    # at the last of them (a torn tail is reported, never decoded).
    cut = data.draw(st.integers(h, len(blob)))
    part = kblog.decode(blob[h:cut], h)
    kept = [e for e in ends if e <= cut]
    assert [f.end for f in part.frames] == kept
    assert part.end == (kept[-1] if kept else h)
    assert (part.problem is None) == (cut in kept or cut == h)
    # Any damaged byte: the frames before the one it hits survive, that one does not.
    if len(blob) > h:
        at = data.draw(st.integers(h, len(blob) - 1))
        bad = bytearray(blob)
        bad[at] ^= data.draw(st.integers(1, 255))
        hurt = kblog.decode(bytes(bad[h:]), h)
        before = [e for e in ends if e <= at]
        assert [f.end for f in hurt.frames] == before
        assert hurt.problem is not None


def test_record_log_headers(tmp_path: Path) -> None:
    assert not kblog.check_header(kblog.header()[:5], "x")  # a writer killed at once
    with pytest.raises(kblog.LogError, match="not a patio record log"):
        kblog.check_header(b"SQLite f", "x")
    newer = kblog.HEADER.pack(kblog.MAGIC, kblog.VERSION + 1, 0)
    with pytest.raises(kblog.LogError, match=f"version {kblog.VERSION + 1}"):
        kblog.check_header(newer, "x")
    assert Counter(kblog.writer_gone(n, time.time()) for n in (
        f"{kblog.host_name()}.{os.getpid()}-ab.log",  # this process: alive
        "otherhost.1-ab.log",  # another host, just written: assumed alive
    )) == Counter({False: 2})
    assert kblog.writer_gone("otherhost.1-ab.log", time.time() - kblog.IDLE_SECONDS - 1)


def test_a_database_lock_left_by_a_killed_process_is_broken(tmp_path: Path,
                                                             layout_dir: Path) -> None:
    """SQLite's dot-file lock (``kb.sqlite.lock``) of a process killed inside a
    transaction: a fresh one is respected (the database is busy), a stale one broken."""
    p = tmp_path / "l.h5"
    make_file(p)
    sel = Selection.hyperslab(SHAPE, Hyperslab.box((4, 0), (5, 8)))
    with KnowledgeBase(p) as kb:
        kb.record([("/a", sel, 64, 1, "r", 0.0, 0.0)] * 3)
    lock = kb_dir(p) / "kb.sqlite.lock"
    kb = KnowledgeBase(p)
    kb.db.execute("PRAGMA busy_timeout=200")  # wait little for the lock
    lock.mkdir()
    with pytest.raises(sqlite3.OperationalError, match="locked"):
        kb.compact()
    old = time.time() - 120
    os.utime(lock, (old, old))
    assert kb.compact() == 3
    assert not lock.exists()
    kb.close()
    lock.mkdir()
    os.utime(lock, (old, old))
    with KnowledgeBase(p) as kb:  # opening breaks it too
        assert sum(x.reads for x in kb.patterns()) == 3


def test_merges_are_split_into_bounded_transactions(tmp_path: Path, layout_dir: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A backlog larger than one merge transaction takes several, each advancing the
    logs' offsets with the rows it inserted: the total is still exact."""
    from patio.layout import kb as kbmod

    monkeypatch.setattr(kbmod, "MERGE_ROWS", 15)
    p = tmp_path / "s.h5"
    make_file(p)
    sel = Selection.hyperslab(SHAPE, Hyperslab.box((6, 0), (7, 8)))
    writers = [KnowledgeBase(p), KnowledgeBase(p)]
    for i in range(4):
        writers[0].record([("/a", sel, 64, 1, "r", float(i), 0.0)] * 10)
    writers[1].record([("/a", sel, 64, 2, "r", 9.0, 0.0)] * 15)
    merger = KnowledgeBase(p)
    commits = []
    real = merger.transaction
    monkeypatch.setattr(merger, "transaction", lambda: commits.append(1) or real())
    assert merger.merge() == 55
    # Whole frames, until 15 rows are passed: 10+10 | 10+10 | 15.
    assert len(commits) == 3
    merger.close()
    for w in writers:
        w.close()
    assert total_reads(p) == 55


def test_rows_of_logs_removed_by_a_killed_merge_go_a_day_later(tmp_path: Path,
                                                                layout_dir: Path) -> None:
    """A merger killed between removing a log and forgetting its offset leaves a
    ``record_log`` row; it is dropped once it is a day old, never while a log of that
    name may still be listed late (NFS directory caching)."""
    p = tmp_path / "r.h5"
    make_file(p)
    with KnowledgeBase(p) as kb:
        kb.record([("/a", Selection.hyperslab(SHAPE, Hyperslab.box((0, 0), (1, 8))), 64, 1,
                    "r", 0.0, 0.0)])
    with KnowledgeBase(p) as kb:
        with kb.transaction() as db:
            db.execute("INSERT INTO record_log VALUES('h.1-aa.log', 99, ?)", (time.time(),))
            db.execute("INSERT INTO record_log VALUES('h.2-bb.log', 99, ?)",
                       (time.time() - kblog.IDLE_SECONDS - 5,))
        kb.record([("/a", Selection.hyperslab(SHAPE, Hyperslab.box((0, 0), (1, 8))), 64, 1,
                    "r", 0.0, 0.0)])  # a log to merge, so that a merge transaction runs
        kb.merge()
        names = [r[0] for r in kb.db.execute("SELECT name FROM record_log")]
        assert "h.1-aa.log" in names and "h.2-bb.log" not in names
    assert total_reads(p) == 2


def test_closing_recorders_merge_once_enough_logs_wait(tmp_path: Path, layout_dir: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A closing recorder leaves its finished log to a later merge until
    MERGE_AT_CLOSE_LOGS logs wait; the one that finds that many merges them all, and
    every read is counted once."""
    from patio.layout import kb as kbmod

    monkeypatch.setattr(kbmod, "MERGE_AT_CLOSE_LOGS", 4)
    p = tmp_path / "c.h5"
    make_file(p)
    sel = Selection.hyperslab(SHAPE, Hyperslab.box((1, 0), (2, 8)))
    for i in range(3):
        kb = KnowledgeBase(p)
        kb.record([("/a", sel, 64, 1, "r", float(i), 0.0)] * (i + 1))
        kb.close()
        assert kb.pending_logs() == i + 1  # finished, not merged
        with KnowledgeBase(p) as peek:
            assert peek.raw_rows() == 0 and not peek.patterns()
    kb = KnowledgeBase(p)
    kb.record([("/a", sel, 64, 1, "r", 9.0, 0.0)] * 4)
    kb.close()  # the fourth log: all four merged and removed
    assert kb.pending_logs() == 0
    with KnowledgeBase(p) as after:
        assert after.raw_rows() == 1 + 2 + 3 + 4
    assert total_reads(p) == 10
