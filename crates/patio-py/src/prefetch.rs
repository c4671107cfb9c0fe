//! Prefetching file reads for Python: the native half of `patio.open(path,
//! prefetch=...)` (the file object itself, `patio.PrefetchFile`, is Python and keeps
//! the position; it calls [`PyPrefetchStream`] for positional reads).
//!
//! * **One engine per process.** Every stream reads through one lazily created
//!   [`Engine`]: one cache budget and one worker pool for all open files. A
//!   `cache_mib` different from the engine's replaces it while no file is open and is
//!   refused otherwise. A forked child gets an engine of its own on its first open
//!   (worker threads do not survive `fork`); streams opened before the fork refuse to
//!   read in the child.
//! * **One stream per open file**, each with its own policy and slow-store model
//!   (`latency_ms`, `bandwidth_mbps`; no modelled cost by default), so per-file counters
//!   ([`StreamReader::stats`]) describe that file alone.
//! * **Reads release the GIL** and go straight into the caller's buffer (`readinto`,
//!   by address: the stable ABI of Python 3.9 has no buffer protocol) or into the new
//!   `bytes` object (`pread`): no intermediate copy.
//! * **Models.** `markov` and `pattern` start from a model file when given one (the
//!   per-stream model file of `patio replay --save-model` with one stream, or a bare
//!   Markov/pattern model) and save theirs in the former format at close.
//!
//! Bad arguments are `ValueError`; file access errors the errno-specific `OSError`
//! with the file name.

use crate::convert::os_error;
use patio_prefetch::model::{read_stream_model, write_models};
use patio_prefetch::process::{self, Lease};
use patio_prefetch::PrefetchError;
use patio_prefetch::{DataFile, PolicyKind, SlowStore, Stats, StoreConfig, StreamReader};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

/// A lease on the process's engine (`patio_prefetch::process`), with `cache_mib`.
fn engine(cache_mib: Option<u64>) -> PyResult<Lease> {
    process::acquire(cache_mib.map(|m| m << 20))
        .map_err(|e| PyValueError::new_err(format!("cache_mib={}: {e}", cache_mib.unwrap_or(0))))
}

/// Per-stream state behind a mutex (reads of one file object are serialised).
struct State {
    reader: Option<StreamReader>,
    /// The counters at close.
    last: Option<Stats>,
}

/// One open file's stream through the process's prefetch engine.
#[pyclass(module = "patio._native", name = "PrefetchStream", frozen)]
pub struct PyPrefetchStream {
    state: Mutex<State>,
    /// Keeps the engine (its workers) alive while the stream is open.
    engine: Mutex<Option<Lease>>,
    path: PathBuf,
    size: u64,
    policy: PolicyKind,
    io_mode: String,
    save_model: Option<PathBuf>,
    pid: u32,
}

fn closed_error() -> PyErr {
    PyValueError::new_err("I/O operation on closed file.")
}

impl PyPrefetchStream {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn check_process(&self) -> PyResult<()> {
        if std::process::id() != self.pid {
            return Err(PyOSError::new_err(format!(
                "{}: a file opened with patio.open cannot be read in a forked child process; \
                 open it again in the child",
                self.path.display()
            )));
        }
        Ok(())
    }

    /// Reads into `buf` at `offset` without the GIL.
    fn read_into(&self, py: Python<'_>, offset: u64, buf: &mut [u8]) -> PyResult<usize> {
        self.check_process()?;
        let path = &self.path;
        py.allow_threads(|| {
            let mut state = self.lock();
            let reader = state.reader.as_mut().ok_or_else(closed_error)?;
            reader
                .read_at(offset, buf)
                .map_err(|e| read_error(path, offset, &e))
        })
    }
}

fn read_error(path: &Path, offset: u64, e: &std::io::Error) -> PyErr {
    match e.raw_os_error() {
        Some(_) => os_error(&path.display().to_string(), e),
        None => PyOSError::new_err(format!("{}: read at offset {offset}: {e}", path.display())),
    }
}

/// A raw pointer that may cross into `allow_threads` (the caller keeps the buffer it
/// points to exported for the whole call).
struct SendPtr(*mut u8);
// SAFETY: the pointee is only accessed by the one thread running the read, while the
// caller's export keeps the memory alive and unresizable.
unsafe impl Send for SendPtr {}

