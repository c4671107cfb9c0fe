"""The storage the cost model prices reads on: a striped storage model and eq 3.1's
constants, kept in the knowledge base (``setting`` key ``device``).

``patio layout probe`` measures the constants on the real storage: it writes a scratch
file in the chosen directory, drops it from the page cache, and times ``O_DIRECT`` reads
(contiguous reads of 1-256 pages, and 2-64 single pages or 8-page runs spread over the
file), then fits ``t_lat + pages*t_pg + runs*t_chk`` by least squares, and times zlib's
inflate for the decompression term ``t_dec`` of filtered chunks. With ``--model``
it fits the same probe to the storage model's simulated times instead. Without a probe
the decision uses the Lustre-like preset's fitted constants.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import tempfile
import time
import zlib
from typing import Any

import numpy as np

from .. import _coldcache as coldcache
from . import cost

DEFAULT_PRESET = "lustre"
PROBE_BYTES = 256 << 20


def load(kb: Any) -> tuple[Any, cost.Constants]:
    """The storage model and constants recorded in ``kb`` (or the default preset's)."""
    d = kb.setting("device") if kb is not None else None
    if d:
        return cost.storage_model(d["store"]), cost.Constants.from_json(d["constants"])
    model = cost.storage_model(DEFAULT_PRESET)
    return model, cost.fit_to_model(model)


def model_device(preset: str | dict[str, Any]) -> dict[str, Any]:
    """A device record whose constants are fitted to the storage model ``preset``."""
    model = cost.storage_model(preset)
    consts = cost.fit_to_model(model)
    return {"source": "model", "store": model.params(), "constants": consts.to_json(),
            "measured_at": time.time()}


def inflate_seconds_per_byte(nbytes: int = 8 << 20, reps: int = 3) -> float:
    """eq 3.1's decompression term measured here: zlib's inflate (HDF5's deflate filter)
    of float data, seconds per decompressed byte (best of ``reps``)."""
    raw = np.sin(np.arange(nbytes // 4, dtype=np.float32) * 1e-3).tobytes()
    packed = zlib.compress(raw, 6)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        zlib.decompress(packed)
        best = min(best, time.perf_counter() - t0)
    return best / len(raw)


def probe(directory: str, size: int = PROBE_BYTES, reps: int = 3,
          preset: str = DEFAULT_PRESET) -> dict[str, Any]:
    """Measures eq 3.1's constants on the storage holding ``directory``."""
    model = cost.storage_model(preset).with_params(targets=1)
    page = 4096
    fd, path = tempfile.mkstemp(prefix=".patio-probe-", dir=directory)
    try:
        block = os.urandom(1 << 20)
        for _ in range(size >> 20):
            os.write(fd, block)
        coldcache.drop_fd(fd)
        os.close(fd)
        fd = -1
        flags = os.O_RDONLY | getattr(os, "O_DIRECT", 0)
        try:
            rfd = os.open(path, flags)
            direct = bool(flags & getattr(os, "O_DIRECT", 0))
        except OSError:
            rfd = os.open(path, os.O_RDONLY)
            direct = False
        buf = mmap.mmap(-1, 256 * page)
        try:
            def timer(offs: list[int], lens: list[int]) -> float:
                best = float("inf")
                for _ in range(reps):
                    if not direct:
                        coldcache.drop_fd(rfd)
                    t0 = time.perf_counter()
                    for o, n in zip(offs, lens):
                        os.preadv(rfd, [memoryview(buf)[:n]], o)
                    best = min(best, time.perf_counter() - t0)
                return best

            requests = cost.probe_requests(size, page)
            # Shift every probe to a fresh region so no read is served by the device cache
            # of an earlier one.
            consts = dataclasses.replace(cost.fit_requests(model, requests, timer),
                                         t_dec=inflate_seconds_per_byte())
        finally:
            buf.close()
            os.close(rfd)
    finally:
        if fd >= 0:
            os.close(fd)
        os.unlink(path)
    return {"source": "probe", "directory": os.path.abspath(directory), "direct_io": direct,
            "store": model.params(), "constants": consts.to_json(), "measured_at": time.time(),
            "bytes": size}


def describe(dev: dict[str, Any]) -> str:
    c = dev["constants"]
    dec = c.get("t_dec", cost.DEFAULT_T_DEC)
    return (f"T_pg {c['t_pg'] * 1e6:.2f} us/page, T_chk {c['t_chk'] * 1e3:.3f} ms/run, "
            f"T_lat {c['t_lat'] * 1e3:.3f} ms/read, T_dec {1e-6 / dec if dec else 0:.0f} MB/s "
            f"inflate ({dev['source']})")


__all__ = ["describe", "load", "model_device", "probe"]
