//! The tracing mount (`patio mount trace`): a passthrough mount whose observer records
//! every read and write into patio-core's trace model, written when the mount ends.
//!
//! Each served request becomes one record of the stream
//! `(module "FUSE", file, rank = caller pid, op)`:
//!
//! * `file` — the path inside the mount under which the file was opened (relative,
//!   without a leading `/`);
//! * `rank` — the caller's process id (FUSE reports the calling thread; its process is
//!   looked up in /proc the first time a thread is seen; 0 for requests the kernel
//!   makes on nobody's behalf, such as writeback of mmap'd pages);
//! * `offset` — the application's offset, `length` — the bytes actually transferred
//!   (direct I/O: see [`crate::passthrough`]);
//! * `start`, `end` — when the daemon began and finished serving the request, in
//!   seconds since the mount was made.
//!
//! Failed requests are not recorded; zero-byte reads at end of file are.
//!
//! Records are appended as the mount runs to a journal beside the output
//! ([`journal`]): every [`FLUSH_ROWS`] records and every [`FLUSH_EVERY`], so a mount
//! killed with SIGKILL loses at most what it recorded since then, and
//! `patio trace recover` turns what it left into the trace. When the mount ends — by
//! signal or by an external unmount — the journal becomes the trace: the native format
//! ([`Trace::encode_native`]) unless the output name ends in `.csv`, written beside its
//! final name and renamed into place (so an existing trace is replaced only by a
//! complete one), and the journal is removed. If the journal cannot be written (a full
//! disk) the mount goes on with the records in memory, as before journals existed.

use crate::live::{self, Render};
use crate::passthrough::{IoEvent, Observer, Options, PassthroughFs};
use crate::session::{self, Ended, MountConfig};
use crate::{shown, FsError, Result};
use patio_core::trace::{Op, StreamKey, Trace};
use patio_core::Detector;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod journal;

use journal::Journal;

/// Module name of the streams recorded by the mount.
pub const MODULE: &str = "FUSE";
/// Records held in memory before they are appended to the journal.
pub const FLUSH_ROWS: usize = 4096;
/// Longest time a record waits in memory before it is appended to the journal.
pub const FLUSH_EVERY: Duration = Duration::from_secs(1);

#[derive(Clone, Copy)]
struct Row {
    file: u32,
    pid: u32,
    op: Op,
    offset: u64,
    length: u64,
    start_ns: u64,
    end_ns: u64,
}

#[derive(Default)]
struct Rows {
    files: Vec<Arc<str>>,
    index: HashMap<Arc<str>, u32>,
    /// Records not yet in the journal (all of them without one).
    rows: Vec<Row>,
    /// Records seen, journaled or not; the bytes they moved; their streams (file,
    /// process, op).
    total: usize,
    bytes: u64,
    streams: HashSet<(u32, u32, Op)>,
    /// Thread id (what FUSE reports) → process id, as first seen.
    processes: HashMap<u32, u32>,
    journal: Option<Journal>,
}

impl Rows {
    /// The records not yet journaled, as a trace.
    fn trace(&self) -> Trace {
        let seconds = |ns: u64| ns as f64 / 1e9;
        Trace::from_records(self.rows.iter().map(|r| {
            (
                StreamKey {
                    module: MODULE.to_string(),
                    file: self.files[r.file as usize].to_string(),
                    rank: i64::from(r.pid),
                    op: r.op,
                },
                r.offset,
                r.length,
                seconds(r.start_ns),
                seconds(r.end_ns),
            )
        }))
    }

    /// Appends the records held in memory to the journal (kept when it fails).
    fn flush(&mut self) {
        let usable = self.journal.as_ref().is_some_and(|j| j.broken.is_none());
        if !usable || self.rows.is_empty() {
            return;
        }
        let pending = self.trace();
        if let Some(j) = self.journal.as_mut() {
            j.append(&pending.streams);
            if j.broken.is_none() {
                self.rows.clear();
            }
        }
    }
}

