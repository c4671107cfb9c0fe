//! Property test of fill/invalidate interleavings in the segment cache (`lru` and
//! `group`), against a byte vector of the file: fills begun at the file's current
//! epoch and size (bytes read from SOURCE then) and completed later, reads that
//! checked the file before a change and read after it, writes, truncations and
//! extensions reported like the passthrough reports them, size changes behind the
//! cache's back and idle periods, in the generated order. Every read through a
//! handle must return the file's current bytes, never stale and never short where
//! the file is longer; a fill or read overtaken by a change must not leave anything
//! behind that a later read could see.

use super::{id_of, observer};
use crate::passthrough::{DataChange, FileReader, Observer};
use patio_cache::{Item, Policy};
use proptest::prelude::*;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::sync::Arc;

const ITEM: u64 = 4096;
/// Sizes stay below this (25 items: more than memory's 16).
const MAX_SIZE: u64 = 100_000;

#[derive(Clone, Debug)]
enum Op {
    /// A read through the handle, checked against the model.
    Read { at: u64, len: u64 },
    /// A fill begins: the file is checked (epoch, size) and the items over
    /// `[at, at + len)` are read from SOURCE now.
    StartFill { at: u64, len: u64 },
    /// The `k`-th pending fill completes (inserted, or dropped if overtaken).
    FinishFill { k: usize },
    /// A read begins: the file is stat'ed and, unless `stat_only`, checked.
    BeginRead { at: u64, len: u64, stat_only: bool },
    /// The `k`-th pending read goes on through the cache with what it saw.
    EndRead { k: usize },
    /// A write through the mount (offsets past the end extend the file).
    Write { at: u64, len: u64, seed: u8 },
    /// A truncation or extension through the mount.
    Resize { size: u64 },
    /// A truncation or extension behind the cache's back (no report).
    Outside { size: u64 },
    /// An idle period (groups built from SOURCE, the table saved).
    Idle,
}

fn op() -> impl Strategy<Value = Op> {
    let at = 0..MAX_SIZE + 8192;
    let len = 1..16_384u64;
    prop_oneof![
        4 => (at.clone(), len.clone()).prop_map(|(at, len)| Op::Read { at, len }),
        3 => (at.clone(), len.clone()).prop_map(|(at, len)| Op::StartFill { at, len }),
        3 => any::<usize>().prop_map(|k| Op::FinishFill { k }),
        2 => (at.clone(), len.clone(), any::<bool>())
            .prop_map(|(at, len, stat_only)| Op::BeginRead { at, len, stat_only }),
        2 => any::<usize>().prop_map(|k| Op::EndRead { k }),
        3 => (at, 1..12_000u64, any::<u8>()).prop_map(|(at, len, seed)| Op::Write { at, len, seed }),
        1 => (0..MAX_SIZE).prop_map(|size| Op::Resize { size }),
        1 => (0..MAX_SIZE).prop_map(|size| Op::Outside { size }),
        1 => Just(Op::Idle),
    ]
}

/// A fill begun and not completed: its first item, its items' bytes, its epoch.
struct Fill {
    first: Item,
    items: Vec<Arc<Vec<u8>>>,
    epoch: u64,
}

/// A read begun: what it saw of the file (a stat, or the checked size and epoch).
enum Seen {
    Stat(std::fs::Metadata),
    Checked((u64, u64)),
}

struct Pending {
    at: u64,
    len: u64,
    seen: Seen,
    /// The file's version when the read began (an index in `versions`).
    since: usize,
}

fn bytes_of(seed: u8, len: u64) -> Vec<u8> {
    (0..len)
        .map(|i| seed.wrapping_add((i * 31 % 251) as u8))
        .collect()
}

