//! The log-structured container for Python: the native half of `patio.Container`
//! and `patio.mpi` (the classes and functions themselves are thin; argument checks,
//! modes and buffer handling live in `python/patio/container.py`).
//!
//! * [`PyContainerWriter`] — one `patio_container::Writer` (one writer name, its own
//!   data and index logs). Writes, flushes and closes release the GIL. A writer
//!   inherited by a forked child refuses to work there and is never flushed by the
//!   child (its logs belong to the parent).
//! * [`PyContainerReader`] — one `patio_container::Reader`; any number of threads may
//!   read at once, without the GIL. Built by [`open_container_reader`] (every index
//!   log read here) or [`container_reader_from_parts`] (logs read by other processes
//!   and exchanged: the MPI split load, with [`container_read_logs`]).
//! * `container_stat`, `_truncate`, `_remove`, `_check`, `_flatten`,
//!   `_list_writers`: the whole-container tools.
//!
//! Data moves without an intermediate copy: `bytes` are written from their own
//! memory; any other buffer (and every `readinto`) is passed by the address of the
//! caller's buffer, which the Python side holds exported for the whole call (the
//! extension targets the stable ABI of Python 3.9, which has no buffer protocol).
//!
//! Errors: an OS error on a container file is the errno-specific `OSError`
//! (`FileNotFoundError`, `PermissionError`, …) with errno and file name; a path that is
//! not a directory `NotADirectoryError`; a directory that is not a container, a
//! damaged marker or log, a writer that failed earlier: [`ContainerError`] (an
//! `OSError` whose message names the file; `offset` is set for damaged bytes); bad
//! arguments `ValueError`.

use crate::convert::os_error;
use patio_container::{
    layout, pack_logs, read_logs, tools, unpack_logs, ContainerStats, IndexMode, Reader, Writer,
    WriterMeta,
};
use pyo3::create_exception;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, RwLock};

create_exception!(
    _native,
    ContainerError,
    PyOSError,
    "A patio container that cannot be used as asked: not a container, damaged bytes in \
     its marker or logs, or a writer that failed earlier."
);

const MAX_OFFSET: u64 = i64::MAX as u64;

/// What may go wrong while the GIL is released; turned into a Python exception
/// once it is held again.
enum Failure {
    Closed,
    Container(patio_container::ContainerError),
}

impl From<patio_container::ContainerError> for Failure {
    fn from(e: patio_container::ContainerError) -> Self {
        Failure::Container(e)
    }
}

impl Failure {
    fn into_py(self, py: Python<'_>) -> PyErr {
        match self {
            Failure::Closed => closed_error(),
            Failure::Container(e) => container_err(py, e),
        }
    }
}

/// A patio-container error as a Python exception (see the module comment).
fn container_err(py: Python<'_>, e: patio_container::ContainerError) -> PyErr {
    use patio_container::ContainerError as E;
    match e {
        E::Io { path, error } => os_error(&path, &error),
        E::Corrupt {
            path,
            offset,
            reason,
        } => {
            let err =
                ContainerError::new_err(format!("{path}: corrupt at byte {offset}: {reason}"));
            let _ = err.value(py).setattr("offset", offset);
            err
        }
        E::Invalid(msg) => ContainerError::new_err(msg),
        E::Core(e) => ContainerError::new_err(e.to_string()),
    }
}

/// `ContainerError("<path>: <why>")`.
fn not_container(path: &Path, why: &str) -> PyErr {
    ContainerError::new_err(format!("{}: {why}", path.display()))
}

fn os_err_code(path: &Path, code: i32) -> PyErr {
    os_error(
        &path.display().to_string(),
        &std::io::Error::from_raw_os_error(code),
    )
}

/// Checks that `path` is an existing container directory: `FileNotFoundError`,
/// `NotADirectoryError`, `PermissionError`, … or `ContainerError` otherwise.
fn check_container(path: &Path) -> PyResult<()> {
    let meta = std::fs::metadata(path).map_err(|e| os_error(&path.display().to_string(), &e))?;
    if !meta.is_dir() {
        return Err(os_err_code(path, libc::ENOTDIR));
    }
    if !layout::is_container(path) {
        return Err(not_container(
            path,
            &format!("not a patio container (no {} marker)", layout::MARKER),
        ));
    }
    Ok(())
}

