"""The thesis kernels through an unmodified C program, with and without patio's HDF5 VOL
connector serving them from layout replicas (issue 23's figures), next to h5py on the
original and ``patio.h5`` on the same reads.

Kernels (``patio bench layout``'s generators, reduced by ``--scale``): scattered
elements (VPIC-like energy threshold, A2), a climate sub-plane per time step (Q2),
mass-spec slices (A: 25 m/z slices; B: 3x3 spectra), ECoG label blocks (10 %), and an
MD-style trajectory (positions (frames, atoms, 3), one frame per chunk) read as MD
analysis reads it: a sorted fancy index of a tenth of the atoms across all frames, a
quarter of the atoms' x coordinate, every other frame of the second half, single atoms
across all frames.

Per kernel, as a user would: the kernel's reads of one random draw (``--seed``) are
replayed by ``bench/h5_replay.c`` (built here against the connector's HDF5; it knows
nothing of patio) with the connector loaded, which records them; ``patio layout build
FILE --budget B`` builds replicas from that record; then the reads of *another* draw
(``--seed + 1``: the held-out run) are replayed natively and through the connector,
alternating which goes first, ``--reps`` times, each after the files (original and
replicas) were fsynced and dropped from the page cache (``resident`` is what the drop
left, with mincore). Both replays must deliver the same bytes (FNV-1a of every element),
or the run stops. ``patio.h5`` and h5py on the original read the same held-out draw the
same way (cold, alternating).

The decision plans with the knowledge base's storage model: by default the Lustre-like
preset ``patio layout build`` records; with ``--probe``, eq 3.1's constants measured on
the files' own storage (``patio layout probe --dir``), as a user of this machine would.

Columns: ``native_s`` / ``vol_s`` - the C program's time from H5Fopen to H5Fclose
(medians); ``speedup`` = native / vol on the real disk; ``model_speedup`` - eq 3.1's
modelled seconds of the held-out reads, each read in turn, original against the plans
the decision core chose (the same decider the connector and patio.h5 use; the model is
what the planner optimizes against, so it is reported beside the real disk, never
instead of it); ``served`` - reads served from replicas (``served_reads``);
``h5py_s`` / ``patio_h5_s`` - the same reads from Python.

    python bench/vol_kernels.py                 # table
    python bench/vol_kernels.py --json          # one JSON object
    python bench/vol_kernels.py --out r.json    # the table, and the JSON object in r.json

Where the files live (``--dir``, default a temporary directory) decides what "real disk"
means: on a virtual machine the host may still cache what the guest dropped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from patio import _coldcache as coldcache
from patio.layout import bench as layout_bench
from patio.layout import h5sel
from patio.layout.bench import Workload
from patio.layout.kb import KnowledgeBase
from patio.layout.vol import cc_command, vol_env

REPO = Path(__file__).resolve().parents[1]

PICK = ("elements-A2", "climate-Q2", "massspec-A", "massspec-B", "ecog-10pct", "md-atoms")


def md(dirpath: str, scale: float, seeds: tuple[int, int]) -> list[Workload]:
    """An MD trajectory, positions (frames, atoms, 3) float32, one frame per chunk, read
    the way MD analysis tools read it."""
    frames, atoms = max(32, int(2048 * scale)), 16384
    path = os.path.join(dirpath, "traj.h5")
    rng = np.random.default_rng(3)
    with h5py.File(path, "w") as f:
        d = f.create_dataset("positions", (frames, atoms, 3), "f4", chunks=(1, atoms, 3))
        for lo in range(0, frames, 64):
            hi = min(frames, lo + 64)
            d[lo:hi] = rng.random((hi - lo, atoms, 3), dtype=np.float32)

    def draw(seed: int) -> list[Any]:
        r = np.random.default_rng(seed)
        sel = np.sort(r.choice(atoms, atoms // 10, replace=False))
        a0 = int(r.integers(0, atoms - atoms // 4))
        singles = [int(k) for k in r.choice(atoms, 4, replace=False)]
        return ([(slice(None), sel, slice(None))] * 2
                + [(slice(None), slice(a0, a0 + atoms // 4), 0),
                   (slice(frames // 2, frames, 2), slice(None), slice(None))]
                + [(slice(None), k, slice(None)) for k in singles])

    return [Workload("md-atoms", path, "/positions", draw(seeds[0]), draw(seeds[1]),
                     ("concat",), "100%", f"{frames} frames x {atoms} atoms x 3 float32")]


def workloads(dirpath: str, scale: float, seed: int, pick: tuple[str, ...]) -> list[Workload]:
    seeds = (seed, seed + 1)
    out: list[Workload] = []
    for gen in (layout_bench.elements, layout_bench.climate, layout_bench.massspec,
                layout_bench.ecog):
        if any(p.split("-")[0] == gen.__name__ for p in pick):
            out += [w for w in gen(dirpath, scale, 4, seeds) if w.name in pick]
    if "md-atoms" in pick:
        out += md(dirpath, scale, seeds)
    return out


def write_script(path: str, dset: str, reads: list[Any], out: Path) -> int:
    """The reads as h5_replay.c's script (h5py's own parse of each argument)."""
    lines = []
    with h5py.File(path, "r") as f:
        d = f[dset]
        for args in reads:
            sel, _ = h5sel.select(d, args if isinstance(args, tuple) else (args,))
            rank = len(sel.shape)
            if sel.kind == "points":
                pts = np.asarray(sel.points)
                lines.append(f"points {rank} {len(pts)}")
                lines += [" ".join(map(str, p)) for p in pts.tolist()]
            else:
                lines.append(f"slabs {rank} {len(sel.slabs)}")
                lines += [" ".join(map(str, (*s.start, *s.stride, *s.count, *s.block)))
                          for s in sel.slabs]
    out.write_text("\n".join(lines) + "\n")
    return len(reads)


def replay(exe: Path, path: str, dset: str, script: Path, env: dict[str, str] | None
           ) -> dict[str, Any]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("HDF5_")}
    full.update(env or {})
    t0 = time.perf_counter()
    r = subprocess.run([str(exe), path, dset, str(script)], env=full, capture_output=True,
                       text=True, timeout=1800, check=False)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"h5_replay failed: {r.stderr.strip()}")
    out = json.loads(r.stdout)
    out["process_s"] = wall
    out["stderr"] = r.stderr.strip()
    return out


def layout_cli(*args: str) -> dict[str, Any]:
    r = subprocess.run([sys.executable, "-m", "patio.layout.cli", *args, "--json"],
                       capture_output=True, text=True, timeout=1800, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"patio layout {args[0]} failed: {r.stderr.strip()}")
    result: dict[str, Any] = json.loads(r.stdout)
    return result


def modelled(path: str, dset: str, reads: list[Any]) -> tuple[float, float]:
    """eq 3.1's seconds of the reads in turn: the original's, and the chosen plans'."""
    import patio.h5 as ph5

    session = ph5._Session(path)
    try:
        with h5py.File(path, "r") as f:
            d = f[dset]
            decider = session.decider(d)
            orig = chosen = 0.0
            for args in reads:
                sel, _ = h5sel.select(d, args if isinstance(args, tuple) else (args,))
                if decider is None:
                    continue
                cands = decider.candidates(sel)
                orig += cands[0].seconds
                chosen += decider.choose(sel).seconds
            if decider is not None:
                for rep in decider.replicas:
                    rep.close()
    finally:
        session.deciders.clear()
        session.close()
    return orig, chosen


