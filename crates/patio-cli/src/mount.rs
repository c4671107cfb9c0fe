//! `patio mount …`: FUSE mounts served by this process in the foreground.
//! `patio mount trace` records every read and write made through a passthrough mount
//! (patio-fs's tracing mount); `patio mount prefetch` serves the reads of a
//! passthrough mount through the prefetch engine (patio-fs's prefetch mount) and
//! reports its counters when the mount ends; `patio mount container` stores the files
//! made under the mount as pattern-indexed containers in a backend directory
//! (patio-fs's container mount) and reports what it wrote when the mount ends;
//! `patio mount cache` (in `cache_cmd`) caches reads in grouped segments. Every
//! mount publishes its counters while it runs (`patio mount stat`, in `mount_stat`)
//! and writes its log lines where `--log` says (`logging`).

use crate::counters::{aligned, CountersJson};
use crate::logging::LogArg;
use crate::mount_json::{ContainerStatsJson, EndReport, TraceStatsJson};
use crate::mount_stat::renderer;
use crate::size_arg::{resolve, Size};
use crate::store_args::{describe_store, StoreArgs, StoreJson};
use anyhow::{bail, Result};
use patio_fs::container::{self, ContainerMount, ContainerSummary, IndexMode, Thresholds};
use patio_fs::prefetch::{self, PrefetchMount, PrefetchSummary};
use patio_fs::session::Ended;
use patio_fs::tracing::{self, TraceMount};
use patio_prefetch::{EngineConfig, PolicyKind, StoreConfig};
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum MountCommand {
    /// Mount SOURCE_DIR at MOUNTPOINT and record every read and write made through it.
    ///
    /// A passthrough FUSE mount: everything done under MOUNTPOINT happens to the files
    /// in SOURCE_DIR. Files are opened in direct-I/O mode (FOPEN_DIRECT_IO), so each
    /// read and write reaches the tracer with the application's own offset and size
    /// rather than as page-cache or readahead chunks (requests above the kernel's
    /// per-request limit, 1 MiB today, arrive split). Each request is recorded as
    /// module FUSE, the file's path inside the mount, the caller's pid as rank, the op,
    /// the offset, the bytes transferred and the service start and end times (seconds
    /// since the mount was made).
    ///
    /// Runs in the foreground. Stop it with Ctrl-C, SIGTERM, or `fusermount3 -u
    /// MOUNTPOINT`; the trace is written then (native format, or CSV when TRACE ends in
    /// .csv) and one line reported on stderr (--json: the counters on stdout). If the
    /// mount point is busy, a second signal detaches it lazily.
    #[command(
        after_help = "Example:\n  patio mount trace data/ /mnt/traced -o run.ptrace &\n  ./app /mnt/traced/input.h5\n  fusermount3 -u /mnt/traced        # or kill -INT the patio process\n  patio analyze run.ptrace"
    )]
    Trace(TraceArgs),
    /// Mount SOURCE_DIR at MOUNTPOINT and serve its reads through the prefetch engine.
    ///
    /// A passthrough FUSE mount: everything done under MOUNTPOINT happens to the files
    /// in SOURCE_DIR, and reads return exactly the source's bytes. Each open file
    /// handle gets its own stream reader with the chosen policy (none, readahead,
    /// stride, markov, pattern), which predicts the handle's next reads; worker
    /// threads prefetch them into one cache for the whole mount (--memory). The
    /// files are read with O_DIRECT where the source file system allows it, behind
    /// the slow-store model when --latency-ms or --bandwidth-mbps is given (each
    /// backend request costs latency + bytes / bandwidth, at most --concurrency at a
    /// time), at the source's own speed otherwise. Writes go to the real file and
    /// drop the cached bytes they overlap.
    ///
    /// FUSE mode. With --direct-io files are opened FOPEN_DIRECT_IO: the kernel's page
    /// cache is bypassed and every read the application makes reaches the policy
    /// unchanged (split only above the kernel's 1 MiB per-request limit); this is the
    /// mode where the application's access pattern is visible. Without it (cached
    /// mode) the kernel's page cache and its own readahead sit in front: the policy
    /// sees page-cache misses and the kernel's readahead requests (whole pages, up to
    /// a few hundred KiB each), not the application's reads, and data the kernel has
    /// cached is served without reaching the daemon.
    ///
    /// The oracle policy cannot serve a mount (it needs the future requests); markov
    /// needs a model trained on an earlier run (--model).
    ///
    /// Runs in the foreground. Stop it with Ctrl-C, SIGTERM, or `fusermount3 -u
    /// MOUNTPOINT`; the counters (hits, late hits, misses, accuracy, coverage, backend
    /// requests and bytes) are printed then on stderr (--json: as JSON on stdout), and
    /// written to --stats-json.
    #[command(
        after_help = "Examples:\n  patio mount prefetch data/ /mnt/pf --policy pattern --direct-io --latency-ms 2 --bandwidth-mbps 200 &\n  ./app /mnt/pf/input.h5\n  fusermount3 -u /mnt/pf            # prints the counters\n\n  # markov: train on a traced run first\n  patio mount trace data/ /mnt/t -o run.ptrace   # run the app, unmount\n  patio replay run.ptrace --data data/input.h5 --policy markov --stream 0 --save-model m.ppms\n  patio mount prefetch data/ /mnt/pf --policy markov --model m.ppms --direct-io"
    )]
    Prefetch(PrefetchArgs),
    /// Mount BACKEND_DIR at MOUNTPOINT: files written under the mount are stored as pattern-indexed containers.
    ///
    /// Every regular file created under MOUNTPOINT is a patio container in
    /// BACKEND_DIR (a directory of the same name holding per-writer logs); directories
    /// are plain directories. Each process writing a file gets its own data and index
    /// log, so processes writing one shared file (N-1) never wait on each other, and
    /// strided writes are indexed as patterns (--index pattern) or one entry per write
    /// (--index raw). Reads merge every writer's index; a process reads its own writes
    /// and everything other processes wrote before the read.
    ///
    /// Files are opened in direct-I/O mode (FOPEN_DIRECT_IO, parallel writes allowed):
    /// every application read and write reaches the container with its own offset and
    /// size, not split into page-cache chunks or merged by writeback (requests above
    /// the kernel's 1 MiB per-request limit arrive split). Shared mmap, also writable,
    /// works on Linux 6.6 and later (FUSE_DIRECT_IO_ALLOW_MMAP; pages written through
    /// a map reach the container when the kernel writes them back: msync, munmap or
    /// close); older kernels refuse MAP_SHARED maps with ENODEV. Durability is a local
    /// file system's: what close(2) returned for survives the daemon being killed
    /// (SIGKILL), not a power loss; fsync(2) of a file and unmount sync to the backend's
    /// disk. Sizes are right while files are being written;
    /// truncate, fallocate (allocating, zeroing and punching ranges: zeros are
    /// written, a container keeps no holes of its own), unlink, rename, chmod and
    /// chown work; hard and symbolic links do not.
    /// Permissions are enforced by the kernel (default_permissions) against each
    /// container directory's mode and owner.
    ///
    /// Runs in the foreground. Stop it with Ctrl-C, SIGTERM, or `fusermount3 -u
    /// MOUNTPOINT`: every writer still open is flushed, the backend is synced and a
    /// summary is printed on stderr (--json: its counters as JSON on stdout). If the
    /// mount point is busy, a second signal detaches it lazily (writers are flushed
    /// then too).
    #[command(
        after_help = "Examples:\n  patio mount container /scratch/ckpt /mnt/ckpt &\n  mpirun -n 16 ./app --checkpoint /mnt/ckpt/step1.dat\n  fusermount3 -u /mnt/ckpt            # flushes, prints a summary\n  patio container stat /scratch/ckpt/step1.dat\n  patio container flatten /scratch/ckpt/step1.dat step1.dat"
    )]
    Container(ContainerArgs),
    /// Mount SOURCE_DIR at MOUNTPOINT and cache its reads in memory and in grouped segments on local disk.
    ///
    /// A passthrough FUSE mount (direct I/O) whose reads go through a memory tier,
    /// then a segment store on local storage (--cache-dir: one preallocated file of
    /// fixed-size slots, O_DIRECT where possible), then SOURCE_DIR, read through the
    /// storage model when one is given (--store hdd|ssd|lustre|probed or --latency-ms
    /// / --bandwidth-mbps). Items are aligned extents of --item.
    ///
    /// Policies: none (every read goes to SOURCE_DIR); lru (a plain block cache of the
    /// same memory and disk capacity); group (a successor graph learns which item is
    /// read after which — linked when seen --link-j of the last --link-k times —
    /// and related items, from any files, are grouped into segments of --segment;
    /// a miss on a grouped item reads its whole segment, from the store if it is
    /// there, else from SOURCE_DIR, writing it to the store). Groups are rebuilt on a
    /// miss and after --idle-ms without requests.
    ///
    /// Reads are never stale: writes through the mount drop the cached items they
    /// overlap before returning, and a file changed outside the mount (size, mtime,
    /// ctime, inode) loses its cached items before the next read is served. The
    /// segment table is saved in idle periods and at unmount, so the next mount of
    /// the same --cache-dir starts warm; a damaged table means a cold start.
    ///
    /// Runs in the foreground. Stop it with Ctrl-C, SIGTERM, or `fusermount3 -u
    /// MOUNTPOINT`; the counters are printed then on stderr (--json: as JSON on stdout)
    /// and written to --stats-json.
    #[command(
        after_help = "Examples:\n  patio mount cache /pfs/data /mnt/c --cache-dir /local/patio-cache --store hdd &\n  ./app /mnt/c/input.dat\n  fusermount3 -u /mnt/c              # prints the counters\n  patio cache stat /local/patio-cache"
    )]
    Cache(crate::cache_cmd::CacheArgs),
    /// Show the counters of a running mount without unmounting it.
    ///
    /// Every mount (trace, prefetch, cache, container) rewrites its counters once a
    /// second to a stats file in a private directory of the user who mounted
    /// ($XDG_RUNTIME_DIR/patio, else $TMPDIR/patio-UID); this reads that file, so it
    /// answers even while the mount is busy. Run it as that user, on the machine of
    /// the mount. With --json it prints the object the mount writes to --stats-json
    /// when it ends ("ended": "running"). Exit status 1 when MOUNTPOINT is not a
    /// running patio mount.
    #[command(
        after_help = "Examples:\n  patio mount prefetch data/ /mnt/pf --policy pattern &\n  patio mount stat                  # every running mount of this user\n  patio mount stat /mnt/pf\n  watch -n1 patio mount stat /mnt/pf\n  patio mount stat /mnt/pf --json | jq .hits"
    )]
    Stat(crate::mount_stat::StatArgs),
}

