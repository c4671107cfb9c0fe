"""``patio bench layout``: HDF5 layout replicas against the original read the best way
h5py allows, on reduced-scale versions of the thesis' kernels (scattered elements,
climate sub-planes, mass-spectrometry slices, ECoG label blocks; docs/BENCHMARKS.md),
and the cost model's agreement with measured times.

Per kernel, in one run: the kernel's clients read through ``patio.h5`` once (recorded),
``patio layout build`` logic picks replicas within the kernel's budget (``auto``), and
each forced layout is built on its own as well. Times:

* ``original_s`` / ``patio_s`` / ``repack_s`` - every client's read issued at once to the
  striped storage model (discrete-event simulation, parameters under ``store``): the
  original's flattened extents (one selection call per client, what HDF5 reads at best),
  the extents of the plan patio's decision picks, and a whole-file copy chunked with
  h5py's guessed chunk shape (the ``h5repack`` baseline);
* ``held_out`` - the decision learned from one random draw of the kernel's queries
  (``--seed``) and measured on another (``--seed + 1``): the headline; the in-sample
  rows measure the learned draw itself;
* ``storage`` - ``model`` (the striped storage model, ``--store``) or, with ``--real``,
  ``real``: the same requests read on the real files with ``pread`` (page-rounded and
  coalesced as the model issues them; original and patio alternated ``--real-reps``
  times, medians), each client's files fsynced and dropped from the page cache first (``resident_after_drop``: what the drop
  left); ``model_error`` is the model's speedup over the real one, and ``top1_real``
  counts the selections with several ways to be read whose modelled cheapest way was
  the fastest on the real disk (of ``top1_compared``; each way read cold);
* ``real_original_s`` / ``real_patio_s`` (in-sample model rows) - the reads end to end on
  the real disk, page cache dropped for the files first, h5py on the original against
  ``patio.h5``;
* ``overhead`` - patio's own CPU time per read (recording + decision), as a fraction of
  the modelled patio read time (``overhead_real``: of the real cold read time).
  ``record_ms_per_read``: patio.h5's own time per read on the learned draw, timed
  inside it (:func:`overhead.record_overhead`: all but h5py's open, lookups and data
  reads; the flush, opening and closing included); ``record_paired_ms_per_read``: the
  same reads against h5py's, the median of paired per-read differences plus a file's
  open, first read and close spread over the reads (``record_open_ms`` that fixed
  part); ``decide_ms_per_read``: the decisions timed directly in the core.

``model``: eq 3.1's prediction against the simulated time of every candidate layout for
the thesis' eight selections (SEL0-SEL7) plus random ones: how often its cheapest pick
is the measured cheapest (``top1_agreement``) and the mean Kendall tau of the rankings.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from .. import _coldcache as coldcache
from .._cli_args import add_store_options, store_model_of
from . import cost as costmodel
from . import device, h5sel, planner, replicas
from .decide import Decider
from .flatten import Chunked, Contiguous, flatten, merge_sorted
from .kb import KnowledgeBase
from .overhead import record_overhead
from .selection import Hyperslab, Selection
from .storage import physical_layout

KERNELS = ("elements", "climate", "massspec", "ecog", "model", "overhead")
#: Passes over a kernel's learned draw, each read issued through h5py and patio.h5 back
#: to back (the recording column is the median over passes of patio.h5's own time per
#: read, see :func:`overhead.record_overhead`).
RECORD_REPS = 7


def file_base(index: int, model: Any) -> int:
    """Where file ``index`` (0: the original) starts in the modelled address space: its
    own region, starting on target ``index mod targets`` (``Striping::file_base``, the
    one the mounts' storage model uses too)."""
    return int(model.file_base(index))


@dataclass
class Workload:
    """A kernel's file and its clients' reads (h5py index arguments): two random draws
    of the kernel's queries (seeds ``--seed`` and ``--seed + 1``)."""

    name: str
    path: str
    dset: str
    learn: list[Any]  # the draw recorded and planned from
    apply: list[Any]  # another draw (another seed): the held-out reads
    forced: tuple[str, ...]
    budget: str
    note: str
    #: The in-sample reads (default: ``learn`` itself).
    in_sample: list[Any] | None = None


# ------------------------------------------------------------------------ data
def _write(path: str, name: str, shape: tuple[int, ...], dtype: str,
           fill: Callable[[int, int], np.ndarray], chunks: Any = None) -> None:
    with h5py.File(path, "w") as f:
        d = f.create_dataset(name, shape=shape, dtype=dtype, chunks=chunks)
        rows = max(1, (64 << 20) // max(1, int(np.prod(shape[1:])) * np.dtype(dtype).itemsize))
        for lo in range(0, shape[0], rows):
            hi = min(shape[0], lo + rows)
            d[lo:hi] = fill(lo, hi).reshape((hi - lo,) + shape[1:])


def elements(dirpath: str, scale: float, clients: int, seeds: tuple[int, int]
             ) -> list[Workload]:
    """VPIC-like: scattered elements selected by an energy threshold, each client the
    selected elements of its own block; four thresholds in the thesis' proportions, and
    the partial-overlap case (replicas of the smallest query, the largest read). A draw
    moves each threshold by up to ±10 % of its fraction."""
    n = int(2**24 * scale)
    energy = np.random.default_rng(7).random(n, dtype=np.float32)
    path = os.path.join(dirpath, "vpic.h5")
    _write(path, "Energy", (n,), "f4", lambda lo, hi: energy[lo:hi])
    # Selected fractions 1 : 1.96 : 4.04 : 9.25 of 0.1 %.
    fracs = [0.001 * r for r in (1.0, 1.96, 4.04, 9.25)]
    block = n // clients

    def draw(seed: int) -> list[list[Any]]:
        rng = np.random.default_rng(seed)
        queries = []
        for frac in fracs:
            cut = 1.0 - frac * rng.uniform(0.9, 1.1)
            sel = [np.flatnonzero(energy[c * block:(c + 1) * block] > cut) + c * block
                   for c in range(clients)]
            queries.append([_points_arg(s, n) for s in sel])
        return queries

    learn, test = draw(seeds[0]), draw(seeds[1])
    out = [Workload(f"elements-A{i + 1}", path, "/Energy", learn[i], test[i], ("concat",),
                    "100%", f"{fracs[i] * 100:.3f} % of {n:,} float32 selected")
           for i in range(len(fracs))]
    out.append(Workload("elements-B", path, "/Energy", learn[0], test[3], ("concat",),
                        "100%", "replicas of A1's elements, A4 read (split reads)",
                        in_sample=learn[3]))
    return out


def _points_arg(lin: np.ndarray, n: int) -> Any:
    """h5py's point selection of the elements ``lin`` of a 1-D dataset (what a
    FastBit-style index hands to H5Sselect_elements)."""
    from h5py._hl.selections import PointSelection

    return (PointSelection((n,), points=np.asarray(lin, np.uint64)[:, None]),)


def climate(dirpath: str, scale: float, clients: int, seeds: tuple[int, int]
            ) -> list[Workload]:
    """Atmospheric-river-like: one client per time step reads a sub-plane (an ocean
    basin) of its step; a draw moves the basin's corner by up to ±2.5 % of each side."""
    steps, ny, nx = max(8, int(64 * scale)), 768, 1152
    path = os.path.join(dirpath, "climate.h5")
    _write(path, "IWV", (steps, ny, nx), "f8",
           lambda lo, hi: np.arange(lo * ny * nx, hi * ny * nx, dtype=np.float64))
    out = []
    rngs = [np.random.default_rng(sd) for sd in seeds]
    for q, frac in enumerate((0.05, 0.10, 0.15, 0.20), 1):
        side = np.sqrt(frac)
        h, w = int(ny * side), int(nx * side)
        draws = []
        for rng in rngs:
            y0 = ny // 5 + int(rng.integers(-ny // 40, ny // 40 + 1))
            x0 = nx // 3 + int(rng.integers(-nx // 40, nx // 40 + 1))
            draws.append([(t, slice(y0, y0 + h), slice(x0, x0 + w))
                          for t in range(min(steps, clients))])
        out.append(Workload(f"climate-Q{q}", path, "/IWV", draws[0], draws[1],
                            ("concat", "zorder"), "100%", f"{frac:.0%} sub-plane of "
                            f"{ny}x{nx} per step, {len(draws[0])} steps"))
    return out


def massspec(dirpath: str, scale: float, clients: int, seeds: tuple[int, int]
             ) -> list[Workload]:
    """Mass-spectrometry-image-like (x, y, m/z): A 25 consecutive m/z slices per
    client, B 3x3 spectra, C 20x20x(10000 M/133092) sub-volumes, two locations each;
    a draw places them at random."""
    nx, ny, m = 394, 518, max(64, int(256 * scale))
    path = os.path.join(dirpath, "msi.h5")
    _write(path, "cube", (nx, ny, m), "f4",
           lambda lo, hi: np.arange(lo * ny * m, hi * ny * m, dtype=np.float64).astype("f4"))
    dz = max(2, int(10000 * m / 133092))

    def draw(seed: int) -> tuple[list[Any], list[Any], list[Any]]:
        rng = np.random.default_rng(seed)
        a = [(slice(None), slice(None), slice(int(z), int(z) + 25))
             for z in rng.integers(0, m - 25, 2)]
        b = [(slice(int(x), int(x) + 3), slice(int(y), int(y) + 3), slice(None))
             for x, y in zip(rng.integers(0, nx - 3, clients), rng.integers(0, ny - 3, clients))]
        c = [(slice(int(x), int(x) + 20), slice(int(y), int(y) + 20),
              slice(int(z), int(z) + dz))
             for x, y, z in zip(rng.integers(0, nx - 20, 2), rng.integers(0, ny - 20, 2),
                                rng.integers(0, m - dz, 2))]
        return a, b, c

    (la, lb, lc), (ta, tb, tc) = draw(seeds[0]), draw(seeds[1])
    return [
        Workload("massspec-A", path, "/cube", la, ta, ("transposed", "hilbert", "concat"),
                 "100%", "25 m/z slices, 2 locations"),
        Workload("massspec-B", path, "/cube", lb, tb, ("concat",), "100%",
                 f"3x3 spectra, {len(lb)} clients"),
        Workload("massspec-C", path, "/cube", lc, tc, ("hilbert", "concat"), "100%",
                 f"20x20x{dz} sub-volumes, 2 locations"),
    ]


def ecog(dirpath: str, scale: float, clients: int, seeds: tuple[int, int]
         ) -> list[Workload]:
    """ECoG-like: rows x 256 float64 signals; each label owns equal-length row blocks at
    irregular gaps; a query reads the blocks of a set of labels (5-30 % of the rows)."""
    rows = int(131072 * scale)
    block = 16  # one event window: 16 samples x 256 channels (32 KiB)
    path = os.path.join(dirpath, "ecog.h5")
    _write(path, "ECoG", (rows, 256), "f8",
           lambda lo, hi: np.arange(lo * 256, hi * 256, dtype=np.float64))
    nblocks = rows // block
    labels = np.random.default_rng(5).integers(0, 24, nblocks)  # 24 labels over the blocks
    rngs = [np.random.default_rng(sd) for sd in seeds]
    out = []
    for q, frac in enumerate((0.05, 0.10, 0.20, 0.30), 1):
        k = max(1, round(24 * frac))
        draws = []
        for rng in rngs:
            reads = []
            for lab in rng.choice(24, k, replace=False):
                mask = np.zeros(rows, bool)
                for bi in np.flatnonzero(labels == lab):
                    mask[bi * block:(bi + 1) * block] = True
                reads.append((mask, slice(None)))
            draws.append(reads)
        out.append(Workload(f"ecog-{int(frac * 100)}pct", path, "/ECoG", draws[0], draws[1],
                            ("concat",), "100%", f"{k} of 24 labels, {rows:,} x 256 float64"))
    return out


# ------------------------------------------------------------------------ measuring
def _requests(layout: Any, sels: list[Selection], base: int = 0) -> list[list[tuple[Any, Any]]]:
    out = []
    for s in sels:
        e = merge_sorted(flatten(layout, s))
        out.append([(e.offsets.astype(np.uint64) + np.uint64(base), e.lengths.astype(np.uint64))])
    return out


def _plan_requests(decider: Decider, sels: list[Selection], ids: dict[int, int], model: Any
                   ) -> tuple[list[list[tuple[Any, Any]]], float, dict[str, int]]:
    """Each client's chosen plan as simulator requests, the decision CPU seconds, and
    how often each plan was chosen."""
    out, spent, chosen = [], 0.0, {}
    for s in sels:
        t0 = time.perf_counter()
        c = decider.choose(s)
        spent += time.perf_counter() - t0
        name = c.name.split("#")[0] + ("+original" if c.name.endswith("+original") else "")
        chosen[name] = chosen.get(name, 0) + 1
        reqs = []
        for ext, src in zip(c.extents, c.sources):
            base = 0 if src is None else file_base(ids[src.row.id], model)
            reqs.append((ext.offsets.astype(np.uint64) + np.uint64(base),
                         ext.lengths.astype(np.uint64)))
        out.append(reqs)
    return out, spent, chosen


def _time_reads(opener: Callable[[], Any], dset: str, reads: list[Any], files: list[str]) -> float:
    coldcache.drop(files)
    t0 = time.perf_counter()
    with opener() as f:
        d = f[dset]
        for args in reads:
            d[args]
    return time.perf_counter() - t0


# ------------------------------------------------------------------------ real disk
class RealDisk:
    """The model's requests on the real files: each client's extents (per file),
    rounded to the model's pages and coalesced where they touch (as the model issues
    them), read with ``pread`` right after the files it reads were fsynced and dropped
    from the page cache (:func:`patio._coldcache.drop`), one client after another (one
    process: a local disk serves one queue)."""

    def __init__(self, page: int = 4096, reps: int = 3) -> None:
        self.fds: dict[str, int] = {}
        self.page = page
        self.reps = reps
        self.resident = 0.0  # the largest resident fraction left after a drop

    def _runs(self, offs: Any, lens: Any) -> tuple[list[int], list[int]]:
        """Page-rounded extents, those that overlap or touch merged."""
        p = self.page
        lo = np.asarray(offs, np.int64) // p * p
        hi = -(-(np.asarray(offs, np.int64) + np.asarray(lens, np.int64)) // p) * p
        order = np.argsort(lo, kind="stable")
        lo, hi = lo[order], np.maximum.accumulate(hi[order])
        if len(lo) == 0:
            return [], []
        new = np.ones(len(lo), bool)
        new[1:] = lo[1:] > hi[:-1]
        starts = lo[new]
        ends = np.append(hi[np.flatnonzero(new)[1:] - 1], hi[-1])
        return starts.tolist(), (ends - starts).tolist()

    def compare(self, a: list[list[tuple[str, Any, Any]]], b: list[list[tuple[str, Any, Any]]]
                ) -> tuple[float, float]:
        """Median seconds of every client of ``a`` and of ``b``, measured alternately
        ``reps`` times."""
        ta, tb = [], []
        for _ in range(self.reps):
            ta.append(sum(self.read(parts) for parts in a))
            tb.append(sum(self.read(parts) for parts in b))
        return float(np.median(ta)), float(np.median(tb))

    def _fd(self, path: str) -> int:
        """An open descriptor of the file at ``path`` now (a replica evicted and built
        again under the same name is another file: reopened when the inode changed)."""
        fd = self.fds.get(path)
        if fd is not None and os.fstat(fd).st_ino != os.stat(path).st_ino:
            os.close(fd)
            fd = None
        if fd is None:
            fd = self.fds[path] = os.open(path, os.O_RDONLY)
        return fd

    def read(self, parts: list[tuple[str, Any, Any]]) -> float:
        """Cold seconds of one client's read: ``parts`` are (file, offsets, lengths)."""
        self.resident = max(self.resident, coldcache.drop(sorted({p for p, _, _ in parts})))
        runs = [(self._fd(path), *self._runs(offs, lens)) for path, offs, lens in parts]
        got = want = 0
        t0 = time.perf_counter()
        for fd, offs, lens in runs:
            for o, n in zip(offs, lens):
                got += len(os.pread(fd, n, o))
        elapsed = time.perf_counter() - t0
        for fd, offs, lens in runs:
            size = os.fstat(fd).st_size
            want += sum(max(0, min(o + n, size) - o) for o, n in zip(offs, lens))
        if got != want:
            raise OSError(f"real-disk read: {got} of {want} bytes read")
        return elapsed

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


def _parts(c: Any, original: str) -> list[tuple[str, Any, Any]]:
    """A candidate plan's reads as (file, offsets, lengths)."""
    return [(original if src is None else src.row.path, e.offsets, e.lengths)
            for e, src in zip(c.extents, c.sources)]


def _top1_real(decider: Decider, sels: list[Selection], path: str, disk: RealDisk
               ) -> tuple[int, int, int]:
    """For each selection with more than one way to read it: is the modelled cheapest
    the measured fastest on the real disk (strictly; and within 10 %)? Returns
    (selections compared, strict agreements, agreements within 10 %)."""
    compared = strict = near = 0
    for s in sels:
        cands = decider.candidates(s)
        if len(cands) < 2:
            continue
        modelled = [c.seconds for c in cands]
        real = [disk.read(_parts(c, path)) for c in cands]
        pick = int(np.argmin(modelled))
        compared += 1
        strict += real[pick] <= min(real)
        near += real[pick] <= min(real) * 1.10
    return compared, strict, near


# ------------------------------------------------------------------------ one kernel
def run_workload(w: Workload, model: Any, layout_dir: str, real: bool = False,
                 real_reps: int = 3) -> list[dict[str, Any]]:
    """The kernel's rows: per layout (auto and each forced one), the held-out draw
    (``held_out``: planned from ``w.learn``, measured on ``w.apply``) and the in-sample
    one (measured on ``w.learn``), on the model and, with ``real``, on the real disk."""
    kbdir = os.path.join(layout_dir, w.name)
    shutil.rmtree(kbdir, ignore_errors=True)
    os.environ["PATIO_LAYOUT_DIR"] = kbdir
    dev = device.model_device(model.params())
    kb = KnowledgeBase(w.path)
    kb.set_setting("device", dev)
    kb.close()
    # Recording (warm, no replica): patio.h5 against h5py read by read, RECORD_REPS
    # passes; the first records the learned draw into the knowledge base.
    os.environ["PATIO_LAYOUT"] = "on"
    rec = record_overhead(w.path, w.dset, w.learn, kbdir, RECORD_REPS)
    shutil.rmtree(kbdir + ".timing", ignore_errors=True)
    consts = costmodel.Constants.from_json(dev["constants"])
    draws = {}
    with h5py.File(w.path) as f:
        src = f[w.dset]
        orig_layout = physical_layout(src)
        for held_out, args in ((True, w.apply), (False, w.in_sample or w.learn)):
            sels = [h5sel.select(src, a)[0] for a in args]
            reqs = _requests(orig_layout, sels)
            draws[held_out] = (sels, reqs, model.simulate(reqs)["seconds"],
                               _repack_seconds(w, model, sels))
    disk = RealDisk(model.params()["page_size"], real_reps) if real else None
    rows = []
    try:
        for forced in ("auto",) + w.forced:
            rows.extend(_run_layout(w, forced, model, consts, draws, rec, disk))
    finally:
        if disk is not None:
            disk.close()
    return rows


def _run_layout(w: Workload, forced: str, model: Any, consts: Any, draws: dict[bool, Any],
                rec: dict[str, float], disk: RealDisk | None) -> list[dict[str, Any]]:
    import patio.h5 as ph5

    record_cpu = rec["record_s"]
    kb = KnowledgeBase(w.path)
    for r in kb.replicas():
        replicas.evict(kb, r.id)
    kb.set_setting("budget", planner.parse_budget(w.budget if forced == "auto" else "1000%"))
    plans = _evaluate(kb, w, model, consts)
    if forced != "auto":
        for dp in plans:
            dp.proposals = [p for p in dp.proposals if p.kind == forced]
    build, _, _ = planner.plan(plans, [], planner.budget_bytes(kb, os.path.getsize(w.path)))
    if forced != "auto":
        build = build[:1024]
    built = [replicas.build(kb, w.path, p.dset, p.kind, p.params, sel=p.sel,
                            axes_sets=p.axes_sets) for p in build]
    reps = [replicas.Replica.load(r) for r in kb.replicas(state="ready")]
    rep_bytes = sum(r.bytes for r in kb.replicas(state="ready"))
    meta_bytes = sum(r.meta_bytes for r in kb.replicas(state="ready"))
    kb.close()
    ids = {r.row.id: i + 1 for i, r in enumerate(reps)}
    kinds: dict[str, int] = {}
    for p in build:
        label = p.kind if p.kind == "concat" else p.label()
        kinds[label] = kinds.get(label, 0) + 1
    layout = ", ".join(f"{k} x{n}" if n > 1 else k for k, n in sorted(kinds.items())) \
        or "original"
    rows = []
    try:
        for held_out, (sels, orig_reqs, original, repack) in draws.items():
            with h5py.File(w.path) as f:
                decider = Decider(f[w.dset], reps, model, consts)
                reqs, decide_cpu, chosen = _plan_requests(decider, sels, ids, model)
                plans_real = [_parts(decider.choose(s), w.path) for s in sels] if disk else []
                top1 = _top1_real(decider, sels, w.path, disk) if disk is not None else None
            patio_s = model.simulate(reqs)["seconds"]
            cpu = decide_cpu / max(1, len(sels)) + record_cpu
            row: dict[str, Any] = {
                "name": w.name, "layout": forced if forced != "auto" else f"auto: {layout}",
                "storage": "model", "held_out": held_out,
                "original_s": original, "patio_s": patio_s,
                "speedup": original / patio_s if patio_s > 0 else float("inf"),
                "repack_s": repack, "overhead": cpu * len(sels) / patio_s if patio_s else 0.0,
                "cpu_ms_per_read": cpu * 1e3,
                "record_ms_per_read": record_cpu * 1e3,
                "record_open_ms": rec["per_open_s"] * 1e3,
                "record_paired_ms_per_read": rec["paired_s"] * 1e3,
                "decide_ms_per_read": decide_cpu / max(1, len(sels)) * 1e3,
                "clients": len(sels), "replicas": len(built), "replica_bytes": rep_bytes,
                "meta_bytes": meta_bytes, "chosen": chosen, "note": w.note,
            }
            if not held_out:
                # h5py on the original against patio.h5, end to end and cold; only on the
                # learned draw, which patio.h5 records again (reading the held-out draw
                # through it would record it into the knowledge base later plans use).
                files = [w.path] + [r.row.path for r in reps]
                reads = w.in_sample or w.learn
                row["real_original_s"] = _time_reads(lambda: h5py.File(w.path), w.dset,
                                                     reads, files)
                row["real_patio_s"] = _time_reads(lambda: ph5.File(w.path), w.dset,
                                                  reads, files)
                row["overhead_real"] = (cpu * len(sels) / row["real_patio_s"]
                                        if row["real_patio_s"] else 0.0)
            rows.append(row)
            if disk is None:
                continue
            real_o, real_p = disk.compare([[(w.path, o, n) for o, n in r] for r in orig_reqs],
                                          plans_real)
            real_speedup = real_o / real_p if real_p > 0 else float("inf")
            row["model_error"] = row["speedup"] / real_speedup
            real_row = dict(row, storage="real", original_s=real_o, patio_s=real_p,
                            speedup=real_speedup, repack_s=None,
                            overhead=cpu * len(sels) / real_p if real_p else 0.0,
                            resident_after_drop=disk.resident)
            if top1 is not None:
                real_row["top1_compared"], real_row["top1_real"], real_row["top1_real_10pct"] = top1
            rows.append(real_row)
    finally:
        for r in reps:
            r.close()
    return rows


def _evaluate(kb: KnowledgeBase, w: Workload, model: Any, consts: Any) -> list[Any]:
    kb.compact()
    with h5py.File(w.path) as f:
        return [planner.evaluate(kb, f, name, model, consts, []) for name, _ in kb.datasets()]


def _repack_seconds(w: Workload, model: Any, sels: list[Selection]) -> float:
    """The selections read from a whole-file copy chunked with h5py's guessed shape."""
    with h5py.File(w.path) as f:
        src = f[w.dset]
        shape, dtype = src.shape, src.dtype
    from h5py._hl.filters import guess_chunk

    chunk = guess_chunk(shape, None, dtype.itemsize)
    lay = Chunked.in_order(shape, dtype.itemsize, chunk, "row", 0)
    return float(model.simulate(_requests(lay, sels))["seconds"])


# ------------------------------------------------------------------------ cost model
def model_validation(model: Any, randoms: int, seed: int = 11) -> dict[str, Any]:
    """eq 3.1 against the simulator on SEL0-SEL7 and ``randoms`` random selections."""
    consts = costmodel.fit_to_model(model)
    arrays = {1: (1 << 22,), 2: (2048, 2048), 3: (256, 256, 128)}
    box = Hyperslab.box
    sels = [
        ("SEL0", Selection.hyperslab(arrays[1], box((100_000,), (1_100_000,)))),
        ("SEL1", Selection.hyperslab(arrays[2], box((0, 300), (2048, 308)))),
        ("SEL2", Selection.hyperslab(arrays[2], box((512, 512), (1024, 1024)))),
        ("SEL3", Selection.hyperslab(arrays[2], box((100, 900), (356, 1156)))),
        ("SEL4", Selection.hyperslab(arrays[2], box((0, 1000), (2048, 1128)))),
        ("SEL5", Selection.hyperslab(arrays[3], box((0, 40, 10), (256, 56, 26)))),
        ("SEL6", Selection.hyperslab(arrays[3], box((64, 64, 32), (128, 128, 96)))),
        ("SEL7", Selection.hyperslab(arrays[3], box((10, 20, 0), (74, 84, 128)))),
    ]
    rng = np.random.default_rng(seed)
    for i in range(randoms):
        nd = int(rng.integers(1, 4))
        shape = arrays[nd]
        lo = [int(rng.integers(0, n - 1)) for n in shape]
        ext = [int(rng.integers(1, max(2, (n - l_) // int(rng.choice([1, 2, 8, 64])))))
               for n, l_ in zip(shape, lo)]
        step = [int(rng.choice([1, 1, 1, 2, 4])) for _ in shape]
        cnt = [max(1, e // s) for e, s in zip(ext, step)]
        sels.append((f"R{i}", Selection.hyperslab(
            shape, Hyperslab(tuple(lo), tuple(step), tuple(cnt), (1,) * nd).normalized())))
    agree, taus, rows = 0, [], []
    for name, sel in sels:
        layouts = _candidate_layouts(sel)
        pred, meas = [], []
        for lay_name, lay, s in layouts:
            ext = merge_sorted(flatten(lay, s))
            pred.append(costmodel.price(lay, s, model, consts))
            meas.append(float(model.simulate([[(ext.offsets.astype(np.uint64),
                                                ext.lengths.astype(np.uint64))]])["seconds"]))
        best_m = min(meas)
        ok = meas[int(np.argmin(pred))] <= best_m * 1.01
        agree += ok
        taus.append(kendall_tau(pred, meas))
        rows.append({"selection": name, "layouts": [n for n, _, _ in layouts],
                     "predicted": pred, "measured": meas, "top1": bool(ok)})
    return {"selections": len(sels), "top1_agreement": agree / len(sels),
            "kendall_tau": float(np.mean(taus)), "constants": consts.to_json(), "rows": rows}


def _candidate_layouts(sel: Selection) -> list[tuple[str, Any, Selection]]:
    shape = sel.shape
    nd = len(shape)
    out: list[tuple[str, Any, Selection]] = [("original", Contiguous(shape, 8, 0), sel)]
    perms = {2: [(1, 0)], 3: [(0, 2, 1), (2, 1, 0), (1, 2, 0)]}.get(nd, [])
    for ax in perms:
        out.append((f"T{ax}", Contiguous(tuple(shape[a] for a in ax), 8, 0), sel.permuted(ax)))
    lo, hi = sel.bounds()
    chunk = replicas.derive_chunk(shape, 8, [[h - l_ for l_, h in zip(lo, hi)]])
    for kind, order in (("C", "row"), ("Z", "morton"), ("H", "hilbert")):
        if kind != "C" and nd < 2:
            continue
        out.append((f"{kind}{chunk}", Chunked.in_order(shape, 8, chunk, order, 0), sel))
    return out


def kendall_tau(a: list[float], b: list[float]) -> float:
    """Kendall's tau-b of two rankings (1: same order)."""
    n = len(a)
    conc = disc = ta = tb = 0
    for i in range(n):
        for j in range(i + 1, n):
            da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
            if da == 0 and db == 0:
                continue
            if da == 0:
                ta += 1
            elif db == 0:
                tb += 1
            elif da == db:
                conc += 1
            else:
                disc += 1
    denom = np.sqrt((conc + disc + ta) * (conc + disc + tb))
    return float((conc - disc) / denom) if denom else 1.0


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kernel (the ``auto`` layout), model and real speedups of the held-out and
    in-sample draws, and the real-disk top-1 agreement over every layout's selections
    with more than one way to be read (held-out, in-sample, all)."""
    out: dict[str, Any] = {}
    for r in rows:
        if not r["layout"].startswith("auto"):
            continue
        key = f"{r['storage']}_{'held_out' if r['held_out'] else 'in_sample'}_speedup"
        out.setdefault(key, {})[r["name"]] = round(r["speedup"], 3)
    for label, which in (("held_out", (True,)), ("in_sample", (False,)),
                         ("all", (True, False))):
        sel = [r for r in rows if r.get("top1_compared") and r["held_out"] in which]
        compared = sum(r["top1_compared"] for r in sel)
        if compared:
            out[f"top1_real_{label}"] = {
                "selections": compared,
                "agreement": sum(r["top1_real"] for r in sel) / compared,
                "agreement_within_10pct": sum(r["top1_real_10pct"] for r in sel) / compared,
            }
    return out


# ------------------------------------------------------------------------ command
BUILDERS = {"elements": elements, "climate": climate, "massspec": massspec, "ecog": ecog}


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="patio bench layout", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernel", action="append", choices=KERNELS,
                   help="kernel to run (repeatable; default all)")
    add_store_options(p)
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the learned draw of each kernel's queries; the held-out "
                   "draw uses seed + 1")
    p.add_argument("--real", action="store_true",
                   help="also read every case's requests on the real files, page cache "
                   "dropped (rows with storage real; use --store probed to compare)")
    p.add_argument("--real-reps", type=int, default=3,
                   help="with --real: original and patio reads alternated this many times, "
                   "medians reported (each way of the top-1 comparison is read once)")
    p.add_argument("--clients", type=int, default=64, help="clients reading at once")
    p.add_argument("--scale", type=float, default=1.0, help="data size factor (1 = ~1.5 GB)")
    p.add_argument("--randoms", type=int, default=100, help="random selections (model)")
    p.add_argument("--dir", help="where to write the data (default: a temporary directory)")
    p.add_argument("--keep", action="store_true", help="keep the data directory")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    return p


def main(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    kernels = a.kernel or list(KERNELS)
    if a.real_reps < 1 or a.seed < 0:
        print("patio bench layout: error: --real-reps must be at least 1 and --seed at "
              "least 0", file=sys.stderr)
        return 2
    try:
        model = store_model_of(a)
    except ValueError as e:
        print(f"patio bench layout: error: {e}", file=sys.stderr)
        return 2
    work = a.dir or tempfile.mkdtemp(prefix="patio-bench-layout-", dir=".")
    os.makedirs(work, exist_ok=True)
    result: dict[str, Any] = {"store": model.params(), "kernels": [], "model": None,
                              "md": None, "overhead_us": None}
    try:
        for k in kernels:
            if k == "overhead":
                from .overhead import md_workload

                print("overhead: MD trajectory through h5py and patio.h5", file=sys.stderr,
                      flush=True)
                md_dir = os.path.join(work, "md")
                os.makedirs(md_dir, exist_ok=True)
                result["md"] = md_workload(md_dir, atoms=max(2000, int(20_000 * a.scale)))
                result["overhead_us"] = result["md"].pop("overhead_us")
                continue
            if k == "model":
                print("model: eq 3.1 vs simulated times", file=sys.stderr, flush=True)
                result["model"] = model_validation(model, a.randoms)
                continue
            for w in BUILDERS[k](work, a.scale, a.clients, (a.seed, a.seed + 1)):
                print(f"{w.name}: {w.note}", file=sys.stderr, flush=True)
                result["kernels"].extend(run_workload(w, model, os.path.join(work, "kb"),
                                                      real=a.real, real_reps=a.real_reps))
    finally:
        if not a.keep and not a.dir:
            shutil.rmtree(work, ignore_errors=True)
    result["summary"] = summary(result["kernels"])
    if a.json:
        print(json.dumps(result, indent=1, default=float))
        return 0
    print(f"store: {json.dumps(result['store'])}")
    print(f"{'kernel':<16} {'layout':<30} {'rows':<12} {'orig s':>9} {'patio s':>9} "
          f"{'speedup':>8} {'repack s':>9} {'model err':>9} {'top-1':>7} {'ovhd':>6}")
    for r in result["kernels"]:
        label = f"{r['storage']} {'held-out' if r['held_out'] else 'in-sample'}"
        repack = "-" if r["repack_s"] is None else f"{r['repack_s']:9.4f}"
        err = f"{r['model_error']:9.2f}" if "model_error" in r else "-"
        top1 = (f"{r['top1_real']}/{r['top1_compared']}" if r.get("top1_compared") else "-")
        print(f"{r['name']:<16} {r['layout'][:30]:<30} {label:<12} {r['original_s']:9.4f} "
              f"{r['patio_s']:9.4f} {r['speedup']:8.2f} {repack:>9} {err:>9} {top1:>7} "
              f"{r['overhead']:6.1%}")
    for key, v in result["summary"].items():
        print(f"{key}: {v}")
    if result["md"]:
        md = result["md"]
        print(f"md trajectory ({md['frames']} frames x {md['atoms']} atoms, {md['reads']} reads):"
              f"{'h5py s':>9} {'patio s':>9} {'cold h5py':>10} {'cold patio':>11}")
        for label in ("replay", "heldout"):
            r = md[label]
            print(f"  {label:<52}{r['h5py_s']:9.3f} {r['patio_s']:9.3f} "
                  f"{r['cold_h5py_s']:10.3f} {r['cold_patio_s']:11.3f}")
        print(f"{'decision overhead':<28} {'blocks':>8} {'first us':>10} {'repeat us':>10}")
        for r in result["overhead_us"]:
            first = "-" if r["first_us"] is None else f"{r['first_us']:10.1f}"
            print(f"  {r['selection']:<26} {r['blocks']:8d} {first:>10} {r['repeat_us']:10.1f}")
    if result["model"]:
        m = result["model"]
        print(f"model: {m['selections']} selections, top-1 agreement {m['top1_agreement']:.1%}, "
              f"Kendall tau {m['kendall_tau']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
