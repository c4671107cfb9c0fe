//! `patio store probe`: calibrates the striped model ([`crate::Striping`]) on the real
//! file system of a directory, with the page cache out of the way.
//!
//! A scratch file of random data is written, fsynced and dropped from the page cache,
//! then read with `O_DIRECT` (where the file system refuses it: buffered reads, the file
//! fsynced and dropped with `POSIX_FADV_DONTNEED` before every read). Every read of the
//! probe touches bytes no earlier read touched ([`plan`] hands each phase its own region
//! and moves forward inside it), so neither the page cache nor a device cache can serve
//! a repeat. Each request is timed on its own; a phase's figure is the median.
//!
//! * `rpc_size` (and `stripe_size`, one target): the device's largest request
//!   (`/sys/dev/block/M:m/queue/max_sectors_kb`), else [`DEFAULT_RPC`]; `page_size` the
//!   system page size.
//! * `seq` phases: requests of 4 KiB .. `rpc_size` back to back; least squares of
//!   seconds against bytes gives `latency_seq` (intercept) and `bandwidth` (1/slope).
//! * `near`, `mid`, `far` phases: single pages alternating between two cursors `d`
//!   apart (`d` = rpc/2, 5 rpc, and as far as the file allows beyond 10 rpc), each
//!   cursor stepping forward by at most [`SEEK_STEP`]; the class's latency is the median minus
//!   a page's transfer, at least `latency_seq`. A class the file is too small for takes
//!   the next shorter class's latency and is listed in `unmeasured`.

use crate::probed::{host_name, Probe, ProbedParams, Sample, FORMAT_VERSION};
use crate::rng::Rng;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `rpc_size` when the device's largest request is not known (no block device).
pub const DEFAULT_RPC: u64 = 1 << 20;
/// How far each seek cursor moves forward between its reads (at most).
pub const SEEK_STEP: u64 = 64 << 10;

/// How much to measure.
#[derive(Clone, Copy, Debug)]
pub struct ProbeOptions {
    /// Scratch file size in bytes (at least 4 MiB).
    pub bytes: u64,
    /// Timed requests per phase (at least 3).
    pub samples: usize,
}

impl Default for ProbeOptions {
    fn default() -> Self {
        ProbeOptions {
            bytes: 256 << 20,
            samples: 16,
        }
    }
}

/// Why a probe failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("{0}")]
    Invalid(String),
    #[error("{path}: {what}: {error}")]
    Io {
        path: PathBuf,
        what: &'static str,
        error: std::io::Error,
    },
}

/// One phase of the probe: its reads `(offset, len)` in order (the first is not timed).
#[derive(Clone, Debug, PartialEq)]
pub struct Phase {
    pub kind: &'static str,
    pub bytes: u64,
    pub distance: u64,
    pub reads: Vec<(u64, u64)>,
}

/// The probe's reads inside a file of `size` bytes for a device of `rpc`-byte requests
/// and `page`-byte pages: `seq` phases then `near`, `mid`, `far`, each in its own region
/// of the file, no byte read twice. Classes that do not fit are left out.
pub fn plan(size: u64, rpc: u64, page: u64, samples: usize) -> Vec<Phase> {
    let n = samples as u64 + 1;
    let mut out = Vec::new();
    let mut sizes: Vec<u64> = [page, 64 << 10, 256 << 10, 1 << 20, rpc]
        .into_iter()
        .filter(|&s| s >= page && s <= rpc)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    // Half the file for the sequential phases, in equal regions.
    let region = (size / 2 / sizes.len() as u64) / page * page;
    let mut cursor = 0;
    for s in sizes {
        let k = (region / s).min(n);
        if k >= 4 {
            out.push(Phase {
                kind: "seq",
                bytes: s,
                distance: 0,
                reads: (0..k).map(|i| (cursor + i * s, s)).collect(),
            });
        }
        cursor += region;
    }
    // Seeks: two cursors `d` apart, each stepping forward; a region of d + k * step.
    let mut seek = |kind: &'static str, d: u64, cursor: &mut u64| {
        let step = (d / n).clamp(2 * page, SEEK_STEP) / page * page;
        let k = ((d - page) / step + 1).min(n);
        if k < 3 || *cursor + d + k * step > size {
            return false;
        }
        let mut reads = Vec::new();
        for i in 0..k {
            reads.push((*cursor + i * step, page));
            reads.push((*cursor + d + i * step, page));
        }
        out.push(Phase {
            kind,
            bytes: page,
            distance: d - page,
            reads,
        });
        *cursor += d + k * step;
        true
    };
    let near = (rpc / 2).max(2 * page) / page * page;
    seek("near", near, &mut cursor);
    seek("mid", (5 * rpc) / page * page, &mut cursor);
    // Far: as far apart as the rest of the file allows (beyond 10 rpc + a step).
    let rest = size.saturating_sub(cursor).saturating_sub(n * SEEK_STEP);
    let far = rest.max(11 * rpc + SEEK_STEP).div_ceil(page) * page;
    seek("far", far, &mut cursor);
    out
}

