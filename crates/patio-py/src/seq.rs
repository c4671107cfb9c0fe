//! Pattern units, detected sequences and stream analysis for Python: `PatternUnit`,
//! `PatternSeq` (what `detect` returns), `detect` and `analyze_stream`.
//!
//! Element-count convention (patio-core's): a unit `[init, (d0 … dk-1)^r]` holds
//! `1 + k·r` values. Every query works on the compressed form; only `expand()` and
//! `to_numpy()` materialise values, and they refuse (with `MemoryError`) sequences
//! that cannot fit in memory rather than aborting the interpreter.

use crate::convert::{core_err, detector, index, int_column, reserve, same_length};
use numpy::PyArray1;
use patio_core::analysis::analyze_stream as core_analyze;
use patio_core::seqcodec::{decode_seq, encode_seq};
use patio_core::{PatternSeq as CoreSeq, PatternUnit as CoreUnit, Piece};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

/// Out-of-range units are refused before patio-core sees them: `PatternUnit::new`
/// computes `(r-1)·stride` in `i128`, which can overflow for absurd inputs.
fn check_unit(init: i64, deltas: &[i64], reps: u64) -> PyResult<()> {
    if deltas.is_empty() || reps == 0 {
        return Ok(());
    }
    let too_long = || PyValueError::new_err("pattern unit holds more than 2^64-1 values");
    (deltas.len() as u64)
        .checked_mul(reps)
        .and_then(|n| n.checked_add(1))
        .ok_or_else(too_long)?;
    let stride: i128 = deltas.iter().map(|&d| d as i128).sum();
    // The first value of the last repetition is an element, so it must fit in i64;
    // once it does, every intermediate patio-core computes fits in i128.
    let fits = stride
        .checked_mul(reps as i128 - 1)
        .and_then(|o| o.checked_add(init as i128))
        .is_some_and(|v| i64::try_from(v).is_ok());
    if fits {
        Ok(())
    } else {
        Err(PyValueError::new_err(format!(
            "invalid input: pattern unit [{init}, {deltas:?}^{reps}] leaves the 64-bit range"
        )))
    }
}

/// `[init, (d0, …, dk-1)^reps]`: a first value and a delta vector repeated `reps`
/// times, holding `1 + k·reps` values (`reps == 0` or no deltas: one value).
#[pyclass(module = "patio._native", name = "PatternUnit", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PyPatternUnit {
    inner: CoreUnit,
}

#[pymethods]
impl PyPatternUnit {
    #[new]
    #[pyo3(signature = (init, deltas, reps))]
    fn new(init: i64, deltas: &Bound<'_, PyAny>, reps: u64) -> PyResult<Self> {
        let deltas: Vec<i64> = int_column(deltas, "deltas")?;
        check_unit(init, &deltas, reps)?;
        let inner = CoreUnit::new(init, deltas, reps).map_err(core_err)?;
        Ok(PyPatternUnit { inner })
    }

    #[getter]
    fn init(&self) -> i64 {
        self.inner.init()
    }

    #[getter]
    fn deltas(&self) -> Vec<i64> {
        self.inner.deltas().to_vec()
    }

    #[getter]
    fn reps(&self) -> u64 {
        self.inner.reps()
    }

    /// The last value.
    #[getter]
    fn last(&self) -> i64 {
        self.inner.last()
    }

    fn __len__(&self) -> usize {
        // Python's len() is limited to sys.maxsize; larger units raise OverflowError there.
        usize::try_from(self.inner.len()).unwrap_or(usize::MAX)
    }

    fn __getitem__(&self, i: &Bound<'_, PyAny>) -> PyResult<i64> {
        let i = index(self.inner.len(), i)?;
        Ok(self.inner.get(i).expect("index checked"))
    }

