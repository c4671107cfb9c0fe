"""Where an HDF5 dataset's bytes are: its physical layout for flattening (contiguous at
an address, or chunks at their addresses), and the fingerprint of a source file that
tells whether a replica built from it is still current.

A replica records the source's *generation*: its version by patio's one file-version
rule (``patio._native.file_version``, the core's ``FileVersion``: device, inode, size,
modification and change times in nanoseconds), plus a CRC32 of the byte ranges the
replicated dataset occupies (computed by the layout core, ``StoredLayout.source_crc``,
whose definition the VOL connector checks replicas with too). The version is checked at every open; only when it
changed is the checksum recomputed, so touching a file without changing the covered
bytes keeps its replicas, and any change to them — also one whose modification time
was restored afterwards (``cp -p``, ``rsync -t``) — makes the replicas stale.
"""

from __future__ import annotations

import os
from typing import Any

import h5py
import numpy as np

from .flatten import HDF5_CHUNK_CACHE_BYTES, Chunked, Contiguous

Layout = Any  # Contiguous | Chunked


class UnsupportedLayout(Exception):
    """A dataset whose bytes cannot be located (compact, external or virtual storage)."""


def physical_layout(dset: h5py.Dataset) -> Layout:
    """The dataset's layout in its file, with real addresses."""
    shape = tuple(int(n) for n in dset.shape)
    itemsize = int(dset.dtype.itemsize)
    if dset.is_virtual:
        raise UnsupportedLayout(f"{dset.name}: a virtual dataset (its bytes live in other files)")
    if dset.external:
        raise UnsupportedLayout(f"{dset.name}: external storage")
    if dset.chunks is None:
        off = dset.id.get_offset()
        if off is None:
            # Not yet allocated (nothing written) or compact storage: no I/O to model.
            if dset.id.get_storage_size() == 0:
                return Contiguous(shape, itemsize, 0)
            raise UnsupportedLayout(f"{dset.name}: compact or external storage")
        return Contiguous(shape, itemsize, int(off))
    chunk = tuple(int(c) for c in dset.chunks)
    grid = tuple(-(-n // c) for n, c in zip(shape, chunk))
    cells = int(np.prod(grid, dtype=np.int64))
    addresses = np.full(cells, -1, dtype=np.int64)
    filtered = dset.id.get_create_plist().get_nfilters() > 0
    stored = np.zeros(cells, dtype=np.int64) if filtered else None
    n = dset.id.get_num_chunks()
    if n:
        offs = np.empty((n, len(shape)), dtype=np.int64)
        addr = np.empty(n, dtype=np.int64)
        size = np.empty(n, dtype=np.int64)
        if hasattr(dset.id, "chunk_iter"):
            i = 0

            def visit(info: Any) -> None:
                nonlocal i
                offs[i] = info.chunk_offset
                addr[i] = info.byte_offset
                size[i] = info.size
                i += 1

            dset.id.chunk_iter(visit)
        else:  # pragma: no cover - HDF5 < 1.12.3
            for i in range(n):
                info = dset.id.get_chunk_info(i)
                offs[i] = info.chunk_offset
                addr[i] = info.byte_offset
                size[i] = info.size
        if (offs < 0).any() or (offs % np.asarray(chunk) != 0).any() \
                or (offs >= np.maximum(np.asarray(shape), 1)).any() or (addr < 0).any():
            raise UnsupportedLayout(f"{dset.name}: the chunk index is corrupt (a chunk outside "
                                    "the dataset or at a negative address)")
        idx = np.ravel_multi_index(tuple((offs // np.asarray(chunk)).T), grid)
        addresses[idx] = addr
        if stored is not None:
            stored[idx] = size
    # The chunk cache this dataset is read with (HDF5 reads an unfiltered chunk that fits
    # it whole): the open dataset's access list, or HDF5's default.
    try:
        cache = int(dset.id.get_access_plist().get_chunk_cache()[1])
    except (AttributeError, ValueError, RuntimeError):
        cache = HDF5_CHUNK_CACHE_BYTES
    return Chunked(shape, itemsize, chunk, addresses, stored, cache)


def stat_key(path: str | os.PathLike[str]) -> dict[str, int]:
    """The file's version (a replica recorded before change times were part of it
    lacks ``ctime_ns``: its checksum decides, once, and the new version is kept)."""
    from patio._native import file_version

    version: dict[str, int] = file_version(os.fspath(path))
    return version


def fingerprint(path: str | os.PathLike[str], dset: h5py.Dataset) -> dict[str, Any]:
    """The generation of ``dset`` in the file at ``path``, recorded with a replica."""
    from .flatten import native_layout

    crc, ranges = native_layout(physical_layout(dset)).source_crc(os.fspath(path))
    return {**stat_key(path), "crc": crc, "ranges": ranges}


class SourceCheck:
    """Whether replicas built from ``dset`` of the file at ``path`` are still current.
    The file's stat is taken once, and the checksum of the covered ranges - a read of the
    whole dataset - at most once, however many replicas are checked."""

    def __init__(self, path: str | os.PathLike[str], dset: h5py.Dataset) -> None:
        self.path = path
        self.dset = dset
        self.now = stat_key(path)
        self._fresh: dict[str, Any] | None = None

    def current(self, recorded: dict[str, Any]) -> tuple[bool, dict[str, Any] | None]:
        """``(current, refreshed)`` for a replica built at generation ``recorded``:
        ``refreshed`` is a new generation to record when only the file's stat changed and
        the covered bytes did not."""
        if all(self.now[k] == recorded.get(k) for k in self.now):
            return True, None
        if self._fresh is None:
            self._fresh = fingerprint(self.path, self.dset)
        fresh = self._fresh
        if fresh["crc"] == recorded.get("crc") and fresh["ranges"] == recorded.get("ranges"):
            return True, fresh
        return False, None
