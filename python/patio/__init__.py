"""patio (PATtern-aware I/O): the Python side of the project.

Re-exports the Rust pattern engine from the compiled extension ``patio._native``:

* :class:`PatternUnit` - ``[init, (d0 ... dk-1)^r]``, ``1 + k*r`` values, random access
  and search without expansion;
* :func:`detect` - the sliding-window detector; returns a :class:`PatternSeq` (pattern
  units, nested patterns and literal runs) with ``encode()`` / ``PatternSeq.decode()``;
* :class:`PatternMap` / :class:`ExtentTable` - logical->physical maps (pattern entries and
  the sorted-extent baseline) with ``lookup``, vectorised ``lookup_many`` and codecs;
* :func:`analyze_stream` - pattern kind, signature and coverage of one request stream;
* :func:`read_trace`, :func:`write_trace_csv`, :func:`write_trace_native` - patio trace
  files; a stream is a dict ``{module, file, rank, op, offset, length, start, end}`` (the
  writers also take :class:`patio.dxt.Stream` objects as they are);
* :func:`open` - ``patio.open(path, prefetch="pattern")``: a read-only binary file
  object (:class:`PrefetchFile`) whose reads go through the prefetch engine
  (:mod:`patio.prefetch`); :func:`prefetch_stats` - the engine's counters;
* :class:`Container` - patio's log-structured container: one logical file written by
  many processes at once, read with NumPy buffers (:mod:`patio.container`; tools
  ``patio.container.stat/truncate/remove/check``; MPI front end :mod:`patio.mpi`);
  :class:`ContainerError` - a directory that is not a container, or a damaged one.

The pure-Python parts work without the extension and are imported on demand so that
``import patio`` stays cheap and does not need PyDarshan or matplotlib:

* :mod:`patio.dxt` - read Darshan DXT logs into trace streams and write patio trace CSV;
* :mod:`patio.plot` - draw the access-pattern figure for ``patio analyze --plot``.

If the extension is not built, ``import patio`` still succeeds; using one of the native
names then raises an :class:`ImportError` that says how to build it.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_WINDOW",
    "LOOKUP_DATA",
    "LOOKUP_HOLE",
    "LOOKUP_UNMAPPED",
    "Container",
    "ContainerError",
    "ExtentTable",
    "PatternMap",
    "PatternSeq",
    "PatternUnit",
    "PrefetchFile",
    "__version__",
    "analyze_stream",
    "detect",
    "open",
    "prefetch_stats",
    "read_trace",
    "write_trace_csv",
    "write_trace_native",
]

#: The names :mod:`patio.prefetch` provides (Python over the extension).
_PREFETCH_NAMES = ("PrefetchFile", "open", "prefetch_stats")
#: The names :mod:`patio.container` provides (Python over the extension).
_CONTAINER_NAMES = ("Container",)
#: The names ``patio._native`` provides (the rest of ``__all__`` but ``__version__``).
_NATIVE_NAMES = tuple(
    n
    for n in __all__
    if n != "__version__" and n not in _PREFETCH_NAMES and n not in _CONTAINER_NAMES
)

_NATIVE_ERROR: ImportError | None = None
try:
    from ._native import DEFAULT_WINDOW as DEFAULT_WINDOW
    from ._native import LOOKUP_DATA as LOOKUP_DATA
    from ._native import LOOKUP_HOLE as LOOKUP_HOLE
    from ._native import LOOKUP_UNMAPPED as LOOKUP_UNMAPPED
    from ._native import ContainerError as ContainerError
    from ._native import ExtentTable as ExtentTable
    from ._native import PatternMap as PatternMap
    from ._native import PatternSeq as PatternSeq
    from ._native import PatternUnit as PatternUnit
    from ._native import analyze_stream as analyze_stream
    from ._native import detect as detect
    from ._native import read_trace as read_trace
    from ._native import write_trace_csv as write_trace_csv
    from ._native import write_trace_native as write_trace_native
    from .container import Container as Container
    from .prefetch import PrefetchFile as PrefetchFile
    from .prefetch import open as open
    from .prefetch import prefetch_stats as prefetch_stats
except ImportError as _e:  # extension not built: the pure-Python modules still work
    _NATIVE_ERROR = _e
    __all__ = ["__version__"]


def __getattr__(name: str) -> Any:
    # Only reached for names not defined above, i.e. native names when the import failed.
    if name in (*_NATIVE_NAMES, *_PREFETCH_NAMES, *_CONTAINER_NAMES) and _NATIVE_ERROR is not None:
        raise ImportError(
            f"patio.{name} needs the compiled extension patio._native, which could not be "
            f"imported ({_NATIVE_ERROR}); build it with `bash scripts/setup.sh` or "
            "`maturin develop --release -m crates/patio-py/Cargo.toml`",
            name=name,
        ) from _NATIVE_ERROR
    raise AttributeError(f"module 'patio' has no attribute {name!r}")
