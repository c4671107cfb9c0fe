//! The C ABI of the prefetch engine (`include/patio_prefetch.h`, built as
//! `libpatio_prefetch.so`): a file opened with a prediction policy is read through the
//! process's one engine ([`crate::process`]), for front ends written in C — the MPI-IO
//! layer prefetches the next period of a rank's independent reads with it. The file is
//! read as it is (no modelled cost). Nothing unwinds into C: every entry point catches
//! panics and reports them as errors.

use crate::backend::{DataFile, SlowStore, StoreConfig};
use crate::engine::{Stats, StreamReader};
use crate::policy::PolicyKind;
use crate::process::{self, Lease};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Mutex;

/// The ABI version of `patio_prefetch.h`.
pub const ABI_VERSION: u32 = 1;

/// One open file: its stream and the lease that keeps the engine's workers alive.
pub struct PatioPrefetchFile {
    reader: Mutex<Option<StreamReader>>,
    last: Mutex<Stats>,
    _lease: Lease,
}

/// `PatioPrefetchStats` of the header.
#[repr(C)]
#[derive(Default)]
pub struct PatioPrefetchStats {
    pub requests: u64,
    pub hits: u64,
    pub read_bytes: u64,
    pub cache_bytes: u64,
    pub prefetched_bytes: u64,
    pub wasted_bytes: u64,
    pub backend_requests: u64,
}

impl From<&Stats> for PatioPrefetchStats {
    fn from(s: &Stats) -> Self {
        PatioPrefetchStats {
            requests: s.requests,
            hits: s.hits,
            read_bytes: s.read_bytes,
            cache_bytes: s.cache_bytes,
            prefetched_bytes: s.prefetched_bytes,
            wasted_bytes: s.wasted_bytes,
            backend_requests: s.backend_requests,
        }
    }
}

/// Copies `text` into the caller's message buffer, truncated, NUL-terminated.
fn put_message(text: &str, message: *mut c_char, len: usize) {
    if message.is_null() || len == 0 {
        return;
    }
    let n = text.len().min(len - 1);
    // SAFETY: the caller gave `len` writable bytes at `message`.
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), message.cast::<u8>(), n);
        *message.add(n) = 0;
    }
}

/// Runs `f`, turning an error or a panic into -1 and a message.
fn guarded(message: *mut c_char, len: usize, f: impl FnOnce() -> Result<(), String>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(text)) => {
            put_message(&text, message, len);
            -1
        }
        Err(_) => {
            put_message("internal error in libpatio_prefetch", message, len);
            -1
        }
    }
}

fn text_arg<'a>(p: *const c_char, what: &str) -> Result<&'a str, String> {
    if p.is_null() {
        return Err(format!("{what} is NULL"));
    }
    // SAFETY: the caller passes a NUL-terminated string.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| format!("{what} is not UTF-8"))
}

/// A new policy of the kind the C string names (no model).
fn policy_arg(policy: *const c_char) -> Result<Box<dyn crate::policy::Policy>, String> {
    let kind: PolicyKind = text_arg(policy, "policy")?
        .parse()
        .map_err(|e: crate::error::PrefetchError| e.to_string())?;
    kind.build(&[], None).map_err(|e| e.to_string())
}

#[no_mangle]
pub extern "C" fn patio_prefetch_abi_version() -> u32 {
    ABI_VERSION
}

/// # Safety
/// `path` and `policy` are NUL-terminated strings, `out` a writable pointer, `message`
/// `message_len` writable bytes (or NULL).
#[no_mangle]
pub unsafe extern "C" fn patio_prefetch_open(
    path: *const c_char,
    policy: *const c_char,
    budget_bytes: u64,
    out: *mut *mut PatioPrefetchFile,
    message: *mut c_char,
    message_len: usize,
) -> c_int {
    guarded(message, message_len, || {
        if out.is_null() {
            return Err("out is NULL".into());
        }
        let path = PathBuf::from(text_arg(path, "path")?);
        let policy = policy_arg(policy).map_err(|e| format!("{}: {e}", path.display()))?;
        let store = SlowStore::new(StoreConfig::with(0.0, 0.0));
        let data = DataFile::open(&path, store).map_err(|e| format!("{}: {e}", path.display()))?;
        let lease = process::acquire((budget_bytes > 0).then_some(budget_bytes))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let file = lease.engine().add_file(data);
        let reader = lease.engine().stream(&file, policy);
        let handle = Box::new(PatioPrefetchFile {
            reader: Mutex::new(Some(reader)),
            last: Mutex::new(Stats::default()),
            _lease: lease,
        });
        // SAFETY: checked non-null above.
        unsafe { *out = Box::into_raw(handle) };
        Ok(())
    })
}

