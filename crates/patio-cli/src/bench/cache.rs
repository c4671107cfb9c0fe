//! `patio bench cache`: the segment-grouping cache against no cache and against a
//! plain LRU block cache of the same memory and disk capacity, in one run, through
//! real mounts. Each policy gets its own `patio mount cache` process (a fresh cache
//! directory) over one SOURCE file behind the HDD-like striped model; each client is
//! a process of its own (this executable started again as `patio bench cache
//! --client SPEC`, one open handle for the whole run) reading through the kernel mount
//! with `pread`, one pass each time the bench tells it to on its stdin.
//!
//! Workloads (every pass reads the same requests; passes are separated by idle
//! periods, not timed, in which the group policy builds and writes its groups):
//! * `zoom` — noncontig-like: each client reads `elmtcount` pieces of `veclen`
//!   bytes spread over the file, `veclen × elmtcount` fixed, veclen 4 KiB → 256 KiB;
//! * `tile` — mpi-tile-io-like: a 2 × 2 grid of tiles of a row-major 2-D array, tiles
//!   overlapping their neighbours by 0, 25 and 50 % of their width and height;
//! * `ior` — IOR-like: each client reads its share of a region in transfer-size
//!   requests through a file view that changes every pass (segmented, then
//!   interleaved across clients, then segmented again, …).
//!
//! Capacities keep the paper's ratio memory : segment store : SOURCE file = 1 : 20 :
//! 100. The segment-size sweep reruns `zoom` with `group` at 1–64 MiB segments
//! (memory raised to one segment where a segment is larger); the j/k sweep reruns
//! every selected workload with `group` at each successor-link setting.

use super::{grouped, human_bytes, sig3, Table};
use anyhow::{bail, Context, Result};
use patio_prefetch::rng::Rng;
use patio_prefetch::striped::Striping;
use serde::Serialize;
use serde_json::{json, Value};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Run one workload only (default: all three).
    #[arg(long, value_parser = ["zoom", "tile", "ior"])]
    workload: Option<String>,
    /// Memory budget in MiB; the segment store is 20× and the SOURCE file 100× this.
    #[arg(long, default_value_t = 4)]
    memory_mib: u64,
    /// Segment size of the group policy in MiB.
    #[arg(long, default_value_t = 1)]
    segment_mib: u64,
    /// Segment sizes (MiB) of the sweep; 0 to skip it.
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    sweep: Vec<u64>,
    /// Successor-link settings J/K of the j/k sweep (group policy, every selected
    /// workload); 0 to skip it.
    #[arg(long, value_delimiter = ',', default_value = "1/2,2/4,3/4,2/8")]
    sweep_jk: Vec<String>,
    /// Client processes.
    #[arg(long, default_value_t = 4)]
    clients: usize,
    /// Passes over each view.
    #[arg(long, default_value_t = 3)]
    passes: usize,
    /// Directory for SOURCE, the mounts and the cache directories (on local disk).
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Run as one client of a benchmark: the requests are in this JSON file.
    #[arg(long, hide = true, value_name = "SPEC")]
    client: Option<PathBuf>,
}

/// Successor-link setting of the mount: link a successor seen `j` of the last `k`
/// times.
#[derive(Clone, Copy)]
struct Link {
    j: usize,
    k: usize,
}

/// What a mount is given: memory budget (bytes), disk budget (GiB), segment size
/// (MiB) and successor-link setting.
#[derive(Clone, Copy)]
struct Setup {
    memory: u64,
    disk_gib: f64,
    segment_mib: u64,
    link: Link,
}

/// The mount's own default.
const DEFAULT_LINK: Link = Link { j: 2, k: 4 };

