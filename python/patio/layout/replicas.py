"""Replicas of an HDF5 dataset in other layouts: how each is built, what it holds and
how a selection of the original is read from it.

Every replica is a plain HDF5 file ``replicas/r<ID>.h5`` holding one dataset ``data``
that h5py reads without patio:

* ``transposed`` - the whole array with its axes permuted (``params["axes"]``);
* ``chunked`` / ``zorder`` / ``hilbert`` - the whole array, chunked with
  ``params["chunk"]``, its chunks allocated in row-major, Morton or Hilbert order (written
  one by one with ``write_direct_chunk``, so file space follows the curve);
* ``concat`` - a partial replica: only the elements of one hot selection, stored
  contiguously in access order. A product selection (a box, a strided hyperslab, fancy
  indices, a family of boxes over time steps) is stored as the dense array of its
  per-axis index sets, which are kept as pattern-engine encodings (a family of boxes is
  stored with its varying axis outermost, so each member is one contiguous piece, in
  the order the members are read); a point selection as
  a 1-D array in row-major order, its linear indices pattern-encoded.

Builds run off the read path (``patio layout build``): the data goes to a temporary
file, is fsynced and renamed, and only then does the knowledge-base row turn ``ready``
(in one transaction); a build killed at any point leaves a ``building`` row and a
temporary file that are never served and are removed by the next build.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from .. import _files
from . import curves
from .kb import KnowledgeBase, ReplicaRow, decode_ints, encode_ints
from .selection import Selection, product
from .storage import fingerprint

FULL_KINDS = ("transposed", "chunked", "zorder", "hilbert")
KINDS = FULL_KINDS + ("concat",)
#: Bytes moved per step while copying.
COPY_BLOCK = 64 << 20


@dataclass
class Replica:
    """A ready replica, with what it needs to serve reads."""

    row: ReplicaRow
    axes_sets: list[np.ndarray] | None = None  # concat of a product selection
    linear: np.ndarray | None = None  # concat of a point selection (sorted)
    _file: h5py.File | None = None

    @property
    def kind(self) -> str:
        return self.row.kind

    @property
    def perm(self) -> tuple[int, ...] | None:
        """The stored axis order (transposed replicas; concat replicas of a family)."""
        axes = self.row.params.get("axes")
        return tuple(axes) if axes is not None else None

    def dataset(self) -> h5py.Dataset:
        if self._file is None:
            self._file = h5py.File(self.row.path, "r")
        return self._file["data"]

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    @staticmethod
    def load(row: ReplicaRow) -> Replica:
        rep = Replica(row)
        if row.kind == "concat":
            if "axes_sets" in row.params:
                rep.axes_sets = [decode_ints(bytes.fromhex(h)) for h in row.params["axes_sets"]]
            elif row.sel is not None and row.sel.kind == "points":
                rep.linear = np.sort(row.sel.linear_indices())
        return rep


def replica_path(kb: KnowledgeBase, rid: int, tmp: bool = False) -> Path:
    return kb.dir / "replicas" / (f".tmp-r{rid}.h5" if tmp else f"r{rid}.h5")


def cleanup(kb: KnowledgeBase) -> list[int]:
    """Removes rows left ``building`` by a killed build and their temporary files, and
    replica files no row refers to. Returns the removed row ids."""
    removed = []
    live = set()
    for row in kb.replicas():
        if row.state == "building":
            for p in (replica_path(kb, row.id, tmp=True), replica_path(kb, row.id)):
                p.unlink(missing_ok=True)
            kb.delete_replica(row.id)
            removed.append(row.id)
        else:
            live.add(Path(row.path).name)
    for p in (kb.dir / "replicas").glob("*.h5"):
        if p.name not in live:
            p.unlink(missing_ok=True)
    return removed


def derive_chunk(shape: Sequence[int], itemsize: int, extents: Sequence[Sequence[int]],
                 weights: Sequence[float] | None = None, target: int = 1 << 20) -> tuple[int, ...]:
    """A chunk shape of about ``target`` bytes with the aspect ratio of the recorded
    selections (their read-weighted geometric mean extent per axis)."""
    nd = len(shape)
    if not extents:
        ext = np.asarray(shape, np.float64)
    else:
        e = np.maximum(np.asarray(extents, np.float64), 1.0)
        w = np.asarray(weights if weights is not None else np.ones(len(e)), np.float64)
        ext = np.exp((np.log(e) * w[:, None]).sum(0) / w.sum())
    ext = np.minimum(ext, np.asarray(shape, np.float64))
    want = max(1.0, target / itemsize)
    chunk = ext.copy()
    for _ in range(64):
        vol = float(np.prod(chunk))
        if abs(np.log(vol / want)) < 0.05:
            break
        free = [a for a in range(nd) if (chunk[a] < shape[a] if vol < want else chunk[a] > 1)]
        if not free:
            break
        factor = (want / vol) ** (1.0 / len(free))
        for a in free:
            chunk[a] = min(float(shape[a]), max(1.0, chunk[a] * factor))
    return tuple(int(max(1, min(s, round(c)))) for c, s in zip(chunk, shape))


def transpose_axes(shape: Sequence[int], extents: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The axis order whose innermost (fastest) axis is the one the recorded selections
    span most (relative to the array), the outermost the one they span least."""
    if not extents:
        return tuple(range(len(shape)))
    rel = (np.asarray(extents, np.float64) / np.maximum(np.asarray(shape, np.float64), 1)).mean(0)
    return tuple(int(a) for a in np.argsort(rel, kind="stable"))