#[derive(clap::Args)]
pub struct TraceArgs {
    /// Directory whose files the mount serves.
    #[arg(value_name = "SOURCE_DIR")]
    source: PathBuf,
    /// Empty directory to mount on (outside SOURCE_DIR).
    #[arg(value_name = "MOUNTPOINT")]
    mountpoint: PathBuf,
    /// Trace file written when the mount ends (.csv for CSV, anything else native).
    #[arg(long = "output", short, value_name = "TRACE", alias = "out")]
    out: PathBuf,
    #[command(flatten)]
    report: EndReport,
    #[command(flatten)]
    log: LogArg,
    /// Let other users use the mount too (FUSE allow_other; permission checks stay the
    /// kernel's, against the source's owners and modes). A non-root user needs
    /// `user_allow_other` in /etc/fuse.conf.
    #[arg(long)]
    allow_other: bool,
}

#[derive(clap::Args, Clone)]
pub struct PrefetchArgs {
    /// Directory whose files the mount serves.
    #[arg(value_name = "SOURCE_DIR")]
    source: PathBuf,
    /// Empty directory to mount on (outside SOURCE_DIR).
    #[arg(value_name = "MOUNTPOINT")]
    mountpoint: PathBuf,
    /// Prediction policy of every open file: none, readahead, stride, markov, pattern.
    #[arg(long)]
    policy: String,
    /// Open files in direct-I/O mode (FOPEN_DIRECT_IO): every application read reaches
    /// the policy unchanged. Without it, the kernel's page cache and readahead act in
    /// front (cached mode).
    #[arg(long)]
    direct_io: bool,
    #[command(flatten)]
    store: StoreArgs,
    /// Prefetch cache budget of the whole mount, in-flight and ready prefetches
    /// together (a size: 64MiB, 1GiB) [default: 64MiB].
    #[arg(long, value_name = "SIZE")]
    memory: Option<Size>,
    /// Deprecated spelling of --memory, in MiB.
    #[arg(long, hide = true, value_name = "MIB")]
    cache_mib: Option<f64>,
    /// Prefetch worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// A model saved by an earlier run for markov or pattern (`patio replay
    /// --save-model` with one stream, or a bare model); every open file starts from it.
    #[arg(long, value_name = "FILE")]
    model: Option<PathBuf>,
    #[command(flatten)]
    report: EndReport,
    #[command(flatten)]
    log: LogArg,
    /// Let other users use the mount too (FUSE allow_other; permission checks stay the
    /// kernel's). A non-root user needs `user_allow_other` in /etc/fuse.conf.
    #[arg(long)]
    allow_other: bool,
}

