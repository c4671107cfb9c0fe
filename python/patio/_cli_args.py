"""Options spelled one way across patio's commands (docs/CLI.md, "Shared options"): the
old spellings of the Python front ends keep working for one release, hidden from
``--help``, with a deprecation line naming the new one."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


class _Deprecated(argparse.Action):
    """Stores the value like the new option, after one warning on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, new: str, **kw: Any):
        self.new = new
        super().__init__(option_strings, dest, **kw)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(
            f"patio: warning: {option_string} is deprecated and will be removed; use {self.new}",
            file=sys.stderr,
        )
        setattr(namespace, self.dest, values)


def deprecated_alias(
    parser: argparse.ArgumentParser, old: str, new: str, dest: str, **kw: Any
) -> None:
    """Accepts ``old`` as a hidden spelling of ``new`` (same ``dest``, same type)."""
    parser.add_argument(old, dest=dest, help=argparse.SUPPRESS, action=_Deprecated, new=new, **kw)
