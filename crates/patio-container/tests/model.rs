//! The container against a reference model (a plain byte array): random writes from
//! several writers, strided N-1 phases, overwrites, truncates, holes, flushes and
//! reopens, compactions (whole, and interrupted after every step as by a crash,
//! then recovered) — every read must equal the model, in pattern and raw mode.
//!
//! Ordering rule under test (docs/ARCHITECTURE.md): a write is ordered after another
//! writer's write when that writer flushed in between. The harness flushes the other
//! writers before each write, so the model is simply "apply in call order".

#[path = "common/harness.rs"]
mod harness;

use harness::{bytes, Harness};
use patio_container::compact::{compact_steps, recover};
use patio_container::{check, compact, layout, IndexMode, Reader, Writer};
use proptest::prelude::*;
use std::path::Path;

#[derive(Clone, Debug)]
enum Op {
    Write {
        w: usize,
        offset: u64,
        len: usize,
        seed: u8,
    },
    Strided {
        first_writer: usize,
        writers: usize,
        block: u64,
        rows: u64,
        base: u64,
        seed: u8,
    },
    /// One writer's nested pattern: `outer` copies, `outer_stride` apart, of `rows`
    /// blocks `stride` apart (a reorganized tile; overlapping when the strides are short).
    Nested {
        w: usize,
        outer: u64,
        outer_stride: u64,
        rows: u64,
        stride: u64,
        block: u64,
        base: u64,
        seed: u8,
    },
    Flush {
        w: usize,
    },
    Reopen {
        w: usize,
    },
    Truncate {
        size: u64,
    },
    Check {
        offset: u64,
        len: usize,
    },
    /// A compaction stopped after `steps` steps (a crash), then recovered.
    Compact {
        steps: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, 0..40_000u64, 1..3000usize, any::<u8>())
            .prop_map(|(w, offset, len, seed)| Op::Write { w, offset, len, seed }),
        2 => (0..3usize, 1..4usize, 1..600u64, 2..12u64, 0..20_000u64, any::<u8>()).prop_map(
            |(first_writer, writers, block, rows, base, seed)| Op::Strided {
                first_writer, writers, block, rows, base, seed
            }
        ),
        2 => (0..3usize, 2..6u64, 1..9000u64, 2..10u64, 1..900u64, 1..600u64, 0..20_000u64, any::<u8>())
            .prop_map(|(w, outer, outer_stride, rows, stride, block, base, seed)| Op::Nested {
                w, outer, outer_stride, rows, stride, block, base, seed
            }),
        1 => (0..3usize).prop_map(|w| Op::Flush { w }),
        1 => (0..3usize).prop_map(|w| Op::Reopen { w }),
        1 => (0..60_000u64).prop_map(|size| Op::Truncate { size }),
        2 => (0..70_000u64, 0..9000usize).prop_map(|(offset, len)| Op::Check { offset, len }),
        2 => prop_oneof![Just(u64::MAX), 0..14u64].prop_map(|steps| Op::Compact { steps }),
    ]
}

fn run(mode: IndexMode, buffer: usize, ops: Vec<Op>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("file");
    patio_container::layout::create(&dir, mode).unwrap();
    let mut h = Harness::new(&dir, 3, buffer);
    for op in ops {
        match op {
            Op::Write {
                w,
                offset,
                len,
                seed,
            } => h.write(w, offset, &bytes(seed, offset, len)),
            Op::Strided {
                first_writer,
                writers,
                block,
                rows,
                base,
                seed,
            } => {
                for row in 0..rows {
                    for k in 0..writers {
                        let w = (first_writer + k) % 3;
                        let offset = base + (row * writers as u64 + k as u64) * block;
                        h.write(w, offset, &bytes(seed, offset, block as usize));
                    }
                }
            }
            Op::Nested {
                w,
                outer,
                outer_stride,
                rows,
                stride,
                block,
                base,
                seed,
            } => {
                for a in 0..outer {
                    for row in 0..rows {
                        let offset = base + a * outer_stride + row * stride;
                        h.write(w, offset, &bytes(seed, offset, block as usize));
                    }
                }
            }
            Op::Flush { w } => h.flush(w),
            Op::Reopen { w } => h.close(w),
            Op::Truncate { size } => h.truncate(size),
            Op::Check { offset, len } => h.check(offset, len),
            Op::Compact { steps } => {
                h.flush_all();
                compact_steps(&dir, true, steps).unwrap();
                // Stopped anywhere, the container reads the same...
                h.check(0, 1);
                // ...and its leftovers go on recovery.
                recover(&dir).unwrap();
                assert_no_leftovers(&dir);
                h.check(0, 1);
            }
        }
    }
    h.check(0, 1);
    // With every writer ended, a compaction leaves one log set (none when empty).
    for w in h.writers.iter_mut() {
        if let Some(wr) = w.take() {
            wr.close().unwrap();
        }
    }
    let done = compact(&dir, true).unwrap();
    assert_eq!(done.active, 0);
    h.check(0, 1);
    let logs = layout::list_writers(&dir).unwrap().len();
    assert!(logs <= 1, "{logs} index logs after a full compaction");
    let again = compact(&dir, true).unwrap();
    assert_eq!(again.sources, 0, "a compacted container is left alone");
    assert_no_leftovers(&dir);
}

