//! The container's lifecycle: truncation to zero followed by a compaction leaves no
//! log behind, rewrites keep the container bounded, active writers are left alone,
//! readers opened while compactions publish always see the whole file, and
//! containers written before compaction existed (version-1 meta files) still open
//! and compact.

mod common;
use common::read_all;
use patio_container::compact::{compact, compact_planned, plan, Plan, Thresholds};
use patio_container::{layout, stat, truncate, IndexMode, Writer};
use std::path::Path;

fn data(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(13) ^ seed)
        .collect()
}

/// Files and bytes of the container directory.
fn footprint(dir: &Path) -> (usize, u64) {
    let mut files = 0;
    let mut bytes = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        files += 1;
        bytes += e.unwrap().metadata().unwrap().len();
    }
    (files, bytes)
}

#[test]
fn truncation_to_zero_then_compaction_removes_every_log() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("f");
    for i in 0..3u8 {
        let mut w = Writer::create(&dir, IndexMode::Pattern).unwrap();
        w.write_at(u64::from(i) * 100, &data(i, 5000)).unwrap();
        w.close().unwrap();
    }
    truncate(&dir, 0).unwrap();
    let done = compact(&dir, true).unwrap();
    assert_eq!(done.sources, 3);
    assert_eq!(done.writer, None, "nothing was live");
    assert!(layout::list_writers(&dir).unwrap().is_empty());
    assert_eq!(stat(&dir).unwrap().size, 0);
    assert!(read_all(&dir).is_empty());
    // Only the marker, the truncation log and the lock files remain.
    let (files, _) = footprint(&dir);
    assert!(files <= 4, "{files} files");
}

#[test]
fn two_hundred_rewrites_keep_the_container_bounded() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ckpt");
    layout::create(&dir, IndexMode::Pattern).unwrap();
    let t = Thresholds::default();
    let mut last = Vec::new();
    for round in 0..200u32 {
        // open(…, "wb"): truncate to zero, write the checkpoint, close.
        truncate(&dir, 0).unwrap();
        let mut w = Writer::open(&dir).unwrap();
        last = data(round as u8, 64 << 10);
        for (i, piece) in last.chunks(4096).enumerate() {
            w.write_at(i as u64 * 4096, piece).unwrap();
        }
        w.close().unwrap();
        compact_planned(&dir, true, plan(&dir, &t, true).unwrap()).unwrap();
        let (files, bytes) = footprint(&dir);
        assert!(
            files <= 6 + 3 * t.max_logs as usize,
            "round {round}: {files} files"
        );
        assert!(
            bytes <= 2 * (64 << 10) + t.min_dead + (t.max_logs << 12),
            "round {round}: {bytes} bytes"
        );
    }
    assert_eq!(read_all(&dir), last);
    assert_eq!(stat(&dir).unwrap().size, 64 << 10);
}

#[test]
fn plans_leave_large_logs_alone_unless_bytes_are_dead() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("f");
    let t = Thresholds {
        max_logs: 2,
        small_log: 10_000,
        ..Thresholds::default()
    };
    // Two large logs (an N-1 file's per-process logs), three small ones.
    for i in 0..5u64 {
        let mut w = Writer::create(&dir, IndexMode::Pattern).unwrap();
        let len = if i < 2 { 50_000 } else { 100 };
        w.write_at(i * 50_000, &data(i as u8, len)).unwrap();
        w.close().unwrap();
    }
    let before = read_all(&dir);
    assert_eq!(plan(&dir, &t, false).unwrap(), Plan::SmallLogs(10_000));
    let done = compact_planned(&dir, true, plan(&dir, &t, false).unwrap()).unwrap();
    assert_eq!(done.sources, 3);
    assert_eq!(layout::list_writers(&dir).unwrap().len(), 3);
    assert_eq!(read_all(&dir), before);
    assert_eq!(plan(&dir, &t, false).unwrap(), Plan::Nothing);
    // Cut to nothing: the dead bytes call for everything.
    truncate(&dir, 0).unwrap();
    assert_eq!(plan(&dir, &t, false).unwrap(), Plan::All);
    compact_planned(&dir, true, Plan::All).unwrap();
    assert!(layout::list_writers(&dir).unwrap().is_empty());
    assert_eq!(plan(&dir, &t, true).unwrap(), Plan::Nothing);
}

