"""The page-level cost model of a read (the thesis' eq 3.1) over patio's striped storage
model, and the fit of its constants from timed probe reads.

    T_r = max over targets i of ( N_pg^i * T_pg + N_chk^i * T_chk ) + T_lat

``N_pg^i`` are the distinct 4 KiB pages and ``N_chk^i`` the non-contiguous runs the
flattened read touches on storage target ``i`` (striping and page size from the
:class:`patio._native.StorageModel`), summed over the client processes that read at
the same time: that sum is the thesis' ``N_proc^i`` times the per-process counts, read
so that a multiplier is not applied to totals twice (REORGANIZATION.md §F.1). The
constants come from ``patio layout probe`` (measured on real storage) or are fitted to
the storage model itself (:func:`fit_to_model`); both use :func:`fit`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from .flatten import Extents

#: Seconds per byte decompressed from a deflate-filtered chunk when not probed: zlib
#: inflates ~300 MB/s per core on current x86 servers; ``patio layout probe`` measures it.
DEFAULT_T_DEC = 1.0 / 300e6


@dataclass(frozen=True)
class Constants:
    """eq 3.1's constants in seconds: per page, per non-contiguous run, per read, and
    per byte decompressed from a filtered chunk (:data:`DEFAULT_T_DEC` when not
    measured)."""

    t_pg: float
    t_chk: float
    t_lat: float
    t_dec: float = DEFAULT_T_DEC

    def to_json(self) -> dict[str, float]:
        return asdict(self)

    def as_tuple(self) -> tuple[float, float, float, float]:
        return (self.t_pg, self.t_chk, self.t_lat, self.t_dec)

    @staticmethod
    def from_json(d: dict[str, Any]) -> Constants:
        return Constants(float(d["t_pg"]), float(d["t_chk"]), float(d["t_lat"]),
                         float(d.get("t_dec", DEFAULT_T_DEC)))



def storage_model(name_or_params: str | dict[str, Any] = "lustre") -> Any:
    """A :class:`patio._native.StorageModel` from a preset name or a parameter dict."""
    from patio._native import StorageModel

    if isinstance(name_or_params, str):
        return StorageModel.preset(name_or_params)
    return StorageModel(**name_or_params)


def counts(model: Any, clients: Sequence[Extents]) -> tuple[np.ndarray, np.ndarray]:
    """Per-target pages and runs summed over ``clients`` (each one flattened read)."""
    pages = chunks = None
    for ext in clients:
        c = model.page_counts(ext.offsets, ext.lengths)
        p, k = np.asarray(c["pages"], np.float64), np.asarray(c["chunks"], np.float64)
        pages = p if pages is None else pages + p
        chunks = k if chunks is None else chunks + k
    if pages is None or chunks is None:
        return np.zeros(1), np.zeros(1)
    return pages, chunks


def price(layout: Any, selection: Any, model: Any, consts: Constants) -> float:
    """eq 3.1 (with the decompression term) of reading ``selection`` - a
    :class:`~patio.layout.selection.Selection` or the core's ``LayoutSelection`` - from
    ``layout`` alone, computed by the layout core."""
    from .flatten import native_layout

    nsel = selection.native() if hasattr(selection, "native") else selection
    return float(native_layout(layout).price(nsel, model, consts.as_tuple()))


def fit(samples: Sequence[tuple[float, float, float]]) -> Constants:
    """Least-squares ``seconds = t_lat + pages*t_pg + chunks*t_chk`` over probe samples
    ``(pages, chunks, seconds)``, constrained to non-negative constants."""
    a = np.array([[1.0, p, c] for p, c, _ in samples])
    y = np.array([s for _, _, s in samples])
    active = [0, 1, 2]
    while True:
        sol, *_ = np.linalg.lstsq(a[:, active], y, rcond=None)
        if (sol >= 0).all() or len(active) == 1:
            break
        active.pop(int(np.argmin(sol)))
    full = np.zeros(3)
    full[active] = np.maximum(sol, 0.0)
    return Constants(t_pg=float(full[1]), t_chk=float(full[2]), t_lat=float(full[0]))


#: Contiguous probe reads long enough that transfer, not latency, sets their time
#: (4-64 MiB: several stripes on every target). Without them every probe read costs
#: about a latency and a run, least squares explains the 1-256-page reads with those
#: terms alone, and ``t_pg`` comes out an order of magnitude below the bandwidth's
#: (on the Lustre-like preset 0.63 us a page, not 8.2: eq 3.1 then priced a 256 MiB
#: read at 7 ms against the simulator's 74 ms, and admitted whole-chunk layouts that
#: read 25x the selection's bytes).
BANDWIDTH_PROBE_BYTES = (4 << 20, 16 << 20, 64 << 20)


def probe_requests(span: int, page: int = 4096) -> list[tuple[list[int], list[int]]]:
    """The probe's reads inside ``span`` bytes: contiguous reads of 1..256 pages and of
    :data:`BANDWIDTH_PROBE_BYTES` (those that fit ``span``), and reads of 2..64
    scattered single pages far apart (as lists of offsets/lengths)."""
    out: list[tuple[list[int], list[int]]] = []
    for n in (1, 4, 16, 64, 256):
        out.append(([0], [n * page]))
    for nbytes in BANDWIDTH_PROBE_BYTES:
        if nbytes <= span:
            out.append(([0], [nbytes // page * page]))
    for k in (2, 8, 32, 64):
        gap = max(page, (span // k) // page * page)
        out.append(([i * gap for i in range(k)], [page] * k))
    for k in (4, 16):  # runs of 8 pages
        gap = max(8 * page, (span // k) // page * page)
        out.append(([i * gap for i in range(k)], [8 * page] * k))
    return out


def fit_to_model(model: Any, span: int = 1 << 30) -> Constants:
    """eq 3.1's constants fitted to the storage model's own simulated probe reads."""
    return fit_requests(model, probe_requests(span),
                        lambda offs, lens: float(model.simulate(
                            [[(np.array(offs, np.uint64), np.array(lens, np.uint64))]]
                        )["seconds"]))


def fit_requests(model: Any, requests: Sequence[tuple[list[int], list[int]]],
                 timer: Callable[[list[int], list[int]], float]) -> Constants:
    samples = []
    for offs, lens in requests:
        ext = Extents(np.array(offs, np.int64), np.array(lens, np.int64))
        pages, chunks = counts(model, [ext])
        # eq 3.1 takes the busiest target: fit against its counts.
        busiest = int(np.argmax(pages + chunks))
        samples.append((float(pages[busiest]), float(chunks[busiest]), timer(offs, lens)))
    return fit(samples)
