//! Raw captures (`.praw`): the per-process files written by patio's LD_PRELOAD tracer
//! (`capture/`, the file format in `capture/output.c`), read back and merged into one [`Trace`].
//!
//! A raw capture is an 8-byte header (`PRAW`, version, reserved) followed by frames
//! exactly as [`crate::codec::put_frame`] writes them. Frame payloads start with a kind
//! byte: the process header (rank, pid, host, …), path definitions, and blocks of
//! fixed-width little-endian records. A torn or corrupt frame (a process killed while
//! writing) ends reading and every frame before it is kept. The byte layout is in
//! docs/FORMATS.md ("Raw capture"); this module is its one reader.

use crate::codec::{read_frames, Cursor};
use crate::error::{CoreError, Result};
use crate::trace::{Op, StreamKey, Trace};
use std::collections::HashMap;
use std::path::Path;

pub const MAGIC: &[u8; 4] = b"PRAW";
pub const VERSION: u16 = 1;
/// Bytes of one record in version 1; a process header may announce longer records
/// (later versions append fields), never shorter ones.
pub const RECORD_BYTES: usize = 44;

const FRAME_PROCESS: u8 = 1;
const FRAME_PATHS: u8 = 2;
const FRAME_RECORDS: u8 = 3;

/// The I/O layer a request was made through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    /// read/write/pread/… on a descriptor.
    Posix,
    /// fread/fwrite on a stdio stream.
    Stdio,
    /// An MPI-IO call (libpatio_mpiio.so): one record per contiguous file extent of the
    /// call after its file view is applied.
    Mpiio,
}

impl Layer {
    /// The trace module name of the layer.
    pub fn module(self) -> &'static str {
        match self {
            Layer::Posix => "POSIX",
            Layer::Stdio => "STDIO",
            Layer::Mpiio => "MPIIO",
        }
    }
}

/// The process a capture file belongs to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Process {
    /// MPI rank from the launcher's environment, -1 when there was none.
    pub rank: i32,
    pub pid: u32,
    pub ppid: u32,
    /// Clock of the time stamps: 0 = CLOCK_REALTIME.
    pub clock: u8,
    /// When the tracer started in this process image (ns on `clock`).
    pub start_ns: u64,
    pub host: String,
    /// The executable (`/proc/self/exe`), empty when unknown.
    pub exe: String,
    record_bytes: usize,
}

impl Process {
    /// The rank a merged trace uses: the MPI rank, or the pid when there is none.
    pub fn trace_rank(&self) -> i64 {
        if self.rank >= 0 {
            self.rank as i64
        } else {
            self.pid as i64
        }
    }
}

/// One recorded request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawRecord {
    pub offset: u64,
    pub length: u64,
    pub start_ns: u64,
    pub end_ns: u64,
    /// Index into the capture's path table.
    pub path: u32,
    /// Kernel thread id.
    pub tid: u32,
    pub op: Op,
    pub layer: Layer,
    /// Which call made it (1 read, 2 pread, 3 readv, 4 preadv, 5 write, 6 pwrite,
    /// 7 writev, 8 pwritev, 9 fread, 10 fwrite; each including its 64/v2/_chk forms;
    /// MPI-IO calls 11-24 and 31-44, docs/FORMATS.md).
    pub call: u8,
}

/// The intact content of one raw capture file.
#[derive(Clone, Debug, PartialEq)]
pub struct Capture {
    pub process: Process,
    pub paths: HashMap<u32, String>,
    /// Records in the order the tracer wrote them.
    pub records: Vec<RawRecord>,
    /// Set when part of the file was dropped: where, why and how much.
    pub damage: Option<String>,
}

