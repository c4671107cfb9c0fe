//! Trace files for Python: `read_trace` (patio trace CSV or the native `.ptrace`
//! format), `write_trace_csv` and `write_trace_native`.
//!
//! A stream is exchanged as a dict `{module, file, rank, op, offset, length, start,
//! end}`: `op` is "read" or "write", `offset`/`length` are uint64 arrays (bytes),
//! `start`/`end` float64 arrays (seconds). The writers also take any object with those
//! attributes, so the `patio.dxt.Stream`s that `read_dxt` returns can be written as
//! they are. Streams with the same key are merged and records ordered by start time,
//! exactly as patio-core's trace model does.

use crate::convert::{core_err, detector, f64_column, int_column, os_error, same_length};
use numpy::PyArray1;
use patio_core::trace::{Op, Stream, StreamKey, Trace};
use pyo3::exceptions::{PyOSError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyMapping};
use std::path::{Path, PathBuf};

fn stream_dict<'py>(py: Python<'py>, s: &Stream) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("module", &s.key.module)?;
    d.set_item("file", &s.key.file)?;
    d.set_item("rank", s.key.rank)?;
    d.set_item("op", s.key.op.as_str())?;
    d.set_item("offset", PyArray1::from_slice(py, &s.offsets))?;
    d.set_item("length", PyArray1::from_slice(py, &s.lengths))?;
    d.set_item("start", PyArray1::from_slice(py, &s.starts))?;
    d.set_item("end", PyArray1::from_slice(py, &s.ends))?;
    Ok(d)
}

/// Reads a trace file. The format is `format` ("csv" or "native") or, when `None`,
/// CSV for a `.csv` suffix and native otherwise. Returns `(streams, damage)`: the
/// streams as dicts, sorted by key, and `None` — or, for a native trace with a torn or
/// corrupt tail, a message saying what was dropped (everything before it is returned).
/// Unreadable files raise `OSError`, malformed ones `ValueError`.
#[pyfunction]
#[pyo3(signature = (path, format = None))]
pub fn read_trace<'py>(
    py: Python<'py>,
    path: PathBuf,
    format: Option<&str>,
) -> PyResult<(Bound<'py, PyList>, Option<String>)> {
    let native = match format {
        Some("csv") => false,
        Some("native") => true,
        Some(other) => {
            return Err(PyValueError::new_err(format!(
                "format must be \"csv\", \"native\" or None, not {other:?}"
            )))
        }
        None => !path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("csv")),
    };
    let (trace, damage) = py
        .allow_threads(|| {
            if native {
                Trace::read_native(&path).map(|r| (r.trace, r.damage))
            } else {
                Trace::read_csv(&path).map(|t| (t, None))
            }
        })
        .map_err(|e| match e {
            patio_core::CoreError::Corrupt { .. } => {
                PyValueError::new_err(format!("{}: {e}", path.display()))
            }
            other => core_err(other),
        })?;
    let list = PyList::empty(py);
    for s in &trace.streams {
        list.append(stream_dict(py, s)?)?;
    }
    Ok((list, damage))
}

/// Streams from a list of dicts (or objects with the same attributes).
fn streams_from_py(streams: &Bound<'_, PyAny>) -> PyResult<Trace> {
    if streams.downcast::<PyMapping>().is_ok() || streams.is_instance_of::<pyo3::types::PyString>()
    {
        return Err(PyTypeError::new_err(
            "streams must be a list of stream dicts, not a single mapping or string",
        ));
    }
    let items = streams.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "streams must be a list of stream dicts, not {}",
            crate::convert::type_name(streams)
        ))
    })?;
    let mut out = Vec::new();
    for (i, item) in items.enumerate() {
        let item = item?;
        let mapping = item.downcast::<PyMapping>().ok();
        let field = |name: &str| -> PyResult<Bound<'_, PyAny>> {
            let got = match mapping {
                Some(m) => m.get_item(name),
                None => item.getattr(name),
            };
            got.map_err(|_| PyValueError::new_err(format!("streams[{i}] has no field {name:?}")))
        };
        let at = |what: &str| format!("streams[{i}].{what}");
        let text = |name: &str| -> PyResult<String> {
            field(name)?
                .extract()
                .map_err(|_| PyTypeError::new_err(format!("{} must be a str", at(name))))
        };
        let (module, file, op) = (text("module")?, text("file")?, text("op")?);
        let op = Op::parse(&op).ok_or_else(|| {
            PyValueError::new_err(format!(
                "{} must be \"read\" or \"write\", not {op:?}",
                at("op")
            ))
        })?;
        let rank: i64 = field("rank")?
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("{} must be an int64", at("rank"))))?;
        let offsets: Vec<u64> = int_column(&field("offset")?, &at("offset"))?;
        let lengths: Vec<u64> = int_column(&field("length")?, &at("length"))?;
        let starts = f64_column(&field("start")?, &at("start"))?;
        let ends = f64_column(&field("end")?, &at("end"))?;
        same_length(&[
            (&at("offset"), offsets.len()),
            (&at("length"), lengths.len()),
            (&at("start"), starts.len()),
            (&at("end"), ends.len()),
        ])?;
        if let Some(j) = (0..offsets.len()).find(|&j| offsets[j].checked_add(lengths[j]).is_none())
        {
            return Err(PyValueError::new_err(format!(
                "streams[{i}]: request {j} ends beyond 2^64 (offset {}, length {})",
                offsets[j], lengths[j]
            )));
        }
        if let Some(j) = (0..starts.len()).find(|&j| !starts[j].is_finite() || !ends[j].is_finite())
        {
            return Err(PyValueError::new_err(format!(
                "streams[{i}]: request {j} has a non-finite time (start {}, end {})",
                starts[j], ends[j]
            )));
        }
        out.push(Stream {
            key: StreamKey {
                module,
                file,
                rank,
                op,
            },
            offsets,
            lengths,
            starts,
            ends,
        });
    }
    Ok(Trace::from_streams(out))
}

fn write_file(path: &Path, bytes: &[u8]) -> PyResult<()> {
    std::fs::write(path, bytes).map_err(|e| os_error(&path.display().to_string(), &e))
}

/// Writes streams (dicts or `patio.dxt.Stream`-like objects) as a patio trace CSV.
#[pyfunction]
pub fn write_trace_csv(py: Python<'_>, streams: &Bound<'_, PyAny>, path: PathBuf) -> PyResult<()> {
    let trace = streams_from_py(streams)?;
    let mut buf = Vec::new();
    py.allow_threads(|| trace.write_csv(&mut buf))
        .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?;
    py.allow_threads(|| write_file(&path, &buf))
}

/// Writes streams (dicts or `patio.dxt.Stream`-like objects) in the native pattern
/// encoded trace format; `window` is the detector's search window.
#[pyfunction]
#[pyo3(signature = (streams, path, window = 32))]
pub fn write_trace_native(
    py: Python<'_>,
    streams: &Bound<'_, PyAny>,
    path: PathBuf,
    window: usize,
) -> PyResult<()> {
    let trace = streams_from_py(streams)?;
    let det = detector(window)?;
    let bytes = py
        .allow_threads(|| trace.encode_native(&det))
        .map_err(core_err)?;
    py.allow_threads(|| write_file(&path, &bytes))
}
