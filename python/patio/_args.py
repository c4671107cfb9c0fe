"""Argument checks shared by patio's file objects (``patio.open``, ``patio.Container``):
integers through ``__index__``, non-negative sizes and offsets, path-like arguments, and
caller buffers as flat writable byte views for reads without copies."""

from __future__ import annotations

import os
from typing import Any, Union

PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def index_arg(name: str, value: Any) -> int:
    """``value`` as an int (anything with ``__index__``, not ``bool``), else ``TypeError``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    try:
        return int(value.__index__())
    except AttributeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None


def non_negative(name: str, value: Any, limit: int | None = None, what: str = "") -> int:
    """``value`` as an int ≥ 0 (and ≤ ``limit`` when given), else ``ValueError``."""
    value = index_arg(name, value)
    if value < 0:
        raise ValueError(f"{name} must be >= 0, not {value}")
    if limit is not None and value > limit:
        raise ValueError(f"{name}={value} is beyond {what or limit}")
    return value


def path_arg(path: Any) -> str:
    """A path argument (str, bytes or os.PathLike) as a str."""
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise TypeError(f"path must be str, bytes or os.PathLike, not {type(path).__name__}")
    return os.fsdecode(path)


def writable_bytes(buffer: Any) -> memoryview:
    """``buffer`` as a writable, flat, C-contiguous view of unsigned bytes (no copy).
    Buffers of Python objects are refused: bytes written over object pointers would
    crash the interpreter."""
    kind = type(buffer).__name__
    try:
        view = memoryview(buffer)
    except TypeError:
        raise TypeError(
            f"readinto() argument must be read-write bytes-like object, not {kind}"
        ) from None
    if view.readonly:
        raise TypeError(f"readinto() argument must be read-write bytes-like object, not {kind}")
    if "O" in view.format:
        raise TypeError("readinto() argument holds Python objects, not plain data")
    if view.ndim != 1 or view.format != "B":
        if not view.c_contiguous:
            raise TypeError("readinto() argument must be a C-contiguous buffer")
        view = view.cast("B")
    return view
