"""``patio.h5``: a drop-in for h5py's ``File``/``Group``/``Dataset`` reading API that
records every read selection in the layout knowledge base and, once replicas exist,
serves each read from the copy the cost model says is cheapest - returning exactly what
h5py returns on the original.

    import patio.h5 as h5
    with h5.File("run.h5") as f:
        x = f["energy"][mask_rows, 10:20]

Recording is buffered and written in one transaction when the file closes (or every
256 reads), so it adds little to a read. If the knowledge base cannot be used (a
read-only directory, a damaged or newer database) reads go to h5py unchanged and one
warning says why. A replica whose source changed is never served; one that is missing
or damaged is skipped (the read is served from the original) and reported. Writes
through ``patio.h5`` mark the dataset's replicas stale before the data changes.
"""

from __future__ import annotations

import json
import os
import time
import uuid
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np
from h5py import h5r, h5s, h5t
from h5py._hl import selections as h5py_selections

from patio._native import file_version
from patio.layout.selection import Selection

if TYPE_CHECKING:
    from typing import Self

__all__ = ["Dataset", "File", "Group", "LayoutWarning"]

#: Buffered access records written per transaction.
RECORD_BATCH = 256
#: Parsed selections and decisions remembered per dataset, keyed by the index
#: arguments (a repeated read skips h5py's parser and the decision).
PARSED_MEMO = 256
#: Dataset and group wrappers kept per file opened read-only, keyed by the group and the
#: name looked up (``f[name]`` again returns the same wrapper, without HDF5's lookup).
WRAPPER_CACHE = 1024


class LayoutWarning(UserWarning):
    """The layout machinery could not help with a read; the read itself was served."""


