//! Changes newer than a reader's merged index, kept in memory: what lets
//! [`crate::Reader::refresh`] take in records and truncations appended since the
//! reader was built without merging every writer's records again.
//!
//! The merged index (crate::global) is compressed and built in one pass; it is not
//! edited. A refresh whose new records and truncations are all keyed after
//! everything the reader holds (the common case: they were written after it was
//! built) applies them here instead, in key order:
//! * a write lays its extent over the delta's (newest wins, the merged index is
//!   older than every delta write);
//! * a truncation cuts the delta's writes at its size and the merged index at the
//!   smallest size any truncation since its build had.
//!
//! Lookups consult the delta first, then the merged index below its cut. When the
//! delta grows past [`Delta::LIMIT`] writes, the reader is built anew.

use patio_core::Lookup;
use std::collections::BTreeMap;

/// One write of the delta: where its bytes are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Placed {
    end: u64,
    chunk: u64,
    physical: u64,
}

/// Writes and truncations applied after the merged index was built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Delta {
    /// Non-overlapping extents by logical start.
    writes: BTreeMap<u64, Placed>,
    /// The merged index holds nothing live at or past this offset.
    cut: u64,
    /// The logical size after everything applied.
    size: u64,
}

impl Delta {
    /// Writes in the delta past which a refresh rebuilds the merged index instead.
    pub(crate) const LIMIT: usize = 4096;

    /// An empty delta over a merged index of `size` bytes.
    pub(crate) fn new(size: u64) -> Self {
        Delta {
            writes: BTreeMap::new(),
            cut: u64::MAX,
            size,
        }
    }

    pub(crate) fn size(&self) -> u64 {
        self.size
    }

    /// Extents held (how far the delta has grown).
    pub(crate) fn len(&self) -> usize {
        self.writes.len()
    }

    /// Lays a write of `length` bytes at `logical`, stored in chunk `chunk` at
    /// `physical`, over everything applied before.
    pub(crate) fn write(&mut self, logical: u64, length: u64, chunk: u64, physical: u64) {
        if length == 0 {
            return;
        }
        let end = logical + length;
        self.clear(logical, end);
        self.writes.insert(
            logical,
            Placed {
                end,
                chunk,
                physical,
            },
        );
        self.size = self.size.max(end);
    }

    /// Truncates (or extends with a hole) to `size`.
    pub(crate) fn truncate(&mut self, size: u64) {
        self.clear(size, u64::MAX);
        self.cut = self.cut.min(size);
        self.size = size;
    }

    /// Removes `[from, to)` from the delta's writes, trimming those that straddle it.
    fn clear(&mut self, from: u64, to: u64) {
        if let Some((&start, &p)) = self.writes.range(..from).next_back() {
            if p.end > from {
                self.writes.insert(start, Placed { end: from, ..p });
                if p.end > to {
                    let moved = to - start;
                    self.writes.insert(
                        to,
                        Placed {
                            physical: p.physical + moved,
                            ..p
                        },
                    );
                    return;
                }
            }
        }
        let inside: Vec<u64> = self.writes.range(from..to).map(|(&s, _)| s).collect();
        for start in inside {
            let p = self.writes.remove(&start).expect("listed");
            if p.end > to {
                self.writes.insert(
                    to,
                    Placed {
                        physical: p.physical + (to - start),
                        ..p
                    },
                );
            }
        }
    }