impl Capture {
    /// Reads a capture, keeping every intact frame before any damage. Fails only when
    /// nothing usable is there: not a capture, an unknown version, or no intact
    /// process header.
    pub fn decode(bytes: &[u8]) -> Result<Capture> {
        let mut c = Cursor::new(bytes);
        let magic = c
            .take(4)
            .map_err(|_| CoreError::corrupt(0, "too short to be a patio raw capture"))?;
        if magic != MAGIC {
            return Err(CoreError::corrupt(0, "not a patio raw capture (bad magic)"));
        }
        let version = c.u16_le()?;
        if version == 0 || version > VERSION {
            return Err(CoreError::corrupt(
                4,
                format!("unsupported raw capture version {version}"),
            ));
        }
        if c.u16_le()? != 0 {
            return Err(CoreError::corrupt(6, "reserved header bytes are not zero"));
        }
        let (frames, tail) = read_frames(&bytes[8..], 8);
        let mut frames = frames.into_iter();
        let process = match frames.next() {
            Some((at, payload)) => decode_process(payload, at)?,
            None => {
                let why = tail.map_or_else(|| "no frames".to_string(), |e| e.to_string());
                return Err(CoreError::corrupt(
                    8,
                    format!("no intact process header: {why}"),
                ));
            }
        };
        let mut capture = Capture {
            process,
            paths: HashMap::new(),
            records: Vec::new(),
            damage: None,
        };
        let mut damage = tail;
        for (at, payload) in frames {
            if let Err(e) = capture.decode_frame(payload, at) {
                damage = Some(e);
                break;
            }
        }
        capture.damage = damage.map(|e| {
            let from = match &e {
                CoreError::Corrupt { offset, .. } => *offset,
                _ => 0,
            };
            format!(
                "{e}; dropped everything from byte {from} of {}",
                bytes.len()
            )
        });
        Ok(capture)
    }

    pub fn read(path: &Path) -> Result<Capture> {
        let bytes = std::fs::read(path).map_err(|e| CoreError::io(path, e))?;
        Self::decode(&bytes)
    }

    /// Adds one frame; on error nothing of the frame is kept.
    fn decode_frame(&mut self, payload: &[u8], at: usize) -> Result<()> {
        let mut c = Cursor::with_base(payload, at);
        match c.u8()? {
            FRAME_PATHS => {
                let n = c.u32_le()?;
                let mut defined = Vec::new();
                for _ in 0..n {
                    let id = c.u32_le()?;
                    let len = c.u32_le()? as usize;
                    let text = String::from_utf8_lossy(c.take(len)?).into_owned();
                    defined.push((id, text));
                }
                if !c.is_at_end() {
                    return Err(c.error("trailing bytes in path frame"));
                }
                self.paths.extend(defined);
            }
            FRAME_RECORDS => {
                let n = c.u32_le()? as usize;
                let size = self.process.record_bytes;
                if c.remaining() != n.saturating_mul(size) {
                    return Err(c.error(format!(
                        "record frame announces {n} records of {size} bytes, holds {} bytes",
                        c.remaining()
                    )));
                }
                let mut records = Vec::with_capacity(n);
                for _ in 0..n {
                    let start = c.position();
                    let mut r = Cursor::with_base(c.take(size)?, start);
                    let record = decode_record(&mut r)?;
                    if !self.paths.contains_key(&record.path) {
                        return Err(CoreError::corrupt(
                            start,
                            format!("record refers to undefined path {}", record.path),
                        ));
                    }
                    records.push(record);
                }
                self.records.extend(records);
            }
            FRAME_PROCESS => return Err(c.error("second process header")),
            other => return Err(c.error(format!("unknown frame kind {other}"))),
        }
        Ok(())
    }

    /// The records as `(stream key, offset, length, start ns, end ns)`.
    pub fn keyed_records(&self) -> impl Iterator<Item = (StreamKey, u64, u64, u64, u64)> + '_ {
        let rank = self.process.trace_rank();
        self.records.iter().map(move |r| {
            let key = StreamKey {
                module: r.layer.module().to_string(),
                file: self.paths[&r.path].clone(),
                rank,
                op: r.op,
            };
            (key, r.offset, r.length, r.start_ns, r.end_ns)
        })
    }
}

