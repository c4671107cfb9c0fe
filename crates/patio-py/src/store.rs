//! `StorageModel`: the striped storage model of patio-prefetch
//! ([`patio_prefetch::Striping`]) for Python — presets, parameters (the `"store"`
//! entry of benchmark JSON), the discrete-event simulator and the eq 3.1 / eq 4.1
//! count inputs. Latencies are seconds, bandwidth bytes per second per target.
//!
//! Extents arrive as `(offsets, lengths)` pairs of 1-D integer NumPy arrays or
//! sequences of ints. A negative value, columns of different lengths, an extent
//! ending past 2^64 or an out-of-range parameter is a `ValueError`; simulations and
//! counts run with the GIL released.

use crate::convert::{int_column, same_length};
use patio_prefetch::striped::{DEFAULT_SEED, PRESETS};
use patio_prefetch::{SeekCounts, SimReport, Striping, StripingError};
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

fn model_err(e: StripingError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// An integer parameter that must fit in a u64.
fn uint(name: &str, v: i128) -> PyResult<u64> {
    u64::try_from(v).map_err(|_| {
        PyValueError::new_err(format!("{name} must be an integer in [0, 2^64), got {v}"))
    })
}

/// An integer parameter from any Python object.
fn uint_of(name: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    let i: i128 = v.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "{name} must be an int, not {}",
            crate::convert::type_name(v)
        ))
    })?;
    uint(name, i)
}

