//! Recording reads into a layout knowledge base from outside Python (the VOL connector,
//! through [`crate::capi_kb`]): where a file's knowledge base lives, a read's selection
//! as the knowledge base keeps it (the selection JSON and the points blob), and the
//! appending side of a record log — byte for byte what `patio.layout.kb` /
//! `patio.layout.kblog` write, so `patio layout status|advise|build` merge both alike.
//! The location, the selection JSON and the integer blob are Python's too (`kb_dir`,
//! `Selection.to_json`, `encode_ints` call them through `patio._native`).
//! Formats: docs/FORMATS.md ("Record log", "Selection JSON").

use patio_core::seqcodec::encode_seq;
use patio_core::{Detector, PatternSeq};
use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Record log magic and version (docs/FORMATS.md "Record log").
pub const MAGIC: &[u8; 4] = b"PKBL";
pub const VERSION: u16 = 1;
const KIND_READS: u8 = 1;
const KIND_END: u8 = 2;
/// Rows per frame, as the Python writer (no frame comes near the 64 MiB limit).
pub const ROWS_PER_FRAME: usize = 4096;
/// The knowledge base database file inside [`kb_dir`].
pub const KB_FILE: &str = "kb.sqlite";
/// The pattern detector's search window used for point blobs (`patio.detect`'s default).
const DETECT_WINDOW: usize = 32;

/// What could not be recorded, and why.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The selection does not describe a read of the dataset (rank, sizes, bounds).
    #[error("selection: {0}")]
    Selection(String),
    /// The record log could not be created or appended to.
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

fn io_err(path: &Path, source: std::io::Error) -> RecordError {
    RecordError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// The directory holding the knowledge base, replicas and record logs of `source`:
/// `<dir of the file>/.patio-layout/<file name>`, or with `PATIO_LAYOUT_DIR` set,
/// `$PATIO_LAYOUT_DIR/<file name>-<first 12 hex digits of SHA-1 of the resolved path>`
/// (`patio.layout.kb.kb_dir`). The path is resolved as Python's `Path.resolve()`: the
/// existing part through `realpath`, the rest appended.
pub fn kb_dir(source: &Path) -> PathBuf {
    let src = resolve(source);
    let name = src
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match std::env::var_os("PATIO_LAYOUT_DIR").filter(|v| !v.is_empty()) {
        Some(env) => {
            let digest = sha1_smol::Sha1::from(src.to_string_lossy().as_bytes())
                .digest()
                .to_string();
            PathBuf::from(env).join(format!("{name}-{}", &digest[..12]))
        }
        None => src
            .parent()
            .unwrap_or(Path::new("/"))
            .join(".patio-layout")
            .join(name),
    }
}

fn resolve(path: &Path) -> PathBuf {
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    if let Ok(p) = std::fs::canonicalize(&abs) {
        return p;
    }
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => resolve(parent).join(name),
        _ => abs,
    }
}

/// One read's selection in the dataset's index space, as HDF5 describes a file
/// dataspace selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FileSel {
    /// `H5S_SEL_ALL`.
    All,
    /// A regular hyperslab: start, stride, count, block (`rank` values each).
    Regular([Vec<u64>; 4]),
    /// An irregular hyperslab: its blocks as (first corner, last corner inclusive), as
    /// `H5Sget_select_hyper_blocklist` lists them.
    Blocks(Vec<(Vec<u64>, Vec<u64>)>),
    /// A point selection: each point's coordinates, in buffer order.
    Points(Vec<Vec<u64>>),
}

/// A read as one `access` row holds it: the selection JSON and the points blob.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    pub sel: String,
    pub points: Option<Vec<u8>>,
    pub nelem: u64,
}

/// One hyperslab: start, stride, count, block (`rank` values each).
pub type Slab = [Vec<u64>; 4];

/// The same elements with dense dimensions written as one block (count 1), stride 1
/// where count is at most 1 (`Hyperslab.normalized`).
fn normalized(s: &Slab) -> Slab {
    let mut out: Slab = s.clone();
    for d in 0..s[0].len() {
        let (st, mut c, mut b) = (s[1][d], s[2][d], s[3][d]);
        if c > 1 && st == b {
            (c, b) = (1, c * b);
        }
        out[1][d] = if c <= 1 { 1 } else { st };
        out[2][d] = c;
        out[3][d] = b;
    }
    out
}

fn box_slab(lo: &[u64], hi_incl: &[u64]) -> Slab {
    let n = lo.len();
    [
        lo.to_vec(),
        vec![1; n],
        vec![1; n],
        lo.iter().zip(hi_incl).map(|(l, h)| h + 1 - l).collect(),
    ]
}