fn decode_process(payload: &[u8], at: usize) -> Result<Process> {
    let mut c = Cursor::with_base(payload, at);
    if c.u8()? != FRAME_PROCESS {
        return Err(c.error("the first frame is not a process header"));
    }
    let clock = c.u8()?;
    let record_bytes = c.u16_le()? as usize;
    if record_bytes < RECORD_BYTES {
        return Err(c.error(format!(
            "records of {record_bytes} bytes are shorter than the {RECORD_BYTES} of version 1"
        )));
    }
    let rank = c.u32_le()? as i32;
    let pid = c.u32_le()?;
    let ppid = c.u32_le()?;
    let start_ns = c.u64_le()?;
    let mut text = || -> Result<String> {
        let n = c.u16_le()? as usize;
        Ok(String::from_utf8_lossy(c.take(n)?).into_owned())
    };
    let (host, exe) = (text()?, text()?);
    Ok(Process {
        rank,
        pid,
        ppid,
        clock,
        start_ns,
        host,
        exe,
        record_bytes,
    })
}

fn decode_record(c: &mut Cursor) -> Result<RawRecord> {
    let offset = c.u64_le()?;
    let length = c.u64_le()?;
    let start_ns = c.u64_le()?;
    let end_ns = c.u64_le()?;
    let path = c.u32_le()?;
    let tid = c.u32_le()?;
    let op = match c.u8()? {
        0 => Op::Read,
        1 => Op::Write,
        other => return Err(c.error(format!("unknown op {other}"))),
    };
    let layer = match c.u8()? {
        0 => Layer::Posix,
        1 => Layer::Stdio,
        2 => Layer::Mpiio,
        other => return Err(c.error(format!("unknown layer {other}"))),
    };
    let call = c.u8()?;
    if offset.checked_add(length).is_none() {
        return Err(c.error("offset + length exceeds 2^64"));
    }
    Ok(RawRecord {
        offset,
        length,
        start_ns,
        end_ns,
        path,
        tid,
        op,
        layer,
        call,
    })
}

