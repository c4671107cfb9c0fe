"""The VOL connector on random selections: tests/c/vol_sel.c reads seeded random
selections (everything, regular hyperslabs with and without dropped unit axes, unions
of possibly overlapping boxes, point lists with repeats) of chunked, gzip-compressed and
contiguous datasets, with and without ``libpatio_vol.so`` loaded.

Reference models: h5py's low-level read of the same file and memory dataspaces on the
original (the bytes), and patio.h5's recording path for the same dataspaces
(``patio.layout.h5sel.from_space`` and ``KnowledgeBase.record``: the patterns)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from h5py import h5s, h5t
from patio.layout import h5sel
from patio.layout.kb import KnowledgeBase, kb_dir
from patio.layout.selection import Selection
from test_vol import DATASETS, SHAPE, compile_c, connector_env, make_file, patterns, run, vol

READS = 40


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    return connector_env()


@pytest.fixture(scope="module")
def program(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return compile_c("vol_sel", tmp_path_factory.mktemp("vol"))


def random_reads(rng: np.random.Generator, count: int = READS) -> list[tuple[list[int], str, list[int]]]:
    """(memory dims, kind, numbers) per read, as vol_sel.c's spec lines take them."""
    reads: list[tuple[list[int], str, list[int]]] = []
    for _ in range(count):
        kind = rng.choice(["A", "H", "U", "P"], p=[0.1, 0.4, 0.25, 0.25])
        if kind == "A":
            reads.append((list(SHAPE), "A", []))
        elif kind == "H":
            parts: list[list[int]] = [[], [], [], []]
            for n in SHAPE:
                block = int(rng.integers(1, 3))
                stride = block + int(rng.integers(0, 3))
                count = int(rng.integers(1, (n - block) // stride + 2))
                start = int(rng.integers(0, n - (count - 1) * stride - block + 1))
                for part, v in zip(parts, (start, stride, count, block)):
                    part.append(v)
            ext = [c * b for c, b in zip(parts[2], parts[3])]
            mem = [e for e in ext if e != 1] if rng.random() < 0.5 else ext
            reads.append((mem, "H", [1] + [v for part in parts for v in part]))
        elif kind == "U":
            k = int(rng.integers(2, 5))
            nums = [k]
            for _ in range(k):
                lo = [int(rng.integers(0, n)) for n in SHAPE]
                size = [int(rng.integers(1, n - x + 1)) for x, n in zip(lo, SHAPE)]
                nums += lo + [1] * len(SHAPE) + [1] * len(SHAPE) + size
            reads.append(([], "U", nums))  # memory dims: the selection's size, below
        else:
            k = int(rng.integers(1, 30))
            pts = [int(rng.integers(0, n)) for _ in range(k) for n in SHAPE]
            reads.append(([k], "P", [k] + pts))
    return reads


def spec_line(mem: list[int], kind: str, nums: list[int]) -> str:
    return " ".join(map(str, [len(mem), *mem, "H" if kind == "U" else kind, *nums]))


def file_space(kind: str, nums: list[int]) -> h5s.SpaceID:
    space = h5s.create_simple(SHAPE)
    rank = len(SHAPE)
    if kind in "HU":
        for j in range(nums[0]):
            v = nums[1 + 4 * rank * j:1 + 4 * rank * (j + 1)]
            start, stride, count, block = (tuple(v[p * rank:(p + 1) * rank]) for p in range(4))
            space.select_hyperslab(start, count, stride, block,
                                   op=h5s.SELECT_OR if j else h5s.SELECT_SET)
    elif kind == "P":
        space.select_elements(np.array(nums[1:], dtype=np.uint64).reshape(-1, rank))
    return space


@pytest.mark.usefixtures("layout_dir")
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_selections_same_bytes_and_patterns_as_h5py_and_patio_h5(
    tmp_path: Path, program: Path, env: dict[str, str], seed: int
) -> None:
    rng = np.random.default_rng(seed)
    c_file, py_file = make_file(tmp_path / "c.h5"), make_file(tmp_path / "py.h5")
    KnowledgeBase(c_file).close()
    with h5py.File(c_file, "r") as f, KnowledgeBase(py_file) as kb:
        for dset in DATASETS:
            reads = random_reads(rng)
            lines, want, rows = [], [], []
            for mem, kind, nums in reads:
                space = file_space(kind, nums)
                if kind == "U":
                    mem = [int(space.get_select_npoints())]
                mspace = h5s.create_simple(tuple(mem)) if mem else h5s.create(h5s.SCALAR)
                arr = np.empty(tuple(mem), dtype="<f8")
                f[dset].id.read(mspace, space, arr, h5t.NATIVE_DOUBLE)
                want.append(arr.tobytes())
                sel = h5sel.from_space(SHAPE, space, tuple(mem))
                rows.append((dset, sel, arr.nbytes, 1, "py", time.time(), 0.0))
                lines.append(spec_line(mem, kind, nums))
            kb.record(rows)
            specs = tmp_path / "specs.txt"
            specs.write_text("\n".join(lines) + "\n")
            native, through = tmp_path / "native.bin", tmp_path / "vol.bin"
            for out, e in ((native, None), (through, vol(env))):
                r = run(program, c_file, dset, out, e, str(specs))
                assert r.returncode == 0, r.stderr
                assert r.stderr == ""
            assert through.read_bytes() == native.read_bytes() == b"".join(want)
    got = patterns(c_file)
    assert got == patterns(py_file)
    kinds = {json.loads(p[1])["kind"] for p in got}
    assert kinds == {"hyperslab", "union", "points"}



def log_rows(path: Path) -> list[tuple[object, ...]]:
    """The access rows in the knowledge base's record logs, each log's in the order they
    were written: dataset, selection JSON, point indices, elements, bytes, pid."""
    from patio.layout import kblog
    from patio.layout.kb import decode_ints

    logs = kb_dir(path) / "records"
    out = []
    for name in kblog.log_names(logs):
        dec, _ = kblog.read_log(logs / name, 0)
        assert dec.problem is None and dec.finished
        out += [(r[0], r[1], None if r[2] is None else decode_ints(r[2]).tolist(), r[3], r[4],
                 r[5]) for f in dec.frames for r in f.rows]
    return out


def access_rows(path: Path) -> list[tuple[object, ...]]:
    """The rows of the knowledge base's one record log (one process), without the pid."""
    assert len(list((kb_dir(path) / "records").glob("*.log"))) == 1
    return [r[:5] for r in log_rows(path)]


Recorded = tuple[str, Selection, int, int, str, float, float]


def recorded_as(dset: str, reads: list[tuple[list[int], str, list[int]]]
                ) -> tuple[list[Recorded], list[str]]:
    """The rows patio.h5 records for ``reads`` of ``dset`` (doubles), and vol_sel.c's
    spec lines for them."""
    rows: list[Recorded] = []
    lines = []
    for mem, kind, nums in reads:
        space = file_space(kind, nums)
        if kind == "U":
            mem = [int(space.get_select_npoints())]
        rows.append((dset, h5sel.from_space(SHAPE, space, tuple(mem)),
                     8 * int(space.get_select_npoints()), 1, "py", time.time(), 0.0))
        lines.append(spec_line(mem, kind, nums))
    return rows, lines


def record_both(program: Path, env: dict[str, str], c_file: Path, py_file: Path, dset: str,
                rows: list[Recorded], lines: list[str]) -> None:
    """``rows`` recorded by patio.h5 into ``py_file``'s knowledge base; vol_sel.c's
    ``lines`` read from ``c_file`` through the connector, without a warning."""
    with KnowledgeBase(py_file) as kb:
        kb.record(rows)
    specs = c_file.with_suffix(".specs")
    specs.write_text("\n".join(lines) + "\n")
    r = run(program, c_file, dset, c_file.with_suffix(".bin"), vol(env), str(specs))
    assert r.returncode == 0 and r.stderr == "", r.stderr


@pytest.mark.usefixtures("layout_dir")
def test_many_reads_reach_the_knowledge_base_in_order_as_patio_h5_records_them(
    tmp_path: Path, program: Path, env: dict[str, str]
) -> None:
    """More reads than the connector buffers per file (256), and point reads whose
    coordinates pass its value buffer's limit (65,536): every read reaches the knowledge
    base once, in order, as patio.h5 records it."""
    rng = np.random.default_rng(23)
    c_file, py_file = make_file(tmp_path / "c.h5"), make_file(tmp_path / "py.h5")
    KnowledgeBase(c_file).close()
    reads = random_reads(rng, 700)
    for at in (100, 101, 102, 400):  # 8,000 points x rank 3 = 24,000 values each
        pts = rng.integers(0, SHAPE, size=(8000, len(SHAPE))).ravel().tolist()
        reads.insert(at, ([8000], "P", [8000, *pts]))
    dset = DATASETS[0]
    rows, lines = recorded_as(dset, reads)
    record_both(program, env, c_file, py_file, dset, rows, lines)
    got, want = access_rows(c_file), access_rows(py_file)
    assert len(got) == len(reads) == 704
    assert got == want


@pytest.mark.usefixtures("layout_dir")
def test_a_forked_child_records_its_own_reads_and_not_its_parents(
    tmp_path: Path, program: Path, env: dict[str, str]
) -> None:
    """Reads buffered before a fork are the parent's: the child's log holds only its own
    read, the parent's every one of its reads once."""
    rng = np.random.default_rng(5)
    c_file, py_file = make_file(tmp_path / "c.h5"), make_file(tmp_path / "py.h5")
    KnowledgeBase(c_file).close()
    reads = random_reads(rng, 120)
    dset = DATASETS[0]
    rows, lines = recorded_as(dset, reads)
    lines.insert(60, "F")
    everything = h5s.create_simple(SHAPE)
    rows.append((dset, h5sel.from_space(SHAPE, everything, SHAPE), 8 * int(np.prod(SHAPE)), 1,
                 "py", time.time(), 0.0))  # the child's read, last in the reference
    record_both(program, env, c_file, py_file, dset, rows, lines)
    got = log_rows(c_file)
    pids = list(dict.fromkeys(row[5] for row in got))
    assert len(pids) == 2
    by_pid = {p: [row[:5] for row in got if row[5] == p] for p in pids}
    want = [row[:5] for row in log_rows(py_file)]
    parent, child = sorted(by_pid.values(), key=len, reverse=True)
    assert parent == want[:120]
    assert child == want[120:]
