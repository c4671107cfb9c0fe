//! The harness of `patio bench cache`: a `patio mount cache` process per policy run
//! (fresh cache directory), client processes reading through the kernel mount, and
//! the accounting that keeps the policies comparable.
//!
//! **Fairness.** Every policy gets the same idle time between passes (the bench sleeps
//! the same span after every pass whatever the policy). Work a mount does in those
//! idle periods — the group policy's segment builds and writes, every policy's table
//! saves — is timed by the mount (`idle_work_ns`) and charged: a policy's seconds are
//! the timed passes plus its idle work. Grouping I/O is reported against the bytes
//! the clients read (`grouping_io_ratio`).

use super::workloads::{Req, Workload};
use crate::size_arg::Size;
use anyhow::{bail, Context, Result};
use patio_harness::{End, MountProcess};
use serde::Serialize;
use serde_json::Value;
use std::ffi::OsString;
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Successor-link setting of the mount: link a successor seen `j` of the last `k`
/// times.
#[derive(Clone, Copy)]
pub struct Link {
    pub j: usize,
    pub k: usize,
}

/// The mount's own default.
pub const DEFAULT_LINK: Link = Link { j: 2, k: 4 };

pub fn parse_link(s: &str) -> Result<Link> {
    let bad = || anyhow::anyhow!("--sweep-jk: {s:?} is not J/K with 1 <= J <= K");
    let (j, k) = s.split_once('/').ok_or_else(bad)?;
    let (j, k): (usize, usize) = (
        j.trim().parse().map_err(|_| bad())?,
        k.trim().parse().map_err(|_| bad())?,
    );
    if j == 0 || j > k {
        return Err(bad());
    }
    Ok(Link { j, k })
}

/// The striped storage model of model rows: a preset and its overrides, as the mount
/// takes them (`--store`, `--store-targets`, `--store-stripe-kib`): the preset is
/// any name the striping accepts, passed through as given.
#[derive(Clone)]
pub struct Model {
    pub preset: String,
    pub targets: Option<usize>,
    pub stripe_kib: Option<u64>,
}

/// What a mount is given: memory and disk budgets (bytes), segment size (bytes),
/// successor-link setting, and what SOURCE is read through: `"model"` (`model`, the
/// striped storage model) or `"real"` (the local disk itself; SOURCE is read with
/// `O_DIRECT` either way, so the page cache never serves it).
#[derive(Clone)]
pub struct Setup {
    pub memory: u64,
    pub disk: u64,
    pub segment: u64,
    pub link: Link,
    pub storage: &'static str,
    pub model: Model,
}

/// The mount's idle threshold.
pub const IDLE_MS: u64 = 300;
/// The idle span after every pass, the same for every policy.
pub const GAP_MS: u64 = IDLE_MS * 2 + 300;

/// A `patio mount cache` of `dir/src` on `dir/mnt` for `policy`, started through
/// patio-harness (the one harness tests and benchmarks mount through).
fn mount(dir: &Path, policy: &str, setup: &Setup) -> Result<MountProcess> {
    let (src, mnt, cache, stats) = (
        dir.join("src"),
        dir.join("mnt"),
        dir.join(format!("cache-{policy}")),
        dir.join("stats.json"),
    );
    let _ = std::fs::remove_dir_all(&cache);
    let _ = std::fs::remove_file(&stats);
    std::fs::create_dir_all(&mnt)?;
    let mut argv: Vec<OsString> = Vec::new();
    // This very executable, even if a rebuild replaced the file meanwhile.
    argv.push("/proc/self/exe".into());
    argv.extend(["mount", "cache"].map(OsString::from));
    argv.extend([src.into_os_string(), mnt.clone().into_os_string()]);
    argv.extend(["--cache-dir".into(), cache.into_os_string()]);
    if setup.storage == "model" {
        argv.extend(["--store", setup.model.preset.as_str()].map(OsString::from));
        if let Some(n) = setup.model.targets {
            argv.extend(["--store-targets".into(), n.to_string().into()]);
        }
        if let Some(k) = setup.model.stripe_kib {
            argv.extend(["--store-stripe-kib".into(), k.to_string().into()]);
        }
    }
    for (option, value) in [
        ("--policy", policy.to_string()),
        ("--memory", Size(setup.memory).to_string()),
        ("--disk", Size(setup.disk).to_string()),
        ("--segment", Size(setup.segment).to_string()),
        ("--idle-ms", IDLE_MS.to_string()),
        ("--link-j", setup.link.j.to_string()),
        ("--link-k", setup.link.k.to_string()),
    ] {
        argv.extend([OsString::from(option), OsString::from(value)]);
    }
    argv.extend(["--stats-json".into(), stats.clone().into_os_string()]);
    MountProcess::start(&argv, &mnt, Some(&stats), Duration::from_secs(20), None)
        .map_err(|e| anyhow::anyhow!("{e}"))
}

