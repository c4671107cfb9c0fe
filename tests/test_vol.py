"""Tests for ``libpatio_vol.so`` (``vol/``), patio's pass-through HDF5 VOL connector,
loaded into an unmodified C program (tests/c/vol_read.c, built here against the HDF5
scripts/hdf5.sh builds) the way ``patio layout vol-env`` says.

Reference models: h5py on the original file (the bytes every read must deliver:
everything, a box, a strided slab, fancy indices, a plane per time step, points, and a
box into a memory hyperslab of a larger buffer), and ``patio.h5`` making the same reads
(the knowledge base's patterns the connector's recording must produce).

What is checked: outputs with the connector are byte-identical to the native
connector's and to h5py's, for chunked, gzip-compressed and contiguous datasets; reads
of a file with a knowledge base are recorded as exactly the patterns patio.h5 records
(selection JSON, families, point blobs), and a file without one gets no log; a
misconfigured connector (bad info string, layout core missing, recording switched off)
still serves the same bytes with one warning line; ``vol-env`` prints what loads it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from patio.layout.kb import KnowledgeBase, kb_dir

ROOT = Path(__file__).resolve().parents[1]
SHAPE = (6, 10, 8)
DATASETS = ["/chunked", "/gzip", "/contiguous"]


def connector_env() -> dict[str, str]:
    """The connector's environment, as ``patio layout vol-env --json`` prints it (setup
    builds and installs the connector and its HDF5)."""
    from patio.layout.vol import VolError, vol_env

    try:
        return vol_env()
    except VolError as e:
        pytest.fail(f"{e}")


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return connector_env()


def compile_c(name: str, dest: Path) -> Path:
    """tests/c/NAME.c built with -Wall -Wextra -Werror against the connector's HDF5."""
    from patio.layout.vol import cc_command

    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    exe = dest / name
    subprocess.run(cc_command(ROOT / "tests" / "c" / f"{name}.c", exe), check=True, timeout=120)
    return exe


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_c("vol_read", tmp_path_factory.mktemp("vol"))


def make_file(path: Path) -> Path:
    data = (np.arange(np.prod(SHAPE), dtype="f8").reshape(SHAPE) * 1.5 - 7).astype("f8")
    with h5py.File(path, "w") as f:
        f.create_dataset("chunked", data=data, chunks=(2, 5, 4))
        f.create_dataset("gzip", data=data.astype("i4"), chunks=(3, 4, 8), compression="gzip",
                         shuffle=True)
        f.create_dataset("contiguous", data=data.astype("f4"))
    return path


def points_mask() -> np.ndarray:
    """The ten points vol_read.c selects (ascending linear indices)."""
    n = int(np.prod(SHAPE))
    step = n // 10
    mask = np.zeros(SHAPE, bool)
    for i in range(10):
        mask.flat[i * step + (i * 7) % step] = True
    return mask


def h5py_reads(ds: h5py.Dataset | object, memsel: bool = True) -> list[np.ndarray]:
    """vol_read.c's reads made with h5py (or patio.h5) index arguments."""
    out = [ds[:], ds[1:3, 2:5, :], ds[::2, :, 1::2], ds[:, [0, 2, 3, 7], :]]  # type: ignore[index]
    out += [ds[t] for t in range(SHAPE[0])]  # type: ignore[index]
    out.append(ds[points_mask()])  # type: ignore[index]
    if memsel:
        buf = np.full((4, 5, 6), -1.0)
        buf[1:3, 1:4, 1:5] = ds[1:3, 2:5, 0:4]  # type: ignore[index]
        out.append(buf)
    return out


def expected(path: Path, dset: str) -> bytes:
    with h5py.File(path, "r") as f:
        return b"".join(np.asarray(a, dtype="<f8").tobytes() for a in h5py_reads(f[dset]))


def run(program: Path, path: Path, dset: str, out: Path, env: dict[str, str] | None,
        *extra: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("HDF5_")}
    full.update(env or {})
    return subprocess.run([str(program), str(path), dset, str(out), *extra], env=full,
                          capture_output=True, text=True, timeout=120, check=False)


def vol(env: dict[str, str], **more: str) -> dict[str, str]:
    return {"HDF5_PLUGIN_PATH": env["HDF5_PLUGIN_PATH"],
            "HDF5_VOL_CONNECTOR": env["HDF5_VOL_CONNECTOR"], **more}


def patterns(path: Path) -> list[tuple[object, ...]]:
    with KnowledgeBase(path) as kb:
        kb.compact()
        rows = []
        for p in kb.patterns():
            pts = None if p.sel.points is None else p.sel.points.tolist()
            starts = None if p.axis is None else [int(s) for s in p.starts]
            rows.append((p.dset, p.sel.to_json(), p.reads, p.axis, starts, pts))
        return sorted(rows, key=repr)


