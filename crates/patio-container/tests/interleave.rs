//! Compaction interleaved, deterministically, with everything a mount does meanwhile:
//! at every stage of a compaction (sources locked, sources read, each durable step)
//! writers write, flush, end and take over ended logs, and the file is truncated
//! down and up; after each batch the file, read through a fresh reader, through a
//! reader built before the compaction and refreshed, and by `stat`, must equal a
//! byte-array model. A failure replays exactly (proptest prints the operations).

#[path = "common/harness.rs"]
mod harness;

use harness::{bytes, Harness};
use patio_container::compact::{compact_interleaved, Stage};
use patio_container::{compact, layout, IndexMode, Plan};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Write {
        w: usize,
        offset: u64,
        len: usize,
        seed: u8,
    },
    Flush {
        w: usize,
    },
    /// The writer ends: its logs become a compaction's possible source.
    Close {
        w: usize,
    },
    /// The writer ends and a new one takes over an ended writer's small logs.
    Reuse {
        w: usize,
    },
    Truncate {
        size: u64,
    },
    Check {
        offset: u64,
        len: usize,
    },
}

/// Ended logs of at most this many data bytes are taken over (and small-log plans
/// take them).
const SMALL: u64 = 6_000;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..3usize, 0..12_000u64, 1..2500usize, any::<u8>())
            .prop_map(|(w, offset, len, seed)| Op::Write { w, offset, len, seed }),
        1 => (0..3usize).prop_map(|w| Op::Flush { w }),
        2 => (0..3usize).prop_map(|w| Op::Close { w }),
        1 => (0..3usize).prop_map(|w| Op::Reuse { w }),
        // Down (often below what was written) and up (a hole at the end).
        3 => prop_oneof![0..3000u64, 0..16_000u64].prop_map(|size| Op::Truncate { size }),
        1 => (0..16_000u64, 0..6000usize).prop_map(|(offset, len)| Op::Check { offset, len }),
    ]
}

fn apply(h: &mut Harness, op: &Op) {
    match *op {
        Op::Write {
            w,
            offset,
            len,
            seed,
        } => h.write(w, offset, &bytes(seed, offset, len)),
        Op::Flush { w } => h.flush(w),
        Op::Close { w } => h.close(w),
        Op::Reuse { w } => h.reuse(w, SMALL),
        Op::Truncate { size } => h.truncate(size),
        Op::Check { offset, len } => h.check(offset, len),
    }
}

fn run(mode: IndexMode, before: Vec<Op>, during: Vec<Vec<Op>>, small: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("file");
    layout::create(&dir, mode).unwrap();
    let mut h = Harness::new(&dir, 3, 8);
    for op in &before {
        apply(&mut h, op);
    }
    h.check(0, 1);
    let plan = if small {
        Plan::SmallLogs(SMALL)
    } else {
        Plan::All
    };
    let mut stages = Vec::new();
    {
        let mut batches = during.iter();
        let mut hook = |stage: Stage| {
            stages.push(stage);
            if let Some(batch) = batches.next() {
                for op in batch {
                    apply(&mut h, op);
                }
            }
            h.check(0, 1);
        };
        compact_interleaved(&dir, plan, &mut hook).unwrap();
    }
    h.check(0, 1);
    // The next compaction, with every writer ended, leaves at most one log set.
    for w in 0..3 {
        h.close(w);
    }
    compact(&dir, true).unwrap();
    h.check(0, 1);
    assert!(layout::list_writers(&dir).unwrap().len() <= 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn compaction_interleaved_with_writes_and_truncations_matches_the_model(
        before in prop::collection::vec(op(), 1..30),
        during in prop::collection::vec(prop::collection::vec(op(), 0..5), 0..12),
        raw in any::<bool>(),
        small in any::<bool>(),
    ) {
        let mode = if raw { IndexMode::Raw } else { IndexMode::Pattern };
        run(mode, before, during, small);
    }
}

/// The interleaving that resurrected truncated bytes through the container mount: a
/// truncation down, an extending write and the writer's end, all while a compaction
/// was between its snapshot of the truncations and the locks on its sources.
#[test]
fn a_truncation_and_an_ended_writer_during_a_compaction_cut_what_they_cut() {
    let before = vec![
        Op::Write {
            w: 0,
            offset: 0,
            len: 8000,
            seed: 1,
        },
        Op::Close { w: 0 },
        Op::Write {
            w: 1,
            offset: 4000,
            len: 100,
            seed: 2,
        },
    ];
    let during = vec![vec![
        Op::Truncate { size: 1000 },
        Op::Write {
            w: 1,
            offset: 6000,
            len: 500,
            seed: 3,
        },
        Op::Close { w: 1 },
    ]];
    for mode in [IndexMode::Pattern, IndexMode::Raw] {
        run(mode, before.clone(), during.clone(), false);
    }
}

/// A compacted log set whose records are all older than the truncations its
/// compaction applied still needs every truncation after them: pruned by a later
/// compaction that did not take it (a writer had taken the set over), a truncation
/// down followed by one up brought back the bytes the first had cut.
#[test]
fn truncations_a_compacted_set_has_not_seen_are_kept_for_it() {
    for mode in [IndexMode::Pattern, IndexMode::Raw] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("file");
        layout::create(&dir, mode).unwrap();
        let mut h = Harness::new(&dir, 2, 8);
        h.write(0, 0, &bytes(7, 0, 1000));
        h.close(0);
        h.truncate(2000);
        compact(&dir, true).unwrap();
        // A writer takes the compacted set over (and writes nothing yet).
        h.reuse(1, SMALL);
        assert!(h.writers[1].is_some(), "the compacted set was taken over");
        h.truncate(100);
        h.truncate(1500);
        compact(&dir, true).unwrap();
        h.check(0, 1500);
    }
}
