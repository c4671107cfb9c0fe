"""patio (PATtern-aware I/O): the Python side of the project.

Re-exports the Rust pattern engine from the compiled extension ``patio._native`` when it is
built, and hosts the pure-Python parts, which work without it:

* :mod:`patio.dxt` - read Darshan DXT logs into trace streams and write patio trace CSV;
* :mod:`patio.plot` - draw the access-pattern figure for ``patio analyze --plot``.

The submodules are imported on demand (``import patio.dxt``) so that ``import patio`` stays
cheap and does not need PyDarshan or matplotlib.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]

try:
    from . import _native
    from ._native import *
except ImportError:  # extension not built: the pure-Python modules still work
    pass
else:
    __all__.extend(getattr(_native, "__all__", [n for n in dir(_native) if not n.startswith("_")]))
