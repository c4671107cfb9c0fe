//! `patio._native`: the Python extension over patio-core, re-exported by the `patio`
//! package.
//!
//! * [`seq`] — `PatternUnit`, `PatternSeq`, `detect`, `analyze_stream`;
//! * [`maps`] — `PatternMap` and its baseline `ExtentTable`;
//! * [`trace`] — `read_trace`, `write_trace_csv`, `write_trace_native`;
//! * [`prefetch`] — `open_prefetch_stream` and `prefetch_stats`, the native half of
//!   `patio.open` (reads through the patio-prefetch engine);
//! * [`container`] — `ContainerWriter`, `ContainerReader`, the split index load and
//!   the container tools, the native half of `patio.Container` and `patio.mpi`;
//! * [`store`] — `StorageModel`, the striped storage model (presets, parameters, the
//!   many-client simulator and the eq 3.1 / eq 4.1 count inputs);
//! * [`version`] — `file_version`, the core's file-version rule;
//! * [`harness`] — `MountHarness`, `is_mounted`, `unmount`: patio-harness, the one
//!   harness tests and benchmarks run mounts through;
//! * [`convert`] — NumPy/sequence conversions, error mapping and allocation guards.
//!
//! Errors from patio-core surface as `ValueError` (or `OSError` for file access) with
//! the core's message; bad argument types are `TypeError`, integers that do not fit the
//! column type `OverflowError`. Nothing a caller passes in may panic: untrusted sizes
//! are checked before allocating, and decoders run behind a panic guard. Map builds,
//! detection, batch lookups and trace encoding release the GIL.

mod container;
mod convert;
mod harness;
mod layout;
mod maps;
mod prefetch;
mod seq;
mod store;
mod trace;
mod version;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<seq::PyPatternUnit>()?;
    m.add_class::<seq::PyPatternSeq>()?;
    m.add_class::<maps::PyPatternMap>()?;
    m.add_class::<maps::PyExtentTable>()?;
    m.add_class::<prefetch::PyPrefetchStream>()?;
    m.add_function(wrap_pyfunction!(prefetch::open_prefetch_stream, m)?)?;
    m.add_function(wrap_pyfunction!(prefetch::prefetch_stats, m)?)?;
    m.add_function(wrap_pyfunction!(seq::detect, m)?)?;
    m.add_function(wrap_pyfunction!(version::file_version, m)?)?;
    m.add_function(wrap_pyfunction!(seq::analyze_stream, m)?)?;
    m.add_function(wrap_pyfunction!(trace::read_trace, m)?)?;
    m.add_function(wrap_pyfunction!(trace::write_trace_csv, m)?)?;
    m.add_function(wrap_pyfunction!(trace::write_trace_native, m)?)?;
    m.add("LOOKUP_DATA", maps::LOOKUP_DATA)?;
    m.add("LOOKUP_HOLE", maps::LOOKUP_HOLE)?;
    m.add("LOOKUP_UNMAPPED", maps::LOOKUP_UNMAPPED)?;
    container::register(m)?;
    store::register(m)?;
    layout::register(m)?;
    harness::register(m)?;
    m.add("DEFAULT_WINDOW", patio_core::detect::DEFAULT_WINDOW as u64)?;
    Ok(())
}
