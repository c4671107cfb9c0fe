//! `file_version(path)`: the core's one file-version rule (`patio_core::FileVersion`)
//! for Python, so layout replicas decide "has the source changed?" exactly as the
//! segment cache and reorganization plans do.

use pyo3::exceptions::PyOSError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// `{dev, ino, size, mtime_ns, ctime_ns}` of the regular file at `path`; `OSError`
/// when it cannot be read or is not a regular file.
#[pyfunction]
pub fn file_version(py: Python<'_>, path: PathBuf) -> PyResult<Py<PyDict>> {
    let v = patio_core::FileVersion::of(&path)
        .map_err(|e| PyOSError::new_err(format!("{}: {e}", path.display())))?;
    let d = PyDict::new(py);
    d.set_item("dev", v.dev)?;
    d.set_item("ino", v.ino)?;
    d.set_item("size", v.size)?;
    d.set_item("mtime_ns", v.mtime_ns)?;
    d.set_item("ctime_ns", v.ctime_ns)?;
    Ok(d.unbind())
}
