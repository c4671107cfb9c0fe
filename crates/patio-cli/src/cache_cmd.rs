//! `patio mount cache` (the segment-grouping cache mount of patio-fs) and `patio cache
//! stat` (what a cache directory holds and what its last run did).

use crate::mount::{ended_text, notifier};
use crate::mount_json::EndReport;
use crate::size_arg::{resolve, Size};
use crate::store_args::{describe_store, StoreArgs};
use anyhow::{bail, Result};
use patio_cache::{CacheConfig, CacheStats, Policy, Popularity};
use patio_fs::segcache::{self, CacheMount, CacheSummary};
use patio_prefetch::StoreConfig;
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(clap::Args, Clone)]
pub struct CacheArgs {
    /// Directory whose files the mount serves (a parallel file system in real use).
    #[arg(value_name = "SOURCE_DIR")]
    source: PathBuf,
    /// Empty directory to mount on (outside SOURCE_DIR).
    #[arg(value_name = "MOUNTPOINT")]
    mountpoint: PathBuf,
    /// Directory on local storage for the segment store and its table (created if
    /// missing; one mount at a time).
    #[arg(long, value_name = "DIR")]
    cache_dir: PathBuf,
    /// none (every read goes to SOURCE), lru (plain block cache of the same memory
    /// and disk capacity) or group (segment grouping).
    #[arg(long, default_value = "group", value_parser = ["none", "lru", "group"])]
    policy: String,
    /// Memory budget of cached items (a size: 64MiB, 1GiB) [default: 64MiB].
    #[arg(long, value_name = "SIZE")]
    memory: Option<Size>,
    /// Disk budget of the segment store; the slot file is preallocated [default: 1GiB].
    #[arg(long, value_name = "SIZE")]
    disk: Option<Size>,
    /// Segment size of the group policy, a multiple of the item size [default: 16MiB].
    #[arg(long, value_name = "SIZE")]
    segment: Option<Size>,
    /// Item size: the aligned extent cached, linked and invalidated [default: 64KiB].
    #[arg(long, value_name = "SIZE")]
    item: Option<Size>,
    /// Deprecated spelling of --memory, in MiB.
    #[arg(long, hide = true, value_name = "MIB")]
    memory_mib: Option<f64>,
    /// Deprecated spelling of --disk, in GiB.
    #[arg(long, hide = true, value_name = "GIB")]
    disk_gib: Option<f64>,
    /// Deprecated spelling of --segment, in MiB.
    #[arg(long, hide = true, value_name = "MIB")]
    segment_mib: Option<f64>,
    /// Deprecated spelling of --item, in KiB.
    #[arg(long, hide = true, value_name = "KIB")]
    item_kib: Option<f64>,
    /// Recent popularity: link a successor seen at least J times …
    #[arg(long, default_value_t = 2, value_name = "J")]
    link_j: usize,
    /// … among an item's last K successors.
    #[arg(long, default_value_t = 4, value_name = "K")]
    link_k: usize,
    /// Items the successor graph tracks at most.
    #[arg(long, default_value_t = 1 << 20, value_name = "N")]
    graph_items: usize,
    /// No request for this long is an idle period: groups are rebuilt and the table
    /// saved.
    #[arg(long, default_value_t = 2000, value_name = "MS")]
    idle_ms: u64,
    /// Rebuild the groups on a miss once the graph changed this many times.
    #[arg(long, default_value_t = 32, value_name = "N")]
    build_after: u64,
    #[command(flatten)]
    store: StoreArgs,
    #[command(flatten)]
    report: EndReport,
    #[command(flatten)]
    log: crate::logging::LogArg,
    /// Let other users use the mount too (FUSE allow_other). A non-root user needs
    /// `user_allow_other` in /etc/fuse.conf.
    #[arg(long)]
    allow_other: bool,
}

