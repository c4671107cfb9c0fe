"""``--store PRESET --store-targets N --store-stripe-kib K`` on the Python front ends
(``amr advise/reorder``, ``bench layout``, ``layout probe``, ``bench reorg``): the same
spellings as the Rust commands and one rule for applying them, the storage model's
(``StorageModel.with_overrides``), checked here against that rule written out; a bad
value is one line and exit status 2 before any work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from patio._binary import patio_binary
from patio._cli_args import StoreOptionError, store_model
from patio._native import StorageModel
from test_amr import synthetic

MAX_TARGETS = 1 << 16


def reference(preset: str, targets: int | None, stripe_kib: int | None) -> dict[str, Any]:
    """The rule written out: the given fields replaced, RPCs the smaller of the preset's
    and the new stripe, every other parameter the preset's."""
    p = dict(StorageModel.preset(preset).params())
    if targets is not None:
        p["targets"] = targets
    if stripe_kib is not None:
        p["stripe_size"] = stripe_kib * 1024
        p["rpc_size"] = min(p["rpc_size"], stripe_kib * 1024)
    return p


@settings(max_examples=200, deadline=None)
@given(preset=st.sampled_from(["hdd", "ssd", "lustre"]),
       targets=st.none() | st.integers(-3, MAX_TARGETS + 3),
       stripe_kib=st.none() | st.integers(-3, 1 << 24))
def test_the_binding_applies_the_one_rule(preset: str, targets: int | None,
                                          stripe_kib: int | None) -> None:
    valid = (targets is None or 1 <= targets <= MAX_TARGETS) and (
        stripe_kib is None or stripe_kib >= 1)
    if not valid:
        with pytest.raises(StoreOptionError, match=f"^--store {preset}: "):
            store_model(preset, targets, stripe_kib)
        return
    got = store_model(preset, targets, stripe_kib).params()
    assert got == reference(preset, targets, stripe_kib)


def test_an_unknown_preset_names_the_option() -> None:
    with pytest.raises(StoreOptionError, match='^--store: unknown storage preset "nosuch"'):
        store_model("nosuch", 4, None)


def patio(*args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATIO_PYTHON=sys.executable)
    return subprocess.run([patio_binary(), *map(str, args)], check=False, capture_output=True,
                          text=True, env=env, timeout=timeout)


def one_line_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_layout_probe_fits_the_overridden_model(tmp_path: Path) -> None:
    def probe(*extra: str) -> dict[str, Any]:
        done = patio("layout", "probe", "--store", "lustre", *extra, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    preset = probe()
    changed = probe("--store-targets", "3", "--store-stripe-kib", "64")
    assert preset["store"] == reference("lustre", None, None)
    assert changed["store"] == reference("lustre", 3, 64)
    assert changed["constants"] != preset["constants"]
    one_line_error(patio("layout", "probe", "--store", "lustre", "--store-targets", "0"),
                   "--store lustre", "targets")
    one_line_error(patio("layout", "probe", "--store-targets", "2"), "need --store")


def test_amr_advise_and_reorder_price_on_the_overridden_model(tmp_path: Path) -> None:
    src = tmp_path / "plt.hdf5"
    synthetic(src, 3)

    def advise(*extra: str) -> dict[str, Any]:
        done = patio("amr", "advise", src, "--queries", "20", "--json", *extra)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    base = advise("--store", "hdd")
    same = advise("--store", "hdd", "--store-targets", str(reference("hdd", None, None)
                                                            ["targets"]))
    other = advise("--store", "hdd", "--store-targets", "64", "--store-stripe-kib", "4")
    assert same["costs"] == base["costs"]
    assert other["costs"] != base["costs"]
    assert [(r["store"], r["store_targets"], r["store_stripe_kib"]) for r in (base, other)] == [
        ("hdd", None, None), ("hdd", 64, 4)]
    text = patio("amr", "advise", src, "--queries", "20", "--store-targets", "64")
    assert text.returncode == 0 and "lustre (64 targets) store model" in text.stdout, text
    for cmd in (["advise", src], ["reorder", src, "-o", tmp_path / "out.hdf5"]):
        one_line_error(patio("amr", *cmd, "--store-stripe-kib", "0"),
                       "patio amr: error: --store lustre:", "stripe_size")
        one_line_error(patio("amr", *cmd, "--store", "nosuch"), "--store: unknown")
    assert not (tmp_path / "out.hdf5").exists()
    done = patio("amr", "reorder", src, "-o", tmp_path / "out.hdf5", "--queries", "20",
                 "--store-targets", "64", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["store_targets"] == 64
    assert (tmp_path / "out.hdf5").exists()


def test_bench_layout_models_the_overridden_store(tmp_path: Path) -> None:
    done = patio("bench", "layout", "--kernel", "model", "--randoms", "3", "--store", "ssd",
                 "--store-targets", "5", "--store-stripe-kib", "128", "--dir", tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["store"] == reference("ssd", 5, 128)
    one_line_error(patio("bench", "layout", "--kernel", "model", "--store-targets", "0",
                         "--dir", tmp_path), "--store lustre", "targets")


def test_bench_reorg_refuses_a_bad_model_before_any_work(tmp_path: Path) -> None:
    done = patio("bench", "reorg", "--store", "hdd", "--store-stripe-kib", "0", "--dir", tmp_path)
    one_line_error(done, "--store hdd", "stripe_size")
    assert list(tmp_path.iterdir()) == []
    old = patio("bench", "reorg", "--targets", "0", "--dir", tmp_path)
    assert old.returncode == 2 and "--targets is deprecated" in old.stderr, old.stderr
