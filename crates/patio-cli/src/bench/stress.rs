//! `patio bench stress DIR`: a model-checked file-system exerciser. Worker processes
//! (this executable started again with `--worker`), each with several threads, run
//! random operations on a few files in DIR — writes, reads, truncations down and up,
//! `copy_file_range` inside a file, `fallocate` (where the file system has it),
//! `fstat`, `fsync`, close and reopen (sometimes with `O_TRUNC`) — and check every read
//! and every size against a byte model of each file.
//!
//! The models live in shared memory (one `MAP_SHARED` file per target file in a
//! state directory outside DIR); an operation and its model update happen under an
//! exclusive `flock` of that model file, so the operations on one file are one
//! sequence whatever process or thread issued them, and every read must return
//! exactly the model's bytes (short reads are mismatches too). Each model keeps a
//! ring of its last operations, printed with a mismatch so that it can be replayed.
//!
//! Pointed at a `patio mount container` whose compaction thresholds are low, it is the
//! stress test of background compaction against truncation, extension and copies
//! (`bench/container_stress.py` runs it for minutes; the tests for seconds).

use super::Table;
use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

#[derive(clap::Args, Clone)]
pub struct Args {
    /// Directory to exercise (a mount point, or any directory as a control).
    dir: PathBuf,
    /// Files exercised (named `stress.N` in DIR).
    #[arg(long, default_value_t = 3)]
    files: usize,
    /// Worker processes (each its own writer of every file on a container mount).
    #[arg(long, default_value_t = 2)]
    procs: usize,
    /// Threads per worker process.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// Operations in all (shared evenly by every thread).
    #[arg(long, default_value_t = 100_000)]
    ops: u64,
    /// Seed of the random operations (each thread derives its own from it).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Largest file size the operations make, in bytes.
    #[arg(long, default_value_t = 256 << 10)]
    max_size: u64,
    /// Largest read, write or copy, in bytes.
    #[arg(long, default_value_t = 64 << 10)]
    max_op: u64,
    /// Operations left out (comma-separated: write, read, truncate, copy_file_range,
    /// fallocate, reopen, fstat, fsync, read-all); `--skip reopen` keeps one descriptor
    /// (one writer) per process for the whole run, as xfstests' fsx does.
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// Check the size (`fstat`) after every operation, as fsx does.
    #[arg(long)]
    size_checks: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// (internal) run as worker N over the models in --state.
    #[arg(long, hide = true)]
    worker: Option<usize>,
    /// (internal) the models' directory of a worker.
    #[arg(long, hide = true)]
    state: Option<PathBuf>,
}

/// Operations, as they are counted and recorded in a model's ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
enum Op {
    Write = 1,
    Read,
    Truncate,
    Copy,
    Fallocate,
    Reopen,
    Stat,
    Fsync,
    ReadAll,
}

const OPS: [Op; 9] = [
    Op::Write,
    Op::Read,
    Op::Truncate,
    Op::Copy,
    Op::Fallocate,
    Op::Reopen,
    Op::Stat,
    Op::Fsync,
    Op::ReadAll,
];

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Write => "write",
            Op::Read => "read",
            Op::Truncate => "truncate",
            Op::Copy => "copy_file_range",
            Op::Fallocate => "fallocate",
            Op::Reopen => "reopen",
            Op::Stat => "fstat",
            Op::Fsync => "fsync",
            Op::ReadAll => "read whole file",
        }
    }

    /// The name `--skip` takes.
    fn flag(self) -> &'static str {
        match self {
            Op::ReadAll => "read-all",
            other => other.name(),
        }
    }

    /// Weights of the random choice (per 1000).
    fn weight(self) -> u32 {
        match self {
            Op::Write => 300,
            Op::Read => 300,
            Op::Truncate => 120,
            Op::Copy => 90,
            Op::Fallocate => 60,
            Op::Reopen => 60,
            Op::Stat => 40,
            Op::Fsync => 10,
            Op::ReadAll => 20,
        }
    }
}

/// Operations a model remembers for the report of a mismatch.
const RING: usize = 48;
/// Model header: length, sequence number, then the ring of `[seq, op, a, b, c, pid]`.
const RING_WORDS: usize = 6;
const HEADER: usize = 16 + RING * RING_WORDS * 8;

/// One file's byte model in shared memory.
struct Model {
    lock: File,
    map: *mut u8,
    cap: usize,
}

// SAFETY: the mapping is only touched under the model file's exclusive flock.
unsafe impl Send for Model {}

