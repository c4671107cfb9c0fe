"""Draw the access-pattern figure for ``patio analyze --plot``.

The Rust CLI writes what it found as JSON and runs ``python -m patio.plot analyze IN.json
OUT.png``. The JSON has this shape::

    {"title": "...",
     "streams": [{"key": "POSIX /data/f.h5 rank 3 write",
                  "offsets": [0, 4096, ...],
                  "segments": [[start_index, end_index_exclusive, kind], ...]}]}

where ``kind`` is one of :data:`KINDS`. The figure shows, per stream, each request's offset
(y, in bytes with binary units) against its index in the stream (x), the points coloured by
the pattern segment they belong to, in the style of the access-pattern plots of the
pattern-aware I/O papers. Each kind has a colour family and a marker; consecutive segments
alternate between two shades of their family so that neighbours stay distinguishable even
when they are of the same kind. Requests outside every segment are drawn as small grey dots.

A real log has hundreds to thousands of streams, so the figure is a grid of at most
:data:`MAX_PANELS` streams: the largest stream of each (module, operation, file) group
first, then further streams by size; the title says how many of how many are shown. Every problem with the input is a :class:`PlotError` with a one-line
message; the command line prints it as ``patio: error: ...`` and exits with status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "KINDS",
    "MAX_PANELS",
    "PlotError",
    "format_bytes",
    "load_analysis",
    "main",
    "plot_analysis",
    "plot_analysis_file",
]

#: Segment kinds the Rust detector reports, in legend order.
KINDS: tuple[str, ...] = ("contiguous", "strided", "kd-strided", "repeating deltas", "literal")

#: Most streams drawn in one figure.
MAX_PANELS = 12

#: kind -> (matplotlib colormap of its colour family, marker).
_STYLE: dict[str, tuple[str, str]] = {
    "contiguous": ("Blues", "s"),
    "strided": ("Greens", "o"),
    "kd-strided": ("Purples", "D"),
    "repeating deltas": ("Oranges", "^"),
    "literal": ("Reds", "x"),
}
#: The two shades each family alternates between (positions in its colormap).
_SHADES = (0.85, 0.55)
_UNCOVERED = "#b0b0b0"
_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


class PlotError(Exception):
    """The analysis JSON could not be read or drawn; the message is one line."""


@dataclass
class _Stream:
    key: str
    offsets: np.ndarray  # float64, for plotting
    segments: list[tuple[int, int, str]]


# --------------------------------------------------------------------------- input


def load_analysis(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and validate an analysis JSON file; raise :class:`PlotError` if it is unusable."""
    doc = _load(Path(path))
    _parse(doc, str(path))
    return doc


def _load(p: Path) -> Any:
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlotError(f"{p} does not exist: check the path to the analysis JSON") from None
    except (OSError, UnicodeDecodeError) as e:
        raise PlotError(f"cannot read {p} ({_reason(e)}): check the file") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise PlotError(
            f"{p} is not valid JSON (line {e.lineno} column {e.colno}: {e.msg}): "
            "it should be the file written by patio analyze --plot"
        ) from None


