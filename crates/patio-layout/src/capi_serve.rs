//! The C ABI of serving a dataset's reads from its replicas (header
//! `include/patio_layout.h`, "Serving reads from replicas"): the VOL connector opens a
//! [`ServeSet`] per dataset, reads each replica's layout from its file (HDF5 knows where
//! its bytes are), gets a decider over the current ones, carries out its plans
//! (`capi_plan`) and counts the reads each replica served; a write to the dataset marks
//! its replicas stale first. Status codes as in [`crate::capi`].

use crate::capi::{fail, guarded, handle, handle_mut, layout_err, PatioDecider, PatioLayout};
use crate::capi::{PATIO_EINVAL, PATIO_ENULL, PATIO_ERANGE};
use crate::kbserve::{mark_dataset_stale, ServeSet};
use crate::layout::Layout;
use std::ffi::{c_char, c_int, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

/// Opaque handle: one dataset's replicas, their layouts and, once ready, the decider.
pub struct PatioServe {
    set: ServeSet,
    paths: Vec<CString>,
    layouts: Vec<Option<Layout>>,
    decider: Option<PatioDecider>,
    /// Per decider replica: its index in `set.replicas`.
    index: Vec<usize>,
    notes: Vec<CString>,
}

unsafe fn text<'a>(p: *const c_char, what: &str) -> Result<&'a str, i32> {
    if p.is_null() {
        return Err(fail(PATIO_ENULL, format!("{what} is null")));
    }
    CStr::from_ptr(p)
        .to_str()
        .map_err(|_| fail(PATIO_EINVAL, format!("{what} is not UTF-8")))
}

fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

/// Opens the replicas of dataset `dset` (its path in the file) of the HDF5 file `file`:
/// `*out` is null when the file has no knowledge base or the dataset no ready replica.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_serve_open(
    file: *const c_char,
    dset: *const c_char,
    out: *mut *mut PatioServe,
) -> i32 {
    guarded(|| {
        if out.is_null() {
            return Err(fail(PATIO_ENULL, "out is null"));
        }
        *out = std::ptr::null_mut();
        let source = PathBuf::from(text(file, "file")?);
        let dset = text(dset, "dset")?;
        let Some(set) = ServeSet::open(&source, dset).map_err(layout_err)? else {
            return Ok(());
        };
        let paths = set
            .replicas
            .iter()
            .map(|r| CString::new(r.path.as_os_str().as_bytes()).unwrap_or_default())
            .collect();
        let n = set.replicas.len();
        let notes = set.notes.iter().map(|n| c_string(n)).collect();
        *out = Box::into_raw(Box::new(PatioServe {
            set,
            paths,
            layouts: vec![None; n],
            decider: None,
            index: Vec::new(),
            notes,
        }));
        Ok(())
    })
}

/// The number of replicas (`*n`) and replica `i`'s file (`*path`, valid while `serve`
/// lives) when `i < *n`.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_serve_replica(
    serve: *const PatioServe,
    i: u64,
    n: *mut u64,
    path: *mut *const c_char,
) -> i32 {
    guarded(|| {
        let s = handle(serve, "serve")?;
        if n.is_null() || path.is_null() {
            return Err(fail(PATIO_ENULL, "an output pointer is null"));
        }
        *n = s.paths.len() as u64;
        *path = s
            .paths
            .get(i as usize)
            .map_or(std::ptr::null(), |p| p.as_ptr());
        Ok(())
    })
}

/// Replica `i`'s layout as read from its file (copied).
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_serve_set_layout(
    serve: *mut PatioServe,
    i: u64,
    layout: *const PatioLayout,
) -> i32 {
    guarded(|| {
        let s = handle_mut(serve, "serve")?;
        let l = handle(layout, "layout")?;
        let slot = s
            .layouts
            .get_mut(i as usize)
            .ok_or_else(|| fail(PATIO_ERANGE, format!("no replica {i}")))?;
        *slot = Some(l.0.clone());
        Ok(())
    })
}

