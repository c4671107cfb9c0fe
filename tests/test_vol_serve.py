"""Tests for serving reads from layout replicas through ``libpatio_vol.so``: an
unmodified C program (tests/c/vol_read.c) reads a file whose knowledge base holds
replicas, with the connector loaded the way ``patio layout vol-env`` says.

Reference models: the native connector's output of the same program on the same file
(the bytes every read must deliver, byte for byte) and h5py's reads of the file as it
is at the time; ``patio.h5`` making the same reads with the same replicas (the choices
of the one decision core: the reads each replica serves).

What is checked: every replica kind (transposed, re-chunked in Z order, concatenated
products, concatenated points) on chunked, gzip and contiguous datasets serves exactly
the original's bytes, and ``served_reads`` counts what the connector served, as
``patio.h5`` counts its own; the user's flow (record with the connector, ``patio layout
build``, read again) serves; a source rewritten in place after the build, a write or a
resize through the connector, a missing or damaged replica file and a killed build are
each read from the original - correct bytes, at most one warning line, the replica
marked in the knowledge base, never served; ``PATIO_LAYOUT_SERVE=off`` records without
serving."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from patio.layout import replicas
from patio.layout.kb import KnowledgeBase
from patio.layout.selection import Selection, product
from test_vol import compile_c, connector_env, run, vol

pytestmark = pytest.mark.usefixtures("layout_dir")

SHAPE = (16, 64, 32)
DATASETS = ["/chunked", "/gzip", "/contiguous"]


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return connector_env()


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("vol")
    return {name: compile_c(name, d) for name in ("vol_read", "vol_write")}


def make_file(path: Path) -> Path:
    data = (np.arange(np.prod(SHAPE), dtype="f8").reshape(SHAPE) * 0.25 - 3).astype("f8")
    with h5py.File(path, "w") as f:
        f.create_dataset("chunked", data=data, chunks=(4, 16, 8), maxshape=(None,) + SHAPE[1:])
        f.create_dataset("gzip", data=data.astype("i4"), chunks=(2, 64, 32), compression="gzip")
        f.create_dataset("contiguous", data=data.astype("f4"))
    return path


def points() -> np.ndarray:
    """The ten points vol_read.c selects, as coordinates (its rule on SHAPE)."""
    n = int(np.prod(SHAPE))
    step = n // 10
    lin = [i * step + (i * 7) % step for i in range(10)]
    return np.stack(np.unravel_index(lin, SHAPE), axis=1)


def h5py_reads(ds: h5py.Dataset | object) -> list[np.ndarray]:
    """vol_read.c's reads (without its memory-hyperslab read) as h5py index arguments."""
    mask = np.zeros(SHAPE, bool)
    mask[tuple(points().T)] = True
    out = [ds[:], ds[1:3, 2:5, :], ds[::2, :, 1::2], ds[:, [0, 2, 3, 7], :]]  # type: ignore[index]
    out += [ds[t] for t in range(SHAPE[0])]  # type: ignore[index]
    out.append(ds[mask])  # type: ignore[index]
    return out


def build_every_kind(path: Path, dset: str) -> list[int]:
    """One replica of each kind for vol_read.c's reads of ``dset``."""
    shape = SHAPE
    fancy = [np.arange(shape[0]), np.array([0, 2, 3, 7]), np.arange(shape[2])]
    strided = [np.arange(0, shape[0], 2), np.arange(shape[1]), np.arange(1, shape[2], 2)]
    with KnowledgeBase(path) as kb:
        return [
            replicas.build(kb, path, dset, "transposed", {"axes": [1, 0, 2]}),
            replicas.build(kb, path, dset, "zorder", {"chunk": [4, 8, 8]}),
            replicas.build(kb, path, dset, "concat", {}, sel=product(shape, fancy),
                           axes_sets=fancy),
            replicas.build(kb, path, dset, "concat", {"axes": [2, 0, 1]},
                           sel=product(shape, strided), axes_sets=strided),
            replicas.build(kb, path, dset, "concat", {},
                           sel=Selection.from_points(shape, points())),
        ]


def status(path: Path) -> dict[str, dict[str, object]]:
    out = subprocess.run([sys.executable, "-m", "patio.layout.cli", "status", str(path),
                          "--json"], capture_output=True, text=True, check=True, timeout=120)
    return {str(r["id"]): r for r in json.loads(out.stdout)["replicas"]}


