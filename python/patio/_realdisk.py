"""Concurrent cold reads on the real disk, for benchmarks beside the storage model.

The storage model's clients are processes reading at once; here they are too: one forked
process per client, each reading its own list of byte extents from its file with
``pread``, all released together by a barrier after every file was fsynced and dropped
from the page cache (:mod:`patio._coldcache`, whose residency check is reported). The
wall time is from the earliest client start to the latest client end, as the
simulator's makespan is.

A benchmark that compares layouts by their access patterns may read every layout's
extents from the same files: the disk sees the offsets and lengths, not what the bytes
mean, so reading layout L's extents of a file is the I/O of reading a file written in
layout L. :func:`write_files` writes real data (never sparse: holes read as zeros with no
disk I/O).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from patio import _coldcache

_BLOCK = 8 << 20


@dataclass(frozen=True)
class ClientRead:
    """One client's read: ``(offsets, lengths)`` extents of ``path``, one ``pread``
    each, in the order given (callers pass them sorted and merged, as the simulator's
    clients issue them)."""

    path: Path
    offsets: np.ndarray
    lengths: np.ndarray


def write_files(paths: Sequence[Path], size: int) -> None:
    """Each of ``paths`` as ``size`` bytes of pseudo-random data, fsynced (kept when it
    already has that size)."""
    block = np.random.default_rng(0).integers(0, 256, _BLOCK, dtype=np.uint8).tobytes()
    for p in paths:
        if p.is_file() and p.stat().st_size == size:
            continue
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "wb") as f:
            left = size
            while left > 0:
                n = min(left, _BLOCK)
                f.write(block[:n])
                left -= n
            f.flush()
            os.fsync(f.fileno())


def _client(read: ClientRead, barrier: Any, out: Any) -> None:
    """One client process: open, wait for the others, read; sends ``(t0, t1, got, want)``
    or an error message (and breaks the barrier, so that no client waits for it)."""
    offs = np.asarray(read.offsets, np.int64).tolist()
    lens = np.asarray(read.lengths, np.int64).tolist()
    try:
        fd = os.open(read.path, os.O_RDONLY)
    except OSError as e:
        barrier.abort()
        out.send(f"cannot open {read.path}: {e.strerror}")
        return
    try:
        barrier.wait()
        t0 = time.perf_counter()
        got = 0
        for o, n in zip(offs, lens):
            got += len(os.pread(fd, n, o))
        t1 = time.perf_counter()
        out.send((t0, t1, got, sum(lens)))
    except threading.BrokenBarrierError:
        out.send("another client failed")
    except OSError as e:
        out.send(f"reading {read.path}: {e.strerror}")
    finally:
        os.close(fd)
        out.close()


def run_clients(reads: Sequence[ClientRead]) -> dict[str, float]:
    """Every client of ``reads`` in its own process, at once, cold: ``{"seconds",
    "bytes", "resident"}`` (``resident``: the files' page-cache fraction left after the
    drop, about 0 where it worked). Raises :class:`OSError` when a client read fewer
    bytes than its extents hold or failed."""
    resident = _coldcache.drop(sorted({str(r.path) for r in reads}))
    ctx = mp.get_context("fork")
    barrier = ctx.Barrier(len(reads))
    pipes, procs = [], []
    for r in reads:
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_client, args=(r, barrier, send), daemon=True)
        p.start()
        send.close()
        pipes.append(recv)
        procs.append(p)
    answers = []
    for recv, p, r in zip(pipes, procs, reads):
        try:
            answers.append(recv.recv())
        except EOFError:
            answers.append(f"the client reading {r.path} ended without an answer")
        p.join()
    errors = [a for a in answers if isinstance(a, str)]
    if errors:  # the cause first: "another client failed" follows from it
        raise OSError(f"real-disk read: {min(errors, key=lambda e: e.startswith('another'))}")
    results = answers
    for (_, _, got, want), r in zip(results, reads):
        if got != want:
            raise OSError(f"real-disk read of {r.path}: {got} of {want} bytes read")
    return {
        "seconds": max(t1 for _, t1, _, _ in results) - min(t0 for t0, _, _, _ in results),
        "bytes": float(sum(g for _, _, g, _ in results)),
        "resident": resident,
    }


__all__ = ["ClientRead", "run_clients", "write_files"]
