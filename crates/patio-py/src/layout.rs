//! The HDF5 layout core (`patio-layout`) for Python: `LayoutSelection` (grids built
//! from HDF5 hyperslabs or per-axis index sets, or points), `StoredLayout` (contiguous
//! or chunked storage, filtered chunks with stored sizes) and their flattening and
//! eq 3.1 pricing on a `StorageModel`, and `LayoutDecider` (the candidates for one
//! read and the choice among them) — the decision path of `patio.h5` and
//! `patio layout`; and the knowledge base's definitions that `patio.layout.kb` and
//! `patio.layout.selection` call (where it lives, a selection's JSON, an integer
//! blob). Bad input (a wrong rank, a selection outside the array, a chunk index of the
//! wrong length) is a `ValueError` naming it.

use crate::convert::int_column;
use crate::store::PyStorageModel;
use numpy::PyArray1;
use patio_layout::{
    kblog, Axis, Candidate, Constants, Decider, Grid, Holds, Layout, LayoutError, Plan, Replica,
    Selection,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};
use std::path::PathBuf;

fn err(e: LayoutError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Per-axis sorted, duplicate-free index sets (integer columns) as block lists;
/// `what` names an axis in errors (`"{what} {j} indices"`).
fn axes_of(sets: &[Bound<'_, PyAny>], what: &str) -> PyResult<Vec<Axis>> {
    sets.iter()
        .enumerate()
        .map(|(j, a)| {
            let v: Vec<u64> = int_column(a, &format!("{what} {j} indices"))?;
            Axis::from_sorted_indices(&v).map_err(err)
        })
        .collect()
}

/// A selection of an array of rank `rank`.
#[pyclass(module = "patio._native", name = "LayoutSelection", frozen)]
pub struct PySelection {
    inner: Selection,
}

#[pymethods]
impl PySelection {
    /// Regular hyperslabs: `values` holds, per hyperslab, `start`, `stride`, `count`
    /// and `block` (each `rank` ints), in buffer order.
    #[staticmethod]
    fn slabs(rank: usize, values: &Bound<'_, PyAny>) -> PyResult<Self> {
        let v: Vec<u64> = int_column(values, "hyperslab values")?;
        let per = 4 * rank;
        if rank == 0 || !v.len().is_multiple_of(per) {
            return Err(PyValueError::new_err(format!(
                "hyperslab values: {} ints are not whole hyperslabs of rank {rank}",
                v.len()
            )));
        }
        let grids = v
            .chunks(per)
            .map(|s| {
                Grid::hyperslab(
                    &s[..rank],
                    &s[rank..2 * rank],
                    &s[2 * rank..3 * rank],
                    &s[3 * rank..],
                )
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(err)?;
        Ok(PySelection {
            inner: Selection::Grids(grids),
        })
    }

    /// The Cartesian product of per-axis sorted, duplicate-free index sets.
    #[staticmethod]
    fn product(axes: Vec<Bound<'_, PyAny>>) -> PyResult<Self> {
        let axes = axes_of(&axes, "axis")?;
        Ok(PySelection {
            inner: Selection::grid(Grid { axes }),
        })
    }

    /// Points: `coords` holds `rank` ints per point, in buffer order.
    #[staticmethod]
    fn points(rank: usize, coords: &Bound<'_, PyAny>) -> PyResult<Self> {
        let coords: Vec<u64> = int_column(coords, "point coordinates")?;
        if rank > 0 && !coords.len().is_multiple_of(rank) {
            return Err(PyValueError::new_err(format!(
                "{} coordinates are not whole points of rank {rank}",
                coords.len()
            )));
        }
        Ok(PySelection {
            inner: Selection::Points { rank, coords },
        })
    }

    /// The selection in the array whose axis `i` is this one's `axes[i]`.
    fn permuted(&self, axes: Vec<usize>) -> PyResult<Self> {
        let rank = match &self.inner {
            Selection::Grids(gs) => gs.first().map_or(axes.len(), Grid::rank),
            Selection::Points { rank, .. } => *rank,
        };
        let mut seen = vec![false; rank];
        if axes.len() != rank
            || axes
                .iter()
                .any(|&a| a >= rank || std::mem::replace(&mut seen[a], true))
        {
            return Err(PyValueError::new_err(format!(
                "{axes:?} is not a permutation of {rank} axes"
            )));
        }
        let inner = patio_layout::decide::permuted(&self.inner, &axes);
        Ok(PySelection { inner })
    }

    /// Selected elements.
    fn nelements(&self) -> u64 {
        self.inner.nelements()
    }

    /// Blocks (or points) held: the size of the description.
    fn nblocks(&self) -> usize {
        self.inner.nblocks()
    }
}

/// Where a stored array's bytes are.
#[pyclass(module = "patio._native", name = "StoredLayout", frozen)]
pub struct PyLayout {
    inner: Layout,
}

fn columns<'py>(
    py: Python<'py>,
    ext: &[(u64, u64)],
) -> (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>) {
    let o: Vec<i64> = ext.iter().map(|e| e.0 as i64).collect();
    let l: Vec<i64> = ext.iter().map(|e| e.1 as i64).collect();
    (PyArray1::from_vec(py, o), PyArray1::from_vec(py, l))
}

#[pymethods]
impl PyLayout {
    /// Contiguous storage at `base` (when `chunk` is None), else chunked storage with
    /// `addresses` (row-major chunk-grid order, negative = not allocated) and, for
    /// filtered chunks, their `stored` sizes.
    /// `chunk_cache`: the reader's chunk cache in bytes (HDF5's default 1 MiB when
    /// None); unfiltered chunks no larger are read whole, as HDF5 reads them.
    #[new]
    #[pyo3(signature = (shape, itemsize, base = 0, chunk = None, addresses = None, stored = None, chunk_cache = None))]
    fn new(
        shape: Vec<u64>,
        itemsize: u64,
        base: u64,
        chunk: Option<Vec<u64>>,
        addresses: Option<&Bound<'_, PyAny>>,
        stored: Option<&Bound<'_, PyAny>>,
        chunk_cache: Option<u64>,
    ) -> PyResult<Self> {
        let inner = match chunk {
            None => Layout::contiguous(&shape, itemsize, base),
            Some(chunk) => {
                let addresses = addresses
                    .ok_or_else(|| PyValueError::new_err("a chunked layout needs addresses"))?;
                let a: Vec<i64> = int_column(addresses, "chunk addresses")?;
                let s: Option<Vec<u64>> =
                    stored.map(|s| int_column(s, "stored sizes")).transpose()?;
                Layout::chunked(&shape, itemsize, &chunk, &a, s.as_deref())
            }
        }
        .map_err(err)?;
        let inner = match chunk_cache {
            Some(bytes) => inner.with_chunk_cache(bytes),
            None => inner,
        };
        Ok(PyLayout { inner })
    }

    /// `(crc, ranges)`: the CRC-32 of the bytes the array occupies in the file at `path`
    /// and the number of byte ranges they form (a replica's source generation, the
    /// layout core's definition that the VOL connector checks too).
    fn source_crc(&self, py: Python<'_>, path: std::path::PathBuf) -> PyResult<(u32, usize)> {
        let ranges = patio_layout::kbserve::storage_ranges(&self.inner);
        let crc = py
            .allow_threads(|| patio_layout::kbserve::ranges_crc(&path, &ranges))
            .map_err(|e| {
                pyo3::exceptions::PyOSError::new_err(format!("{}: {e}", path.display()))
            })?;
        Ok((crc, ranges.len()))
    }

    /// True when the chunks are filtered (read and decompressed whole).
    #[getter]
    fn filtered(&self) -> bool {
        self.inner.filtered()
    }

    /// `(offsets, lengths, inflated)`: the extents in buffer order (filtered: stored
    /// chunks in first-touch order), consecutive ones merged, and the bytes decompressed.
    fn flatten<'py>(&self, py: Python<'py>, sel: &PySelection) -> PyResult<Bound<'py, PyTuple>> {
        let f = py
            .allow_threads(|| patio_layout::flatten(&self.inner, &sel.inner))
            .map_err(err)?;
        let (o, l) = columns(py, &f.extents);
        PyTuple::new(
            py,
            [
                o.into_any(),
                l.into_any(),
                f.inflated.into_pyobject(py)?.into_any(),
            ],
        )
    }

    /// `(offsets, lengths)` sorted by offset, overlapping and adjacent ones merged.
    fn flatten_sorted<'py>(
        &self,
        py: Python<'py>,
        sel: &PySelection,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let m = py
            .allow_threads(|| {
                let f = patio_layout::flatten(&self.inner, &sel.inner)?;
                patio_layout::merge_sorted(&f.extents)
            })
            .map_err(err)?;
        let (o, l) = columns(py, &m);
        PyTuple::new(py, [o, l])
    }

    /// eq 3.1's modelled seconds of reading `sel` alone: `consts` is
    /// `(t_pg, t_chk, t_lat, t_dec)`.
    fn price(
        &self,
        py: Python<'_>,
        sel: &PySelection,
        model: &PyStorageModel,
        consts: (f64, f64, f64, f64),
    ) -> PyResult<f64> {
        let c = Constants {
            t_pg: consts.0,
            t_chk: consts.1,
            t_lat: consts.2,
            t_dec: consts.3,
        };
        let striping = model.striping();
        py.allow_threads(|| patio_layout::price_selection(striping, &c, &self.inner, &sel.inner))
            .map_err(err)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySelection>()?;
    m.add_class::<PyLayout>()?;
    m.add_class::<PyDecider>()?;
    m.add_function(wrap_pyfunction!(layout_kb_dir, m)?)?;
    m.add_function(wrap_pyfunction!(layout_selection_json, m)?)?;
    m.add_function(wrap_pyfunction!(layout_ints_blob, m)?)?;
    m.add_function(wrap_pyfunction!(layout_kb_state, m)?)
}

/// What says the knowledge base database at `path` has not changed
/// (`patio_layout::kbserve::kb_state`: identity and SQLite header, None while a journal
/// lies beside it) - the one rule `patio.layout.kb` and serving both apply.
#[pyfunction]
fn layout_kb_state<'py>(py: Python<'py>, path: PathBuf) -> Option<Bound<'py, PyBytes>> {
    patio_layout::kbserve::kb_state(&path).map(|s| PyBytes::new(py, &s))
}