/// `(device name, max request bytes)` of the block device holding `dir`.
fn block_device(dir: &Path) -> Option<(String, u64)> {
    let dev = fs::metadata(dir).ok()?.dev();
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    let sys = fs::canonicalize(format!("/sys/dev/block/{major}:{minor}")).ok()?;
    let queue = if sys.join("partition").exists() {
        sys.parent()?.join("queue")
    } else {
        sys.join("queue")
    };
    let kb: u64 = fs::read_to_string(queue.join("max_sectors_kb"))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let name = sys.file_name()?.to_string_lossy().into_owned();
    Some((name, (kb * 1024).max(4096)))
}

fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as u64
    } else {
        4096
    }
}

fn drop_cache(f: &File) -> std::io::Result<()> {
    f.sync_all()?;
    // SAFETY: a valid open descriptor; advice only.
    let rc = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    if rc != 0 {
        return Err(std::io::Error::from_raw_os_error(rc));
    }
    Ok(())
}

/// Removes the scratch file however the probe ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// Least squares `seconds = a + b * bytes` over `(bytes, seconds)`: `(a, b)`.
pub fn line_fit(points: &[(f64, f64)]) -> (f64, f64) {
    let n = points.len() as f64;
    let (sx, sy) = points
        .iter()
        .fold((0.0, 0.0), |(x, y), &(px, py)| (x + px, y + py));
    let (mx, my) = (sx / n, sy / n);
    let (mut sxx, mut sxy) = (0.0, 0.0);
    for &(x, y) in points {
        sxx += (x - mx) * (x - mx);
        sxy += (x - mx) * (y - my);
    }
    let b = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (my - b * mx, b)
}

/// The striped model's parameters from the probe's samples (see the module comment).
/// Returns the parameters and the seek classes without a sample.
pub fn fit(samples: &[Sample], rpc: u64, page: u64) -> (ProbedParams, Vec<String>) {
    let seq: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| s.kind == "seq")
        .map(|s| (s.bytes as f64, s.seconds))
        .collect();
    let (a, b) = line_fit(&seq);
    let fastest = seq.iter().map(|&(x, y)| x / y).fold(0.0_f64, f64::max);
    let bandwidth = if b > 0.0 && (1.0 / b).is_finite() {
        1.0 / b
    } else {
        fastest
    };
    let smallest = seq.iter().map(|&(_, y)| y).fold(f64::INFINITY, f64::min);
    let page_transfer = page as f64 / bandwidth;
    let latency_seq = if a > 0.0 {
        a
    } else if smallest - page_transfer > 0.0 {
        smallest - page_transfer
    } else {
        smallest
    };
    let mut unmeasured = Vec::new();
    let mut last = latency_seq;
    let mut class = |kind: &str| {
        match samples.iter().find(|s| s.kind == kind) {
            Some(s) => last = (s.seconds - page_transfer).max(latency_seq),
            None => unmeasured.push(kind.to_string()),
        }
        last
    };
    let (latency_near, latency_mid, latency_far) = (class("near"), class("mid"), class("far"));
    let params = ProbedParams {
        targets: 1,
        stripe_size: rpc,
        rpc_size: rpc,
        page_size: page,
        latency_seq,
        latency_near,
        latency_mid,
        latency_far,
        bandwidth,
        request_latency: 0.0,
    };
    (params, unmeasured)
}