    /// Index of the largest value `<= x`, or `None` when `x` is below the first value.
    /// Only for non-decreasing units (no negative delta); `ValueError` otherwise.
    fn position_at_or_below(&self, x: i64) -> PyResult<Option<u64>> {
        if !self.inner.shape().is_non_decreasing() {
            return Err(PyValueError::new_err(format!(
                "position_at_or_below needs a non-decreasing unit, {} has a negative delta",
                self.inner
            )));
        }
        Ok(self.inner.position_at_or_below(x))
    }

    /// The `n` values that would follow if the pattern kept repeating (fewer when the
    /// next value would leave the int64 range; none for a single-value unit).
    fn predict_next(&self, n: usize) -> PyResult<Vec<i64>> {
        if !self.inner.deltas().is_empty() {
            reserve::<i64>(n as u64, "predict_next")?;
        }
        Ok(self.inner.predict_next(n))
    }

    /// All values as an int64 array.
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let mut out = reserve::<i64>(self.inner.len(), "to_numpy")?;
        out.extend(self.inner.iter());
        Ok(PyArray1::from_vec(py, out))
    }

    fn __repr__(&self) -> String {
        self.inner.to_string()
    }
}

impl PyPatternUnit {
    pub(crate) fn from_core(inner: CoreUnit) -> Self {
        PyPatternUnit { inner }
    }
}

/// True when the sequence never decreases, checked on the pieces (no expansion).
fn non_decreasing(seq: &CoreSeq) -> bool {
    let mut prev: Option<i64> = None;
    for p in seq.pieces() {
        let ok = match p {
            Piece::Node(n) => n.body.is_non_decreasing(),
            Piece::Literal(v) => v.windows(2).all(|w| w[0] <= w[1]),
        };
        if !ok || prev.is_some_and(|x| x > p.first()) {
            return false;
        }
        prev = Some(p.last());
    }
    true
}

/// A whole sequence in compressed form: ordered pattern nodes and literal runs, queried
/// without expansion. Returned by `detect()` and `PatternSeq.decode()`.
#[pyclass(module = "patio._native", name = "PatternSeq", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyPatternSeq {
    inner: CoreSeq,
    /// Whether the values never decrease (decided once, at construction).
    sorted: bool,
}

impl PyPatternSeq {
    /// Wraps a sequence, deciding once whether it is sorted.
    fn new(inner: CoreSeq) -> PyResult<Self> {
        let sorted = non_decreasing(&inner);
        Ok(PyPatternSeq { inner, sorted })
    }
}

#[pymethods]
impl PyPatternSeq {
    fn __len__(&self) -> usize {
        usize::try_from(self.inner.len()).unwrap_or(usize::MAX)
    }

    fn __getitem__(&self, i: &Bound<'_, PyAny>) -> PyResult<i64> {
        let i = index(self.inner.len(), i)?;
        Ok(self.inner.get(i).expect("index checked"))
    }

    /// True when the values never decrease (so `position_at_or_below` is allowed).
    #[getter]
    fn is_sorted(&self) -> bool {
        self.sorted
    }

    /// Index of the largest value `<= x` (the last of equal values), or `None` when
    /// every value is above `x`. Only for non-decreasing sequences; `ValueError`
    /// otherwise.
    fn position_at_or_below(&self, x: i64) -> PyResult<Option<u64>> {
        if !self.sorted {
            return Err(PyValueError::new_err(
                "position_at_or_below needs a non-decreasing sequence",
            ));
        }
        Ok(self.inner.position_at_or_below(x))
    }

    /// The pieces in unit notation (`"[0, (3, 4, 7)^3]"`, nested
    /// `"[0, (100)^49 × (8)^3]"`, literal runs as `"1, 5, 9"` or `"<12 literals>"`).
    fn pieces(&self) -> Vec<String> {
        self.inner.pieces().iter().map(|p| p.to_string()).collect()
    }

    /// The pieces that are plain (non-nested) pattern units.
    fn units(&self) -> Vec<PyPatternUnit> {
        self.inner
            .pieces()
            .iter()
            .filter_map(|p| match p {
                Piece::Node(n) => n.as_unit().map(PyPatternUnit::from_core),
                Piece::Literal(_) => None,
            })
            .collect()
    }

