//! `patio bench cache`: the segment-grouping cache against no cache and against a
//! plain LRU block cache of the same memory and disk capacity, in one run, through
//! real mounts ([`harness`]: one `patio mount cache` process per run, clients as
//! separate processes, idle time the same for every policy and idle work charged).
//!
//! Capacities of the main table keep the paper's ratio memory : segment store :
//! SOURCE file = 1 : 20 : 100. The cache-size sweep reruns `lru` and `group` with the
//! segment store at 10, 25, 50, 100 % of each workload's working set (memory 1/20 of
//! it, at least one segment). The segment-size sweep reruns `zoom` with `group` at
//! 1–64 MiB segments; the j/k sweep reruns every selected workload with `group` at
//! each successor-link setting.

#[path = "cache/harness.rs"]
mod harness;
#[path = "cache/workloads.rs"]
mod workloads;

use super::{grouped, human_bytes, sig3, Table};
use crate::size_arg::{resolve, Size};
use anyhow::{bail, Context, Result};
use harness::{parse_link, run_policy, Link, PolicyResult, Setup, DEFAULT_LINK, GAP_MS, IDLE_MS};
use patio_prefetch::rng::Rng;
use patio_prefetch::striped::Striping;
use serde_json::{json, Value};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use workloads::Workload;

#[derive(clap::Args)]
pub struct Args {
    /// Run one workload only (default: all four).
    #[arg(long, value_parser = workloads::NAMES)]
    workload: Option<String>,
    /// Memory budget (a size, whole MiB); the segment store is 20× and the SOURCE file
    /// 100× this [default: 4MiB].
    #[arg(long, value_name = "SIZE")]
    memory: Option<Size>,
    /// Segment size of the group policy (a size, whole MiB) [default: 1MiB].
    #[arg(long, value_name = "SIZE")]
    segment: Option<Size>,
    /// Deprecated spelling of --memory, in MiB.
    #[arg(long, hide = true, value_name = "MIB")]
    memory_mib: Option<f64>,
    /// Deprecated spelling of --segment, in MiB.
    #[arg(long, hide = true, value_name = "MIB")]
    segment_mib: Option<f64>,
    /// Cache sizes of the size sweep, percent of each workload's working set (the
    /// segment store; memory is 1/20 of it); 0 to skip it.
    #[arg(long, value_delimiter = ',', default_value = "10,25,50,100")]
    sizes: Vec<u64>,
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
    /// Rows (of 128 KiB) of the tile workload's array.
    #[arg(long, default_value_t = 1024)]
    tile_rows: u64,
    /// Runs of every measurement; the median is reported.
    #[arg(long = "reps", default_value_t = 1, alias = "repeat")]
    repeat: usize,
    /// The striped storage model SOURCE is read through on model rows: hdd (this
    /// benchmark's, the paper's disk-backed setting), ssd, lustre, or probed (this
    /// machine's, measured by `patio store probe`).
    #[arg(long, value_name = "PRESET", default_value = "hdd")]
    store: String,
    /// With --store: the number of targets (servers) instead of the preset's.
    #[arg(long, value_name = "N")]
    store_targets: Option<usize>,
    /// With --store: the stripe size in KiB instead of the preset's (RPCs stay at most
    /// one stripe).
    #[arg(long, value_name = "KIB")]
    store_stripe_kib: Option<u64>,
    /// SOURCE behind the storage model (--store), on the real local disk (read with
    /// O_DIRECT, so never from the page cache), or both (the main table twice, each
    /// workload then with model_error: the model's group-vs-lru over the real one; the
    /// sweeps on the model).
    #[arg(long, value_parser = ["model", "real", "both"], default_value = "model")]
    storage: String,
    /// Directory for SOURCE, the mounts and the cache directories (on local disk).
    #[arg(long, default_value = "/tmp")]
    dir: PathBuf,
    /// Print JSON instead of tables.
    #[arg(long)]
    json: bool,
    /// Skip the main table (none, lru and group at the main capacities): the
    /// sweeps only.
    #[arg(long)]
    no_main: bool,
    /// Run as one client of a benchmark: the requests are in this JSON file.
    #[arg(long, hide = true, value_name = "SPEC")]
    client: Option<PathBuf>,
}

