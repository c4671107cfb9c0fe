"""``patio layout learn``: the reads of an unmodified program, taken from a patio trace
(``.ptrace``/CSV) or a Darshan DXT log, mapped back to dataset selections through the
HDF5 file's storage layout and recorded in the knowledge base like reads made through
``patio.h5``.

A read's byte range is intersected with every dataset's storage (a contiguous dataset by
its offset, a chunked one by its chunk addresses); the elements it covers (rounded out to
whole elements) are a range of linear indices, written as at most two boxes per
dimension. Bytes that belong to no dataset are HDF5 metadata and are counted, not
recorded. MPI-IO streams are used when the trace has them for the file (they are the
library-level requests), POSIX streams otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from .kb import KnowledgeBase, kb_dir
from .selection import Hyperslab, Selection
from .storage import UnsupportedLayout, physical_layout


class LearnError(Exception):
    """The trace cannot be learned for this file."""


def linear_range_boxes(shape: tuple[int, ...], a: int, b: int) -> list[Hyperslab]:
    """Boxes covering row-major linear indices ``[a, b)`` of an array of ``shape``."""
    if a >= b:
        return []
    if len(shape) == 1:
        return [Hyperslab.box((a,), (b,))]
    row = int(np.prod(shape[1:], dtype=np.int64))
    rest = tuple(shape[1:])
    first, last = a // row, (b - 1) // row
    if first == last:
        return [Hyperslab((first,) + s.start, (1,) + s.stride, (1,) + s.count, (1,) + s.block)
                for s in linear_range_boxes(rest, a - first * row, b - first * row)]
    out: list[Hyperslab] = []
    lo_full = first if a % row == 0 else first + 1
    if a % row:
        out += linear_range_boxes(shape, a, lo_full * row)
    hi_full = last + 1 if b % row == 0 else last
    if hi_full > lo_full:
        out.append(Hyperslab.box((lo_full,) + (0,) * len(rest), (hi_full,) + rest))
    if b % row:
        out += linear_range_boxes(shape, hi_full * row, b)
    return out


class StorageIndex:
    """Every dataset's storage pieces in one file, sorted by address."""

    def __init__(self, f: h5py.File) -> None:
        starts, ends, owners = [], [], []
        # (dataset, shape, itemsize, chunk origin + shape or None, chunk filtered)
        self.items: list[tuple[str, tuple[int, ...], int, tuple[int, ...] | None, bool]] = []
        self.skipped: list[str] = []

        def visit(name: str, obj: Any) -> None:
            if not isinstance(obj, h5py.Dataset) or obj.shape in ((), None):
                return
            try:
                lay = physical_layout(obj)
            except UnsupportedLayout:
                self.skipped.append(obj.name)
                return
            size = obj.dtype.itemsize
            if not hasattr(lay, "chunk"):
                n = int(np.prod(lay.shape, dtype=np.int64)) * size
                if n and lay.base:
                    starts.append(lay.base)
                    ends.append(lay.base + n)
                    owners.append(len(self.items))
                    self.items.append((obj.name, lay.shape, size, None, False))
                return
            cb = lay.chunk_bytes
            for lin in np.flatnonzero(lay.addresses >= 0):
                origin = tuple(int(i) * c for i, c in
                               zip(np.unravel_index(int(lin), lay.grid), lay.chunk))
                # A filtered chunk occupies its stored size and is read whole.
                stored = cb if lay.stored is None else int(lay.stored[lin])
                starts.append(int(lay.addresses[lin]))
                ends.append(int(lay.addresses[lin]) + stored)
                owners.append(len(self.items))
                self.items.append((obj.name, lay.shape, size, origin + tuple(lay.chunk),
                                   lay.stored is not None))

        f.visititems(visit)
        order = np.argsort(np.asarray(starts, np.int64))
        self.starts = np.asarray(starts, np.int64)[order]
        self.ends = np.asarray(ends, np.int64)[order]
        self.owners = np.asarray(owners, np.int64)[order]

    def selections(self, offset: int, length: int) -> list[tuple[str, Selection]]:
        """The dataset selections a read of ``[offset, offset + length)`` covers."""
        end = offset + length
        i = int(np.searchsorted(self.ends, offset, side="right"))
        out: dict[str, tuple[tuple[int, ...], list[Hyperslab]]] = {}
        while i < len(self.starts) and self.starts[i] < end:
            name, shape, size, chunk, filtered = self.items[int(self.owners[i])]
            lo = max(offset, int(self.starts[i])) - int(self.starts[i])
            hi = min(end, int(self.ends[i])) - int(self.starts[i])
            a, b = lo // size, -(-hi // size)
            if filtered and chunk is not None:  # any byte of it: the whole chunk
                a, b = 0, int(np.prod(chunk[len(shape):], dtype=np.int64))
            if chunk is None:
                out.setdefault(name, (shape, []))[1].extend(linear_range_boxes(shape, a, b))
            else:
                nd = len(shape)
                origin, cshape = chunk[:nd], chunk[nd:]
                for box in linear_range_boxes(cshape, a, b):
                    lo_b = [o + s for o, s in zip(origin, box.start)]
                    hi_b = [min(n, lo_ + e) for lo_, e, n in zip(lo_b, box.extent(), shape)]
                    if all(h > lo_ for lo_, h in zip(lo_b, hi_b)):
                        out.setdefault(name, (shape, []))[1].append(Hyperslab.box(lo_b, hi_b))
            i += 1
        result = []
        for name, (shape, slabs) in out.items():
            n = sum(s.nelements() for s in slabs)
            result.append((name, Selection.union(shape, slabs, (n,)) if len(slabs) > 1 else
                           Selection.hyperslab(shape, slabs[0])))
        return result