def served(path: Path) -> dict[str, int]:
    return {rid: int(r["served_reads"]) for rid, r in status(path).items()}  # type: ignore[call-overload]


def expected(path: Path, dset: str) -> bytes:
    with h5py.File(path, "r") as f:
        return b"".join(np.asarray(a, dtype="<f8").tobytes()
                        for a in h5py_reads(f[dset]))


def read_through(programs: dict[str, Path], env: dict[str, str], path: Path, dset: str,
                 out: Path, **more: str) -> subprocess.CompletedProcess[str]:
    r = run(programs["vol_read"], path, dset, out, vol(env, **more), "--no-memsel")
    assert r.returncode == 0, r.stderr
    return r


@pytest.mark.parametrize("dset", DATASETS)
def test_every_replica_kind_serves_the_originals_bytes_as_patio_h5_chooses(
    tmp_path: Path, programs: dict[str, Path], env: dict[str, str], dset: str
) -> None:
    import patio.h5

    f = make_file(tmp_path / "run.h5")
    native = tmp_path / "native.bin"
    r = run(programs["vol_read"], f, dset, native, None, "--no-memsel")
    assert r.returncode == 0, r.stderr
    ids = build_every_kind(f, dset)
    before = served(f)
    assert all(before[str(i)] == 0 for i in ids)
    r = read_through(programs, env, f, dset, tmp_path / "vol.bin")
    assert r.stderr == ""
    assert (tmp_path / "vol.bin").read_bytes() == native.read_bytes() == expected(f, dset)
    by_vol = served(f)
    assert sum(by_vol.values()) > 0, by_vol  # the replicas did serve
    # patio.h5, the same reads and the same decision core: the same replicas serve.
    with patio.h5.File(f) as p:
        got = h5py_reads(p[dset])
    with h5py.File(f, "r") as h:
        for a, b in zip(got, h5py_reads(h[dset]), strict=True):
            np.testing.assert_array_equal(a, b)
    by_h5 = {rid: n - by_vol[rid] for rid, n in served(f).items()}
    assert by_h5 == by_vol


def test_record_build_and_serve_as_a_user_does(
    tmp_path: Path, programs: dict[str, Path], env: dict[str, str]
) -> None:
    f = make_file(tmp_path / "run.h5")
    KnowledgeBase(f).close()  # `patio layout status` makes it; recording starts
    for _ in range(3):
        read_through(programs, env, f, "/contiguous", tmp_path / "first.bin")
    b = subprocess.run([sys.executable, "-m", "patio.layout.cli", "build", str(f),
                        "--budget", "1000%", "--json"], capture_output=True, text=True,
                       timeout=300, check=False)
    assert b.returncode == 0, b.stderr
    assert any(r["state"] == "ready" for r in status(f).values())
    r = read_through(programs, env, f, "/contiguous", tmp_path / "again.bin")
    assert r.stderr == ""
    assert (tmp_path / "again.bin").read_bytes() == expected(f, "/contiguous")
    assert sum(served(f).values()) > 0


def test_a_source_rewritten_in_place_is_read_from_the_original(
    tmp_path: Path, programs: dict[str, Path], env: dict[str, str]
) -> None:
    f = make_file(tmp_path / "run.h5")
    ids = build_every_kind(f, "/chunked")
    with h5py.File(f, "r+") as h:  # another program changes the data after the build
        h["chunked"][2:9, 1:40, :] = -42.5
    r = read_through(programs, env, f, "/chunked", tmp_path / "vol.bin")
    assert (tmp_path / "vol.bin").read_bytes() == expected(f, "/chunked")
    st = status(f)
    assert all(st[str(i)]["state"] == "stale" for i in ids)
    assert all(st[str(i)]["served_reads"] == 0 for i in ids)
    assert 1 <= len(r.stderr.splitlines()) <= len(ids), r.stderr