fn json_ints(out: &mut String, xs: &[u64]) {
    out.push('[');
    for (i, x) in xs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{x}");
    }
    out.push(']');
}

/// A selection as the knowledge base stores it (`patio.layout.selection.Selection.to_json`
/// calls this): `{"shape":[..],"kind":..,"out":[..],"slabs":[..]}`, compact; each slab
/// is `[start, stride, count, block]`; no slabs for points (their blob holds them).
pub fn selection_json(
    shape: &[u64],
    kind: &str,
    out_shape: &[u64],
    slabs: Option<&[Slab]>,
) -> String {
    let mut s = String::from("{\"shape\":");
    json_ints(&mut s, shape);
    let _ = write!(s, ",\"kind\":\"{kind}\",\"out\":");
    json_ints(&mut s, out_shape);
    if let Some(slabs) = slabs {
        s.push_str(",\"slabs\":[");
        for (i, slab) in slabs.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push('[');
            for (j, part) in slab.iter().enumerate() {
                if j > 0 {
                    s.push(',');
                }
                json_ints(&mut s, part);
            }
            s.push(']');
        }
        s.push(']');
    }
    s.push('}');
    s
}

fn check_rank(shape: &[u64], v: &[u64], what: &str) -> Result<(), RecordError> {
    if v.len() != shape.len() {
        return Err(RecordError::Selection(format!(
            "{what} has {} values for rank {}",
            v.len(),
            shape.len()
        )));
    }
    Ok(())
}

/// The row a read of `sel` from a dataset of `shape` is recorded as (`out_shape`: the
/// shape of the result, the memory dataspace's extent) — `patio.layout.h5sel.from_space`
/// followed by `KnowledgeBase.record`.
pub fn record_selection(
    shape: &[u64],
    sel: &FileSel,
    out_shape: &[u64],
) -> Result<Recorded, RecordError> {
    let slabs: Vec<Slab> = match sel {
        FileSel::All => vec![box_slab(
            &vec![0; shape.len()],
            &shape
                .iter()
                .map(|&n| n.saturating_sub(1))
                .collect::<Vec<_>>(),
        )],
        FileSel::Regular(slab) => {
            for part in slab {
                check_rank(shape, part, "hyperslab")?;
            }
            vec![normalized(slab)]
        }
        FileSel::Blocks(blocks) => {
            let mut v = Vec::with_capacity(blocks.len());
            for (lo, hi) in blocks {
                check_rank(shape, lo, "block")?;
                check_rank(shape, hi, "block")?;
                if lo.iter().zip(hi).any(|(l, h)| h < l) {
                    return Err(RecordError::Selection("block corners reversed".into()));
                }
                v.push(box_slab(lo, hi));
            }
            v
        }
        FileSel::Points(points) => return record_points(shape, points, out_shape),
    };
    let nelem: u64 = slabs
        .iter()
        .map(|s| s[2].iter().zip(&s[3]).map(|(c, b)| c * b).product::<u64>())
        .sum();
    let kind = if slabs.len() == 1 {
        "hyperslab"
    } else {
        "union"
    };
    Ok(Recorded {
        sel: selection_json(shape, kind, out_shape, Some(&slabs)),
        points: None,
        nelem,
    })
}

fn record_points(
    shape: &[u64],
    points: &[Vec<u64>],
    out_shape: &[u64],
) -> Result<Recorded, RecordError> {
    let mut linear = Vec::with_capacity(points.len());
    for p in points {
        check_rank(shape, p, "point")?;
        let mut lin: u64 = 0;
        for (x, n) in p.iter().zip(shape) {
            if x >= n {
                return Err(RecordError::Selection(format!(
                    "point coordinate {x} outside an axis of {n}"
                )));
            }
            lin = lin * n + x;
        }
        linear.push(
            i64::try_from(lin)
                .map_err(|_| RecordError::Selection("linear index beyond 2^63".into()))?,
        );
    }
    Ok(Recorded {
        sel: selection_json(shape, "points", out_shape, None),
        points: Some(ints_blob(&linear)),
        nelem: points.len() as u64,
    })
}

/// A sequence of integers (a point selection's row-major linear indices, a family's
/// starts, a replica's index sets) as the knowledge base stores it: the pattern engine's
/// encoding (`patio.layout.kb.encode_ints` calls this).
pub fn ints_blob(values: &[i64]) -> Vec<u8> {
    encode_seq(&PatternSeq::build(values, &Detector::new(DETECT_WINDOW)))
}