impl Model {
    fn create(path: &Path, max: u64) -> Result<()> {
        let f = File::create(path).with_context(|| format!("{}", path.display()))?;
        f.set_len(HEADER as u64 + 2 * max)?;
        Ok(())
    }

    fn open(path: &Path) -> Result<Self> {
        let lock = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .with_context(|| format!("{}", path.display()))?;
        let cap = lock.metadata()?.len() as usize;
        // SAFETY: a fresh shared mapping of the whole file, which never shrinks.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                cap,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                lock.as_raw_fd(),
                0,
            )
        };
        if map == libc::MAP_FAILED {
            bail!(
                "{}: mmap: {}",
                path.display(),
                std::io::Error::last_os_error()
            );
        }
        Ok(Model {
            lock,
            map: map as *mut u8,
            cap,
        })
    }

    /// Runs `f` on the model bytes under the exclusive lock.
    fn with<T>(&self, f: impl FnOnce(&mut ModelView) -> T) -> T {
        // SAFETY: flock on a descriptor this model owns.
        while unsafe { libc::flock(self.lock.as_raw_fd(), libc::LOCK_EX) } != 0 {}
        // SAFETY: the mapping is `cap` bytes and nobody else touches it while locked.
        let all = unsafe { std::slice::from_raw_parts_mut(self.map, self.cap) };
        let (head, bytes) = all.split_at_mut(HEADER);
        let mut view = ModelView { head, bytes };
        let out = f(&mut view);
        // SAFETY: as above.
        unsafe { libc::flock(self.lock.as_raw_fd(), libc::LOCK_UN) };
        out
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.cap) };
    }
}

/// The model's bytes and header while locked.
struct ModelView<'a> {
    head: &'a mut [u8],
    bytes: &'a mut [u8],
}