@pytest.mark.parametrize("extend", [False, True], ids=["write", "resize"])
def test_a_write_through_the_connector_makes_the_replicas_stale(
    tmp_path: Path, programs: dict[str, Path], env: dict[str, str], extend: bool
) -> None:
    f = make_file(tmp_path / "run.h5")
    ids = build_every_kind(f, "/chunked")
    cmd = [str(programs["vol_write"]), str(f), "/chunked", "1234.5"] + (["--extend"] if extend
                                                                         else [])
    env_w = {k: v for k, v in os.environ.items() if not k.startswith("HDF5_")} | vol(env)
    w = subprocess.run(cmd, env=env_w, capture_output=True, text=True, timeout=120, check=False)
    assert w.returncode == 0, w.stderr
    st = status(f)
    assert all(st[str(i)]["state"] == "stale" for i in ids)
    read_through(programs, env, f, "/chunked", tmp_path / "vol.bin")
    native = tmp_path / "native.bin"
    r = run(programs["vol_read"], f, "/chunked", native, None, "--no-memsel")
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "vol.bin").read_bytes() == native.read_bytes()
    with h5py.File(f, "r") as h:
        assert h["chunked"][0, 0, 0] == (0.25 * 0 - 3 if extend else 1234.5)
        assert h["chunked"].shape[0] == SHAPE[0] + extend
    assert sum(served(f).values()) == 0


@pytest.mark.parametrize("harm", ["missing", "damaged"])
def test_a_missing_or_damaged_replica_is_bypassed_with_one_warning(
    tmp_path: Path, programs: dict[str, Path], env: dict[str, str], harm: str
) -> None:
    f = make_file(tmp_path / "run.h5")
    ids = build_every_kind(f, "/contiguous")
    victim = status(f)[str(ids[2])]  # the fancy-index product replica
    path = Path(str(victim["path"]))
    if harm == "missing":
        path.unlink()
    else:
        path.write_bytes(b"not an HDF5 file" * 64)
    r = read_through(programs, env, f, "/contiguous", tmp_path / "vol.bin")
    assert (tmp_path / "vol.bin").read_bytes() == expected(f, "/contiguous")
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and f"replica {ids[2]}" in lines[0] and harm in lines[0], r.stderr
    st = status(f)
    assert st[str(ids[2])]["state"] == harm and st[str(ids[2])]["served_reads"] == 0
    assert sum(served(f).values()) > 0  # the others still serve
    r = read_through(programs, env, f, "/contiguous", tmp_path / "vol2.bin")
    assert r.stderr == ""  # reported once: the knowledge base remembers


def test_a_killed_build_is_never_served(
    tmp_path: Path, programs: dict[str, Path], env: dict[str, str]
) -> None:
    f = make_file(tmp_path / "run.h5")
    with KnowledgeBase(f) as kb:
        # What a build killed before its rename leaves: a "building" row and a temporary
        # file holding wrong data.
        rid = kb.add_replica("/contiguous", "concat", {"axes_sets": []}, None, "", {})
        tmp = replicas.replica_path(kb, rid, tmp=True)
        with h5py.File(tmp, "w") as h:
            h["data"] = np.full((16, 4, 32), 99.0, "f4")
    read_through(programs, env, f, "/contiguous", tmp_path / "vol.bin")
    assert (tmp_path / "vol.bin").read_bytes() == expected(f, "/contiguous")
    assert served(f) == {str(rid): 0}


def test_serving_off_records_without_serving(
    tmp_path: Path, programs: dict[str, Path], env: dict[str, str]
) -> None:
    f = make_file(tmp_path / "run.h5")
    build_every_kind(f, "/chunked")
    read_through(programs, env, f, "/chunked", tmp_path / "vol.bin", PATIO_LAYOUT_SERVE="off")
    assert (tmp_path / "vol.bin").read_bytes() == expected(f, "/chunked")
    assert sum(served(f).values()) == 0
    with KnowledgeBase(f) as kb:
        kb.compact()
        assert kb.raw_rows() + sum(p.reads for p in kb.patterns()) > 0


# ---- served counts through the record logs -----------------------------------------

def served_log(entries: list[tuple[int, int, float, float, str]]) -> bytes:
    """A served log as docs/FORMATS.md ("Record log", version 2) lays it out: the header,
    one served frame of (replica id, reads, benefit, last used, path) entries, the end
    frame."""
    import struct
    import zlib

    def frame(payload: bytes) -> bytes:
        return struct.pack("<II", len(payload), zlib.crc32(payload)) + payload

    body = struct.pack("<B3xI", 3, len(entries))
    for rid, uses, benefit, last_used, path in entries:
        p = path.encode()
        body += struct.pack("<qqddH", rid, uses, benefit, last_used, len(p)) + p
    return b"PKBL" + struct.pack("<HH", 2, 0) + frame(body) + frame(struct.pack("<B3xI", 2, 0))


