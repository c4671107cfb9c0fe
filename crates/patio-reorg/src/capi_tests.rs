//! Tests of the C ABI through its extern functions: results of open, random extents
//! read through a served handle equal the source's bytes (cut at the end of the file
//! as a read of the source would be) — paced too: the same bytes, the pacer called
//! around every physical read, in order — stats, the version check, messages.

use super::*;
use crate::registry::tests::{bytes, reorganized};
use proptest::prelude::*;
use std::path::Path;

fn c_path(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).unwrap()
}

/// `patio_reorg_open`'s result, handle and message.
fn open(p: &Path) -> (c_int, *mut PatioReorgFile, String) {
    let mut out: *mut PatioReorgFile = std::ptr::null_mut();
    let mut msg = [0 as c_char; 512];
    let rc = unsafe { patio_reorg_open(c_path(p).as_ptr(), &mut out, msg.as_mut_ptr(), msg.len()) };
    let text = unsafe { CStr::from_ptr(msg.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    (rc, out, text)
}

/// Reads `pairs` through the handle: `(rc, bytes, message)`.
fn read(f: *mut PatioReorgFile, pairs: &[(u64, u64)]) -> (c_int, Vec<u8>, String) {
    let flat: Vec<u64> = pairs.iter().flat_map(|&(o, l)| [o, l]).collect();
    let cap: u64 = pairs.iter().map(|p| p.1).sum();
    let mut buf = vec![0xEEu8; cap as usize];
    let mut got = u64::MAX;
    let mut msg = [0 as c_char; 256];
    let rc = unsafe {
        patio_reorg_read(
            f,
            flat.as_ptr(),
            pairs.len(),
            buf.as_mut_ptr().cast(),
            &mut got,
            msg.as_mut_ptr(),
            msg.len(),
        )
    };
    if rc == 0 {
        buf.truncate(got as usize);
    }
    let text = unsafe { CStr::from_ptr(msg.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    (rc, buf, text)
}

/// What reading `pairs` from the byte model gives: each extent cut at its end.
fn model(data: &[u8], pairs: &[(u64, u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    for &(o, l) in pairs {
        let a = (o as usize).min(data.len());
        let b = (o.saturating_add(l) as usize).min(data.len());
        out.extend_from_slice(&data[a..b]);
    }
    out
}

fn stats(f: *const PatioReorgFile) -> PatioReorgStats {
    let mut s = PatioReorgStats::default();
    unsafe { patio_reorg_stats(f, &mut s) };
    s
}

#[test]
fn handles_are_shared_between_threads() {
    fn sync_send<T: Send + Sync>() {}
    sync_send::<PatioReorgFile>();
}

#[test]
fn open_reports_each_outcome() {
    let t = tempfile::tempdir().unwrap();
    let plain = t.path().join("plain");
    std::fs::write(&plain, b"abc").unwrap();
    let (rc, out, _) = open(&plain);
    assert_eq!((rc, out.is_null()), (PATIO_REORG_NOT_REGISTERED, true));

    let data = bytes(40_000, 7);
    let c = t.path().join("r.pc");
    let (source, reg) = reorganized(t.path(), "r", &data, &c, 1000);
    let (rc, f, msg) = open(&source);
    assert_eq!(rc, PATIO_REORG_SERVED, "{msg}");
    assert_eq!(unsafe { patio_reorg_size(f) }, data.len() as u64);
    let name = unsafe { CStr::from_ptr(patio_reorg_container(f)) };
    assert_eq!(name.to_bytes(), c.as_os_str().as_bytes());
    assert_eq!(unsafe { patio_reorg_check(f, std::ptr::null_mut(), 0) }, 0);

    // A 4-way strided pattern stored contiguously: one physical read.
    let pairs: Vec<(u64, u64)> = (0..10).map(|i| (i * 4000, 1000)).collect();
    let (rc, got, m) = read(f, &pairs);
    assert_eq!(rc, 0, "{m}");
    assert_eq!(got, model(&data, &pairs));
    assert_eq!(
        stats(f),
        PatioReorgStats {
            calls: 1,
            bytes: 10_000,
            physical_reads: 1
        }
    );

    // The source touched: the open handle says so; a new open is bypassed.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let h = std::fs::File::options().write(true).open(&source).unwrap();
    h.set_modified(std::time::SystemTime::now()).unwrap();
    drop(h);
    let mut msg = [0 as c_char; 128];
    assert_eq!(
        unsafe { patio_reorg_check(f, msg.as_mut_ptr(), msg.len()) },
        1
    );
    let m = unsafe { CStr::from_ptr(msg.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    assert!(m.contains("modification time"), "{m}");
    unsafe { patio_reorg_close(f) };
    let (rc, out, msg) = open(&source);
    assert_eq!((rc, out.is_null()), (PATIO_REORG_BYPASSED, true));
    assert!(
        msg.contains(&*source.to_string_lossy()) && msg.contains("not the version"),
        "{msg}"
    );

    // Registered again, then the container removed, then the registration corrupt.
    let v = FileVersion::of(&source).unwrap();
    crate::registry::register(&source, &c, &v).unwrap();
    assert_eq!(open(&source).0, PATIO_REORG_SERVED);
    let mut raw = std::fs::read(&reg.path).unwrap();
    let last = raw.len() - 1;
    raw[last] ^= 1;
    std::fs::write(&reg.path, &raw).unwrap();
    let (rc, _, msg) = open(&source);
    assert_eq!(rc, PATIO_REORG_BYPASSED);
    assert!(
        msg.contains(".r.patio-reorg") && msg.contains("checksum"),
        "{msg}"
    );
    crate::registry::register(&source, &c, &v).unwrap();
    std::fs::remove_dir_all(&c).unwrap();
    let (rc, _, msg) = open(&source);
    assert_eq!(rc, PATIO_REORG_BYPASSED);
    assert!(msg.contains("r.pc"), "{msg}");
}

#[test]
fn bad_arguments_are_errors_with_a_message_never_a_crash() {
    let mut msg = [0 as c_char; 8];
    let rc = unsafe {
        patio_reorg_open(
            std::ptr::null(),
            std::ptr::null_mut(),
            msg.as_mut_ptr(),
            msg.len(),
        )
    };
    assert_eq!(rc, PATIO_REORG_ERROR);
    // Truncated to the buffer, NUL-terminated.
    let m = unsafe { CStr::from_ptr(msg.as_ptr()) }.to_bytes();
    assert_eq!(m.len(), 7);
    let mut b = 0u64;
    let rc = unsafe {
        patio_reorg_read(
            std::ptr::null_mut(),
            std::ptr::null(),
            0,
            std::ptr::null_mut(),
            &mut b,
            std::ptr::null_mut(),
            0,
        )
    };
    assert_eq!(rc, -1);
    unsafe { patio_reorg_close(std::ptr::null_mut()) };
    assert_eq!(unsafe { patio_reorg_size(std::ptr::null()) }, 0);
    assert_eq!(patio_reorg_abi_version(), 2);
}

#[test]
fn extents_are_cut_at_the_end_of_the_file() {
    let t = tempfile::tempdir().unwrap();
    let data = bytes(10_000, 9);
    let (source, _) = reorganized(t.path(), "e", &data, &t.path().join("e.pc"), 300);
    let (_, f, _) = open(&source);
    for pairs in [
        vec![(9_990, 100)],
        vec![(10_000, 5), (0, 3)],
        vec![(20_000, 7)],
        vec![(5, 0), (u64::MAX - 1, 1)],
        vec![],
    ] {
        let (rc, got, m) = read(f, &pairs);
        assert_eq!(rc, 0, "{m}");
        assert_eq!(got, model(&data, &pairs), "{pairs:?}");
    }
    let (rc, _, m) = read_overflowing(f);
    assert_eq!(rc, -1);
    assert!(m.contains("overflow"), "{m}");
    unsafe { patio_reorg_close(f) };
}

/// Extents whose lengths sum past 64 bits (the buffer is never touched).
fn read_overflowing(f: *mut PatioReorgFile) -> (c_int, u64, String) {
    let flat = [0u64, u64::MAX, 0, 2];
    let mut got = 0u64;
    let mut msg = [0 as c_char; 256];
    let mut one = [0u8; 1];
    let rc = unsafe {
        patio_reorg_read(
            f,
            flat.as_ptr(),
            2,
            one.as_mut_ptr().cast(),
            &mut got,
            msg.as_mut_ptr(),
            msg.len(),
        )
    };
    let text = unsafe { CStr::from_ptr(msg.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    (rc, got, text)
}

/// What a pacer was told: the places, then `(i, after)` per call; it stops at
/// `stop` (a pace call index) when set.
#[derive(Default)]
struct PaceLog {
    places: Vec<PatioReorgPlace>,
    calls: Vec<(usize, c_int)>,
    stop: Option<usize>,
}

unsafe extern "C" fn log_schedule(
    ctx: *mut c_void,
    places: *const PatioReorgPlace,
    n: usize,
) -> c_int {
    let log = unsafe { &mut *ctx.cast::<PaceLog>() };
    if n > 0 {
        log.places = unsafe { std::slice::from_raw_parts(places, n) }.to_vec();
    }
    0
}

unsafe extern "C" fn log_pace(ctx: *mut c_void, i: usize, after: c_int) -> c_int {
    let log = unsafe { &mut *ctx.cast::<PaceLog>() };
    log.calls.push((i, after));
    c_int::from(log.stop == Some(log.calls.len() - 1))
}

/// Reads `pairs` with a logging pacer: `(rc, bytes, log)`.
fn read_paced(
    f: *mut PatioReorgFile,
    pairs: &[(u64, u64)],
    stop: Option<usize>,
) -> (c_int, Vec<u8>, PaceLog) {
    let flat: Vec<u64> = pairs.iter().flat_map(|&(o, l)| [o, l]).collect();
    let mut buf = vec![0xEEu8; pairs.iter().map(|p| p.1 as usize).sum()];
    let mut got = 0u64;
    let mut log = PaceLog {
        stop,
        ..PaceLog::default()
    };
    let pacer = PatioReorgPacer {
        ctx: (&mut log as *mut PaceLog).cast(),
        schedule: Some(log_schedule),
        pace: Some(log_pace),
    };
    let rc = unsafe {
        patio_reorg_read_paced(
            f,
            flat.as_ptr(),
            pairs.len(),
            buf.as_mut_ptr().cast(),
            &mut got,
            &pacer,
            std::ptr::null_mut(),
            0,
        )
    };
    buf.truncate(got as usize);
    (rc, buf, log)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_extents_read_the_source_bytes(
        size in 1usize..60_000,
        piece in 1usize..3000,
        seed in any::<u64>(),
        extents in prop::collection::vec((0u64..70_000, 0u64..9000), 0..24),
    ) {
        let t = tempfile::tempdir().unwrap();
        let data = bytes(size, seed);
        let (source, _) = reorganized(t.path(), "p", &data, &t.path().join("p.pc"), piece);
        let (rc, f, msg) = open(&source);
        prop_assert_eq!(rc, PATIO_REORG_SERVED, "{}", msg);
        let (rc, got, m) = read(f, &extents);
        prop_assert_eq!(rc, 0, "{}", m);
        let want = model(&data, &extents);
        prop_assert_eq!(&got, &want);
        let s = stats(f);
        prop_assert_eq!((s.calls, s.bytes), (1, want.len() as u64));
        prop_assert!(s.physical_reads <= extents.len() as u64 * (1 + 9000 / piece as u64 + 1));
        // Paced: the same bytes, the pacer told of every physical read, in order.
        let (rc, got, log) = read_paced(f, &extents, None);
        prop_assert_eq!(rc, 0);
        prop_assert_eq!(&got, &want);
        let n = (stats(f).physical_reads - s.physical_reads) as usize;
        prop_assert_eq!(log.places.len(), n);
        prop_assert!(log.places.windows(2).all(|w| (w[0].chunk, w[0].start) <= (w[1].chunk, w[1].start)));
        let paced: Vec<(usize, c_int)> = (0..n).flat_map(|i| [(i, 0), (i, 1)]).collect();
        prop_assert_eq!(&log.calls, &paced);
        if n > 0 {
            let (rc, _, log) = read_paced(f, &extents, Some(2 * n - 1));
            prop_assert_eq!(rc, -1);
            prop_assert_eq!(log.calls.len(), 2 * n);
        }
        unsafe { patio_reorg_close(f) };
    }

    #[test]
    fn threads_read_one_handle_at_once(seed in any::<u64>()) {
        let t = tempfile::tempdir().unwrap();
        let data = bytes(80_000, seed);
        let (source, _) = reorganized(t.path(), "m", &data, &t.path().join("m.pc"), 2000);
        let (_, f, _) = open(&source);
        let h = f as usize;
        std::thread::scope(|s| {
            for k in 0..4u64 {
                let data = &data;
                s.spawn(move || {
                    for i in 0..20u64 {
                        let pairs = [((k * 7919 + i * 3001) % 80_000, 1500)];
                        let (rc, got, _) = read(h as *mut PatioReorgFile, &pairs);
                        assert_eq!(rc, 0);
                        assert_eq!(got, model(data, &pairs));
                    }
                });
            }
        });
        prop_assert_eq!(stats(f).calls, 80);
        unsafe { patio_reorg_close(f) };
    }
}
