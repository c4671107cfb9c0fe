//! `MountHarness`: patio-harness's `MountProcess` for Python — the one harness the tests,
//! `bench/` and `patio bench reorg` run `patio mount …` processes through
//! (`patio._mount_harness.MountProcess` wraps it). A failure is a `RuntimeError` with the
//! harness's message (the wrapper turns it into its `MountError`); waits release the GIL.

use patio_harness::{End, MountError, MountProcess};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

fn err(e: MountError) -> PyErr {
    PyRuntimeError::new_err(e.0)
}

fn seconds(s: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(s).map_err(|_| PyValueError::new_err(format!("bad timeout {s}")))
}

#[pyclass(name = "MountHarness", module = "patio._native", unsendable)]
pub struct PyMountHarness {
    inner: MountProcess,
}

#[pymethods]
impl PyMountHarness {
    /// Runs `argv` (with `env`, the whole environment, when given) and waits at most
    /// `timeout` seconds until `mnt` is mounted.
    #[new]
    #[pyo3(signature = (argv, mnt, stats_file=None, timeout=15.0, env=None))]
    fn new(
        py: Python<'_>,
        argv: Vec<PathBuf>,
        mnt: PathBuf,
        stats_file: Option<PathBuf>,
        timeout: f64,
        env: Option<Vec<(String, String)>>,
    ) -> PyResult<Self> {
        let argv: Vec<OsString> = argv.into_iter().map(PathBuf::into_os_string).collect();
        let env: Option<Vec<(OsString, OsString)>> =
            env.map(|e| e.into_iter().map(|(k, v)| (k.into(), v.into())).collect());
        let timeout = seconds(timeout)?;
        let inner = py
            .allow_threads(|| {
                MountProcess::start(&argv, &mnt, stats_file.as_deref(), timeout, env.as_deref())
            })
            .map_err(err)?;
        Ok(PyMountHarness { inner })
    }

    /// `patio mount KIND`.
    #[getter]
    fn name(&self) -> String {
        self.inner.name()
    }

    #[getter]
    fn pid(&self) -> u32 {
        self.inner.pid()
    }

    /// The exit code once the mount ended, or minus the signal that ended it (None while
    /// it runs).
    #[getter]
    fn returncode(&self) -> Option<i32> {
        self.inner.returncode()
    }

    /// Sends signal number `sig` to the mount process while it runs.
    fn send_signal(&mut self, sig: i32) {
        self.inner.send_signal(sig);
    }

    #[getter]
    fn stdout(&self) -> String {
        self.inner.stdout.clone()
    }

    #[getter]
    fn stderr(&self) -> String {
        self.inner.stderr.clone()
    }

    fn running(&mut self) -> bool {
        self.inner.running()
    }

    /// What the mount wrote to stderr so far.
    fn output(&mut self) -> String {
        self.inner.output()
    }

    /// Ends the mount (`"fusermount"` or a signal's name) and checks that it ended
    /// cleanly; returns its stderr.
    #[pyo3(signature = (how="fusermount", timeout=60.0))]
    fn end(&mut self, py: Python<'_>, how: &str, timeout: f64) -> PyResult<String> {
        let how = End::parse(how).map_err(|e| PyValueError::new_err(e.0))?;
        let timeout = seconds(timeout)?;
        let inner = &mut self.inner;
        py.allow_threads(|| inner.end(how, timeout)).map_err(err)
    }

    /// The text of the counters the mount reported when it ended.
    fn stats_text(&mut self) -> PyResult<String> {
        self.inner.stats_text().map_err(err)
    }

    /// SIGKILL, then a lazy unmount.
    fn kill(&mut self, py: Python<'_>) {
        let inner = &mut self.inner;
        py.allow_threads(|| inner.kill());
    }

    /// Removes the mount whatever state it is in, never raising.
    fn cleanup(&mut self, py: Python<'_>) {
        let inner = &mut self.inner;
        py.allow_threads(|| inner.cleanup());
    }
}

/// Whether something is mounted at `mnt` (`/proc/self/mountinfo`; a dead FUSE mount
/// counts).
#[pyfunction]
fn is_mounted(mnt: PathBuf) -> bool {
    patio_harness::is_mounted(&mnt)
}

/// `fusermount3 -u [-z] MNT`: `(returncode, stderr)`.
#[pyfunction]
#[pyo3(signature = (mnt, lazy=false))]
fn unmount(py: Python<'_>, mnt: PathBuf, lazy: bool) -> PyResult<(i32, String)> {
    let out = py
        .allow_threads(|| patio_harness::unmount(&mnt, lazy))
        .map_err(err)?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// The `fusermount3` (or `fusermount`) command.
#[pyfunction]
fn fusermount() -> PyResult<PathBuf> {
    patio_harness::fusermount().map_err(err)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMountHarness>()?;
    m.add_function(wrap_pyfunction!(is_mounted, m)?)?;
    m.add_function(wrap_pyfunction!(unmount, m)?)?;
    m.add_function(wrap_pyfunction!(fusermount, m)?)?;
    Ok(())
}