#[derive(clap::Subcommand)]
pub enum CacheCommand {
    /// What a cache directory holds (segments, items, files) and what its last run did.
    Stat {
        /// The --cache-dir of `patio mount cache`.
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// `size` MiB or GiB (`unit` bytes) as bytes, a multiple of 4 KiB.
/// A size option of the cache, rounded down to 4 KiB, which it must be at least.
fn bytes(
    new: Option<Size>,
    flag: &str,
    old: Option<f64>,
    old_flag: &str,
    unit: u64,
    default: Size,
) -> Result<u64> {
    let b = resolve(new, flag, old, old_flag, unit, default)?;
    if !(4096..1 << 62).contains(&b) {
        bail!("{flag} {}: must be at least 4 KiB", Size(b));
    }
    Ok(b / 4096 * 4096)
}

fn config(args: &CacheArgs) -> Result<CacheConfig> {
    let policy = Policy::parse(&args.policy).map_err(anyhow::Error::msg)?;
    if args.link_j == 0 || args.link_k < args.link_j {
        bail!("--link-j must be at least 1 and --link-k at least --link-j");
    }
    if args.graph_items < 2 {
        bail!("--graph-items must be at least 2");
    }
    let item = resolve(
        args.item,
        "--item",
        args.item_kib,
        "--item-kib",
        1 << 10,
        Size(64 << 10),
    )?;
    let cfg = CacheConfig {
        policy,
        memory: bytes(
            args.memory,
            "--memory",
            args.memory_mib,
            "--memory-mib",
            1 << 20,
            Size(64 << 20),
        )?,
        disk: bytes(
            args.disk,
            "--disk",
            args.disk_gib,
            "--disk-gib",
            1 << 30,
            Size(1 << 30),
        )?,
        segment: bytes(
            args.segment,
            "--segment",
            args.segment_mib,
            "--segment-mib",
            1 << 20,
            Size(16 << 20),
        )?,
        item,
        popularity: Popularity {
            j: args.link_j,
            k: args.link_k,
            max_nodes: args.graph_items,
        },
        idle: Duration::from_millis(args.idle_ms),
        build_after: args.build_after.max(1),
    };
    cfg.check().map_err(anyhow::Error::msg)?;
    Ok(cfg)
}

/// Counters and rates as JSON keys.
fn counters_json(stats: &CacheStats) -> Map<String, Value> {
    let mut m = Map::new();
    for (k, v) in stats.named() {
        m.insert(k, json!(v));
    }
    m.insert("group_hit_rate".into(), json!(stats.group_hit_rate()));
    m.insert("hit_rate".into(), json!(stats.hit_rate()));
    m.insert("grouping_io_ratio".into(), json!(stats.grouping_io_ratio()));
    m
}

fn summary_json(
    args: &CacheArgs,
    cfg: &CacheConfig,
    store: Option<&StoreConfig>,
    s: &CacheSummary,
) -> Value {
    let mut m = counters_json(&s.stats);
    let extra = json!({
        "policy": cfg.policy.name(),
        "cache_dir": args.cache_dir,
        "memory_budget_bytes": cfg.memory,
        "disk_budget_bytes": cfg.disk,
        "segment_bytes": cfg.segment,
        "slot_bytes": cfg.slot_size(),
        "item_bytes": cfg.item,
        "link_j": cfg.popularity.j,
        "link_k": cfg.popularity.k,
        "idle_ms": args.idle_ms,
        "fuse_mode": "direct_io",
        "slots": s.slots,
        "slots_used": s.slots_used,
        "memory_bytes": s.memory_bytes,
        "graph_items": s.graph_items,
        "graph_bytes": s.graph_bytes,
        "store_direct": s.store_direct,
        "io_mode": s.io_mode,
        "cold_reason": s.cold_reason,
        "disabled": s.disabled,
        "writes": s.writes,
        "written_bytes": s.written_bytes,
        "fallback_handles": s.fallback_handles,
        "fallback_reason": s.fallback_reason,
        "ended": ended_text(s.ended),
    });
    if let Value::Object(e) = extra {
        m.extend(e);
    }
    if let Value::Object(st) = serde_json::to_value(args.store.json(store)).unwrap_or_default() {
        m.extend(st);
    }
    Value::Object(m)
}

pub fn mount(args: CacheArgs) -> Result<()> {
    args.log.apply(&args.mountpoint)?;
    let cfg = config(&args)?;
    let store = args.store.config()?;
    let req = CacheMount {
        source: args.source.clone(),
        mountpoint: args.mountpoint.clone(),
        cache_dir: args.cache_dir.clone(),
        cache: cfg.clone(),
        store: store.clone().unwrap_or_else(StoreConfig::instant),
        allow_other: args.allow_other,
        outputs: args
            .report
            .stats_json
            .iter()
            .map(|p| (p.clone(), "--stats-json", "statistics"))
            .collect(),
    };
    let what = format!(
        "policy {}, memory {}, disk {}, {} slots, direct I/O, {}",
        cfg.policy.name(),
        crate::report::human_bytes(cfg.memory),
        crate::report::human_bytes(cfg.disk),
        if cfg.policy == Policy::Group {
            format!("{} segment", crate::report::human_bytes(cfg.segment))
        } else {
            format!("{} item", crate::report::human_bytes(cfg.item))
        },
        describe_store(store.as_ref())
    );
    let mut notify = notifier("caching", &req.source, &req.mountpoint, &what);
    let live = {
        let (a, c, st) = (args.clone(), cfg.clone(), store.clone());
        let (w, mnt) = (what.clone(), req.mountpoint.clone());
        crate::mount_stat::renderer(
            "cache",
            &req.source,
            &req.mountpoint,
            move |s| summary_json(&a, &c, st.as_ref(), s),
            move |s| render(s, &mnt, &w),
        )
    };
    let summary = segcache::run(&req, &mut notify, Some(live))?;
    let json = summary_json(&args, &cfg, store.as_ref(), &summary);
    args.report
        .finish(&json, &render(&summary, &req.mountpoint, &what))
}

fn render(s: &CacheSummary, mountpoint: &Path, what: &str) -> String {
    use crate::report::{grouped, human_bytes};
    let st = &s.stats;
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let mut lines = vec![
        ("reads", grouped(st.reads)),
        (
            "lookups",
            format!(
                "{} group hits ({}), {} other hits, {} misses",
                grouped(st.group_hits),
                pct(st.group_hit_rate()),
                grouped(st.plain_hits),
                grouped(st.misses)
            ),
        ),
        (
            "bytes served",
            format!(
                "memory {}, segment store {}, SOURCE {}",
                human_bytes(st.bytes_from_memory),
                human_bytes(st.bytes_from_segments),
                human_bytes(st.bytes_from_source)
            ),
        ),
        (
            "SOURCE",
            format!(
                "{} requests, {}",
                grouped(st.source_requests),
                human_bytes(st.source_bytes)
            ),
        ),
        (
            "segment store",
            format!(
                "{} reads ({}), {} writes ({}), {} of {} slots used, {} evicted",
                grouped(st.segment_reads),
                human_bytes(st.segment_read_bytes),
                grouped(st.segment_writes),
                human_bytes(st.segment_write_bytes),
                s.slots_used,
                s.slots,
                grouped(st.evicted_segments)
            ),
        ),
        (
            "groups",
            format!(
                "{} built, {} reused in {} builds; {} strided batches brought ahead ({}); grouping I/O {} ({} from SOURCE, {} local), {:.2}× the bytes served",
                grouped(st.groups_built),
                grouped(st.groups_reused),
                grouped(st.group_builds),
                grouped(st.stride_batches),
                human_bytes(st.stride_bytes),
                human_bytes(st.grouping_io_bytes),
                human_bytes(st.grouping_source_bytes),
                human_bytes(st.grouping_local_bytes),
                st.grouping_io_ratio()
            ),
        ),
        (
            "idle work",
            format!("{:.2} s", st.idle_work_ns as f64 / 1e9),
        ),
        (
            "successor graph",
            format!(
                "{} items, {}",
                grouped(s.graph_items as u64),
                human_bytes(s.graph_bytes)
            ),
        ),
        (
            "invalidated",
            format!(
                "{} items, {} files changed outside the mount, {} checksum misses",
                grouped(st.invalidated_items),
                grouped(st.stale_files),
                grouped(st.checksum_misses)
            ),
        ),
        (
            "memory",
            format!("peak {}", human_bytes(st.peak_memory_bytes)),
        ),
    ];
    if st.warm_items > 0 {
        lines.push(("warm start", format!("{} items", grouped(st.warm_items))));
    }
    if let Some(d) = &s.disabled {
        lines.push(("cache off", d.clone()));
    }
    let width = lines.iter().map(|l| l.0.len()).max().unwrap_or(0);
    let mut out = format!(
        "patio: {} {} ({what})\n",
        mountpoint.display(),
        ended_text(s.ended)
    );
    for (k, v) in lines {
        out += &format!("  {k:<width$}  {v}\n");
    }
    out
}

pub fn run(cmd: CacheCommand) -> Result<()> {
    match cmd {
        CacheCommand::Stat { dir, json } => stat(&dir, json),
    }
}

fn stat(dir: &Path, as_json: bool) -> Result<()> {
    use crate::report::{grouped, human_bytes};
    let t = segcache::stat(dir)?;
    let stats = CacheStats::from_named(&t.counters);
    let items: usize = t.segments.iter().map(|s| s.entries.len()).sum();
    let bytes: u64 = t
        .segments
        .iter()
        .flat_map(|s| &s.entries)
        .map(|e| e.len as u64)
        .sum();
    let policy = match t.policy {
        1 => "lru",
        2 => "group",
        _ => "none",
    };
    if as_json {
        let mut m = counters_json(&stats);
        m.extend(
            json!({
                "dir": dir,
                "generation": t.generation,
                "policy": policy,
                "slot_bytes": t.slot_size,
                "slots": t.slots,
                "item_bytes": t.item_size,
                "segments": t.segments.len(),
                "items": items,
                "stored_bytes": bytes,
                "files": t.files.len(),
            })
            .as_object()
            .cloned()
            .unwrap_or_default(),
        );
        println!("{}", serde_json::to_string_pretty(&Value::Object(m))?);
        return Ok(());
    }
    let pct = |x: f64| format!("{:.1}%", x * 100.0);
    let lines = [
        ("table generation", t.generation.to_string()),
        ("policy", policy.to_string()),
        (
            "segments",
            format!(
                "{} of {} slots of {}",
                t.segments.len(),
                t.slots,
                human_bytes(t.slot_size)
            ),
        ),
        (
            "items",
            format!(
                "{} of {} ({}) from {} files",
                grouped(items as u64),
                human_bytes(t.item_size),
                human_bytes(bytes),
                t.files.len()
            ),
        ),
        (
            "last run",
            format!(
                "{} lookups: {} group hits ({}), {} other hits, {} misses",
                grouped(stats.accesses),
                grouped(stats.group_hits),
                pct(stats.group_hit_rate()),
                grouped(stats.plain_hits),
                grouped(stats.misses)
            ),
        ),
        (
            "bytes by tier",
            format!(
                "memory {}, segment store {}, SOURCE {}",
                human_bytes(stats.bytes_from_memory),
                human_bytes(stats.bytes_from_segments),
                human_bytes(stats.bytes_from_source)
            ),
        ),
        (
            "groups",
            format!(
                "{} built, {} reused; grouping I/O {} ({} from SOURCE, {} local)",
                grouped(stats.groups_built),
                grouped(stats.groups_reused),
                human_bytes(stats.grouping_io_bytes),
                human_bytes(stats.grouping_source_bytes),
                human_bytes(stats.grouping_local_bytes)
            ),
        ),
    ];
    let width = lines.iter().map(|l| l.0.len()).max().unwrap_or(0);
    println!("{}", dir.display());
    for (k, v) in lines {
        println!("  {k:<width$}  {v}");
    }
    Ok(())
}