    /// Share of values covered by patterns rather than literal runs (1.0 when empty).
    #[getter]
    fn coverage(&self) -> f64 {
        self.inner.coverage()
    }

    /// All values as an int64 array.
    fn expand<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let mut out = reserve::<i64>(self.inner.len(), "expand")?;
        py.allow_threads(|| {
            for p in self.inner.pieces() {
                match p {
                    Piece::Node(n) => out.extend((0..n.len()).map(|i| n.get(i))),
                    Piece::Literal(v) => out.extend_from_slice(v),
                }
            }
        });
        Ok(PyArray1::from_vec(py, out))
    }

    /// The pattern encoding (docs/FORMATS.md, "Pattern sequence encoding").
    fn encode<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &encode_seq(&self.inner))
    }

    /// Decodes bytes written by `encode()`; `ValueError` naming the byte offset on
    /// corrupt or truncated input.
    #[staticmethod]
    fn decode(data: &[u8]) -> PyResult<Self> {
        let seq = guard_decode(|| decode_seq(data))?;
        Self::new(seq)
    }

    fn __repr__(&self) -> String {
        format!(
            "PatternSeq(len={}, pieces={}: {})",
            self.inner.len(),
            self.inner.pieces().len(),
            patio_core::analysis::signature(&self.inner)
        )
    }
}

/// Runs a patio-core decoder, turning its errors into `ValueError` and — as a last line
/// of defence for crafted input — a panic inside it into `ValueError` too.
pub(crate) fn guard_decode<T>(f: impl FnOnce() -> patio_core::Result<T>) -> PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(core_err),
        Err(_) => Err(PyValueError::new_err(
            "corrupt data: the decoder failed on this input (a patio-core bug; please report it)",
        )),
    }
}

/// Splits `values` (a numpy integer array or a sequence of ints) into pattern units and
/// literal runs with the sliding-window detector (search window `window` deltas) and
/// nests them into a pattern tree.
#[pyfunction]
#[pyo3(signature = (values, window = 32))]
pub fn detect(py: Python<'_>, values: &Bound<'_, PyAny>, window: usize) -> PyResult<PyPatternSeq> {
    let xs: Vec<i64> = int_column(values, "values")?;
    let det = detector(window)?;
    let seq = py.allow_threads(|| CoreSeq::build(&xs, &det));
    PyPatternSeq::new(seq)
}

/// Analyses one request stream: a dict with `requests`, `kind` ("contiguous",
/// "strided", "kd-strided", "repeating deltas" or "irregular"), `signature` and
/// `length_signature` (unit notation), `coverage` (share of requests in patterns) and
/// `segments` (`(start, end, kind)` index ranges, kind "literal" for runs that did not
/// compress — the shape `patio.plot` draws).
#[pyfunction]
#[pyo3(signature = (offsets, lengths, window = 32))]
pub fn analyze_stream<'py>(
    py: Python<'py>,
    offsets: &Bound<'py, PyAny>,
    lengths: &Bound<'py, PyAny>,
    window: usize,
) -> PyResult<Bound<'py, PyDict>> {
    let offsets: Vec<u64> = int_column(offsets, "offsets")?;
    let lengths: Vec<u64> = int_column(lengths, "lengths")?;
    same_length(&[("offsets", offsets.len()), ("lengths", lengths.len())])?;
    let det = detector(window)?;
    let a = py.allow_threads(|| core_analyze(&offsets, &lengths, &det));
    let d = PyDict::new(py);
    d.set_item("requests", a.requests)?;
    d.set_item("kind", a.kind.as_str())?;
    d.set_item("signature", &a.signature)?;
    d.set_item("length_signature", &a.length_signature)?;
    d.set_item("coverage", a.coverage)?;
    let segments: Vec<(u64, u64, &str)> = a
        .segments
        .iter()
        .map(|s| (s.start, s.end, s.kind.map_or("literal", |k| k.as_str())))
        .collect();
    d.set_item("segments", segments)?;
    Ok(d)
}