# ---- same bytes ------------------------------------------------------------------


@pytest.mark.parametrize("dset", DATASETS)
def test_reads_are_byte_identical_to_native_and_h5py(
    tmp_path: Path, program: Path, env: dict[str, str], dset: str
) -> None:
    f = make_file(tmp_path / "run.h5")
    native, through = tmp_path / "native.bin", tmp_path / "vol.bin"
    r = run(program, f, dset, native, None)
    assert r.returncode == 0, r.stderr
    r = run(program, f, dset, through, vol(env))
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    assert through.read_bytes() == native.read_bytes()
    assert native.read_bytes() == expected(f, dset)
    assert not kb_dir(f).exists()  # no knowledge base: nothing recorded, nothing made


# ---- recording ---------------------------------------------------------------------


@pytest.mark.usefixtures("layout_dir")
def test_reads_are_recorded_as_patio_h5_records_them(
    tmp_path: Path, program: Path, env: dict[str, str]
) -> None:
    import patio.h5

    c_file = make_file(tmp_path / "c.h5")
    py_file = make_file(tmp_path / "py.h5")
    KnowledgeBase(c_file).close()  # a knowledge base: reads of this file are recorded
    for dset in DATASETS:
        r = run(program, c_file, dset, tmp_path / "out.bin", vol(env), "--no-memsel")
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""
        assert (tmp_path / "out.bin").read_bytes() == expected(c_file, dset)[:-120 * 8]
    logs = list((kb_dir(c_file) / "records").iterdir())
    assert len(logs) == len(DATASETS)  # one log per process, each ended (merged below)
    with patio.h5.File(py_file) as f:
        for dset in DATASETS:
            h5py_reads(f[dset], memsel=False)
    c_pats, py_pats = patterns(c_file), patterns(py_file)
    assert c_pats == py_pats
    assert len(c_pats) == len(DATASETS) * 6  # all, box, strided, fancy, planes, points
    planes = [p for p in c_pats if p[0] == "/chunked" and p[2] == SHAPE[0]]
    assert planes and planes[0][4] == list(range(SHAPE[0]))  # one family of 6 planes
    status = json.loads(subprocess.run(
        [sys.executable, "-m", "patio.layout.cli", "status", str(c_file), "--json"],
        capture_output=True, text=True, check=True, timeout=120).stdout)  # fmt: skip
    reads = {d["name"]: d["reads"] for d in status["datasets"]}
    assert reads == {d: 5 + SHAPE[0] for d in DATASETS}


@pytest.mark.usefixtures("layout_dir")
def test_a_memory_selection_is_recorded_with_the_buffer_shape(
    tmp_path: Path, program: Path, env: dict[str, str]
) -> None:
    f = make_file(tmp_path / "run.h5")
    KnowledgeBase(f).close()
    r = run(program, f, "/chunked", tmp_path / "out.bin", vol(env))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.bin").read_bytes() == expected(f, "/chunked")
    sels = [json.loads(p[1]) for p in patterns(f)]
    memsel = [s for s in sels if s["out"] == [4, 5, 6]]
    assert memsel == [{"shape": list(SHAPE), "kind": "hyperslab", "out": [4, 5, 6],
                       "slabs": [[[1, 2, 0], [1, 1, 1], [1, 1, 1], [2, 3, 4]]]}]