    /// What is at logical offset `x`: the delta's write there, else what `base` (the
    /// merged index) holds below the cut, never reaching into the next delta write.
    pub(crate) fn lookup(&self, x: u64, base: impl Fn(u64) -> Lookup) -> Lookup {
        if let Some((&start, p)) = self.writes.range(..=x).next_back() {
            if x < p.end {
                return Lookup::Data {
                    chunk: p.chunk,
                    physical: p.physical + (x - start),
                    len: p.end - x,
                };
            }
        }
        let next = self.writes.range(x..).next().map(|(&s, _)| s);
        let to_next = next.map_or(u64::MAX, |n| n - x);
        if x >= self.cut {
            return match next {
                Some(_) => Lookup::Hole { len: to_next },
                None => Lookup::Unmapped,
            };
        }
        let bound = to_next.min(self.cut - x);
        match base(x) {
            Lookup::Data {
                chunk,
                physical,
                len,
            } => Lookup::Data {
                chunk,
                physical,
                len: len.min(bound),
            },
            Lookup::Hole { len } => Lookup::Hole {
                len: len.min(bound),
            },
            Lookup::Unmapped if next.is_some() => Lookup::Hole { len: to_next },
            Lookup::Unmapped => Lookup::Unmapped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The file as a byte array: each byte the (chunk, physical) it was written from.
    type Model = Vec<Option<(u64, u64)>>;

    fn resolve(d: &Delta, base: &Model, len: u64) -> Model {
        let base_lookup = |x: u64| match base.get(x as usize) {
            None => Lookup::Unmapped,
            Some(None) => {
                let run = base[x as usize..]
                    .iter()
                    .take_while(|b| b.is_none())
                    .count();
                if x as usize + run == base.len() {
                    Lookup::Unmapped
                } else {
                    Lookup::Hole { len: run as u64 }
                }
            }
            Some(Some((chunk, physical))) => {
                let mut n = 1;
                while let Some(Some((c, p))) = base.get(x as usize + n) {
                    if *c != *chunk || *p != physical + n as u64 {
                        break;
                    }
                    n += 1;
                }
                Lookup::Data {
                    chunk: *chunk,
                    physical: *physical,
                    len: n as u64,
                }
            }
        };
        let mut out = Vec::new();
        let mut x = 0;
        while x < len {
            match d.lookup(x, base_lookup) {
                Lookup::Data {
                    chunk,
                    physical,
                    len: n,
                } => {
                    assert!(n > 0);
                    for i in 0..n.min(len - x) {
                        out.push(Some((chunk, physical + i)));
                    }
                    x += n.min(len - x);
                }
                Lookup::Hole { len: n } => {
                    assert!(n > 0);
                    for _ in 0..n.min(len - x) {
                        out.push(None);
                    }
                    x += n.min(len - x);
                }
                Lookup::Unmapped => {
                    out.resize(len as usize, None);
                    x = len;
                }
            }
        }
        out
    }

    #[derive(Clone, Debug)]
    enum Op {
        Write(u64, u64),
        Truncate(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0u64..200, 1u64..40).prop_map(|(o, l)| Op::Write(o, l)),
            1 => (0u64..220).prop_map(Op::Truncate),
        ]
    }

    proptest! {
        /// Every byte the delta over a merged index resolves to is the one a byte
        /// array with the same writes and truncations applied holds.
        #[test]
        fn lookups_match_a_byte_array(
            base in proptest::collection::vec(proptest::option::of(0u64..3), 0..150),
            ops in proptest::collection::vec(op(), 0..40),
        ) {
            let base: Model = base
                .iter()
                .enumerate()
                .map(|(i, c)| c.map(|c| (c, 1000 + i as u64)))
                .collect();
            let mut model = base.clone();
            let mut d = Delta::new(base.len() as u64);
            let mut physical = 5000u64;
            for op in ops {
                match op {
                    Op::Write(o, l) => {
                        d.write(o, l, 7, physical);
                        if model.len() < (o + l) as usize {
                            model.resize((o + l) as usize, None);
                        }
                        for i in 0..l {
                            model[(o + i) as usize] = Some((7, physical + i));
                        }
                        physical += l;
                    }
                    Op::Truncate(s) => {
                        d.truncate(s);
                        model.resize(s as usize, None);
                    }
                }
                prop_assert_eq!(d.size(), model.len() as u64);
                prop_assert_eq!(&resolve(&d, &base, model.len() as u64), &model);
            }
        }
    }
}