/// One trace from the captures of many processes: module `POSIX`, `STDIO` or `MPIIO`, the file
/// from the path table, rank from the process header (the pid when it has no rank),
/// times in seconds since the earliest request start among all captures.
pub fn merge(captures: &[Capture]) -> Trace {
    let base = captures
        .iter()
        .flat_map(|c| c.records.iter().map(|r| r.start_ns))
        .min()
        .unwrap_or(0);
    let seconds = |t: u64| (t as i128 - base as i128) as f64 / 1e9;
    Trace::from_records(captures.iter().flat_map(|c| {
        c.keyed_records()
            .map(move |(key, offset, length, start, end)| {
                (key, offset, length, seconds(start), seconds(end))
            })
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::put_frame;

    /// Writes a capture the way the tracer does (the byte layout of docs/FORMATS.md).
    fn capture_bytes(
        rank: i32,
        pid: u32,
        paths: &[&str],
        records: &[(u8, u64, u64, u64, u32)],
    ) -> Vec<u8> {
        let mut out = b"PRAW\x01\x00\x00\x00".to_vec();
        let mut p = vec![FRAME_PROCESS, 0];
        p.extend_from_slice(&(RECORD_BYTES as u16).to_le_bytes());
        p.extend_from_slice(&rank.to_le_bytes());
        p.extend_from_slice(&pid.to_le_bytes());
        p.extend_from_slice(&1u32.to_le_bytes());
        p.extend_from_slice(&5u64.to_le_bytes());
        for t in ["node1", "/bin/app"] {
            p.extend_from_slice(&(t.len() as u16).to_le_bytes());
            p.extend_from_slice(t.as_bytes());
        }
        put_frame(&mut out, &p);
        let mut p = vec![FRAME_PATHS];
        p.extend_from_slice(&(paths.len() as u32).to_le_bytes());
        for (i, t) in paths.iter().enumerate() {
            p.extend_from_slice(&(i as u32).to_le_bytes());
            p.extend_from_slice(&(t.len() as u32).to_le_bytes());
            p.extend_from_slice(t.as_bytes());
        }
        put_frame(&mut out, &p);
        for chunk in records.chunks(2) {
            let mut p = vec![FRAME_RECORDS];
            p.extend_from_slice(&(chunk.len() as u32).to_le_bytes());
            for &(op, offset, length, start, path) in chunk {
                for v in [offset, length, start, start + 10] {
                    p.extend_from_slice(&v.to_le_bytes());
                }
                p.extend_from_slice(&path.to_le_bytes());
                p.extend_from_slice(&77u32.to_le_bytes());
                // op's bit 0 is the op, the bits above it the layer
                p.extend_from_slice(&[op & 1, op >> 1, 1, 0]);
            }
            put_frame(&mut out, &p);
        }
        out
    }

    #[test]
    fn decode_and_merge() {
        let recs = [
            (0, 0, 4096, 1_000, 0),
            (0, 8192, 4096, 2_000, 0),
            (1, 0, 10, 3_000, 1),
        ];
        let a = Capture::decode(&capture_bytes(-1, 42, &["/d/a", "/d/b"], &recs)).unwrap();
        assert!(a.damage.is_none());
        assert_eq!(a.process.trace_rank(), 42);
        assert_eq!(a.process.host, "node1");
        assert_eq!(a.records.len(), 3);
        assert_eq!(a.records[1].offset, 8192);
        let b = Capture::decode(&capture_bytes(3, 43, &["/d/a"], &[(0, 7, 1, 500, 0)])).unwrap();
        let t = merge(&[a, b]);
        assert_eq!(t.requests(), 4);
        let s = t
            .streams
            .iter()
            .find(|s| s.key.rank == 42 && s.key.op == Op::Read)
            .unwrap();
        assert_eq!(s.key.file, "/d/a");
        assert_eq!(s.key.module, "POSIX");
        assert_eq!(s.offsets, vec![0, 8192]);
        assert_eq!(s.starts, vec![500e-9, 1500e-9]);
    }

    #[test]
    fn mpiio_records_merge_as_module_mpiio() {
        // layer 2 (MPIIO) read and write beside a POSIX read of the same file
        let recs = [
            (4, 64, 32, 1_000, 0),
            (5, 0, 8, 2_000, 0),
            (0, 0, 4096, 3_000, 0),
        ];
        let c = Capture::decode(&capture_bytes(1, 9, &["/d/a"], &recs)).unwrap();
        assert_eq!(c.records[0].layer, Layer::Mpiio);
        assert_eq!(c.records[1].op, Op::Write);
        let t = merge(&[c]);
        let modules: Vec<(&str, Op, Vec<u64>)> = t
            .streams
            .iter()
            .map(|s| (s.key.module.as_str(), s.key.op, s.offsets.clone()))
            .collect();
        assert!(modules.contains(&("MPIIO", Op::Read, vec![64])));
        assert!(modules.contains(&("MPIIO", Op::Write, vec![0])));
        assert!(modules.contains(&("POSIX", Op::Read, vec![0])));
        let bad = capture_bytes(1, 9, &["/d/a"], &[(6, 0, 1, 1, 0)]);
        assert!(Capture::decode(&bad)
            .unwrap()
            .damage
            .unwrap()
            .contains("unknown layer 3"));
    }

    #[test]
    fn damaged_tails_keep_intact_frames() {
        let recs = [(0, 0, 1, 1, 0), (0, 1, 1, 2, 0), (0, 2, 1, 3, 0)];
        let bytes = capture_bytes(0, 1, &["/x"], &recs);
        let cut = Capture::decode(&bytes[..bytes.len() - 5]).unwrap();
        assert_eq!(cut.records.len(), 2);
        assert!(cut.damage.unwrap().contains("dropped"));
        let mut flipped = bytes.clone();
        let n = flipped.len();
        flipped[n - 3] ^= 0xff;
        assert_eq!(Capture::decode(&flipped).unwrap().records.len(), 2);
        assert!(Capture::decode(&bytes[..12]).is_err());
        assert!(Capture::decode(b"PTRC\x01\x00\x00\x00").is_err());
    }

    #[test]
    fn records_need_defined_paths() {
        let bytes = capture_bytes(0, 1, &["/x"], &[(0, 0, 1, 1, 0), (0, 0, 1, 1, 5)]);
        let c = Capture::decode(&bytes).unwrap();
        assert!(c.records.is_empty());
        assert!(c.damage.unwrap().contains("undefined path 5"));
    }
}
