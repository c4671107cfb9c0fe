//! `Writer::overlay` against a reference model (a plain byte array): one writer that
//! does not sync on flush writes, publishes now and then, and truncates; every read
//! through a reader built at the last publish, with the writer's unpublished writes
//! laid over it, must equal the model (bytes and length) — what the FUSE mount serves
//! instead of publishing before each read.

use patio_container::{layout, IndexMode, Reader, Writer};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    Write { offset: u64, len: usize, seed: u8 },
    Publish,
    Truncate { size: u64 },
    Read { offset: u64, len: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        5 => (0..30_000u64, 1..3000usize, any::<u8>())
            .prop_map(|(offset, len, seed)| Op::Write { offset, len, seed }),
        1 => Just(Op::Publish),
        1 => (0..35_000u64).prop_map(|size| Op::Truncate { size }),
        4 => (0..36_000u64, 0..6000usize).prop_map(|(offset, len)| Op::Read { offset, len }),
    ]
}

fn run(ops: Vec<Op>, buffer: usize) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    layout::create(&dir, IndexMode::Pattern).unwrap();
    let mut w = Writer::open(&dir).unwrap();
    w.set_sync_on_flush(false);
    w.set_index_buffer(buffer);
    let mut model: Vec<u8> = Vec::new();
    let mut reader = Reader::open(&dir).unwrap();
    let mut last_key = w.last_key();
    for op in ops {
        match op {
            Op::Write { offset, len, seed } => {
                let data: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_add(seed) | 1).collect();
                w.write_at(offset, &data).unwrap();
                let end = offset as usize + len;
                if model.len() < end {
                    model.resize(end, 0);
                }
                model[offset as usize..end].copy_from_slice(&data);
            }
            Op::Publish => w.publish().unwrap(),
            Op::Truncate { size } => {
                w.truncate(size).unwrap();
                model.resize(size as usize, 0);
            }
            Op::Read { offset, len } => {
                // A record the writer wrote by itself (full buffer) or by request is
                // seen by rebuilding the reader, as the mount does.
                if w.last_key() != last_key {
                    reader = reader.refresh().unwrap();
                    last_key = w.last_key();
                }
                let mut buf = vec![0u8; len];
                let n = reader.read_at(&mut buf, offset).unwrap();
                let n = n.max(w.overlay(&mut buf, offset).unwrap());
                let start = (offset as usize).min(model.len());
                let end = (offset as usize + len).min(model.len());
                assert_eq!(n, end - start, "read length at {offset}+{len}");
                assert!(buf[..n] == model[start..end], "bytes at {offset}+{len}");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn reads_with_the_overlay_match_the_model(
        ops in prop::collection::vec(op(), 1..60),
        buffer in prop_oneof![Just(65_536usize), 1..8usize],
    ) {
        run(ops, buffer);
    }
}