def _parse(doc: Any, where: str) -> tuple[str, list[_Stream]]:
    """Check the document's shape and convert it; errors name the offending element."""

    def bad(what: str) -> PlotError:
        return PlotError(f"{where}: {what}")

    if not isinstance(doc, Mapping):
        raise bad(f"expected a JSON object at the top level, found {_json_type(doc)}")
    title = doc.get("title", "")
    if not isinstance(title, str):
        raise bad(f'"title" must be a string, found {_json_type(title)}')
    raw_streams = doc.get("streams")
    if not isinstance(raw_streams, list):
        raise bad(f'"streams" must be a list, found {_json_type(raw_streams)}')
    streams: list[_Stream] = []
    for i, st in enumerate(raw_streams):
        at = f"streams[{i}]"
        if not isinstance(st, Mapping):
            raise bad(f"{at} must be an object, found {_json_type(st)}")
        key = st.get("key", f"stream {i}")
        if not isinstance(key, str):
            raise bad(f"{at}.key must be a string, found {_json_type(key)}")
        offsets = _offsets(st.get("offsets"), lambda what, at=at: bad(f"{at}.offsets {what}"))
        segs = st.get("segments", [])
        if not isinstance(segs, list):
            raise bad(f"{at}.segments must be a list, found {_json_type(segs)}")
        segments: list[tuple[int, int, str]] = []
        n = offsets.shape[0]
        for j, seg in enumerate(segs):
            sat = f"{at}.segments[{j}]"
            if not (isinstance(seg, (list, tuple)) and len(seg) == 3):
                raise bad(f"{sat} must be [start_index, end_index_exclusive, kind]")
            lo, hi, kind = seg
            if not (_is_int(lo) and _is_int(hi)):
                raise bad(f"{sat} start and end must be integers, found {lo!r} and {hi!r}")
            if not 0 <= lo <= hi <= n:
                raise bad(f"{sat} range [{lo}, {hi}) is outside the stream's {n} offsets")
            if kind not in _STYLE:
                raise bad(f"{sat} has unknown kind {kind!r} (expected one of {', '.join(KINDS)})")
            if hi > lo:
                segments.append((int(lo), int(hi), str(kind)))
        streams.append(_Stream(key=key, offsets=offsets, segments=segments))
    return title, streams


def _offsets(raw: Any, bad: Any) -> np.ndarray:
    if not isinstance(raw, list):
        raise bad(f"must be a list of integers, found {_json_type(raw)}")
    if not raw:
        return np.empty(0, np.float64)
    arr = np.asarray(raw) if all(_is_int(x) for x in raw) else None
    if arr is None:
        first = next(x for x in raw if not _is_int(x))
        raise bad(f"must hold integers only, found {first!r}")
    if arr.dtype.kind == "i" and (arr < 0).any():
        raise bad(f"must be non-negative, found {int(arr.min())}")
    # Offsets past 2**63 come in as Python ints (object dtype); floats are fine to draw.
    return arr.astype(np.float64)


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _json_type(x: Any) -> str:
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "a boolean"
    if isinstance(x, (int, float)):
        return "a number"
    if isinstance(x, str):
        return "a string"
    if isinstance(x, list):
        return "a list"
    if isinstance(x, Mapping):
        return "an object"
    return type(x).__name__


def _reason(e: BaseException) -> str:
    return getattr(e, "strerror", None) or str(e) or type(e).__name__


# --------------------------------------------------------------------------- drawing


def format_bytes(value: float, _pos: object = None) -> str:
    """A byte count in binary units: ``0``, ``512 B``, ``4 KiB``, ``1.5 MiB``, ``10 GiB``."""
    if value == 0:
        return "0"
    sign = "-" if value < 0 else ""
    v = abs(float(value))
    unit = 0
    while v >= 1024 and unit < len(_BINARY_UNITS) - 1:
        v /= 1024
        unit += 1
    text = f"{v:.2f}".rstrip("0").rstrip(".") if v < 100 else f"{v:.0f}"
    return f"{sign}{text} {_BINARY_UNITS[unit]}"


def _binary_locator() -> Any:
    """Ticks at round numbers of the binary unit that fits the axis (e.g. 0, 2, 4 GiB)."""
    from matplotlib.ticker import MaxNLocator

    class BinaryLocator(MaxNLocator):
        def tick_values(self, vmin: float, vmax: float) -> Any:
            span = max(abs(vmin), abs(vmax))
            scale = 1024.0 ** max(0, min(6, int(math.log(span, 1024)))) if span >= 1 else 1.0
            ticks = super().tick_values(vmin / scale, vmax / scale) * scale
            if scale == 1.0:
                ticks = np.unique(np.round(ticks))  # no "0.2 B"
            return ticks[ticks >= 0]  # offsets are never negative; the margin below 0 is

    return BinaryLocator(nbins=6, steps=[1, 2, 2.5, 4, 5, 8, 10], integer=False)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _shorten(text: str, width: int = 60) -> str:
    """Shorten a stream key for a panel title, keeping its start and its end."""
    if len(text) <= width:
        return text
    head = width // 3
    return text[:head] + "\u2026" + text[-(width - head - 1) :]