def probe_device(directory: Path) -> dict[str, Any]:
    """eq 3.1's constants measured on the storage holding ``directory`` (``patio layout
    probe --dir``), for ``--probe``."""
    r = subprocess.run([sys.executable, "-m", "patio.layout.cli", "probe", "--dir",
                        str(directory), "--json"], capture_output=True, text=True,
                       timeout=1800, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"patio layout probe failed: {r.stderr.strip()}")
    device: dict[str, Any] = json.loads(r.stdout)
    return device


def run_kernel(w: Workload, exe: Path, env: dict[str, str], work: Path, reps: int,
               device: dict[str, Any] | None = None) -> dict[str, Any]:
    import patio.h5 as ph5

    kbdir = work / "kb" / w.name
    shutil.rmtree(kbdir, ignore_errors=True)
    os.environ["PATIO_LAYOUT_DIR"] = str(kbdir)
    learn, held_out = work / f"{w.name}.learn", work / f"{w.name}.apply"
    n_learn = write_script(w.path, w.dset, w.learn, learn)
    n_apply = write_script(w.path, w.dset, w.apply, held_out)
    with KnowledgeBase(w.path) as kb:  # the knowledge base: recording starts
        if device is not None:
            kb.set_setting("device", device)
    rec = replay(exe, w.path, w.dset, learn, env)
    layout_cli("build", w.path, "--budget", w.budget)
    status = layout_cli("status", w.path)
    ready = [r for r in status["replicas"] if r["state"] == "ready"]
    files = [w.path] + [r["path"] for r in ready]
    native_s, vol_s, h5py_s, ph5_s, resident = [], [], [], [], []
    digest = None
    for rep in range(reps):
        for through in ((False, True) if rep % 2 == 0 else (True, False)):
            resident.append(coldcache.drop(files))
            r = replay(exe, w.path, w.dset, held_out, env if through else None)
            if digest is None:
                digest = r["fnv1a"]
            if r["fnv1a"] != digest:
                raise RuntimeError(f"{w.name}: the connector's bytes differ from the native "
                                   "connector's")
            (vol_s if through else native_s).append(r["seconds"])
            opener = (lambda: ph5.File(w.path, "r")) if through else (lambda: h5py.File(w.path, "r"))
            (ph5_s if through else h5py_s).append(  # drops the files first
                layout_bench._time_reads(opener, w.dset, w.apply, files))
    # One more run through the connector alone: the reads it served.
    served0 = sum(r["served_reads"] for r in layout_cli("status", w.path)["replicas"])
    replay(exe, w.path, w.dset, held_out, env)
    served = sum(r["served_reads"] for r in layout_cli("status", w.path)["replicas"]) - served0
    orig_m, chosen_m = modelled(w.path, w.dset, w.apply)
    med = statistics.median
    return {
        "kernel": w.name, "note": w.note, "reads_learned": n_learn, "reads": n_apply,
        "recorded_s": rec["seconds"], "replicas": len(ready),
        "replica_kinds": sorted({r["kind"] for r in ready}),
        "replica_bytes": sum(r["bytes"] for r in ready),
        "file_bytes": os.path.getsize(w.path),
        "native_s": med(native_s), "vol_s": med(vol_s),
        "speedup": med(native_s) / med(vol_s) if med(vol_s) > 0 else None,
        "native_runs_s": native_s, "vol_runs_s": vol_s,
        "served": served,
        "model_original_s": orig_m, "model_chosen_s": chosen_m,
        "model_speedup": orig_m / chosen_m if chosen_m > 0 else None,
        "h5py_s": med(h5py_s), "patio_h5_s": med(ph5_s),
        "resident_after_drop": max(resident) if resident else None,
        "bytes_read": rec["bytes"], "same_bytes": True,
    }