#[derive(clap::Args)]
pub struct ContainerArgs {
    /// Directory holding the containers (and plain directories) the mount shows.
    #[arg(value_name = "BACKEND_DIR")]
    backend: PathBuf,
    /// Empty directory to mount on (outside BACKEND_DIR).
    #[arg(value_name = "MOUNTPOINT")]
    mountpoint: PathBuf,
    /// Index mode of the files created through the mount: pattern (strided writes as
    /// pattern entries) or raw (one entry per write). Existing containers keep theirs.
    #[arg(long, default_value = "pattern", value_parser = ["pattern", "raw"])]
    index: String,
    /// Let other users use the mount too (FUSE allow_other; the kernel checks the
    /// files' modes and owners). A non-root user needs `user_allow_other` in
    /// /etc/fuse.conf.
    #[arg(long)]
    allow_other: bool,
    /// Further mount options, comma-separated: ro, noatime, nodev, nosuid, noexec,
    /// sync, dirsync, allow_other, fsname=NAME (and their opposites).
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Vec<String>,
    /// Background compaction: merge a file's small logs (see --compact-small-log)
    /// when its container holds more than N index logs (checked after each
    /// truncation and each close of a writer; a file nobody has had open for 100 ms,
    /// or truncated to zero, as soon as it holds two).
    #[arg(long, value_name = "N", default_value_t = Thresholds::default().max_logs,
          value_parser = clap::value_parser!(u64).range(1..))]
    compact_max_logs: u64,
    /// Background compaction: compact all of a file whose logs occupy more than
    /// RATIO × its size plus --compact-min-dead bytes.
    #[arg(long, value_name = "RATIO", default_value_t = Thresholds::default().dead_ratio,
          value_parser = parse_ratio)]
    compact_dead_ratio: f64,
    /// Background compaction: dead bytes tolerated while a file is open (see
    /// --compact-dead-ratio; at rest, at most 64 KiB). A truncation also closes a
    /// writer whose log passed this allowance, so that compaction can reclaim it.
    #[arg(long, value_name = "BYTES", default_value_t = Thresholds::default().min_dead)]
    compact_min_dead: u64,
    /// Background compaction: logs whose data log is larger are not rewritten just
    /// to lower the log count (an N-1 file's per-process logs stay as written); new
    /// writers take over ended writers' logs up to this size (also with --no-compact;
    /// 0: never).
    #[arg(long, value_name = "BYTES", default_value_t = Thresholds::default().small_log)]
    compact_small_log: u64,
    /// No background compaction (`patio container compact` still works).
    #[arg(long)]
    no_compact: bool,
    #[command(flatten)]
    report: EndReport,
    #[command(flatten)]
    log: LogArg,
}

