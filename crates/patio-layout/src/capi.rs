//! The layout core's C ABI (header `include/patio_layout.h`), for the HDF5 VOL
//! connector and the MPI-IO layer: layouts, hyperslab selections flattened and priced,
//! and a decider choosing among the original and its replicas of every kind (full,
//! transposed, concatenated products, concatenated points); a chosen plan's pieces are
//! in [`crate::capi_plan`].
//!
//! Every function returns a status (`PATIO_OK` = 0, or a negative `PATIO_E*` code) and
//! never unwinds into C: a null pointer, a wrong rank, a selection outside the array or
//! an inconsistent chunk index is a code, with the message available from
//! `patio_layout_last_error()` (per thread, valid until the next failing call).

use crate::decide::{Decider, Holds, Plan, Replica};
use crate::error::LayoutError;
use crate::flatten::flatten;
use crate::layout::Layout;
use crate::price::{price_selection, Constants};
use crate::selection::{Axis, Grid, Selection};
use patio_storage::Striping;
use std::cell::RefCell;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

pub const PATIO_OK: i32 = 0;
/// A required pointer was null.
pub const PATIO_ENULL: i32 = -1;
/// An argument is invalid (rank, bounds, chunk index, unknown preset).
pub const PATIO_EINVAL: i32 = -2;
/// The output buffer is too small; the needed count was stored.
pub const PATIO_ERANGE: i32 = -3;
/// An internal error (a bug): reported, never a crash.
pub const PATIO_EINTERNAL: i32 = -4;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

pub(crate) fn fail(code: i32, msg: impl Into<String>) -> i32 {
    let msg = msg.into().replace('\0', " ");
    LAST_ERROR.with(|e| *e.borrow_mut() = CString::new(msg).unwrap_or_default());
    code
}

pub(crate) fn layout_err(e: LayoutError) -> i32 {
    fail(PATIO_EINVAL, e.to_string())
}

/// Runs `f`: `PATIO_OK`, the code of its failure, or `PATIO_EINTERNAL` for a panic.
pub(crate) fn guarded(f: impl FnOnce() -> Result<(), i32>) -> i32 {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => PATIO_OK,
        Ok(Err(code)) => code,
        Err(_) => fail(PATIO_EINTERNAL, "internal error"),
    }
}

/// A slice from a C pointer and length (`len == 0` allows null).
pub(crate) unsafe fn slice<'a, T>(p: *const T, len: usize, what: &str) -> Result<&'a [T], i32> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(fail(PATIO_ENULL, format!("{what} is null")));
    }
    Ok(std::slice::from_raw_parts(p, len))
}

/// Opaque layout handle.
pub struct PatioLayout(pub(crate) Layout);
/// Opaque decider handle: the decider and its generation (a new one whenever its
/// replicas change), which the plans it makes carry.
pub struct PatioDecider {
    pub(crate) d: Decider,
    pub(crate) gen: u64,
}

static GENERATION: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_generation() -> u64 {
    GENERATION.fetch_add(1, Ordering::Relaxed)
}

/// The message of the calling thread's last failure (never null).
#[no_mangle]
pub extern "C" fn patio_layout_last_error() -> *const c_char {
    LAST_ERROR.with(|e| e.borrow().as_ptr())
}

/// # Safety
/// `shape` points to `rank` values; `out` is writable.
#[no_mangle]
pub unsafe extern "C" fn patio_layout_contiguous(
    rank: u32,
    shape: *const u64,
    itemsize: u64,
    base: u64,
    out: *mut *mut PatioLayout,
) -> i32 {
    guarded(|| {
        if out.is_null() {
            return Err(fail(PATIO_ENULL, "out is null"));
        }
        let shape = slice(shape, rank as usize, "shape")?;
        let l = Layout::contiguous(shape, itemsize, base).map_err(layout_err)?;
        *out = Box::into_raw(Box::new(PatioLayout(l)));
        Ok(())
    })
}