/// Applies `ops` in order to a file of `initial` bytes under `policy`; fails at the
/// first read that disagrees with the model.
fn run(policy: Policy, initial: Vec<u8>, ops: &[Op]) -> Result<(), TestCaseError> {
    let src = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = src.path().join("f.bin");
    std::fs::write(&path, &initial).unwrap();
    let mut model = initial;
    // The file's contents after each change: an overtaken read may return bytes of
    // any version since it began.
    let mut versions = vec![model.clone()];
    let (cache, obs) = observer(src.path(), dir.path(), policy);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    let id = id_of(&file);
    let name: Arc<str> = "f.bin".into();
    let reader = obs.open_reader(&name, id, &file).expect("a reader");
    let idx = cache.state().by_id[&(id.dev, id.ino)];
    let data = cache.state().files[idx as usize]
        .data
        .clone()
        .expect("open");
    let mut fills: Vec<Fill> = Vec::new();
    let mut reads: Vec<Pending> = Vec::new();
    let read = |r: &dyn FileReader,
                at: u64,
                len: u64,
                model: &[u8],
                step: usize|
     -> Result<(), TestCaseError> {
        let mut buf = vec![0u8; len as usize];
        let n = r.read_at(&file, at, &mut buf, 1).unwrap();
        let lo = (at as usize).min(model.len());
        let hi = (at as usize + len as usize).min(model.len());
        prop_assert_eq!(n, hi - lo, "step {}: read {}+{} length", step, at, len);
        let bad = (0..n).find(|&i| buf[i] != model[lo + i]);
        prop_assert!(
            bad.is_none(),
            "step {}: read {}+{} stale at {:?}",
            step,
            at,
            len,
            bad.map(|b| b as u64 + at)
        );
        Ok(())
    };
    for (step, o) in ops.iter().enumerate() {
        match *o {
            Op::Read { at, len } => read(reader.as_ref(), at, len, &model, step)?,
            Op::StartFill { at, len } => {
                let (size, epoch) = cache.check(idx, &file.metadata().unwrap());
                let start = at / ITEM * ITEM;
                if start >= size {
                    continue;
                }
                let want = ((at + len).div_ceil(ITEM) * ITEM).min(size) - start;
                let got = data.read(start, want).unwrap();
                fills.push(Fill {
                    first: Item {
                        file: idx,
                        index: at / ITEM,
                    },
                    items: got
                        .chunks(ITEM as usize)
                        .map(|c| Arc::new(c.to_vec()))
                        .collect(),
                    epoch,
                });
            }
            Op::FinishFill { k } if !fills.is_empty() => {
                let f = fills.remove(k % fills.len());
                cache.keep(f.first, &f.items, f.epoch);
            }
            Op::BeginRead { at, len, stat_only } => {
                let meta = file.metadata().unwrap();
                let seen = if stat_only {
                    Seen::Stat(meta)
                } else {
                    Seen::Checked(cache.check(idx, &meta))
                };
                reads.push(Pending {
                    at,
                    len,
                    seen,
                    since: versions.len() - 1,
                });
            }
            Op::EndRead { k } if !reads.is_empty() => {
                let p = reads.remove(k % reads.len());
                let (size, epoch) = match p.seen {
                    Seen::Stat(meta) => cache.check(idx, &meta),
                    Seen::Checked(seen) => seen,
                };
                let mut buf = vec![0u8; p.len as usize];
                let n = cache.read(idx, size, epoch, p.at, &mut buf, 2).unwrap();
                let at = p.at as usize;
                let bad = (0..n).find(|&i| {
                    !versions[p.since..]
                        .iter()
                        .any(|v| v.get(at + i) == Some(&buf[i]))
                });
                prop_assert!(
                    bad.is_none(),
                    "step {}: overtaken read {}+{}: no version had byte {:?}",
                    step,
                    p.at,
                    p.len,
                    bad.map(|b| b + at)
                );
            }
            Op::Write { at, len, seed } => {
                let bytes = bytes_of(seed, len);
                obs.changing(id);
                file.write_all_at(&bytes, at).unwrap();
                obs.changed(id, DataChange::Written { offset: at, len });
                let end = (at + len) as usize;
                if end > model.len() {
                    model.resize(end, 0);
                }
                model[at as usize..end].copy_from_slice(&bytes);
                versions.push(model.clone());
            }
            Op::Resize { size } => {
                obs.changing(id);
                file.set_len(size).unwrap();
                obs.changed(id, DataChange::Resized { size });
                model.resize(size as usize, 0);
                versions.push(model.clone());
            }
            Op::Outside { size } => {
                File::options()
                    .write(true)
                    .open(&path)
                    .unwrap()
                    .set_len(size)
                    .unwrap();
                model.resize(size as usize, 0);
                versions.push(model.clone());
            }
            Op::Idle => cache.idle_work(),
            Op::FinishFill { .. } | Op::EndRead { .. } => {}
        }
    }
    for f in fills.drain(..) {
        cache.keep(f.first, &f.items, f.epoch);
    }
    let end = ops.len();
    for at in (0..model.len() as u64 + ITEM).step_by(ITEM as usize * 3) {
        read(reader.as_ref(), at, ITEM * 3, &model, end)?;
    }
    Ok(())
}

fn initial() -> impl Strategy<Value = Vec<u8>> {
    (0..MAX_SIZE, any::<u8>()).prop_map(|(size, seed)| bytes_of(seed, size))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 192, ..ProptestConfig::default() })]

    #[test]
    fn lru_fills_never_outlive_their_data(
        initial in initial(),
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        run(Policy::Lru, initial, &ops)?;
    }

    #[test]
    fn group_fills_never_outlive_their_data(
        initial in initial(),
        ops in proptest::collection::vec(op(), 1..60),
    ) {
        run(Policy::Group, initial, &ops)?;
    }
}

/// The case the property test found (issue case 3's mechanism): a read checks the
/// file (size 20,000), a write extends it by one byte, the read goes on. Its last
/// item, cut at the old size, must not be kept: later reads would stop a byte short.
#[test]
fn a_read_overtaken_by_an_extension_leaves_no_short_item() {
    let ops = [
        Op::BeginRead {
            at: 16_384,
            len: 4096,
            stat_only: false,
        },
        Op::Write {
            at: 20_000,
            len: 1,
            seed: 7,
        },
        Op::EndRead { k: 0 },
        Op::Read {
            at: 16_384,
            len: 8192,
        },
    ];
    for policy in [Policy::Lru, Policy::Group] {
        run(policy, bytes_of(3, 20_000), &ops).unwrap();
    }
}