/// A ratio of at least 1 (a container cannot be smaller than its live data).
fn parse_ratio(s: &str) -> std::result::Result<f64, String> {
    match s.parse::<f64>() {
        Ok(r) if r.is_finite() && r >= 1.0 => Ok(r),
        _ => Err(format!("{s:?} is not a ratio of at least 1")),
    }
}

pub fn run(cmd: MountCommand) -> Result<()> {
    match cmd {
        MountCommand::Container(args) => container_mount(args),
        MountCommand::Trace(args) => trace(args),
        MountCommand::Prefetch(args) => prefetch_mount(args),
        MountCommand::Cache(args) => crate::cache_cmd::mount(args),
        MountCommand::Stat(args) => match crate::mount_stat::run(args)? {
            0 => Ok(()),
            code => std::process::exit(code.into()),
        },
    }
}

fn trace(args: TraceArgs) -> Result<()> {
    crate::retired::warn_if_given("--out", "--output");
    args.log.apply(&args.mountpoint)?;
    check_stats_output(args.report.stats_json.as_deref(), &args.mountpoint)?;
    let req = TraceMount {
        source: args.source,
        mountpoint: args.mountpoint,
        out: args.out,
        allow_other: args.allow_other,
    };
    let mut notify = notifier("tracing", &req.source, &req.mountpoint, "direct I/O");
    let (out, out_shown, mnt) = (req.out.clone(), req.out.clone(), req.mountpoint.clone());
    let live = renderer(
        "trace",
        &req.source,
        &req.mountpoint,
        move |s| serde_json::json!(TraceStatsJson::new(&out, s)),
        move |s| render_trace(&TraceStatsJson::new(&out_shown, s), &mnt),
    );
    let summary = tracing::run(&req, &mut notify, Some(live))?;
    let json = TraceStatsJson::new(&req.out, &summary);
    let text = format!(
        "patio: {} {}; wrote {}: {} requests in {} streams\n",
        req.mountpoint.display(),
        json.ended,
        req.out.display(),
        summary.requests,
        summary.streams
    );
    args.report.finish(&json, &text)
}

