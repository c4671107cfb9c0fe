//! The C ABI of reorganized files (`include/patio_reorg.h`, `libpatio_reorg.so`): a
//! front end that reads a file on a program's behalf (the MPI-IO layer) opens it here
//! and, when a current registration exists ([`crate::registry::resolve`]), reads its
//! extents from the container through the remap in the fewest physical reads. No
//! panic crosses the boundary (each entry point catches it), no pointer is kept, and
//! a handle may be read from several threads at once (its counters are atomics).

use crate::registry::{resolve, Resolved};
use patio_container::Reader;
use patio_core::FileVersion;
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

pub const PATIO_REORG_ABI_VERSION: u32 = 2;
pub const PATIO_REORG_SERVED: c_int = 0;
pub const PATIO_REORG_NOT_REGISTERED: c_int = 1;
pub const PATIO_REORG_BYPASSED: c_int = 2;
pub const PATIO_REORG_ERROR: c_int = -1;

/// An open reorganized file.
pub struct PatioReorgFile {
    reader: Reader,
    source: PathBuf,
    version: FileVersion,
    container: CString,
    calls: AtomicU64,
    bytes: AtomicU64,
    physical_reads: AtomicU64,
}

/// What a handle served so far (`PatioReorgStats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PatioReorgStats {
    pub calls: u64,
    pub bytes: u64,
    pub physical_reads: u64,
}

/// Copies `text` into the caller's buffer, NUL-terminated, truncated to `len` (at a
/// character boundary).
unsafe fn put_message(message: *mut c_char, len: usize, text: &str) {
    if message.is_null() || len == 0 {
        return;
    }
    let mut n = text.len().min(len - 1);
    while !text.is_char_boundary(n) {
        n -= 1;
    }
    // SAFETY: the caller gives `len` writable bytes at `message`; n + 1 <= len.
    std::ptr::copy_nonoverlapping(text.as_ptr(), message.cast::<u8>(), n);
    *message.add(n) = 0;
}

/// Runs `f`, turning a panic into `on_panic` (and a message when there is a buffer).
fn guarded<T>(
    message: *mut c_char,
    len: usize,
    on_panic: T,
    f: impl FnOnce() -> Result<T, (T, String)>,
) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => v,
        Ok(Err((v, text))) => {
            // SAFETY: as promised by the caller of the entry point.
            unsafe { put_message(message, len, &text) };
            v
        }
        Err(_) => {
            // SAFETY: as above.
            unsafe { put_message(message, len, "patio_reorg: internal error (panic)") };
            on_panic
        }
    }
}

#[no_mangle]
pub extern "C" fn patio_reorg_abi_version() -> u32 {
    PATIO_REORG_ABI_VERSION
}

/// # Safety
/// `source` is a NUL-terminated path, `out` a writable pointer, `message` null or
/// `message_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn patio_reorg_open(
    source: *const c_char,
    out: *mut *mut PatioReorgFile,
    message: *mut c_char,
    message_len: usize,
) -> c_int {
    guarded(message, message_len, PATIO_REORG_ERROR, || {
        let err = |t: String| (PATIO_REORG_ERROR, t);
        if source.is_null() || out.is_null() {
            return Err(err("patio_reorg_open: null source or out".into()));
        }
        // SAFETY: checked non-null; NUL-terminated by contract.
        let bytes = unsafe { CStr::from_ptr(source) }.to_bytes();
        let path = PathBuf::from(std::ffi::OsStr::from_bytes(bytes));
        match resolve(&path).map_err(|e| err(e.to_string()))? {
            Resolved::NotRegistered => Ok(PATIO_REORG_NOT_REGISTERED),
            Resolved::Bypassed { reason, .. } => Err((PATIO_REORG_BYPASSED, reason)),
            Resolved::Served {
                registration,
                reader,
            } => {
                let container = CString::new(registration.container.as_os_str().as_bytes())
                    .map_err(|_| err("container path holds a NUL".into()))?;
                let file = Box::new(PatioReorgFile {
                    reader: *reader,
                    source: path,
                    version: registration.version,
                    container,
                    calls: AtomicU64::new(0),
                    bytes: AtomicU64::new(0),
                    physical_reads: AtomicU64::new(0),
                });
                // SAFETY: checked non-null.
                unsafe { *out = Box::into_raw(file) };
                Ok(PATIO_REORG_SERVED)
            }
        }
    })
}

