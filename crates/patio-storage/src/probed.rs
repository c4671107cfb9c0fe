//! The striped model's parameters measured on this machine (`patio store probe`), saved
//! once per machine and loaded as the preset `probed` ([`crate::Striping::by_name`]).
//!
//! The file is versioned JSON ([`FORMAT_VERSION`]) at `$XDG_CONFIG_HOME/patio/`
//! [`FILE_NAME`] (else `$HOME/.config/patio/`), written through a temporary file,
//! fsync and rename, so a reader sees the old or the new probe, never half of one. It
//! records the host it was measured on: a home directory shared between machines does
//! not lend one machine's disk to another ([`load_for_this_host`] refuses it).
//! The measurement itself is in [`crate::probe`].

use crate::striped::Striping;
use serde::{Deserialize, Serialize};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Version of the saved file's format.
pub const FORMAT_VERSION: u32 = 1;

/// Name of the saved file inside the configuration directory.
pub const FILE_NAME: &str = "store-probed.json";

/// The striped model's parameters as saved (a local file system is one target; the
/// jitter is 0 and the seed the default: a probe measures the device, not noise).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProbedParams {
    pub targets: usize,
    pub stripe_size: u64,
    pub rpc_size: u64,
    pub page_size: u64,
    pub latency_seq: f64,
    pub latency_near: f64,
    pub latency_mid: f64,
    pub latency_far: f64,
    pub bandwidth: f64,
    pub request_latency: f64,
}

impl ProbedParams {
    /// The striping these parameters describe (page rounding, no jitter).
    pub fn striping(&self) -> Striping {
        Striping {
            targets: self.targets,
            stripe_size: self.stripe_size,
            rpc_size: self.rpc_size,
            page_size: self.page_size,
            latency_seq: self.latency_seq,
            latency_near: self.latency_near,
            latency_mid: self.latency_mid,
            latency_far: self.latency_far,
            bandwidth: self.bandwidth,
            request_latency: self.request_latency,
            ..Striping::hdd()
        }
    }
}

/// Median seconds per request of one probe phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// `seq` (requests back to back, of `bytes` each) or a seek class `near`, `mid`,
    /// `far` (single pages `distance` bytes apart).
    pub kind: String,
    pub bytes: u64,
    pub distance: u64,
    /// Timed requests (the first of each phase is not timed: it seeks from elsewhere).
    pub requests: usize,
    pub seconds: f64,
}

/// One probe: where and how it was measured, the fitted parameters and the samples.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Probe {
    pub version: u32,
    pub host: String,
    /// The directory whose file system was measured.
    pub directory: String,
    /// The block device under it (`/sys/dev/block`), when there is one.
    pub device: Option<String>,
    /// `O_DIRECT` reads; otherwise buffered reads after fsync + `POSIX_FADV_DONTNEED`.
    pub direct_io: bool,
    /// Where `rpc_size` came from: the device's `max_sectors_kb` or a default.
    pub rpc_source: String,
    /// Size of the scratch file read.
    pub probe_bytes: u64,
    /// Unix seconds.
    pub measured_at: f64,
    pub striping: ProbedParams,
    pub samples: Vec<Sample>,
    /// Seek classes the scratch file was too small to measure (they take the next
    /// shorter class's latency).
    pub unmeasured: Vec<String>,
}

/// Why a probe could not be loaded or saved.
#[derive(Debug, thiserror::Error)]
pub enum ProbedError {
    #[error("no probed store parameters at {0}; run `patio store probe`")]
    Missing(PathBuf),
    #[error("probed store parameters at {path} were measured on {theirs}, not on this machine ({ours}); run `patio store probe`")]
    OtherHost {
        path: PathBuf,
        theirs: String,
        ours: String,
    },
    #[error("{path}: not a patio store probe (version {FORMAT_VERSION}): {msg}; run `patio store probe`")]
    Format { path: PathBuf, msg: String },
    #[error("no configuration directory: set XDG_CONFIG_HOME or HOME")]
    NoConfigDir,
    #[error("{path}: {error}")]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ProbedError + '_ {
    move |error| ProbedError::Io {
        path: path.to_path_buf(),
        error,
    }
}

