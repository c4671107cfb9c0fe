//! The journal of a tracing mount: the requests recorded so far, appended as the mount
//! runs, so that a mount killed with SIGKILL (or a crash of the machine's daemon) loses
//! only what it recorded since its last flush.
//!
//! The journal is `.<trace name>.journal` beside the trace, in the append-only native
//! trace format (version 1, docs/FORMATS.md): a header, then one frame per stream per
//! flush, all frames sharing one body dictionary. The mount holds an exclusive `flock`
//! on it while it runs — released by the kernel when the process dies, however it dies —
//! so a journal nobody holds is one a killed mount left. At a clean end the mount turns
//! the journal into the trace (temporary file, fsync, rename) and removes it;
//! `patio trace recover TRACE` does the same for a killed mount's journal (a torn last
//! frame is dropped, every frame before it kept), and a new mount refuses to start over
//! such a journal rather than lose it.

use crate::{shown, FsError, Result};
use patio_core::codec::put_frame;
use patio_core::seqcodec::SeqEncoder;
use patio_core::trace::{encode_chunk, native_header, Stream, StreamKey, Trace};
use patio_core::Detector;
use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// Where the journal of the trace `out` lives.
pub fn journal_path(out: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(out.file_name().unwrap_or(out.as_os_str()));
    name.push(".journal");
    out.with_file_name(name)
}

/// Takes the exclusive `flock` of `file` without waiting; false when another process
/// holds it.
fn try_lock(file: &File) -> io::Result<bool> {
    // SAFETY: flock on a descriptor this function borrows; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EWOULDBLOCK) => Ok(false),
        _ => Err(e),
    }
}

/// The appending side, owned by the recorder of one mount.
pub(crate) struct Journal {
    pub(crate) path: PathBuf,
    file: File,
    enc: SeqEncoder,
    detector: Detector,
    ids: HashMap<StreamKey, usize>,
    /// Bytes of whole frames written (the journal is cut back here after a failure).
    good: u64,
    /// Why appending stopped (a failed write): from then on rows stay in memory.
    pub(crate) broken: Option<String>,
}

impl Journal {
    /// Creates (or takes over an empty) journal for the trace `out` and locks it.
    pub(crate) fn create(out: &Path) -> Result<Journal> {
        let path = journal_path(out);
        let cannot = |e| FsError::io(format!("cannot write journal {}", shown(&path)), e);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(cannot)?;
        if !try_lock(&file).map_err(cannot)? {
            return Err(FsError::Invalid(format!(
                "trace {}: another `patio mount trace` is writing it (its journal {} is in use)",
                shown(out),
                shown(&path)
            )));
        }
        if file.metadata().map_err(cannot)?.len() > 0 {
            return Err(FsError::Invalid(format!(
                "trace {}: a killed `patio mount trace` left what it recorded in {}: run \
                 `patio trace recover {}` first (or remove the journal)",
                shown(out),
                shown(&path),
                shown(out)
            )));
        }
        let head = native_header();
        file.write_all(&head).map_err(cannot)?;
        Ok(Journal {
            path,
            file,
            enc: SeqEncoder::new(),
            detector: Detector::default(),
            ids: HashMap::new(),
            good: head.len() as u64,
            broken: None,
        })
    }

    /// Appends `streams` (one frame each). On failure the journal is cut back to its
    /// last whole frame and marked broken: nothing more is appended.
    pub(crate) fn append(&mut self, streams: &[Stream]) {
        if self.broken.is_some() || streams.is_empty() {
            return;
        }
        let mut buf = Vec::new();
        for s in streams {
            let next = self.ids.len();
            let (id, new) = match self.ids.get(&s.key) {
                Some(&id) => (id, false),
                None => {
                    self.ids.insert(s.key.clone(), next);
                    (next, true)
                }
            };
            let payload = encode_chunk(&mut self.enc, &self.detector, &s.key, id, new, s);
            put_frame(&mut buf, &payload);
        }
        match self.file.write_all(&buf) {
            Ok(()) => self.good += buf.len() as u64,
            Err(e) => {
                let _ = self.file.set_len(self.good);
                self.broken = Some(format!("cannot append to {}: {e}", shown(&self.path)));
            }
        }
    }

