//! The C ABI of recording (header `include/patio_layout.h`, "Recording"): the VOL
//! connector hands over each `H5Dread`'s file selection as HDF5 describes it, and
//! [`crate::kblog`] turns it into the knowledge base's row and appends it to the
//! process's record log — buffered, one `write` per 256 reads and at close.

use crate::capi::{fail, guarded, slice, PATIO_EINVAL, PATIO_ENULL, PATIO_ERANGE};
use crate::kblog::{kb_dir, random_hex, record_selection, FileSel, RecordLog, Row, KB_FILE};
use std::ffi::{c_char, CStr};
use std::path::PathBuf;

/// `H5S_SEL_ALL`: no values.
pub const PATIO_REC_ALL: i32 = 0;
/// A regular hyperslab: start, stride, count, block (`rank` values each).
pub const PATIO_REC_REGULAR: i32 = 1;
/// Blocks: `nitems` x (first corner, last corner), `rank` values each.
pub const PATIO_REC_BLOCKS: i32 = 2;
/// Points: `nitems` x `rank` coordinates.
pub const PATIO_REC_POINTS: i32 = 3;
/// Reads buffered before they are appended to the log.
const BATCH: usize = 256;

/// Opaque recorder of one open file: its record log and buffered rows.
pub struct PatioRecorder {
    log: RecordLog,
    run: String,
    rows: Vec<Row>,
}

impl PatioRecorder {
    fn flush(&mut self) -> Result<(), i32> {
        if self.rows.is_empty() {
            return Ok(());
        }
        let rows = std::mem::take(&mut self.rows);
        self.log
            .append(&rows)
            .map_err(|e| fail(PATIO_EINVAL, format!("reads not recorded: {e}")))
    }
}

unsafe fn path_arg(p: *const c_char, what: &str) -> Result<PathBuf, i32> {
    if p.is_null() {
        return Err(fail(PATIO_ENULL, format!("{what} is null")));
    }
    let s = CStr::from_ptr(p)
        .to_str()
        .map_err(|_| fail(PATIO_EINVAL, format!("{what} is not UTF-8")))?;
    if s.is_empty() {
        return Err(fail(PATIO_EINVAL, format!("{what} is empty")));
    }
    Ok(PathBuf::from(s))
}

/// The knowledge base directory of `source` into `buf` (NUL-terminated, `cap` bytes);
/// `*n` = its length without the NUL.
///
/// # Safety
/// `source` is a C string; `buf` is writable for `cap` bytes (or null with cap 0); `n`
/// is writable.
#[no_mangle]
pub unsafe extern "C" fn patio_kb_dir(
    source: *const c_char,
    buf: *mut c_char,
    cap: u64,
    n: *mut u64,
) -> i32 {
    guarded(|| {
        let src = path_arg(source, "source")?;
        if n.is_null() {
            return Err(fail(PATIO_ENULL, "n is null"));
        }
        let dir = kb_dir(&src).to_string_lossy().into_owned().into_bytes();
        *n = dir.len() as u64;
        if (cap as usize) < dir.len() + 1 || buf.is_null() {
            return Err(fail(PATIO_ERANGE, "buffer too small"));
        }
        std::ptr::copy_nonoverlapping(dir.as_ptr(), buf.cast::<u8>(), dir.len());
        *buf.add(dir.len()) = 0;
        Ok(())
    })
}

/// A recorder for reads of `source` when the file has a knowledge base (its
/// `kb.sqlite` exists); `*out` = NULL (and PATIO_OK) when it has none.
///
/// # Safety
/// `source` is a C string; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn patio_recorder_open(
    source: *const c_char,
    out: *mut *mut PatioRecorder,
) -> i32 {
    guarded(|| {
        let src = path_arg(source, "source")?;
        if out.is_null() {
            return Err(fail(PATIO_ENULL, "out is null"));
        }
        *out = std::ptr::null_mut();
        let dir = kb_dir(&src);
        if !dir.join(KB_FILE).is_file() {
            return Ok(());
        }
        let rec = PatioRecorder {
            log: RecordLog::new(dir.join("records")),
            run: format!("{}-{}", std::process::id(), random_hex()),
            rows: Vec::new(),
        };
        *out = Box::into_raw(Box::new(rec));
        Ok(())
    })
}

fn file_sel(kind: i32, rank: usize, nitems: usize, v: &[u64]) -> Result<FileSel, i32> {
    let per = match kind {
        PATIO_REC_ALL => 0,
        PATIO_REC_REGULAR => 4 * rank,
        PATIO_REC_BLOCKS => 2 * rank,
        PATIO_REC_POINTS => rank,
        _ => return Err(fail(PATIO_EINVAL, format!("unknown selection kind {kind}"))),
    };
    let items = if kind == PATIO_REC_REGULAR { 1 } else { nitems };
    if v.len() != per * items {
        return Err(fail(
            PATIO_EINVAL,
            "selection values do not match kind and rank",
        ));
    }
    let rows = |w: usize| v.chunks(w.max(1)).map(<[u64]>::to_vec);
    Ok(match kind {
        PATIO_REC_ALL => FileSel::All,
        PATIO_REC_REGULAR => {
            let p: Vec<Vec<u64>> = rows(rank).collect();
            let [a, b, c, d]: [Vec<u64>; 4] = p
                .try_into()
                .map_err(|_| fail(PATIO_EINVAL, "a regular hyperslab needs 4 x rank values"))?;
            FileSel::Regular([a, b, c, d])
        }
        PATIO_REC_BLOCKS => FileSel::Blocks(
            v.chunks(2 * rank)
                .map(|b| (b[..rank].to_vec(), b[rank..].to_vec()))
                .collect(),
        ),
        _ => FileSel::Points(rows(rank).collect()),
    })
}

