"""Chombo HDF5 plot files: read, validate, write and rewrite with boxes in a new order.

A Chombo plot file holds, per refinement level ``level_L``, a ``boxes`` dataset (compound
``lo_i, lo_j[, lo_k], hi_i, hi_j[, hi_k]``, inclusive cell indices), a flat data array
``data:datatype=0`` and ``data:offsets=0`` (``n + 1`` element offsets, one box after the
other). A box's data is ``ncomp`` components one after the other, each the box's cells
(grown by ``data_attributes/outputGhost`` on every side) in Fortran order (``i``
fastest). This module

* reads the hierarchy's geometry (:func:`read_hierarchy`) and validates it: not a Chombo
  file, missing datasets, offsets that do not add up, overlapping or out-of-domain boxes,
  empty levels and dimensionalities other than 2 and 3 raise :class:`ChomboError`, whose
  message names the file and the level;
* reads one box's values (:func:`read_box`) as an ``(ncomp, nx, ny[, nz])`` array;
* writes a new file from geometry and data (:func:`write_chombo`, used for synthetic
  hierarchies and by writers that reorder before writing);
* rewrites a file with every level's boxes permuted (:func:`write_reordered`): ``boxes``,
  every ``*:datatype=N`` / ``*:offsets=N`` pair and the per-box ``Processors`` dataset are
  permuted together and the offsets recomputed as cumulative sums, so the result is a
  standard Chombo file; every other group, dataset and attribute is copied verbatim. The
  output is written to a temporary file in the destination directory and renamed only
  when complete; the input is opened read-only.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from patio import _files

AXES = ("i", "j", "k")
_PAIR = re.compile(r"^(?P<name>.*):datatype=(?P<n>\d+)$")


class ChomboError(ValueError):
    """A file that is not a valid Chombo plot file; ``str()`` names the file and level."""

    def __init__(self, path: str | os.PathLike[str], message: str, level: int | None = None):
        self.path = str(path)
        self.level = level
        self.reason = message
        where = f"{self.path}: level {level}: " if level is not None else f"{self.path}: "
        super().__init__(where + message)


@dataclass
class Level:
    """Geometry of one level: ``lo``/``hi`` are ``(n, dim)`` inclusive cell indices."""

    index: int
    lo: np.ndarray
    hi: np.ndarray
    domain_lo: np.ndarray
    domain_hi: np.ndarray
    ghost: np.ndarray
    ncomp: int
    offsets: np.ndarray
    itemsize: int
    ref_ratio: int = 2

    @property
    def n(self) -> int:
        return int(self.lo.shape[0])

    @property
    def extent(self) -> np.ndarray:
        """Interior extent of every box, ``(n, dim)``."""
        return self.hi - self.lo + 1

    @property
    def stored_extent(self) -> np.ndarray:
        """Extent as stored (interior plus ghost cells on both sides), ``(n, dim)``."""
        return self.extent + 2 * self.ghost[None, :]

    @property
    def box_bytes(self) -> np.ndarray:
        """Bytes of every box's data, ``(n,)`` int64."""
        return np.diff(self.offsets) * self.itemsize


@dataclass
class Hierarchy:
    """Geometry of a whole file."""

    path: str
    dim: int
    ncomp: int
    levels: list[Level] = field(default_factory=list)
    components: list[str] = field(default_factory=list)


def _box_arrays(arr: np.ndarray, dim: int) -> tuple[np.ndarray, np.ndarray]:
    lo = np.stack([arr[f"lo_{a}"].astype(np.int64) for a in AXES[:dim]], axis=1)
    hi = np.stack([arr[f"hi_{a}"].astype(np.int64) for a in AXES[:dim]], axis=1)
    return lo.reshape(-1, dim), hi.reshape(-1, dim)


def box_dtype(dim: int) -> np.dtype:
    """The Chombo compound box type for ``dim`` dimensions."""
    names = [f"lo_{a}" for a in AXES[:dim]] + [f"hi_{a}" for a in AXES[:dim]]
    return np.dtype([(n, "<i4") for n in names])


def intvect_dtype(dim: int) -> np.dtype:
    return np.dtype([(f"intvect{a}", "<i4") for a in AXES[:dim]])