/// The live report of a trace mount.
fn render_trace(j: &TraceStatsJson, mountpoint: &Path) -> String {
    use crate::report::{grouped, human_bytes};
    let lines = vec![
        ("requests", grouped(j.requests)),
        ("streams", grouped(j.streams)),
        ("files", grouped(j.files)),
        ("bytes", human_bytes(j.bytes)),
    ];
    let head = format!(
        "patio: {} {} (recording into {})\n",
        mountpoint.display(),
        j.ended,
        j.output
    );
    head + &aligned(&lines, "  ")
}

/// `--stats-json` of a mount that does not check its outputs itself: writable, and
/// outside the mount point.
fn check_stats_output(path: Option<&Path>, mountpoint: &Path) -> Result<()> {
    if let Some(p) = path {
        let mnt = std::fs::canonicalize(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
        patio_fs::check_output(p, &mnt, "--stats-json", "statistics")?;
    }
    Ok(())
}

/// The model of `--model`: one stream's model (`patio_prefetch::model`'s rule).
fn load_model(path: &Path, kind: PolicyKind) -> Result<Vec<u8>> {
    patio_prefetch::model::read_stream_model(path, kind)
        .map_err(|e| anyhow::anyhow!("--model: {e}"))
}

/// The counters of a prefetch mount, as written to `--stats-json`.
#[derive(Serialize, Clone, Debug)]
pub struct MountStatsJson {
    pub policy: String,
    /// `direct_io` (FOPEN_DIRECT_IO) or `cached` (kernel page cache and readahead).
    pub fuse_mode: String,
    /// The storage model (latency_ms, bandwidth_mbps, store, store_targets,
    /// store_stripe_bytes, concurrency).
    #[serde(flatten)]
    pub store: StoreJson,
    pub workers: usize,
    /// Read requests the engine served (hits + late_hits + misses).
    pub requests: u64,
    #[serde(flatten)]
    pub counters: CountersJson,
    /// Every read request the mount served; those of handles served with plain pread
    /// (the engine could not reopen the file) are not in the engine's counters.
    pub mount_reads: u64,
    pub passthrough_reads: u64,
    pub writes: u64,
    pub written_bytes: u64,
    pub invalidations: u64,
    pub handles: u64,
    pub files: u64,
    pub fallback_handles: u64,
    pub fallback_reason: Option<String>,
    pub io_mode: Option<String>,
    pub ended: String,
}

impl MountStatsJson {
    fn new(args: &PrefetchArgs, store: Option<&StoreConfig>, s: &PrefetchSummary) -> Self {
        let st = &s.stats;
        let c = &s.counts;
        MountStatsJson {
            policy: args.policy.clone(),
            fuse_mode: if args.direct_io {
                "direct_io"
            } else {
                "cached"
            }
            .into(),
            store: args.store.json(store),
            workers: args.workers,
            requests: st.requests,
            counters: CountersJson::new(st),
            mount_reads: c.reads,
            passthrough_reads: c.passthrough_reads,
            writes: c.writes,
            written_bytes: c.written_bytes,
            invalidations: c.invalidations,
            handles: c.handles,
            files: c.files,
            fallback_handles: c.fallback_handles,
            fallback_reason: s.fallback_reason.clone(),
            io_mode: s.io_mode.clone(),
            ended: ended_text(s.ended).into(),
        }
    }
}

/// The one-line messages of a mount while it runs: where it is mounted (`verb`
/// SOURCE, `what` it does) and how to stop it, or what the session says.
pub fn notifier<'a>(
    verb: &'a str,
    source: &'a Path,
    mountpoint: &'a Path,
    what: &'a str,
) -> impl FnMut(&str) + 'a {
    let pid = std::process::id();
    move |msg: &str| {
        if msg.starts_with("mounted") {
            eprintln!(
                "patio: {verb} {} {msg} ({what}); stop with Ctrl-C, `kill {pid}` or \
                 `fusermount3 -u {}`",
                source.display(),
                mountpoint.display()
            );
        } else {
            eprintln!("patio: {msg}");
        }
    }
}

