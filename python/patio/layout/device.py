"""The storage the cost model prices reads on: a striped storage model and eq 3.1's
constants, kept in the knowledge base (``setting`` key ``device``).

``patio layout probe`` measures the constants on the real storage: ``patio store
probe`` calibrates the striped storage model on the chosen directory (the one
definition of probing, shared with ``--store probed``), eq 3.1's
``t_lat + pages*t_pg + runs*t_chk`` is fitted to that model's simulated probe reads by
least squares, and zlib's inflate is timed for the decompression term ``t_dec`` of
filtered chunks: the part of the probe only the layout decision needs. With
``--model`` the constants are fitted to a preset storage model instead. Without a probe
the decision uses the Lustre-like preset's fitted constants.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
import zlib
from typing import Any

import numpy as np

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


def probe(directory: str, size: int = PROBE_BYTES) -> dict[str, Any]:
    """eq 3.1's constants for the storage holding ``directory``: the striped model
    measured there by ``patio store probe`` (the one probe: cold reads, each at bytes
    no earlier read touched), eq 3.1 fitted to that model, and zlib's inflate timed
    here for ``t_dec``. Nothing is saved for ``--store probed`` (``patio store probe``
    does that). A failed probe is an ``OSError`` carrying the command's message."""
    from patio._binary import NOT_BUILT, find_patio

    patio = find_patio()
    if patio is None:
        raise OSError(NOT_BUILT)
    cmd = [patio, "store", "probe", "--dir", directory, "--mib", str(max(1, size >> 20)),
           "--no-save", "--json"]
    run = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        lines = run.stderr.strip().splitlines() or [f"exit {run.returncode}"]
        raise OSError(lines[-1].removeprefix("patio: error: "))
    measured = json.loads(run.stdout)
    model = cost.storage_model(measured["striping"])
    consts = dataclasses.replace(cost.fit_to_model(model), t_dec=inflate_seconds_per_byte())
    return {"source": "probe", "directory": measured["directory"],
            "direct_io": measured["direct_io"], "store": model.params(),
            "constants": consts.to_json(), "measured_at": measured["measured_at"],
            "bytes": measured["probe_bytes"], "samples": measured["samples"]}


def describe(dev: dict[str, Any]) -> str:
    c = dev["constants"]
    dec = c.get("t_dec", cost.DEFAULT_T_DEC)
    return (f"T_pg {c['t_pg'] * 1e6:.2f} us/page, T_chk {c['t_chk'] * 1e3:.3f} ms/run, "
            f"T_lat {c['t_lat'] * 1e3:.3f} ms/read, T_dec {1e-6 / dec if dec else 0:.0f} MB/s "
            f"inflate ({dev['source']})")


__all__ = ["describe", "load", "model_device", "probe"]
