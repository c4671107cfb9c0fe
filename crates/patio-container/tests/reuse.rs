//! Writers that live on: a writer taking over an ended writer's logs
//! (`Writer::reuse`), a writer writing on after a truncation (`note_truncation`),
//! and compaction of a lone log set that holds overwritten bytes. Each is checked
//! against a byte array holding the file, and `stat` against its size without
//! reading the index.

use patio_container::compact::compact;
use patio_container::{layout, stat, tools, IndexMode, Reader, Writer};
use proptest::prelude::*;
use std::path::Path;

fn read_all(dir: &Path) -> Vec<u8> {
    let r = Reader::open(dir).unwrap();
    assert!(r.damage().is_empty(), "{:?}", r.damage());
    let mut buf = vec![0u8; r.size() as usize];
    assert_eq!(r.read_at(&mut buf, 0).unwrap(), buf.len());
    buf
}

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
    /// Read through a reader refreshed since the previous read.
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
        for op in ops {
            match op {
                Op::Write { offset, len, seed } => {
                    let w = match &mut writer {
                        Some(w) => w,
                        None => writer.insert(match Writer::reuse(&dir, 1 << 16).unwrap() {
                            Some(w) => w,
                            None => Writer::open(&dir).unwrap(),
                        }),
                    };
                    let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(7) ^ seed).collect();
                    w.write_at(offset, &data).unwrap();
                    w.publish().unwrap();
                    put(&mut model, offset, &data);
                }
                Op::Truncate(size) => {
                    let after = writer.as_ref().map_or(0, |w| w.last_key());
                    let t = tools::truncate_with(&dir, size, false, after).unwrap();
                    if let Some(w) = &mut writer {
                        w.note_truncation(t).unwrap();
                    }
                    model.resize(size as usize, 0);
                }
                Op::Reopen => {
                    if let Some(w) = writer.take() {
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
                }
            }
            prop_assert!(read_all(&dir) == model, "fresh reader differs");
            assert_quick_size(&dir, &model);
        }
    }
}