const POLICIES: [&str; 3] = ["none", "lru", "group"];
const ITEM: u64 = 64 << 10;

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

/// The budgets of the size sweep at `pct` % of `ws` bytes: the segment store (whole
/// segments, at least two), memory 1/20 of it in whole items, at least one segment.
fn sized(ws: u64, pct: u64, segment: u64) -> (u64, u64) {
    let disk = (ws * pct / 100 / segment).max(2) * segment;
    let memory = (disk / 20 / ITEM * ITEM).max(segment);
    (memory, disk)
}

fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// The main table's row of one policy.
fn row(w: &str, p: &str, r: &PolicyResult, none: f64, lru: f64) -> Vec<String> {
    vec![
        w.into(),
        p.into(),
        sig3(r.seconds),
        sig3(r.idle_work_seconds),
        sig3(r.bandwidth_mbps),
        format!("{:.2}×", r.bandwidth_mbps / none),
        format!("{:.2}×", r.bandwidth_mbps / lru),
        pct(r.hit_rate),
        pct(r.group_hit_rate),
        format!(
            "{} + {} ({:.2}×)",
            human_bytes(r.grouping_source_bytes),
            human_bytes(r.grouping_local_bytes),
            r.grouping_io_ratio
        ),
        grouped(r.source_requests),
    ]
}