/// Ends the mount (SIGINT), checks that it ended cleanly, and returns its counters.
fn stop(mut m: MountProcess) -> Result<Value> {
    m.end(End::Signal(libc::SIGINT), patio_harness::EXIT)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let text = m.stats_text().map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(serde_json::from_str(&text)?)
}

/// What one client process reads: its requests of every view, each view `passes`
/// times.
#[derive(Serialize, serde::Deserialize)]
struct ClientSpec {
    file: PathBuf,
    passes: usize,
    views: Vec<Vec<Req>>,
}

/// The client process: opens the file once, then for every pass waits for a line on
/// stdin, reads its requests and answers with the bytes read (or `error: …`).
pub fn client_main(spec: &Path) -> Result<()> {
    let text = std::fs::read_to_string(spec)
        .with_context(|| format!("cannot read client spec {}", spec.display()))?;
    let spec: ClientSpec = serde_json::from_str(&text)
        .with_context(|| format!("bad client spec {}", spec.display()))?;
    let f = File::open(&spec.file).with_context(|| format!("cannot open {}", spec.file.display()));
    let mut stdin = BufReader::new(std::io::stdin().lock());
    let mut out = std::io::stdout().lock();
    let mut buf = Vec::new();
    let mut line = String::new();
    for view in &spec.views {
        for _ in 0..spec.passes {
            line.clear();
            if stdin.read_line(&mut line)? == 0 {
                return Ok(()); // the bench went away
            }
            let r = (|| -> Result<u64> {
                let f = f.as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))?;
                let mut total = 0;
                for &(off, len) in view {
                    buf.resize(len as usize, 0);
                    total += f
                        .read_at(&mut buf, off)
                        .with_context(|| format!("reading {} at {off}", spec.file.display()))?
                        as u64;
                }
                Ok(total)
            })();
            match r {
                Ok(n) => writeln!(out, "{n}")?,
                Err(e) => writeln!(out, "error: {e:#}")?,
            }
            out.flush()?;
        }
    }
    Ok(())
}

/// A started client process and its pipes.
struct Client {
    child: Child,
    input: std::process::ChildStdin,
    output: BufReader<std::process::ChildStdout>,
}

/// Reads every view of `w` `w.passes` times through the mount: one process per
/// client, each with one open handle for the whole run (so each client is one
/// successor stream), all told to start each pass together; a pass ends when every
/// client answered. After every pass the mount is left idle for [`GAP_MS`]. Returns
/// the seconds of every pass and the bytes read.
fn run_workload(dir: &Path, file: &Path, w: &Workload) -> Result<(Vec<f64>, u64)> {
    let clients = w.views[0].len();
    let mut procs = Vec::new();
    for c in 0..clients {
        let spec = dir.join(format!("client-{c}.json"));
        let body = ClientSpec {
            file: file.to_path_buf(),
            passes: w.passes,
            views: w.views.iter().map(|v| v[c].clone()).collect(),
        };
        std::fs::write(&spec, serde_json::to_vec(&body)?)?;
        let mut child = Command::new("/proc/self/exe")
            .args(["bench", "cache", "--client"])
            .arg(&spec)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .context("cannot start a client process")?;
        let input = child.stdin.take().expect("piped");
        let output = BufReader::new(child.stdout.take().expect("piped"));
        procs.push(Client {
            child,
            input,
            output,
        });
    }
    let result = (|| -> Result<(Vec<f64>, u64)> {
        let (mut seconds, mut bytes) = (Vec::new(), 0u64);
        let mut line = String::new();
        for _ in 0..w.views.len() * w.passes {
            let start = Instant::now();
            for p in procs.iter_mut() {
                p.input.write_all(b"go\n")?;
                p.input.flush()?;
            }
            for p in procs.iter_mut() {
                line.clear();
                if p.output.read_line(&mut line)? == 0 {
                    bail!("a client process ended early");
                }
                let l = line.trim();
                if let Some(e) = l.strip_prefix("error: ") {
                    bail!("a client failed: {e}");
                }
                bytes += l.parse::<u64>().context("a client's answer")?;
            }
            seconds.push(start.elapsed().as_secs_f64());
            std::thread::sleep(Duration::from_millis(GAP_MS));
        }
        Ok((seconds, bytes))
    })();
    for mut p in procs {
        drop(p.input);
        if result.is_err() {
            let _ = p.child.kill();
        }
        let _ = p.child.wait();
    }
    result
}

