"""``patio bench layout``: the decision is learned from one random draw of a kernel's
queries and measured on another (held out), and with ``--real`` the same requests are
read on the real files with the page cache dropped, beside the model."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from patio import _coldcache as coldcache
from patio.layout import bench, cost


def _masks(reads: list) -> list[bytes]:
    return [np.asarray(r[0]).tobytes() for r in reads]


def test_draws_differ_by_seed_and_repeat_with_it(tmp_path: Path) -> None:
    a = bench.ecog(str(tmp_path), 0.02, 4, (1, 2))
    b = bench.ecog(str(tmp_path), 0.02, 4, (1, 2))
    for wa, wb in zip(a, b):
        assert _masks(wa.learn) == _masks(wb.learn)
        assert _masks(wa.apply) == _masks(wb.apply)
    # Some query of the kernel draws other labels under the other seed.
    assert any(_masks(w.learn) != _masks(w.apply) for w in a)
    m = bench.massspec(str(tmp_path), 0.01, 4, (1, 2))
    assert all(w.learn != w.apply for w in m)


@pytest.fixture
def layout_env(monkeypatch: pytest.MonkeyPatch) -> None:
    # run_workload points the knowledge base at its own directory: restore afterwards.
    monkeypatch.setenv("PATIO_LAYOUT_DIR", "")
    monkeypatch.setenv("PATIO_LAYOUT", "on")


def test_rows_held_out_in_sample_model_and_real(tmp_path: Path, layout_env: None) -> None:
    (w, *_) = bench.ecog(str(tmp_path), 0.02, 4, (1, 2))
    model = cost.storage_model("ssd")
    rows = bench.run_workload(w, model, str(tmp_path / "kb"), real=True)
    probe = tmp_path / "probe.bin"
    probe.write_bytes(b"x" * 65536)
    tmpfs = coldcache.drop([probe]) > 0.5  # pages that cannot leave memory
    # Per layout (auto, concat): held-out then in-sample, each on the model then real.
    assert [(r["storage"], r["held_out"]) for r in rows[:4]] == [
        ("model", True), ("real", True), ("model", False), ("real", False)]
    assert len(rows) == 4 * (1 + len(w.forced))
    for m, r in zip(rows[::2], rows[1::2]):
        assert (m["name"], m["layout"], m["held_out"]) == (r["name"], r["layout"], r["held_out"])
        assert m["model_error"] == r["model_error"] == pytest.approx(m["speedup"] / r["speedup"])
        assert r["original_s"] > 0 and r["patio_s"] > 0
        assert 0 <= r["resident_after_drop"] <= (1.0 if tmpfs else 0.05)
        assert 0 <= r["top1_real"] <= r["top1_real_10pct"] <= r["top1_compared"]
        assert r["repack_s"] is None and math.isfinite(m["repack_s"])
    # The in-sample draw is what was learned: a replica serves it, and the model gains.
    in_sample = [r for r in rows if r["storage"] == "model" and not r["held_out"]]
    assert all(r["speedup"] > 1.0 for r in in_sample)
    assert all(r["top1_compared"] > 0 for r in rows if r["storage"] == "real"
               and not r["held_out"])
    # The end-to-end h5py timings are taken on the learned draw only.
    assert all("real_patio_s" in r for r in in_sample)
    assert not any("real_patio_s" in r for r in rows if r["held_out"])
    s = bench.summary(rows)
    assert set(s["model_held_out_speedup"]) == {w.name}
    assert 0 <= s["top1_real_all"]["agreement"] <= 1
    assert s["top1_real_all"]["selections"] == sum(r.get("top1_compared", 0) for r in rows)


def test_model_only_rows_have_no_real_fields(tmp_path: Path, layout_env: None) -> None:
    (w, *_) = bench.ecog(str(tmp_path), 0.02, 4, (3, 4))
    rows = bench.run_workload(w, cost.storage_model("hdd"), str(tmp_path / "kb"))
    assert {r["storage"] for r in rows} == {"model"}
    assert not any("model_error" in r or "top1_real" in r for r in rows)
    assert [r["held_out"] for r in rows[:2]] == [True, False]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 1 << 14)), max_size=30))
def test_real_reads_are_the_pages_the_model_reads(extents: list[tuple[int, int]]) -> None:
    """Page-rounded, touching runs merged: exactly the pages the extents touch, as few
    reads as there are separate groups of pages."""
    page = 4096
    offs = np.array([o for o, _ in extents], np.uint64)
    lens = np.array([n for _, n in extents], np.uint64)
    starts, sizes = bench.RealDisk(page)._runs(offs, lens)
    want = {p for o, n in extents for p in range(o // page, (o + n - 1) // page + 1)}
    got: set[int] = set()
    for s, n in zip(starts, sizes):
        assert s % page == 0 and n % page == 0 and n > 0
        got |= set(range(s // page, (s + n) // page))
    assert got == want
    assert all(a + n < b for a, n, b in zip(starts, sizes, starts[1:]))  # separate


def test_real_reads_follow_a_file_replaced_under_the_same_name(tmp_path: Path) -> None:
    """A replica evicted and built again under its old name is read anew, not through
    a descriptor of the deleted file (whose reads past its end return nothing)."""
    path = tmp_path / "r1.h5"
    path.write_bytes(b"a" * 4096)
    disk = bench.RealDisk(4096, reps=1)
    one = np.array([0], np.uint64)
    disk.read([(str(path), one * 0, one * 4096)])
    path.unlink()
    path.write_bytes(b"b" * (1 << 20))
    disk.read([(str(path), one * 0 + 8192, one * 65536)])  # past the old file's end
    assert os.fstat(disk.fds[str(path)]).st_size == 1 << 20
    disk.close()


def test_bad_options_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["--real-reps", "0"], ["--seed", "-1"], ["--store", "tape"]):
        assert bench.main(["--kernel", "model", *argv]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("patio bench layout: error:"), err