pub fn run(args: Args) -> Result<()> {
    crate::retired::warn_if_given("--repeat", "--reps");
    if let Some(spec) = &args.client {
        return harness::client_main(spec);
    }
    let links: Vec<Link> = args
        .sweep_jk
        .iter()
        .filter(|s| s.trim() != "0")
        .map(|s| parse_link(s))
        .collect::<Result<_>>()?;
    let mib = 1u64 << 20;
    let memory = resolve(
        args.memory,
        "--memory",
        args.memory_mib,
        "--memory-mib",
        mib,
        Size(4 * mib),
    )?;
    let segment = resolve(
        args.segment,
        "--segment",
        args.segment_mib,
        "--segment-mib",
        mib,
        Size(mib),
    )?;
    if memory == 0 || segment == 0 || !memory.is_multiple_of(mib) || !segment.is_multiple_of(mib) {
        bail!("--memory and --segment must be whole MiB, at least 1MiB");
    }
    if args.clients == 0 || args.passes == 0 || args.repeat == 0 {
        bail!("--clients, --passes and --reps must be at least 1");
    }
    if args.tile_rows < 2 || args.tile_rows > 1 << 16 {
        bail!("--tile-rows must be between 2 and 65536");
    }
    if segment > memory {
        bail!("--segment must not exceed --memory (a segment is read into memory whole)");
    }
    if let Some(bad) = args.sizes.iter().find(|&&p| p > 1000) {
        bail!("--sizes {bad}: at most 1000 (percent of the working set)");
    }
    let disk = memory * 20;
    let file_size = memory * 100;
    if args.tile_rows * (128 << 10) > file_size {
        bail!(
            "--tile-rows {}: the array is larger than SOURCE",
            args.tile_rows
        );
    }
    let dir = tempfile::Builder::new()
        .prefix("patio-bench-cache-")
        .tempdir_in(&args.dir)
        .with_context(|| format!("cannot make a directory in {}", args.dir.display()))?;
    std::fs::create_dir_all(dir.path().join("src"))?;
    make_source(&dir.path().join("src/source.dat"), file_size)?;
    let workloads: Vec<Workload> = workloads::NAMES
        .iter()
        .filter(|n| args.workload.as_deref().is_none_or(|w| w == **n))
        .filter_map(|n| workloads::by_name(n, file_size, args.clients, args.passes, args.tile_rows))
        .collect();
    let say = |what: String| {
        if !args.json {
            eprintln!("patio: bench cache: {what}");
        }
    };
    let striping = Striping::by_name(&args.store).map_err(|e| anyhow::anyhow!("--store: {e}"))?;
    let striping = crate::store_args::overridden(
        striping,
        &args.store,
        args.store_targets,
        args.store_stripe_kib,
    )?;
    // Any name the striping accepted is passed through to the mounts as given.
    let model = harness::Model {
        preset: args.store.clone(),
        targets: args.store_targets,
        stripe_kib: args.store_stripe_kib,
    };
    let storages: &[&'static str] = match args.storage.as_str() {
        "real" => &["real"],
        "both" => &["model", "real"],
        _ => &["model"],
    };
    let base = Setup {
        memory,
        disk,
        segment,
        link: DEFAULT_LINK,
        storage: storages[0],
        model,
    };
    let mut out = Vec::new();
    let mut table = Table::new(
        if storages == ["real"] {
            "segment-grouping cache: bandwidth through the mount (real disk)"
        } else {
            "segment-grouping cache: bandwidth through the mount (storage model; real disk)"
        },
        &[
            "storage",
            "workload",
            "policy",
            "seconds",
            "of which idle work",
            "MB/s",
            "vs none",
            "vs lru",
            "hit rate",
            "group hits",
            "grouping I/O: SOURCE + local (× client bytes)",
            "SOURCE reqs",
        ],
    );
    let main_storages: &[&str] = if args.no_main { &[] } else { storages };
    for &storage in main_storages {
        for w in &workloads {
            let mut res = serde_json::Map::new();
            let mut rows = Vec::new();
            for p in POLICIES {
                say(format!("{} with {p} ({storage})", w.name));
                let setup = Setup {
                    storage,
                    ..base.clone()
                };
                let r = run_policy(dir.path(), w, p, &setup, args.repeat)?;
                res.insert(p.into(), serde_json::to_value(&r)?);
                rows.push((p, r));
            }
            let bw = |name: &str| {
                rows.iter()
                    .find(|r| r.0 == name)
                    .map_or(0.0, |r| r.1.bandwidth_mbps)
            };
            for (p, r) in &rows {
                let mut cells = vec![storage.to_string()];
                cells.extend(row(w.name, p, r, bw("none"), bw("lru")));
                table.row(cells);
            }
            out.push(json!({
                "name": w.name,
                "storage": storage,
                "passes": w.passes,
                "views": w.views.len(),
                "working_set_bytes": w.working_set(ITEM),
                "client_bytes": w.client_bytes(),
                "policies": res,
                "group_vs_none": bw("group") / bw("none"),
                "group_vs_lru": bw("group") / bw("lru"),
            }));
        }
    }
    model_errors(&mut out);
    let mut sizes = Vec::new();
    for w in &workloads {
        let ws = w.working_set(ITEM);
        for &p in args.sizes.iter().filter(|&&p| p > 0) {
            let (mem, dsk) = sized(ws, p, segment);
            let setup = Setup {
                memory: mem,
                disk: dsk,
                ..base.clone()
            };
            say(format!(
                "{} at {p} % of its working set (memory {}, store {})",
                w.name,
                human_bytes(mem),
                human_bytes(dsk)
            ));
            let lru = run_policy(dir.path(), w, "lru", &setup, args.repeat)?;
            let group = run_policy(dir.path(), w, "group", &setup, args.repeat)?;
            sizes.push(json!({
                "workload": w.name,
                "percent": p,
                "working_set_bytes": ws,
                "memory_bytes": mem,
                "disk_bytes": dsk,
                "group_vs_lru": group.bandwidth_mbps / lru.bandwidth_mbps,
                "lru": lru,
                "group": group,
            }));
        }
    }
    let mut sweep = Vec::new();
    if !args.sweep.is_empty() && args.workload.as_deref().is_none_or(|n| n == "zoom") {
        let w = workloads::zoom(file_size, args.clients, args.passes);
        for &seg in args.sweep.iter().filter(|&&s| s > 0) {
            say(format!("zoom with group, {seg} MiB segments"));
            let mem = memory.max(seg << 20);
            let setup = Setup {
                memory: mem,
                segment: seg << 20,
                ..base.clone()
            };
            let r = run_policy(dir.path(), &w, "group", &setup, args.repeat)?;
            sweep.push(json!({
                "segment_mib": seg,
                "memory_mib": mem >> 20,
                "seconds": r.seconds,
                "bandwidth_mbps": r.bandwidth_mbps,
                "group_hit_rate": r.group_hit_rate,
                "grouping_io_bytes": r.grouping_io_bytes,
                "grouping_io_ratio": r.grouping_io_ratio,
                "grouping_source_bytes": r.grouping_source_bytes,
                "grouping_local_bytes": r.grouping_local_bytes,
            }));
        }
    }
    let mut jk = Vec::new();
    for link in &links {
        for w in &workloads {
            say(format!("{} with group, j/k {}/{}", w.name, link.j, link.k));
            let setup = Setup {
                link: *link,
                ..base.clone()
            };
            let r = run_policy(dir.path(), w, "group", &setup, args.repeat)?;
            jk.push(json!({
                "workload": w.name,
                "j": link.j,
                "k": link.k,
                "seconds": r.seconds,
                "bandwidth_mbps": r.bandwidth_mbps,
                "hit_rate": r.hit_rate,
                "group_hit_rate": r.group_hit_rate,
                "grouping_io_bytes": r.grouping_io_bytes,
                "grouping_io_ratio": r.grouping_io_ratio,
                "grouping_source_bytes": r.grouping_source_bytes,
            }));
        }
    }
    let modelled: Vec<Value> = out
        .iter()
        .filter(|w| w["storage"] == storages[0])
        .cloned()
        .collect();
    let goals = goals(&modelled, &sizes);
    let st = &striping;
    let store = json!({
        "preset": args.store,
        "store_targets": args.store_targets,
        "store_stripe_kib": args.store_stripe_kib,
        "targets": st.targets,
        "stripe_bytes": st.stripe_size,
        "rpc_bytes": st.rpc_size,
        "latency_seq_ms": st.latency_seq * 1e3,
        "latency_near_ms": st.latency_near * 1e3,
        "latency_mid_ms": st.latency_mid * 1e3,
        "latency_far_ms": st.latency_far * 1e3,
        "bandwidth_mbps_per_target": st.bandwidth / 1e6,
    });
    let doc = json!({
        "storage": args.storage,
        "store": if storages.contains(&"model") { store } else { Value::Null },
        "capacity": {
            "memory_bytes": memory,
            "disk_bytes": disk,
            "source_bytes": file_size,
            "segment_bytes": segment,
            "item_bytes": ITEM,
        },
        "clients": args.clients,
        "passes": args.passes,
        "repeat": args.repeat,
        "tile_rows": args.tile_rows,
        "idle_ms": IDLE_MS,
        "idle_gap_ms": GAP_MS,
        "idle_work_charged": true,
        "fuse_mode": "direct_io",
        "workloads": out,
        "size_sweep": sizes,
        "segment_sweep": sweep,
        "link": {"j": DEFAULT_LINK.j, "k": DEFAULT_LINK.k},
        "jk_sweep": jk,
        "goals": goals,
    });
    if args.json {
        return super::write_stdout(&format!("{}\n", serde_json::to_string_pretty(&doc)?));
    }
    table.note(format!(
        "store: {} on model rows, the local disk read with O_DIRECT on real rows; memory {} : segment store {} : SOURCE {} (1 : 20 : 100); {} clients (processes reading through the mount, direct I/O); j/k {}/{}; every policy idles {} ms after each pass and its idle work is charged; median of {} run(s)",
        crate::store_args::describe_store(Some(&patio_prefetch::StoreConfig::striped(striping.clone()))),
        human_bytes(memory),
        human_bytes(disk),
        human_bytes(file_size),
        args.clients,
        DEFAULT_LINK.j,
        DEFAULT_LINK.k,
        GAP_MS,
        args.repeat,
    ));
    table.print()?;
    print_sweeps(&sizes, &sweep, &jk)?;
    println!("goals: {}", serde_json::to_string(&doc["goals"])?);
    Ok(())
}