/// # Safety
/// `file` is null or a handle from [`patio_reorg_open`] not yet closed.
#[no_mangle]
pub unsafe extern "C" fn patio_reorg_size(file: *const PatioReorgFile) -> u64 {
    // SAFETY: by contract.
    guarded(std::ptr::null_mut(), 0, 0, || {
        Ok(unsafe { file.as_ref() }.map_or(0, |f| f.reader.size()))
    })
}

/// # Safety
/// As [`patio_reorg_size`]; the result lives until the handle is closed.
#[no_mangle]
pub unsafe extern "C" fn patio_reorg_container(file: *const PatioReorgFile) -> *const c_char {
    // SAFETY: by contract.
    match unsafe { file.as_ref() } {
        Some(f) => f.container.as_ptr(),
        None => std::ptr::null(),
    }
}

/// The extents `(offset, len)` cut at `size` (an extent past it reads nothing), and
/// their total; `None` when the lengths overflow.
pub(crate) fn cut_at_eof(pairs: &[u64], size: u64) -> Option<(Vec<(u64, u64)>, u64)> {
    let mut extents = Vec::with_capacity(pairs.len() / 2);
    let mut total = 0u64;
    let mut asked = 0u64;
    for p in pairs.chunks_exact(2) {
        let (o, l) = (p[0], p[1]);
        asked = asked.checked_add(l)?;
        let l = if o >= size { 0 } else { l.min(size - o) };
        if l > 0 {
            extents.push((o, l));
            total += l;
        }
    }
    Some((extents, total))
}

/// Where one physical read of a paced read lies (`PatioReorgPlace`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PatioReorgPlace {
    pub chunk: u32,
    pub start: u64,
    pub end: u64,
}

/// The caller's schedule of a paced read (`PatioReorgPacer`): `schedule(ctx, places,
/// n)` once, before any read, with where each physical read lies in the order they
/// are issued; `pace(ctx, i, after)` before (`after` 0) and right after (1) the `i`-th.
/// Either returns 0 to go on, anything else to stop the read.
#[repr(C)]
pub struct PatioReorgPacer {
    pub ctx: *mut c_void,
    pub schedule: Option<
        unsafe extern "C" fn(ctx: *mut c_void, places: *const PatioReorgPlace, n: usize) -> c_int,
    >,
    pub pace: Option<unsafe extern "C" fn(ctx: *mut c_void, i: usize, after: c_int) -> c_int>,
}

/// # Safety
/// `file` a handle from [`patio_reorg_open`] not yet closed; `extents` `2 *
/// n_extents` values; `buf` writable for the sum of the extents' lengths; `bytes`
/// writable; `message` null or `message_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn patio_reorg_read(
    file: *mut PatioReorgFile,
    extents: *const u64,
    n_extents: usize,
    buf: *mut c_void,
    bytes: *mut u64,
    message: *mut c_char,
    message_len: usize,
) -> c_int {
    // SAFETY: the caller's contract is this function's.
    unsafe {
        patio_reorg_read_paced(
            file,
            extents,
            n_extents,
            buf,
            bytes,
            std::ptr::null(),
            message,
            message_len,
        )
    }
}

