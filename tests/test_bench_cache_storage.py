"""``patio bench cache --storage model|real|both``: the cache benchmark beside the real
disk. Checked on a tiny run: each workload has a row per storage, every policy result says
its storage, the mounts of real rows read SOURCE without the storage model, and
``model_error`` is the model's group-vs-lru over the real one."""

from __future__ import annotations

import json

import pytest
from test_mount_trace import patio


def test_both_storages_give_a_row_each_and_the_model_error() -> None:
    done = patio("bench", "cache", "--workload", "tile", "--tile-rows", "16", "--memory", "1MiB",
                 "--sizes", "0", "--sweep", "0", "--sweep-jk", "0", "--passes", "2",
                 "--clients", "2", "--storage", "both", "--json")  # fmt: skip
    doc = json.loads(done.stdout)
    assert doc["storage"] == "both" and doc["store"]["preset"] == "hdd"
    model, real = doc["workloads"]
    assert (model["name"], model["storage"]) == ("tile", "model")
    assert (real["name"], real["storage"]) == ("tile", "real")
    for w in (model, real):
        assert {p["storage"] for p in w["policies"].values()} == {w["storage"]}
        assert w["group_vs_lru"] == pytest.approx(
            w["policies"]["group"]["bandwidth_mbps"] / w["policies"]["lru"]["bandwidth_mbps"])
        assert w["model_error"] == pytest.approx(model["group_vs_lru"] / real["group_vs_lru"])
    # the model is slower than this machine's disk: the real rows read SOURCE unpaced
    assert real["policies"]["none"]["seconds"] < model["policies"]["none"]["seconds"]


def test_a_bad_storage_is_one_line() -> None:
    done = patio("bench", "cache", "--storage", "tape", check=False)
    assert done.returncode == 2 and "--storage" in done.stderr


def test_the_model_is_chosen_like_every_command_chooses_it() -> None:
    done = patio("bench", "cache", "--workload", "tile", "--tile-rows", "16", "--memory", "1MiB",
                 "--sizes", "0", "--sweep", "0", "--sweep-jk", "0", "--passes", "1",
                 "--clients", "1", "--store", "ssd", "--store-targets", "2", "--json")  # fmt: skip
    store = json.loads(done.stdout)["store"]
    assert (store["preset"], store["store_targets"], store["targets"]) == ("ssd", 2, 2)
    assert store["bandwidth_mbps_per_target"] == pytest.approx(740.0)
    for args, words in ((["--store", "nvme"], "unknown storage preset"),
                        (["--store", "hdd", "--store-stripe-kib", "0"], "--store hdd")):  # fmt: skip
        bad = patio("bench", "cache", *args, check=False)
        assert bad.returncode != 0 and words in bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1, bad.stderr