class _Session:
    """Per-open-file state: knowledge base, replicas and deciders, record buffer."""

    def __init__(self, path: str, read_only: bool = False) -> None:
        self.path = os.path.abspath(path)
        self.read_only = read_only
        #: Per dataset name, its type and shape facts (see :class:`Dataset`); only for
        #: files opened read-only (not SWMR).
        self.facts: dict[str, tuple[bool, int, tuple[int, ...]]] = {}
        #: Per (group path, name looked up), its dataset or group wrapper; only for files
        #: opened read-only (not SWMR), whose objects cannot change while open; None once
        #: closed.
        self.wrappers: dict[tuple[str, str], Any] | None = {} if read_only else None
        self.run = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
        #: Seconds spent in patio.h5's own code for this file: opening and closing the
        #: session, lookups, selections, decisions and recording (the flush included) -
        #: everything but h5py's calls that open the file, look an object up, parse an
        #: index (as h5py's own read does) or read data (from the original or a
        #: replica). `patio bench layout` reports it.
        self.own_s = 0.0
        self.records: list[tuple[Any, ...]] = []
        self.benefit: dict[int, list[float]] = {}
        self.deciders: dict[str, Any] = {}
        # Per dataset: index-argument key -> (selection, h5py selection, decision).
        self.parsed: dict[str, dict[Any, tuple[Any, Any, Any]]] = {}
        # The source file's version the deciders were made for (patio's file-version
        # rule): checked at every read, so a file another process rewrote meanwhile
        # (HDF5 file locking off, as on many cluster file systems) is never served
        # from replicas built before.
        self.version: dict[str, int] | None = None
        self.kb: Any = None
        self.disabled = os.environ.get("PATIO_LAYOUT", "on").lower() in ("0", "off", "no")
        if self.disabled:
            return
        try:
            from patio.layout.kb import KnowledgeBase

            self.kb = KnowledgeBase(self.path, ready=True)
        except Exception as e:  # noqa: BLE001 - any failure means: read without layouts
            warnings.warn(f"patio.h5: {self.path}: reads not recorded: {e}", LayoutWarning,
                          stacklevel=4)
            self.disabled = True

    def decider(self, dset: h5py.Dataset, name: str | None = None) -> Any:
        """The decider for ``dset``, or None when it has no usable replica. One
        ``stat`` of the source per call: when its version moved since the deciders were
        made, they are made again (their replicas checked against the source anew)."""
        try:
            now: dict[str, int] | None = file_version(self.path)
        except OSError:
            now = None
        if now is None or now != self.version:
            if self.version is not None and self.kb is not None:
                self.kb.ready_rows = None  # replicas read at open: read them again
            self.deciders.clear()
            self.parsed.clear()
            self.version = now
        name = dset.name if name is None else name
        if name in self.deciders:
            return self.deciders[name]
        decider = None
        try:
            decider = self._make_decider(dset)
        except Exception as e:  # noqa: BLE001
            warnings.warn(f"patio.h5: {self.path}{name}: replicas not used: {e}", LayoutWarning,
                          stacklevel=4)
        self.deciders[name] = decider
        return decider

    def _make_decider(self, dset: h5py.Dataset) -> Any:
        from patio.layout import decide, device, replicas, storage

        ready = self.kb.ready_rows  # read with the schema check at open
        if ready is None:
            ready = self.kb.ready_rows = self.kb.read_ready()
        rows = [r for r in ready if r.dset == dset.name]
        check = storage.SourceCheck(self.path, dset)
        usable = []
        for row in rows:
            if not os.path.isfile(row.path):
                self.kb.set_state(row.id, "missing", "replica file not found")
                warnings.warn(f"patio.h5: replica {row.id} of {dset.name} is missing "
                              f"({row.path}); reading the original", LayoutWarning, stacklevel=5)
                continue
            current, fresh = check.current(row.source)
            if not current:
                self.kb.set_state(row.id, "stale", "source changed since the replica was built")
                continue
            if fresh is not None:
                with self.kb.transaction() as db:
                    db.execute("UPDATE replica SET source=? WHERE id=?",
                               (json.dumps(fresh), row.id))
            rep = replicas.Replica.load(row)
            try:
                rep.dataset()
            except (OSError, KeyError) as e:
                self.kb.set_state(row.id, "damaged", str(e))
                warnings.warn(f"patio.h5: replica {row.id} of {dset.name} is damaged ({e}); "
                              "reading the original", LayoutWarning, stacklevel=5)
                continue
            usable.append(rep)
        if not usable:
            return None
        model, consts = device.load(self.kb)
        return decide.Decider(dset, usable, model, consts)

    def record(self, dset: str, sel: Any, nbytes: int, t0: float, seconds: float) -> None:
        if self.disabled:
            return
        self.records.append((dset, sel, nbytes, os.getpid(), self.run, t0, seconds))
        if len(self.records) >= RECORD_BATCH:
            self.flush()

    def used(self, rid: int, benefit: float) -> None:
        acc = self.benefit.setdefault(rid, [0, 0.0])
        acc[0] += 1
        acc[1] += benefit

    def damaged(self, rid: int, dset: str, err: Exception) -> None:
        self.deciders.pop(dset, None)
        self.parsed.pop(dset, None)
        if self.kb is not None:
            self.kb.ready_rows = None
            self.kb.set_state(rid, "damaged", str(err))
        warnings.warn(f"patio.h5: replica {rid} of {dset} failed ({err}); served from the "
                      "original", LayoutWarning, stacklevel=4)

    def writing(self, dset: str) -> None:
        """Called before a write changes ``dset``: its replicas become stale."""
        self.deciders.pop(dset, None)
        self.parsed.pop(dset, None)
        if self.kb is not None:
            self.kb.ready_rows = None
            self.kb.mark_dataset_stale(dset, "written through patio.h5")

    def flush(self) -> None:
        if self.kb is None:
            return
        try:
            self.kb.record(self.records)
            if self.benefit:  # one write transaction for every replica used
                now = time.time()
                with self.kb.transaction() as db:
                    db.executemany("UPDATE replica SET uses=uses+?, last_used=?, "
                                   "benefit=benefit+? WHERE id=?",
                                   [(uses, now, benefit, rid)
                                    for rid, (uses, benefit) in self.benefit.items()])
        except Exception as e:  # noqa: BLE001 - recording must never fail a read
            warnings.warn(f"patio.h5: {self.path}: reads not recorded: {e}", LayoutWarning,
                          stacklevel=4)
        self.records.clear()
        self.benefit.clear()

    def close(self) -> None:
        self.wrappers = None
        self.flush()
        for d in self.deciders.values():
            if d is not None:
                for rep in d.replicas:
                    rep.close()
        self.deciders.clear()
        if self.kb is not None:
            self.kb.close()
            self.kb = None