def _dimension(path: str, f: h5py.File) -> int:
    dim = None
    glob = f.get("Chombo_global")
    if isinstance(glob, h5py.Group) and "SpaceDim" in glob.attrs:
        dim = int(np.asarray(glob.attrs["SpaceDim"]).reshape(-1)[0])
    else:
        lvl = f.get("level_0")
        if isinstance(lvl, h5py.Group) and isinstance(lvl.get("boxes"), h5py.Dataset):
            names = lvl["boxes"].dtype.names or ()
            dim = sum(1 for n in names if n.startswith("lo_"))
    if dim is None:
        raise ChomboError(path, "not a Chombo file (no Chombo_global/SpaceDim and no level_0)")
    if dim not in (2, 3):
        raise ChomboError(path, f"unsupported dimensionality {dim} (only 2-D and 3-D)")
    return dim


def _intvect(attr: Any, dim: int) -> np.ndarray:
    arr = np.asarray(attr)
    if arr.dtype.names:
        return np.array([int(arr[n]) for n in arr.dtype.names[:dim]], dtype=np.int64)
    return arr.astype(np.int64).reshape(-1)[:dim]


def _level_names(f: h5py.File) -> list[str]:
    names = [k for k in f if re.fullmatch(r"level_\d+", k)]
    return sorted(names, key=lambda k: int(k.split("_")[1]))


def _check_overlap(lo: np.ndarray, hi: np.ndarray) -> tuple[int, int] | None:
    """A pair of overlapping boxes, or None; boxes are bucketed on a grid of the median
    extent and only boxes sharing a bucket are compared."""
    n, dim = lo.shape
    if n < 2:
        return None
    unit = np.maximum(np.median(hi - lo + 1, axis=0).astype(np.int64), 1)
    base = lo.min(axis=0)
    ulo = (lo - base) // unit
    uhi = (hi - base) // unit
    span = uhi - ulo + 1
    count = np.prod(span, axis=1)
    if int(count.sum()) > 50_000_000:
        unit = unit * int(np.ceil((count.sum() / 50_000_000) ** (1.0 / dim)))
        ulo, uhi = (lo - base) // unit, (hi - base) // unit
        span = uhi - ulo + 1
        count = np.prod(span, axis=1)
    owner = np.repeat(np.arange(n), count)
    first = np.repeat(np.cumsum(count) - count, count)
    local = np.arange(owner.size) - first
    cells = np.empty((owner.size, dim), dtype=np.int64)
    for d in range(dim - 1, -1, -1):
        s = span[owner, d]
        cells[:, d] = ulo[owner, d] + local % s
        local = local // s
    gdim = cells.max(axis=0) + 1
    key = np.ravel_multi_index(tuple(cells.T), tuple(int(g) for g in gdim))
    order = np.lexsort((owner, key))
    key, owner = key[order], owner[order]
    r = 1
    while r < key.size:
        same = key[r:] == key[:-r]
        if not same.any():
            break
        a, b = owner[:-r][same], owner[r:][same]
        hit = np.all((lo[a] <= hi[b]) & (lo[b] <= hi[a]), axis=1)
        if hit.any():
            k = int(np.argmax(hit))
            return int(a[k]), int(b[k])
        r += 1
    return None


def read_hierarchy(path: str | os.PathLike[str], validate: bool = True) -> Hierarchy:
    """Read and (by default) validate the geometry of every level of ``path``."""
    spath = str(path)
    try:
        f = h5py.File(spath, "r")
    except FileNotFoundError:
        raise ChomboError(spath, "no such file") from None
    except OSError as e:
        raise ChomboError(spath, f"not an HDF5 file ({e.__class__.__name__})") from None
    with f:
        names = _level_names(f)
        if not names:
            raise ChomboError(spath, "not a Chombo file (no level_N groups)")
        dim = _dimension(spath, f)
        ncomp = int(np.asarray(f.attrs.get("num_components", 0)).reshape(-1)[0])
        comps = []
        for c in range(ncomp):
            v = f.attrs.get(f"component_{c}", f"component_{c}")
            comps.append(v.decode() if isinstance(v, bytes) else str(v))
        hier = Hierarchy(spath, dim, ncomp, [], comps)
        for expected, name in enumerate(names):
            level = int(name.split("_")[1])
            if level != expected:
                raise ChomboError(spath, f"level_{expected} missing", expected)
            hier.levels.append(_read_level(spath, f[name], level, dim, ncomp, validate))
        if ncomp <= 0:
            raise ChomboError(spath, "num_components missing or not positive")
    return hier