/// With both storages, each workload's `model_error`: its group-vs-lru on the model over
/// the same on the real disk (set on both rows).
fn model_errors(rows: &mut [Value]) {
    let ratio = |rows: &[Value], name: &Value, storage: &str| {
        rows.iter()
            .find(|w| w["name"] == *name && w["storage"] == storage)
            .and_then(|w| w["group_vs_lru"].as_f64())
    };
    let errors: Vec<Option<f64>> = rows
        .iter()
        .map(|w| Some(ratio(rows, &w["name"], "model")? / ratio(rows, &w["name"], "real")?))
        .collect();
    for (w, e) in rows.iter_mut().zip(errors) {
        if let Some(e) = e {
            w["model_error"] = json!(e);
        }
    }
}

/// The goals checked on this run: group ≥ lru everywhere; on zoom and tile
/// (where the working set does not fit in memory) group hit rate ≥ 80 % and ≥ 1.3×
/// lru; grouping I/O ≤ 1.5× the client bytes.
fn goals(main: &[Value], sizes: &[Value]) -> Value {
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let mut cases: Vec<(String, f64, f64, f64)> = Vec::new(); // (case, vs lru, hits, io)
    for w in main {
        let g = &w["policies"]["group"];
        cases.push((
            format!("{} (main)", w["name"].as_str().unwrap_or("")),
            f(w, "group_vs_lru"),
            f(g, "hit_rate"),
            f(g, "grouping_io_ratio"),
        ));
    }
    for s in sizes {
        cases.push((
            format!(
                "{} at {} %",
                s["workload"].as_str().unwrap_or(""),
                s["percent"]
            ),
            f(s, "group_vs_lru"),
            f(&s["group"], "hit_rate"),
            f(&s["group"], "grouping_io_ratio"),
        ));
    }
    let min_vs_lru = cases.iter().map(|c| c.1).fold(f64::INFINITY, f64::min);
    let max_io = cases.iter().map(|c| c.3).fold(0.0, f64::max);
    let targeted: Vec<_> = cases
        .iter()
        .filter(|c| c.0.starts_with("zoom") || c.0.starts_with("tile"))
        .collect();
    let not_ge: Vec<&str> = cases
        .iter()
        .filter(|c| c.1 < 1.0)
        .map(|c| c.0.as_str())
        .collect();
    json!({
        "group_ge_lru_everywhere": not_ge.is_empty(),
        "group_below_lru": not_ge,
        "min_group_vs_lru": min_vs_lru,
        "zoom_tile_hit_rate_ge_80": targeted.iter().all(|c| c.2 >= 0.8),
        "zoom_tile_ge_1_3x_lru": targeted.iter().all(|c| c.1 >= 1.3),
        "grouping_io_le_1_5x": max_io <= 1.5,
        "max_grouping_io_ratio": max_io,
    })
}