pub fn ended_text(e: Ended) -> &'static str {
    match e {
        Ended::Signal(_) => "unmounted",
        Ended::Unmounted => "unmounted externally",
        Ended::Detached => "detached lazily",
        Ended::Running => "running",
    }
}

fn prefetch_mount(args: PrefetchArgs) -> Result<()> {
    args.log.apply(&args.mountpoint)?;
    let kind: PolicyKind = args.policy.parse()?;
    let model = args
        .model
        .as_deref()
        .map(|p| load_model(p, kind))
        .transpose()?;
    let store = args.store.config()?;
    let budget = resolve(
        args.memory,
        "--memory",
        args.cache_mib,
        "--cache-mib",
        1 << 20,
        Size(64 << 20),
    )?;
    if args.workers == 0 || budget == 0 {
        bail!("--workers and --memory must be at least 1");
    }
    let req = PrefetchMount {
        source: args.source.clone(),
        mountpoint: args.mountpoint.clone(),
        policy: kind,
        model,
        direct_io: args.direct_io,
        store: store.clone().unwrap_or_else(|| StoreConfig {
            concurrency: args.store.concurrency,
            ..StoreConfig::instant()
        }),
        engine: EngineConfig {
            workers: args.workers,
            budget,
            ..EngineConfig::default()
        },
        allow_other: args.allow_other,
        outputs: args
            .report
            .stats_json
            .iter()
            .map(|p| (p.clone(), "--stats-json", "statistics"))
            .collect(),
    };
    let mode = if args.direct_io {
        "direct I/O"
    } else {
        "cached mode: kernel page cache and readahead in front"
    };
    let what = format!("policy {kind}, {mode}, {}", describe_store(store.as_ref()));
    let mut notify = notifier("prefetching", &req.source, &req.mountpoint, &what);
    let live = {
        let (args, store, what, mnt) = (
            args.clone(),
            store.clone(),
            what.clone(),
            req.mountpoint.clone(),
        );
        let (json_args, json_store) = (args.clone(), store.clone());
        renderer(
            "prefetch",
            &req.source,
            &req.mountpoint,
            move |s| serde_json::json!(MountStatsJson::new(&json_args, json_store.as_ref(), s)),
            move |s| render(&MountStatsJson::new(&args, store.as_ref(), s), &what, &mnt),
        )
    };
    let summary = prefetch::run(&req, &mut notify, Some(live))?;
    let json = MountStatsJson::new(&args, store.as_ref(), &summary);
    args.report
        .finish(&json, &render(&json, &what, &req.mountpoint))
}

