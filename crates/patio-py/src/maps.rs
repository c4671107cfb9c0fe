//! Logical→physical maps for Python: `PatternMap` (pattern entries, looked up without
//! expansion) and `ExtentTable` (the sorted-extent baseline), with one interface.
//!
//! Both are built from four equal-length columns `logical, length, physical, chunk`
//! in write order (later extents win where they overlap). A lookup answers
//! `("data", chunk, physical, length)` — `length` contiguous bytes from `physical` in
//! `chunk` —, `("hole", length)` — `length` unmapped bytes before the next data, never
//! end-of-file — or `("unmapped",)` — nothing mapped at or after the offset.
//! `lookup_many` answers a whole array at once with the GIL released, as columns
//! `kind` (uint8: 0 data, 1 hole, 2 unmapped), `chunk`, `physical`, `length` (hole
//! length for holes; zeros where a column does not apply).

use crate::convert::{core_err, detector, int_column, reserve, same_length};
use crate::seq::guard_decode;
use numpy::PyArray1;
use patio_core::{Extent, ExtentTable as CoreTable, Lookup, PatternMap as CoreMap};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

/// `kind` code of a data answer in `lookup_many`.
pub const LOOKUP_DATA: u8 = 0;
/// `kind` code of a hole answer in `lookup_many`.
pub const LOOKUP_HOLE: u8 = 1;
/// `kind` code of an unmapped answer in `lookup_many`.
pub const LOOKUP_UNMAPPED: u8 = 2;

/// Extents from four columns. Refuses ranges whose (exclusive) end does not fit in a
/// u64, logically or physically (patio-core adds `physical + length` unchecked when it splits extents).
fn extents_from_columns(
    logical: &Bound<'_, PyAny>,
    length: &Bound<'_, PyAny>,
    physical: &Bound<'_, PyAny>,
    chunk: &Bound<'_, PyAny>,
) -> PyResult<Vec<Extent>> {
    let logical: Vec<u64> = int_column(logical, "logical")?;
    let length: Vec<u64> = int_column(length, "length")?;
    let physical: Vec<u64> = int_column(physical, "physical")?;
    let chunk: Vec<u64> = int_column(chunk, "chunk")?;
    same_length(&[
        ("logical", logical.len()),
        ("length", length.len()),
        ("physical", physical.len()),
        ("chunk", chunk.len()),
    ])?;
    let mut out = Vec::with_capacity(logical.len());
    for i in 0..logical.len() {
        let e = Extent::new(logical[i], length[i], physical[i], chunk[i]);
        for (what, start) in [("logical", e.logical), ("physical", e.physical)] {
            if start.checked_add(e.length).is_none() {
                return Err(PyValueError::new_err(format!(
                    "invalid input: extent {i} ({what} offset {start}, length {}) does not end below 2^64",
                    e.length
                )));
            }
        }
        out.push(e);
    }
    Ok(out)
}

fn lookup_tuple(py: Python<'_>, l: Lookup) -> PyResult<Bound<'_, PyTuple>> {
    match l {
        Lookup::Data {
            chunk,
            physical,
            len,
        } => ("data", chunk, physical, len).into_pyobject(py),
        Lookup::Hole { len } => ("hole", len).into_pyobject(py),
        Lookup::Unmapped => ("unmapped",).into_pyobject(py),
    }
}

/// Columns of many lookups, computed without the GIL.
fn lookup_columns<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    lookup: &(dyn Fn(u64) -> Lookup + Sync),
) -> PyResult<Bound<'py, PyDict>> {
    let xs: Vec<u64> = int_column(offsets, "offsets")?;
    let n = xs.len();
    let (kind, chunk, physical, length) = py.allow_threads(|| {
        let mut kind = Vec::with_capacity(n);
        let (mut chunk, mut physical, mut length) = (vec![0u64; n], vec![0u64; n], vec![0u64; n]);
        for (i, &x) in xs.iter().enumerate() {
            match lookup(x) {
                Lookup::Data {
                    chunk: c,
                    physical: p,
                    len,
                } => {
                    kind.push(LOOKUP_DATA);
                    (chunk[i], physical[i], length[i]) = (c, p, len);
                }
                Lookup::Hole { len } => {
                    kind.push(LOOKUP_HOLE);
                    length[i] = len;
                }
                Lookup::Unmapped => kind.push(LOOKUP_UNMAPPED),
            }
        }
        (kind, chunk, physical, length)
    });
    let d = PyDict::new(py);
    d.set_item("kind", PyArray1::from_vec(py, kind))?;
    d.set_item("chunk", PyArray1::from_vec(py, chunk))?;
    d.set_item("physical", PyArray1::from_vec(py, physical))?;
    d.set_item("length", PyArray1::from_vec(py, length))?;
    Ok(d)
}