def plot_analysis(doc: Mapping[str, Any], out: str | os.PathLike[str], *, dpi: int = 110) -> None:
    """Draw the access-pattern figure for an analysis document into a PNG file."""
    title, streams = _parse(doc, "analysis")
    _render(title, streams, out, dpi=dpi)


def _group(key: str) -> str:
    """The stream key without its rank: ``POSIX rank 3 write /f`` → ``POSIX write /f``."""
    parts = key.split(" ", 3)
    if len(parts) == 4 and parts[1] == "rank":
        return f"{parts[0]} {parts[3]}"
    return key


def select_panels(streams: Sequence[_Stream], limit: int) -> list[_Stream]:
    """Up to ``limit`` streams to draw, largest first, one per group (module, op, file)
    before any group gets a second panel, so a log of many ranks doing the same thing
    shows its different files and operations rather than twelve copies of one."""
    order = sorted(range(len(streams)), key=lambda i: -streams[i].offsets.shape[0])
    seen: set[str] = set()
    first, rest = [], []
    for i in order:
        group = _group(streams[i].key)
        (rest if group in seen else first).append(i)
        seen.add(group)
    chosen = sorted((first + rest)[:limit], key=lambda i: -streams[i].offsets.shape[0])
    return [streams[i] for i in chosen]