/// True when the directory holds nothing but the temporary marker files of a
/// container being created by another process right now.
fn empty_or_being_created(path: &Path) -> PyResult<bool> {
    let entries = std::fs::read_dir(path).map_err(|e| os_error(&path.display().to_string(), &e))?;
    for entry in entries {
        let entry = entry.map_err(|e| os_error(&path.display().to_string(), &e))?;
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !name.starts_with(&format!(".{}.", layout::MARKER)) && name != layout::MARKER {
            return Ok(false);
        }
    }
    Ok(true)
}

fn parse_index(index: Option<&str>) -> PyResult<Option<IndexMode>> {
    index
        .map(|s| {
            IndexMode::parse(s).map_err(|_| {
                PyValueError::new_err(format!("index={s:?}: must be \"pattern\" or \"raw\""))
            })
        })
        .transpose()
}

fn check_range(offset: u64, len: u64) -> PyResult<()> {
    match offset.checked_add(len) {
        Some(end) if end <= MAX_OFFSET => Ok(()),
        _ => Err(PyValueError::new_err(format!(
            "{len} bytes at offset {offset} end beyond 2^63-1, the largest container offset"
        ))),
    }
}

/// A raw pointer that may cross into `allow_threads` (the caller keeps the buffer it
/// points to exported for the whole call).
struct SendPtr(*mut u8);
// SAFETY: the pointee is only accessed by the one thread running the call, while the
// caller's export keeps the memory alive and unresizable.
unsafe impl Send for SendPtr {}

fn check_address(address: usize, length: usize) -> PyResult<()> {
    if address == 0 || address.checked_add(length).is_none() || length > isize::MAX as usize {
        return Err(PyValueError::new_err("invalid buffer address"));
    }
    Ok(())
}

fn closed_error() -> PyErr {
    PyValueError::new_err("I/O operation on closed container.")
}

// ------------------------------------------------------------------------- writer

/// One writer of a container (see the module comment).
#[pyclass(module = "patio._native", name = "ContainerWriter", frozen)]
pub struct PyContainerWriter {
    writer: Mutex<Option<Writer>>,
    path: PathBuf,
    name: String,
    mode: IndexMode,
    pid: u32,
    /// The summary returned by `close`.
    last: Mutex<Option<WriterMeta>>,
}

impl PyContainerWriter {
    fn lock(&self) -> MutexGuard<'_, Option<Writer>> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_process(&self) -> PyResult<()> {
        if std::process::id() != self.pid {
            return Err(not_container(
                &self.path,
                &format!(
                    "writer {} belongs to the process that opened it; a forked child opens \
                     a writer of its own",
                    self.name
                ),
            ));
        }
        Ok(())
    }

    /// Runs `f` on the open writer without the GIL.
    fn with_writer<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Writer) -> patio_container::Result<R> + Send,
    ) -> PyResult<R> {
        self.check_process()?;
        py.allow_threads(|| {
            let mut guard = self.lock();
            let writer = guard.as_mut().ok_or(Failure::Closed)?;
            f(writer).map_err(Failure::from)
        })
        .map_err(|e| e.into_py(py))
    }
}

fn meta_dict<'py>(py: Python<'py>, m: &WriterMeta) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("end", m.end)?;
    d.set_item("writes", m.writes)?;
    d.set_item("bytes", m.bytes)?;
    d.set_item("first_key", m.first_key)?;
    d.set_item("last_key", m.last_key)?;
    Ok(d)
}

#[pymethods]
impl PyContainerWriter {
    /// Writes `data` (a `bytes` object, written from its own memory) at `offset`.
    fn write_at(&self, py: Python<'_>, offset: u64, data: &Bound<'_, PyBytes>) -> PyResult<usize> {
        let bytes = data.as_bytes();
        check_range(offset, bytes.len() as u64)?;
        self.with_writer(py, |w| w.write_at(offset, bytes))?;
        Ok(bytes.len())
    }

    /// Writes the `length` bytes at `address` at `offset`. Internal to
    /// `patio.Container.write_at`, which passes the address of a buffer it holds
    /// exported for the whole call.
    fn _write_address(
        &self,
        py: Python<'_>,
        address: usize,
        length: usize,
        offset: u64,
    ) -> PyResult<usize> {
        check_range(offset, length as u64)?;
        if length == 0 {
            self.with_writer(py, |_| Ok(()))?;
            return Ok(0);
        }
        check_address(address, length)?;
        let ptr = SendPtr(address as *mut u8);
        self.with_writer(py, move |w| {
            let ptr = ptr;
            // SAFETY: the caller holds `length` readable bytes at `address` exported
            // (neither freed nor moved) until this call returns.
            let data = unsafe { std::slice::from_raw_parts(ptr.0 as *const u8, length) };
            w.write_at(offset, data)
        })?;
        Ok(length)
    }