@pytest.mark.usefixtures("layout_dir")
def test_multi_dataset_block_memory_and_reads_not_recorded(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """H5Dread_multi is one read per dataset; H5S_BLOCK memory gives a flat result; a
    scalar dataset, a string dataset and an empty selection are read but not recorded
    (as patio.h5 leaves them to h5py); a file opened by a relative path is recorded in
    its own knowledge base after the program changed its directory."""
    exe = compile_c("vol_misc", tmp_path)
    f = make_file(tmp_path / "run.h5")
    with h5py.File(f, "a") as h:
        h["scalar"] = 2.5
        h["names"] = np.array([b"alpha", b"beta"], dtype="S8")
        want = b"".join(np.asarray(a, "<f8").tobytes() for a in (
            h["chunked"][()], h["contiguous"][()], h["chunked"][0:2, 0:3, 0:4], h["scalar"][()]))
        want += h["names"][0].ljust(8, b"\0")
    KnowledgeBase(f).close()
    for e in (None, vol(env)):
        out = tmp_path / "out.bin"
        r = subprocess.run([str(exe), f.name, str(out)], capture_output=True, text=True,
                           timeout=120, check=False, cwd=f.parent,
                           env={**{k: v for k, v in os.environ.items()
                                   if not k.startswith("HDF5_")}, **(e or {})})
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""
        assert out.read_bytes() == want
    whole = [[0, 0, 0], [1, 1, 1], [1, 1, 1], list(SHAPE)]
    got = sorted(((p[0], json.loads(p[1])) for p in patterns(f)), key=repr)
    assert got == sorted([
        ("/chunked", {"shape": list(SHAPE), "kind": "hyperslab", "out": [24],
                      "slabs": [[[0, 0, 0], [1, 1, 1], [1, 1, 1], [2, 3, 4]]]}),
        ("/chunked", {"shape": list(SHAPE), "kind": "hyperslab", "out": list(SHAPE),
                      "slabs": [whole]}),
        ("/contiguous", {"shape": list(SHAPE), "kind": "hyperslab", "out": list(SHAPE),
                         "slabs": [whole]}),
    ], key=repr)


# ---- misconfiguration ------------------------------------------------------------


@pytest.mark.usefixtures("layout_dir")
@pytest.mark.parametrize("case", ["bare", "bad-info", "no-core", "off"])
def test_connector_configurations_serve_native_bytes_with_at_most_one_warning(
    tmp_path: Path, program: Path, env: dict[str, str], case: str
) -> None:
    f = make_file(tmp_path / "run.h5")
    KnowledgeBase(f).close()
    e = vol(env)
    if case == "bare":  # no info at all: the native connector beneath, no warning
        e["HDF5_VOL_CONNECTOR"] = "patio"
    elif case == "bad-info":
        e["HDF5_VOL_CONNECTOR"] = "patio under_volume=zero"
    elif case == "no-core":
        e["PATIO_LAYOUT_LIB"] = str(tmp_path / "missing" / "libpatio_layout.so")
    else:
        e["PATIO_LAYOUT"] = "off"
    r = run(program, f, "/gzip", tmp_path / "out.bin", e)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.bin").read_bytes() == expected(f, "/gzip")
    lines = r.stderr.splitlines()
    if case == "off":
        assert lines == []
        assert not (kb_dir(f) / "records").exists()
    elif case == "bare":
        assert lines == []
        assert len(patterns(f)) == 7
    else:
        assert len(lines) == 1 and lines[0].startswith("patio VOL: "), r.stderr
    if case == "no-core":
        assert "reads pass through unrecorded" in lines[0]
        assert not (kb_dir(f) / "records").exists()
    if case == "bad-info":  # the native connector beneath, recording as usual
        assert "native connector" in lines[0]
        assert len(patterns(f)) == 7


# ---- vol-env -------------------------------------------------------------------------


def test_vol_env_prints_what_loads_the_connector(
    tmp_path: Path, program: Path, env: dict[str, str]
) -> None:
    out = subprocess.run([sys.executable, "-m", "patio.layout.cli", "vol-env", "--json"],
                         capture_output=True, text=True, check=True, timeout=60).stdout
    got = json.loads(out)
    assert set(got) == {"HDF5_PLUGIN_PATH", "HDF5_VOL_CONNECTOR", "hdf5_version"}
    assert got == env
    assert (Path(got["HDF5_PLUGIN_PATH"]) / "libpatio_vol.so").is_file()
    assert [p.name for p in Path(got["HDF5_PLUGIN_PATH"]).iterdir()] == ["libpatio_vol.so"]
    f = make_file(tmp_path / "run.h5")
    KnowledgeBase(f).close()
    script = (f'eval "$({sys.executable} -m patio.layout.cli vol-env)"; '
              f'"{program}" "{f}" /chunked "{tmp_path / "out.bin"}"')
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=120,
                       check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "out.bin").read_bytes() == expected(f, "/chunked")
    assert list((kb_dir(f) / "records").iterdir())  # loaded: the reads were recorded