    /// Everything the journal holds (its whole frames).
    pub(crate) fn read(&self) -> Result<Trace> {
        let mut bytes = fs::read(&self.path)
            .map_err(|e| FsError::io(format!("cannot read journal {}", shown(&self.path)), e))?;
        bytes.truncate(self.good as usize);
        Ok(Trace::decode_native(&bytes)?.trace)
    }
}

/// What `patio trace recover` turned into a trace.
#[derive(Debug)]
pub struct Recovery {
    pub journal: PathBuf,
    pub requests: usize,
    pub streams: usize,
    /// What was dropped (a torn or damaged last frame), if anything.
    pub damage: Option<String>,
}

/// Turns the journal a killed `patio mount trace --out out` left into the trace `out`
/// (written through a temporary file, fsync and rename), then removes the journal.
pub fn recover(out: &Path) -> Result<Recovery> {
    let path = journal_path(out);
    let file = match OpenOptions::new().read(true).write(true).open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(FsError::Invalid(format!(
                "trace {}: nothing to recover (no journal {} of a killed `patio mount trace`)",
                shown(out),
                shown(&path)
            )))
        }
        Err(e) => {
            return Err(FsError::io(
                format!("cannot open journal {}", shown(&path)),
                e,
            ))
        }
    };
    let cannot = |e| FsError::io(format!("cannot read journal {}", shown(&path)), e);
    if !try_lock(&file).map_err(cannot)? {
        return Err(FsError::Invalid(format!(
            "trace {}: its mount is still running (journal {} in use): end it and the trace \
             is written",
            shown(out),
            shown(&path)
        )));
    }
    let bytes = fs::read(&path).map_err(cannot)?;
    let (trace, damage) = if bytes.len() < native_header().len() {
        (Trace::from_streams(Vec::new()), None) // killed before its header was written
    } else {
        let got = Trace::decode_native(&bytes)
            .map_err(|e| FsError::Invalid(format!("journal {}: {e}", shown(&path))))?;
        (got.trace, got.damage)
    };
    super::write_trace(&trace, out)?;
    fs::remove_file(&path)
        .map_err(|e| FsError::io(format!("cannot remove journal {}", shown(&path)), e))?;
    Ok(Recovery {
        journal: path,
        requests: trace.requests(),
        streams: trace.streams.len(),
        damage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use patio_core::trace::Op;

    fn stream(file: &str, n: u64, base: f64) -> Stream {
        let mut s = Stream::new(StreamKey {
            module: "FUSE".into(),
            file: file.into(),
            rank: 7,
            op: Op::Read,
        });
        for i in 0..n {
            let t = base + i as f64 * 1e-3;
            s.push(i * 4096, 4096, t, t + 1e-4);
        }
        s
    }

    #[test]
    fn a_killed_mounts_journal_is_recovered_up_to_its_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("t.ptrace");
        let mut j = Journal::create(&out).unwrap();
        // A second mount on the same output is refused while the first runs.
        let busy = Journal::create(&out).err().unwrap().to_string();
        assert!(busy.contains("another `patio mount trace`"), "{busy}");
        assert!(recover(&out)
            .unwrap_err()
            .to_string()
            .contains("still running"));
        j.append(&[stream("a", 5, 0.0), stream("b", 3, 0.0)]);
        j.append(&[stream("a", 4, 1.0)]);
        let whole = fs::metadata(&j.path).unwrap().len();
        j.append(&[stream("b", 6, 2.0)]);
        assert_eq!(j.read().unwrap().requests(), 18);
        let path = j.path.clone();
        drop(j); // the process dies: its lock goes with it
                 // A torn last frame: cut inside it.
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(whole + 5).unwrap();
        let busy = Journal::create(&out).err().unwrap().to_string();
        assert!(busy.contains("patio trace recover"), "{busy}");
        let r = recover(&out).unwrap();
        assert_eq!((r.requests, r.streams), (12, 2));
        assert!(r.damage.is_some());
        let t = Trace::read_native(&out).unwrap().trace;
        let a = t.streams.iter().find(|s| s.key.file == "a").unwrap();
        assert_eq!(a.len(), 9);
        assert!(!path.exists());
        assert!(recover(&out)
            .unwrap_err()
            .to_string()
            .contains("nothing to recover"));
    }
}