/// The decider over `original` (the dataset's layout in the source) and the current
/// replicas with layouts (`*decider` borrowed from `serve`); the lines to report about
/// the replicas left out: `*nnotes`.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_serve_ready(
    serve: *mut PatioServe,
    original: *const PatioLayout,
    decider: *mut *mut PatioDecider,
    nnotes: *mut u64,
) -> i32 {
    guarded(|| {
        let s = handle_mut(serve, "serve")?;
        let o = handle(original, "original")?;
        if decider.is_null() || nnotes.is_null() {
            return Err(fail(PATIO_ENULL, "an output pointer is null"));
        }
        let (d, index) = s.set.decider(&o.0, &s.layouts).map_err(layout_err)?;
        s.index = index;
        s.notes = s.set.notes.iter().map(|n| c_string(n)).collect();
        let gen = crate::capi::next_generation();
        let held = s.decider.insert(PatioDecider { d, gen });
        *decider = held as *mut PatioDecider;
        *nnotes = s.notes.len() as u64;
        Ok(())
    })
}

/// Note `k` about the replicas left out so far (by `patio_serve_open`, then by
/// `patio_serve_ready`), valid while `serve` lives; `PATIO_ERANGE` past the last.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_serve_note(
    serve: *const PatioServe,
    k: u64,
    line: *mut *const c_char,
) -> i32 {
    guarded(|| {
        let s = handle(serve, "serve")?;
        if line.is_null() {
            return Err(fail(PATIO_ENULL, "line is null"));
        }
        let note = s
            .notes
            .get(k as usize)
            .ok_or_else(|| fail(PATIO_ERANGE, format!("no note {k}")))?;
        *line = note.as_ptr();
        Ok(())
    })
}

/// The replica (numbered as by `patio_serve_replica`) that the decider's replica
/// `copy` (a piece's copy, >= 0) is.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_serve_copy(serve: *const PatioServe, copy: i64, i: *mut u64) -> i32 {
    guarded(|| {
        let s = handle(serve, "serve")?;
        if i.is_null() {
            return Err(fail(PATIO_ENULL, "i is null"));
        }
        let at = usize::try_from(copy)
            .ok()
            .and_then(|c| s.index.get(c))
            .ok_or_else(|| fail(PATIO_ERANGE, format!("no decider replica {copy}")))?;
        *i = *at as u64;
        Ok(())
    })
}

/// `*current` = 1 while the source keeps the version the replicas were checked
/// against, else 0 (then nothing may be served: reopen).
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_serve_current(serve: *const PatioServe, current: *mut c_int) -> i32 {
    guarded(|| {
        let s = handle(serve, "serve")?;
        if current.is_null() {
            return Err(fail(PATIO_ENULL, "current is null"));
        }
        *current = c_int::from(s.set.current());
        Ok(())
    })
}

/// Counts one read served (partly) from replica `i`, saving `saved` modelled seconds
/// (`i` numbered as by `patio_serve_replica`); recorded at `patio_serve_close`.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_serve_used(serve: *mut PatioServe, i: u64, saved: f64) -> i32 {
    guarded(|| {
        handle_mut(serve, "serve")?.set.used(i as usize, saved);
        Ok(())
    })
}

/// Replica `i` failed while serving (`why`): marked damaged in the knowledge base.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_serve_damaged(
    serve: *mut PatioServe,
    i: u64,
    why: *const c_char,
) -> i32 {
    guarded(|| {
        let s = handle_mut(serve, "serve")?;
        let why = text(why, "why")?;
        s.set.damaged(i as usize, why);
        Ok(())
    })
}

/// Records the reads counted (a served log, [`crate::kbserve::write_served_log`]) and
/// frees `serve` (also on failure, whose message says why nothing was recorded).
///
/// # Safety
/// `serve` is null or from `patio_serve_open`, closed once.
#[no_mangle]
pub unsafe extern "C" fn patio_serve_close(serve: *mut PatioServe) -> i32 {
    if serve.is_null() {
        return crate::capi::PATIO_OK;
    }
    let mut s = Box::from_raw(serve);
    guarded(move || s.set.flush().map_err(layout_err))
}

/// Marks every ready replica of dataset `dset` of `file` stale: called before a write
/// to the dataset (no knowledge base: nothing to do).
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_serve_written(file: *const c_char, dset: *const c_char) -> i32 {
    guarded(|| {
        let source = PathBuf::from(text(file, "file")?);
        let dset = text(dset, "dset")?;
        mark_dataset_stale(&source, dset, "written through the VOL connector").map_err(layout_err)
    })
}