#: Index arguments h5py reads on its compiled path (no arrays, no booleans).
_SIMPLE_ARGS = frozenset((int, np.int64, np.int32, np.intp, slice, type(Ellipsis)))
#: Marks the memo keys of selections made from ints, slices and Ellipsis.
_BASIC = object()


def _remember(memo: dict[Any, Any], key: Any, value: Any) -> None:
    """Keeps ``value`` under ``key`` in a dataset's memo of parsed reads, the oldest
    entry dropped first once it holds ``PARSED_MEMO``."""
    if len(memo) >= PARSED_MEMO:
        memo.pop(next(iter(memo)))
    memo[key] = value


class _ArrayKey:
    """An index array's part of an arguments key: equal exactly when dtype, shape and
    every value are (the bytes compared). An integer index is hashed from a sample of
    its bytes - hashing all of a 2,000-entry index (16 KB) would cost more than the rest
    of a repeated read's overhead together, and sorted index sets differ almost
    everywhere; a boolean mask is hashed whole: masks are mostly zeros, so samples of
    different masks are equal and a memo of them would compare every entry on a
    lookup."""

    __slots__ = ("data", "h")

    def __init__(self, arr: np.ndarray) -> None:
        self.data = (arr.dtype.str, arr.shape, arr.tobytes())
        b = self.data[2]
        sample = b if arr.dtype.kind == "b" else (b[:64], b[-64:], b[::97])
        self.h = hash((self.data[0], arr.shape, len(b), sample))

    def __hash__(self) -> int:
        return self.h

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ArrayKey) and self.h == other.h and self.data == other.data


def _args_key(args: tuple[Any, ...]) -> Any:
    """A hashable key equal for index arguments that select the same elements in the
    same shape (ints, slices, Ellipsis, integer or boolean arrays and lists), or None
    for anything else (never remembered)."""
    key: list[Any] = []
    for a in args:
        if isinstance(a, (bool, np.bool_)):
            return None
        if isinstance(a, (int, np.integer)):
            key.append(int(a))
        elif isinstance(a, slice):
            key.append(("s", a.start, a.stop, a.step))
        elif a is Ellipsis:
            key.append("...")
        elif isinstance(a, (np.ndarray, list)):
            arr = np.asarray(a)
            if arr.dtype.kind not in "biu" or arr.size > 1 << 20:
                return None
            key.append(_ArrayKey(arr))
        else:
            return None
    return tuple(key)


def _wrap(obj: Any, session: _Session) -> Any:
    if isinstance(obj, h5py.Dataset):
        return Dataset(obj, session)
    if isinstance(obj, h5py.Group):
        return Group(obj, session)
    return obj


class Group:
    """An h5py group whose datasets are :class:`Dataset` wrappers."""

    def __init__(self, group: h5py.Group, session: _Session, path: str | None = None) -> None:
        self._g = group
        self._session = session
        self._path = path  # the group's name, asked of HDF5 when first needed

    def __getitem__(self, name: Any) -> Any:
        t0 = time.perf_counter()
        session = self._session
        wrappers = session.wrappers
        key = None
        if wrappers is not None and type(name) is str:
            if self._path is None:
                self._path = self._g.name
            key = (self._path, name)
            hit = wrappers.get(key)
            if hit is not None:
                session.own_s += time.perf_counter() - t0
                return hit
        t1 = time.perf_counter()
        found = self._g[name]
        t2 = time.perf_counter()
        obj = _wrap(found, session)
        if wrappers is not None and key is not None and isinstance(obj, (Dataset, Group)):
            if len(wrappers) >= WRAPPER_CACHE:
                wrappers.pop(next(iter(wrappers)))
            wrappers[key] = obj
        session.own_s += time.perf_counter() - t0 - (t2 - t1)
        return obj

    def get(self, name: str, default: Any = None) -> Any:
        obj = self._g.get(name, default)
        return default if obj is default else _wrap(obj, self._session)

    def __contains__(self, name: object) -> bool:
        return name in self._g

    def __iter__(self) -> Iterator[str]:
        return iter(self._g)

    def __len__(self) -> int:
        return len(self._g)

    def keys(self) -> Any:
        return self._g.keys()

    def values(self) -> list[Any]:
        return [_wrap(v, self._session) for v in self._g.values()]

    def items(self) -> list[tuple[str, Any]]:
        return [(k, _wrap(v, self._session)) for k, v in self._g.items()]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._g, name)

    def __repr__(self) -> str:
        return f"<patio.h5 {self._g!r}>"