fn render(j: &MountStatsJson, what: &str, mountpoint: &Path) -> String {
    use crate::report::{grouped, human_bytes};
    let mut reads = format!("{} through the engine", grouped(j.requests));
    if j.passthrough_reads > 0 {
        reads += &format!(
            ", {} with pread ({} handles the engine could not open: {})",
            grouped(j.passthrough_reads),
            j.fallback_handles,
            j.fallback_reason.as_deref().unwrap_or("?")
        );
    }
    let mut lines = vec![("reads", reads)];
    lines.extend(j.counters.lines());
    lines.push((
        "writes",
        format!(
            "{}, {} ({} invalidations)",
            grouped(j.writes),
            human_bytes(j.written_bytes),
            grouped(j.invalidations)
        ),
    ));
    lines.push((
        "open files",
        format!("{} handle(s) of {} file(s)", j.handles, j.files),
    ));
    let head = format!("patio: {} {} ({what})\n", mountpoint.display(), j.ended);
    head + &aligned(&lines, "  ")
}

fn container_mount(args: ContainerArgs) -> Result<()> {
    args.log.apply(&args.mountpoint)?;
    let index = IndexMode::parse(&args.index)?;
    check_stats_output(args.report.stats_json.as_deref(), &args.mountpoint)?;
    let req = ContainerMount {
        backend: args.backend,
        mountpoint: args.mountpoint,
        index,
        allow_other: args.allow_other,
        options: args.options,
        compaction: (!args.no_compact).then_some(Thresholds {
            max_logs: args.compact_max_logs,
            dead_ratio: args.compact_dead_ratio,
            min_dead: args.compact_min_dead,
            small_log: args.compact_small_log,
        }),
        reuse_limit: args.compact_small_log,
    };
    let what = format!("{} index, direct I/O", index.name());
    let mut notify = notifier("containers in", &req.backend, &req.mountpoint, &what);
    let mnt = req.mountpoint.clone();
    let live = renderer(
        "container",
        &req.backend,
        &req.mountpoint,
        move |s| serde_json::json!(ContainerStatsJson::new(index, s)),
        move |s| render_container(s, &mnt),
    );
    let summary = container::run(&req, &mut notify, Some(live))?;
    args.report.finish(
        &ContainerStatsJson::new(index, &summary),
        &render_container(&summary, &req.mountpoint),
    )
}

fn render_container(s: &ContainerSummary, mountpoint: &Path) -> String {
    use crate::report::{grouped, human_bytes};
    let mut lines = vec![
        ("files written", grouped(s.files)),
        (
            "writers",
            format!(
                "{} ({} still open at the end, flushed then)",
                grouped(s.writers),
                grouped(s.flushed_at_unmount)
            ),
        ),
        (
            "writes",
            format!("{}, {}", grouped(s.writes), human_bytes(s.written_bytes)),
        ),
        (
            "reads",
            format!(
                "{}, {} ({} index loads, {} full merges)",
                grouped(s.reads),
                human_bytes(s.read_bytes),
                grouped(s.reader_builds),
                grouped(s.reader_merges)
            ),
        ),
        ("truncations", grouped(s.truncations)),
        (
            "compactions",
            format!(
                "{} ({} index logs replaced, {} reclaimed)",
                grouped(s.compactions),
                grouped(s.compacted_logs),
                human_bytes(s.reclaimed_bytes)
            ),
        ),
    ];
    if s.compaction_errors > 0 {
        lines.push((
            "compaction errors",
            format!(
                "{} (first: {})",
                grouped(s.compaction_errors),
                s.first_compaction_error.as_deref().unwrap_or("?")
            ),
        ));
    }
    if s.failures > 0 {
        lines.push((
            "failures",
            format!(
                "{} (first: {})",
                grouped(s.failures),
                s.first_failure.as_deref().unwrap_or("?")
            ),
        ));
    }
    let width = lines.iter().map(|l| l.0.len()).max().unwrap_or(0);
    let mut out = format!("patio: {} {}\n", mountpoint.display(), ended_text(s.ended));
    for (k, v) in lines {
        out += &format!("  {k:<width$}  {v}\n");
    }
    out
}