/// # Safety
/// `shape` and `chunk` point to `rank` values, `addresses` (negative = unallocated)
/// and, unless null, `stored` (filtered chunks' stored sizes) to `nchunks`; `out` is
/// writable.
#[no_mangle]
pub unsafe extern "C" fn patio_layout_chunked(
    rank: u32,
    shape: *const u64,
    itemsize: u64,
    chunk: *const u64,
    nchunks: u64,
    addresses: *const i64,
    stored: *const u64,
    out: *mut *mut PatioLayout,
) -> i32 {
    guarded(|| {
        if out.is_null() {
            return Err(fail(PATIO_ENULL, "out is null"));
        }
        let shape = slice(shape, rank as usize, "shape")?;
        let chunk = slice(chunk, rank as usize, "chunk")?;
        let addresses = slice(addresses, nchunks as usize, "addresses")?;
        let stored = if stored.is_null() {
            None
        } else {
            Some(slice(stored, nchunks as usize, "stored")?)
        };
        let l = Layout::chunked(shape, itemsize, chunk, addresses, stored).map_err(layout_err)?;
        *out = Box::into_raw(Box::new(PatioLayout(l)));
        Ok(())
    })
}

/// Sets the reader's chunk cache of `layout` (bytes): unfiltered chunks no larger are
/// read whole, as HDF5 reads them (the default is HDF5's 1 MiB).
///
/// # Safety
/// `layout` is a handle from `patio_layout_contiguous/_chunked`.
#[no_mangle]
pub unsafe extern "C" fn patio_layout_set_chunk_cache(layout: *mut PatioLayout, bytes: u64) -> i32 {
    guarded(|| {
        handle_mut(layout, "layout")?.0.chunk_cache = bytes;
        Ok(())
    })
}

/// # Safety
/// `layout` is null or a handle from `patio_layout_contiguous/_chunked`, freed once.
#[no_mangle]
pub unsafe extern "C" fn patio_layout_free(layout: *mut PatioLayout) {
    if !layout.is_null() {
        drop(Box::from_raw(layout));
    }
}

/// Hyperslabs `slabs` (`nslabs` x (start, stride, count, block), each `rank` values).
pub(crate) unsafe fn hyperslabs(
    rank: u32,
    nslabs: u64,
    slabs: *const u64,
) -> Result<Selection, i32> {
    let per = 4 * rank as usize;
    let n = (nslabs as usize)
        .checked_mul(per)
        .ok_or_else(|| fail(PATIO_EINVAL, "too many hyperslabs"))?;
    let v = slice(slabs, n, "slabs")?;
    if rank == 0 {
        return Err(fail(PATIO_EINVAL, "rank 0 has no hyperslabs"));
    }
    let r = rank as usize;
    let grids = v
        .chunks(per)
        .map(|s| Grid::hyperslab(&s[..r], &s[r..2 * r], &s[2 * r..3 * r], &s[3 * r..]))
        .collect::<Result<Vec<_>, _>>()
        .map_err(layout_err)?;
    Ok(Selection::Grids(grids))
}

pub(crate) unsafe fn handle<'a, T>(p: *const T, what: &str) -> Result<&'a T, i32> {
    p.as_ref()
        .ok_or_else(|| fail(PATIO_ENULL, format!("{what} is null")))
}

pub(crate) unsafe fn handle_mut<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, i32> {
    p.as_mut()
        .ok_or_else(|| fail(PATIO_ENULL, format!("{what} is null")))
}

/// The byte extents of the hyperslabs under `layout`, in buffer order, consecutive
/// ones merged: up to `cap` written to `offsets`/`lengths`, the count to `n`
/// (`PATIO_ERANGE` when `cap` is too small: `n` is the count needed).
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_layout_flatten(
    layout: *const PatioLayout,
    rank: u32,
    nslabs: u64,
    slabs: *const u64,
    offsets: *mut u64,
    lengths: *mut u64,
    cap: u64,
    n: *mut u64,
) -> i32 {
    guarded(|| {
        let l = handle(layout, "layout")?;
        let out_n = n.as_mut().ok_or_else(|| fail(PATIO_ENULL, "n is null"))?;
        let sel = hyperslabs(rank, nslabs, slabs)?;
        let f = flatten(&l.0, &sel).map_err(layout_err)?;
        *out_n = f.extents.len() as u64;
        if f.extents.len() as u64 > cap {
            return Err(fail(
                PATIO_ERANGE,
                format!("{} extents, room for {cap}", f.extents.len()),
            ));
        }
        if !f.extents.is_empty() && (offsets.is_null() || lengths.is_null()) {
            return Err(fail(PATIO_ENULL, "offsets or lengths is null"));
        }
        for (i, &(o, len)) in f.extents.iter().enumerate() {
            *offsets.add(i) = o;
            *lengths.add(i) = len;
        }
        Ok(())
    })
}

