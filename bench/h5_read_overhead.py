"""What ``patio.h5`` adds to one read, per selection kind of the thesis kernels (``patio
bench layout``): the difference between a read through ``patio.h5`` (recording on, no
replica: what the kernels' recording column measures) and the same read through h5py,
for selections never read before (``new``) and read again (``repeat``), and what opening
and closing a file adds (knowledge base, record log).

Each read is issued through h5py and through ``patio.h5`` back to back (the order
alternating), and the per-read difference is summarised by its median over many reads,
so the read itself and most of the machine's noise cancel. A dataset looked up again
(``f[name]``, as the kernels read) is timed the same way. The load average is printed
beside the figures.

    .venv/bin/python bench/h5_read_overhead.py [--reads N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np
from h5py._hl.selections import PointSelection
from patio.layout.overhead import read_pair

#: (name, dataset, kernel it stands for, a function of (rng) -> index arguments)
KINDS: list[tuple[str, str, str, Callable[[np.random.Generator], Any]]] = []


def _kind(name: str, dset: str, kernel: str) -> Callable[[Any], Any]:
    def wrap(fn: Any) -> Any:
        KINDS.append((name, dset, kernel, fn))
        return fn
    return wrap


N_ELEM = 1 << 22


@_kind("points 256 (1-D)", "E", "elements-A3")
def _points_small(rng: np.random.Generator) -> Any:
    lin = np.sort(rng.choice(N_ELEM, 256, replace=False)).astype(np.uint64)
    return (PointSelection((N_ELEM,), points=lin[:, None]),)


@_kind("points 2,400 (1-D)", "E", "elements-A4")
def _points_large(rng: np.random.Generator) -> Any:
    lin = np.sort(rng.choice(N_ELEM, 2400, replace=False)).astype(np.uint64)
    return (PointSelection((N_ELEM,), points=lin[:, None]),)


@_kind("int + 2 slices", "IWV", "climate")
def _subplane(rng: np.random.Generator) -> Any:
    y, x = (int(v) for v in rng.integers(0, 600, 2))
    return (int(rng.integers(16)), slice(y, y + 40), slice(x, x + 60))


@_kind("3 slices (3x3 spectra)", "cube", "massspec-B")
def _spectra(rng: np.random.Generator) -> Any:
    x, y = int(rng.integers(0, 390)), int(rng.integers(0, 510))
    return (slice(x, x + 3), slice(y, y + 3), slice(None))


@_kind("row mask + slice", "ECoG", "ecog")
def _mask(rng: np.random.Generator) -> Any:
    mask = np.zeros(32768, bool)
    for b in rng.choice(2048, 20, replace=False):
        mask[b * 16:(b + 1) * 16] = True
    return (mask, slice(None))


@_kind("fancy 50 sorted x box", "cube", "MD-like")
def _fancy(rng: np.random.Generator) -> Any:
    return (slice(0, 8), np.sort(rng.choice(518, 50, replace=False)), slice(0, 4))


def write_file(path: str) -> None:
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        f["E"] = rng.random(N_ELEM, dtype=np.float32)
        f["IWV"] = rng.random((16, 768, 1152))
        f["cube"] = rng.random((394, 518, 64), dtype=np.float32)
        f["ECoG"] = rng.random((32768, 256))


def per_read(path: str, reads: int, seed: int = 1) -> list[dict[str, Any]]:
    import patio.h5 as ph5

    rows = []
    for name, dset, kernel, make in KINDS:
        rng = np.random.default_rng(seed)
        args = [make(rng) for _ in range(reads)]
        new, again = [], []
        with h5py.File(path) as hf, ph5.File(path) as pf:
            hd, pd = hf[dset], pf[dset]
            hd[args[0]], pd[args[0]]  # first-touch costs (imports, dtype checks) aside
            for phase, out in ((1, new), (2, again)):
                for i, a in enumerate(args[1:] if phase == 1 else args[1:reads // 2]):
                    out.append(read_pair(lambda a=a, d=hd: d[a], lambda a=a, d=pd: d[a], i))
        rows.append({
            "selection": name, "kernel": kernel,
            "h5py_us": statistics.median(h for h, _ in new) * 1e6,
            "new_us": statistics.median(p - h for h, p in new) * 1e6,
            "repeat_us": statistics.median(p - h for h, p in again) * 1e6,
        })
    return rows


def per_lookup(path: str, reps: int) -> dict[str, float]:
    """``f[name]`` of an open file, again and again (as the kernels read): the median
    difference, patio.h5 against h5py."""
    import patio.h5 as ph5

    with h5py.File(path) as hf, ph5.File(path) as pf:
        pairs = [read_pair(lambda: hf["IWV"], lambda: pf["IWV"], i) for i in range(reps)]
    return {"lookup_h5py_us": statistics.median(h for h, _ in pairs) * 1e6,
            "lookup_us": statistics.median(p - h for h, p in pairs) * 1e6}


def per_open(path: str, reps: int) -> dict[str, float]:
    """Open, one read, close: the median difference, patio.h5 against h5py."""
    import patio.h5 as ph5

    diffs = []
    for i in range(reps):
        t = []
        for opener in ((h5py.File, ph5.File) if i % 2 else (ph5.File, h5py.File)):
            t0 = time.perf_counter()
            with opener(path) as f:
                f["IWV"][0, 0:2, 0:2]
            t.append(time.perf_counter() - t0)
        h, p = (t[0], t[1]) if i % 2 else (t[1], t[0])
        diffs.append(p - h)
    return {"open_close_us": statistics.median(diffs) * 1e6}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reads", type=int, default=401, help="reads per selection kind")
    ap.add_argument("--opens", type=int, default=41, help="file opens timed")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    a = ap.parse_args(argv)
    if a.reads < 4 or a.opens < 1:
        print("h5_read_overhead: --reads must be >= 4 and --opens >= 1", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="patio-h5ovh-") as tmp:
        os.environ["PATIO_LAYOUT_DIR"] = os.path.join(tmp, "kb")
        path = os.path.join(tmp, "kernels.h5")
        write_file(path)
        load0 = os.getloadavg()[0]
        rows = per_read(path, a.reads)
        opened = per_open(path, a.opens)
        opened.update(per_lookup(path, a.reads))
        load1 = os.getloadavg()[0]
    out = {"reads": a.reads, "load": [load0, load1], "per_read": rows, **opened}
    if a.json:
        print(json.dumps(out, indent=1))
        return 0
    print(f"{'selection':<24} {'kernel':<12} {'h5py us':>9} {'+new us':>9} {'+repeat us':>11}")
    for r in rows:
        print(f"{r['selection']:<24} {r['kernel']:<12} {r['h5py_us']:9.1f} {r['new_us']:9.1f} "
              f"{r['repeat_us']:11.1f}")
    print(f"f[name] again: h5py {opened['lookup_h5py_us']:.1f} us, "
          f"+{opened['lookup_us']:.1f} us")
    print(f"open + one read + close: +{opened['open_close_us']:.0f} us; "
          f"load {load0:.1f} -> {load1:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
