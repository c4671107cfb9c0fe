"""The layout planner's held-out scoring: reads recorded through patio.h5, planned in
process. Random boxes that never repeat get a whole-dataset order (a replica of each box
serves only that box, which is not read again); boxes that repeat keep their concatenated
replicas. Also the fold split itself against a direct model of the rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import patio.h5 as ph5
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from patio.layout import planner
from patio.layout.cli import advise_report
from patio.layout.kb import KnowledgeBase

pytestmark = [
    pytest.mark.filterwarnings("ignore::patio.h5.LayoutWarning"),
    pytest.mark.usefixtures("layout_dir"),
]

N = 1024
BOX = 96


def make_file(path: Path) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.arange(N * N, dtype="f8").reshape(N, N))


def boxes(seed: int, n: int) -> list[tuple[int, int]]:
    rng = np.random.default_rng(seed)
    return [(int(y), int(x)) for y, x in rng.integers(0, N - BOX, size=(n, 2))]


def plan_for(path: Path, corners: list[tuple[int, int]], repeat: int
             ) -> tuple[list[planner.Proposal], dict[str, Any]]:
    with ph5.File(path) as f:
        for _ in range(repeat):
            for y, x in corners:
                f["a"][y:y + BOX, x:x + BOX]
    kb = KnowledgeBase(path)
    kb.set_setting("budget", planner.parse_budget("300%"))
    kb.close()
    rep, plans = advise_report(str(path))
    build, _, _ = planner.plan(plans, [], 3 * N * N * 8)
    return build, rep


def test_random_boxes_get_a_whole_dataset_order(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    make_file(path)
    build, rep = plan_for(path, boxes(1, 24), repeat=1)
    kinds = {p.kind for p in build}
    assert kinds, "nothing built"
    assert "concat" not in kinds, [p.label() for p in build]
    assert kinds <= {"chunked", "zorder", "hilbert", "transposed"}
    props = rep["datasets"][0]["proposals"]
    concat = [p for p in props if p["kind"] == "concat"]
    assert concat
    # In sample a box's own replica is the cheapest; held out it serves nothing.
    assert all(p["in_sample_saving_s"] > 0 for p in concat)
    assert all(p["held_out_saving_s"] <= 0 for p in concat)
    orders = [p for p in props if p["kind"] in ("chunked", "zorder", "hilbert")]
    assert max(p["held_out_saving_s"] for p in orders) > 0
    for p in orders:  # generated from every fold: held out is the in-sample saving
        assert p["held_out_saving_s"] == pytest.approx(p["in_sample_saving_s"])


def test_repeated_boxes_keep_their_concat_replicas(tmp_path: Path) -> None:
    path = tmp_path / "f.h5"
    make_file(path)
    corners = boxes(2, 6)
    build, rep = plan_for(path, corners, repeat=3)
    concat = [p for p in build if p.kind == "concat"]
    assert len(concat) == len(corners), [p.label() for p in build]
    assert all(p.kind == "concat" for p in build)
    for p in rep["datasets"][0]["proposals"]:
        if p["kind"] == "concat":
            assert p["held_out_saving_s"] == pytest.approx(p["in_sample_saving_s"])


def test_a_family_read_once_gets_a_whole_dataset_order(tmp_path: Path) -> None:
    """The same box at every step of a leading axis, each step read once (one family
    pattern): its concat replica serves no step it was not generated from."""
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("a", data=np.arange(32 * 256 * 256, dtype="f8").reshape(32, 256, 256))
    with ph5.File(path) as f:
        for t in range(32):
            f["a"][t, 40:140, 60:120]
    kb = KnowledgeBase(path)
    kb.compact()
    assert [(p.reads, len(p.starts)) for p in kb.patterns("/a")] == [(32, 32)]
    kb.close()
    rep, plans = advise_report(str(path))
    build, _, _ = planner.plan(plans, [], 3 * 32 * 256 * 256 * 8)
    assert build and all(p.kind != "concat" for p in build), [p.label() for p in build]
    concat = [p for p in rep["datasets"][0]["proposals"] if p["kind"] == "concat"]
    assert concat and concat[0]["in_sample_saving_s"] > 0
    assert concat[0]["held_out_saving_s"] <= 0
    with ph5.File(path) as f:  # read twice per step: it recurs, the replica stays
        for t in range(32):
            f["a"][t, 40:140, 60:120]
    _, plans = advise_report(str(path))
    build, _, _ = planner.plan(plans, [], 3 * 32 * 256 * 256 * 8)
    assert [p.kind for p in build] == ["concat"], [p.label() for p in build]


class _Pat:
    def __init__(self, pid: int, reads: int, members: int) -> None:
        self.id, self.reads = pid, reads
        self.starts = np.arange(members if members > 1 else 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 9), st.integers(1, 4)), min_size=1, max_size=12))
def test_fold_shares_model(spec: list[tuple[int, int]]) -> None:
    pats = [_Pat(i * 3 + 1, r, m) for i, (r, m) in enumerate(spec)]
    shares = planner.fold_shares(pats)  # type: ignore[arg-type]
    once = 0
    for p, (reads, members) in zip(pats, spec):
        s = shares[p.id]
        assert sum(s) == pytest.approx(1.0)
        if reads >= planner.RECUR_READS * members or members > 1:
            assert s == (0.5, 0.5)
        else:
            assert s == tuple(1.0 if k == once % 2 else 0.0 for k in range(2))
            once += 1
    rows = [{"pattern": p.id, "weight": float(p.reads), "folds": shares[p.id],
             "recurs": r >= planner.RECUR_READS * m} for p, (r, m) in zip(pats, spec)]
    whole = planner.Proposal("/a", "zorder", {"chunk": [8, 8]}, 1)
    filled = sum(any(r["folds"][k] > 0 for r in rows) for k in range(2))
    got = planner.held_out_weights(whole, rows)
    # A whole-dataset order is generated from every fold: all reads are held out for it.
    assert got == pytest.approx([r["weight"] for r in rows])
    for r in rows:
        own = planner.Proposal("/a", "concat", {}, 1, pattern=r["pattern"])
        w = planner.held_out_weights(own, rows)
        mine = w[rows.index(r)]
        if filled < 2 or r["recurs"]:
            assert mine == pytest.approx(r["weight"])
        else:  # not repeated: its own reads are never held out for it
            assert mine == 0.0
        for o, wo in zip(rows, w):  # other patterns' reads: those of the other folds
            if o is not r and filled == 2:
                gen = [f > 0 for f in r["folds"]]
                want = sum(o["folds"][1 - k] for k in range(2) if gen[k]) * o["weight"]
                assert wo == pytest.approx(want)
