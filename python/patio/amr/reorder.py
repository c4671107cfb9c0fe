"""Reorder the boxes of a Chombo file: pick a layout (by the model or by the user) and
rewrite the file with every level's boxes in that layout's order.

The chosen layout is applied to every level, each ordered by its own geometry (thesis
§4.4). The report gives, per level, the boxes and the non-contiguous jumps (all eq 4.1
categories, all storage targets) that sampled queries on that level make before and
after; the output is a standard Chombo file written through a temporary file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from patio._native import StorageModel
from patio.amr.chombo import ChomboError, Hierarchy, read_hierarchy, write_reordered
from patio.amr.model import advise, sample_queries, store, total_jumps
from patio.amr.order import LAYOUTS, order_boxes

REPORT_QUERIES = 64


def level_orders(hier: Hierarchy, layout: str, rpc: int) -> dict[int, np.ndarray]:
    """The permutation of every level under ``layout``."""
    return {
        lev.index: order_boxes(lev.lo, lev.hi, lev.box_bytes, layout, lev.domain_lo, rpc, lev.domain_hi)
        for lev in hier.levels
    }


def reorder(
    src: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    layout: str = "auto",
    model: StorageModel | None = None,
    queries: int | None = None,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Rewrite ``src`` as ``dst`` in ``layout`` (``auto`` asks the model); the report.
    ``progress(done, total)``: boxes written so far, after each level."""
    if layout != "auto" and layout not in LAYOUTS:
        raise ValueError(f"unknown layout {layout!r}; expected auto or one of {LAYOUTS}")
    hier = read_hierarchy(src)
    model = model or store("lustre")
    if os.path.exists(dst) and os.path.samefile(src, dst):
        raise ChomboError(src, "output path equals the input")
    chosen_by = "user"
    if layout == "auto":
        layout = advise(hier, model, queries, seed)["chosen"]
        chosen_by = "model"
    rpc = int(model.params()["rpc_size"])
    perms = level_orders(hier, layout, rpc)
    write_reordered(src, dst, perms, hier, progress)
    levels = []
    for lev in hier.levels:
        qs = sample_queries(lev, min(lev.n, REPORT_QUERIES), np.random.default_rng(seed))
        ident = np.arange(lev.n, dtype=np.int64)
        levels.append(
            {
                "level": lev.index,
                "boxes": lev.n,
                "jumps_before": total_jumps(model, lev, ident, qs),
                "jumps_after": total_jumps(model, lev, perms[lev.index], qs),
            }
        )
    return {"layout": layout, "chosen_by": chosen_by, "levels": levels}