#[test]
fn active_writers_are_left_alone_and_keep_their_order() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("f");
    let mut old = Writer::create(&dir, IndexMode::Raw).unwrap();
    old.write_at(0, &[1u8; 1000]).unwrap();
    old.flush().unwrap();
    // An active writer overwrites the middle after the first flush...
    let mut active = Writer::open(&dir).unwrap();
    active.write_at(400, &[2u8; 200]).unwrap();
    active.flush().unwrap();
    // ...and an ended one overwrites the start later still.
    old.write_at(0, &[3u8; 100]).unwrap();
    old.close().unwrap();
    let before = read_all(&dir);
    let mut again = Writer::open(&dir).unwrap();
    again.write_at(2000, &[4u8; 10]).unwrap();
    again.close().unwrap();
    let expect = {
        let mut v = before.clone();
        v.resize(2010, 0);
        v[2000..].fill(4);
        v
    };
    let done = compact(&dir, true).unwrap();
    assert_eq!((done.sources, done.active), (2, 1));
    assert_eq!(read_all(&dir), expect);
    assert_eq!(&expect[400..600], &[2u8; 200][..]);
    assert_eq!(&expect[..100], &[3u8; 100][..]);
    // The active writer goes on; its later write wins over everything.
    active.write_at(0, &[5u8; 50]).unwrap();
    active.close().unwrap();
    let mut want = expect;
    want[..50].fill(5);
    assert_eq!(read_all(&dir), want);
    compact(&dir, true).unwrap();
    assert_eq!(read_all(&dir), want);
    assert_eq!(layout::list_writers(&dir).unwrap().len(), 1);
}

#[test]
fn readers_opened_during_compactions_see_the_whole_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("f");
    layout::create(&dir, IndexMode::Pattern).unwrap();
    let mut model = vec![0u8; 0];
    for i in 0..40u64 {
        let mut w = Writer::open(&dir).unwrap();
        let d = data(i as u8, 3000);
        let at = (i * 1777) % 20_000;
        w.write_at(at, &d).unwrap();
        w.close().unwrap();
        let end = at as usize + d.len();
        if model.len() < end {
            model.resize(end, 0);
        }
        model[at as usize..end].copy_from_slice(&d);
    }
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..30u64 {
                // New ended writers keep appearing, so every round has work to do.
                let mut w = Writer::open(&dir).unwrap();
                w.write_at(0, &model[..100 + i as usize]).unwrap();
                w.close().unwrap();
                compact(&dir, true).unwrap();
            }
            stop.store(true, std::sync::atomic::Ordering::Release);
        });
        let mut reads = 0;
        while !stop.load(std::sync::atomic::Ordering::Acquire) || reads < 5 {
            assert!(read_all(&dir) == model, "a reader saw a half state");
            reads += 1;
        }
    });
}

#[test]
fn version_one_meta_files_still_open_and_compact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("f");
    let mut w = Writer::create(&dir, IndexMode::Pattern).unwrap();
    w.write_at(0, &data(7, 4096)).unwrap();
    let name = w.name().to_string();
    w.close().unwrap();
    // Rewrite the meta file as a version-1 build wrote it: five fields.
    let meta = layout::WriterMeta::read(&layout::meta_path(&dir, &name)).unwrap();
    let mut p = Vec::new();
    for v in [
        meta.first_key,
        meta.last_key,
        meta.end,
        meta.writes,
        meta.bytes,
    ] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    let blob = patio_core::codec::write_blob(b"PMET", 1, &p);
    std::fs::write(layout::meta_path(&dir, &name), blob).unwrap();
    let back = layout::WriterMeta::read(&layout::meta_path(&dir, &name)).unwrap();
    assert_eq!(back.clipped, 0);
    assert_eq!(back.end, 4096);
    let q = stat(&dir).unwrap();
    assert!(q.from_meta);
    assert_eq!(q.size, 4096);
    truncate(&dir, 1000).unwrap();
    let mut w2 = Writer::open(&dir).unwrap();
    w2.write_at(5000, b"tail").unwrap();
    w2.close().unwrap();
    let before = read_all(&dir);
    assert_eq!(before.len(), 5004);
    compact(&dir, true).unwrap();
    assert_eq!(read_all(&dir), before);
    assert_eq!(stat(&dir).unwrap().size, 5004);
}