#[pymethods]
impl PyPrefetchStream {
    /// Reads up to `length` bytes at `offset` into the memory at `address` and
    /// returns the bytes read (0 at or past the end). Internal to
    /// `patio.PrefetchFile.readinto`, which passes the address of a writable buffer
    /// it holds exported (through `ctypes`) for the whole call: the extension is
    /// built for the stable ABI of Python 3.9, which has no buffer protocol.
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
        if address == 0 || address.checked_add(length).is_none() {
            return Err(PyValueError::new_err("readinto: invalid buffer address"));
        }
        let ptr = SendPtr(address as *mut u8);
        self.check_process()?;
        let path = &self.path;
        py.allow_threads(move || {
            let ptr = ptr;
            // SAFETY: the caller holds `length` writable bytes at `address` exported
            // (so neither freed nor moved) until this call returns.
            let out = unsafe { std::slice::from_raw_parts_mut(ptr.0, length) };
            let mut state = self.lock();
            let reader = state.reader.as_mut().ok_or_else(closed_error)?;
            reader
                .read_at(offset, out)
                .map_err(|e| read_error(path, offset, &e))
        })
    }

    /// Up to `n` bytes at `offset` as a new `bytes` object (fewer at the end of the
    /// file).
    fn pread<'py>(&self, py: Python<'py>, n: u64, offset: u64) -> PyResult<Bound<'py, PyBytes>> {
        let want = n.min(self.size.saturating_sub(offset));
        if want == 0 {
            self.check_open()?;
            return Ok(PyBytes::new(py, b""));
        }
        let want = usize::try_from(want)
            .map_err(|_| PyValueError::new_err(format!("cannot read {want} bytes at once")))?;
        PyBytes::new_with(py, want, |out| {
            let got = self.read_into(py, offset, out)?;
            if got != want {
                return Err(PyOSError::new_err(format!(
                    "{}: short read at offset {offset} ({got} of {want} bytes; the file shrank?)",
                    self.path.display()
                )));
            }
            Ok(())
        })
    }

    /// Raises `ValueError` when the stream is closed.
    fn check_open(&self) -> PyResult<()> {
        if self.lock().reader.is_none() {
            return Err(closed_error());
        }
        Ok(())
    }

    /// The file's size at open (reads stop there).
    #[getter]
    fn size(&self) -> u64 {
        self.size
    }

    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    #[getter]
    fn policy(&self) -> &'static str {
        self.policy.name()
    }

    /// How the file is read: `O_DIRECT`, or buffered without the page cache.
    #[getter]
    fn io_mode(&self) -> String {
        self.io_mode.clone()
    }

    #[getter]
    fn closed(&self) -> bool {
        self.lock().reader.is_none()
    }

    /// Requests ahead the stream prefetches now (0 once closed).
    #[getter]
    fn depth(&self) -> usize {
        self.lock().reader.as_ref().map_or(0, |r| r.depth())
    }

    /// This file's counters as a dict (see `patio.PrefetchFile.stats`); after
    /// `close()` the final ones.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = {
            let state = self.lock();
            match (&state.reader, &state.last) {
                (Some(r), _) => r.stats(),
                (None, Some(s)) => s.clone(),
                (None, None) => Stats::default(),
            }
        };
        stats_dict(py, &stats)
    }

    /// Ends the stream: unused prefetches are dropped (as waste) and, with
    /// `save_model`, the learned model is written. Closing twice does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let Some(reader) = self.lock().reader.take() else {
            return Ok(());
        };
        if std::process::id() != self.pid {
            // The engine's threads and locks belong to the parent (the lease knows).
            std::mem::forget(reader);
            self.engine.lock().unwrap_or_else(|e| e.into_inner()).take();
            return Ok(());
        }
        let model = self
            .save_model
            .as_ref()
            .and_then(|_| reader.policy().save());
        let stats = py.allow_threads(|| reader.close());
        self.lock().last = Some(stats);
        self.engine.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let (Some(path), Some(model)) = (&self.save_model, model) {
            write_models(path, &[Some(model)]).map_err(|e| model_error(path, &e))?;
        }
        Ok(())
    }
}

impl Drop for PyPrefetchStream {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|e| e.into_inner());
        if let Some(reader) = state.reader.take() {
            if std::process::id() != self.pid {
                std::mem::forget(reader);
            }
        }
    }
}

fn stats_dict<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("reads", s.requests)?;
    d.set_item("hits", s.hits)?;
    d.set_item("late_hits", s.late_hits)?;
    d.set_item("misses", s.misses)?;
    d.set_item("partial_hits", s.partial_hits)?;
    d.set_item("read_bytes", s.read_bytes)?;
    d.set_item("cache_bytes", s.cache_bytes)?;
    d.set_item("accuracy", s.accuracy())?;
    d.set_item("coverage", s.coverage())?;
    d.set_item("prefetch_requests", s.prefetch_requests)?;
    d.set_item("prefetched_bytes", s.prefetched_bytes)?;
    d.set_item("used_bytes", s.used_bytes)?;
    d.set_item("wasted_bytes", s.wasted_bytes)?;
    d.set_item("demand_requests", s.demand_requests)?;
    d.set_item("demand_bytes", s.demand_bytes)?;
    d.set_item("backend_requests", s.backend_requests)?;
    d.set_item("backend_bytes", s.backend_bytes)?;
    d.set_item("analyzer_ns", s.analyzer_ns)?;
    d.set_item("cache_budget_bytes", s.budget_bytes)?;
    d.set_item("cache_resident_bytes", s.resident_bytes)?;
    Ok(d)
}

