//! Writers that live on: a writer taking over an ended writer's logs
//! (`Writer::reuse`), a writer writing on after a truncation (`note_truncation`),
//! and compaction of a lone log set that holds overwritten bytes. Each is checked
//! against a byte array holding the file, and `stat` against its size without
//! reading the index.

mod common;
use common::read_all;
use patio_container::compact::compact;
use patio_container::{layout, stat, tools, IndexMode, Reader, Writer};
use proptest::prelude::*;
use std::path::Path;

fn put(model: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if model.len() < end {
        model.resize(end, 0);
    }
    model[offset as usize..end].copy_from_slice(data);
}

/// `stat` gives the model's size from the meta files alone.
fn assert_quick_size(dir: &Path, model: &[u8]) {
    let q = stat(dir).unwrap();
    assert_eq!(q.size, model.len() as u64, "stat size");
    assert!(q.from_meta, "stat had to read the index");
}

#[test]
fn a_reopened_file_appends_to_the_ended_writers_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("log");
    layout::create(&dir, IndexMode::Pattern).unwrap();
    let mut model = Vec::new();
    for i in 0..20u64 {
        let mut w = match Writer::reuse(&dir, 1 << 20).unwrap() {
            Some(w) => w,
            None => Writer::open(&dir).unwrap(),
        };
        let line = format!("line {i:04}\n").into_bytes();
        let end = model.len() as u64;
        w.write_at(end, &line).unwrap();
        put(&mut model, end, &line);
        w.close().unwrap();
    }
    assert_eq!(layout::list_writers(&dir).unwrap().len(), 1, "one log set");
    assert_eq!(read_all(&dir), model);
    assert_quick_size(&dir, &model);
}

#[test]
fn logs_in_use_too_large_or_torn_are_not_taken_over() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("f");
    layout::create(&dir, IndexMode::Pattern).unwrap();
    // A live writer's logs.
    let mut live = Writer::open(&dir).unwrap();
    live.write_at(0, &[1u8; 100]).unwrap();
    live.flush().unwrap();
    assert!(Writer::reuse(&dir, 1 << 20).unwrap().is_none(), "in use");
    // An ended writer's, larger than asked for.
    drop(live);
    assert!(Writer::reuse(&dir, 50).unwrap().is_none(), "too large");
    // Taken over once, the logs are in use again.
    let taken = Writer::reuse(&dir, 1 << 20).unwrap().expect("ended logs");
    assert!(Writer::reuse(&dir, 1 << 20).unwrap().is_none(), "taken");
    let name = taken.name().to_string();
    drop(taken);
    // A torn last record (a writer killed half way through an append).
    let index = layout::index_path(&dir, &name);
    let mut bytes = std::fs::read(&index).unwrap();
    bytes.extend_from_slice(&[9, 0, 0, 0, 1, 2]);
    std::fs::write(&index, &bytes).unwrap();
    assert!(Writer::reuse(&dir, 1 << 20).unwrap().is_none(), "torn tail");
    bytes.truncate(bytes.len() - 6);
    std::fs::write(&index, &bytes).unwrap();
    // A meta file that lags its index (a writer killed after appending a record,
    // before rewriting its meta file).
    let meta = layout::meta_path(&dir, &name);
    let before = std::fs::read(&meta).unwrap();
    let mut w = Writer::reuse(&dir, 1 << 20).unwrap().expect("whole");
    w.write_at(100, &[2u8; 10]).unwrap();
    w.publish().unwrap();
    let after = std::fs::read(&meta).unwrap();
    drop(w);
    std::fs::write(&meta, &before).unwrap();
    assert!(
        Writer::reuse(&dir, 1 << 20).unwrap().is_none(),
        "stale meta"
    );
    std::fs::write(&meta, after).unwrap();
    assert!(
        Writer::reuse(&dir, 1 << 20).unwrap().is_some(),
        "whole again"
    );
}

#[test]
fn a_lone_log_set_with_overwritten_bytes_is_compacted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("f");
    layout::create(&dir, IndexMode::Pattern).unwrap();
    let mut model = Vec::new();
    for round in 0..10u8 {
        let mut w = match Writer::reuse(&dir, u64::MAX).unwrap() {
            Some(w) => w,
            None => Writer::open(&dir).unwrap(),
        };
        let data = vec![round; 4096];
        w.write_at(0, &data).unwrap();
        put(&mut model, 0, &data);
        w.close().unwrap();
    }
    let name = layout::list_writers(&dir).unwrap()[0].clone();
    assert_eq!(
        std::fs::metadata(layout::data_path(&dir, &name))
            .unwrap()
            .len(),
        10 * 4096
    );
    let done = compact(&dir, true).unwrap();
    assert_eq!(done.sources, 1);
    assert_eq!(done.live_bytes, 4096);
    assert_eq!(read_all(&dir), model);
    // Nothing dead is left: compacting again changes nothing.
    assert_eq!(compact(&dir, true).unwrap().sources, 0);
}