/// One policy over one workload (the median run of several).
#[derive(Serialize, Clone)]
pub struct PolicyResult {
    pub storage: &'static str,
    /// Timed passes plus the work the mount did in idle periods.
    pub seconds: f64,
    pub pass_seconds: f64,
    /// Seconds of every pass, in order (each view `passes` times).
    pub each_pass_seconds: Vec<f64>,
    pub idle_work_seconds: f64,
    /// Client bytes over `seconds`.
    pub bandwidth_mbps: f64,
    /// `bandwidth_mbps` of every run (the median one is reported).
    pub runs_mbps: Vec<f64>,
    pub bytes: u64,
    pub group_hit_rate: f64,
    pub hit_rate: f64,
    pub grouping_io_bytes: u64,
    pub grouping_source_bytes: u64,
    pub grouping_local_bytes: u64,
    /// Grouping I/O (SOURCE + local) over the bytes the clients read.
    pub grouping_io_ratio: f64,
    /// SOURCE bytes read for grouping over the bytes the clients read.
    pub grouping_source_ratio: f64,
    pub source_requests: u64,
    pub source_bytes: u64,
    pub segment_read_bytes: u64,
    pub segment_write_bytes: u64,
    pub peak_memory_bytes: u64,
    /// Every counter of the mount at its end (`patio mount cache --stats-json`).
    pub counters: Value,
}

/// One run: mount, every view `passes` times, unmount.
fn run_once(dir: &Path, w: &Workload, policy: &str, setup: &Setup) -> Result<PolicyResult> {
    let m = mount(dir, policy, setup)?;
    let file = m.mnt().join("source.dat");
    let run = run_workload(dir, &file, w);
    let stats = stop(m)?;
    let (each_pass_seconds, bytes) = run?;
    let pass_seconds = each_pass_seconds.iter().sum::<f64>();
    let g = |k: &str| stats[k].as_u64().unwrap_or(0);
    let idle = g("idle_work_ns") as f64 / 1e9;
    let seconds = pass_seconds + idle;
    let per_client = |b: u64| b as f64 / bytes.max(1) as f64;
    Ok(PolicyResult {
        storage: setup.storage,
        seconds,
        pass_seconds,
        each_pass_seconds,
        idle_work_seconds: idle,
        bandwidth_mbps: bytes as f64 / seconds / 1e6,
        runs_mbps: Vec::new(),
        bytes,
        group_hit_rate: stats["group_hit_rate"].as_f64().unwrap_or(0.0),
        hit_rate: stats["hit_rate"].as_f64().unwrap_or(0.0),
        grouping_io_bytes: g("grouping_io_bytes"),
        grouping_source_bytes: g("grouping_source_bytes"),
        grouping_local_bytes: g("grouping_local_bytes"),
        grouping_io_ratio: per_client(g("grouping_io_bytes")),
        grouping_source_ratio: per_client(g("grouping_source_bytes")),
        source_requests: g("source_requests"),
        source_bytes: g("source_bytes"),
        segment_read_bytes: g("segment_read_bytes"),
        segment_write_bytes: g("segment_write_bytes"),
        peak_memory_bytes: g("peak_memory_bytes"),
        counters: stats,
    })
}

/// `repeat` runs of one policy over one workload; the run of median bandwidth.
pub fn run_policy(
    dir: &Path,
    w: &Workload,
    policy: &str,
    setup: &Setup,
    repeat: usize,
) -> Result<PolicyResult> {
    let mut runs = (0..repeat.max(1))
        .map(|_| run_once(dir, w, policy, setup))
        .collect::<Result<Vec<_>>>()?;
    let all: Vec<f64> = runs.iter().map(|r| r.bandwidth_mbps).collect();
    runs.sort_by(|a, b| a.bandwidth_mbps.total_cmp(&b.bandwidth_mbps));
    let mut mid = runs.swap_remove(runs.len() / 2);
    mid.runs_mbps = all;
    Ok(mid)
}
