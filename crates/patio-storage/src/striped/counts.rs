//! Inputs of the reorganization cost models, counted on a [`Striping`]:
//!
//! * eq 3.1 (page-level model, REORGANIZATION §A.4): per target, `N_pg` = distinct
//!   `page_size` pages touched and `N_chk` = maximal contiguous runs in object space
//!   ([`Striping::page_counts`]);
//! * eq 4.1 (AMR model, §B.4): per target, the gaps `d` between successive
//!   non-contiguous runs in object space, binned short `(0, rpc]`, medium
//!   `(rpc, 10·rpc]` and long `> 10·rpc`, and the selection's total bytes
//!   ([`Striping::jump_counts`]).
//!
//! Both merge overlapping and adjacent extents first (in any input order), so the
//! counts describe the selected bytes, not how they were listed. A contiguous file
//! extent is one contiguous object range on every target it touches, so the work is
//! `O(n log n + n · min(targets, stripes per extent))`, whatever the extents' lengths.

use super::{Striping, StripingError};

/// eq 3.1 inputs: pages and chunks per target.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PageCounts {
    /// Distinct pages touched on each target.
    pub pages: Vec<u64>,
    /// Non-contiguous chunks on each target: maximal runs of consecutive pages in
    /// object space (page-level, as eq 3.1 counts them: scattered elements that share
    /// a page or sit on adjacent pages are one chunk, not one per element).
    pub chunks: Vec<u64>,
}

/// eq 4.1 inputs: jumps per target by distance class, and the selection's size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JumpCounts {
    /// Gaps in `(0, rpc_size]`.
    pub short: Vec<u64>,
    /// Gaps in `(rpc_size, 10 * rpc_size]`.
    pub medium: Vec<u64>,
    /// Gaps beyond `10 * rpc_size`.
    pub long: Vec<u64>,
    /// Bytes of the selection (overlaps counted once).
    pub contiguous_bytes: u64,
}