    /// Makes every write so far durable and visible to readers opened afterwards.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.with_writer(py, |w| w.flush())
    }

    /// Makes every write so far visible to readers opened afterwards, without
    /// syncing the index (a machine crash may lose it).
    fn publish(&self, py: Python<'_>) -> PyResult<()> {
        self.with_writer(py, |w| w.publish())
    }

    /// Truncates (or extends with a hole) the logical file to `size`, ordered after
    /// this writer's writes and every write flushed before.
    fn truncate(&self, py: Python<'_>, size: u64) -> PyResult<()> {
        check_range(size, 0)?;
        self.with_writer(py, |w| w.truncate(size))
    }

    /// Index entries buffered before a record is written (at least 1).
    fn set_index_buffer(&self, py: Python<'_>, entries: usize) -> PyResult<()> {
        self.with_writer(py, |w| {
            w.set_index_buffer(entries);
            Ok(())
        })
    }

    /// One past the highest logical byte this writer has written (flushed or not).
    #[getter]
    fn end(&self) -> PyResult<u64> {
        let guard = self.lock();
        match (
            guard.as_ref(),
            self.last.lock().unwrap_or_else(|e| e.into_inner()).as_ref(),
        ) {
            (Some(w), _) => Ok(w.end()),
            (None, Some(m)) => Ok(m.end),
            (None, None) => Err(closed_error()),
        }
    }

    /// The writer's name (`<host>.<pid>.<n>`; its logs are `data.<name>`,
    /// `index.<name>`, `meta.<name>`).
    #[getter]
    fn name(&self) -> String {
        self.name.clone()
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// The container's index mode: `"pattern"` or `"raw"`.
    #[getter]
    fn index(&self) -> &'static str {
        self.mode.name()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.lock().is_none()
    }

    /// Flushes and closes; returns the writer's summary (`end`, `writes`, `bytes`,
    /// `first_key`, `last_key`). Closing twice returns the same summary.
    fn close<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if let Some(m) = *self.last.lock().unwrap_or_else(|e| e.into_inner()) {
            return meta_dict(py, &m);
        }
        self.check_process()?;
        let meta = py
            .allow_threads(|| {
                let writer = self.lock().take().ok_or(Failure::Closed)?;
                writer.close().map_err(Failure::from)
            })
            .map_err(|e| e.into_py(py))?;
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some(meta);
        meta_dict(py, &meta)
    }
}

impl Drop for PyContainerWriter {
    fn drop(&mut self) {
        let writer = self
            .writer
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(w) = writer {
            if std::process::id() != self.pid {
                // The parent's writer: the child must neither flush nor sync it.
                std::mem::forget(w);
            }
            // Otherwise dropping flushes what it can (`close` reports errors).
        }
    }
}