def _read_level(
    path: str, g: h5py.Group, level: int, dim: int, ncomp: int, validate: bool
) -> Level:
    for name in ("boxes", "data:offsets=0", "data:datatype=0"):
        if not isinstance(g.get(name), h5py.Dataset):
            raise ChomboError(path, f"missing dataset {name!r}", level)
    boxes = g["boxes"][()]
    names = boxes.dtype.names or ()
    need = [f"{s}_{a}" for s in ("lo", "hi") for a in AXES[:dim]]
    if any(n not in names for n in need) or any(
        n.startswith(("lo_", "hi_")) and n not in need for n in names
    ):
        raise ChomboError(path, f"boxes fields {list(names)} do not match {dim}-D", level)
    lo, hi = _box_arrays(boxes, dim)
    if "prob_domain" not in g.attrs:
        raise ChomboError(path, "missing attribute 'prob_domain'", level)
    dom = np.asarray(g.attrs["prob_domain"])
    dlo, dhi = _box_arrays(dom.reshape(1), dim)
    da = g.get("data_attributes")
    ghost = np.zeros(dim, dtype=np.int64)
    comps = ncomp
    if isinstance(da, h5py.Group):
        if "outputGhost" in da.attrs:
            ghost = _intvect(da.attrs["outputGhost"], dim)
        if "comps" in da.attrs:
            comps = int(np.asarray(da.attrs["comps"]).reshape(-1)[0])
    offsets = g["data:offsets=0"][()].astype(np.int64).reshape(-1)
    data = g["data:datatype=0"]
    ratio = int(np.asarray(g.attrs.get("ref_ratio", 2)).reshape(-1)[0])
    lev = Level(level, lo, hi, dlo[0], dhi[0], ghost, comps, offsets, data.dtype.itemsize, ratio)
    if not validate:
        return lev
    if lev.n == 0:
        raise ChomboError(path, "empty level (no boxes)", level)
    if np.any(hi < lo):
        k = int(np.argmax(np.any(hi < lo, axis=1)))
        raise ChomboError(path, f"box {k} has hi < lo", level)
    if offsets.size != lev.n + 1:
        raise ChomboError(
            path, f"data:offsets=0 has {offsets.size} entries for {lev.n} boxes", level
        )
    want = comps * np.prod(lev.stored_extent, axis=1)
    if offsets[0] != 0 or np.any(np.diff(offsets) != want):
        bad = int(np.argmax(np.diff(offsets) != want)) if offsets[0] == 0 else 0
        raise ChomboError(
            path, f"data:offsets=0 does not add up at box {bad} ({comps} components)", level
        )
    if data.ndim != 1 or data.shape[0] != offsets[-1]:
        raise ChomboError(
            path, f"data:datatype=0 holds {data.size} values, offsets say {offsets[-1]}", level
        )
    outside = np.any((lo < dlo) | (hi > dhi), axis=1)
    if outside.any():
        k = int(np.argmax(outside))
        raise ChomboError(path, f"box {k} lies outside the problem domain", level)
    pair = _check_overlap(lo, hi)
    if pair is not None:
        raise ChomboError(path, f"boxes {pair[0]} and {pair[1]} overlap", level)
    return lev


def box_values(level: Level, flat: np.ndarray, k: int, interior: bool = True) -> np.ndarray:
    """Box ``k``'s values from its flat slice: ``(ncomp, nx, ny[, nz])``, ghosts cut off
    unless ``interior`` is False."""
    ext = level.stored_extent[k]
    arr = flat.reshape((level.ncomp,) + tuple(int(e) for e in ext[::-1]))
    arr = arr.transpose((0,) + tuple(range(arr.ndim - 1, 0, -1)))
    if interior and np.any(level.ghost):
        g = level.ghost
        arr = arr[
            (slice(None),)
            + tuple(slice(int(x), int(x) + int(e)) for x, e in zip(g, level.extent[k]))
        ]
    return arr


def read_box(
    path: str | os.PathLike[str], hier: Hierarchy, level: int, k: int, interior: bool = True
) -> np.ndarray:
    """Box ``k`` of ``level`` read on its own (one read of its extent)."""
    lev = hier.levels[level]
    with h5py.File(str(path), "r") as f:
        ds = f[f"level_{level}/data:datatype=0"]
        flat = ds[int(lev.offsets[k]) : int(lev.offsets[k + 1])]
    return box_values(lev, flat, k, interior)


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one file (by path when either does not exist)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)