/// # Safety
/// As [`patio_reorg_read`]; `pacer` null or a pacer whose functions may be called with
/// its `ctx` during the call.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn patio_reorg_read_paced(
    file: *mut PatioReorgFile,
    extents: *const u64,
    n_extents: usize,
    buf: *mut c_void,
    bytes: *mut u64,
    pacer: *const PatioReorgPacer,
    message: *mut c_char,
    message_len: usize,
) -> c_int {
    guarded(message, message_len, -1, || {
        let fail = |t: String| (-1, t);
        // SAFETY: by contract (a live handle or null).
        let f =
            unsafe { file.as_ref() }.ok_or_else(|| fail("patio_reorg_read: null handle".into()))?;
        if bytes.is_null() || (extents.is_null() && n_extents > 0) {
            return Err(fail("patio_reorg_read: null extents or bytes".into()));
        }
        // SAFETY: by contract (a pacer or null).
        let pacer = unsafe { pacer.as_ref() };
        let pairs: &[u64] = if n_extents == 0 {
            &[]
        } else {
            let n = n_extents
                .checked_mul(2)
                .ok_or_else(|| fail("patio_reorg_read: too many extents".into()))?;
            // SAFETY: `extents` holds 2 * n_extents values by contract.
            unsafe { std::slice::from_raw_parts(extents, n) }
        };
        let (cut, total) = cut_at_eof(pairs, f.reader.size()).ok_or_else(|| {
            fail(format!(
                "{}: extents' lengths overflow 64 bits",
                f.source.display()
            ))
        })?;
        let total_usize = usize::try_from(total)
            .map_err(|_| fail(format!("{}: read of {total} bytes", f.source.display())))?;
        let through = |e: patio_container::ContainerError| {
            fail(format!(
                "{} (through {}): {e}",
                f.source.display(),
                f.container.to_string_lossy()
            ))
        };
        let plan = f.reader.plan_extents(&cut).map_err(through)?;
        if let Some(p) = pacer {
            let places: Vec<PatioReorgPlace> = plan
                .places()
                .iter()
                .map(|q| PatioReorgPlace {
                    chunk: q.chunk,
                    start: q.start,
                    end: q.end,
                })
                .collect();
            if let Some(schedule) = p.schedule {
                // SAFETY: the caller's function and context, by contract.
                if unsafe { schedule(p.ctx, places.as_ptr(), places.len()) } != 0 {
                    return Err(fail(format!(
                        "{}: stopped by its schedule",
                        f.source.display()
                    )));
                }
            }
        }
        let reads = if total == 0 {
            0
        } else {
            if buf.is_null() {
                return Err(fail("patio_reorg_read: null buffer".into()));
            }
            // SAFETY: `buf` is writable for at least the uncut total ≥ `total`.
            let out = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), total_usize) };
            f.reader
                .read_plan(&plan, out, |i, after| {
                    match pacer.and_then(|p| p.pace.map(|g| (p.ctx, g))) {
                        // SAFETY: the caller's function and context, by contract.
                        Some((ctx, pace)) if unsafe { pace(ctx, i, c_int::from(after)) } != 0 => {
                            Err(patio_container::ContainerError::Invalid(
                                "stopped by its pace".into(),
                            ))
                        }
                        _ => Ok(()),
                    }
                })
                .map_err(through)?
        };
        f.calls.fetch_add(1, Ordering::Relaxed);
        f.bytes.fetch_add(total, Ordering::Relaxed);
        f.physical_reads.fetch_add(reads, Ordering::Relaxed);
        // SAFETY: checked non-null.
        unsafe { *bytes = total };
        Ok(0)
    })
}

/// # Safety
/// `file` a handle from [`patio_reorg_open`] not yet closed; `message` null or
/// `message_len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn patio_reorg_check(
    file: *const PatioReorgFile,
    message: *mut c_char,
    message_len: usize,
) -> c_int {
    guarded(message, message_len, -1, || {
        // SAFETY: by contract.
        let f = unsafe { file.as_ref() }
            .ok_or_else(|| (-1, "patio_reorg_check: null handle".to_string()))?;
        let s = f.source.display();
        match FileVersion::of(&f.source) {
            Ok(now) => match now.difference(&f.version) {
                None => Ok(0),
                Some(what) => Err((1, format!("{s}: {what}"))),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err((1, format!("{s}: removed"))),
            Err(e) => Err((-1, format!("{s}: {e}"))),
        }
    })
}

/// # Safety
/// `file` null or a live handle; `stats` null or writable.
#[no_mangle]
pub unsafe extern "C" fn patio_reorg_stats(
    file: *const PatioReorgFile,
    stats: *mut PatioReorgStats,
) {
    guarded(std::ptr::null_mut(), 0, (), || {
        // SAFETY: by contract.
        if let (Some(f), Some(out)) = unsafe { (file.as_ref(), stats.as_mut()) } {
            *out = PatioReorgStats {
                calls: f.calls.load(Ordering::Relaxed),
                bytes: f.bytes.load(Ordering::Relaxed),
                physical_reads: f.physical_reads.load(Ordering::Relaxed),
            };
        }
        Ok(())
    })
}

/// # Safety
/// `file` null or a handle from [`patio_reorg_open`], closed once.
#[no_mangle]
pub unsafe extern "C" fn patio_reorg_close(file: *mut PatioReorgFile) {
    guarded(std::ptr::null_mut(), 0, (), || {
        if !file.is_null() {
            // SAFETY: a handle from Box::into_raw, closed once by contract.
            drop(unsafe { Box::from_raw(file) });
        }
        Ok(())
    })
}

#[cfg(test)]
#[path = "capi_tests.rs"]
mod tests;
