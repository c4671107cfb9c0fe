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


class StoreOptionError(ValueError):
    """A bad ``--store``, ``--store-targets`` or ``--store-stripe-kib``: its message names
    the option and stands alone on one line."""


def add_store_options(
    parser: argparse.ArgumentParser,
    default: str | None = "lustre",
    dest: str = "store",
    help: str | None = None,
) -> None:
    """``--store PRESET`` with ``--store-targets N`` and ``--store-stripe-kib KIB``, as
    the Rust commands spell them (docs/CLI.md, "Shared options"); the model they name
    is :func:`store_model` of the parsed arguments."""
    parser.add_argument(
        "--store",
        dest=dest,
        metavar="PRESET",
        default=default,
        help=help
        or "striped storage model preset: lustre, hdd, ssd, or probed (this machine's, "
        f"measured by `patio store probe`); default {default}",
    )
    parser.add_argument(
        "--store-targets",
        type=int,
        metavar="N",
        help="with --store: the number of targets (servers) instead of the preset's",
    )
    parser.add_argument(
        "--store-stripe-kib",
        type=int,
        metavar="KIB",
        help="with --store: the stripe size in KiB instead of the preset's (RPCs stay at "
        "most one stripe)",
    )


def store_model(preset: str, targets: int | None = None, stripe_kib: int | None = None) -> Any:
    """The :class:`patio._native.StorageModel` of ``preset`` with ``--store-targets`` and
    ``--store-stripe-kib`` applied by the storage model's own rule
    (``Striping::with_overrides``); a bad name or value is a :class:`StoreOptionError`."""
    from patio._native import StorageModel

    try:
        model = StorageModel.preset(preset)
    except ValueError as e:
        raise StoreOptionError(f"--store: {e}") from None
    if targets is None and stripe_kib is None:
        return model
    try:
        return model.with_overrides(targets=targets, stripe_kib=stripe_kib)
    except (ValueError, OverflowError) as e:
        raise StoreOptionError(f"--store {preset}: {e}") from None


def store_model_of(args: argparse.Namespace, dest: str = "store") -> Any:
    """:func:`store_model` of the options :func:`add_store_options` added to a parser
    (``None`` when ``--store`` has no default and is not given)."""
    preset = getattr(args, dest)
    if preset is None:
        if args.store_targets is not None or args.store_stripe_kib is not None:
            raise StoreOptionError("--store-targets and --store-stripe-kib need --store PRESET")
        return None
    return store_model(preset, args.store_targets, args.store_stripe_kib)