/// The process a thread belongs to (`Tgid` in /proc/TID/status); the thread id itself
/// when that cannot be read, 0 (requests the kernel makes on nobody's behalf, such as
/// writeback of mmap'd pages) stays 0.
pub fn process_of(tid: u32) -> u32 {
    if tid == 0 {
        return 0;
    }
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(tid)
}

/// Records every request it observes; times are relative to its creation.
pub struct Recorder {
    epoch: Instant,
    rows: Mutex<Rows>,
}

impl Default for Recorder {
    fn default() -> Self {
        Self::new()
    }
}

impl Recorder {
    /// A recorder that keeps every record in memory.
    pub fn new() -> Self {
        Recorder {
            epoch: Instant::now(),
            rows: Mutex::new(Rows::default()),
        }
    }

    /// A recorder that appends its records to `journal` as it goes.
    fn with_journal(journal: Journal) -> Self {
        let rec = Recorder::new();
        rec.lock().journal = Some(journal);
        rec
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Rows> {
        self.rows.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Requests recorded so far.
    pub fn requests(&self) -> usize {
        self.lock().total
    }

    /// What was recorded so far (`Ended::Running`: live statistics).
    pub fn snapshot(&self) -> TraceSummary {
        let rows = self.lock();
        TraceSummary {
            requests: rows.total,
            streams: rows.streams.len(),
            files: rows.files.len(),
            bytes: rows.bytes,
            ended: Ended::Running,
        }
    }

    /// The records held in memory (everything recorded so far, without a journal).
    pub fn trace(&self) -> Trace {
        self.lock().trace()
    }

    /// Appends the records held in memory to the journal.
    pub fn flush(&self) {
        self.lock().flush();
    }

    /// Everything recorded: the journal's records and those still in memory.
    fn finish(&self) -> Result<Trace> {
        let mut rows = self.lock();
        rows.flush();
        let held = rows.trace();
        match &rows.journal {
            Some(j) => {
                let mut streams = j.read()?.streams;
                streams.extend(held.streams);
                Ok(Trace::from_streams(streams))
            }
            None => Ok(held),
        }
    }
}

impl Observer for Recorder {
    fn io(&self, e: &IoEvent<'_>) {
        let ns = |t: Instant| t.saturating_duration_since(self.epoch).as_nanos() as u64;
        let (start_ns, end_ns) = (ns(e.start), ns(e.end));
        let known = self.lock().processes.get(&e.pid).copied();
        // /proc is read outside the lock, once per thread.
        let pid = known.unwrap_or_else(|| process_of(e.pid));
        let mut rows = self.lock();
        if known.is_none() {
            rows.processes.insert(e.pid, pid);
        }
        let file = match rows.index.get(e.path) {
            Some(&i) => i,
            None => {
                let i = rows.files.len() as u32;
                rows.files.push(e.path.clone());
                rows.index.insert(e.path.clone(), i);
                i
            }
        };
        rows.rows.push(Row {
            file,
            pid,
            op: e.op,
            offset: e.offset,
            length: e.length,
            start_ns,
            end_ns,
        });
        rows.total += 1;
        rows.bytes += e.length;
        rows.streams.insert((file, pid, e.op));
        if rows.rows.len() >= FLUSH_ROWS {
            rows.flush();
        }
    }
}

/// Trace file formats the mount writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Native,
    Csv,
}

impl Format {
    /// CSV for a `.csv` name (any case), the native format otherwise.
    pub fn for_path(p: &Path) -> Format {
        match p.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("csv") => Format::Csv,
            _ => Format::Native,
        }
    }
}

/// Writes `trace` to `out` (format by name), through a temporary file in the same
/// directory renamed into place.
pub fn write_trace(trace: &Trace, out: &Path) -> Result<()> {
    let bytes = match Format::for_path(out) {
        Format::Native => trace.encode_native(&Detector::default())?,
        Format::Csv => {
            let mut v = Vec::new();
            trace.write_csv(&mut v)?;
            v
        }
    };
    let name = out
        .file_name()
        .ok_or_else(|| FsError::Invalid(format!("{}: not a file name", shown(out))))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = out.with_file_name(tmp_name);
    let cannot = |e| FsError::io(format!("cannot write trace {}", shown(out)), e);
    let result = (|| {
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        fs::rename(&tmp, out)
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp);
        return Err(cannot(e));
    }
    Ok(())
}

