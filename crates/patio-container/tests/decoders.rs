//! The container's decoders of bytes on disk (or from another process) never panic
//! and never allocate beyond a bound: index logs (through `Reader::from_logs`), packed
//! index logs (`unpack_logs`), writers' meta files, the marker and the truncation log.
//! Each gets every prefix of a valid encoding (written by the container itself),
//! single-byte changes of it and arbitrary bytes; see `alloc_probe` for the bound.

#[path = "../../patio-core/tests/common/alloc_probe.rs"]
mod alloc_probe;

use alloc_probe::{bounded, damaged, flips};
use patio_container::layout::{self, read_truncations, MARKER, TRUNCATES};
use patio_container::{pack_logs, read_logs, unpack_logs, IndexMode, Reader, Writer, WriterMeta};
use proptest::prelude::*;
use proptest::test_runner::Config;
use std::fs;
use std::path::Path;

/// A container written by two writers: strided blocks, an overwrite, a truncation.
fn container(dir: &Path, mode: IndexMode, blocks: u64, bs: u64) {
    layout::create(dir, mode).unwrap();
    for rank in 0..2u64 {
        let mut w = Writer::open(dir).unwrap();
        for i in 0..blocks {
            let at = (i * 2 + rank) * bs;
            w.write_at(at, &vec![rank as u8 + 1; bs as usize]).unwrap();
        }
        w.flush().unwrap();
        w.write_at(3, b"overwrite").unwrap();
        w.close().unwrap();
    }
    patio_container::truncate(dir, blocks * bs).unwrap();
}

/// Writes `bytes` as the file `name` of `dir`, then runs `read`.
fn as_file<T, E>(
    dir: &Path,
    name: &str,
    read: impl Fn(&Path) -> Result<T, E>,
) -> impl Fn(&[u8]) -> Result<T, E> {
    let (dir, name) = (dir.to_path_buf(), name.to_string());
    move |bytes: &[u8]| {
        fs::write(dir.join(&name), bytes).unwrap();
        read(&dir)
    }
}

proptest! {
    #![proptest_config(Config { cases: 16, failure_persistence: None, ..Config::default() })]

    #[test]
    fn logs_meta_marker_and_truncations(
        raw in any::<bool>(),
        blocks in 1u64..24,
        bs in prop_oneof![Just(512u64), Just(4096), 1u64..3000],
        flips in flips(16),
        junk in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        let mode = if raw { IndexMode::Raw } else { IndexMode::Pattern };
        container(&dir, mode, blocks, bs);
        let writers = layout::list_writers(&dir).unwrap();

        // Index logs, as a reader gets them from another process.
        let logs = read_logs(&dir, &writers).unwrap();
        let index = logs[0].bytes.clone();
        let from_logs = |bytes: &[u8]| {
            let mut logs = read_logs(&dir, &writers).unwrap();
            logs[0].bytes = bytes.to_vec();
            Reader::from_logs(&dir, logs)
        };
        damaged(&index, &flips, false, from_logs);
        bounded(&junk, from_logs);

        // Packed logs.
        let packed = pack_logs(&logs);
        damaged(&packed, &flips, true, unpack_logs);
        bounded(&junk, unpack_logs);

        // A writer's meta file (missing or damaged: None, never a panic).
        let meta = layout::meta_path(&dir, &writers[0]);
        let valid = fs::read(&meta).unwrap();
        let name = meta.file_name().unwrap().to_str().unwrap().to_string();
        let read_meta = as_file(&dir, &name, |d: &Path| {
            WriterMeta::read(&d.join(&name)).ok_or(())
        });
        damaged(&valid, &flips, true, &read_meta);
        bounded(&junk, &read_meta);

        // The truncation log (keeps its intact records, reports the rest).
        let valid = fs::read(dir.join(TRUNCATES)).unwrap();
        let truncations = as_file(&dir, TRUNCATES, read_truncations);
        damaged(&valid, &flips, false, &truncations);
        bounded(&junk, &truncations);

        // The marker, last: nothing above reads it again.
        let valid = fs::read(dir.join(MARKER)).unwrap();
        let marker = as_file(&dir, MARKER, layout::read_marker);
        damaged(&valid, &flips, true, &marker);
        bounded(&junk, &marker);
    }
}