def write_reordered(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    perms: Mapping[int, Sequence[int] | np.ndarray],
    hier: Hierarchy | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """Write ``dst``: ``src`` with level ``L``'s boxes in order ``perms[L]`` (new position
    ``p`` holds old box ``perms[L][p]``); levels missing from ``perms`` are copied as is.
    ``progress(done, total)`` is called after each level with the boxes written so far."""
    s, d = str(src), str(dst)
    if same_file(s, d):
        raise ChomboError(s, "output path equals the input")
    hier = hier or read_hierarchy(s)
    boxes = {lev.index: lev.n for lev in hier.levels}
    total, done = sum(boxes.values()), 0
    with _files.replacing(d, prefix=".patio-amr-") as tmp, h5py.File(s, "r") as fi, \
            h5py.File(tmp, "w") as fo:
        _copy_attrs(fi, fo)
        for name in fi:
            m = re.fullmatch(r"level_(\d+)", name)
            perm = None if m is None else perms.get(int(m.group(1)))
            if perm is None:
                fi.copy(fi[name], fo, name=name)
            else:
                lev = hier.levels[int(m.group(1))]
                p = np.asarray(perm, dtype=np.int64)
                if p.shape != (lev.n,) or not np.array_equal(np.sort(p), np.arange(lev.n)):
                    raise ChomboError(s, "ordering is not a permutation of the boxes", lev.index)
                _write_level(fi[name], fo, name, lev, p)
            if m is not None and progress is not None:
                done += boxes.get(int(m.group(1)), 0)
                progress(done, total)


def _copy_attrs(a: h5py.HLObject, b: h5py.HLObject) -> None:
    for k in a.attrs:
        b.attrs.create(k, a.attrs[k], dtype=a.attrs.get_id(k).dtype)


def _like(g_out: h5py.Group, name: str, src: h5py.Dataset, data: np.ndarray) -> None:
    kw: dict[str, Any] = {}
    if src.chunks is not None and data.size:
        kw = {
            "chunks": True,
            "compression": src.compression,
            "compression_opts": src.compression_opts,
            "shuffle": src.shuffle,
        }
    ds = g_out.create_dataset(name, data=data, dtype=src.dtype, **kw)
    _copy_attrs(src, ds)


def _write_level(gi: h5py.Group, fo: h5py.File, name: str, lev: Level, p: np.ndarray) -> None:
    go = fo.create_group(name)
    _copy_attrs(gi, go)
    handled = {"boxes"}
    _like(go, "boxes", gi["boxes"], gi["boxes"][()][p])
    proc = gi.get("Processors")
    if isinstance(proc, h5py.Dataset) and proc.shape == (lev.n,):
        _like(go, "Processors", proc, proc[()][p])
        handled.add("Processors")
    for key in gi:
        m = _PAIR.match(key)
        off_key = f"{m.group('name')}:offsets={m.group('n')}" if m else ""
        if not m or not isinstance(gi.get(off_key), h5py.Dataset):
            continue
        offs = gi[off_key][()].astype(np.int64)
        if offs.shape != (lev.n + 1,):
            continue
        sizes = np.diff(offs)[p]
        new_offs = np.concatenate([[0], np.cumsum(sizes)]).astype(gi[off_key].dtype)
        src = gi[key]
        out = go.create_dataset(key, shape=src.shape, dtype=src.dtype)
        _copy_attrs(src, out)
        _like(go, off_key, gi[off_key], new_offs)
        _copy_permuted(src, out, offs, new_offs, p)
        handled.update((key, off_key))
    for key in gi:
        if key not in handled:
            gi.copy(gi[key], go, name=key)


def _copy_permuted(
    src: h5py.Dataset, out: h5py.Dataset, offs: np.ndarray, new: np.ndarray, p: np.ndarray
) -> None:
    """Copy box data into the new order, a whole level in memory when under 256 MiB."""
    total = int(offs[-1])
    if total * src.dtype.itemsize <= 256 << 20:
        flat = src[()]
        idx = np.concatenate([np.arange(offs[k], offs[k + 1]) for k in p]) if p.size else []
        out[...] = flat[np.asarray(idx, dtype=np.int64)]
        return
    for pos, k in enumerate(p):
        out[int(new[pos]) : int(new[pos + 1])] = src[int(offs[k]) : int(offs[k + 1])]


@dataclass
class LevelSpec:
    """One level to write: boxes, problem domain and per-box data ``(ncomp, *stored)``."""

    lo: np.ndarray
    hi: np.ndarray
    domain_lo: Sequence[int]
    domain_hi: Sequence[int]
    data: list[np.ndarray]
    dx: float = 1.0
    ref_ratio: int = 2
    ghost: Sequence[int] | None = None


def flatten_box(arr: np.ndarray) -> np.ndarray:
    """Inverse of :func:`box_values` for a stored box: ``(ncomp, nx, ny[, nz])`` -> flat."""
    return np.ascontiguousarray(arr.transpose((0,) + tuple(range(arr.ndim - 1, 0, -1)))).ravel()


def write_chombo(
    path: str | os.PathLike[str],
    levels: Sequence[LevelSpec],
    components: Sequence[str],
    dtype: Any = np.float64,
    time: float = 0.0,
) -> None:
    """Write a standard Chombo plot file (through a temporary file and a rename)."""
    dst = str(path)
    dim = int(np.asarray(levels[0].lo).shape[1])
    with _files.replacing(dst, prefix=".patio-amr-") as tmp, h5py.File(tmp, "w") as f:
        f.attrs["num_levels"] = np.int32(len(levels))
        f.attrs["max_level"] = np.int32(len(levels) - 1)
        f.attrs["num_components"] = np.int32(len(components))
        f.attrs["iteration"] = np.int32(0)
        f.attrs["time"] = np.float64(time)
        for c, name in enumerate(components):
            f.attrs[f"component_{c}"] = np.bytes_(name)
        glob = f.create_group("Chombo_global")
        glob.attrs["SpaceDim"] = np.int32(dim)
        glob.attrs["testReal"] = np.float64(0.0)
        for li, spec in enumerate(levels):
            _write_spec(f, li, spec, dim, len(components), dtype, time)


def _write_spec(
    f: h5py.File, li: int, spec: LevelSpec, dim: int, ncomp: int, dtype: Any, time: float
) -> None:
    g = f.create_group(f"level_{li}")
    lo, hi = np.asarray(spec.lo, np.int64), np.asarray(spec.hi, np.int64)
    bt = box_dtype(dim)
    boxes = np.zeros(lo.shape[0], dtype=bt)
    for d, a in enumerate(AXES[:dim]):
        boxes[f"lo_{a}"], boxes[f"hi_{a}"] = lo[:, d], hi[:, d]
    dom = np.zeros((), dtype=bt)
    for d, a in enumerate(AXES[:dim]):
        dom[f"lo_{a}"], dom[f"hi_{a}"] = spec.domain_lo[d], spec.domain_hi[d]
    g.attrs["prob_domain"] = dom
    g.attrs["dx"] = np.float64(spec.dx)
    g.attrs["dt"] = np.float64(0.0)
    g.attrs["time"] = np.float64(time)
    g.attrs["ref_ratio"] = np.int32(spec.ref_ratio)
    g.create_dataset("boxes", data=boxes)
    flats = [flatten_box(np.asarray(a, dtype=dtype)) for a in spec.data]
    sizes = np.array([x.size for x in flats], dtype=np.int64)
    g.create_dataset("data:offsets=0", data=np.concatenate([[0], np.cumsum(sizes)]))
    flat = np.concatenate(flats) if flats else np.zeros(0, dtype=dtype)
    g.create_dataset("data:datatype=0", data=flat.astype(dtype))
    g.create_dataset("Processors", data=np.zeros(lo.shape[0], dtype=np.int32))
    da = g.create_group("data_attributes")
    da.attrs["comps"] = np.int32(ncomp)
    iv = intvect_dtype(dim)
    gh = np.zeros((), dtype=iv)
    for d, a in enumerate(AXES[:dim]):
        gh[f"intvect{a}"] = 0 if spec.ghost is None else int(spec.ghost[d])
    da.attrs["ghost"] = gh
    da.attrs["outputGhost"] = gh
    da.attrs["objectType"] = np.bytes_("FArrayBox")


def file_bytes(path: str | os.PathLike[str]) -> int:
    return Path(path).stat().st_size