class File(Group):
    """``h5py.File(path, mode="r", **kwargs)`` with recorded, redirected reads."""

    def __init__(self, path: str | os.PathLike[str], mode: str = "r", **kwargs: Any) -> None:
        f = h5py.File(path, mode, **kwargs)
        t0 = time.perf_counter()
        session = _Session(os.fspath(path), read_only=f.mode == "r" and not f.swmr_mode)
        session.own_s += time.perf_counter() - t0
        super().__init__(f, session, "/")
        self._f = f

    def flush(self) -> None:
        self._session.flush()
        self._f.flush()

    def close(self) -> None:
        if self._session is not None:
            t0 = time.perf_counter()
            self._session.close()
            self._session.own_s += time.perf_counter() - t0
        self._f.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Dataset:
    """An h5py dataset whose reads are recorded and served from the cheapest copy."""

    def __init__(self, dset: h5py.Dataset, session: _Session) -> None:
        self._d = dset
        self._session = session
        self._name = dset.name  # h5py asks HDF5 for it at every access
        # (type patio leaves to h5py, item size, shape): a dataset's type never changes,
        # and a file opened read-only (not SWMR) keeps its datasets and their shapes, so
        # the session remembers them for the next wrapper of the same dataset (h5py makes
        # a new object per lookup, and asks HDF5 for its shape again).
        facts = session.facts.get(self._name)
        self._plain_type: bool | None = None if facts is None else facts[0]
        self._itemsize = 0 if facts is None else facts[1]
        self._shape: tuple[int, ...] | None = None if facts is None else facts[2]

    # -- reading ---------------------------------------------------------------------
    def _plain(self, args: tuple[Any, ...]) -> bool:
        """Reads patio leaves to h5py as they are (not recorded)."""
        d = self._d
        if self._plain_type is None:  # a dataset's type never changes
            self._plain_type = (d.dtype.fields is not None or d.dtype.kind not in "biuf"
                                or h5py.check_dtype(vlen=d.dtype) is not None)
            self._itemsize = d.dtype.itemsize
            if self._session.read_only:
                self._shape = d.shape
                self._session.facts[self._name] = (self._plain_type, self._itemsize,
                                                   self._shape)
        shape = self._shape if self._shape is not None else d.shape
        return (
            self._plain_type or shape == () or 0 in shape
            or any(isinstance(a, (str, h5r.RegionReference)) or a is None for a in args)
        )

    def __getitem__(self, args: Any) -> Any:
        args = args if isinstance(args, tuple) else (args,)
        for a in args:
            if type(a) not in _SIMPLE_ARGS:
                return self._read_general(args)
        return self._read_basic(args)

    def _read_basic(self, args: tuple[Any, ...]) -> Any:
        """Ints, slices and Ellipsis: the selection made from the arguments directly
        (:meth:`Selection.from_basic_index`), the decision remembered per selection, and
        h5py's own compiled read when the original serves it."""
        t0 = time.perf_counter()
        d = self._d
        if self._plain_type is None:
            self._plain(args)
        shape = self._shape if self._shape is not None else d.shape
        sel = None if self._plain_type or not shape else Selection.from_basic_index(shape, args)
        if sel is None:  # patio leaves it alone, or h5py parses it (errors, empty reads)
            return self._read_general(args)
        session = self._session
        decider = session.decider(d, self._name) if not session.disabled else None
        if decider is not None:
            memo = session.parsed.setdefault(self._name, {})
            key = (_BASIC, sel.slabs[0], sel.out_shape)
            hit = memo.get(key)
            if hit is not None:
                sel, _, choice = hit
            else:
                choice = decider.choose(sel)
                _remember(memo, key, (sel, None, choice))
            t_read = time.perf_counter()
            arr = self._from_replica(choice)
            if arr is not None:
                t_read = time.perf_counter() - t_read
                session.record(self._name, sel, int(arr.nbytes), time.time(),
                               time.perf_counter() - t0)
                session.own_s += time.perf_counter() - t0 - t_read
                return arr[()] if arr.shape == () else arr
        t_read = time.perf_counter()
        out = d[args]
        t_read = time.perf_counter() - t_read
        session.record(self._name, sel, sel.slabs[0].nelements() * self._itemsize,
                       time.time(), time.perf_counter() - t0)
        session.own_s += time.perf_counter() - t0 - t_read
        return out

    def _from_replica(self, choice: Any) -> np.ndarray | None:
        """The read served by the chosen replica, or None (the original is chosen, or
        the replica failed: marked damaged, the read left to the original)."""
        if choice is None or choice.replica is None:
            return None
        try:
            arr = choice.run()
        except Exception as e:  # noqa: BLE001 - a bad replica never fails a read
            self._session.damaged(choice.replica.row.id, self._name, e)
            return None
        self._session.used(choice.replica.row.id, choice.saved)
        return arr

    def _read_general(self, args: tuple[Any, ...]) -> Any:
        if self._plain(args):
            return self._d[args]
        from patio.layout import h5sel

        t0 = time.perf_counter()
        session = self._session
        decider = session.decider(self._d, self._name) if not session.disabled else None
        key = _args_key(args)
        memo = session.parsed.setdefault(self._name, {})
        hit = memo.get(key) if key is not None else None
        t_h5py = 0.0  # h5py's parse and read: its own read does both
        if hit is not None:
            sel, hsel, choice = hit
        else:
            shape = self._shape if self._shape is not None else self._d.shape
            t_h5py = time.perf_counter()
            hsel = h5py_selections.select(shape, args, dataset=self._d)  # and its errors
            t_h5py = time.perf_counter() - t_h5py
            sel = h5sel.from_space(shape, hsel.id, tuple(hsel.array_shape))
            choice = decider.choose(sel) if decider is not None and hsel.nselect else None
            if key is not None:
                _remember(memo, key, (sel, hsel, choice))
        if hsel.nselect == 0:
            return np.zeros(hsel.array_shape, dtype=self._d.dtype)
        t_read = time.perf_counter()
        arr = self._from_replica(choice)
        if arr is None:
            arr = np.zeros(hsel.array_shape, self._d.dtype, order="C")
            mspace = h5s.create_simple(hsel.mshape)
            self._d.id.read(mspace, hsel.id, arr, h5t.py_create(self._d.dtype),
                            dxpl=self._d._dxpl)
        t_h5py += time.perf_counter() - t_read
        seconds = time.perf_counter() - t0
        session.record(self._name, sel, int(arr.nbytes), time.time(), seconds)
        session.own_s += time.perf_counter() - t0 - t_h5py
        if arr.shape == ():
            return arr[()]
        return arr

    def read_direct(self, dest: np.ndarray, source_sel: Any = None, dest_sel: Any = None) -> None:
        """h5py's ``read_direct``, through the recorded and redirected read path."""
        if not isinstance(dest, np.ndarray) or not dest.flags.c_contiguous \
                or not dest.flags.writeable:
            raise TypeError("dest must be a C-contiguous writable numpy array")
        data = self[source_sel if source_sel is not None else ()]
        if dest_sel is None:
            dest[...] = data
        else:
            dest[dest_sel] = data

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        arr = self[()]
        return np.asarray(arr, dtype=dtype)

    def __len__(self) -> int:
        return len(self._d)

    def __iter__(self) -> Iterator[Any]:
        for i in range(self._d.shape[0]):
            yield self[i]

    # -- writing ---------------------------------------------------------------------
    def __setitem__(self, args: Any, value: Any) -> None:
        self._session.writing(self._d.name)
        self._d[args] = value

    def write_direct(self, *a: Any, **kw: Any) -> None:
        self._session.writing(self._d.name)
        self._d.write_direct(*a, **kw)

    def resize(self, *a: Any, **kw: Any) -> None:
        self._session.writing(self._d.name)
        self._d.resize(*a, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._d, name)

    def __repr__(self) -> str:
        return f"<patio.h5 {self._d!r}>"