def _render(title: str, streams: list[_Stream], out: str | os.PathLike[str], *, dpi: int) -> None:
    # A bare Figure on an Agg canvas: no pyplot, so no global backend or figure state.
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    total = len(streams)
    shown = select_panels(streams, MAX_PANELS)
    n = len(shown)
    ncols = 1 if n <= 1 else 2 if n <= 4 else 3 if n <= 9 else 4
    nrows = max(1, math.ceil(n / ncols))
    fig = Figure(figsize=(4.6 * ncols, 3.3 * nrows + 1.0), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    kinds_used: set[str] = set()
    any_uncovered = False
    for ax, st in zip(axes.flat, shown):
        used, uncovered = _draw_stream(ax, st)
        kinds_used |= used
        any_uncovered |= uncovered
        ax.set_title(
            f"{_shorten(st.key)}\n{_count(st.offsets.shape[0], 'request')}, "
            f"{_count(len(st.segments), 'segment')}",
            fontsize=8.5,
        )
        if st.offsets.shape[0]:
            ax.yaxis.set_major_locator(_binary_locator())
            ax.yaxis.set_major_formatter(FuncFormatter(format_bytes))
            ax.xaxis.set_major_locator(MaxNLocator(nbins=6, integer=True))
        ax.tick_params(labelsize=8)
        ax.grid(True, color="#e6e6e6", linewidth=0.6)
        ax.set_axisbelow(True)
    for ax in list(axes.flat)[n:]:
        ax.set_visible(False)
    for k in range(n):  # label the x axis of each panel with no panel below it
        if k + ncols >= n:
            axes.flat[k].set_xlabel("request index", fontsize=9)
    for row in axes:
        row[0].set_ylabel("offset", fontsize=9)
    if n == 0:
        ax = axes[0, 0]
        ax.set_visible(True)
        ax.set_axis_off()
        ax.text(0.5, 0.5, "no streams to draw", ha="center", va="center", fontsize=12)

    if total == 0:
        subtitle = "no streams"
    elif total > n:
        subtitle = f"{n} of {total:,} streams: the largest of each file and operation first"
    else:
        subtitle = f"{total} stream{'s' if total != 1 else ''}, largest first"
    fig.suptitle(f"{title}\n{subtitle}" if title else subtitle, fontsize=12)

    handles = []
    for kind in KINDS:
        if kind in kinds_used:
            cmap, marker = _STYLE[kind]
            color = matplotlib.colormaps[cmap](_SHADES[0])
            handles.append(
                Line2D(
                    [],
                    [],
                    color=color,
                    marker=marker,
                    linestyle="-",
                    linewidth=0.8,
                    markersize=6,
                    label=kind,
                )
            )
    if any_uncovered:
        handles.append(
            Line2D([], [], color=_UNCOVERED, marker=".", linestyle="none", label="not in a segment")
        )
    if handles:
        fig.legend(
            handles=handles,
            loc="outside lower center",
            ncol=len(handles),
            frameon=False,
            fontsize=9,
            title="pattern kind (neighbouring segments alternate dark/light shades)",
            title_fontsize=8.5,
        )
    fig.savefig(out, dpi=dpi, format="png")


def _draw_stream(ax: Any, st: _Stream) -> tuple[set[str], bool]:
    """Draw one stream's points by segment; return the kinds used and whether any point
    lies outside every segment."""
    import matplotlib

    n = st.offsets.shape[0]
    x = np.arange(n)
    covered = np.zeros(n, dtype=bool)
    size = float(np.clip(2400.0 / max(n, 1), 3.0, 28.0))
    connect = n <= 5000
    used: set[str] = set()
    for j, (lo, hi, kind) in enumerate(st.segments):
        cmap, marker = _STYLE[kind]
        color = matplotlib.colormaps[cmap](_SHADES[j % 2])
        if connect and hi - lo > 1:
            ax.plot(x[lo:hi], st.offsets[lo:hi], color=color, linewidth=0.7, alpha=0.45, zorder=1)
        ax.scatter(
            x[lo:hi],
            st.offsets[lo:hi],
            s=size * (1.3 if marker == "x" else 1.0),
            marker=marker,
            color=color,
            linewidths=0.9 if marker == "x" else 0.0,
            zorder=2,
        )
        covered[lo:hi] = True
        used.add(kind)
    rest = ~covered
    if rest.any():
        ax.scatter(
            x[rest],
            st.offsets[rest],
            s=size * 0.6,
            marker=".",
            color=_UNCOVERED,
            linewidths=0.0,
            zorder=1.5,
        )
    if n:
        ax.set_xlim(-0.5 - 0.01 * n, n - 0.5 + 0.01 * n)
        lo_y, hi_y = float(st.offsets.min()), float(st.offsets.max())
        pad = (hi_y - lo_y) * 0.06 or max(hi_y * 0.06, 16.0)
        ax.set_ylim(lo_y - pad, hi_y + pad)  # margin keeps points on the extremes whole
    else:
        ax.set_xticks([])
        ax.set_yticks([])
        ax.text(0.5, 0.5, "no requests", ha="center", va="center", transform=ax.transAxes)
    return used, bool(rest.any())


def plot_analysis_file(json_path: str | os.PathLike[str], png_path: str | os.PathLike[str]) -> None:
    """Read the analysis JSON at ``json_path`` and write the figure to ``png_path``."""
    title, streams = _parse(_load(Path(json_path)), str(json_path))
    try:
        _render(title, streams, png_path, dpi=110)
    except OSError as e:
        raise PlotError(
            f"cannot write {png_path} ({_reason(e)}): check the directory exists and is writable"
        ) from None


# --------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m patio.plot analyze IN.json OUT.png``."""
    parser = argparse.ArgumentParser(
        prog="python -m patio.plot", description="Draw patio figures (PNG)."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    analyze = sub.add_parser(
        "analyze", help="access-pattern figure from the JSON of patio analyze --plot"
    )
    analyze.add_argument("input", help="analysis JSON written by patio analyze")
    analyze.add_argument("output", help="PNG file to write")
    args = parser.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")  # a command-line run never needs a display
    try:
        plot_analysis_file(args.input, args.output)
    except PlotError as e:
        print(f"patio: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