/// A uint64 column; negative or too large values are a `ValueError`.
fn u64_column(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u64>> {
    int_column::<u64>(obj, what).map_err(|e| {
        if e.is_instance_of::<PyOverflowError>(obj.py()) {
            PyValueError::new_err(format!(
                "{} (offsets and lengths must be non-negative)",
                e.value(obj.py())
            ))
        } else {
            e
        }
    })
}

/// Extents `(offset, len)` from an offsets and a lengths column.
fn extents(
    offsets: &Bound<'_, PyAny>,
    lengths: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<Vec<(u64, u64)>> {
    let o = u64_column(offsets, &format!("{what}offsets"))?;
    let l = u64_column(lengths, &format!("{what}lengths"))?;
    same_length(&[("offsets", o.len()), ("lengths", l.len())])
        .map_err(|e| PyValueError::new_err(format!("{what}{}", e.value(offsets.py()))))?;
    Ok(o.into_iter().zip(l).collect())
}

/// The striped storage model: `targets` servers, `stripe_size`-byte round-robin
/// stripes, `rpc_size`-aligned RPCs, latency by seek distance
/// (`latency_seq`/`_near`/`_mid`/`_far`), `bandwidth` per target, `request_latency`
/// per client request, seeded `jitter`, and `whole_rpc` rounding.
#[pyclass(module = "patio._native", name = "StorageModel", frozen, eq)]
#[derive(Clone, PartialEq)]
pub struct PyStorageModel {
    inner: Striping,
}

#[pymethods]
impl PyStorageModel {
    #[new]
    #[pyo3(signature = (targets = 1, stripe_size = 1048576, rpc_size = 1048576,
        page_size = 4096, latency_seq = 0.0002, latency_near = 0.0005, latency_mid = 0.001,
        latency_far = 0.002, bandwidth = 500e6, request_latency = 0.0, jitter = 0.0,
        seed = DEFAULT_SEED as i128, whole_rpc = false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        targets: i128,
        stripe_size: i128,
        rpc_size: i128,
        page_size: i128,
        latency_seq: f64,
        latency_near: f64,
        latency_mid: f64,
        latency_far: f64,
        bandwidth: f64,
        request_latency: f64,
        jitter: f64,
        seed: i128,
        whole_rpc: bool,
    ) -> PyResult<Self> {
        let targets = uint("targets", targets)?;
        let inner = Striping {
            targets: usize::try_from(targets).unwrap_or(usize::MAX),
            stripe_size: uint("stripe_size", stripe_size)?,
            rpc_size: uint("rpc_size", rpc_size)?,
            page_size: uint("page_size", page_size)?,
            latency_seq,
            latency_near,
            latency_mid,
            latency_far,
            bandwidth,
            request_latency,
            jitter,
            seed: uint("seed", seed)?,
            whole_rpc,
        };
        inner.validate().map_err(model_err)?;
        Ok(PyStorageModel { inner })
    }

    /// Names accepted by `preset`.
    #[classattr]
    #[allow(non_snake_case)]
    fn PRESETS(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
        PyTuple::new(py, PRESETS)
    }

    /// The preset called `name` (`"hdd"`, `"ssd"` or `"lustre"`).
    #[staticmethod]
    fn preset(name: &str) -> PyResult<Self> {
        let inner = Striping::by_name(name).map_err(model_err)?;
        Ok(PyStorageModel { inner })
    }

    /// Where file number `index` (0: the first) starts in the modelled address space:
    /// its own region, starting on target `index mod targets`.
    fn file_base(&self, index: u64) -> u64 {
        self.inner.file_base(index)
    }

    /// Every parameter, by constructor keyword.
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.inner;
        let d = PyDict::new(py);
        d.set_item("targets", s.targets)?;
        d.set_item("stripe_size", s.stripe_size)?;
        d.set_item("rpc_size", s.rpc_size)?;
        d.set_item("page_size", s.page_size)?;
        d.set_item("latency_seq", s.latency_seq)?;
        d.set_item("latency_near", s.latency_near)?;
        d.set_item("latency_mid", s.latency_mid)?;
        d.set_item("latency_far", s.latency_far)?;
        d.set_item("bandwidth", s.bandwidth)?;
        d.set_item("request_latency", s.request_latency)?;
        d.set_item("jitter", s.jitter)?;
        d.set_item("seed", s.seed)?;
        d.set_item("whole_rpc", s.whole_rpc)?;
        Ok(d)
    }

    /// A copy with some parameters replaced (constructor keywords).
    #[pyo3(signature = (**overrides))]
    fn with_params(&self, overrides: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut s = self.inner.clone();
        for (key, value) in overrides.into_iter().flat_map(|d| d.iter()) {
            let key: String = key.extract()?;
            let float = |v: &Bound<'_, PyAny>| -> PyResult<f64> {
                v.extract().map_err(|_| {
                    PyTypeError::new_err(format!(
                        "{key} must be a number, not {}",
                        crate::convert::type_name(v)
                    ))
                })
            };
            match key.as_str() {
                "targets" => {
                    let t = uint_of(&key, &value)?;
                    s.targets = usize::try_from(t).unwrap_or(usize::MAX);
                }
                "stripe_size" => s.stripe_size = uint_of(&key, &value)?,
                "rpc_size" => s.rpc_size = uint_of(&key, &value)?,
                "page_size" => s.page_size = uint_of(&key, &value)?,
                "seed" => s.seed = uint_of(&key, &value)?,
                "latency_seq" => s.latency_seq = float(&value)?,
                "latency_near" => s.latency_near = float(&value)?,
                "latency_mid" => s.latency_mid = float(&value)?,
                "latency_far" => s.latency_far = float(&value)?,
                "bandwidth" => s.bandwidth = float(&value)?,
                "request_latency" => s.request_latency = float(&value)?,
                "jitter" => s.jitter = float(&value)?,
                "whole_rpc" => s.whole_rpc = value.extract()?,
                _ => {
                    return Err(PyTypeError::new_err(format!(
                        "with_params() got an unexpected keyword argument {key:?}"
                    )))
                }
            }
        }
        s.validate().map_err(model_err)?;
        Ok(PyStorageModel { inner: s })
    }

    /// A copy with `targets` servers and `stripe_kib`-KiB stripes where given, by the
    /// rule of `--store-targets` and `--store-stripe-kib` (RPCs stay at most one stripe;
    /// `Striping::with_overrides`).
    #[pyo3(signature = (targets = None, stripe_kib = None))]
    fn with_overrides(&self, targets: Option<i128>, stripe_kib: Option<i128>) -> PyResult<Self> {
        let targets = targets
            .map(|t| uint("targets", t).map(|t| usize::try_from(t).unwrap_or(usize::MAX)))
            .transpose()?;
        let stripe_kib = stripe_kib.map(|k| uint("stripe_kib", k)).transpose()?;
        let inner = self
            .inner
            .clone()
            .with_overrides(targets, stripe_kib)
            .map_err(model_err)?;
        Ok(PyStorageModel { inner })
    }

    /// Simulates `clients` (a list per client of requests, each an `(offsets, lengths)`
    /// pair of extents issued together) and returns the modelled seconds and counts.
    fn simulate<'py>(
        &self,
        py: Python<'py>,
        clients: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut input: Vec<Vec<Vec<(u64, u64)>>> = Vec::new();
        for (c, client) in clients.try_iter()?.enumerate() {
            let client = client?;
            let mut requests = Vec::new();
            for (r, request) in client.try_iter()?.enumerate() {
                let request = request?;
                let what = format!("client {c} request {r}: ");
                let pair: (Bound<'_, PyAny>, Bound<'_, PyAny>) =
                    request.extract().map_err(|_| {
                        PyValueError::new_err(format!(
                            "{what}expected an (offsets, lengths) pair, got {}",
                            crate::convert::type_name(&request)
                        ))
                    })?;
                requests.push(extents(&pair.0, &pair.1, &what)?);
            }
            input.push(requests);
        }
        let model = &self.inner;
        let report = py
            .allow_threads(|| model.simulate(&input))
            .map_err(model_err)?;
        report_dict(py, &report)
    }

    /// eq 3.1 inputs: `{"pages": [...], "chunks": [...]}`, one entry per target.
    fn page_counts<'py>(
        &self,
        py: Python<'py>,
        offsets: &Bound<'py, PyAny>,
        lengths: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let ext = extents(offsets, lengths, "")?;
        let model = &self.inner;
        let c = py
            .allow_threads(|| model.page_counts(&ext))
            .map_err(model_err)?;
        let d = PyDict::new(py);
        d.set_item("pages", c.pages)?;
        d.set_item("chunks", c.chunks)?;
        Ok(d)
    }

    /// eq 4.1 inputs: `{"short": [...], "medium": [...], "long": [...],
    /// "contiguous_bytes": int}`, jump counts per target.
    fn jump_counts<'py>(
        &self,
        py: Python<'py>,
        offsets: &Bound<'py, PyAny>,
        lengths: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let ext = extents(offsets, lengths, "")?;
        let model = &self.inner;
        let c = py
            .allow_threads(|| model.jump_counts(&ext))
            .map_err(model_err)?;
        let d = PyDict::new(py);
        d.set_item("short", c.short)?;
        d.set_item("medium", c.medium)?;
        d.set_item("long", c.long)?;
        d.set_item("contiguous_bytes", c.contiguous_bytes)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        let s = &self.inner;
        format!(
            "StorageModel(targets={}, stripe_size={}, rpc_size={}, page_size={}, \
             latency_seq={:?}, latency_near={:?}, latency_mid={:?}, latency_far={:?}, \
             bandwidth={:?}, request_latency={:?}, jitter={:?}, seed={}, whole_rpc={})",
            s.targets,
            s.stripe_size,
            s.rpc_size,
            s.page_size,
            s.latency_seq,
            s.latency_near,
            s.latency_mid,
            s.latency_far,
            s.bandwidth,
            s.request_latency,
            s.jitter,
            s.seed,
            if s.whole_rpc { "True" } else { "False" },
        )
    }
}

fn seeks_dict<'py>(py: Python<'py>, s: &SeekCounts) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("seq", s.seq)?;
    d.set_item("near", s.near)?;
    d.set_item("mid", s.mid)?;
    d.set_item("far", s.far)?;
    Ok(d)
}

fn report_dict<'py>(py: Python<'py>, r: &SimReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("seconds", r.seconds)?;
    d.set_item("client_seconds", r.client_seconds.clone())?;
    d.set_item("rpcs", r.rpcs)?;
    d.set_item("bytes", r.bytes)?;
    d.set_item("target_busy_seconds", r.target_busy_seconds.clone())?;
    d.set_item("target_rpcs", r.target_rpcs.clone())?;
    d.set_item("seeks", seeks_dict(py, &r.seeks)?)?;
    Ok(d)
}

/// Adds `StorageModel` to the module.
impl PyStorageModel {
    /// The model itself, for the other bindings that price on it.
    pub(crate) fn striping(&self) -> &Striping {
        &self.inner
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStorageModel>()
}