/// One `access` row (`patio.layout.kblog.Row`).
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub dset: String,
    pub rec: Recorded,
    pub bytes: i64,
    pub pid: i64,
    pub run: String,
    pub t0: f64,
    pub seconds: f64,
}

/// The log header: magic, version, reserved.
pub fn header() -> Vec<u8> {
    let mut v = MAGIC.to_vec();
    v.extend_from_slice(&VERSION.to_le_bytes());
    v.extend_from_slice(&0u16.to_le_bytes());
    v
}

fn frame(payload: Vec<u8>) -> Vec<u8> {
    let mut v = Vec::with_capacity(payload.len() + 8);
    v.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    v.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    v.extend_from_slice(&payload);
    v
}

fn kind_header(kind: u8, rows: usize) -> Vec<u8> {
    let mut v = vec![kind, 0, 0, 0];
    v.extend_from_slice(&(rows as u32).to_le_bytes());
    v
}

/// One frame holding `rows` (`kblog.encode_reads`).
pub fn encode_reads(rows: &[Row]) -> Vec<u8> {
    let mut p = kind_header(KIND_READS, rows.len());
    for r in rows {
        let (d, s, run) = (r.dset.as_bytes(), r.rec.sel.as_bytes(), r.run.as_bytes());
        let pts: &[u8] = r.rec.points.as_deref().unwrap_or(&[]);
        p.extend_from_slice(&(d.len() as u16).to_le_bytes());
        p.extend_from_slice(d);
        p.extend_from_slice(&(s.len() as u32).to_le_bytes());
        p.extend_from_slice(s);
        p.extend_from_slice(&(pts.len() as u32).to_le_bytes());
        p.extend_from_slice(pts);
        p.extend_from_slice(&(r.rec.nelem as i64).to_le_bytes());
        p.extend_from_slice(&r.bytes.to_le_bytes());
        p.extend_from_slice(&r.pid.to_le_bytes());
        p.extend_from_slice(&(run.len() as u16).to_le_bytes());
        p.extend_from_slice(run);
        p.extend_from_slice(&r.t0.to_le_bytes());
        p.extend_from_slice(&r.seconds.to_le_bytes());
    }
    frame(p)
}

/// The end frame a writer appends when it closes its log.
pub fn encode_end() -> Vec<u8> {
    frame(kind_header(KIND_END, 0))
}

/// 8 random hex digits (log names and run ids), from the system's random source.
pub fn random_hex() -> String {
    let mut b = [0u8; 4];
    let ok = File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_ok();
    if !ok {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() ^ (d.as_secs() as u32))
            .unwrap_or(0);
        b = (t ^ std::process::id().rotate_left(16)).to_le_bytes();
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The appending side of one process's record log in `directory` (`kblog.RecordLog`):
/// created at the first append as `<host>.<pid>-<8 hex>.log`, `O_APPEND`, one `write`
/// per frame; a log removed by a merge while open, or inherited over a `fork`, is
/// replaced by a new one.
pub struct RecordLog {
    directory: PathBuf,
    file: Option<(File, PathBuf, u32, (u64, u64))>,
}

impl RecordLog {
    pub fn new(directory: PathBuf) -> Self {
        RecordLog {
            directory,
            file: None,
        }
    }

    /// The log's path, once created.
    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|f| f.1.as_path())
    }

    fn current(&mut self) -> Result<(&mut File, bool), RecordError> {
        let pid = std::process::id();
        let keep = match &self.file {
            Some((_, path, p, ident)) if *p == pid => std::fs::metadata(path)
                .map(|m| (m.dev(), m.ino()) == *ident)
                .unwrap_or(false),
            _ => false,
        };
        let fresh = !keep;
        if fresh {
            self.file = None;
            std::fs::create_dir_all(&self.directory).map_err(|e| io_err(&self.directory, e))?;
            let name = format!(
                "{}.{pid}-{}.log",
                patio_container::layout::host_name(),
                random_hex()
            );
            let path = self.directory.join(name);
            let f = OpenOptions::new()
                .append(true)
                .create_new(true)
                .mode(0o666)
                .custom_flags(libc::O_CLOEXEC)
                .open(&path)
                .map_err(|e| io_err(&path, e))?;
            let m = f.metadata().map_err(|e| io_err(&path, e))?;
            self.file = Some((f, path, pid, (m.dev(), m.ino())));
        }
        let f = self.file.as_mut().map(|f| &mut f.0).expect("opened above");
        Ok((f, fresh))
    }

    fn write(&mut self, data: Vec<u8>) -> Result<(), RecordError> {
        let (f, fresh) = self.current()?;
        let data = if fresh {
            let mut h = header();
            h.extend_from_slice(&data);
            h
        } else {
            data
        };
        let res = match f.write(&data) {
            Ok(n) if n == data.len() => Ok(()),
            Ok(n) => Err(std::io::Error::other(format!(
                "short write ({n} of {} bytes)",
                data.len()
            ))),
            Err(e) => Err(e),
        };
        if let Err(e) = res {
            // The tail may be torn: never append behind it.
            let path = self.file.take().map(|f| f.1).unwrap_or_default();
            return Err(io_err(&path, e));
        }
        Ok(())
    }

    /// Appends `rows`, one frame per [`ROWS_PER_FRAME`] rows.
    pub fn append(&mut self, rows: &[Row]) -> Result<(), RecordError> {
        for part in rows.chunks(ROWS_PER_FRAME) {
            self.write(encode_reads(part))?;
        }
        Ok(())
    }

    /// Ends this process's log (an end frame, then close); true when it had one. A
    /// forked child's inherited log is left to its parent.
    pub fn finish(&mut self) -> bool {
        match self.file.take() {
            Some((mut f, _, pid, _)) if pid == std::process::id() => {
                let _ = f.write(&encode_end());
                true
            }
            _ => false,
        }
    }
}