/// Opens a new writer on the container at `path`. With `create`, a missing container
/// (or an empty directory) becomes one with index mode `index` (default `pattern`);
/// an existing container keeps its mode, and an `index` that differs from it is a
/// `ValueError`. With `truncate`, an existing container's logical file is truncated
/// to 0 by this writer (ordered after every write flushed before).
#[pyfunction]
#[pyo3(signature = (path, index = None, create = true, truncate = false, index_buffer = None))]
pub fn open_container_writer(
    py: Python<'_>,
    path: PathBuf,
    index: Option<&str>,
    create: bool,
    truncate: bool,
    index_buffer: Option<usize>,
) -> PyResult<PyContainerWriter> {
    let want = parse_index(index)?;
    if index_buffer == Some(0) {
        return Err(PyValueError::new_err("index_buffer must be at least 1"));
    }
    let existed = match std::fs::metadata(&path) {
        Ok(m) if !m.is_dir() => return Err(os_err_code(&path, libc::ENOTDIR)),
        Ok(_) if layout::is_container(&path) => true,
        Ok(_) if create && empty_or_being_created(&path)? => false,
        Ok(_) => {
            return Err(not_container(
                &path,
                &format!(
                    "not a patio container (no {} marker){}",
                    layout::MARKER,
                    if create {
                        " and not empty; refusing to turn it into one"
                    } else {
                        ""
                    }
                ),
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && create => false,
        Err(e) => return Err(os_error(&path.display().to_string(), &e)),
    };
    let mode = py
        .allow_threads(|| {
            if create {
                layout::create(&path, want.unwrap_or(IndexMode::Pattern))
            } else {
                layout::read_marker(&path)
            }
        })
        .map_err(|e| container_err(py, e))?;
    if let Some(w) = want.filter(|&w| w != mode) {
        return Err(PyValueError::new_err(format!(
            "{}: the container's index mode is {}, not {} (it is chosen when the \
             container is created)",
            path.display(),
            mode.name(),
            w.name()
        )));
    }
    let mut writer = py
        .allow_threads(|| Writer::open(&path))
        .map_err(|e| container_err(py, e))?;
    if let Some(n) = index_buffer {
        writer.set_index_buffer(n);
    }
    if truncate && existed {
        py.allow_threads(|| writer.truncate(0))
            .map_err(|e| container_err(py, e))?;
    }
    Ok(PyContainerWriter {
        name: writer.name().to_string(),
        mode: writer.mode(),
        writer: Mutex::new(Some(writer)),
        path,
        pid: std::process::id(),
        last: Mutex::new(None),
    })
}

// ------------------------------------------------------------------------- reader

/// A container opened for reading (see the module comment).
#[pyclass(module = "patio._native", name = "ContainerReader", frozen)]
pub struct PyContainerReader {
    reader: RwLock<Option<Reader>>,
    path: PathBuf,
    size: u64,
    mode: IndexMode,
    stats: ContainerStats,
}

impl PyContainerReader {
    fn new(path: PathBuf, reader: Reader) -> Self {
        PyContainerReader {
            size: reader.size(),
            mode: reader.mode(),
            stats: reader.stats().clone(),
            reader: RwLock::new(Some(reader)),
            path,
        }
    }

    /// Reads into `out` at `offset` without the GIL.
    fn read_into(&self, py: Python<'_>, out: &mut [u8], offset: u64) -> PyResult<usize> {
        py.allow_threads(|| {
            let guard = self.reader.read().unwrap_or_else(|e| e.into_inner());
            let reader = guard.as_ref().ok_or(Failure::Closed)?;
            reader.read_at(out, offset).map_err(Failure::from)
        })
        .map_err(|e| e.into_py(py))
    }

    fn check_open(&self) -> PyResult<()> {
        if self
            .reader
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
        {
            return Err(closed_error());
        }
        Ok(())
    }
}

#[pymethods]
impl PyContainerReader {
    /// Reads up to `length` bytes at `offset` into the memory at `address`; returns
    /// the bytes read (0 at or past the end; holes read as zeros). Internal to
    /// `patio.Container.readinto`, which holds the buffer exported for the call.
    fn _readinto_address(
        &self,
        py: Python<'_>,
        address: usize,
        length: usize,
        offset: u64,
    ) -> PyResult<usize> {
        if length == 0 || offset >= self.size {
            self.check_open()?;
            return Ok(0);
        }
        check_address(address, length)?;
        let ptr = SendPtr(address as *mut u8);
        py.allow_threads(move || {
            let ptr = ptr;
            // SAFETY: the caller holds `length` writable bytes at `address` exported
            // (neither freed nor moved) until this call returns.
            let out = unsafe { std::slice::from_raw_parts_mut(ptr.0, length) };
            let guard = self.reader.read().unwrap_or_else(|e| e.into_inner());
            let reader = guard.as_ref().ok_or(Failure::Closed)?;
            reader.read_at(out, offset).map_err(Failure::from)
        })
        .map_err(|e| e.into_py(py))
    }

    /// Up to `n` bytes at `offset` as a new `bytes` object (fewer at the end).
    fn pread<'py>(&self, py: Python<'py>, n: u64, offset: u64) -> PyResult<Bound<'py, PyBytes>> {
        let want = n.min(self.size.saturating_sub(offset));
        if want == 0 {
            self.check_open()?;
            return Ok(PyBytes::new(py, b""));
        }
        let want = usize::try_from(want)
            .map_err(|_| PyValueError::new_err(format!("cannot read {want} bytes at once")))?;
        PyBytes::new_with(py, want, |out| {
            let got = self.read_into(py, out, offset)?;
            debug_assert_eq!(got, want);
            Ok(())
        })
    }

    /// The logical `extents` (`(offset, length)` pairs, each inside the file) read one
    /// after another as one `bytes`, with one read per physical run (pieces stored
    /// one after another — a reorganized pattern — are read together); returns
    /// `(data, physical_reads)`.
    fn read_extents<'py>(
        &self,
        py: Python<'py>,
        extents: Vec<(u64, u64)>,
    ) -> PyResult<(Bound<'py, PyBytes>, u64)> {
        let mut total = 0u64;
        for &(o, l) in &extents {
            check_range(o, l)?;
            total = total.saturating_add(l);
        }
        let total = usize::try_from(total)
            .map_err(|_| PyValueError::new_err(format!("cannot read {total} bytes at once")))?;
        let mut reads = 0u64;
        let data = PyBytes::new_with(py, total, |out| {
            reads = py
                .allow_threads(|| {
                    let guard = self.reader.read().unwrap_or_else(|e| e.into_inner());
                    let reader = guard.as_ref().ok_or(Failure::Closed)?;
                    reader.read_extents(&extents, out).map_err(Failure::from)
                })
                .map_err(|e| e.into_py(py))?;
            Ok(())
        })?;
        Ok((data, reads))
    }

    /// `read_extents` with its physical reads scheduled by the caller: the reads are
    /// planned first, `schedule(places)` is called with `(chunk, start, end)` of each
    /// of them in the order they are issued and returns `pace`; `pace(i, False)` is
    /// called before the `i`-th read and `pace(i, True)` right after it (an exception
    /// from either stops the read and is raised). Returns `(data, physical_reads)`.
    fn read_extents_paced<'py>(
        &self,
        py: Python<'py>,
        extents: Vec<(u64, u64)>,
        schedule: Bound<'py, PyAny>,
    ) -> PyResult<(Bound<'py, PyBytes>, u64)> {
        for &(o, l) in &extents {
            check_range(o, l)?;
        }
        let guard = self.reader.read().unwrap_or_else(|e| e.into_inner());
        let reader = guard.as_ref().ok_or_else(closed_error)?;
        let plan = py
            .allow_threads(|| reader.plan_extents(&extents))
            .map_err(|e| container_err(py, e))?;
        let places: Vec<(u32, u64, u64)> = plan
            .places()
            .iter()
            .map(|p| (p.chunk, p.start, p.end))
            .collect();
        let pace: Py<PyAny> = schedule.call1((places,))?.unbind();
        let mut reads = 0u64;
        let data = PyBytes::new_with(py, plan.bytes(), |out| {
            let mut raised: Option<PyErr> = None;
            let done = py.allow_threads(|| {
                reader.read_plan(&plan, out, |i, after| {
                    Python::with_gil(|py| pace.call1(py, (i, after)).map(|_| ())).map_err(|e| {
                        raised = Some(e);
                        patio_container::ContainerError::Invalid("stopped by its pace".into())
                    })
                })
            });
            match (done, raised) {
                (Ok(n), _) => {
                    reads = n;
                    Ok(())
                }
                (Err(_), Some(e)) => Err(e),
                (Err(e), None) => Err(container_err(py, e)),
            }
        })?;
        Ok((data, reads))
    }

    /// The logical file's size (as of the open).
    #[getter]
    fn size(&self) -> u64 {
        self.size
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    #[getter]
    fn index(&self) -> &'static str {
        self.mode.name()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.reader
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_none()
    }

    /// The index as read and merged: see `patio.Container.stats`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.stats;
        let d = PyDict::new(py);
        d.set_item("index", s.mode.name())?;
        d.set_item("size", s.size)?;
        d.set_item("writers", s.writers)?;
        d.set_item("records", s.records)?;
        d.set_item("writes", s.writes)?;
        d.set_item("raw_entries", s.raw_entries)?;
        d.set_item("index_disk_bytes", s.index_disk_bytes)?;
        d.set_item("compression_ratio", s.compression_ratio())?;
        d.set_item("index_mem_bytes", s.index.mem_bytes)?;
        d.set_item("tiles", s.index.tiles)?;
        d.set_item("global_patterns", s.index.global_patterns)?;
        d.set_item("rest_entries", s.index.rest_entries)?;
        d.set_item("loose_writes", s.index.loose_writes)?;
        d.set_item("damaged_logs", s.damaged_logs)?;
        Ok(d)
    }

    /// Damaged records found at open, as dicts `{path, offset, reason, lost_bytes}`
    /// (their logs were used up to them).
    fn damage<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let guard = self.reader.read().unwrap_or_else(|e| e.into_inner());
        let reader = guard.as_ref().ok_or_else(closed_error)?;
        let out = PyList::empty(py);
        for d in reader.damage() {
            let item = PyDict::new(py);
            item.set_item("path", &d.path)?;
            item.set_item("offset", d.offset)?;
            item.set_item("reason", &d.reason)?;
            item.set_item("lost_bytes", d.lost_bytes)?;
            out.append(item)?;
        }
        Ok(out)
    }

    /// Writer names in chunk order.
    fn writers(&self) -> PyResult<Vec<String>> {
        let guard = self.reader.read().unwrap_or_else(|e| e.into_inner());
        let reader = guard.as_ref().ok_or_else(closed_error)?;
        Ok(reader.writers().into_iter().map(String::from).collect())
    }

    /// Releases the index and the open data logs. Closing twice does nothing.
    fn close(&self, py: Python<'_>) {
        let reader = py.allow_threads(|| {
            self.reader
                .write()
                .unwrap_or_else(|e| e.into_inner())
                .take()
        });
        drop(reader);
    }
}