def _streams(trace: str) -> list[dict[str, Any]]:
    if trace.endswith(".darshan"):
        from patio.dxt import read_dxt

        return [{"module": s.module, "file": s.file, "rank": s.rank, "op": s.op,
                 "offset": s.offset, "length": s.length, "start": s.start}
                for s in read_dxt(trace)]
    from patio import read_trace

    try:
        streams, _damage = read_trace(trace)
    except ValueError as e:
        raise LearnError(f"{trace}: {e}") from None
    return list(streams)


def learn(trace: str, source: str) -> dict[str, Any]:
    """Records the trace's reads of ``source``; returns what was learned."""
    if not os.path.isfile(trace):
        raise LearnError(f"{trace}: no such file")
    try:
        streams = _streams(trace)
    except OSError as e:
        raise LearnError(f"{trace}: {e.strerror or e}") from None
    src = Path(source).resolve()
    mine = [s for s in streams if s["op"] == "read" and
            (os.path.abspath(s["file"]) == str(src) or Path(s["file"]).name == src.name)]
    if not mine:
        names = sorted({Path(s["file"]).name for s in streams})
        raise LearnError(f"{trace}: no reads of {src.name} in the trace (it reads "
                         f"{', '.join(names[:5]) or 'nothing'})")
    if any(s["module"].upper().startswith("MPI") for s in mine):
        mine = [s for s in mine if s["module"].upper().startswith("MPI")]
    size = src.stat().st_size
    try:
        kb = KnowledgeBase(src)
    except ValueError as e:  # e.g. a non-numeric schema version
        raise LearnError(f"knowledge base {kb_dir(src) / 'kb.sqlite'} is damaged: {e}") from None
    rows: list[Any] = []
    unmapped = requests = 0
    per_dset: dict[str, int] = {}
    try:
        try:
            f = h5py.File(src, "r")
        except OSError as e:
            raise LearnError(f"{source}: cannot open as HDF5: {e}") from None
        with f:
            index = StorageIndex(f)
            for s in mine:
                offs = np.asarray(s["offset"], np.int64)
                lens = np.asarray(s["length"], np.int64)
                starts = np.asarray(s.get("start", np.zeros(len(offs))), np.float64)
                over = np.flatnonzero(offs + lens > size)
                if len(over):
                    k = int(over[0])
                    raise LearnError(f"{trace}: does not match {src.name}: a read of rank "
                                     f"{s['rank']} at offset {int(offs[k])} (+{int(lens[k])}) "
                                     f"passes its end ({size} bytes)")
                for o, n, t in zip(offs, lens, starts):
                    requests += 1
                    sels = index.selections(int(o), int(n))
                    if not sels:
                        unmapped += 1
                    for name, sel in sels:
                        per_dset[name] = per_dset.get(name, 0) + 1
                        rows.append((name, sel, int(n), int(s["rank"]), Path(trace).name,
                                     float(t), 0.0))
        kb.record(rows)
        kb.compact()
    finally:
        kb.close()
    return {"trace": os.path.abspath(trace), "file": str(src), "trace_file": src.name,
            "requests": requests, "selections": len(rows), "unmapped": unmapped,
            "datasets": per_dset, "skipped_datasets": index.skipped}
