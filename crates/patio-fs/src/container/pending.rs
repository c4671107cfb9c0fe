//! The unpublished writes of one file's writers, by byte range. Records are ordered
//! by when they are published, and dirty writers publish in the order they became
//! dirty; so a writer with older unpublished writes must publish before it writes
//! over what a writer that became dirty after it has not published yet — else its
//! new write would come out older than the other's. Only overlapping writes pay:
//! processes writing disjoint blocks of one file (N-1) never publish for it.
//!
//! One map for all writers: disjoint byte ranges, each with the latest "dirty since"
//! of the writers whose unpublished writes cover it. A writer dirty since `s`
//! conflicts exactly where a range's value is above `s` (its own writes there carry
//! `s` itself). A write costs one lookup and one insertion whatever the number of
//! writers.

use std::collections::BTreeMap;

/// Ranges kept before every writer is made to publish (memory bound).
const MAX_RANGES: usize = 1 << 20;

#[derive(Default)]
pub(super) struct Pending {
    /// start → (end, the latest dirty-since of the writers whose unpublished writes
    /// cover `[start, end)`); disjoint.
    ranges: BTreeMap<u64, (u64, u64)>,
}

impl Pending {
    /// Whether a writer dirty since `since` must publish before writing `[start, end)`:
    /// a writer that became dirty after it has unpublished writes there (or too many
    /// ranges are kept).
    pub(super) fn must_publish(&self, since: u64, start: u64, end: u64) -> bool {
        if self.ranges.len() >= MAX_RANGES {
            return true;
        }
        let first = self
            .ranges
            .range(..start)
            .next_back()
            .filter(|(_, &(e, _))| e > start)
            .map(|(&s, _)| s)
            .unwrap_or(start);
        self.ranges
            .range(first..end)
            .any(|(_, &(_, latest))| latest > since)
    }

    /// A writer dirty since `since` wrote `[start, end)` and has not published it.
    pub(super) fn note(&mut self, since: u64, start: u64, end: u64) {
        if start >= end {
            return;
        }
        // Cut the ranges that straddle `start` and `end`, so that every range is then
        // inside or outside `[start, end)`.
        self.split_at(start);
        self.split_at(end);
        let inside: Vec<(u64, (u64, u64))> = self
            .ranges
            .range(start..end)
            .map(|(&s, &v)| (s, v))
            .collect();
        let mut at = start;
        for (s, (e, latest)) in inside {
            if s > at {
                self.ranges.insert(at, (s, since));
            }
            self.ranges.insert(s, (e, latest.max(since)));
            at = e;
        }
        if at < end {
            self.ranges.insert(at, (end, since));
        }
    }

    /// Splits the range that covers `x` (strictly inside it) at `x`.
    fn split_at(&mut self, x: u64) {
        if let Some((&s, &(e, latest))) = self.ranges.range(..x).next_back() {
            if e > x {
                self.ranges.insert(s, (x, latest));
                self.ranges.insert(x, (e, latest));
            }
        }
    }

    /// Every writer published.
    pub(super) fn clear(&mut self) {
        self.ranges.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a byte map of the latest dirty-since per byte.
        #[test]
        fn ranges_match_a_byte_map(
            writes in prop::collection::vec((0..200u64, 1..40u64, 1..5u64), 1..40),
            probe in (0..240u64, 1..40u64, 0..6u64),
        ) {
            let mut p = Pending::default();
            let mut bytes = [0u64; 240];
            for (s, n, since) in writes {
                p.note(since, s, s + n);
                for b in &mut bytes[s as usize..(s + n) as usize] {
                    *b = (*b).max(since);
                }
            }
            let (s, n, since) = probe;
            let want = bytes[s as usize..(s + n).min(240) as usize].iter().any(|&b| b > since);
            prop_assert_eq!(p.must_publish(since, s, s + n), want);
            let v: Vec<_> = p.ranges.iter().map(|(&s, &(e, _))| (s, e)).collect();
            prop_assert!(v.windows(2).all(|w| w[0].1 <= w[1].0), "disjoint");
        }
    }

    #[test]
    fn only_a_newer_dirty_writer_s_overlapping_writes_count() {
        let mut p = Pending::default();
        p.note(10, 0, 100);
        p.note(20, 200, 300);
        // The writer dirty since 10 over unpublished bytes of the one since 20.
        assert!(p.must_publish(10, 250, 260));
        assert!(!p.must_publish(10, 100, 200));
        // The one since 20 over the older writer's: its write is newer anyway.
        assert!(!p.must_publish(20, 0, 50));
        p.clear();
        assert!(!p.must_publish(10, 250, 260));
    }
}