/// Opens the container at `path` for reading (every index log is read here).
#[pyfunction]
pub fn open_container_reader(py: Python<'_>, path: PathBuf) -> PyResult<PyContainerReader> {
    check_container(&path)?;
    let reader = py
        .allow_threads(|| Reader::open(&path))
        .map_err(|e| container_err(py, e))?;
    Ok(PyContainerReader::new(path, reader))
}

/// Reads the index logs of the writers named (one process's share of a split load)
/// and returns them packed for exchange, with the bytes read from disk.
#[pyfunction]
pub fn container_read_logs<'py>(
    py: Python<'py>,
    path: PathBuf,
    names: Vec<String>,
) -> PyResult<(Bound<'py, PyBytes>, u64)> {
    check_container(&path)?;
    for n in &names {
        if n.is_empty() || n.contains('/') || n == "." || n == ".." {
            return Err(PyValueError::new_err(format!("{n:?} is not a writer name")));
        }
    }
    let (packed, disk) = py
        .allow_threads(|| {
            read_logs(&path, &names).map(|logs| {
                let disk = logs.iter().map(|l| l.disk_bytes).sum::<u64>();
                (pack_logs(&logs), disk)
            })
        })
        .map_err(|e| container_err(py, e))?;
    Ok((PyBytes::new(py, &packed), disk))
}

