"""The figure of ``patio layout advise --plot``: modelled seconds per read of every
candidate layout for each hot selection (grouped bars; log scale when they span more than
20x), the cheapest named under each group."""

from __future__ import annotations

import os
from typing import Any


def advise_plot(report: dict[str, Any], out: str) -> None:
    """Draws ``report`` (``patio layout advise --json``) to ``out`` (PNG, PDF or SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(directory):
        raise OSError(2, "no such directory", directory)
    rows = [(d["name"], s) for d in report["datasets"] for s in d["selections"]]
    layouts: list[str] = []
    for _, s in rows:
        for k, v in s["costs"].items():
            if v is not None and k not in layouts:
                layouts.append(k)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(rows) + 3) + 2.5, 4.5))
    width = 0.8 / max(1, len(layouts))
    colors = plt.get_cmap("tab20").colors
    values = [v for _, s in rows for v in s["costs"].values() if v]
    for j, lay in enumerate(layouts):
        xs, ys = [], []
        for i, (_, s) in enumerate(rows):
            v = s["costs"].get(lay)
            if v is not None and v > 0:
                xs.append(i + (j - (len(layouts) - 1) / 2) * width)
                ys.append(v * 1e3)
        ax.bar(xs, ys, width, label=lay, color=colors[j % len(colors)])
    # Log scale only where the costs span more than a factor of 20; bars start at 0.
    if values and max(values) > 20 * min(values):
        ax.set_yscale("log")
    else:
        ax.set_ylim(0, max(values or [1e-3]) * 1e3 * 1.15)
    ax.set_ylabel("modelled ms per read (eq 3.1)")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{n}\npattern {s['pattern']}\nbest: {s['best']}" for n, s in rows],
                       fontsize=7)
    ax.set_title(f"{os.path.basename(report['file'])}: candidate layouts per hot selection")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="layout",
              title_fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
