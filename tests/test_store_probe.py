"""Cold reads and the storage probe: ``patio._coldcache`` takes written files out of the
page cache (fsync, then drop, checked with ``mincore``), and ``patio store probe``
calibrates the striped storage model on the real file system and saves it for
``--store probed``."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import pytest
from patio import _coldcache as coldcache
from patio._binary import NOT_BUILT, find_patio


def _write(path: Path, nbytes: int) -> None:
    with open(path, "wb") as f:
        f.write(os.urandom(nbytes))  # no fsync: the pages are dirty


def test_drop_takes_a_freshly_written_file_out_of_the_page_cache(tmp_path: Path) -> None:
    path = tmp_path / "fresh.bin"
    _write(path, 4 << 20)
    resident, total = coldcache.resident_pages(path)
    assert total == (4 << 20) // os.sysconf("SC_PAGE_SIZE")
    assert resident / total > 0.9, "a file just written is in the page cache"
    left = coldcache.drop([path, tmp_path / "missing"])
    if left > 0.5:
        pytest.skip(f"the file system of {tmp_path} keeps pages in memory (tmpfs?): "
                    f"{left:.0%} resident after fsync + POSIX_FADV_DONTNEED")
    assert left < 0.02
    assert coldcache.resident_fraction([path]) == left
    # Reading it back brings it in again: the measure is not stuck at zero.
    path.read_bytes()
    assert coldcache.resident_fraction([path]) > 0.9


def test_dontneed_without_fsync_is_the_warm_read_it_replaces(tmp_path: Path) -> None:
    """The bug this module fixes: DONTNEED on dirty pages leaves (most of) them."""
    path = tmp_path / "dirty.bin"
    _write(path, 4 << 20)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    before = coldcache.resident_fraction([path])
    after = coldcache.drop([path])
    assert after <= before
    if after > 0.5:
        pytest.skip(f"{tmp_path}'s file system cannot drop pages (tmpfs?)")
    assert after < 0.02


def test_empty_files_and_no_files() -> None:
    assert coldcache.resident_fraction([]) == 0.0
    assert coldcache.drop([]) == 0.0


def test_a_file_system_that_cannot_drop_is_reported_not_hidden() -> None:
    """tmpfs pages cannot leave memory: the drop says so (resident fraction 1)."""
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm (tmpfs) here")
    path = shm / f"patio-coldcache-{os.getpid()}"
    try:
        _write(path, 1 << 20)
        assert coldcache.drop([path]) == 1.0
    finally:
        path.unlink(missing_ok=True)


# ----------------------------------------------------------------- patio store probe
PROBE_KEYS = {"version", "host", "directory", "device", "direct_io", "rpc_source",
              "probe_bytes", "measured_at", "striping", "samples", "unmeasured", "saved_to"}
STRIPING_KEYS = {"targets", "stripe_size", "rpc_size", "page_size", "latency_seq",
                 "latency_near", "latency_mid", "latency_far", "bandwidth", "request_latency"}


def _patio(*args: object, config: Path, check: bool = True) -> subprocess.CompletedProcess[str]:
    binary = find_patio()
    if binary is None:
        pytest.skip(NOT_BUILT)
    env = dict(os.environ, XDG_CONFIG_HOME=str(config))
    done = subprocess.run([binary, *map(str, args)], capture_output=True, text=True,
                          env=env, check=False, timeout=120)
    if check:
        assert done.returncode == 0, done.stderr
    return done


def _one_line_error(done: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr and "panicked" not in done.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def _reorg_case(d: Path) -> tuple[Path, Path]:
    """A file read by 4 ranks in turn and its trace (what ``reorg plan`` prices)."""
    src = d / "data.bin"
    src.write_bytes(os.urandom(4 * 8 * 8192))
    rows = [f"MPIIO,/lustre/data.bin,{r},read,{(i * 4 + r) * 8192},8192,{i},{i + 0.5}\n"
            for r in range(4) for i in range(8)]
    trace = d / "run.csv"
    trace.write_text("module,file,rank,op,offset,length,start,end\n" + "".join(rows))
    return src, trace


def test_store_probe_measures_saves_and_is_the_probed_preset(tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    src, trace = _reorg_case(tmp_path)
    saved = cfg / "patio" / "store-probed.json"

    # No probe saved: one clear line naming the file and the command, non-zero exit,
    # from the Rust commands and from the Python ones (the same loader).
    _one_line_error(_patio("reorg", "plan", trace, "--file", src, "--store", "probed",
                           config=cfg, check=False),
                    f"no probed store parameters at {saved}", "run `patio store probe`")
    _one_line_error(_patio("bench", "layout", "--kernel", "model", "--store", "probed",
                           config=cfg, check=False),
                    f"no probed store parameters at {saved}")

    out = json.loads(_patio("store", "probe", "--dir", scratch, "--mib", 8, "--samples", 3,
                            "--json", config=cfg).stdout)
    assert set(out) == PROBE_KEYS
    assert out["version"] == 1 and out["saved_to"] == str(saved)
    assert out["directory"] == str(scratch.resolve()) and out["probe_bytes"] == 8 << 20
    s = out["striping"]
    assert set(s) == STRIPING_KEYS and s["targets"] == 1
    for k in ("latency_seq", "latency_near", "latency_mid", "latency_far", "bandwidth"):
        assert math.isfinite(s[k]) and s[k] > 0, (k, s)
    assert s["latency_near"] >= s["latency_seq"]  # a seek is priced at least as a read
    assert s["rpc_size"] >= s["page_size"] > 0
    assert [x for x in out["samples"] if x["kind"] == "seq"], out["samples"]
    assert all(x["requests"] >= 3 and x["seconds"] > 0 for x in out["samples"])
    assert list(scratch.iterdir()) == []  # the scratch file is removed
    on_disk = json.loads(saved.read_text())
    assert on_disk == {k: v for k, v in out.items() if k != "saved_to"}
    assert [p.name for p in saved.parent.iterdir()] == ["store-probed.json"]

    # Saved: both accept it, and the Python model is the saved one. (This machine's
    # disk may have no seek cost, and then `reorg plan` rightly finds nothing to gain:
    # the saved file is given a hard disk's parameters to price the layout on.)
    s = dict(s, stripe_size=65536, rpc_size=65536, latency_seq=5e-5, latency_near=1e-3,
             latency_mid=4e-3, latency_far=8e-3, bandwidth=150e6)
    saved.write_text(json.dumps(dict(on_disk, striping=s)))
    plan = json.loads(_patio("reorg", "plan", trace, "--file", src, "--store", "probed",
                             "--json", config=cfg).stdout)
    assert plan["patterns"]
    bench = json.loads(_patio("bench", "layout", "--kernel", "model", "--store", "probed",
                              "--randoms", 1, "--json", config=cfg).stdout)
    for k, v in s.items():
        assert bench["store"][k] == pytest.approx(v), k

    # --no-save leaves the saved probe alone; a bad size is one line.
    before = saved.read_text()
    _patio("store", "probe", "--dir", scratch, "--mib", 4, "--samples", 3, "--no-save",
           config=cfg)
    assert saved.read_text() == before
    _one_line_error(_patio("store", "probe", "--dir", scratch, "--mib", 1, config=cfg,
                           check=False), "at least 4 MiB")
    _one_line_error(_patio("store", "probe", "--dir", tmp_path / "nope", config=cfg,
                           check=False), "nope")
    # A probe from another machine is refused by name.
    saved.write_text(json.dumps(dict(on_disk, host="elsewhere")))
    _one_line_error(_patio("reorg", "plan", trace, "--file", src, "--store", "probed",
                           config=cfg, check=False), "measured on elsewhere")