/// The model bytes a policy starts from (the one-stream rule of
/// `patio_prefetch::model`, shared with `patio mount prefetch`).
fn read_model(path: &Path, kind: PolicyKind) -> PyResult<Vec<u8>> {
    read_stream_model(path, kind).map_err(|e| model_error(path, &e))
}

/// A model file's error: the OS error with its errno and file name, else `ValueError`.
fn model_error(path: &Path, e: &PrefetchError) -> PyErr {
    match e.os_error() {
        Some(os) => os_error(&path.display().to_string(), os),
        None => PyValueError::new_err(e.to_string()),
    }
}

fn finite_non_negative(name: &str, v: f64) -> PyResult<f64> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(PyValueError::new_err(format!(
            "{name} must be a finite number >= 0, not {v}"
        )))
    }
}

/// Opens `path` for reading through the process's prefetch engine (see the module
/// comment and `patio.open`).
#[pyfunction]
#[pyo3(signature = (path, prefetch, model = None, save_model = None, latency_ms = 0.0,
    bandwidth_mbps = 0.0, concurrency = 4, cache_mib = None))]
#[allow(clippy::too_many_arguments)]
pub fn open_prefetch_stream(
    py: Python<'_>,
    path: PathBuf,
    prefetch: &str,
    model: Option<PathBuf>,
    save_model: Option<PathBuf>,
    latency_ms: f64,
    bandwidth_mbps: f64,
    concurrency: usize,
    cache_mib: Option<u64>,
) -> PyResult<PyPrefetchStream> {
    let kind: PolicyKind = prefetch.parse().map_err(|_| {
        PyValueError::new_err(format!(
            "prefetch={prefetch:?}: must be one of none, readahead, stride, markov, pattern"
        ))
    })?;
    if kind == PolicyKind::Oracle {
        return Err(PyValueError::new_err(
            "prefetch=\"oracle\" needs the future requests in advance; it exists for \
             `patio replay` only",
        ));
    }
    if !kind.has_model() {
        for (arg, given) in [
            ("model", model.is_some()),
            ("save_model", save_model.is_some()),
        ] {
            if given {
                return Err(PyValueError::new_err(format!(
                    "{arg}: the {kind} policy learns no model (markov and pattern do)"
                )));
            }
        }
    }
    let latency_ms = finite_non_negative("latency_ms", latency_ms)?;
    let bandwidth_mbps = finite_non_negative("bandwidth_mbps", bandwidth_mbps)?;
    if concurrency == 0 {
        return Err(PyValueError::new_err("concurrency must be at least 1"));
    }
    if cache_mib == Some(0) || cache_mib.is_some_and(|m| m > (1 << 40)) {
        return Err(PyValueError::new_err(format!(
            "cache_mib must be between 1 and 2^40, not {}",
            cache_mib.unwrap_or(0)
        )));
    }
    let model_bytes = model.as_deref().map(|p| read_model(p, kind)).transpose()?;
    let policy = kind
        .build(&[], model_bytes.as_deref().filter(|m| !m.is_empty()))
        .map_err(|e| PyValueError::new_err(e.to_string()))?;

    let name = path.display().to_string();
    let meta = std::fs::metadata(&path).map_err(|e| os_error(&name, &e))?;
    if meta.is_dir() {
        return Err(os_error(&name, &std::io::Error::from_raw_os_error(21)));
    }
    if !meta.is_file() {
        return Err(PyValueError::new_err(format!(
            "{name}: not a regular file (patio.open reads regular files)"
        )));
    }
    let store = SlowStore::new(StoreConfig {
        concurrency,
        ..StoreConfig::with(latency_ms, bandwidth_mbps)
    });
    let data = py
        .allow_threads(|| DataFile::open(&path, store))
        .map_err(|e| os_error(&name, &e))?;
    let lease = engine(cache_mib)?;
    let file = lease.engine().add_file(data);
    let (size, io_mode) = (file.file().size(), file.file().io_mode().to_string());
    let reader = lease.engine().stream(&file, policy);
    Ok(PyPrefetchStream {
        state: Mutex::new(State {
            reader: Some(reader),
            last: None,
        }),
        engine: Mutex::new(Some(lease)),
        path,
        size,
        policy: kind,
        io_mode,
        save_model,
        pid: std::process::id(),
    })
}

/// The counters of the whole engine (every file opened since it started), as a dict
/// like `PrefetchStream.stats`; an empty engine's when none was started.
#[pyfunction]
pub fn prefetch_stats<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
    let stats = py.allow_threads(process::stats);
    stats_dict(py, &stats)
}