impl Drop for RecordLog {
    fn drop(&mut self) {
        self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_hyperslabs_are_normalized_as_python_does() {
        let slab = [vec![2, 3], vec![1, 1], vec![3, 1], vec![1, 1]];
        let r = record_selection(&[10, 8], &FileSel::Regular(slab), &[3]).unwrap();
        assert_eq!(
            r.sel,
            r#"{"shape":[10,8],"kind":"hyperslab","out":[3],"slabs":[[[2,3],[1,1],[1,1],[3,1]]]}"#
        );
        assert_eq!(r.nelem, 3);
        let strided = [vec![0], vec![4], vec![3], vec![2]];
        let r = record_selection(&[12], &FileSel::Regular(strided), &[6]).unwrap();
        assert!(
            r.sel.ends_with(r#""slabs":[[[0],[4],[3],[2]]]}"#),
            "{}",
            r.sel
        );
    }

    #[test]
    fn all_blocks_and_points() {
        let r = record_selection(&[4, 5], &FileSel::All, &[4, 5]).unwrap();
        assert!(r.sel.ends_with(r#""slabs":[[[0,0],[1,1],[1,1],[4,5]]]}"#));
        let blocks = vec![(vec![0, 1], vec![1, 2]), (vec![3, 1], vec![3, 2])];
        let r = record_selection(&[4, 5], &FileSel::Blocks(blocks), &[3, 2]).unwrap();
        assert!(r.sel.contains(r#""kind":"union""#));
        assert_eq!(r.nelem, 6);
        let pts = vec![vec![0, 1], vec![3, 4]];
        let r = record_selection(&[4, 5], &FileSel::Points(pts), &[2]).unwrap();
        assert_eq!(r.sel, r#"{"shape":[4,5],"kind":"points","out":[2]}"#);
        let seq = patio_core::seqcodec::decode_seq(r.points.as_deref().unwrap()).unwrap();
        assert_eq!(seq.expand(), vec![1, 19]);
        assert!(record_selection(&[4, 5], &FileSel::Points(vec![vec![4, 0]]), &[1]).is_err());
        assert!(record_selection(&[4], &FileSel::Points(vec![vec![1, 0]]), &[1]).is_err());
    }

    #[test]
    fn frames_round_trip_their_layout() {
        let row = Row {
            dset: "/d".into(),
            rec: record_selection(&[3], &FileSel::All, &[3]).unwrap(),
            bytes: 24,
            pid: 7,
            run: "7-abcdef01".into(),
            t0: 1.5,
            seconds: 0.25,
        };
        let f = encode_reads(std::slice::from_ref(&row));
        let n = u32::from_le_bytes(f[0..4].try_into().unwrap()) as usize;
        assert_eq!(n, f.len() - 8);
        assert_eq!(
            u32::from_le_bytes(f[4..8].try_into().unwrap()),
            crc32fast::hash(&f[8..])
        );
        assert_eq!(&f[8..16], &[1, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(encode_end().len(), 16);
        let dir = std::env::temp_dir().join(format!("patio-kblog-{}", random_hex()));
        let mut log = RecordLog::new(dir.clone());
        log.append(&[row]).unwrap();
        let path = log.path().unwrap().to_path_buf();
        assert!(log.finish());
        let data = std::fs::read(&path).unwrap();
        assert_eq!(&data[..8], &header()[..]);
        assert_eq!(data.len(), 8 + f.len() + 16);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
