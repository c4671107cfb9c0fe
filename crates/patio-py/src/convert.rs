//! Conversions at the Python boundary: NumPy arrays and Python sequences in, NumPy
//! arrays out, patio-core errors to Python exceptions, and the guards that keep
//! untrusted input from panicking or aborting the interpreter.
//!
//! Input columns accept a one-dimensional NumPy array or any iterable of Python ints
//! (floats for time columns). Integer arrays of any width are converted: narrower
//! dtypes are widened, and a value the target type cannot hold (a negative offset, a
//! `uint64` above 2^63-1 where `int64` is needed) is an `OverflowError` naming its
//! index. Arrays of any other dtype (float, bool, str, …) are a `TypeError`: silently
//! truncating 1.5 to 1 would hide a bug in the caller.

use numpy::{PyArray1, PyArrayDescrMethods, PyArrayMethods, PyUntypedArray, PyUntypedArrayMethods};
use patio_core::CoreError;
use pyo3::exceptions::{PyMemoryError, PyOSError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;

/// A patio-core error as a Python exception: I/O failures become `OSError` (the
/// errno-specific subclass, with the file name), everything else `ValueError` with the
/// core's message.
pub(crate) fn core_err(e: CoreError) -> PyErr {
    match e {
        CoreError::Io { path, error } => os_error(&path, &error),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// `OSError(errno, strerror, filename)`, which Python turns into `FileNotFoundError`,
/// `PermissionError`, … by errno.
pub(crate) fn os_error(path: &str, e: &std::io::Error) -> PyErr {
    match e.raw_os_error() {
        Some(code) => {
            let text = e.to_string();
            let suffix = format!(" (os error {code})");
            let strerror = text.strip_suffix(&suffix).unwrap_or(&text).to_string();
            PyOSError::new_err((code, strerror, path.to_string()))
        }
        None => PyOSError::new_err(format!("{path}: {e}")),
    }
}

/// Validates a detector search window.
pub(crate) fn detector(window: usize) -> PyResult<patio_core::Detector> {
    if window == 0 {
        return Err(PyValueError::new_err("window must be at least 1"));
    }
    Ok(patio_core::Detector::new(window))
}

/// An empty vector with room for `n` elements, or `MemoryError` when that much memory
/// cannot be had. Used before every expansion: a decoded pattern can describe far more
/// elements than fit in memory, and a failed allocation would abort the process.
pub(crate) fn reserve<T>(n: u64, what: &str) -> PyResult<Vec<T>> {
    let limit = isize::MAX as u64 / std::mem::size_of::<T>().max(1) as u64;
    let mut v = Vec::new();
    if n <= limit && v.try_reserve_exact(n as usize).is_ok() {
        Ok(v)
    } else {
        Err(PyMemoryError::new_err(format!(
            "{what}: {n} elements do not fit in memory"
        )))
    }
}

/// Python index (negative counts from the end) into a sequence of `len` elements.
pub(crate) fn index(len: u64, i: &Bound<'_, PyAny>) -> PyResult<u64> {
    let i: i128 = match i.extract() {
        Ok(i) => i,
        Err(e) if e.is_instance_of::<PyOverflowError>(i.py()) => {
            return Err(pyo3::exceptions::PyIndexError::new_err(
                "index out of range",
            ))
        }
        Err(_) => {
            return Err(PyTypeError::new_err(format!(
                "indices must be integers, not {}",
                type_name(i)
            )))
        }
    };
    let j = if i < 0 { i + len as i128 } else { i };
    if (0..len as i128).contains(&j) {
        Ok(j as u64)
    } else {
        Err(pyo3::exceptions::PyIndexError::new_err(
            "index out of range",
        ))
    }
}

pub(crate) fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "object".into())
}

/// Element types an integer column can be converted to.
pub(crate) trait IntElement: Copy + numpy::Element + for<'py> FromPyObject<'py> {
    const DTYPE: &'static str;
    fn from_i64(v: i64) -> Option<Self>;
    fn from_u64(v: u64) -> Option<Self>;
}

impl IntElement for i64 {
    const DTYPE: &'static str = "int64";
    fn from_i64(v: i64) -> Option<Self> {
        Some(v)
    }
    fn from_u64(v: u64) -> Option<Self> {
        i64::try_from(v).ok()
    }
}

impl IntElement for u64 {
    const DTYPE: &'static str = "uint64";
    fn from_i64(v: i64) -> Option<Self> {
        u64::try_from(v).ok()
    }
    fn from_u64(v: u64) -> Option<Self> {
        Some(v)
    }
}

fn overflow(what: &str, i: usize, v: impl std::fmt::Display, dtype: &str) -> PyErr {
    PyOverflowError::new_err(format!("{what}[{i}] = {v} does not fit in {dtype}"))
}

/// `numpy.ascontiguousarray(arr, dtype=dtype)` as a typed 1-D array.
fn contiguous<'py, T: numpy::Element>(
    arr: &Bound<'py, PyUntypedArray>,
    dtype: &str,
) -> PyResult<Bound<'py, PyArray1<T>>> {
    let np = arr.py().import("numpy")?;
    let out = np.call_method1("ascontiguousarray", (arr, np.getattr(dtype)?))?;
    Ok(out.downcast_into::<PyArray1<T>>()?)
}