def logs(path: Path) -> list[Path]:
    from patio.layout.kb import kb_dir

    return sorted((kb_dir(path) / "records").glob("*.log"))


def test_the_connector_counts_served_reads_in_a_log_without_writing_the_database(
    tmp_path: Path, programs: dict[str, Path], env: dict[str, str]
) -> None:
    """Closing the file leaves the counts in a served log (no write transaction, the
    database file untouched); the merge of `patio layout status` adds them, once."""
    from patio.layout import kblog

    f = make_file(tmp_path / "run.h5")
    build_every_kind(f, "/chunked")
    with KnowledgeBase(f) as kb:
        kb.compact()
        db = kb.path
    before = db.stat()
    read_through(programs, env, f, "/chunked", tmp_path / "vol.bin")
    after = db.stat()
    assert (after.st_mtime_ns, after.st_size) == (before.st_mtime_ns, before.st_size)
    served_logs = []
    for p in logs(f):
        dec, _ = kblog.read_log(p, 0)
        assert dec.problem is None and dec.finished
        served_logs += [s for fr in dec.frames for s in fr.served]
    assert served_logs and all(s[0] > 0 for s in served_logs)
    counts = served(f)
    want: dict[str, int] = {}
    for uses, _, _, rid, _ in served_logs:
        want[str(rid)] = want.get(str(rid), 0) + uses
    assert {k: v for k, v in counts.items() if v} == want
    assert served(f) == counts  # merged once: the logs are gone
    assert not logs(f)


def test_a_served_log_counts_only_its_replicas_and_a_torn_one_nothing(tmp_path: Path) -> None:
    f = make_file(tmp_path / "run.h5")
    with KnowledgeBase(f) as kb:
        rid = replicas.build(kb, f, "/chunked", "transposed", {"axes": [1, 0, 2]})
        (row,) = kb.replicas()
        records = kb.dir / "records"
    records.mkdir(exist_ok=True)
    dead = 2**22 + 12345  # above pid_max's default: no such process
    host = __import__("patio._files", fromlist=["host_name"]).host_name()
    good = served_log([(rid, 5, 0.5, 1000.0, row.path), (rid, 2, 0.25, 3000.0, row.path),
                       (rid, 9, 9.0, 9000.0, "/elsewhere/r1.h5"), (rid + 50, 4, 1.0, 1.0, "x")])
    (records / f"{host}.{dead}-00000001.log").write_bytes(good)
    torn = served_log([(rid, 100, 1.0, 1.0, row.path)])
    (records / f"{host}.{dead}-00000002.log").write_bytes(torn[:30])
    damaged = bytearray(torn)
    damaged[20] ^= 0xFF  # inside the served frame: its checksum fails
    (records / f"{host}.{dead}-00000003.log").write_bytes(bytes(damaged))
    assert served(f) == {str(rid): 7}
    with KnowledgeBase(f) as kb:
        (row,) = kb.replicas()
        assert (row.uses, row.benefit, row.last_used) == (7, 0.75, 3000.0)
    assert not logs(f)  # merged or dropped: their writer is gone


def test_a_file_opened_again_in_one_process_is_served_alike(
    tmp_path: Path, programs: dict[str, Path], env: dict[str, str]
) -> None:
    """The second open of a file in one process makes its replica sets from what the
    first read of the knowledge base found (the database unchanged): the same bytes,
    the same reads served."""
    f = make_file(tmp_path / "run.h5")
    build_every_kind(f, "/chunked")
    once = read_through(programs, env, f, "/chunked", tmp_path / "once.bin")
    assert once.stderr == ""
    first = served(f)
    assert sum(first.values()) > 0
    r = run(programs["vol_read"], f, "/chunked", tmp_path / "twice.bin", vol(env),
            "--no-memsel", "--twice")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert (tmp_path / "twice.bin").read_bytes() == 2 * expected(f, "/chunked")
    assert {k: n - first[k] for k, n in served(f).items()} == {k: 2 * n for k, n in first.items()}