/// # Safety
/// `file` comes from `patio_prefetch_open` and is not closed; `buf` has `len` writable
/// bytes; `got` is writable; `message` as in `patio_prefetch_open`.
#[no_mangle]
pub unsafe extern "C" fn patio_prefetch_read(
    file: *mut PatioPrefetchFile,
    offset: u64,
    buf: *mut c_void,
    len: u64,
    got: *mut u64,
    message: *mut c_char,
    message_len: usize,
) -> c_int {
    guarded(message, message_len, || {
        // SAFETY: the caller's contract.
        let file = unsafe { file.as_ref() }.ok_or("file is NULL")?;
        if got.is_null() || (buf.is_null() && len > 0) {
            return Err("buf or got is NULL".into());
        }
        let len = usize::try_from(len).map_err(|_| "length too large")?;
        let out: &mut [u8] = if len == 0 {
            &mut []
        } else {
            // SAFETY: the caller gave `len` writable bytes at `buf`.
            unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) }
        };
        let mut reader = file.reader.lock().unwrap_or_else(|e| e.into_inner());
        let reader = reader.as_mut().ok_or("the file is closed")?;
        let n = reader
            .read_at(offset, out)
            .map_err(|e| format!("read of {len} bytes at offset {offset}: {e}"))?;
        // SAFETY: checked non-null above.
        unsafe { *got = n as u64 };
        Ok(())
    })
}

/// # Safety
/// `file` comes from `patio_prefetch_open` and is not closed; `stats` is writable.
#[no_mangle]
pub unsafe extern "C" fn patio_prefetch_stats(
    file: *const PatioPrefetchFile,
    stats: *mut PatioPrefetchStats,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller's contract.
        let (Some(file), Some(stats)) = (unsafe { file.as_ref() }, unsafe { stats.as_mut() })
        else {
            return;
        };
        let reader = file.reader.lock().unwrap_or_else(|e| e.into_inner());
        *stats = match reader.as_ref() {
            Some(r) => (&r.stats()).into(),
            None => (&*file.last.lock().unwrap_or_else(|e| e.into_inner())).into(),
        };
    }));
}

/// # Safety
/// `file` comes from `patio_prefetch_open` (or is NULL) and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn patio_prefetch_close(file: *mut PatioPrefetchFile) {
    if file.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller's contract: from Box::into_raw, closed once.
        let file = unsafe { Box::from_raw(file) };
        let reader = file.reader.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(reader) = reader {
            if file._lease.inherited() {
                // The engine's threads and locks belong to the fork parent.
                std::mem::forget(reader);
            } else {
                reader.close();
            }
        }
    }));
}

/// A prediction policy alone, for a front end that reads ahead itself (the MPI-IO
/// layer batches a served file's predicted next reads with the current one).
pub struct PatioPolicy {
    policy: Mutex<Box<dyn crate::policy::Policy>>,
}

/// # Safety
/// `policy` is a NUL-terminated string, `out` writable, `message` as in
/// `patio_prefetch_open`.
#[no_mangle]
pub unsafe extern "C" fn patio_policy_new(
    policy: *const c_char,
    out: *mut *mut PatioPolicy,
    message: *mut c_char,
    message_len: usize,
) -> c_int {
    guarded(message, message_len, || {
        if out.is_null() {
            return Err("out is NULL".into());
        }
        let policy = policy_arg(policy)?;
        // SAFETY: checked non-null above.
        unsafe {
            *out = Box::into_raw(Box::new(PatioPolicy {
                policy: Mutex::new(policy),
            }))
        };
        Ok(())
    })
}

/// Tells the policy about a read of `len` bytes at `offset` and writes up to `cap`
/// predicted next reads with a confidence of at least `min_confidence`, nearest
/// first, as (offset, length) pairs into `hints`; returns how many (0 on error).
///
/// # Safety
/// `policy` comes from `patio_policy_new`; `hints` has room for `2 * cap` values.
#[no_mangle]
pub unsafe extern "C" fn patio_policy_observe(
    policy: *mut PatioPolicy,
    offset: u64,
    len: u64,
    depth: u32,
    min_confidence: f32,
    hints: *mut u64,
    cap: usize,
) -> usize {
    catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: the caller's contract.
        let Some(p) = (unsafe { policy.as_ref() }) else {
            return 0;
        };
        let mut guard = p.policy.lock().unwrap_or_else(|e| e.into_inner());
        let got = guard.observe(offset, len, depth.max(1) as usize);
        let mut n = 0;
        for h in got
            .iter()
            .filter(|h| h.confidence >= min_confidence && h.len > 0)
        {
            if n == cap || hints.is_null() {
                break;
            }
            // SAFETY: room for 2 * cap values.
            unsafe {
                *hints.add(2 * n) = h.offset;
                *hints.add(2 * n + 1) = h.len;
            }
            n += 1;
        }
        n
    }))
    .unwrap_or(0)
}