impl Striping {
    /// Sorted, disjoint, non-adjacent file ranges `[start, end)` covering `extents`.
    fn merged(&self, extents: &[(u64, u64)]) -> Result<Vec<(u64, u64)>, StripingError> {
        self.validate()?;
        for (i, &(offset, len)) in extents.iter().enumerate() {
            if offset.checked_add(len).is_none() {
                return Err(StripingError::Invalid(format!(
                    "extent {i} (offset {offset}, length {len}) does not end below 2^64"
                )));
            }
        }
        let mut ranges: Vec<(u64, u64)> = extents
            .iter()
            .filter(|e| e.1 > 0)
            .map(|&(o, l)| (o, o + l))
            .collect();
        ranges.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (start, end) in ranges {
            match out.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => out.push((start, end)),
            }
        }
        Ok(out)
    }

    /// Per target, the maximal contiguous object runs `[start, end)` of `extents`, in
    /// object order.
    fn object_runs(&self, ranges: &[(u64, u64)]) -> Vec<Vec<(u64, u64)>> {
        let stripe = self.stripe_size;
        let targets = self.targets as u64;
        let mut runs: Vec<Vec<(u64, u64)>> = vec![Vec::new(); self.targets];
        for &(start, end) in ranges {
            let first = start / stripe;
            let last = (end - 1) / stripe;
            // Each target's share of a contiguous extent is one contiguous range; the
            // stripes first..first+targets name every target involved once.
            for k in first..=last.min(first.saturating_add(targets - 1)) {
                let t = (k % targets) as usize;
                let (lo, hi) = (self.object_floor(t, start), self.object_floor(t, end));
                if lo >= hi {
                    continue;
                }
                match runs[t].last_mut() {
                    Some(run) if run.1 == lo => run.1 = hi,
                    _ => runs[t].push((lo, hi)),
                }
            }
        }
        runs
    }

    /// eq 3.1 inputs of `extents` (any order, overlaps allowed): distinct pages and
    /// maximal runs of consecutive pages per target, in object space.
    pub fn page_counts(&self, extents: &[(u64, u64)]) -> Result<PageCounts, StripingError> {
        let ranges = self.merged(extents)?;
        let page = self.page_size;
        let mut out = PageCounts {
            pages: vec![0; self.targets],
            chunks: vec![0; self.targets],
        };
        for (t, runs) in self.object_runs(&ranges).into_iter().enumerate() {
            let mut last_page: Option<u64> = None;
            for (start, end) in runs {
                let (first, last) = (start / page, (end - 1) / page);
                let shared = u64::from(last_page == Some(first));
                out.pages[t] += last - first + 1 - shared;
                if last_page.is_none_or(|lp| first > lp + 1) {
                    out.chunks[t] += 1;
                }
                last_page = Some(last);
            }
        }
        Ok(out)
    }

    /// eq 4.1 inputs of `extents` (any order, overlaps allowed): per target, the gaps
    /// between successive contiguous runs in object space by distance class, and the
    /// selection's bytes.
    pub fn jump_counts(&self, extents: &[(u64, u64)]) -> Result<JumpCounts, StripingError> {
        let ranges = self.merged(extents)?;
        let mut out = JumpCounts {
            short: vec![0; self.targets],
            medium: vec![0; self.targets],
            long: vec![0; self.targets],
            contiguous_bytes: ranges.iter().map(|r| r.1 - r.0).sum(),
        };
        for (t, runs) in self.object_runs(&ranges).into_iter().enumerate() {
            for pair in runs.windows(2) {
                let gap = pair[1].0 - pair[0].1;
                match self.seek_class(gap) {
                    super::SeekClass::Seq => {}
                    super::SeekClass::Near => out.short[t] += 1,
                    super::SeekClass::Mid => out.medium[t] += 1,
                    super::SeekClass::Far => out.long[t] += 1,
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    use crate::striped::tests::small as striping;

    /// Per target, the set of object offsets of the selected bytes.
    fn bytes_per_target(s: &Striping, extents: &[(u64, u64)]) -> Vec<BTreeSet<u64>> {
        let mut out = vec![BTreeSet::new(); s.targets];
        for &(o, l) in extents {
            for b in o..o + l {
                let (t, obj) = s.locate(b);
                out[t].insert(obj);
            }
        }
        out
    }

    /// Maximal runs of consecutive offsets.
    fn runs(set: &BTreeSet<u64>) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for &b in set {
            match out.last_mut() {
                Some(r) if r.1 == b => r.1 += 1,
                _ => out.push((b, b + 1)),
            }
        }
        out
    }

    proptest! {
        #[test]
        fn counts_match_bytewise_reference(
            targets in 1usize..4, stripe in 1u64..24, rpc in 1u64..16, page in 1u64..12,
            extents in prop::collection::vec((0u64..400, 0u64..60), 0..12),
        ) {
            let s = striping(targets, stripe, rpc, page);
            let per_target = bytes_per_target(&s, &extents);
            let pc = s.page_counts(&extents).unwrap();
            let jc = s.jump_counts(&extents).unwrap();
            let mut total = 0;
            for (t, set) in per_target.iter().enumerate() {
                let pages: BTreeSet<u64> = set.iter().map(|b| b / page).collect();
                prop_assert_eq!(pc.pages[t], pages.len() as u64);
                prop_assert_eq!(pc.chunks[t], runs(&pages).len() as u64);
                let r = runs(set);
                let (mut short, mut medium, mut long) = (0, 0, 0);
                for w in r.windows(2) {
                    let d = w[1].0 - w[0].1;
                    if d <= rpc { short += 1 } else if d <= 10 * rpc { medium += 1 } else { long += 1 }
                }
                prop_assert_eq!((jc.short[t], jc.medium[t], jc.long[t]), (short, medium, long));
                total += set.len() as u64;
            }
            prop_assert_eq!(jc.contiguous_bytes, total);
        }
    }

    #[test]
    fn hand_counted() {
        // 2 targets, 8-byte stripes, 8-byte RPCs, 4-byte pages.
        let s = striping(2, 8, 8, 4);
        // [0, 20): target 0 gets [0, 8) and [16, 20) → object [0, 12): one run, 3 pages;
        // target 1 gets [8, 16) → object [0, 8): one run, 2 pages.
        let pc = s.page_counts(&[(0, 20)]).unwrap();
        assert_eq!((pc.pages, pc.chunks), (vec![3, 2], vec![1, 1]));
        // File 1 → target 0, object 1; file 40 → stripe 5, target 1, object 16; file
        // 200 → stripe 25, target 1, object 96. Target 1's gap 96 - 17 = 79 is in
        // (8, 80]: medium.
        let jc = s.jump_counts(&[(200, 1), (1, 1), (40, 1)]).unwrap();
        assert_eq!(
            (jc.short, jc.medium, jc.long),
            (vec![0, 0], vec![0, 1], vec![0, 0])
        );
        assert_eq!(jc.contiguous_bytes, 3);
        // Object-contiguous across a file gap: file [0, 8) and [16, 24) are both on
        // target 0, objects [0, 8) and [8, 16): one chunk, no jump.
        let pc = s.page_counts(&[(16, 8), (0, 8)]).unwrap();
        assert_eq!(pc.chunks, vec![1, 0]);
        assert_eq!(s.jump_counts(&[(16, 8), (0, 8)]).unwrap().short, vec![0, 0]);
    }

    #[test]
    fn huge_extents_are_cheap_and_bad_ones_refused() {
        let s = Striping::lustre();
        let pc = s.page_counts(&[(0, 1 << 50)]).unwrap();
        assert_eq!(pc.chunks, vec![1; 8]);
        assert_eq!(pc.pages.iter().sum::<u64>(), (1u64 << 50) / 4096);
        assert!(s.page_counts(&[(u64::MAX, 1)]).is_err());
        assert!(s.jump_counts(&[(1, u64::MAX)]).is_err());
    }
}