impl ModelView<'_> {
    fn word(&self, i: usize) -> u64 {
        u64::from_le_bytes(self.head[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
    }

    fn set_word(&mut self, i: usize, v: u64) {
        self.head[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }

    fn len(&self) -> u64 {
        self.word(0)
    }

    /// Sets the length: bytes beyond the old end up to the new one read as zeros.
    fn set_len(&mut self, n: u64) {
        let old = self.len();
        if n > old {
            self.bytes[old as usize..n as usize].fill(0);
        }
        self.set_word(0, n);
    }

    /// Stores `data` at `off`, extending the model.
    fn write(&mut self, off: u64, data: &[u8]) {
        let end = off + data.len() as u64;
        if end > self.len() {
            self.set_len(end);
        }
        self.bytes[off as usize..end as usize].copy_from_slice(data);
    }

    /// The bytes a read of `n` at `off` returns.
    fn read(&self, off: u64, n: u64) -> &[u8] {
        let len = self.len();
        let (a, b) = (off.min(len), (off + n).min(len));
        &self.bytes[a as usize..b as usize]
    }

    /// Records an operation in the ring; returns its sequence number.
    fn record(&mut self, op: Op, a: u64, b: u64, c: u64) -> u64 {
        let seq = self.word(1);
        self.set_word(1, seq + 1);
        let slot = 2 + (seq as usize % RING) * RING_WORDS;
        for (i, v) in [seq, op as u64, a, b, c, std::process::id() as u64]
            .into_iter()
            .enumerate()
        {
            self.set_word(slot + i, v);
        }
        seq
    }

    /// The last operations, oldest first.
    fn history(&self) -> String {
        let seq = self.word(1);
        let first = seq.saturating_sub(RING as u64);
        let mut lines = Vec::new();
        for s in first..seq {
            let slot = 2 + (s as usize % RING) * RING_WORDS;
            let w = |i| self.word(slot + i);
            let op = OPS
                .iter()
                .find(|o| **o as u64 == w(1))
                .map_or("?", |o| o.name());
            lines.push(format!(
                "  #{} pid {} {} {:#x} {:#x} {:#x}",
                w(0),
                w(5),
                op,
                w(2),
                w(3),
                w(4)
            ));
        }
        lines.join("\n")
    }
}

/// What one worker did (its stdout, as JSON).
#[derive(Serialize, Deserialize, Default, Clone)]
struct Report {
    counts: Vec<(String, u64)>,
    fallocate_unsupported: bool,
    mismatch: Option<String>,
}

pub fn run(args: Args) -> Result<()> {
    match (args.worker, &args.state) {
        (Some(id), Some(state)) => worker(&args, id, state),
        _ => coordinator(args),
    }
}

fn check_args(a: &Args) -> Result<()> {
    if !a.dir.is_dir() {
        bail!("{}: not a directory", a.dir.display());
    }
    if a.files == 0 || a.procs == 0 || a.threads == 0 {
        bail!("--files, --procs and --threads must be at least 1");
    }
    if let Some(bad) = a.skip.iter().find(|s| !OPS.iter().any(|o| o.flag() == *s)) {
        bail!("--skip {bad}: not an operation (write, read, truncate, copy_file_range, fallocate, reopen, fstat, fsync, read-all)");
    }
    if OPS.iter().all(|o| a.skip.iter().any(|s| s == o.flag())) {
        bail!("--skip leaves no operation");
    }
    if a.max_size == 0 || a.max_op == 0 || a.max_op > a.max_size || a.max_size > 1 << 30 {
        bail!("need 0 < --max-op <= --max-size <= 1 GiB");
    }
    Ok(())
}

fn target(dir: &Path, i: usize) -> PathBuf {
    dir.join(format!("stress.{i}"))
}

fn coordinator(args: Args) -> Result<()> {
    check_args(&args)?;
    let state = tempfile::Builder::new().prefix("patio-stress-").tempdir()?;
    for i in 0..args.files {
        Model::create(&state.path().join(format!("model.{i}")), args.max_size)?;
        // Every file starts empty.
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(target(&args.dir, i))
            .with_context(|| format!("{}", target(&args.dir, i).display()))?;
    }
    let exe = std::env::current_exe()?;
    let start = Instant::now();
    let mut children = Vec::new();
    for id in 0..args.procs {
        let child = Command::new(&exe)
            .args(["bench", "stress"])
            .arg(&args.dir)
            .args(["--files", &args.files.to_string()])
            .args(["--procs", &args.procs.to_string()])
            .args(["--threads", &args.threads.to_string()])
            .args(["--ops", &args.ops.to_string()])
            .args(["--seed", &args.seed.to_string()])
            .args(["--max-size", &args.max_size.to_string()])
            .args(["--max-op", &args.max_op.to_string()])
            .args(args.skip.iter().flat_map(|s| ["--skip", s.as_str()]))
            .args(args.size_checks.then_some("--size-checks"))
            .args(["--worker", &id.to_string()])
            .arg("--state")
            .arg(state.path())
            .stdout(Stdio::piped())
            .spawn()
            .context("starting a worker")?;
        children.push(child);
    }
    let mut reports = Vec::new();
    for child in children {
        let out = child.wait_with_output()?;
        let report: Report = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("a worker ended with {} and no report", out.status))?;
        reports.push(report);
    }
    // The final contents, read through new descriptors, against the models.
    let mut mismatch = reports.iter().find_map(|r| r.mismatch.clone());
    if mismatch.is_none() {
        for i in 0..args.files {
            let model = Model::open(&state.path().join(format!("model.{i}")))?;
            let got = std::fs::read(target(&args.dir, i))?;
            mismatch = model.with(|m| {
                compare(m.read(0, m.len()), &got, 0).map(|d| {
                    format!(
                        "{}: final contents: {d}\n{}",
                        target(&args.dir, i).display(),
                        m.history()
                    )
                })
            });
            if mismatch.is_some() {
                break;
            }
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let mut counts: Vec<(String, u64)> = OPS.iter().map(|o| (o.name().to_string(), 0)).collect();
    for r in &reports {
        for (name, n) in &r.counts {
            if let Some(c) = counts.iter_mut().find(|c| &c.0 == name) {
                c.1 += n;
            }
        }
    }
    let total: u64 = counts.iter().map(|c| c.1).sum();
    let fallocate_unsupported = reports.iter().any(|r| r.fallocate_unsupported);
    if args.json {
        let out = serde_json::json!({
            "dir": args.dir,
            "seed": args.seed,
            "files": args.files,
            "procs": args.procs,
            "threads": args.threads,
            "ops": total,
            "counts": counts.iter().map(|(k, v)| (k.clone(), serde_json::Value::from(*v))).collect::<serde_json::Map<String, serde_json::Value>>(),
            "fallocate_supported": !fallocate_unsupported,
            "seconds": elapsed,
            "mismatches": mismatch.is_some() as u64,
            "mismatch": mismatch,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        let mut t = Table::new(
            format!(
                "stress of {} ({} files, {} processes × {} threads, seed {})",
                args.dir.display(),
                args.files,
                args.procs,
                args.threads,
                args.seed
            ),
            &["operation", "count"],
        )
        .left_align(0);
        for (name, n) in &counts {
            t.row(vec![name.clone(), n.to_string()]);
        }
        t.note(format!(
            "{total} operations in {elapsed:.1} s; fallocate {}",
            if fallocate_unsupported {
                "not supported (skipped)"
            } else {
                "exercised"
            }
        ));
        t.print()?;
    }
    if let Some(m) = mismatch {
        bail!("mismatch: {m}");
    }
    Ok(())
}

/// Where `got` differs from `want`: `None` when equal.
fn compare(want: &[u8], got: &[u8], base: u64) -> Option<String> {
    if want == got {
        return None;
    }
    let at = want.iter().zip(got).position(|(a, b)| a != b);
    Some(match at {
        Some(i) => format!(
            "byte {:#x} is {:#04x}, the model has {:#04x} ({} bytes expected, {} returned; {}, the model's {})",
            base + i as u64,
            got[i],
            want[i],
            want.len(),
            got.len(),
            tag_at(got, base, i),
            tag_at(want, base, i),
        ),
        None => format!(
            "{} bytes returned where the model has {} (at {:#x})",
            got.len(),
            want.len(),
            base
        ),
    })
}

/// One worker process: its threads share its descriptors (one per file).
fn worker(args: &Args, id: usize, state: &Path) -> Result<()> {
    let fds: Vec<Mutex<Option<File>>> = (0..args.files).map(|_| Mutex::new(None)).collect();
    let failed = AtomicBool::new(false);
    let unsupported = AtomicBool::new(false);
    let per_thread = args.ops / (args.procs * args.threads) as u64;
    let results: Vec<Result<Report>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.threads)
            .map(|t| {
                let (fds, failed, unsupported) = (&fds, &failed, &unsupported);
                s.spawn(move || {
                    let models = (0..args.files)
                        .map(|i| Model::open(&state.join(format!("model.{i}"))))
                        .collect::<Result<Vec<_>>>()?;
                    let seed = args.seed
                        ^ ((id * args.threads + t) as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                    let mut th = Thread {
                        args,
                        rng: SmallRng::seed_from_u64(seed),
                        models,
                        fds,
                        counts: [0; OPS.len()],
                        unsupported,
                        buf: Vec::new(),
                    };
                    let mut mismatch = None;
                    for _ in 0..per_thread {
                        if failed.load(Ordering::Relaxed) {
                            break;
                        }
                        if let Err(e) = th.step() {
                            failed.store(true, Ordering::Relaxed);
                            mismatch = Some(format!("{e:#}"));
                            break;
                        }
                    }
                    Ok(Report {
                        counts: OPS
                            .iter()
                            .zip(th.counts)
                            .map(|(o, n)| (o.name().to_string(), n))
                            .collect(),
                        fallocate_unsupported: false,
                        mismatch,
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker thread"))
            .collect()
    });
    let mut report = Report::default();
    for r in results {
        let r = r?;
        if report.counts.is_empty() {
            report.counts = r.counts;
        } else {
            for (c, (_, n)) in report.counts.iter_mut().zip(r.counts) {
                c.1 += n;
            }
        }
        report.mismatch = report.mismatch.or(r.mismatch);
    }
    report.fallocate_unsupported = unsupported.load(Ordering::Relaxed);
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

/// One thread of a worker.
struct Thread<'a> {
    args: &'a Args,
    rng: SmallRng,
    models: Vec<Model>,
    fds: &'a [Mutex<Option<File>>],
    counts: [u64; OPS.len()],
    unsupported: &'a AtomicBool,
    buf: Vec<u8>,
}

fn open_target(path: &Path, trunc: bool) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .truncate(trunc)
        .custom_flags(0)
        .open(path)
        .with_context(|| format!("{}: open", path.display()))
}

impl Thread<'_> {
    fn weight(&self, op: Op) -> u32 {
        if self.args.skip.iter().any(|s| s == op.flag()) {
            0
        } else {
            op.weight()
        }
    }

    fn pick(&mut self) -> Op {
        let total: u32 = OPS.iter().map(|&o| self.weight(o)).sum();
        let mut x = self.rng.gen_range(0..total);
        for op in OPS {
            if x < self.weight(op) {
                return op;
            }
            x -= self.weight(op);
        }
        Op::Read
    }

    /// One random operation on a random file, checked against its model.
    fn step(&mut self) -> Result<()> {
        let i = self.rng.gen_range(0..self.models.len());
        let mut op = self.pick();
        if op == Op::Fallocate && self.unsupported.load(Ordering::Relaxed) {
            op = Op::Write;
        }
        let path = target(&self.args.dir, i);
        let (max, max_op) = (self.args.max_size, self.args.max_op);
        let shared = self.args.procs > 1;
        let mut fd_slot = self.fds[i].lock().unwrap_or_else(|p| p.into_inner());
        let models = std::mem::take(&mut self.models);
        let result = models[i].with(|m| -> Result<()> {
            if fd_slot.is_none() {
                *fd_slot = Some(open_target(&path, false)?);
            }
            let len = m.len();
            let fail = |m: &ModelView, what: String| -> anyhow::Error {
                anyhow::anyhow!("{}: {what}\nlast operations on the file:\n{}", path.display(), m.history())
            };
            match op {
                Op::Write => {
                    let off = self.rng.gen_range(0..max);
                    let n = self.rng.gen_range(1..=max_op.min(max - off));
                    let seq = m.record(op, off, n, 0);
                    tag_bytes(&mut self.buf, seq, off, n);
                    let f = fd_slot.as_ref().expect("opened");
                    f.write_all_at(&self.buf, off)
                        .map_err(|e| fail(m, format!("write of {n:#x} at {off:#x}: {e}")))?;
                    m.write(off, &self.buf);
                    if shared {
                        // Publishes it: the mount orders unpublished writes of
                        // different processes by publication.
                        let mut one = [0u8; 1];
                        let _ = f.read_at(&mut one, off);
                    }
                }
                Op::Read => {
                    let off = self.rng.gen_range(0..max + max_op / 4);
                    let n = self.rng.gen_range(1..=max_op);
                    m.record(op, off, n, 0);
                    let got = pread(fd_slot.as_ref().expect("opened"), off, n)
                        .map_err(|e| fail(m, format!("read of {n:#x} at {off:#x}: {e}")))?;
                    if let Some(d) = compare(m.read(off, n), &got, off) {
                        return Err(fail(m, format!("read of {n:#x} at {off:#x}: {d}")));
                    }
                }
                Op::ReadAll => {
                    m.record(op, 0, len, 0);
                    let got = std::fs::read(&path)
                        .map_err(|e| fail(m, format!("read of the whole file: {e}")))?;
                    if let Some(d) = compare(m.read(0, len), &got, 0) {
                        return Err(fail(m, format!("read of the whole file: {d}")));
                    }
                }
                Op::Truncate => {
                    let size = if self.rng.gen_bool(0.5) {
                        self.rng.gen_range(0..=len)
                    } else {
                        self.rng.gen_range(0..=max)
                    };
                    m.record(op, size, len, 0);
                    fd_slot
                        .as_ref()
                        .expect("opened")
                        .set_len(size)
                        .map_err(|e| fail(m, format!("truncate to {size:#x}: {e}")))?;
                    m.set_len(size);
                }
                Op::Copy => {
                    if len < 2 {
                        return Ok(());
                    }
                    let src = self.rng.gen_range(0..len);
                    let n = self.rng.gen_range(1..=max_op.min(len - src));
                    // A destination that does not overlap the source (the kernel
                    // refuses overlapping copies inside one file).
                    let mut dst = self.rng.gen_range(0..=max - n);
                    if self.rng.gen_bool(0.75) {
                        // Mostly word-aligned with the source, so the tags stay readable.
                        dst = (dst & !7) | (src & 7);
                        if dst + n > max {
                            return Ok(());
                        }
                    }
                    if dst < src + n && src < dst + n {
                        return Ok(());
                    }
                    m.record(op, src, dst, n);
                    let f = fd_slot.as_ref().expect("opened");
                    let mut done = 0u64;
                    while done < n {
                        let (mut a, mut b) = ((src + done) as i64, (dst + done) as i64);
                        // SAFETY: valid descriptor and offset pointers.
                        let r = unsafe {
                            libc::copy_file_range(
                                f.as_raw_fd(),
                                &mut a,
                                f.as_raw_fd(),
                                &mut b,
                                (n - done) as usize,
                                0,
                            )
                        };
                        if r < 0 {
                            let e = std::io::Error::last_os_error();
                            return Err(fail(m, format!("copy_file_range of {n:#x} from {src:#x} to {dst:#x}: {e}")));
                        }
                        if r == 0 {
                            break;
                        }
                        done += r as u64;
                    }
                    let data = m.read(src, done).to_vec();
                    if (data.len() as u64) < done {
                        return Err(fail(m, format!("copy_file_range of {n:#x} from {src:#x} copied {done:#x} bytes, past the end")));
                    }
                    m.write(dst, &data);
                }
                Op::Fallocate => {
                    let off = self.rng.gen_range(0..max);
                    let n = self.rng.gen_range(1..=max_op.min(max - off));
                    let (mode, name) = match self.rng.gen_range(0..4) {
                        0 => (0, "allocate"),
                        1 => (libc::FALLOC_FL_KEEP_SIZE, "keep size"),
                        2 => (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE, "punch hole"),
                        _ => (libc::FALLOC_FL_ZERO_RANGE, "zero range"),
                    };
                    m.record(op, off, n, mode as u64);
                    let f = fd_slot.as_ref().expect("opened");
                    // SAFETY: a valid descriptor.
                    let r = unsafe { libc::fallocate(f.as_raw_fd(), mode, off as i64, n as i64) };
                    if r != 0 {
                        let e = std::io::Error::last_os_error();
                        if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS)) {
                            self.unsupported.store(true, Ordering::Relaxed);
                            return Ok(());
                        }
                        return Err(fail(m, format!("fallocate ({name}) of {n:#x} at {off:#x}: {e}")));
                    }
                    let end = off + n;
                    let keep = mode & libc::FALLOC_FL_KEEP_SIZE != 0;
                    if mode & (libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_ZERO_RANGE) != 0 {
                        let zero_end = if keep { end.min(len) } else { end };
                        if zero_end > off {
                            m.write(off, &vec![0; (zero_end - off) as usize]);
                        }
                    }
                    if !keep && end > m.len() {
                        m.set_len(end);
                    }
                }
                Op::Reopen => {
                    let trunc = self.rng.gen_bool(0.1);
                    m.record(op, trunc as u64, 0, 0);
                    *fd_slot = None;
                    *fd_slot = Some(open_target(&path, trunc).map_err(|e| fail(m, format!("{e:#}")))?);
                    if trunc {
                        m.set_len(0);
                    }
                }
                Op::Stat => {
                    m.record(op, len, 0, 0);
                    let size = fd_slot
                        .as_ref()
                        .expect("opened")
                        .metadata()
                        .map_err(|e| fail(m, format!("fstat: {e}")))?
                        .len();
                    if size != len {
                        return Err(fail(m, format!("fstat: size {size:#x}, the model has {len:#x}")));
                    }
                }
                Op::Fsync => {
                    m.record(op, 0, 0, 0);
                    fd_slot
                        .as_ref()
                        .expect("opened")
                        .sync_all()
                        .map_err(|e| fail(m, format!("fsync: {e}")))?;
                }
            }
            if self.args.size_checks {
                let (len, f) = (m.len(), fd_slot.as_ref().expect("opened"));
                let size = f.metadata().map_err(|e| fail(m, format!("fstat: {e}")))?.len();
                if size != len {
                    return Err(fail(m, format!("fstat after {}: size {size:#x}, the model has {len:#x}", op.name())));
                }
            }
            Ok(())
        });
        self.models = models;
        self.counts[OPS.iter().position(|o| *o == op).expect("listed")] += 1;
        result
    }
}

/// Fills `buf` with the `n` bytes operation `seq` writes at `off`: each aligned 8-byte
/// word of the file holds `seq << 40 | offset`, so a wrong byte read names the write
/// it comes from (and the offset it was written at, before any copy).
fn tag_bytes(buf: &mut Vec<u8>, seq: u64, off: u64, n: u64) {
    buf.clear();
    buf.extend((off..off + n).map(|x| ((seq << 40 | (x & !7)) >> ((x & 7) * 8)) as u8));
}

/// The tag of the aligned word holding byte `i` of `bytes` (which start at file
/// offset `base`), described.
fn tag_at(bytes: &[u8], base: u64, i: usize) -> String {
    let x = base + i as u64;
    let start = (x & !7).saturating_sub(base) as usize;
    if x & !7 < base || start + 8 > bytes.len() {
        return "word cut".into();
    }
    let w = u64::from_le_bytes(bytes[start..start + 8].try_into().expect("8 bytes"));
    if w == 0 {
        return "zeros".into();
    }
    format!("op #{} wrote it for {:#x}", w >> 40, w & ((1 << 40) - 1))
}

/// One `pread` of `n` bytes at `off` (what one read returns: short only at the end).
fn pread(f: &File, off: u64, n: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; n as usize];
    let got = f.read_at(&mut buf, off)?;
    buf.truncate(got);
    Ok(buf)
}