def _slabs(n: int, row_bytes: int) -> list[tuple[int, int]]:
    step = max(1, COPY_BLOCK // max(1, row_bytes))
    return [(i, min(n, i + step)) for i in range(0, n, step)]


def _write_full(src: h5py.Dataset, out: h5py.File, kind: str, params: dict[str, Any]) -> int:
    shape = tuple(int(n) for n in src.shape)
    row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * src.dtype.itemsize
    if kind == "transposed":
        axes = tuple(params["axes"])
        dst = out.create_dataset("data", shape=tuple(shape[a] for a in axes), dtype=src.dtype)
        where = axes.index(0)
        for lo, hi in _slabs(shape[0], row_bytes):
            block = np.transpose(src[lo:hi], axes)
            index = [slice(None)] * len(shape)
            index[where] = slice(lo, hi)
            dst[tuple(index)] = block
        return int(dst.id.get_storage_size())
    chunk = tuple(int(c) for c in params["chunk"])
    order = {"chunked": "row", "zorder": "morton", "hilbert": "hilbert"}[kind]
    dst = out.create_dataset("data", shape=shape, dtype=src.dtype, chunks=chunk)
    grid = tuple(-(-n // c) for n, c in zip(shape, chunk))
    rank = curves.curve_rank(grid, order)
    sequence = np.argsort(rank, kind="stable")
    for lin in sequence:
        cidx = np.unravel_index(int(lin), grid)
        lo = tuple(int(i) * c for i, c in zip(cidx, chunk))
        hi = tuple(min(n, lo_ + c) for lo_, c, n in zip(lo, chunk, shape))
        data = src[tuple(slice(a, b) for a, b in zip(lo, hi))]
        if data.shape != chunk:
            full = np.zeros(chunk, dtype=src.dtype)
            full[tuple(slice(0, s) for s in data.shape)] = data
            data = full
        dst.id.write_direct_chunk(lo, np.ascontiguousarray(data).tobytes())
    return int(dst.id.get_storage_size())


def _write_concat(src: h5py.Dataset, out: h5py.File, sel: Selection,
                  axes_sets: list[np.ndarray] | None, axes: Sequence[int] | None) -> int:
    if axes_sets is not None:
        perm = list(axes) if axes is not None else list(range(len(axes_sets)))
        shape = tuple(len(axes_sets[a]) for a in perm)
        dst = out.create_dataset("data", shape=shape, dtype=src.dtype)
        # Copy along the outermost stored axis in pieces, each one fancy read.
        row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * src.dtype.itemsize
        outer = perm[0]
        for lo, hi in _slabs(shape[0], row_bytes):
            sets = list(axes_sets)
            sets[outer] = axes_sets[outer][lo:hi]
            dst[lo:hi] = np.transpose(_read_product(src, sets), perm)
        return int(dst.id.get_storage_size())
    from .h5sel import read_flat

    lin = np.sort(sel.linear_indices())
    pts = np.stack(np.unravel_index(lin, sel.shape), axis=1)
    dst = out.create_dataset("data", shape=(len(lin),), dtype=src.dtype)
    step = max(1, COPY_BLOCK // src.dtype.itemsize)
    for lo in range(0, len(lin), step):
        piece = Selection.from_points(sel.shape, pts[lo:lo + step])
        dst[lo:lo + len(piece.points)] = read_flat(src, piece)  # type: ignore[arg-type]
    return int(dst.id.get_storage_size())


def _read_product(src: h5py.Dataset, axes_sets: Sequence[np.ndarray]) -> np.ndarray:
    """The dense array of a product of per-axis index sets, read from ``src`` as one
    union-of-hyperslabs selection."""
    from .h5sel import read

    return read(src, product(tuple(src.shape), axes_sets))


def build(kb: KnowledgeBase, source: str | os.PathLike[str], dset_name: str, kind: str,
          params: dict[str, Any] | None = None, sel: Selection | None = None,
          axes_sets: list[np.ndarray] | None = None) -> int:
    """Builds one replica crash-safely and returns its id (state ``ready``)."""
    if kind not in KINDS:
        raise ValueError(f"unknown replica kind {kind!r}; expected one of {', '.join(KINDS)}")
    params = dict(params or {})
    meta_bytes = len(json.dumps(params))
    if kind == "concat":
        if axes_sets is not None:
            encoded = [encode_ints(a).hex() for a in axes_sets]
            params["axes_sets"] = encoded
            meta_bytes = sum(len(h) // 2 for h in encoded)
        elif sel is None or sel.kind != "points":
            raise ValueError("a concat replica needs per-axis index sets or a point selection")
    if kb.setting("device") is None:
        # The storage model the replica is chosen and served for, recorded so that every
        # front end (patio.h5, the VOL connector) decides with the same one.
        from . import device

        kb.set_setting("device", device.model_device(device.DEFAULT_PRESET))
    with h5py.File(source, "r") as f:
        src = f[dset_name]
        gen = fingerprint(source, src)
        dcpl = src.id.get_create_plist()
        if dcpl.get_nfilters():
            # Replicas are stored unfiltered: a read of one costs no decompression, and
            # its bytes count against the budget at their full size (stated in status).
            params["filters"] = "dropped: " + "+".join(
                dcpl.get_filter(i)[3].decode(errors="replace") or str(dcpl.get_filter(i)[0])
                for i in range(dcpl.get_nfilters()))
        rid = kb.add_replica(dset_name, kind, params, sel if kind == "concat" else None, "", gen)
        final = replica_path(kb, rid)
        try:
            with _files.replacing(final, tmp=replica_path(kb, rid, tmp=True)) as tmp, \
                    h5py.File(tmp, "w", libver="latest") as out:
                out.attrs["patio_source"] = str(Path(source).resolve())
                out.attrs["patio_dataset"] = dset_name
                out.attrs["patio_kind"] = kind
                if kind == "concat":
                    nbytes = _write_concat(src, out, sel, axes_sets,  # type: ignore[arg-type]
                                           params.get("axes"))
                else:
                    nbytes = _write_full(src, out, kind, params)
        except BaseException:
            kb.delete_replica(rid)
            raise
    if kind == "concat" and sel is not None and sel.kind == "points":
        blob = kb.db.execute("SELECT points FROM replica WHERE id=?", (rid,)).fetchone()[0]
        meta_bytes = len(blob or b"")
    kb.ready(rid, str(final), nbytes, meta_bytes)
    return rid


def evict(kb: KnowledgeBase, rid: int) -> None:
    """Removes a replica: the row first (no reader picks it any more), then the file."""
    rows = [r for r in kb.replicas() if r.id == rid]
    if not rows:
        raise ValueError(f"no replica {rid}")
    kb.delete_replica(rid)
    if rows[0].path:
        Path(rows[0].path).unlink(missing_ok=True)