type Columns<'py> = (
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u64>>,
);

/// `(logical, length, physical, chunk)` uint64 arrays of `count` extents.
fn extent_columns<'py, I: Iterator<Item = Extent>>(
    py: Python<'py>,
    count: u64,
    extents: impl FnOnce() -> I + Send,
) -> PyResult<Columns<'py>> {
    let mut cols: [Vec<u64>; 4] = [
        reserve(count, "extents")?,
        reserve(count, "extents")?,
        reserve(count, "extents")?,
        reserve(count, "extents")?,
    ];
    py.allow_threads(|| {
        for e in extents() {
            for (col, v) in cols
                .iter_mut()
                .zip([e.logical, e.length, e.physical, e.chunk])
            {
                col.push(v);
            }
        }
    });
    let [l, n, p, c] = cols;
    Ok((
        PyArray1::from_vec(py, l),
        PyArray1::from_vec(py, n),
        PyArray1::from_vec(py, p),
        PyArray1::from_vec(py, c),
    ))
}

/// A logical→physical map stored as pattern entries (pattern PLFS's global index).
#[pyclass(module = "patio._native", name = "PatternMap", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyPatternMap {
    inner: CoreMap,
}

#[pymethods]
impl PyPatternMap {
    /// Builds the map from four equal-length uint64 columns in write order (later
    /// extents win on overlap). Logical ends must stay below 2^63.
    #[staticmethod]
    #[pyo3(signature = (logical, length, physical, chunk, window = 32))]
    fn build(
        py: Python<'_>,
        logical: &Bound<'_, PyAny>,
        length: &Bound<'_, PyAny>,
        physical: &Bound<'_, PyAny>,
        chunk: &Bound<'_, PyAny>,
        window: usize,
    ) -> PyResult<Self> {
        let extents = extents_from_columns(logical, length, physical, chunk)?;
        let det = detector(window)?;
        let inner = py
            .allow_threads(|| CoreMap::build(&extents, &det))
            .map_err(core_err)?;
        Ok(PyPatternMap { inner })
    }