def test_patio_run_hdf5_loads_the_connector_for_one_command(
    tmp_path: Path, program: Path
) -> None:
    from patio._binary import patio_binary

    f = make_file(tmp_path / "run.h5")
    KnowledgeBase(f).close()
    out = tmp_path / "out.bin"
    plain = {k: v for k, v in os.environ.items() if not k.startswith("HDF5_")}
    r = subprocess.run([patio_binary(), "run", "--hdf5", "--", str(program), str(f), "/gzip",
                        str(out)], env=plain, capture_output=True, text=True, timeout=120,
                       check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == expected(f, "/gzip")
    assert len(patterns(f)) == 7  # recorded: the connector was loaded
    r = subprocess.run([patio_binary(), "run", "--hdf5", "--stats", str(tmp_path / "s"), "--",
                        "true"], env=plain, capture_output=True, text=True, timeout=60,
                       check=False)  # fmt: skip
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "give --mpiio too" in r.stderr


# ---- one knowledge base location -------------------------------------------------


def reference_kb_dir(source: str) -> str:
    """Where docs/FORMATS.md puts a file's knowledge base: ``.patio-layout/<name>`` beside
    the file, or ``$PATIO_LAYOUT_DIR/<name>-<12 hex digits of the SHA-1 of the resolved
    path>``; the path resolved as ``Path.resolve`` does (symlinks, missing parts kept)."""
    import hashlib

    src = Path(source).resolve()
    env = os.environ.get("PATIO_LAYOUT_DIR")
    if env:
        return str(Path(env) / f"{src.name}-{hashlib.sha1(str(src).encode()).hexdigest()[:12]}")
    return str(src.parent / ".patio-layout" / src.name)


@pytest.mark.parametrize("layout_env", [False, True])
def test_the_layout_core_finds_the_knowledge_base_python_finds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, layout_env: bool
) -> None:
    """The connector's recorder asks the layout core (``patio_kb_dir``) where a file's
    knowledge base is; it must be the directory ``patio.layout.kb.kb_dir`` names and the
    documented one (``reference_kb_dir``), for absolute, relative, symlinked and not yet
    existing paths, with and without ``PATIO_LAYOUT_DIR``."""
    import ctypes

    from patio.layout.vol import lib_dir

    core = ctypes.CDLL(str(lib_dir() / "libpatio_layout.so"))
    core.patio_kb_dir.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64,
                                  ctypes.POINTER(ctypes.c_uint64)]
    if layout_env:
        monkeypatch.setenv("PATIO_LAYOUT_DIR", str(tmp_path / "kbs"))
    else:
        monkeypatch.delenv("PATIO_LAYOUT_DIR", raising=False)
    (tmp_path / "data").mkdir()
    make_file(tmp_path / "data" / "run.h5")
    (tmp_path / "link").symlink_to(tmp_path / "data")
    monkeypatch.chdir(tmp_path)
    for path in [str(tmp_path / "data" / "run.h5"), "data/run.h5", "link/run.h5",
                 "link/../data/run.h5", "data/new.h5", "missing/dir/x.h5"]:
        buf, n = ctypes.create_string_buffer(4096), ctypes.c_uint64()
        assert core.patio_kb_dir(path.encode(), buf, 4096, ctypes.byref(n)) == 0
        assert buf.value.decode() == str(kb_dir(path)) == reference_kb_dir(path), path
    assert core.patio_kb_dir(b"x.h5", None, 0, ctypes.byref(n)) == -3  # PATIO_ERANGE
    assert n.value == len(str(kb_dir("x.h5")))


def test_selection_json_and_integer_blobs_are_the_documented_ones() -> None:
    """``Selection.to_json`` and ``encode_ints`` (the layout core's definitions, which the
    connector's records use) write the documented encodings: compact JSON of shape,
    kind, out and the slabs' [start, stride, count, block] (none for points), and the
    pattern engine's encoding of the integers (``patio.detect``, window 32), which
    decodes back to them."""
    from patio import detect
    from patio.layout.kb import decode_ints, encode_ints
    from patio.layout.selection import Hyperslab, Selection

    a = Hyperslab((0, 1, 2), (1, 1, 1), (1, 1, 1), (2, 3, 4))
    b = Hyperslab((3, 0, 0), (2, 1, 1), (2, 1, 1), (1, 10, 8))
    pts = np.array([[1, 2, 3], [4, 5, 6]])
    for sel in [Selection.hyperslab(SHAPE, a), Selection.union(SHAPE, [a, b], (4, 5, 6)),
                Selection.from_points(SHAPE, pts), Selection.all(SHAPE)]:  # fmt: skip
        ref: dict[str, object] = {"shape": list(SHAPE), "kind": sel.kind,
                                  "out": list(sel.out_shape)}  # fmt: skip
        if sel.kind != "points":
            ref["slabs"] = [s.to_json() for s in sel.slabs]
        assert sel.to_json() == json.dumps(ref, separators=(",", ":"))
        assert Selection.from_json(sel.to_json(), sel.points) == sel
    rng = np.random.default_rng(5)
    for values in [np.arange(0, 4000, 7), np.sort(rng.integers(0, 10**9, 300)),
                   rng.integers(-50, 50, 64), np.zeros(0, np.int64)]:  # fmt: skip
        blob = encode_ints(values)
        assert blob == bytes(detect(np.asarray(values, np.int64)).encode())
        assert np.array_equal(decode_ints(blob), values)