def table(rows: list[dict[str, Any]]) -> str:
    head = (f"{'kernel':<13} {'reads':>5} {'repl':>4} {'served':>6} {'native s':>9} "
            f"{'vol s':>9} {'speedup':>7} {'model':>6} {'h5py s':>8} {'patio.h5 s':>10} "
            f"{'resident':>8}")
    out = [head, "-" * len(head)]
    for r in rows:
        sp = f"{r['speedup']:.2f}x" if r["speedup"] else "-"
        ms = f"{r['model_speedup']:.2f}x" if r["model_speedup"] else "-"
        out.append(f"{r['kernel']:<13} {r['reads']:>5} {r['replicas']:>4} "
                   f"{r['served']:>6} {r['native_s']:>9.4f} {r['vol_s']:>9.4f} "
                   f"{sp:>7} {ms:>6} {r['h5py_s']:>8.4f} {r['patio_h5_s']:>10.4f} "
                   f"{r['resident_after_drop']:>8.3f}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", type=float, default=0.125,
                   help="size of the kernels' files relative to patio bench layout's (0.125)")
    p.add_argument("--reps", type=int, default=3, help="cold runs per side (medians; 3)")
    p.add_argument("--seed", type=int, default=1, help="the learned draw; +1 is measured")
    p.add_argument("--kernels", default=",".join(PICK), help=f"comma list of {', '.join(PICK)}")
    p.add_argument("--dir", help="where the files are made (default: a temporary directory)")
    p.add_argument("--probe", action="store_true",
                   help="plan with eq 3.1's constants probed on the files' storage (patio "
                        "layout probe) instead of the default Lustre-like model")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--out", help="also write the JSON object to this file")
    p.add_argument("--plugin-dir", help="the connector's directory, with the layout core in "
                   "it or its parent (default: the installed one, as vol-env prints it)")
    a = p.parse_args(argv)
    pick = tuple(k.strip() for k in a.kernels.split(",") if k.strip())
    unknown = [k for k in pick if k not in PICK]
    if unknown or a.reps < 1 or a.scale <= 0:
        print(f"vol_kernels: unknown kernel {unknown[0]!r} (expected {', '.join(PICK)})"
              if unknown else "vol_kernels: --reps and --scale must be positive", file=sys.stderr)
        return 2
    env = vol_env()
    if a.plugin_dir:
        env["HDF5_PLUGIN_PATH"] = str(Path(a.plugin_dir).resolve())
    work = Path(tempfile.mkdtemp(prefix="patio-volk-", dir=a.dir))
    try:
        exe = work / "h5_replay"
        subprocess.run(cc_command(REPO / "bench" / "h5_replay.c", exe), check=True, timeout=120)
        data = work / "data"
        data.mkdir()
        device = probe_device(data) if a.probe else None
        rows = []
        for w in workloads(str(data), a.scale, a.seed, pick):
            rows.append(run_kernel(w, exe, env, work, a.reps, device))
            if not a.json:
                print(f"  {w.name}: done", file=sys.stderr)
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=False).stdout.strip()
        result = {"bench": "vol_kernels", "scale": a.scale, "reps": a.reps, "seed": a.seed,
                  "device": device["source"] if device else "model (lustre preset)",
                  "constants": device["constants"] if device else None,
                  "hdf5_version": env["hdf5_version"], "commit": commit,
                  "plugin_dir": env["HDF5_PLUGIN_PATH"],
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                  "host": platform.node(), "load": os.getloadavg()[0], "rows": rows}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if a.out:
        Path(a.out).write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps(result, indent=1) if a.json else table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