    /// What is at logical offset `offset`: `("data", chunk, physical, length)`,
    /// `("hole", length)` or `("unmapped",)`.
    fn lookup<'py>(&self, py: Python<'py>, offset: u64) -> PyResult<Bound<'py, PyTuple>> {
        lookup_tuple(py, self.inner.lookup(offset))
    }

    /// Lookups of a whole array of offsets: dict of `kind`, `chunk`, `physical`,
    /// `length` arrays.
    fn lookup_many<'py>(
        &self,
        py: Python<'py>,
        offsets: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        lookup_columns(py, offsets, &|x| self.inner.lookup(x))
    }

    /// One past the last mapped byte (0 for an empty map).
    #[getter]
    fn end(&self) -> u64 {
        self.inner.end()
    }

    /// The normalised extents (overlaps resolved, contiguous runs merged) as a tuple
    /// of uint64 arrays `(logical, length, physical, chunk)`.
    fn extents<'py>(&self, py: Python<'py>) -> PyResult<Columns<'py>> {
        let count = self.inner.stats().extents;
        extent_columns(py, count, || self.inner.extents())
    }

    /// `{"entries", "pattern_entries", "extents", "mem_bytes", "encoded_bytes"}`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.inner.stats();
        let d = PyDict::new(py);
        d.set_item("entries", s.entries)?;
        d.set_item("pattern_entries", s.pattern_entries)?;
        d.set_item("extents", s.extents)?;
        d.set_item("mem_bytes", s.mem_bytes)?;
        d.set_item("encoded_bytes", self.inner.encode().len())?;
        Ok(d)
    }

    /// One line per entry in unit notation.
    fn describe(&self) -> Vec<String> {
        self.inner.describe()
    }

    /// The versioned, checksummed encoding (docs/FORMATS.md, "Pattern map").
    fn encode<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.encode())
    }

    /// Decodes `encode()` output; `ValueError` naming the byte offset on corrupt input.
    #[staticmethod]
    fn decode(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let inner = py.allow_threads(|| guard_decode(|| CoreMap::decode(data)))?;
        Ok(PyPatternMap { inner })
    }

    fn __repr__(&self) -> String {
        let s = self.inner.stats();
        format!(
            "PatternMap(entries={}, pattern_entries={}, extents={}, end={})",
            s.entries,
            s.pattern_entries,
            s.extents,
            self.inner.end()
        )
    }
}

/// The sorted extent table with binary-search lookups: the baseline `PatternMap` is
/// measured against, with the same interface.
#[pyclass(module = "patio._native", name = "ExtentTable", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyExtentTable {
    inner: CoreTable,
}

#[pymethods]
impl PyExtentTable {
    /// Builds the table from four equal-length uint64 columns in write order (later
    /// extents win on overlap). `window` is accepted for symmetry with
    /// `PatternMap.build` and ignored.
    #[staticmethod]
    #[pyo3(signature = (logical, length, physical, chunk, window = 32))]
    fn build(
        py: Python<'_>,
        logical: &Bound<'_, PyAny>,
        length: &Bound<'_, PyAny>,
        physical: &Bound<'_, PyAny>,
        chunk: &Bound<'_, PyAny>,
        window: usize,
    ) -> PyResult<Self> {
        let extents = extents_from_columns(logical, length, physical, chunk)?;
        detector(window)?;
        let inner = py.allow_threads(|| CoreTable::build(&extents));
        Ok(PyExtentTable { inner })
    }

    fn lookup<'py>(&self, py: Python<'py>, offset: u64) -> PyResult<Bound<'py, PyTuple>> {
        lookup_tuple(py, self.inner.lookup(offset))
    }

    fn lookup_many<'py>(
        &self,
        py: Python<'py>,
        offsets: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        lookup_columns(py, offsets, &|x| self.inner.lookup(x))
    }

    /// Number of (normalised) extents.
    fn __len__(&self) -> usize {
        self.inner.len()
    }

    #[getter]
    fn end(&self) -> u64 {
        self.inner.extents().last().map_or(0, Extent::end)
    }

    fn extents<'py>(&self, py: Python<'py>) -> PyResult<Columns<'py>> {
        let count = self.inner.len() as u64;
        extent_columns(py, count, || self.inner.extents().iter().copied())
    }

    /// `{"extents", "mem_bytes", "encoded_bytes"}`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("extents", self.inner.len())?;
        d.set_item("mem_bytes", self.inner.mem_bytes())?;
        d.set_item("encoded_bytes", self.inner.encode().len())?;
        Ok(d)
    }

    fn encode<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.encode())
    }

    #[staticmethod]
    fn decode(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let inner = py.allow_threads(|| guard_decode(|| CoreTable::decode(data)))?;
        Ok(PyExtentTable { inner })
    }

    fn __repr__(&self) -> String {
        format!(
            "ExtentTable(extents={}, end={})",
            self.inner.len(),
            self.end()
        )
    }
}