/// # Safety
/// `policy` comes from `patio_policy_new` (or is NULL) and is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn patio_policy_free(policy: *mut PatioPolicy) {
    if !policy.is_null() {
        // SAFETY: from Box::into_raw, freed once.
        let _ = catch_unwind(AssertUnwindSafe(|| drop(unsafe { Box::from_raw(policy) })));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    fn open(path: &std::path::Path, policy: &str) -> Result<*mut PatioPrefetchFile, String> {
        let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        let c_policy = std::ffi::CString::new(policy).unwrap();
        let mut out = std::ptr::null_mut();
        let mut msg = [0 as c_char; 256];
        // SAFETY: valid strings and buffers.
        let rc = unsafe {
            patio_prefetch_open(
                c_path.as_ptr(),
                c_policy.as_ptr(),
                0,
                &mut out,
                msg.as_mut_ptr(),
                256,
            )
        };
        if rc == 0 {
            Ok(out)
        } else {
            // SAFETY: NUL-terminated by put_message.
            Err(unsafe { CStr::from_ptr(msg.as_ptr()) }
                .to_string_lossy()
                .into_owned())
        }
    }

    fn read(file: *mut PatioPrefetchFile, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; len];
        let mut got = 0u64;
        // SAFETY: valid handle and buffers.
        let rc = unsafe {
            patio_prefetch_read(
                file,
                offset,
                buf.as_mut_ptr().cast(),
                len as u64,
                &mut got,
                std::ptr::null_mut(),
                0,
            )
        };
        assert_eq!(rc, 0);
        buf.truncate(got as usize);
        buf
    }

    fn data_file(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(bytes).unwrap();
        f.flush().unwrap();
        f
    }

    #[test]
    fn a_strided_stream_is_prefetched_and_reads_the_files_bytes() {
        let _serial = crate::process::test_lock();
        let bytes: Vec<u8> = (0..4u32 << 20).map(|i| (i * 7 + i / 4096) as u8).collect();
        let f = data_file(&bytes);
        let h = open(f.path(), "pattern").unwrap();
        for k in 0..200u64 {
            let o = k * 16384;
            assert_eq!(read(h, o, 4096), bytes[o as usize..o as usize + 4096]);
        }
        let mut s = PatioPrefetchStats::default();
        // SAFETY: valid handle.
        unsafe { patio_prefetch_stats(h, &mut s) };
        assert_eq!(s.requests, 200);
        assert!(
            s.prefetched_bytes > 0 && s.cache_bytes > 0,
            "nothing prefetched"
        );
        // SAFETY: closed once.
        unsafe { patio_prefetch_close(h) };
    }

    #[test]
    fn bad_arguments_are_one_message_naming_the_file() {
        let _serial = crate::process::test_lock();
        let f = data_file(b"abc");
        let err = open(f.path(), "psychic").unwrap_err();
        assert!(
            err.contains("unknown policy") && err.contains(f.path().to_str().unwrap()),
            "{err}"
        );
        let err = open(std::path::Path::new("/nonexistent/x.bin"), "none").unwrap_err();
        assert!(err.contains("/nonexistent/x.bin"), "{err}");
    }

    #[test]
    fn a_policy_alone_predicts_the_next_period_of_a_strided_stream() {
        let c_policy = std::ffi::CString::new("pattern").unwrap();
        let mut p = std::ptr::null_mut();
        // SAFETY: valid string and out pointer.
        assert_eq!(
            unsafe { patio_policy_new(c_policy.as_ptr(), &mut p, std::ptr::null_mut(), 0) },
            0
        );
        let mut hints = [0u64; 16];
        let mut n = 0;
        for k in 0..20u64 {
            // SAFETY: valid policy, room for 8 hints.
            n = unsafe { patio_policy_observe(p, k * 1000, 100, 4, 0.5, hints.as_mut_ptr(), 8) };
        }
        assert!(n >= 1, "no prediction after 20 strided reads");
        assert_eq!((hints[0], hints[1]), (20_000, 100));
        // SAFETY: freed once.
        unsafe { patio_policy_free(p) };
        let bad = std::ffi::CString::new("psychic").unwrap();
        let mut msg = [0 as c_char; 128];
        // SAFETY: valid buffers.
        let rc = unsafe { patio_policy_new(bad.as_ptr(), &mut p, msg.as_mut_ptr(), 128) };
        assert_eq!(rc, -1);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        #[test]
        fn any_reads_equal_the_byte_model(
            reads in proptest::collection::vec((0u64..70_000, 0usize..9000), 1..40),
            policy in prop_oneof![Just("none"), Just("readahead"), Just("stride"), Just("pattern")],
        ) {
            let _serial = crate::process::test_lock();
            let bytes: Vec<u8> = (0..65_536u32).map(|i| (i % 251) as u8).collect();
            let f = data_file(&bytes);
            let h = open(f.path(), policy).unwrap();
            for (o, n) in reads {
                let start = (o as usize).min(bytes.len());
                let end = (start + n).min(bytes.len());
                prop_assert_eq!(read(h, o, n), &bytes[start..end]);
            }
            // SAFETY: closed once.
            unsafe { patio_prefetch_close(h) };
        }
    }
}
