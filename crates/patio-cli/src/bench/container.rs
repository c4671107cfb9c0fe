//! `patio bench container`: the index of an N-1 strided checkpoint at scale, pattern
//! vs raw (the index-size and open-time figures of the pattern-PLFS paper).
//!
//! An index-only scale model: W writers each record N strided 4 KiB writes (writer
//! `w` writes blocks `w, w+W, w+2W, …`) with the container's real writer code, which
//! leaves exactly the index logs such writers would, without writing the data. Then
//! the container is opened as a reader opens it (every index log read and merged),
//! timed, and sampled lookups are checked against the known layout.

use super::{grouped, human_bytes, print_json, progress, sig3, Table, SEED};
use anyhow::{bail, Context, Result};
use patio_container::{layout, IndexMode, Reader, Writer};
use patio_core::Lookup;
use rand::{rngs::SmallRng, Rng, SeedableRng};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

const BLOCK: u64 = 4096;
/// Lookups checked against the layout per opened container.
const CHECKS: usize = 10_000;

#[derive(clap::Args)]
pub struct Args {
    /// Writer processes modelled.
    #[arg(long, default_value_t = 512)]
    writers: u64,
    /// Writes per writer; a comma-separated list runs one case each. Accepts Ki
    /// suffixes: 1Ki,4Ki,16Ki,64Ki,256Ki.
    #[arg(long, default_value = "1Ki,4Ki,16Ki,64Ki,256Ki", value_delimiter = ',')]
    writes: Vec<String>,
    /// Index modes to run (pattern, raw).
    #[arg(long, default_value = "pattern,raw", value_delimiter = ',')]
    modes: Vec<String>,
    /// Timed opens per case (median); the largest raw cases are opened once.
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Instead of the synthetic checkpoint: the write streams of this trace (any format
    /// `patio analyze` reads), one container per written file, one writer per rank.
    #[arg(long)]
    trace: Option<PathBuf>,
    /// With --trace: the module whose writes are used (default: POSIX when present,
    /// else every module).
    #[arg(long)]
    module: Option<String>,
    /// Directory for the generated containers (default: the system temp dir).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Print {"cases": [...]} as JSON instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize, Clone, Copy)]
struct Side {
    index_disk_bytes: u64,
    map_mem_bytes: usize,
    open_ms: f64,
    write_s: f64,
}

#[derive(Serialize)]
struct TraceCase {
    file: String,
    writers: u64,
    writes: u64,
    pattern: Side,
    raw: Side,
    pattern_global_patterns: u64,
}

#[derive(Serialize)]
struct Case {
    writers: u64,
    writes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pattern: Option<Side>,
    #[serde(skip_serializing_if = "Option::is_none")]
    raw: Option<Side>,
}

fn parse_count(s: &str) -> Result<u64> {
    let t = s.trim();
    let (num, mul) = match t.strip_suffix("Ki") {
        Some(n) => (n, 1024),
        None => (t, 1),
    };
    let n: u64 = num
        .parse()
        .with_context(|| format!("--writes: {t:?} is not a count like 4096 or 4Ki"))?;
    if n == 0 {
        bail!("--writes: counts must be positive");
    }
    Ok(n * mul)
}

pub fn run(args: Args) -> Result<()> {
    if let Some(trace) = &args.trace {
        return run_trace(trace, &args);
    }
    if args.writers == 0 || args.writers > 1 << 20 {
        bail!("--writers must be between 1 and 2^20");
    }
    let counts: Vec<u64> = args
        .writes
        .iter()
        .map(|s| parse_count(s))
        .collect::<Result<_>>()?;
    let modes: Vec<IndexMode> = args
        .modes
        .iter()
        .map(|m| IndexMode::parse(m.trim()))
        .collect::<std::result::Result<_, _>>()?;
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut cases = Vec::new();
    for &n in &counts {
        let mut case = Case {
            writers: args.writers,
            writes: n,
            pattern: None,
            raw: None,
        };
        for &mode in &modes {
            let tmp = tempfile::Builder::new()
                .prefix("patio-bench-container-")
                .tempdir_in(&base)
                .with_context(|| format!("creating a directory in {}", base.display()))?;
            let side = run_side(&tmp.path().join("ckpt"), mode, args.writers, n, &args)?;
            match mode {
                IndexMode::Pattern => case.pattern = Some(side),
                IndexMode::Raw => case.raw = Some(side),
            }
        }
        cases.push(case);
    }
    if args.json {
        return print_json(&cases);
    }
    let mut t = Table::new(
        format!(
            "Container index, {} writers × N strided {} writes (index-only scale model)",
            args.writers,
            human_bytes(BLOCK)
        ),
        &[
            "writes/writer",
            "entries",
            "pattern disk",
            "raw disk",
            "disk ratio",
            "pattern map",
            "raw map",
            "pattern open ms",
            "raw open ms",
            "open speedup",
        ],
    );
    let opt = |s: &Option<Side>, f: fn(&Side) -> String| s.as_ref().map_or("-".into(), f);
    for c in &cases {
        let ratio = |a: f64, b: f64| {
            if b > 0.0 {
                format!("{}×", sig3(a / b))
            } else {
                "-".into()
            }
        };
        let (disk_ratio, speedup) = match (&c.pattern, &c.raw) {
            (Some(p), Some(r)) => (
                ratio(r.index_disk_bytes as f64, p.index_disk_bytes as f64),
                ratio(r.open_ms, p.open_ms),
            ),
            _ => ("-".into(), "-".into()),
        };
        t.row(vec![
            grouped(c.writes),
            grouped(c.writes * c.writers),
            opt(&c.pattern, |s| human_bytes(s.index_disk_bytes)),
            opt(&c.raw, |s| human_bytes(s.index_disk_bytes)),
            disk_ratio,
            opt(&c.pattern, |s| human_bytes(s.map_mem_bytes as u64)),
            opt(&c.raw, |s| human_bytes(s.map_mem_bytes as u64)),
            opt(&c.pattern, |s| sig3(s.open_ms)),
            opt(&c.raw, |s| sig3(s.open_ms)),
            speedup,
        ]);
    }
    t.note("disk: bytes of all index logs; map: bytes of the merged index in memory; open: reading and merging every index log (page cache warm, median).");
    super::write_stdout(&t.render())
}

fn run_side(dir: &Path, mode: IndexMode, writers: u64, n: u64, args: &Args) -> Result<Side> {
    layout::create(dir, mode)?;
    let bar = progress(writers, args.json);
    bar.set_message(format!("{} × {} writes, {} index", writers, n, mode.name()));
    let start = Instant::now();
    for w in 0..writers {
        let mut writer = Writer::open(dir)?;
        for i in 0..n {
            writer.record_without_data((i * writers + w) * BLOCK, BLOCK)?;
        }
        writer.close()?;
        bar.inc(1);
    }
    let write_s = start.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let index_disk_bytes = index_bytes(dir)?;
    let big = mode == IndexMode::Raw && writers * n > 1 << 24;
    let reps = if big { 1 } else { args.reps.max(1) };
    let mut times = Vec::with_capacity(reps);
    let mut mem = 0;
    for _ in 0..reps {
        let start = Instant::now();
        let reader = Reader::open(dir)?;
        times.push(start.elapsed());
        mem = reader.stats().index.mem_bytes;
        verify(&reader, writers, n)?;
    }
    Ok(Side {
        index_disk_bytes,
        map_mem_bytes: mem,
        open_ms: super::median(&times).as_secs_f64() * 1e3,
        write_s,
    })
}

/// Sampled lookups must find block `b` in writer `b mod W` at row `b / W`.
fn verify(reader: &Reader, writers: u64, n: u64) -> Result<()> {
    let size = writers * n * BLOCK;
    if reader.size() != size {
        bail!(
            "opened container has size {}, expected {size}",
            reader.size()
        );
    }
    let mut rng = SmallRng::seed_from_u64(SEED);
    for _ in 0..CHECKS {
        let x = rng.gen_range(0..size);
        let block = x / BLOCK;
        let expected_writer = block % writers;
        match reader.lookup(x) {
            Lookup::Data {
                chunk,
                physical,
                len,
            } if physical == (block / writers) * BLOCK + x % BLOCK
                && len == BLOCK - x % BLOCK
                && chunk == expected_writer => {}
            other => bail!("lookup of {x} gave {other:?} (expected writer {expected_writer})"),
        }
    }
    Ok(())
}

/// One writer's writes, `(offset, length)` in order.
type Writes = Vec<(u64, u64)>;

/// The write streams of a trace grouped per file, one list of writes per rank.
fn trace_files(path: &Path, module: Option<&str>) -> Result<Vec<(String, Vec<Writes>)>> {
    use patio_core::trace::Op;
    let trace = crate::load::load_trace(path)?;
    let writes = |s: &&patio_core::trace::Stream| s.key.op == Op::Write;
    let module = match module {
        Some(m) => Some(m.to_string()),
        None => trace
            .streams
            .iter()
            .filter(writes)
            .any(|s| s.key.module == "POSIX")
            .then(|| "POSIX".to_string()),
    };
    let mut files: std::collections::BTreeMap<String, Vec<Writes>> = Default::default();
    for s in trace.streams.iter().filter(writes) {
        if module.as_ref().is_some_and(|m| &s.key.module != m) {
            continue;
        }
        let w: Writes = s
            .offsets
            .iter()
            .zip(&s.lengths)
            .filter(|(_, &l)| l > 0)
            .map(|(&o, &l)| (o, l))
            .collect();
        if !w.is_empty() {
            files.entry(s.key.file.clone()).or_default().push(w);
        }
    }
    if files.is_empty() {
        bail!(
            "{}: no write requests{}",
            path.display(),
            module.map_or(String::new(), |m| format!(" in module {m}"))
        );
    }
    Ok(files.into_iter().collect())
}

fn run_trace(path: &Path, args: &Args) -> Result<()> {
    let base = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let mut cases = Vec::new();
    for (file, ranks) in trace_files(path, args.module.as_deref())? {
        let mut sides = Vec::new();
        let mut patterns = 0;
        for mode in [IndexMode::Pattern, IndexMode::Raw] {
            let tmp = tempfile::Builder::new()
                .prefix("patio-bench-container-")
                .tempdir_in(&base)
                .with_context(|| format!("creating a directory in {}", base.display()))?;
            let dir = tmp.path().join("file");
            layout::create(&dir, mode)?;
            let start = Instant::now();
            for writes in &ranks {
                let mut writer = Writer::open(&dir)?;
                for &(offset, len) in writes {
                    writer.record_without_data(offset, len)?;
                }
                writer.close()?;
            }
            let write_s = start.elapsed().as_secs_f64();
            let index_disk_bytes = index_bytes(&dir)?;
            let mut times = Vec::new();
            let mut mem = 0;
            for _ in 0..args.reps.max(1) {
                let start = Instant::now();
                let reader = Reader::open(&dir)?;
                times.push(start.elapsed());
                mem = reader.stats().index.mem_bytes;
                if mode == IndexMode::Pattern {
                    patterns = reader.stats().index.global_patterns;
                }
            }
            sides.push(Side {
                index_disk_bytes,
                map_mem_bytes: mem,
                open_ms: super::median(&times).as_secs_f64() * 1e3,
                write_s,
            });
        }
        cases.push(TraceCase {
            file,
            writers: ranks.len() as u64,
            writes: ranks.iter().map(|r| r.len() as u64).sum(),
            pattern: sides[0],
            raw: sides[1],
            pattern_global_patterns: patterns,
        });
    }
    if args.json {
        return print_json(&cases);
    }
    let mut t = Table::new(
        format!("Container index of the write streams of {}", path.display()),
        &[
            "file",
            "writers",
            "writes",
            "pattern disk",
            "raw disk",
            "disk ratio",
            "pattern map",
            "raw map",
            "pattern open ms",
            "raw open ms",
        ],
    )
    .left_align(0);
    for c in &cases {
        t.row(vec![
            c.file.clone(),
            grouped(c.writers),
            grouped(c.writes),
            human_bytes(c.pattern.index_disk_bytes),
            human_bytes(c.raw.index_disk_bytes),
            format!(
                "{}×",
                sig3(c.raw.index_disk_bytes as f64 / c.pattern.index_disk_bytes.max(1) as f64)
            ),
            human_bytes(c.pattern.map_mem_bytes as u64),
            human_bytes(c.raw.map_mem_bytes as u64),
            sig3(c.pattern.open_ms),
            sig3(c.raw.open_ms),
        ]);
    }
    t.note(
        "one writer per rank recording that rank's writes in trace order (index only, no data).",
    );
    super::write_stdout(&t.render())
}

/// Bytes of every index log of the container at `dir`.
fn index_bytes(dir: &Path) -> Result<u64> {
    Ok(layout::list_writers(dir)?
        .iter()
        .map(|name| std::fs::metadata(layout::index_path(dir, name)).map_or(0, |m| m.len()))
        .sum())
}
