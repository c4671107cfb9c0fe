"""Progress bars of patio's Python commands (``patio layout build``, ``patio amr reorder``):
one tqdm bar on stderr with a known total, shown only when stderr is a terminal and the
report is not ``--json`` — the same rule as the ``patio`` binary's bars.
"""

from __future__ import annotations

import sys

from tqdm import tqdm


def shown(as_json: bool) -> bool:
    """Whether a command should draw progress: not with ``--json``, and only on a terminal."""
    return not as_json and sys.stderr.isatty()


def bar(total: int, desc: str, as_json: bool, unit: str = "B") -> tqdm:
    """A bar of ``total`` units on stderr (bytes scaled to KiB/MiB), hidden unless
    :func:`shown`; close it (or use it as a context manager) when the work is done."""
    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        unit_scale=unit == "B",
        unit_divisor=1024,
        file=sys.stderr,
        disable=not shown(as_json),
        leave=False,
        dynamic_ncols=True,
    )
