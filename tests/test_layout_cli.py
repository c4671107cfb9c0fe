"""``patio layout status|advise|build|learn|evict|probe`` run through the real ``patio``
binary, as a user (or another tool reading ``--json``) runs it: the end-to-end cycle of
recording reads through patio.h5, advising, building within a budget, reading from the
replicas and evicting them; learning reads from a patio trace through the file's storage
layout; the constants of the cost model; and a one-line error with exit status 2 for
every bad input."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import patio
import patio.h5 as ph5
import pytest
from patio._binary import patio_binary
from patio.layout.kb import KnowledgeBase, kb_dir
from patio.layout.selection import Selection

REPO = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

pytestmark = [
    pytest.mark.filterwarnings("ignore::patio.h5.LayoutWarning"),
    pytest.mark.usefixtures("layout_dir"),
]


def layout(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``patio layout ARGS`` with this test's PATIO_LAYOUT_DIR."""
    env = dict(os.environ, PATIO_PYTHON=sys.executable)
    return subprocess.run([patio_binary(), "layout", *map(str, args)], check=False,
                          capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def layout_json(*args: str | Path) -> Any:
    r = layout(*args, "--json")
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return json.loads(r.stdout)


def assert_error(r: subprocess.CompletedProcess[str], *words: str) -> str:
    """A one-line ``patio layout: error:`` naming ``words``, exit status 2, no traceback."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("patio layout: error: "), r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


def make_file(path: Path) -> dict[str, np.ndarray]:
    data = {"a": np.arange(256 * 256, dtype="f8").reshape(256, 256),
            "b": np.arange(12 * 512 * 256, dtype="f4").reshape(12, 512, 256)}
    with h5py.File(path, "w") as f:
        for name, arr in data.items():
            f.create_dataset(name, data=arr)
    return data


def record_reads(path: Path, columns: tuple[int, ...] = (3, 100, 200), repeat: int = 3) -> None:
    """Column reads of /a and the sub-plane [t, 10:400, 20:60] of /b for every t (large
    enough that a replica saves more than deciding costs)."""
    with ph5.File(path) as f:
        for _ in range(repeat):
            for c in columns:
                f["a"][:, c]
        for t in range(f["b"].shape[0]):
            f["b"][t, 10:400, 20:60]


@pytest.fixture
def recorded(tmp_path: Path) -> Path:
    path = tmp_path / "run.h5"
    make_file(path)
    record_reads(path)
    return path


# ----------------------------------------------------------------------- end to end
def test_status_advise_build_read_evict(tmp_path: Path, layout_dir: Path) -> None:
    path = tmp_path / "run.h5"
    data = make_file(path)
    record_reads(path)

    st = layout_json("status", path)
    assert {"file", "datasets", "replicas", "budget_bytes", "used_bytes"} <= st.keys()
    assert st["file"] == str(path.resolve())
    assert Path(st["knowledge_base"]).parent == kb_dir(path)
    assert str(kb_dir(path)).startswith(str(layout_dir))
    by_name = {d["name"]: d for d in st["datasets"]}
    assert set(by_name) == {"/a", "/b"}
    for d in st["datasets"]:
        assert {"name", "reads", "hot_regions"} <= d.keys()
        assert d["hot_regions"], d
    assert by_name["/a"]["reads"] == 9
    assert by_name["/b"]["reads"] == 12
    (cols,) = by_name["/a"]["hot_regions"]
    assert cols["members"] == 3 and cols["reads"] == 9
    assert (cols["lo"], cols["hi"]) == ([0, 3], [256, 201])
    (planes,) = by_name["/b"]["hot_regions"]
    assert planes["members"] == 12
    assert (planes["lo"], planes["hi"]) == ([0, 10, 20], [12, 400, 60])
    assert st["replicas"] == [] and st["used_bytes"] == 0 and st["budget_bytes"] == 0

    # On an SSD (page-bound reads) replicas of these reads save about a millisecond per
    # read, far above the measured decision overhead a replica must beat: admission
    # does not hinge on this machine's load.
    layout_json("probe", "--store", "ssd", "--file", path)
    adv = layout_json("advise", path)
    assert {"file", "constants", "datasets"} <= adv.keys()
    assert {d["name"] for d in adv["datasets"]} == {"/a", "/b"}
    for d in adv["datasets"]:
        assert d["selections"]
        for s in d["selections"]:
            assert "original" in s["costs"]
            assert s["best"] in s["costs"] and s["costs"][s["best"]] is not None
            valid = [v for v in s["costs"].values() if v is not None]
            assert all(v > 0 for v in valid)
            assert s["costs"][s["best"]] == min(valid)
            assert s["costs"][s["best"]] < s["costs"]["original"]
    r = layout("advise", path, "--plot", tmp_path / "out.png")
    assert r.returncode == 0, r.stderr
    png = (tmp_path / "out.png").read_bytes()
    assert len(png) > 1000 and png.startswith(PNG_MAGIC)

    built = layout_json("build", path, "--budget", "200%")
    assert built["built"], built
    assert {b["dataset"] for b in built["built"]} == {"/a", "/b"}
    assert 0 < built["used_bytes"] <= built["budget_bytes"]
    assert built["budget_bytes"] == 2 * path.stat().st_size

    st = layout_json("status", path)
    assert st["budget_bytes"] == built["budget_bytes"]
    assert 0 < st["used_bytes"] <= st["budget_bytes"]
    assert len(st["replicas"]) == len(built["built"])
    for rep in st["replicas"]:
        assert {"dataset", "kind", "bytes", "state"} <= rep.keys()
        assert rep["state"] == "ready" and rep["bytes"] > 0
        assert Path(rep["path"]).is_file()
    files = [Path(rep["path"]) for rep in st["replicas"]]
    assert "ready" in layout("status", path).stdout

    # Reads through patio.h5 are now served from the replicas and equal h5py.
    with warnings.catch_warnings():
        warnings.simplefilter("error", ph5.LayoutWarning)
        with ph5.File(path) as f:
            for c in (3, 100, 200):
                np.testing.assert_array_equal(f["a"][:, c], data["a"][:, c])
            np.testing.assert_array_equal(f["a"][10:20, 100], data["a"][10:20, 100])
            for t in range(data["b"].shape[0]):
                np.testing.assert_array_equal(f["b"][t, 10:400, 20:60],
                                              data["b"][t, 10:400, 20:60])
            np.testing.assert_array_equal(f["b"][...], data["b"])
    st = layout_json("status", path)
    assert sum(rep["uses"] for rep in st["replicas"]) > 0

    ev = layout_json("evict", path, "--all")
    assert sorted(ev["evicted"]) == sorted(rep["id"] for rep in st["replicas"])
    assert not any(p.exists() for p in files)
    st = layout_json("status", path)
    assert st["replicas"] == [] and st["used_bytes"] == 0


def test_text_reports_and_dry_run(recorded: Path) -> None:
    r = layout("status", recorded)
    assert r.returncode == 0 and "/a: 9 reads" in r.stdout and "none" in r.stdout
    r = layout("advise", recorded)
    assert r.returncode == 0 and "best" in r.stdout and "original" in r.stdout
    dry = layout_json("build", recorded, "--budget", "50%", "--dry-run")
    assert dry["dry_run"] and dry["built"] and all(b["id"] is None for b in dry["built"])
    assert layout_json("status", recorded)["replicas"] == []
    # The budget is kept for later builds.
    again = layout_json("build", recorded)
    assert again["budget_bytes"] == recorded.stat().st_size // 2 and again["built"]


# ---------------------------------------------------------------------------- learn
def trace_stream(path: Path, offsets: list[int], lengths: list[int]) -> dict[str, Any]:
    n = len(offsets)
    return {"module": "POSIX", "file": str(path), "rank": 0, "op": "read",
            "offset": np.asarray(offsets, np.uint64), "length": np.asarray(lengths, np.uint64),
            "start": np.arange(n, dtype=np.float64) * 1e-3,
            "end": np.arange(n, dtype=np.float64) * 1e-3 + 5e-4}


def recorded_sets(path: Path, dset: str) -> list[frozenset[int]]:
    with KnowledgeBase(path) as kb:
        return sorted((frozenset(m.linear_indices().tolist())
                       for p in kb.patterns(dset) for m in p.members()), key=min)


def test_learn_maps_reads_to_selections(tmp_path: Path) -> None:
    path = tmp_path / "sim.h5"
    rows, cols = 40, 24
    with h5py.File(path, "w") as f:
        grid = f.create_dataset("grid", data=np.zeros((rows, cols), "f8"))
        chunked = f.create_dataset("chunked", data=np.ones((64, 48), "i4"), chunks=(16, 32))
        grid_base = grid.id.get_offset()
        chunks = [chunked.id.get_chunk_info(i) for i in range(chunked.id.get_num_chunks())]
    row_bytes = cols * 8
    offsets = [grid_base + i * row_bytes for i in range(rows)]
    lengths = [row_bytes] * rows
    offsets += [c.byte_offset for c in chunks]
    lengths += [c.size for c in chunks]
    offsets += [0, 48]  # the superblock and more metadata: no dataset's data
    lengths += [48, 48]
    trace = tmp_path / "sim.csv"
    patio.write_trace_csv([trace_stream(path, offsets, lengths)], str(trace))

    out = layout_json("learn", trace, "--file", path)
    assert out["requests"] == rows + len(chunks) + 2
    assert out["unmapped"] == 2
    assert out["selections"] == rows + len(chunks)
    assert out["datasets"] == {"/grid": rows, "/chunked": len(chunks)}

    want_rows = [frozenset(range(i * cols, (i + 1) * cols)) for i in range(rows)]
    assert recorded_sets(path, "/grid") == want_rows
    want_chunks = []
    for c in chunks:
        r0, c0 = c.chunk_offset
        sel = np.zeros((64, 48), bool)
        sel[r0:r0 + 16, c0:c0 + 32] = True
        want_chunks.append(frozenset(np.flatnonzero(sel).tolist()))
    assert len(chunks) == 8 and recorded_sets(path, "/chunked") == sorted(want_chunks, key=min)
    with KnowledgeBase(path) as kb:
        assert all(isinstance(p.sel, Selection) for p in kb.patterns())
        assert dict(kb.datasets()) == {"/chunked": len(chunks), "/grid": rows}

    st = layout_json("status", path)
    assert {d["name"]: d["reads"] for d in st["datasets"]} == {"/chunked": 8, "/grid": rows}


def test_learn_errors(tmp_path: Path) -> None:
    path = tmp_path / "sim.h5"
    other = tmp_path / "other.h5"
    for p in (path, other):
        with h5py.File(p, "w") as f:
            f.create_dataset("x", data=np.zeros(1000))
    trace = tmp_path / "other.csv"
    patio.write_trace_csv([trace_stream(other, [0, 4096], [100, 100])], str(trace))
    assert_error(layout("learn", trace, "--file", path), "sim.h5", "other.h5")

    size = path.stat().st_size
    past = tmp_path / "past.csv"
    patio.write_trace_csv([trace_stream(path, [0, size - 10], [100, 100])], str(past))
    assert_error(layout("learn", past, "--file", path), f"offset {size - 10}")

    assert_error(layout("learn", tmp_path / "none.csv", "--file", path), "none.csv")
    (tmp_path / "bad.csv").write_text("not,a,trace\n1,2\n")
    assert_error(layout("learn", tmp_path / "bad.csv", "--file", path), "bad.csv")
    assert_error(layout("learn", trace, "--file", tmp_path / "nope.h5"), "nope.h5")


# ------------------------------------------------------------------------ bad input
def test_bad_files(tmp_path: Path) -> None:
    text = tmp_path / "notes.h5"
    text.write_text("not HDF5\n")
    for cmd in ("status", "advise", "build", "evict"):
        assert_error(layout(cmd, text), "notes.h5", "not an HDF5 file")
        assert_error(layout(cmd, tmp_path / "missing.h5"), "missing.h5", "no such file")
        assert_error(layout(cmd, tmp_path), str(tmp_path), "directory")
    good = tmp_path / "good.h5"
    make_file(good)
    cut = tmp_path / "cut.h5"
    cut.write_bytes(good.read_bytes()[: good.stat().st_size // 3])
    assert_error(layout("advise", cut), "cut.h5")


def test_damaged_knowledge_base(recorded: Path) -> None:
    db = kb_dir(recorded) / "kb.sqlite"
    c = sqlite3.connect(db)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (root,) = c.execute("SELECT rootpage FROM sqlite_master WHERE name='pattern'").fetchone()
    page = c.execute("PRAGMA page_size").fetchone()[0]
    c.close()
    good = db.read_bytes()
    for suffix in ("-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    db.write_bytes(b"this is not an SQLite database" * 100)
    for cmd in (("status",), ("advise",), ("build", "--budget", "10%"), ("evict", "--all")):
        assert_error(layout(*cmd, recorded), str(db), "damaged")
    # Damage past the header (the pattern table) shows only when the table is read.
    damaged = bytearray(good)
    lo = (root - 1) * page
    damaged[lo:lo + page] = b"\xa5" * page
    db.write_bytes(bytes(damaged))
    for cmd in ("status", "advise"):
        assert_error(layout(cmd, recorded), str(db), "damaged")


def test_newer_knowledge_base(recorded: Path) -> None:
    db = kb_dir(recorded) / "kb.sqlite"
    with sqlite3.connect(db) as c:
        c.execute("UPDATE meta SET value='99' WHERE key='schema_version'")
    c.close()
    for cmd in (("status",), ("advise",), ("build", "--budget", "10%"), ("evict", "--all")):
        assert_error(layout(*cmd, recorded), str(db), "99")
    with sqlite3.connect(db) as c:
        c.execute("UPDATE meta SET value='one' WHERE key='schema_version'")
    c.close()
    assert_error(layout("status", recorded), str(db), "damaged")
    trace = recorded.with_suffix(".csv")
    patio.write_trace_csv([trace_stream(recorded, [0], [8])], str(trace))
    assert_error(layout("learn", trace, "--file", recorded), str(db), "damaged")


def test_budget_errors(recorded: Path) -> None:
    assert_error(layout("build", recorded), "no budget set")
    for bad in ("banana", "inf", "1e400", "-5", "2000%", "12 parsecs"):
        assert_error(layout("build", recorded, "--budget", bad), "budget", repr(bad))
    assert_error(layout("build", recorded), "no budget set")  # a bad budget is not kept
    r = layout("build", recorded, "--budget", "1")
    assert_error(r, "too small", "1 bytes")
    assert layout_json("status", recorded)["replicas"] == []


def test_evict_and_probe_errors(recorded: Path, tmp_path: Path) -> None:
    assert_error(layout("evict", recorded, "--id", "999"), "999")
    assert_error(layout("evict", recorded), "--all")
    fresh = tmp_path / "fresh.h5"
    make_file(fresh)
    assert_error(layout("evict", fresh, "--all"), "nothing recorded")
    assert_error(layout("probe", "--dir", "/nonexistent"), "/nonexistent")
    assert_error(layout("probe", "--store", "nosuch"), "nosuch")
    assert_error(layout("probe", "--dir", tmp_path, "--mib", "0"), "--mib")
    assert_error(layout("probe", "--store", "lustre", "--file", tmp_path / "no.h5"), "no.h5")


def test_deleted_dataset(recorded: Path) -> None:
    with h5py.File(recorded, "a") as f:
        del f["b"]
    for cmd in (("advise",), ("build", "--budget", "100%")):
        assert_error(layout(*cmd, recorded), "/b", "no longer exists")
    assert layout("status", recorded).returncode == 0


def test_plot_into_missing_directory(recorded: Path) -> None:
    assert not os.path.exists("/nonexistent")
    assert_error(layout("advise", recorded, "--plot", "/nonexistent/x.png"), "/nonexistent")
    assert not os.path.exists("/nonexistent")


# ---------------------------------------------------------------------------- probe
def test_probe(recorded: Path, tmp_path: Path) -> None:
    dev = layout_json("probe", "--store", "lustre")
    assert all(dev["constants"][k] > 0 for k in ("t_pg", "t_chk", "t_lat"))
    assert dev["source"] == "model"
    # The old spelling keeps working for a release, with one line naming the new one.
    old = layout("probe", "--model", "lustre", "--json")
    assert old.returncode == 0, old.stderr
    assert json.loads(old.stdout)["constants"] == dev["constants"]
    assert old.stderr.strip() == (
        "patio: warning: --model is deprecated and will be removed; use --store"
    )

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    dev = layout_json("probe", "--dir", scratch, "--mib", "16", "--file", recorded)
    consts = dev["constants"]
    assert dev["source"] == "probe" and dev["bytes"] == 16 << 20
    # Measured constants are fitted with non-negative least squares: on fast or noisy
    # storage a term can be fitted to zero, never below.
    assert all(consts[k] >= 0 for k in ("t_pg", "t_chk", "t_lat"))
    assert consts["t_pg"] + consts["t_chk"] > 0
    assert list(scratch.iterdir()) == []  # the scratch file is removed
    adv = layout_json("advise", recorded)
    assert adv["constants"] == pytest.approx(consts)


# ------------------------------------------------------- filtered and unmodellable data
def test_a_compressed_dataset_is_modelled_built_and_read_back(tmp_path: Path) -> None:
    """gzip + shuffle chunks: priced from their stored sizes, replicas built, reads
    through patio.h5 equal h5py's."""
    path = tmp_path / "z.h5"
    data = np.random.default_rng(3).random((64, 256)).astype("f4")
    with h5py.File(path, "w") as f:
        f.create_dataset("z", data=data, chunks=(1, 256), compression="gzip", shuffle=True)
    with ph5.File(path) as f:
        for _ in range(3):
            for c in (5, 77, 200):
                f["z"][:, c]
    layout_json("probe", "--store", "ssd", "--file", path)
    adv = layout_json("advise", path)
    (d,) = adv["datasets"]
    assert d["name"] == "/z" and adv["skipped"] == []
    for s in d["selections"]:
        assert s["costs"]["original"] > 0
    built = layout_json("build", path, "--budget", "100%")
    assert built["built"], built
    st = layout_json("status", path)
    assert st["replicas"] and all(r["params"]["filters"].startswith("dropped: shuffle+deflate")
                                  for r in st["replicas"]), st["replicas"]
    with ph5.File(path) as f:
        for c in (5, 77, 200, 3):
            np.testing.assert_array_equal(f["z"][:, c], data[:, c])
        np.testing.assert_array_equal(f["z"][10:20, ::7], data[10:20, ::7])


def test_an_unmodellable_dataset_is_one_line_and_left_to_h5py(tmp_path: Path) -> None:
    path = tmp_path / "e.h5"
    arr = np.arange(1000.0).reshape(10, 100)
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=arr)
        f.create_dataset("ext", shape=(10, 100), dtype="f8",
                         external=[(str(tmp_path / "raw.bin"), 0, h5py.h5f.UNLIMITED)])
        f["ext"][...] = arr
    with ph5.File(path) as f:
        for _ in range(3):
            np.testing.assert_array_equal(f["ext"][:, 5], arr[:, 5])
            f["x"][:, 5]
    r = layout("advise", path)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert "/ext: external storage" in line and "left to h5py" in line
    with h5py.File(path, "a") as f:
        del f["x"]
    with ph5.File(path) as f:
        f["ext"][:, 6]
    kb = KnowledgeBase(path)
    with kb.transaction() as db:
        db.execute("DELETE FROM pattern WHERE dset='/x'")
        db.execute("DELETE FROM access WHERE dset='/x'")
    kb.close()
    assert_error(layout("build", path, "--budget", "100%"), "no recorded dataset",
                 "/ext: external storage")