/// Checks before mounting that the trace can be written at `out`: its directory
/// exists, is outside the mount point, and accepts the file. Nothing is left behind.
pub fn check_out(out: &Path, mountpoint: &Path) -> Result<()> {
    crate::check_output(out, mountpoint, "--out", "trace")
}

/// What `patio mount trace` asked for.
#[derive(Clone, Debug)]
pub struct TraceMount {
    pub source: PathBuf,
    pub mountpoint: PathBuf,
    pub out: PathBuf,
    pub allow_other: bool,
}

/// What a finished tracing mount recorded.
#[derive(Clone, Debug)]
pub struct TraceSummary {
    pub requests: usize,
    pub streams: usize,
    /// Files requests were made to, and the bytes read and written.
    pub files: usize,
    pub bytes: u64,
    pub ended: Ended,
}

/// Checks the inputs, mounts the tracing passthrough, serves until the mount ends and
/// writes the trace. `notify` receives one-line messages for the user while mounted;
/// `live`, when given, publishes the counters while the mount runs ([`crate::live`]).
pub fn run(
    req: &TraceMount,
    notify: &mut dyn FnMut(&str),
    live: Option<Render<TraceSummary>>,
) -> Result<TraceSummary> {
    let source = session::check_source(&req.source)?;
    let mountpoint = session::check_mountpoint(&req.mountpoint, &source)?;
    check_out(&req.out, &mountpoint)?;
    session::check_fuse()?;
    let recorder = Arc::new(Recorder::with_journal(Journal::create(&req.out)?));
    let journal = journal::journal_path(&req.out);
    let fs = PassthroughFs::new(source, Options::default(), recorder.clone());
    let cfg = MountConfig {
        allow_other: req.allow_other,
        ..MountConfig::default()
    };
    let (stop, stopped) = mpsc::channel::<()>();
    let flusher = {
        let recorder = recorder.clone();
        std::thread::spawn(move || {
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(FLUSH_EVERY) {
                recorder.flush();
            }
        })
    };
    let publisher = {
        let r = recorder.clone();
        live::start(&mountpoint, live, move || r.snapshot())
    };
    let served = session::serve(fs, &mountpoint, &cfg, notify);
    drop(publisher);
    drop(stop);
    let _ = flusher.join();
    let ended = match served {
        Ok(ended) => ended,
        Err(e) => {
            if recorder.requests() == 0 {
                let _ = fs::remove_file(&journal);
            }
            return Err(e);
        }
    };
    let keep = |e: FsError| {
        FsError::Invalid(format!(
            "{e} (what was recorded is kept in {}: `patio trace recover {}`)",
            shown(&journal),
            shown(&req.out)
        ))
    };
    let trace = recorder.finish().map_err(keep)?;
    write_trace(&trace, &req.out).map_err(keep)?;
    let _ = fs::remove_file(&journal);
    let seen = recorder.snapshot();
    Ok(TraceSummary {
        requests: trace.requests(),
        streams: trace.streams.len(),
        ended,
        ..seen
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn recorder_groups_requests_into_fuse_streams() {
        let rec = Recorder::new();
        let (a, b): (Arc<str>, Arc<str>) = ("d/a.bin".into(), "b.bin".into());
        // A live thread of this process, as FUSE would report it (the caller is
        // blocked in its system call while the request is served).
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tid_tx.send(unsafe { libc::gettid() } as u32).unwrap();
            let _ = done_rx.recv();
        });
        let tid = tid_rx.recv().unwrap();
        let t0 = Instant::now();
        for i in 0..10u64 {
            for (path, pid, op) in [(&a, tid, Op::Read), (&b, 0, Op::Write)] {
                let start = t0 + Duration::from_micros(i * 10);
                rec.io(&IoEvent {
                    path,
                    pid,
                    op,
                    offset: i * 8192,
                    length: 4096,
                    start,
                    end: start + Duration::from_micros(3),
                });
            }
        }
        drop(done_tx);
        thread.join().unwrap();
        let t = rec.trace();
        assert_eq!(rec.requests(), 20);
        assert_eq!(t.streams.len(), 2);
        let s = t.streams.iter().find(|s| s.key.file == "d/a.bin").unwrap();
        assert_eq!(
            (s.key.module.as_str(), s.key.rank, s.key.op),
            (MODULE, i64::from(std::process::id()), Op::Read)
        );
        let w = t.streams.iter().find(|s| s.key.file == "b.bin").unwrap();
        assert_eq!((w.key.rank, w.key.op), (0, Op::Write));
        assert_eq!(s.offsets, (0..10).map(|i| i * 8192).collect::<Vec<_>>());
        assert!(s.lengths.iter().all(|&l| l == 4096));
        assert!(s.starts.windows(2).all(|w| w[0] < w[1]));
        assert!(s.ends.iter().zip(&s.starts).all(|(e, st)| e > st));
    }

    fn record(rec: &Recorder, n: u64, from: u64) {
        let path: Arc<str> = "f".into();
        let now = Instant::now();
        for i in from..from + n {
            rec.io(&IoEvent {
                path: &path,
                pid: 0,
                op: Op::Read,
                offset: i * 100,
                length: 100,
                start: now,
                end: now,
            });
        }
    }

    #[test]
    fn records_reach_the_journal_at_flushes_and_the_trace_at_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.ptrace");
        let rec = Recorder::with_journal(Journal::create(&out).unwrap());
        record(&rec, 10, 0);
        let journaled = |rec: &Recorder| {
            let rows = rec.lock();
            rows.journal.as_ref().unwrap().read().unwrap().requests()
        };
        assert_eq!(journaled(&rec), 0, "nothing before a flush");
        rec.flush();
        assert_eq!(journaled(&rec), 10);
        record(&rec, FLUSH_ROWS as u64, 10); // a full buffer is flushed without waiting
        assert_eq!(journaled(&rec), 10 + FLUSH_ROWS);
        // A journal that failed keeps the rest in memory; the end has both.
        rec.lock().journal.as_mut().unwrap().broken = Some("disk full".into());
        record(&rec, 7, 10 + FLUSH_ROWS as u64);
        rec.flush();
        assert_eq!(journaled(&rec), 10 + FLUSH_ROWS);
        let t = rec.finish().unwrap();
        assert_eq!(
            (t.requests(), rec.requests()),
            (17 + FLUSH_ROWS, 17 + FLUSH_ROWS)
        );
        let offsets = &t.streams[0].offsets;
        assert_eq!(
            *offsets,
            (0..17 + FLUSH_ROWS as u64)
                .map(|i| i * 100)
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn traces_are_written_whole_in_either_format() {
        let rec = Recorder::new();
        let path: Arc<str> = "f".into();
        let now = Instant::now();
        rec.io(&IoEvent {
            path: &path,
            pid: 1,
            op: Op::Write,
            offset: 0,
            length: 10,
            start: now,
            end: now,
        });
        let dir = tempfile::tempdir().unwrap();
        let t = rec.trace();
        for name in ["t.ptrace", "t.CSV"] {
            let out = dir.path().join(name);
            check_out(&out, Path::new("/nonexistent-mount")).unwrap();
            assert!(!out.exists(), "the check leaves nothing behind");
            write_trace(&t, &out).unwrap();
            let back = if name.ends_with("CSV") {
                Trace::read_csv(&out).unwrap()
            } else {
                Trace::read_native(&out).unwrap().trace
            };
            assert_eq!(back.requests(), 1);
            assert_eq!(back.streams[0].key.module, MODULE);
        }
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            2,
            "no temporaries"
        );
        let e = check_out(&dir.path().join("no/such/t.ptrace"), Path::new("/m"));
        assert!(e.unwrap_err().to_string().contains("cannot write trace"));
        let e = check_out(&dir.path().join("t.ptrace"), dir.path());
        assert!(e
            .unwrap_err()
            .to_string()
            .contains("inside the mount point"));
    }
}
