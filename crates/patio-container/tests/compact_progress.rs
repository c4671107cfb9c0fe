//! The copy progress a compaction reports (`Stage::Copying`, what `patio container
//! compact` draws as a bar of bytes): it starts at 0, never goes back, reports at
//! least every `COPY_REPORT` bytes apart only, and ends at the live bytes copied — which
//! are the bytes a reader of the file sees written, checked here against the writes.

use patio_container::compact::{compact_interleaved, Stage, COPY_REPORT};
use patio_container::{IndexMode, Plan, Writer};
use std::collections::BTreeSet;

/// Three writers, one after the other: `(offset, len)` writes in 64 KiB pieces; later
/// writes overwrite earlier ones, so fewer bytes are live than were written.
const WRITES: [(u64, u64); 3] = [(0, 3 << 20), (1 << 20, 3 << 20), (8 << 20, 1 << 20)];

#[test]
fn copying_is_reported_from_zero_to_the_live_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c");
    let mut pages = BTreeSet::new();
    for (i, &(offset, len)) in WRITES.iter().enumerate() {
        let mut w = if i == 0 {
            Writer::create(&path, IndexMode::Pattern).unwrap()
        } else {
            Writer::open(&path).unwrap()
        };
        for at in (offset..offset + len).step_by(64 << 10) {
            w.write_at(at, &vec![i as u8 + 1; 64 << 10]).unwrap();
            pages.insert(at >> 16);
        }
        w.close().unwrap();
    }
    let live = pages.len() as u64 * (64 << 10);

    let mut stages = Vec::new();
    let done = compact_interleaved(&path, Plan::All, &mut |s| stages.push(s)).unwrap();
    assert_eq!(done.live_bytes, live);
    let copied: Vec<(usize, u64, u64)> = stages
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match *s {
            Stage::Copying { done, total } => Some((i, done, total)),
            _ => None,
        })
        .collect();
    assert!(
        copied.iter().all(|&(_, _, total)| total == live),
        "{copied:?}"
    );
    assert_eq!(copied.first().map(|c| c.1), Some(0));
    assert_eq!(copied.last().map(|c| c.1), Some(live));
    for pair in copied.windows(2) {
        let (prev, next) = (pair[0].1, pair[1].1);
        assert!(next > prev, "{copied:?}");
        assert!(next - prev >= COPY_REPORT || next == live, "{copied:?}");
    }
    // 5 MiB live in three runs: reports in between, all after the read and before the
    // first durable step.
    assert!(copied.len() >= 4, "{copied:?}");
    let at = |want: Stage| stages.iter().position(|s| *s == want).unwrap();
    let (read, step1) = (at(Stage::Read), at(Stage::Step(1)));
    assert!(
        copied.iter().all(|&(i, _, _)| read < i && i < step1),
        "{stages:?}"
    );
}