/// Builds a reader of the container at `path` from packed index logs (every
/// process's share of a split load); no index log is read here.
#[pyfunction]
pub fn container_reader_from_parts(
    py: Python<'_>,
    path: PathBuf,
    parts: Vec<Bound<'_, PyBytes>>,
) -> PyResult<PyContainerReader> {
    check_container(&path)?;
    let slices: Vec<&[u8]> = parts.iter().map(|p| p.as_bytes()).collect();
    let reader = py
        .allow_threads(|| {
            let mut logs = Vec::new();
            for s in slices {
                logs.extend(unpack_logs(s)?);
            }
            let mut seen = std::collections::HashSet::new();
            if let Some(dup) = logs.iter().find(|l| !seen.insert(l.writer.clone())) {
                return Err(patio_container::ContainerError::Invalid(format!(
                    "packed index logs: writer {} appears twice",
                    dup.writer
                )));
            }
            Reader::from_logs(&path, logs)
        })
        .map_err(|e| container_err(py, e))?;
    Ok(PyContainerReader::new(path, reader))
}

// -------------------------------------------------------------------------- tools

/// Every writer of the container (from the index logs present), sorted.
#[pyfunction]
pub fn container_list_writers(py: Python<'_>, path: PathBuf) -> PyResult<Vec<String>> {
    check_container(&path)?;
    py.allow_threads(|| layout::list_writers(&path))
        .map_err(|e| container_err(py, e))
}

/// `{size, mtime_ns, from_meta}` from the writers' meta files (the index is read
/// only when they do not suffice).
#[pyfunction]
pub fn container_stat<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    check_container(&path)?;
    let s = py
        .allow_threads(|| tools::stat(&path))
        .map_err(|e| container_err(py, e))?;
    let d = PyDict::new(py);
    d.set_item("size", s.size)?;
    d.set_item("mtime_ns", s.mtime_ns)?;
    d.set_item("from_meta", s.from_meta)?;
    Ok(d)
}

