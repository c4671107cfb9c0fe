"""Tests for ``patio._native.StorageModel``, the striped storage model.

Presets and parameters must round-trip, the simulator must reproduce hand-computed
cases, and the eq 3.1 / eq 4.1 count inputs must agree with a byte-by-byte Python
reference of the striping. Bad input must raise ``ValueError``, never panic.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from patio._native import StorageModel

PARAMS = {
    "targets",
    "stripe_size",
    "rpc_size",
    "page_size",
    "latency_seq",
    "latency_near",
    "latency_mid",
    "latency_far",
    "bandwidth",
    "request_latency",
    "jitter",
    "seed",
    "whole_rpc",
}


def round_model(**overrides: object) -> StorageModel:
    """One 64 KiB-striped target, L = 0.5/1/2/4 s, one full RPC transfers in 1 s."""
    params: dict[str, object] = {
        "targets": 1,
        "stripe_size": 65536,
        "rpc_size": 65536,
        "latency_seq": 0.5,
        "latency_near": 1.0,
        "latency_mid": 2.0,
        "latency_far": 4.0,
        "bandwidth": 65536.0,
    }
    params.update(overrides)
    return StorageModel(**params)  # type: ignore[arg-type]


def test_presets() -> None:
    assert StorageModel.PRESETS == ("hdd", "ssd", "lustre")
    hdd = StorageModel.preset("hdd").params()
    assert hdd["targets"] == 1 and hdd["stripe_size"] == hdd["rpc_size"] == 65536
    assert hdd["latency_far"] == 8e-3 and hdd["bandwidth"] == 150e6
    ssd = StorageModel.preset("ssd").params()
    assert ssd["latency_seq"] == 20e-6 and ssd["latency_far"] == 100e-6
    assert ssd["bandwidth"] == 740e6
    lustre = StorageModel.preset("lustre").params()
    assert lustre["targets"] == 8 and lustre["rpc_size"] == 1 << 20
    assert lustre["request_latency"] == 0.3e-3
    with pytest.raises(ValueError, match="hdd, ssd, lustre"):
        StorageModel.preset("tape")


def test_params_round_trip() -> None:
    for name in StorageModel.PRESETS:
        model = StorageModel.preset(name)
        params = model.params()
        assert set(params) == PARAMS
        assert StorageModel(**params) == model
        assert model.with_params() == model
    default = StorageModel()
    assert default.params()["targets"] == 1 and default.params()["whole_rpc"] is False
    changed = default.with_params(targets=4, whole_rpc=True, jitter=0.1)
    assert changed.params() == {**default.params(), "targets": 4, "whole_rpc": True, "jitter": 0.1}
    assert changed != default
    assert "targets=4" in repr(changed)
    with pytest.raises(TypeError):
        default.with_params(colour="red")
    for bad in ({"targets": 0}, {"rpc_size": -1}, {"bandwidth": 0.0}, {"jitter": 2.0}):
        with pytest.raises(ValueError):
            default.with_params(**bad)
        with pytest.raises(ValueError):
            StorageModel(**bad)  # type: ignore[arg-type]


def test_simulate_hand_computed() -> None:
    model = round_model()
    # Sequential RPCs: 0.5 s seek + 1 s transfer each; a two-RPC request costs 3 s.
    one = model.simulate([[([0], [65536]), (np.array([65536], np.uint64), [131072])]])
    assert math.isclose(one["seconds"], 4.5)
    assert (one["rpcs"], one["bytes"]) == (3, 3 * 65536)
    assert one["seeks"] == {"seq": 3, "near": 0, "mid": 0, "far": 0}
    assert one["target_rpcs"] == [3]
    assert math.isclose(one["target_busy_seconds"][0], 4.5)
    # Two clients on one target queue: the second waits for the first.
    two = model.simulate([[([0], [65536])], [([65536], [65536])]])
    assert [round(s, 9) for s in two["client_seconds"]] == [1.5, 3.0]
    # A far seek backwards, one page: 4 s + 4096/65536 s.
    far = model.simulate([[([10_000_000], [10]), ([0], [1])]])
    assert far["seeks"]["far"] == 2 and far["bytes"] == 8192
    # Whole RPCs are fetched whole; page rounding fetches pages.
    whole = model.with_params(whole_rpc=True).simulate([[([10, 70_000], [10, 10])]])
    assert (whole["rpcs"], whole["bytes"]) == (2, 131072)
    assert math.isclose(whole["seconds"], 3.0)
    pages = model.simulate([[([10, 70_000], [10, 10])]])
    assert pages["bytes"] == 8192
    # Request latency once per request; an empty request costs only that.
    lat = model.with_params(request_latency=0.25).simulate([[([0], [65536]), ([], [])]])
    assert math.isclose(lat["seconds"], 2.0)


def test_simulate_rejects_bad_input() -> None:
    model = StorageModel()
    for clients in (
        [[([-1], [10])]],
        [[([0], [-10])]],
        [[([0, 1], [10])]],
        [[([2**64 - 1], [2])]],
        [[(np.array([0], np.int64), np.array([-5], np.int64))]],
        [[([0],)]],
        [[5]],
    ):
        with pytest.raises(ValueError):
            model.simulate(clients)
    with pytest.raises(ValueError):
        model.page_counts([0, 1], [1])
    with pytest.raises(ValueError):
        model.jump_counts([-1], [1])


def locate(p: dict[str, int], o: int) -> tuple[int, int]:
    """Target and object offset of file offset ``o``."""
    s, t = p["stripe_size"], p["targets"]
    return (o // s) % t, (o // (s * t)) * s + o % s


def reference(p: dict[str, int], offsets: list[int], lengths: list[int]) -> dict[str, object]:
    """Byte-by-byte eq 3.1 and eq 4.1 inputs."""
    per_target: list[set[int]] = [set() for _ in range(p["targets"])]
    for o, n in zip(offsets, lengths):
        for b in range(o, o + n):
            t, obj = locate(p, b)
            per_target[t].add(obj)
    pages, chunks, short, medium, long_ = [], [], [], [], []
    rpc = p["rpc_size"]
    for objs in per_target:
        page_set = sorted({b // p["page_size"] for b in objs})
        pages.append(len(page_set))
        runs: list[list[int]] = []
        for b in sorted(objs):
            if runs and runs[-1][1] == b:
                runs[-1][1] += 1
            else:
                runs.append([b, b + 1])
        # Page-level: a chunk is a maximal run of consecutive pages.
        chunks.append(sum(1 for i, pg in enumerate(page_set) if i == 0 or pg > page_set[i - 1] + 1))
        gaps = [b[0] - a[1] for a, b in itertools.pairwise(runs)]
        short.append(sum(1 for d in gaps if d <= rpc))
        medium.append(sum(1 for d in gaps if rpc < d <= 10 * rpc))
        long_.append(sum(1 for d in gaps if d > 10 * rpc))
    return {
        "pages": pages,
        "chunks": chunks,
        "short": short,
        "medium": medium,
        "long": long_,
        "contiguous_bytes": sum(len(s) for s in per_target),
    }


@settings(max_examples=150, deadline=None)
@given(
    targets=st.integers(1, 4),
    stripe=st.integers(1, 24),
    rpc=st.integers(1, 16),
    page=st.integers(1, 12),
    extents=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 50)), max_size=10),
)
def test_counts_match_bytewise_reference(
    targets: int, stripe: int, rpc: int, page: int, extents: list[tuple[int, int]]
) -> None:
    model = StorageModel(targets=targets, stripe_size=stripe, rpc_size=rpc, page_size=page)
    offsets = [o for o, _ in extents]
    lengths = [n for _, n in extents]
    want = reference(model.params(), offsets, lengths)
    pc = model.page_counts(np.array(offsets, np.uint64), np.array(lengths, np.int64))
    assert pc == {"pages": want["pages"], "chunks": want["chunks"]}
    jc = model.jump_counts(offsets, lengths)
    assert jc == {k: want[k] for k in ("short", "medium", "long", "contiguous_bytes")}
