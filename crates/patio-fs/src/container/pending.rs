//! The unpublished writes of one file's writers, by byte range. Records are ordered
//! by when they are published, and dirty writers publish in the order they became
//! dirty; so a writer with older unpublished writes must publish before it writes
//! over what a writer that became dirty after it has not published yet — else its
//! new write would come out older than the other's. Only overlapping writes pay:
//! processes writing disjoint blocks of one file (N-1) never publish for it.

use std::collections::BTreeMap;

/// Ranges kept in all before every writer is made to publish (memory bound).
const MAX_RANGES: usize = 1 << 20;

#[derive(Default)]
pub(super) struct Pending {
    /// `(writer id, dirty since, start → end of its unpublished writes)`.
    writers: Vec<(usize, u64, BTreeMap<u64, u64>)>,
    ranges: usize,
}

impl Pending {
    /// Whether writer `id`, dirty since `since`, must publish before writing
    /// `[start, end)`: another writer that became dirty after it has unpublished
    /// writes there (or too many ranges are kept).
    pub(super) fn must_publish(&self, id: usize, since: u64, start: u64, end: u64) -> bool {
        self.ranges >= MAX_RANGES
            || self
                .writers
                .iter()
                .filter(|(other, s, _)| *other != id && *s > since)
                .any(|(_, _, r)| overlaps(r, start, end))
    }

    /// Writer `id`, dirty since `since`, wrote `[start, end)` and has not published it.
    pub(super) fn note(&mut self, id: usize, since: u64, start: u64, end: u64) {
        let i = match self.writers.iter().position(|(w, _, _)| *w == id) {
            Some(i) => i,
            None => {
                self.writers.push((id, since, BTreeMap::new()));
                self.writers.len() - 1
            }
        };
        let (_, s, ranges) = &mut self.writers[i];
        *s = since;
        let before = ranges.len();
        insert(ranges, start, end);
        self.ranges = self.ranges + ranges.len() - before;
    }

    /// Every writer published.
    pub(super) fn clear(&mut self) {
        self.writers.clear();
        self.ranges = 0;
    }
}

fn overlaps(ranges: &BTreeMap<u64, u64>, start: u64, end: u64) -> bool {
    // The last range starting before `end` is the only one that can reach `start`
    // (they are disjoint).
    ranges
        .range(..end)
        .next_back()
        .is_some_and(|(_, &e)| e > start)
        || ranges.range(start..end).next().is_some()
}

/// Adds `[start, end)` to disjoint `ranges`, merging what it meets or touches.
fn insert(ranges: &mut BTreeMap<u64, u64>, mut start: u64, mut end: u64) {
    if let Some((&s, &e)) = ranges.range(..=start).next_back() {
        if e >= start {
            start = s;
            end = end.max(e);
            ranges.remove(&s);
        }
    }
    let inside: Vec<u64> = ranges.range(start..=end).map(|(&s, _)| s).collect();
    for s in inside {
        let e = ranges.remove(&s).expect("listed");
        end = end.max(e);
    }
    ranges.insert(start, end);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a byte map: a range overlaps exactly when a byte of it was noted.
        #[test]
        fn ranges_match_a_byte_map(
            writes in prop::collection::vec((0..200u64, 1..40u64), 1..40),
            probe in (0..240u64, 1..40u64),
        ) {
            let mut r = BTreeMap::new();
            let mut bytes = [false; 240];
            for (s, n) in writes {
                insert(&mut r, s, s + n);
                for b in &mut bytes[s as usize..(s + n) as usize] {
                    *b = true;
                }
            }
            let (s, n) = probe;
            let want = bytes[s as usize..(s + n).min(240) as usize].iter().any(|&b| b);
            prop_assert_eq!(overlaps(&r, s, s + n), want);
            // Disjoint and not touching.
            let v: Vec<_> = r.into_iter().collect();
            prop_assert!(v.windows(2).all(|p| p[0].1 < p[1].0));
        }
    }

    #[test]
    fn only_a_newer_dirty_writer_s_overlapping_writes_count() {
        let mut p = Pending::default();
        p.note(1, 10, 0, 100);
        p.note(2, 20, 200, 300);
        // Writer 1 (dirty since 10) over writer 2's unpublished bytes: publish first.
        assert!(p.must_publish(1, 10, 250, 260));
        assert!(!p.must_publish(1, 10, 100, 200));
        // Writer 2 over writer 1's older ones: its write is newer anyway.
        assert!(!p.must_publish(2, 20, 0, 50));
        p.clear();
        assert!(!p.must_publish(1, 10, 250, 260));
    }
}