/// The directory of `source`'s knowledge base, replicas and record logs
/// (`patio_layout::kblog::kb_dir`; `PATIO_LAYOUT_DIR` read from the environment).
#[pyfunction]
fn layout_kb_dir(source: PathBuf) -> PathBuf {
    kblog::kb_dir(&source)
}

/// A selection's JSON as the knowledge base stores it (`kblog::selection_json`):
/// `slabs` as `[start, stride, count, block]` lists, `None` for points.
#[pyfunction]
#[pyo3(signature = (shape, kind, out, slabs))]
fn layout_selection_json(
    shape: Vec<u64>,
    kind: &str,
    out: Vec<u64>,
    slabs: Option<Vec<kblog::Slab>>,
) -> String {
    kblog::selection_json(&shape, kind, &out, slabs.as_deref())
}

/// Integers (a numpy integer array or a sequence of ints) in the knowledge base's
/// encoding (`kblog::ints_blob`: the pattern engine's).
#[pyfunction]
fn layout_ints_blob<'py>(
    py: Python<'py>,
    values: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let xs: Vec<i64> = int_column(values, "values")?;
    Ok(PyBytes::new(py, &kblog::ints_blob(&xs)))
}

/// What a replica holds, from Python: `("everything",)`, `("transposed", perm)`,
/// `("product", [sorted index arrays], perm)` or `("points", sorted linear indices)`.
fn holds_of(obj: &Bound<'_, PyAny>) -> PyResult<Holds> {
    let t = obj.downcast::<PyTuple>()?;
    let kind: String = t.get_item(0)?.extract()?;
    Ok(match kind.as_str() {
        "everything" => Holds::Everything,
        "transposed" => Holds::Transposed {
            perm: t.get_item(1)?.extract()?,
        },
        "product" => {
            let sets: Vec<Bound<'_, PyAny>> = t.get_item(1)?.extract()?;
            let sets = axes_of(&sets, "replica axis")?;
            Holds::Product {
                sets,
                perm: t.get_item(2)?.extract()?,
            }
        }
        "points" => Holds::Points {
            linear: int_column(&t.get_item(1)?, "replica linear indices")?,
        },
        other => {
            return Err(PyValueError::new_err(format!(
                "unknown replica kind {other:?}"
            )))
        }
    })
}