fn parse_link(s: &str) -> Result<Link> {
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

const POLICIES: [&str; 3] = ["none", "lru", "group"];
const IDLE_MS: u64 = 300;

/// One request: offset and length in the SOURCE file.
type Req = (u64, u64);

/// A workload: views, each a list of requests per client; each view read `passes`
/// times.
struct Workload {
    name: &'static str,
    views: Vec<Vec<Vec<Req>>>,
}

fn zoom(file: u64, clients: usize) -> Workload {
    let product = 512 << 10; // veclen × elmtcount per client
    let views = [4u64 << 10, 16 << 10, 64 << 10, 256 << 10]
        .iter()
        .map(|&veclen| {
            let count = product / veclen;
            let pieces = count * clients as u64;
            let spacing = (file / pieces) / 4096 * 4096;
            (0..clients)
                .map(|c| {
                    (0..count)
                        .map(|i| ((i * clients as u64 + c as u64) * spacing, veclen))
                        .collect()
                })
                .collect()
        })
        .collect();
    Workload {
        name: "zoom",
        views,
    }
}

fn tile(clients: usize) -> Workload {
    // A row-major 2-D array of 1024 rows of 128 KiB; a 2 × 2 grid of tiles.
    let (rows, row_bytes) = (1024u64, 128u64 << 10);
    let views = [0u64, 25, 50]
        .iter()
        .map(|&overlap| {
            let (th, tw) = (rows / 2, row_bytes / 2);
            let (oh, ow) = (th * overlap / 100, tw * overlap / 100 / 4096 * 4096);
            (0..clients)
                .map(|c| {
                    let (ty, tx) = ((c / 2 % 2) as u64, (c % 2) as u64);
                    let y0 = (ty * th).saturating_sub(ty * oh);
                    let x0 = (tx * tw).saturating_sub(tx * ow);
                    let (h, w) = (th + oh, tw + ow);
                    (y0..(y0 + h).min(rows))
                        .map(|y| (y * row_bytes + x0, w.min(row_bytes - x0)))
                        .collect()
                })
                .collect()
        })
        .collect();
    Workload {
        name: "tile",
        views,
    }
}

fn ior(file: u64, clients: usize, passes: usize) -> Workload {
    let (transfer, region) = (64u64 << 10, 32u64 << 20);
    let base = file / 2 / 4096 * 4096;
    let per = region / clients as u64 / transfer;
    let segmented: Vec<Vec<Req>> = (0..clients as u64)
        .map(|c| {
            (0..per)
                .map(|i| (base + (c * per + i) * transfer, transfer))
                .collect()
        })
        .collect();
    let interleaved: Vec<Vec<Req>> = (0..clients as u64)
        .map(|c| {
            (0..per)
                .map(|i| (base + (i * clients as u64 + c) * transfer, transfer))
                .collect()
        })
        .collect();
    // One view per pass (the view changes during the run); read once each.
    let views = (0..passes * 2)
        .map(|p| {
            if p % 2 == 0 {
                segmented.clone()
            } else {
                interleaved.clone()
            }
        })
        .collect();
    Workload { name: "ior", views }
}

/// The SOURCE file: `size` bytes of seeded pseudo-random data, written once.
fn make_source(path: &Path, size: u64) -> Result<()> {
    if std::fs::metadata(path).is_ok_and(|m| m.len() == size) {
        return Ok(());
    }
    let f = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let mut rng = Rng::new(super::SEED);
    let mut block = vec![0u8; 4 << 20];
    let mut at = 0;
    while at < size {
        for chunk in block.chunks_mut(8) {
            chunk.copy_from_slice(&rng.next_u64().to_le_bytes());
        }
        let n = (size - at).min(block.len() as u64) as usize;
        f.write_all_at(&block[..n], at)?;
        at += n as u64;
    }
    f.sync_all()?;
    Ok(())
}

struct Mounted {
    child: Child,
    mnt: PathBuf,
    stats: PathBuf,
}

fn mount(dir: &Path, policy: &str, setup: Setup) -> Result<Mounted> {
    let (src, mnt, cache, stats) = (
        dir.join("src"),
        dir.join("mnt"),
        dir.join(format!("cache-{policy}")),
        dir.join("stats.json"),
    );
    let _ = std::fs::remove_dir_all(&cache);
    std::fs::create_dir_all(&mnt)?;
    // This very executable, even if a rebuild replaced the file meanwhile.
    let child = Command::new("/proc/self/exe")
        .args(["mount", "cache"])
        .arg(&src)
        .arg(&mnt)
        .arg("--cache-dir")
        .arg(&cache)
        .args(["--policy", policy, "--store", "hdd"])
        .args(["--memory-mib", &(setup.memory >> 20).to_string()])
        .args(["--disk-gib", &setup.disk_gib.to_string()])
        .args(["--segment-mib", &setup.segment_mib.to_string()])
        .args(["--idle-ms", &IDLE_MS.to_string()])
        .args([
            "--link-j",
            &setup.link.j.to_string(),
            "--link-k",
            &setup.link.k.to_string(),
        ])
        .arg("--stats-json")
        .arg(&stats)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot start patio mount cache")?;
    let mut m = Mounted { child, mnt, stats };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !is_mount(&m.mnt) {
        if let Some(status) = m.child.try_wait()? {
            let mut err = String::new();
            if let Some(mut e) = m.child.stderr.take() {
                use std::io::Read;
                let _ = e.read_to_string(&mut err);
            }
            bail!("patio mount cache exited ({status}): {}", err.trim());
        }
        if Instant::now() > deadline {
            let _ = m.child.kill();
            bail!("the mount did not appear within 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(m)
}

fn is_mount(p: &Path) -> bool {
    let text = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let want = p.to_string_lossy();
    text.lines()
        .any(|l| l.split_whitespace().nth(1) == Some(want.as_ref()))
}

impl Mounted {
    fn stop(self) -> Result<Value> {
        // SAFETY: sending a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let out = self.child.wait_with_output()?;
        if !out.status.success() {
            bail!(
                "patio mount cache failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        let text = std::fs::read_to_string(&self.stats)?;
        Ok(serde_json::from_str(&text)?)
    }
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
fn client_main(spec: &Path) -> Result<()> {
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

/// Reads every view of `w` `passes` times through the mount: one process per client,
/// each with one open handle for the whole run (so each client is one successor
/// stream), all told to start each pass together; a pass ends when every client
/// answered. Between passes the mount is left idle (not timed). Returns the seconds
/// of the passes and the bytes read.
fn run_workload(dir: &Path, file: &Path, w: &Workload, passes: usize) -> Result<(f64, u64)> {
    let clients = w.views[0].len();
    let mut procs = Vec::new();
    for c in 0..clients {
        let spec = dir.join(format!("client-{c}.json"));
        let body = ClientSpec {
            file: file.to_path_buf(),
            passes,
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
    let result = (|| -> Result<(f64, u64)> {
        let (mut seconds, mut bytes) = (0.0, 0u64);
        let mut line = String::new();
        for _ in 0..w.views.len() * passes {
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
            seconds += start.elapsed().as_secs_f64();
            std::thread::sleep(Duration::from_millis(IDLE_MS * 2 + 300));
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

#[derive(Serialize, Clone)]
struct PolicyResult {
    seconds: f64,
    bandwidth_mbps: f64,
    bytes: u64,
    group_hit_rate: f64,
    hit_rate: f64,
    grouping_io_bytes: u64,
    grouping_source_bytes: u64,
    grouping_local_bytes: u64,
    source_requests: u64,
    source_bytes: u64,
    segment_read_bytes: u64,
    segment_write_bytes: u64,
    peak_memory_bytes: u64,
}

/// One policy over one workload: mount, every view `passes` times (idle periods
/// between passes, not timed), unmount.
fn run_policy(
    dir: &Path,
    w: &Workload,
    policy: &str,
    setup: Setup,
    passes: usize,
) -> Result<PolicyResult> {
    let m = mount(dir, policy, setup)?;
    let file = m.mnt.join("source.dat");
    let run = run_workload(dir, &file, w, passes);
    let stats = m.stop()?;
    let (seconds, bytes) = run?;
    let g = |k: &str| stats[k].as_u64().unwrap_or(0);
    Ok(PolicyResult {
        seconds,
        bandwidth_mbps: bytes as f64 / seconds / 1e6,
        bytes,
        group_hit_rate: stats["group_hit_rate"].as_f64().unwrap_or(0.0),
        hit_rate: stats["hit_rate"].as_f64().unwrap_or(0.0),
        grouping_io_bytes: g("grouping_io_bytes"),
        grouping_source_bytes: g("grouping_source_bytes"),
        grouping_local_bytes: g("grouping_local_bytes"),
        source_requests: g("source_requests"),
        source_bytes: g("source_bytes"),
        segment_read_bytes: g("segment_read_bytes"),
        segment_write_bytes: g("segment_write_bytes"),
        peak_memory_bytes: g("peak_memory_bytes"),
    })
}

pub fn run(args: Args) -> Result<()> {
    if let Some(spec) = &args.client {
        return client_main(spec);
    }
    let links: Vec<Link> = args
        .sweep_jk
        .iter()
        .filter(|s| s.trim() != "0")
        .map(|s| parse_link(s))
        .collect::<Result<_>>()?;
    if args.memory_mib == 0 || args.clients == 0 || args.passes == 0 || args.segment_mib == 0 {
        bail!("--memory-mib, --segment-mib, --clients and --passes must be at least 1");
    }
    if args.segment_mib > args.memory_mib {
        bail!("--segment-mib must not exceed --memory-mib (a segment is read into memory whole)");
    }
    let memory = args.memory_mib << 20;
    let disk_gib = (memory * 20) as f64 / (1u64 << 30) as f64;
    let file_size = memory * 100;
    let dir = tempfile::Builder::new()
        .prefix("patio-bench-cache-")
        .tempdir_in(&args.dir)
        .with_context(|| format!("cannot make a directory in {}", args.dir.display()))?;
    std::fs::create_dir_all(dir.path().join("src"))?;
    make_source(&dir.path().join("src/source.dat"), file_size)?;
    let workloads: Vec<Workload> = [
        zoom(file_size, args.clients),
        tile(args.clients),
        ior(file_size, args.clients, args.passes),
    ]
    .into_iter()
    .filter(|w| args.workload.as_deref().is_none_or(|n| n == w.name))
    .collect();
    let mut out = Vec::new();
    let mut table = Table::new(
        "segment-grouping cache: bandwidth through the mount (HDD-like store)",
        &[
            "workload",
            "policy",
            "seconds",
            "MB/s",
            "vs none",
            "vs lru",
            "hit rate",
            "group hits",
            "grouping I/O (SOURCE + local)",
            "SOURCE reqs",
        ],
    );
    for w in &workloads {
        let passes = if w.name == "ior" { 1 } else { args.passes };
        let mut res = serde_json::Map::new();
        let mut rows = Vec::new();
        for p in POLICIES {
            if !args.json {
                eprintln!("patio: bench cache: {} with {p}", w.name);
            }
            let r = run_policy(
                dir.path(),
                w,
                p,
                Setup {
                    memory,
                    disk_gib,
                    segment_mib: args.segment_mib,
                    link: DEFAULT_LINK,
                },
                passes,
            )?;
            rows.push((p, r.clone()));
            res.insert(p.into(), serde_json::to_value(&r)?);
        }
        let bw = |name: &str| {
            rows.iter()
                .find(|r| r.0 == name)
                .map_or(0.0, |r| r.1.bandwidth_mbps)
        };
        for (p, r) in &rows {
            table.row(vec![
                w.name.into(),
                (*p).into(),
                sig3(r.seconds),
                sig3(r.bandwidth_mbps),
                format!("{:.2}×", r.bandwidth_mbps / bw("none")),
                format!("{:.2}×", r.bandwidth_mbps / bw("lru")),
                format!("{:.1}%", r.hit_rate * 100.0),
                format!("{:.1}%", r.group_hit_rate * 100.0),
                format!(
                    "{} + {}",
                    human_bytes(r.grouping_source_bytes),
                    human_bytes(r.grouping_local_bytes)
                ),
                grouped(r.source_requests),
            ]);
        }
        out.push(json!({
            "name": w.name,
            "passes": passes,
            "views": w.views.len(),
            "policies": res,
            "group_vs_none": bw("group") / bw("none"),
            "group_vs_lru": bw("group") / bw("lru"),
        }));
    }
    let mut sweep = Vec::new();
    if !args.sweep.is_empty() && args.workload.as_deref().is_none_or(|n| n == "zoom") {
        let w = zoom(file_size, args.clients);
        for &seg in &args.sweep {
            if seg == 0 {
                continue;
            }
            if !args.json {
                eprintln!("patio: bench cache: zoom with group, {seg} MiB segments");
            }
            let mem = memory.max(seg << 20);
            let r = run_policy(
                dir.path(),
                &w,
                "group",
                Setup {
                    memory: mem,
                    disk_gib,
                    segment_mib: seg,
                    link: DEFAULT_LINK,
                },
                args.passes,
            )?;
            sweep.push(json!({
                "segment_mib": seg,
                "memory_mib": mem >> 20,
                "seconds": r.seconds,
                "bandwidth_mbps": r.bandwidth_mbps,
                "group_hit_rate": r.group_hit_rate,
                "grouping_io_bytes": r.grouping_io_bytes,
                "grouping_source_bytes": r.grouping_source_bytes,
                "grouping_local_bytes": r.grouping_local_bytes,
            }));
        }
    }
    let mut jk = Vec::new();
    for link in &links {
        for w in &workloads {
            if !args.json {
                eprintln!(
                    "patio: bench cache: {} with group, j/k {}/{}",
                    w.name, link.j, link.k
                );
            }
            let passes = if w.name == "ior" { 1 } else { args.passes };
            let r = run_policy(
                dir.path(),
                w,
                "group",
                Setup {
                    memory,
                    disk_gib,
                    segment_mib: args.segment_mib,
                    link: *link,
                },
                passes,
            )?;
            jk.push(json!({
                "workload": w.name,
                "j": link.j,
                "k": link.k,
                "seconds": r.seconds,
                "bandwidth_mbps": r.bandwidth_mbps,
                "hit_rate": r.hit_rate,
                "group_hit_rate": r.group_hit_rate,
                "grouping_io_bytes": r.grouping_io_bytes,
                "grouping_source_bytes": r.grouping_source_bytes,
            }));
        }
    }
    let hdd = Striping::hdd();
    let store = json!({
        "preset": "hdd",
        "targets": hdd.targets,
        "stripe_bytes": hdd.stripe_size,
        "rpc_bytes": hdd.rpc_size,
        "latency_seq_ms": hdd.latency_seq * 1e3,
        "latency_near_ms": hdd.latency_near * 1e3,
        "latency_mid_ms": hdd.latency_mid * 1e3,
        "latency_far_ms": hdd.latency_far * 1e3,
        "bandwidth_mbps_per_target": hdd.bandwidth / 1e6,
    });
    let doc = json!({
        "store": store,
        "capacity": {
            "memory_bytes": memory,
            "disk_bytes": (disk_gib * (1u64 << 30) as f64) as u64,
            "source_bytes": file_size,
            "segment_bytes": args.segment_mib << 20,
            "item_bytes": 64 << 10,
        },
        "clients": args.clients,
        "passes": args.passes,
        "idle_ms": IDLE_MS,
        "fuse_mode": "direct_io",
        "workloads": out,
        "segment_sweep": sweep,
        "link": {"j": DEFAULT_LINK.j, "k": DEFAULT_LINK.k},
        "jk_sweep": jk,
    });
    if args.json {
        return super::write_stdout(&format!("{}\n", serde_json::to_string_pretty(&doc)?));
    }
    table.note(format!(
        "store: hdd preset (1 target, 64 KiB stripes, 0.05/1/4/8 ms by seek distance, 150 MB/s); memory {} : segment store {} : SOURCE {} (1 : 20 : 100); {} clients (processes reading through the mount, direct I/O); j/k {}/{}; idle periods between passes are not timed",
        human_bytes(memory),
        human_bytes(memory * 20),
        human_bytes(file_size),
        args.clients,
        DEFAULT_LINK.j,
        DEFAULT_LINK.k
    ));
    table.print()?;
    if !sweep.is_empty() {
        let mut t = Table::new(
            "segment-size sweep: zoom, group policy",
            &[
                "segment",
                "memory",
                "seconds",
                "MB/s",
                "group hits",
                "grouping I/O",
            ],
        );
        for s in &sweep {
            t.row(vec![
                format!("{} MiB", s["segment_mib"]),
                format!("{} MiB", s["memory_mib"]),
                sig3(s["seconds"].as_f64().unwrap_or(0.0)),
                sig3(s["bandwidth_mbps"].as_f64().unwrap_or(0.0)),
                format!(
                    "{:.1}%",
                    s["group_hit_rate"].as_f64().unwrap_or(0.0) * 100.0
                ),
                human_bytes(s["grouping_io_bytes"].as_u64().unwrap_or(0)),
            ]);
        }
        t.print()?;
    }
    if !jk.is_empty() {
        let mut t = Table::new(
            "j/k sweep: group policy, successor linked when seen j of the last k times",
            &[
                "workload",
                "j/k",
                "seconds",
                "MB/s",
                "hit rate",
                "group hits",
                "grouping I/O",
            ],
        );
        for r in &jk {
            let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
            t.row(vec![
                r["workload"].as_str().unwrap_or("").into(),
                format!("{}/{}", r["j"], r["k"]),
                sig3(f("seconds")),
                sig3(f("bandwidth_mbps")),
                format!("{:.1}%", f("hit_rate") * 100.0),
                format!("{:.1}%", f("group_hit_rate") * 100.0),
                human_bytes(r["grouping_io_bytes"].as_u64().unwrap_or(0)),
            ]);
        }
        t.print()?;
    }
    Ok(())
}