unsafe fn model_of(preset: *const c_char) -> Result<Striping, i32> {
    if preset.is_null() {
        return Err(fail(PATIO_ENULL, "store preset is null"));
    }
    let name = CStr::from_ptr(preset)
        .to_str()
        .map_err(|_| fail(PATIO_EINVAL, "store preset is not UTF-8"))?;
    Striping::by_name(name).map_err(|e| fail(PATIO_EINVAL, e.to_string()))
}

unsafe fn consts_of(c: *const f64) -> Result<Constants, i32> {
    let c = slice(c, 4, "consts")?;
    if c.iter().any(|v| !v.is_finite() || *v < 0.0) {
        return Err(fail(
            PATIO_EINVAL,
            "constants must be finite and non-negative",
        ));
    }
    Ok(Constants {
        t_pg: c[0],
        t_chk: c[1],
        t_lat: c[2],
        t_dec: c[3],
    })
}

/// eq 3.1's modelled seconds of reading the hyperslabs from `layout` on the storage
/// model `preset` (`"lustre"`, `"hdd"`, `"ssd"`) with `consts` = {T_pg, T_chk, T_lat,
/// T_dec}.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_layout_price(
    layout: *const PatioLayout,
    preset: *const c_char,
    consts: *const f64,
    rank: u32,
    nslabs: u64,
    slabs: *const u64,
    seconds: *mut f64,
) -> i32 {
    guarded(|| {
        let l = handle(layout, "layout")?;
        let out = seconds
            .as_mut()
            .ok_or_else(|| fail(PATIO_ENULL, "seconds is null"))?;
        let model = model_of(preset)?;
        let c = consts_of(consts)?;
        let sel = hyperslabs(rank, nslabs, slabs)?;
        *out = price_selection(&model, &c, &l.0, &sel).map_err(layout_err)?;
        Ok(())
    })
}

/// A decider for `original` (copied) with the full replicas `full` (`nfull` layouts,
/// same shape, any chunking) and none transposed; add transposed ones with
/// `patio_decider_add_transposed`.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_decider_new(
    original: *const PatioLayout,
    full: *const *const PatioLayout,
    nfull: u64,
    preset: *const c_char,
    consts: *const f64,
    out: *mut *mut PatioDecider,
) -> i32 {
    guarded(|| {
        let o = handle(original, "original")?;
        if out.is_null() {
            return Err(fail(PATIO_ENULL, "out is null"));
        }
        let mut reps = Vec::new();
        for (i, &p) in slice(full, nfull as usize, "full")?.iter().enumerate() {
            let l = handle(p, &format!("full[{i}]"))?;
            reps.push(Replica {
                layout: l.0.clone(),
                holds: Holds::Everything,
            });
        }
        let d = Decider::new(o.0.clone(), reps, model_of(preset)?, consts_of(consts)?)
            .map_err(layout_err)?;
        *out = Box::into_raw(Box::new(PatioDecider {
            d,
            gen: next_generation(),
        }));
        Ok(())
    })
}

/// Adds a replica holding `np.transpose(original, perm)` stored in `layout`; its index
/// in choices is the number of replicas added before it.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_decider_add_transposed(
    decider: *mut PatioDecider,
    layout: *const PatioLayout,
    rank: u32,
    perm: *const u32,
) -> i32 {
    guarded(|| {
        let d = handle_mut(decider, "decider")?;
        let l = handle(layout, "layout")?;
        let perm = perm_of(rank, perm)?;
        add(
            d,
            Replica {
                layout: l.0.clone(),
                holds: Holds::Transposed { perm },
            },
        )
    })
}