fn print_sweeps(sizes: &[Value], sweep: &[Value], jk: &[Value]) -> Result<()> {
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    if !sizes.is_empty() {
        let mut t = Table::new(
            "cache-size sweep: lru vs group (store at % of the working set, memory 1/20 of it)",
            &[
                "workload",
                "size",
                "memory",
                "store",
                "lru MB/s",
                "group MB/s",
                "group vs lru",
                "lru hits",
                "group hits (by groups)",
                "grouping I/O × client bytes",
            ],
        );
        for s in sizes {
            let (l, g) = (&s["lru"], &s["group"]);
            t.row(vec![
                s["workload"].as_str().unwrap_or("").into(),
                format!("{} %", s["percent"]),
                human_bytes(s["memory_bytes"].as_u64().unwrap_or(0)),
                human_bytes(s["disk_bytes"].as_u64().unwrap_or(0)),
                sig3(f(l, "bandwidth_mbps")),
                sig3(f(g, "bandwidth_mbps")),
                format!("{:.2}×", f(s, "group_vs_lru")),
                pct(f(l, "hit_rate")),
                format!(
                    "{} ({})",
                    pct(f(g, "hit_rate")),
                    pct(f(g, "group_hit_rate"))
                ),
                format!("{:.2}", f(g, "grouping_io_ratio")),
            ]);
        }
        t.print()?;
    }
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
        for s in sweep {
            t.row(vec![
                format!("{} MiB", s["segment_mib"]),
                format!("{} MiB", s["memory_mib"]),
                sig3(f(s, "seconds")),
                sig3(f(s, "bandwidth_mbps")),
                pct(f(s, "group_hit_rate")),
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
        for r in jk {
            t.row(vec![
                r["workload"].as_str().unwrap_or("").into(),
                format!("{}/{}", r["j"], r["k"]),
                sig3(f(r, "seconds")),
                sig3(f(r, "bandwidth_mbps")),
                pct(f(r, "hit_rate")),
                pct(f(r, "group_hit_rate")),
                human_bytes(r["grouping_io_bytes"].as_u64().unwrap_or(0)),
            ]);
        }
        t.print()?;
    }
    Ok(())
}