/// Truncates (or extends with a hole) the logical file to `size`, ordered after
/// every write flushed before.
#[pyfunction]
pub fn container_truncate(py: Python<'_>, path: PathBuf, size: u64) -> PyResult<()> {
    check_range(size, 0)?;
    check_container(&path)?;
    py.allow_threads(|| tools::truncate(&path, size))
        .map_err(|e| container_err(py, e))
}

/// Removes the container (directories that are not containers are refused).
#[pyfunction]
pub fn container_remove(py: Python<'_>, path: PathBuf) -> PyResult<()> {
    check_container(&path)?;
    py.allow_threads(|| tools::remove(&path))
        .map_err(|e| container_err(py, e))
}

/// Verifies every index record; `{logs, records, writes, clean, damage}`.
#[pyfunction]
pub fn container_check<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    check_container(&path)?;
    let r = py
        .allow_threads(|| tools::check(&path))
        .map_err(|e| container_err(py, e))?;
    let d = PyDict::new(py);
    d.set_item("logs", r.logs)?;
    d.set_item("records", r.records)?;
    d.set_item("writes", r.writes)?;
    d.set_item("clean", r.is_clean())?;
    d.set_item("unindexed_tail_bytes", r.unindexed_tail_bytes)?;
    let damage = PyList::empty(py);
    for x in &r.damage {
        let item = PyDict::new(py);
        item.set_item("path", &x.path)?;
        item.set_item("offset", x.offset)?;
        item.set_item("reason", &x.reason)?;
        item.set_item("lost_bytes", x.lost_bytes)?;
        damage.append(item)?;
    }
    d.set_item("damage", damage)?;
    Ok(d)
}

/// Writes the logical file as a plain file at `out`; returns its size.
#[pyfunction]
pub fn container_flatten(
    py: Python<'_>,
    path: PathBuf,
    out: PathBuf,
    force: bool,
) -> PyResult<u64> {
    check_container(&path)?;
    py.allow_threads(|| tools::flatten(&path, &out, force, |_, _| {}))
        .map(|f| f.size)
        .map_err(|e| container_err(py, e))
}

/// Compacts the container (its ended writers' logs into one log set, crash-safely);
/// waits for a compaction already running when `wait`. What it did, as a dict.
#[pyfunction]
pub fn container_compact<'py>(
    py: Python<'py>,
    path: PathBuf,
    wait: bool,
) -> PyResult<Bound<'py, PyDict>> {
    check_container(&path)?;
    let c = py
        .allow_threads(|| patio_container::compact(&path, wait))
        .map_err(|e| container_err(py, e))?;
    let d = PyDict::new(py);
    d.set_item("sources", c.sources)?;
    d.set_item("active_writers", c.active)?;
    d.set_item("new_log_set", c.writer)?;
    d.set_item("live_bytes", c.live_bytes)?;
    d.set_item("records", c.records)?;
    d.set_item("bytes_before", c.bytes_before)?;
    d.set_item("bytes_after", c.bytes_after)?;
    d.set_item("files_removed", c.files_removed)?;
    d.set_item("truncations_dropped", c.truncations_dropped)?;
    d.set_item("recovered_files", c.recovered)?;
    d.set_item("busy", c.busy)?;
    Ok(d)
}

/// Registers the classes, functions and the exception.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("ContainerError", m.py().get_type::<ContainerError>())?;
    m.add_class::<PyContainerWriter>()?;
    m.add_class::<PyContainerReader>()?;
    m.add_function(wrap_pyfunction!(open_container_writer, m)?)?;
    m.add_function(wrap_pyfunction!(open_container_reader, m)?)?;
    m.add_function(wrap_pyfunction!(container_read_logs, m)?)?;
    m.add_function(wrap_pyfunction!(container_reader_from_parts, m)?)?;
    m.add_function(wrap_pyfunction!(container_list_writers, m)?)?;
    m.add_function(wrap_pyfunction!(container_stat, m)?)?;
    m.add_function(wrap_pyfunction!(container_truncate, m)?)?;
    m.add_function(wrap_pyfunction!(container_remove, m)?)?;
    m.add_function(wrap_pyfunction!(container_check, m)?)?;
    m.add_function(wrap_pyfunction!(container_flatten, m)?)?;
    m.add_function(wrap_pyfunction!(container_compact, m)?)?;
    Ok(())
}