fn add(d: &mut PatioDecider, r: Replica) -> Result<(), i32> {
    d.d.add_replica(r).map_err(layout_err)?;
    d.gen = next_generation();
    Ok(())
}

unsafe fn perm_of(rank: u32, perm: *const u32) -> Result<Vec<usize>, i32> {
    Ok(slice(perm, rank as usize, "perm")?
        .iter()
        .map(|&a| a as usize)
        .collect())
}

/// Adds a concatenated replica holding the product of per-axis sorted index sets
/// (`lens[rank]` indices each, concatenated in `sets`), stored with axes `perm[rank]`
/// (its axis `i` is the original's `perm[i]`) in `layout`.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_decider_add_product(
    decider: *mut PatioDecider,
    layout: *const PatioLayout,
    rank: u32,
    lens: *const u64,
    sets: *const u64,
    perm: *const u32,
) -> i32 {
    guarded(|| {
        let d = handle_mut(decider, "decider")?;
        let l = handle(layout, "layout")?;
        let lens = slice(lens, rank as usize, "lens")?;
        let total = lens
            .iter()
            .try_fold(0usize, |a, &n| a.checked_add(usize::try_from(n).ok()?))
            .ok_or_else(|| fail(PATIO_EINVAL, "index sets too large"))?;
        let all = slice(sets, total, "sets")?;
        let mut axes = Vec::with_capacity(lens.len());
        let mut at = 0;
        for &n in lens {
            let n = n as usize;
            axes.push(Axis::from_sorted_indices(&all[at..at + n]).map_err(layout_err)?);
            at += n;
        }
        let perm = perm_of(rank, perm)?;
        add(
            d,
            Replica {
                layout: l.0.clone(),
                holds: Holds::Product { sets: axes, perm },
            },
        )
    })
}

/// Adds a concatenated replica holding the elements at the sorted row-major linear
/// indices `linear[npoints]`, as a 1-D array stored in `layout`.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_decider_add_points(
    decider: *mut PatioDecider,
    layout: *const PatioLayout,
    npoints: u64,
    linear: *const u64,
) -> i32 {
    guarded(|| {
        let d = handle_mut(decider, "decider")?;
        let l = handle(layout, "layout")?;
        let n = usize::try_from(npoints).map_err(|_| fail(PATIO_EINVAL, "too many points"))?;
        let linear = slice(linear, n, "linear")?.to_vec();
        add(
            d,
            Replica {
                layout: l.0.clone(),
                holds: Holds::Points { linear },
            },
        )
    })
}

/// Frees a decider.
///
/// # Safety
/// `decider` is null or a handle from `patio_decider_new`, freed once.
#[no_mangle]
pub unsafe extern "C" fn patio_decider_free(decider: *mut PatioDecider) {
    if !decider.is_null() {
        drop(Box::from_raw(decider));
    }
}

/// Chooses how to read the hyperslabs: `replica` = the index of the replica read whole
/// (a full or transposed one; full replicas first, then the others in the order added),
/// -1 for any other plan (`patio_decider_plan` carries those out);
/// `seconds` its modelled time and `saved` the modelled saving over the original.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_decider_choose(
    decider: *mut PatioDecider,
    rank: u32,
    nslabs: u64,
    slabs: *const u64,
    replica: *mut i64,
    seconds: *mut f64,
    saved: *mut f64,
) -> i32 {
    guarded(|| {
        let d = handle_mut(decider, "decider")?;
        if replica.is_null() || seconds.is_null() || saved.is_null() {
            return Err(fail(PATIO_ENULL, "an output pointer is null"));
        }
        let sel = hyperslabs(rank, nslabs, slabs)?;
        let (c, s) = d.d.choose(&sel).map_err(layout_err)?;
        *replica = match c.plan {
            Plan::Whole(i) => i as i64,
            _ => -1,
        };
        *seconds = c.seconds;
        *saved = s;
        Ok(())
    })
}