#[derive(Clone, Debug)]
enum Op {
    Write {
        offset: u64,
        len: usize,
        seed: u8,
    },
    Truncate(u64),
    /// Close the writer; the next write takes over its logs (or opens new ones).
    Reopen,
    /// Read through a reader refreshed since the previous read, and through one that
    /// took in the writer's records and the truncations without reading the logs.
    Read,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0u64..20_000, 1usize..3000, any::<u8>())
            .prop_map(|(offset, len, seed)| Op::Write { offset, len, seed }),
        2 => (0u64..25_000).prop_map(Op::Truncate),
        1 => Just(Op::Reopen),
        2 => Just(Op::Read),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// A writer that lives on across truncations and reopens (as in the FUSE
    /// mount), against a byte array: every refreshed reader, a fresh reader and
    /// `stat` from the meta files agree with it after every step.
    #[test]
    fn writers_living_across_truncations_match_a_byte_array(ops in proptest::collection::vec(op(), 1..40)) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("f");
        layout::create(&dir, IndexMode::Pattern).unwrap();
        let mut model: Vec<u8> = Vec::new();
        let mut writer: Option<Writer> = None;
        let mut reader: Option<Reader> = None;
        // A reader kept up to date as a FUSE mount keeps its own: what its writers
        // appended and the truncations it made, laid over it.
        let mut laid: Option<Reader> = None;
        let mut appended = Vec::new();
        let mut truncated = Vec::new();
        for op in ops {
            match op {
                Op::Write { offset, len, seed } => {
                    let w = match &mut writer {
                        Some(w) => w,
                        None => {
                            let mut w = match Writer::reuse(&dir, 1 << 16).unwrap() {
                                Some(w) => w,
                                None => Writer::open(&dir).unwrap(),
                            };
                            w.set_keep_appended();
                            writer.insert(w)
                        }
                    };
                    let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
                    w.write_at(offset, &data).unwrap();
                    w.publish().unwrap();
                    appended.extend(w.take_appended());
                    put(&mut model, offset, &data);
                }
                Op::Truncate(size) => {
                    let after = writer.as_ref().map_or(0, |w| w.last_key());
                    let t = tools::truncate_with(&dir, size, false, after).unwrap();
                    truncated.push(t);
                    if let Some(w) = &mut writer {
                        w.note_truncation(t).unwrap();
                    }
                    model.resize(size as usize, 0);
                }
                Op::Reopen => {
                    if let Some(mut w) = writer.take() {
                        w.flush().unwrap();
                        appended.extend(w.take_appended());
                        w.close().unwrap();
                    }
                }
                Op::Read => {
                    let r = match reader.take() {
                        Some(old) => old.refresh().unwrap(),
                        None => Reader::open(&dir).unwrap(),
                    };
                    prop_assert_eq!(r.size(), model.len() as u64);
                    let mut buf = vec![0xAAu8; model.len()];
                    prop_assert_eq!(r.read_at(&mut buf, 0).unwrap(), model.len());
                    prop_assert!(buf == model, "refreshed reader differs");
                    reader = Some(r);
                    // Laid over the previous one when it can be (the same logs), else
                    // opened afresh, as the mount does.
                    let l = laid
                        .take()
                        .and_then(|old| old.with_appended(&appended, &truncated))
                        .unwrap_or_else(|| Reader::open(&dir).unwrap());
                    appended.clear();
                    truncated.clear();
                    prop_assert_eq!(l.size(), model.len() as u64);
                    let mut buf = vec![0xAAu8; model.len()];
                    prop_assert_eq!(l.read_at(&mut buf, 0).unwrap(), model.len());
                    prop_assert!(buf == model, "reader with the appended records differs");
                    laid = Some(l);
                }
            }
            prop_assert!(read_all(&dir) == model, "fresh reader differs");
            assert_quick_size(&dir, &model);
        }
    }
}

#[test]
fn a_writers_own_records_and_truncations_are_laid_over_its_reader() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("f");
    layout::create(&dir, IndexMode::Pattern).unwrap();
    let mut w = Writer::open(&dir).unwrap();
    w.set_keep_appended();
    w.write_at(0, &[1u8; 1000]).unwrap();
    w.publish().unwrap();
    assert_eq!(w.take_appended().len(), 1);
    let r = Reader::open(&dir).unwrap();
    w.write_at(500, &[2u8; 1000]).unwrap();
    w.publish().unwrap();
    let t = tools::truncate_with(&dir, 1200, false, w.last_key()).unwrap();
    w.note_truncation(t).unwrap();
    w.write_at(1300, &[3u8; 10]).unwrap();
    w.publish().unwrap();
    let appended = w.take_appended();
    assert_eq!(appended.len(), 2);
    let laid = r.with_appended(&appended, &[t]).expect("laid over");
    assert!(!laid.merged_anew());
    let mut model = vec![1u8; 500];
    model.extend([2u8; 700]);
    model.extend([0u8; 100]);
    model.extend([3u8; 10]);
    let mut buf = vec![0u8; model.len()];
    assert_eq!(laid.read_at(&mut buf, 0).unwrap(), model.len());
    assert_eq!(buf, model);
    assert_eq!(read_all(&dir), model);
    // Records the reader has not read up to (another record in between) are refused.
    w.write_at(0, &[4u8; 1]).unwrap();
    w.publish().unwrap();
    w.write_at(1, &[5u8; 1]).unwrap();
    w.publish().unwrap();
    let mut skipped = w.take_appended();
    skipped.remove(0);
    assert!(laid.with_appended(&skipped, &[]).is_none());
    // A truncation keyed before what the reader holds is refused too.
    let old = layout::Truncation { key: 1, size: 0 };
    assert!(laid.with_appended(&[], &[old]).is_none());
}