/// `$XDG_CONFIG_HOME/patio/store-probed.json`, else `$HOME/.config/patio/...`.
pub fn default_path() -> Result<PathBuf, ProbedError> {
    let nonempty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    let base = match nonempty("XDG_CONFIG_HOME") {
        Some(x) => PathBuf::from(x),
        None => PathBuf::from(nonempty("HOME").ok_or(ProbedError::NoConfigDir)?).join(".config"),
    };
    Ok(base.join("patio").join(FILE_NAME))
}

/// This machine's host name (`/proc/sys/kernel/hostname`, `$HOSTNAME`, else `unknown`).
pub fn host_name() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| "unknown".into())
}

/// Reads and checks the probe at `path` (any host).
pub fn load(path: &Path) -> Result<Probe, ProbedError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ProbedError::Missing(path.to_path_buf()))
        }
        Err(e) => return Err(io_err(path)(e)),
    };
    let format = |msg: String| ProbedError::Format {
        path: path.to_path_buf(),
        msg,
    };
    let probe: Probe = serde_json::from_str(&text).map_err(|e| format(e.to_string()))?;
    if probe.version != FORMAT_VERSION {
        return Err(format(format!("version {}", probe.version)));
    }
    probe
        .striping
        .striping()
        .validate()
        .map_err(|e| format(e.to_string()))?;
    Ok(probe)
}

/// [`load`], refusing a probe measured on another host.
pub fn load_for_this_host(path: &Path) -> Result<Probe, ProbedError> {
    let probe = load(path)?;
    let ours = host_name();
    if probe.host != ours {
        return Err(ProbedError::OtherHost {
            path: path.to_path_buf(),
            theirs: probe.host,
            ours,
        });
    }
    Ok(probe)
}

/// The striping of this machine's saved probe (the preset `probed`).
pub fn load_default() -> Result<Striping, ProbedError> {
    Ok(load_for_this_host(&default_path()?)?.striping.striping())
}

/// Saves `probe` at `path` atomically: a temporary file beside it, fsync, rename, and
/// fsync of the directory. Creates the directory.
pub fn save(probe: &Probe, path: &Path) -> Result<(), ProbedError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(io_err(dir))?;
    let tmp = dir.join(format!(".{FILE_NAME}.{}.tmp", std::process::id()));
    let text = serde_json::to_string_pretty(probe).expect("a probe serializes");
    let written = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        fs::rename(&tmp, path)?;
        fs::File::open(dir)?.sync_all()
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map_err(io_err(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn example() -> Probe {
        Probe {
            version: FORMAT_VERSION,
            host: host_name(),
            directory: "/data".into(),
            device: Some("vda".into()),
            direct_io: true,
            rpc_source: "default".into(),
            probe_bytes: 1 << 20,
            measured_at: 1.0,
            striping: ProbedParams {
                targets: 1,
                stripe_size: 1 << 20,
                rpc_size: 1 << 20,
                page_size: 4096,
                latency_seq: 1e-5,
                latency_near: 1e-4,
                latency_mid: 2e-4,
                latency_far: 3e-4,
                bandwidth: 1e9,
                request_latency: 0.0,
            },
            samples: vec![],
            unmeasured: vec!["far".into()],
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("patio-probed-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn saved_probes_load_back_and_refuse_other_hosts_and_versions() {
        let dir = scratch("roundtrip");
        let path = dir.join("sub").join(FILE_NAME);
        let p = example();
        save(&p, &path).unwrap();
        assert_eq!(load_for_this_host(&path).unwrap(), p);
        assert_eq!(p.striping.striping().latency_far, 3e-4);
        assert_eq!(fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);

        save(
            &Probe {
                host: "elsewhere".into(),
                ..example()
            },
            &path,
        )
        .unwrap();
        let e = load_for_this_host(&path).unwrap_err();
        assert!(e.to_string().contains("measured on elsewhere"), "{e}");
        assert!(load(&path).is_ok());

        save(
            &Probe {
                version: 99,
                ..example()
            },
            &path,
        )
        .unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("version 99"));
        let mut bad = example();
        bad.striping.bandwidth = 0.0;
        save(&bad, &path).unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("bandwidth"));
        fs::write(&path, "{").unwrap();
        assert!(matches!(load(&path), Err(ProbedError::Format { .. })));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_probe_says_where_and_what_to_run() {
        let path = scratch("missing").join(FILE_NAME);
        let e = load(&path).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "no probed store parameters at {}; run `patio store probe`",
                path.display()
            )
        );
    }
}