/// The array behind `obj` if it is a NumPy array whose elements are not Python
/// objects; checks it is one-dimensional.
fn plain_array<'a, 'py>(
    obj: &'a Bound<'py, PyAny>,
    what: &str,
) -> PyResult<Option<&'a Bound<'py, PyUntypedArray>>> {
    let Ok(arr) = obj.downcast::<PyUntypedArray>() else {
        return Ok(None);
    };
    if arr.dtype().kind() == b'O' {
        return Ok(None);
    }
    if arr.ndim() != 1 {
        return Err(PyValueError::new_err(format!(
            "{what} must be one-dimensional, got an array of shape {:?}",
            arr.shape()
        )));
    }
    Ok(Some(arr))
}

/// An integer column from a NumPy array (any integer dtype) or an iterable of ints.
pub(crate) fn int_column<T: IntElement>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<T>> {
    if let Some(arr) = plain_array(obj, what)? {
        let dtype = arr.dtype();
        return match dtype.kind() {
            b'u' if dtype.itemsize() == 8 => {
                let a = contiguous::<u64>(arr, "uint64")?;
                let ro = a.readonly();
                let s = ro.as_slice()?;
                s.iter()
                    .enumerate()
                    .map(|(i, &v)| T::from_u64(v).ok_or_else(|| overflow(what, i, v, T::DTYPE)))
                    .collect()
            }
            b'i' | b'u' => {
                let a = contiguous::<i64>(arr, "int64")?;
                let ro = a.readonly();
                let s = ro.as_slice()?;
                s.iter()
                    .enumerate()
                    .map(|(i, &v)| T::from_i64(v).ok_or_else(|| overflow(what, i, v, T::DTYPE)))
                    .collect()
            }
            _ => Err(PyTypeError::new_err(format!(
                "{what} must hold integers, got a numpy array of dtype {dtype}"
            ))),
        };
    }
    let iter = obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a numpy integer array or a sequence of ints, not {}",
            type_name(obj)
        ))
    })?;
    let mut out = Vec::with_capacity(obj.len().unwrap_or(0));
    for (i, item) in iter.enumerate() {
        let item = item?;
        match item.extract::<T>() {
            Ok(v) => out.push(v),
            Err(e) if e.is_instance_of::<PyOverflowError>(obj.py()) => {
                return Err(overflow(what, i, &item, T::DTYPE))
            }
            Err(_) => {
                return Err(PyTypeError::new_err(format!(
                    "{what}[{i}] must be an int, not {}",
                    type_name(&item)
                )))
            }
        }
    }
    Ok(out)
}

/// A float column (seconds) from a NumPy array of a numeric dtype or an iterable of
/// numbers.
pub(crate) fn f64_column(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<f64>> {
    if let Some(arr) = plain_array(obj, what)? {
        let dtype = arr.dtype();
        if !matches!(dtype.kind(), b'f' | b'i' | b'u') {
            return Err(PyTypeError::new_err(format!(
                "{what} must hold numbers, got a numpy array of dtype {dtype}"
            )));
        }
        let a = contiguous::<f64>(arr, "float64")?;
        let ro = a.readonly();
        return Ok(ro.as_slice()?.to_vec());
    }
    let iter = obj.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "{what} must be a numpy array or a sequence of numbers, not {}",
            type_name(obj)
        ))
    })?;
    let mut out = Vec::with_capacity(obj.len().unwrap_or(0));
    for (i, item) in iter.enumerate() {
        let item = item?;
        out.push(item.extract::<f64>().map_err(|_| {
            PyTypeError::new_err(format!(
                "{what}[{i}] must be a number, not {}",
                type_name(&item)
            ))
        })?);
    }
    Ok(out)
}

/// Fails unless all columns have the length of the first.
pub(crate) fn same_length(columns: &[(&str, usize)]) -> PyResult<()> {
    if let Some(&(first, n)) = columns.first() {
        if let Some(&(other, m)) = columns.iter().find(|(_, m)| *m != n) {
            return Err(PyValueError::new_err(format!(
                "columns differ in length: {first} has {n} elements, {other} has {m}"
            )));
        }
    }
    Ok(())
}