/// Measures the file system of `dir` (see the module comment).
pub fn measure(dir: &Path, opts: ProbeOptions) -> Result<Probe, ProbeError> {
    if opts.bytes < 4 << 20 {
        return Err(ProbeError::Invalid(format!(
            "the scratch file needs at least 4 MiB, not {} bytes",
            opts.bytes
        )));
    }
    if opts.samples < 3 {
        return Err(ProbeError::Invalid(format!(
            "a phase needs at least 3 samples, not {}",
            opts.samples
        )));
    }
    let io = |path: &Path, what: &'static str| {
        let path = path.to_path_buf();
        move |error| ProbeError::Io { path, what, error }
    };
    let dir = fs::canonicalize(dir).map_err(io(dir, "not a directory"))?;
    if !dir.is_dir() {
        return Err(ProbeError::Invalid(format!(
            "{}: not a directory",
            dir.display()
        )));
    }
    let page = page_size();
    let (device, rpc, rpc_source) = match block_device(&dir) {
        Some((name, rpc)) => (Some(name), rpc, "max_sectors_kb".to_string()),
        None => (None, DEFAULT_RPC, "default".to_string()),
    };
    let size = opts.bytes.div_ceil(1 << 20) << 20;
    let path = dir.join(format!(".patio-store-probe-{}", std::process::id()));
    let scratch = Scratch(path.clone());
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io(&path, "create"))?;
        let mut rng = Rng::new(size ^ std::process::id() as u64);
        let mut block = vec![0u8; 1 << 20];
        for _ in 0..size >> 20 {
            for w in block.chunks_exact_mut(8) {
                w.copy_from_slice(&rng.next_u64().to_le_bytes());
            }
            f.write_all(&block).map_err(io(&path, "write"))?;
        }
        drop_cache(&f).map_err(io(&path, "fsync"))?;
    }
    let (file, direct_io) = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&path)
    {
        Ok(f) => (f, true),
        Err(_) => (File::open(&path).map_err(io(&path, "open"))?, false),
    };
    let align = 4096.max(page) as usize;
    let mut buf = vec![0u8; rpc as usize + align];
    let off = buf.as_ptr().align_offset(align);
    let buf = &mut buf[off..off + rpc as usize];
    let mut samples = Vec::new();
    for phase in plan(size, rpc, page, opts.samples) {
        let mut times = Vec::with_capacity(phase.reads.len());
        for (i, &(o, n)) in phase.reads.iter().enumerate() {
            if !direct_io {
                drop_cache(&file).map_err(io(&path, "drop the page cache"))?;
            }
            let t0 = Instant::now();
            file.read_exact_at(&mut buf[..n as usize], o)
                .map_err(io(&path, "read"))?;
            if i > 0 {
                times.push(t0.elapsed().as_secs_f64());
            }
        }
        samples.push(Sample {
            kind: phase.kind.to_string(),
            bytes: phase.bytes,
            distance: phase.distance,
            requests: times.len(),
            seconds: median(&mut times),
        });
    }
    drop(file);
    drop(scratch);
    let (striping, unmeasured) = fit(&samples, rpc, page);
    let measured_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0);
    Ok(Probe {
        version: FORMAT_VERSION,
        host: host_name(),
        directory: dir.display().to_string(),
        device,
        direct_io,
        rpc_source,
        probe_bytes: size,
        measured_at,
        striping,
        samples,
        unmeasured,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// No byte is read twice, every read is inside the file, seek phases keep
        /// their class's distance between consecutive reads.
        #[test]
        fn the_plan_never_reads_a_byte_twice(
            mib in 4u64..600, rpc_pages in prop::sample::select(vec![16u64, 32, 256, 1024]),
            samples in 3usize..40,
        ) {
            let (page, size) = (4096, mib << 20);
            let rpc = rpc_pages * page;
            let phases = plan(size, rpc, page, samples);
            let mut all: Vec<(u64, u64)> = phases.iter().flat_map(|p| p.reads.clone()).collect();
            all.sort_unstable();
            for w in all.windows(2) {
                prop_assert!(w[0].0 + w[0].1 <= w[1].0, "{:?} overlaps {:?}", w[0], w[1]);
            }
            prop_assert!(all.last().is_none_or(|&(o, n)| o + n <= size));
            let s = crate::Striping { rpc_size: rpc, ..crate::Striping::hdd() };
            for p in &phases {
                prop_assert!(p.reads.len() >= 4);
                for w in p.reads.windows(2) {
                    let (end, next) = (w[0].0 + w[0].1, w[1].0);
                    let d = end.abs_diff(next);
                    let want = match p.kind {
                        "seq" => crate::SeekClass::Seq,
                        "near" => crate::SeekClass::Near,
                        "mid" => crate::SeekClass::Mid,
                        _ => crate::SeekClass::Far,
                    };
                    prop_assert_eq!(s.seek_class(d), want, "{} {:?}", p.kind, w);
                }
            }
            if size >= 64 * rpc + (samples as u64 + 1) * 4 * SEEK_STEP {
                let kinds: Vec<&str> = phases.iter().map(|p| p.kind).collect();
                prop_assert!(kinds.ends_with(&["near", "mid", "far"]), "{:?}", kinds);
            }
        }
    }

    fn sample(kind: &str, bytes: u64, seconds: f64) -> Sample {
        Sample {
            kind: kind.into(),
            bytes,
            distance: 0,
            requests: 8,
            seconds,
        }
    }

    #[test]
    fn fit_recovers_the_parameters_of_exact_samples() {
        let (lat, bw, page) = (1e-4, 200e6, 4096u64);
        let mut s: Vec<Sample> = [4096u64, 65536, 1 << 20]
            .iter()
            .map(|&b| sample("seq", b, lat + b as f64 / bw))
            .collect();
        s.push(sample("near", page, 2e-3 + page as f64 / bw));
        s.push(sample("mid", page, 5e-3 + page as f64 / bw));
        let (p, unmeasured) = fit(&s, 1 << 20, page);
        assert!((p.latency_seq - lat).abs() < 1e-9, "{p:?}");
        assert!((p.bandwidth / bw - 1.0).abs() < 1e-6);
        assert!((p.latency_near - 2e-3).abs() < 1e-9);
        assert!((p.latency_mid - 5e-3).abs() < 1e-9);
        assert_eq!(p.latency_far, p.latency_mid);
        assert_eq!(unmeasured, vec!["far".to_string()]);
        p.striping().validate().unwrap();
        // Noise that makes the slope negative falls back to the fastest rate seen, and
        // a seek faster than a sequential read is priced as a sequential read.
        let noisy = vec![
            sample("seq", 4096, 3e-4),
            sample("seq", 65536, 2e-4),
            sample("near", 4096, 1e-6),
        ];
        let (p, _) = fit(&noisy, 65536, 4096);
        assert!((p.bandwidth - 65536.0 / 2e-4).abs() < 1e-3);
        assert!(p.latency_seq > 0.0 && p.latency_near == p.latency_seq);
    }

    #[test]
    fn measuring_a_temporary_directory_gives_positive_finite_parameters() {
        let dir = std::env::temp_dir().join(format!("patio-probe-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = measure(
            &dir,
            ProbeOptions {
                bytes: 8 << 20,
                samples: 4,
            },
        )
        .unwrap();
        let s = &p.striping;
        for v in [
            s.latency_seq,
            s.latency_near,
            s.latency_mid,
            s.latency_far,
            s.bandwidth,
        ] {
            assert!(v.is_finite() && v > 0.0, "{p:?}");
        }
        s.striping().validate().unwrap();
        assert!(p.samples.iter().all(|x| x.requests >= 3));
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            0,
            "the scratch file is removed"
        );
        fs::remove_dir_all(&dir).unwrap();
        assert!(measure(&dir, ProbeOptions::default()).is_err());
        assert!(measure(
            Path::new("."),
            ProbeOptions {
                bytes: 1,
                samples: 4
            }
        )
        .is_err());
    }
}