fn plan_tuple<'py>(py: Python<'py>, plan: &Plan) -> PyResult<Bound<'py, PyTuple>> {
    let items: Vec<Bound<'py, PyAny>> = match plan {
        Plan::Original => vec!["original".into_pyobject(py)?.into_any()],
        Plan::Whole(i) => vec![
            "whole".into_pyobject(py)?.into_any(),
            i.into_pyobject(py)?.into_any(),
        ],
        Plan::Sub(i) => vec![
            "sub".into_pyobject(py)?.into_any(),
            i.into_pyobject(py)?.into_any(),
        ],
        Plan::Split { replica, axis } => vec![
            "split".into_pyobject(py)?.into_any(),
            replica.into_pyobject(py)?.into_any(),
            axis.into_pyobject(py)?.into_any(),
        ],
        Plan::Points { replica, rest } => vec![
            "points".into_pyobject(py)?.into_any(),
            replica.into_pyobject(py)?.into_any(),
            rest.into_pyobject(py)?.to_owned().into_any(),
        ],
        Plan::Combined {
            replicas,
            axis,
            rest,
        } => vec![
            "combined".into_pyobject(py)?.into_any(),
            replicas.clone().into_pyobject(py)?.into_any(),
            axis.into_pyobject(py)?.into_any(),
            rest.into_pyobject(py)?.to_owned().into_any(),
        ],
    };
    PyTuple::new(py, items)
}