/// Records one read of dataset `dset` (its path in the file) of `shape[rank]`: the file
/// selection (`kind`, `nitems` and its values, see PATIO_REC_*), the result's shape
/// `out_shape[out_rank]`, the bytes delivered, the time it ended (seconds since the
/// epoch) and its duration. Appended to the log every 256 reads.
///
/// # Safety
/// `rec` comes from `patio_recorder_open`; the arrays hold the counts stated.
#[no_mangle]
pub unsafe extern "C" fn patio_recorder_read(
    rec: *mut PatioRecorder,
    dset: *const c_char,
    rank: u32,
    shape: *const u64,
    kind: i32,
    nitems: u64,
    values: *const u64,
    out_rank: u32,
    out_shape: *const u64,
    bytes: u64,
    t0: f64,
    seconds: f64,
) -> i32 {
    guarded(|| {
        let rec = rec
            .as_mut()
            .ok_or_else(|| fail(PATIO_ENULL, "recorder is null"))?;
        let name = path_arg(dset, "dataset name")?;
        let rank_n = rank as usize;
        let shape = slice(shape, rank_n, "shape")?;
        let per = match kind {
            PATIO_REC_REGULAR => 4 * rank_n,
            PATIO_REC_BLOCKS => 2 * rank_n * nitems as usize,
            PATIO_REC_POINTS => rank_n * nitems as usize,
            _ => 0,
        };
        let values = slice(values, per, "values")?;
        let out = slice(out_shape, out_rank as usize, "out_shape")?;
        let sel = file_sel(kind, rank_n, nitems as usize, values)?;
        let r =
            record_selection(shape, &sel, out).map_err(|e| fail(PATIO_EINVAL, e.to_string()))?;
        rec.rows.push(Row {
            dset: name.to_string_lossy().into_owned(),
            rec: r,
            bytes: bytes as i64,
            pid: i64::from(std::process::id()),
            run: rec.run.clone(),
            t0,
            seconds,
        });
        if rec.rows.len() >= BATCH {
            rec.flush()?;
        }
        Ok(())
    })
}

/// Appends the buffered reads to the record log now.
///
/// # Safety
/// `rec` comes from `patio_recorder_open`.
#[no_mangle]
pub unsafe extern "C" fn patio_recorder_flush(rec: *mut PatioRecorder) -> i32 {
    guarded(|| {
        rec.as_mut()
            .ok_or_else(|| fail(PATIO_ENULL, "recorder is null"))?
            .flush()
    })
}

/// Appends the buffered reads, ends the log (its end frame) and frees the recorder
/// (NULL: nothing). The status says whether the last reads reached the log.
///
/// # Safety
/// `rec` comes from `patio_recorder_open` and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn patio_recorder_close(rec: *mut PatioRecorder) -> i32 {
    if rec.is_null() {
        return crate::capi::PATIO_OK;
    }
    let mut rec = Box::from_raw(rec);
    let status = guarded(|| rec.flush());
    rec.log.finish();
    status
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capi::PATIO_OK;
    use std::ffi::CString;

    #[test]
    fn bad_input_is_an_error_code_and_a_file_without_a_knowledge_base_no_recorder() {
        let mut rec: *mut PatioRecorder = std::ptr::null_mut();
        unsafe {
            assert_eq!(patio_recorder_open(std::ptr::null(), &mut rec), PATIO_ENULL);
            let dir = std::env::temp_dir().join(format!("patio-capi-kb-{}", random_hex()));
            std::fs::create_dir_all(&dir).unwrap();
            let src = CString::new(dir.join("run.h5").to_str().unwrap()).unwrap();
            assert_eq!(patio_recorder_open(src.as_ptr(), &mut rec), PATIO_OK);
            assert!(rec.is_null());
            let kb = kb_dir(&dir.join("run.h5"));
            std::fs::create_dir_all(&kb).unwrap();
            std::fs::write(kb.join(KB_FILE), b"").unwrap();
            assert_eq!(patio_recorder_open(src.as_ptr(), &mut rec), PATIO_OK);
            assert!(!rec.is_null());
            let name = CString::new("/d").unwrap();
            let shape = [4u64, 5];
            let bad = [0u64, 9]; // a point outside the array
            let read = |kind: i32, nitems: u64, values: *const u64, out: &[u64]| {
                let (rank, dims) = (2, shape.as_ptr());
                patio_recorder_read(
                    rec,
                    name.as_ptr(),
                    rank,
                    dims,
                    kind,
                    nitems,
                    values,
                    out.len() as u32,
                    out.as_ptr(),
                    8,
                    1.0,
                    0.5,
                )
            };
            assert_eq!(read(PATIO_REC_POINTS, 1, bad.as_ptr(), &[1]), PATIO_EINVAL);
            assert_eq!(read(7, 0, std::ptr::null(), &[1]), PATIO_EINVAL);
            assert_eq!(read(PATIO_REC_ALL, 0, std::ptr::null(), &shape), PATIO_OK);
            assert_eq!(patio_recorder_close(rec), PATIO_OK);
            let logs: Vec<_> = std::fs::read_dir(kb.join("records")).unwrap().collect();
            assert_eq!(logs.len(), 1);
            assert_eq!(patio_recorder_close(std::ptr::null_mut()), PATIO_OK);
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
