//! The correlation table: bounded successors ("after offset A comes B") followed as a
//! chain when no structured pattern is sure.

use super::{Prediction, Predictor};

/// A correlation entry: after the request at an offset whose 28-bit hash is in
/// `key`'s high bits, the request at `next` followed; `key`'s low four bits count how
/// much more often than others (saturating at 15). Successors are predicted with the
/// length of the last request.
#[derive(Clone, Copy, Debug)]
pub(super) struct Link {
    pub(super) key: u32,
    pub(super) next: [u32; 2],
}

impl Link {
    pub(super) fn new(tag: u32, next: u64) -> Self {
        Link {
            key: tag | 1,
            next: [next as u32, (next >> 32) as u32],
        }
    }

    pub(super) fn tag(&self) -> u32 {
        self.key & !0xf
    }

    pub(super) fn count(&self) -> u8 {
        (self.key & 0xf) as u8
    }

    pub(super) fn set_count(&mut self, count: u8) {
        self.key = self.tag() | count.min(15) as u32;
    }

    pub(super) fn next(&self) -> u64 {
        self.next[0] as u64 | (self.next[1] as u64) << 32
    }
}

/// The 28-bit hash of an offset that keys the correlation table (in the high bits).
pub(super) fn tag(offset: u64) -> u32 {
    (offset.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32 & !0xf
}

impl Predictor {
    /// Counts `offset` as the successor of the previous request; a new entry only
    /// when `insert` (the request was not predicted by a pattern).
    pub(super) fn learn_link(&mut self, offset: u64, insert: bool) {
        let (Some(prev), cap) = (self.last(), self.limits.links as usize) else {
            return;
        };
        if cap == 0 {
            return;
        }
        let t = tag(prev);
        let fresh = Link::new(t, offset);
        if let Some(pos) = self.links.iter().position(|l| l.tag() == t) {
            let l = &mut self.links[pos];
            if l.next() == offset {
                l.set_count(l.count() + 1);
            } else if l.count() <= 1 {
                *l = fresh;
            } else {
                l.set_count(l.count() - 1);
            }
            self.links[..=pos].rotate_right(1);
            return;
        }
        if !insert {
            return;
        }
        if self.links.capacity() == 0 {
            self.links.reserve_exact(cap);
        }
        if self.links.len() == cap {
            // Replace the least recent entry seen at most once; if every entry has
            // been confirmed, age the least recent one instead.
            match self.links.iter().rposition(|l| l.count() <= 1) {
                Some(pos) => {
                    self.links.remove(pos);
                }
                None => {
                    let l = self.links.last_mut().expect("full table");
                    l.set_count(l.count() - 1);
                    return;
                }
            }
        }
        self.links.insert(0, fresh);
    }

    /// Successors of `from` along the correlation table, each at most once.
    pub(super) fn chain(&self, from: u64, len: u64, count: usize) -> Vec<Prediction> {
        let mut out: Vec<Prediction> = Vec::new();
        let mut at = from;
        let mut confidence = 1.0f32;
        while out.len() < count {
            let t = tag(at);
            let Some(l) = self
                .links
                .iter()
                .find(|l| l.tag() == t && l.count() >= self.limits.link_threshold)
            else {
                break;
            };
            let next = l.next();
            if next == from || out.iter().any(|p| p.offset == next) {
                break;
            }
            confidence *= l.count() as f32 / (l.count() as f32 + 1.0);
            out.push(Prediction {
                offset: next,
                len,
                confidence,
            });
            at = next;
        }
        out
    }
}