fn candidate_tuple<'py>(
    py: Python<'py>,
    c: &Candidate,
    saved: Option<f64>,
) -> PyResult<Bound<'py, PyTuple>> {
    let parts = c
        .parts
        .iter()
        .map(|(src, sel)| Ok((*src, Py::new(py, PySelection { inner: sel.clone() })?)))
        .collect::<PyResult<Vec<_>>>()?;
    let mut items: Vec<Bound<'py, PyAny>> = vec![
        plan_tuple(py, &c.plan)?.into_any(),
        c.seconds.into_pyobject(py)?.into_any(),
        parts.into_pyobject(py)?.into_any(),
    ];
    if let Some(s) = saved {
        items.push(s.into_pyobject(py)?.into_any());
    }
    PyTuple::new(py, items)
}

/// The decision for one array: the original's layout, the replicas (each a
/// `StoredLayout` and what it holds), the storage model and eq 3.1's constants
/// `(t_pg, t_chk, t_lat, t_dec)`.
#[pyclass(module = "patio._native", name = "LayoutDecider")]
pub struct PyDecider {
    inner: Decider,
}

#[pymethods]
impl PyDecider {
    #[new]
    fn new(
        original: &PyLayout,
        replicas: Vec<(PyRef<'_, PyLayout>, Bound<'_, PyAny>)>,
        model: &PyStorageModel,
        consts: (f64, f64, f64, f64),
    ) -> PyResult<Self> {
        let reps = replicas
            .iter()
            .map(|(l, h)| {
                Ok(Replica {
                    layout: l.inner.clone(),
                    holds: holds_of(h)?,
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let c = Constants {
            t_pg: consts.0,
            t_chk: consts.1,
            t_lat: consts.2,
            t_dec: consts.3,
        };
        let inner =
            Decider::new(original.inner.clone(), reps, model.striping().clone(), c).map_err(err)?;
        Ok(PyDecider { inner })
    }

    /// Every eligible candidate, the original first: `(plan, seconds, parts)`, `plan` a
    /// tuple (`("original",)`, `("whole", i)`, `("sub", i)`, `("split", i, axis)`,
    /// `("points", i, rest)`, `("combined", [i, ...], axis, rest)`), `parts` the
    /// `(replica index or None, LayoutSelection)` priced.
    fn candidates<'py>(
        &self,
        py: Python<'py>,
        sel: &PySelection,
    ) -> PyResult<Vec<Bound<'py, PyTuple>>> {
        let cands = py
            .allow_threads(|| self.inner.candidates(&sel.inner))
            .map_err(err)?;
        cands.iter().map(|c| candidate_tuple(py, c, None)).collect()
    }

    /// Forgets the remembered decisions (to time a decision made anew).
    fn forget(&mut self) {
        self.inner.forget();
    }

    /// The cheapest candidate (the original on ties) as `(plan, seconds, parts, saved)`;
    /// remembered per selection (candidates that provably cost more than the cheapest
    /// are not priced in full).
    fn choose<'py>(&mut self, py: Python<'py>, sel: &PySelection) -> PyResult<Bound<'py, PyTuple>> {
        let inner = &mut self.inner;
        let (c, saved) = py.allow_threads(|| inner.choose(&sel.inner)).map_err(err)?;
        candidate_tuple(py, &c, Some(saved))
    }
}