/// No temporary files or manifests, and `check` finds nothing wrong.
fn assert_no_leftovers(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        let n = e.unwrap().file_name().to_string_lossy().into_owned();
        assert!(
            !n.starts_with(".compact.") && !n.starts_with("compacted."),
            "leftover {n}"
        );
    }
    let report = check(dir).unwrap();
    assert!(report.is_clean(), "{:?}", report.damage);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn pattern_mode_matches_the_model(ops in prop::collection::vec(op(), 1..40), buffer in 1..64usize) {
        run(IndexMode::Pattern, buffer, ops);
    }

    #[test]
    fn raw_mode_matches_the_model(ops in prop::collection::vec(op(), 1..40), buffer in 1..64usize) {
        run(IndexMode::Raw, buffer, ops);
    }
}

#[test]
fn n1_strided_is_one_tile_in_a_tiny_map() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ckpt");
    let (writers, rows, block) = (16u64, 300u64, 512u64);
    let mut ws: Vec<Writer> = (0..writers)
        .map(|_| {
            let mut w = Writer::create(&dir, IndexMode::Pattern).unwrap();
            w.set_index_buffer(64);
            w
        })
        .collect();
    for row in 0..rows {
        for (k, w) in ws.iter_mut().enumerate() {
            let offset = (row * writers + k as u64) * block;
            w.write_at(offset, &bytes(7, offset, block as usize))
                .unwrap();
            // Flushes at different rows per writer: records do not line up.
            if row == 7 * k as u64 + 3 {
                w.flush().unwrap();
            }
        }
    }
    for w in ws {
        w.close().unwrap();
    }
    let r = Reader::open(&dir).unwrap();
    let s = r.stats();
    assert_eq!(s.index.tiles, 1, "{:?}", r.index().describe());
    assert_eq!(s.index.loose_writes, 0);
    assert!(s.index.mem_bytes < 4096, "{} bytes", s.index.mem_bytes);
    assert_eq!(s.writes, writers * rows);
    let size = (writers * rows * block) as usize;
    let mut buf = vec![0u8; size];
    assert_eq!(r.read_at(&mut buf, 0).unwrap(), size);
    assert!(buf == bytes(7, 0, size));
    // Raw mode of the same writes for comparison.
    let raw = tmp.path().join("raw");
    let mut ws: Vec<Writer> = (0..writers)
        .map(|_| Writer::create(&raw, IndexMode::Raw).unwrap())
        .collect();
    for row in 0..rows {
        for (k, w) in ws.iter_mut().enumerate() {
            let offset = (row * writers + k as u64) * block;
            w.write_at(offset, &bytes(7, offset, block as usize))
                .unwrap();
        }
    }
    drop(ws);
    let rr = Reader::open(&raw).unwrap();
    assert_eq!(rr.size(), size as u64);
    assert!(rr.stats().index_disk_bytes > 10 * s.index_disk_bytes);
}

/// One writer storing a 2-D array tile by tile (what `patio reorg apply` writes for a
/// tile reader): the index is nested patterns, merged into tiles on the patterns —
/// no write is expanded — and every byte reads back.
#[test]
fn tile_by_tile_writes_merge_without_expansion() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("tiles");
    let (tiles, rows, row) = (8u64, 64u64, 256u64); // 8 × 8 tiles of 64 rows of 256 bytes
    let width = tiles * row;
    let mut w = Writer::create(&dir, IndexMode::Pattern).unwrap();
    for ty in 0..tiles {
        for tx in 0..tiles {
            for r in 0..rows {
                let offset = (ty * rows + r) * width + tx * row;
                w.write_at(offset, &bytes(3, offset, row as usize)).unwrap();
            }
        }
    }
    w.close().unwrap();
    let r = Reader::open(&dir).unwrap();
    let s = r.stats();
    assert_eq!(s.writes, tiles * tiles * rows);
    assert_eq!(s.index.loose_writes, 0, "{:?}", r.index().describe());
    assert_eq!(s.index.tiles, tiles, "{:?}", r.index().describe());
    let size = (tiles * rows * width) as usize;
    let mut buf = vec![0u8; size];
    assert_eq!(r.read_at(&mut buf, 0).unwrap(), size);
    assert!(buf == bytes(3, 0, size));
}
