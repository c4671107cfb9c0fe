"""What patio's read path costs on top of the read itself (``patio bench layout
--kernel overhead``): the decision's time per selection shape, and a molecular-dynamics
analysis workload read through h5py and through ``patio.h5`` in one run.

* ``overhead_us`` - per selection (a box, a strided slab, a 2,000-entry sorted fancy
  index across a 3-D dataset, 10^4 points): ``first_us``, the decision for a selection
  not seen before (pricing every eligible copy through the layout core), and
  ``repeat_us``, what ``patio.h5`` spends before reading a selection it has seen (the
  source's version check, the key of the index arguments, the remembered decision).
  Medians of repeated timings; ``blocks`` is the size of the selection's description,
  ``replicas`` how many replicas the decision weighs (each concatenated one adds a
  candidate, a split one pricing the rest of the original).
* ``md`` - a synthetic trajectory, positions ``(frames, atoms, 3)`` float32 chunked one
  frame per chunk, read as MD analysis tools read it: an atom selection (a sorted fancy
  index of a tenth of the atoms) across all frames, a quarter of the atoms' x
  coordinate, every other frame of the second half, single atoms across all frames
  (60 reads). Run 1 is recorded and replicas are built from it (budget 100 %); then
  run 1 again (``replay``) and a run with other atoms and frames drawn (``heldout``)
  are timed through h5py and ``patio.h5``, from the page cache (best of 3) and from
  the disk with the files dropped from the page cache first (``cold``).
* :func:`record_overhead` - what recording adds to each read of a thesis kernel
  (``patio bench layout``'s ``record_ms_per_read``), and :func:`read_pair`, the
  alternating pair of reads it and ``bench/h5_read_overhead.py`` time.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np


def write_trajectory(path: str, frames: int, atoms: int, compression: str | None = None
                     ) -> None:
    """Positions ``(frames, atoms, 3)`` float32, one frame per chunk."""
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("pos", (frames, atoms, 3), "f4", chunks=(1, atoms, 3),
                             compression=compression)
        for t in range(frames):
            d[t] = rng.random((atoms, 3), dtype=np.float32)


def md_reads(seed: int, frames: int, atoms: int) -> list[Any]:
    """The 60 index arguments of one analysis run (draw ``seed``)."""
    rng = np.random.default_rng(seed)
    reads: list[Any] = []
    for _ in range(15):
        reads.append((slice(None), np.sort(rng.choice(atoms, atoms // 10, replace=False)),
                      slice(None)))
        reads.append((slice(None), slice(0, atoms // 4), 0))
        start = frames // 2 + int(rng.integers(2))
        reads.append((slice(start, None, 2),))
        reads.append((slice(None), int(rng.integers(atoms)), slice(None)))
    return reads


def read_pair(h5py_read: Callable[[], Any], patio_read: Callable[[], Any], i: int
              ) -> tuple[float, float]:
    """One read through h5py and the same through ``patio.h5``, back to back, h5py first
    when ``i`` is odd: ``(h5py seconds, patio.h5 seconds)``."""
    first, second = (h5py_read, patio_read) if i % 2 else (patio_read, h5py_read)
    t0 = time.perf_counter()
    first()
    t1 = time.perf_counter()
    second()
    t2 = time.perf_counter()
    return (t1 - t0, t2 - t1) if i % 2 else (t2 - t1, t1 - t0)


def record_overhead(path: str, dset: str, reads: list[Any], layout_dir: str, passes: int
                    ) -> dict[str, float]:
    """What ``patio.h5`` (recording on, no replica) adds to reads ``f[dset][args]`` of
    the file at ``path`` over h5py, per read. ``passes`` times, both files are opened
    (recording into ``layout_dir`` the first time, into a scratch directory beside it
    after), every read is issued through both back to back (:func:`read_pair`, the
    order alternating) and the files are closed (the records' flush: encoding, the
    record log). ``per_read_s``: the median of the per-read differences, each pass's
    first read aside; ``per_open_s``: the median over passes of the differences of
    opening, the first read and closing, less one ordinary read's; ``paired_s``:
    ``per_read_s + per_open_s / len(reads)`` (medians of paired differences cancel the
    read's own time and most of a shared machine's noise, but also count where
    patio.h5's path is cheaper than h5py's, as a cached lookup). ``record_s``: patio.h5's
    own time per read, timed inside it (``_Session.own_s``: all but h5py's open,
    lookups and data reads; the flush, the session's open and close included), the
    median over passes."""
    import patio.h5 as ph5

    scratch = layout_dir + ".timing"
    diffs: list[float] = []
    fixed: list[float] = []
    own: list[float] = []
    saved = os.environ.get("PATIO_LAYOUT_DIR")
    try:
        for n in range(passes):
            os.environ["PATIO_LAYOUT_DIR"] = layout_dir if n == 0 else scratch
            files: list[Any] = [None, None]

            def open_h5py(files: list[Any] = files) -> None:
                files[0] = h5py.File(path)

            def open_patio(files: list[Any] = files) -> None:
                files[1] = ph5.File(path)
            h_open, p_open = read_pair(open_h5py, open_patio, n)
            hf, pf = files
            first = 0.0
            for i, a in enumerate(reads):
                h, p = read_pair(lambda a=a, f=hf: f[dset][a], lambda a=a, f=pf: f[dset][a], n + i)
                if i == 0:
                    first = p - h
                else:
                    diffs.append(p - h)
            h_close, p_close = read_pair(hf.close, pf.close, n)
            fixed.append((p_open - h_open) + first + (p_close - h_close))
            own.append(pf._session.own_s / max(1, len(reads)))
    finally:
        if saved is None:
            os.environ.pop("PATIO_LAYOUT_DIR", None)
        else:
            os.environ["PATIO_LAYOUT_DIR"] = saved
    per_read = statistics.median(diffs) if diffs else 0.0
    per_open = statistics.median(fixed) - per_read
    return {"per_read_s": per_read, "per_open_s": per_open,
            "paired_s": per_read + per_open / max(1, len(reads)),
            "record_s": statistics.median(own) if own else 0.0}


def _median_us(fn: Any, n: int) -> float:
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def decision_overhead(path: str, frames: int, atoms: int) -> list[dict[str, Any]]:
    """``overhead_us`` rows for the selection shapes above on the file at ``path``
    (whose replicas are built)."""
    import patio.h5 as ph5
    from patio.h5 import _args_key

    from . import h5sel
    from .decide import Decider

    rng = np.random.default_rng(5)
    mask = np.zeros((frames, atoms, 3), bool)
    mask.reshape(-1)[rng.choice(mask.size, 10_000, replace=False)] = True
    shapes = {
        "box": (slice(10, 20), slice(100, 600), slice(None)),
        "strided slab": (slice(None, None, 4), slice(None, None, 7), 0),
        "fancy index 2000 x 3-D": (slice(None), np.sort(rng.choice(atoms, 2000, replace=False)),
                                   slice(None)),
        "points 10^4": (mask,),
    }
    rows = []
    with ph5.File(path) as f:
        d = f["pos"]
        session = f._session
        decider = session.decider(d._d)
        for name, args in shapes.items():
            sel, _ = h5sel.select(d._d, args)
            first = None
            if decider is not None:
                # A new decider per timing (made before it): its memo is empty, as for
                # a selection never seen.
                fresh = iter([Decider(d._d, decider.replicas, decider.model, decider.consts)
                              for _ in range(5)])

                def decide(sel: Any = sel, fresh: Any = fresh) -> None:
                    next(fresh).choose(sel)
                first = _median_us(decide, 5)
            d[args]  # remembered by patio.h5
            memo = session.parsed[d._d.name]

            def repeat(memo: Any = memo, args: Any = args) -> None:
                session.decider(d._d)
                memo.get(_args_key(args))
            rows.append({"selection": name, "blocks": int(sel.native().nblocks()),
                         "replicas": len(decider.replicas) if decider is not None else 0,
                         "first_us": first, "repeat_us": _median_us(repeat, 200)})
    return rows


def md_workload(dirpath: str, frames: int = 200, atoms: int = 20_000) -> dict[str, Any]:
    """The MD workload: record run 1, build, time replay and held-out runs."""
    import patio.h5 as ph5

    from .bench import _time_reads
    from .cli import main as layout_main

    path = os.path.join(dirpath, "trajectory.h5")
    write_trajectory(path, frames, atoms)
    train, heldout = md_reads(1, frames, atoms), md_reads(2, frames, atoms)
    _time_reads(lambda: ph5.File(path), "pos", train, [])
    with open(os.devnull, "w") as null:
        import contextlib

        with contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
            code = layout_main(["build", path, "--budget", "100%"])
    if code != 0:
        raise RuntimeError(f"patio layout build {path} failed ({code})")
    layout_dir = os.path.join(dirpath, ".patio-layout")
    files = [path] + [os.path.join(r, n) for r, _, ns in os.walk(layout_dir) for n in ns
                      if n.endswith(".h5")]
    out: dict[str, Any] = {"frames": frames, "atoms": atoms, "reads": len(train),
                           "file_bytes": os.path.getsize(path)}
    for label, reads in (("replay", train), ("heldout", heldout)):
        warm_h, warm_p = [], []
        for _ in range(3):
            warm_h.append(_time_reads(lambda: h5py.File(path), "pos", reads, []))
            warm_p.append(_time_reads(lambda: ph5.File(path), "pos", reads, []))
        # _time_reads drops `files` from the page cache before it starts.
        cold_h = _time_reads(lambda: h5py.File(path), "pos", reads, files)
        cold_p = _time_reads(lambda: ph5.File(path), "pos", reads, files)
        out[label] = {"h5py_s": min(warm_h), "patio_s": min(warm_p),
                      "cold_h5py_s": cold_h, "cold_patio_s": cold_p}
    out["overhead_us"] = decision_overhead(path, frames, atoms)
    return out
