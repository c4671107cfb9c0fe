//! Disjoint byte ranges with an owner each: which pattern of a plan has claimed which
//! bytes of the file. Used to cut a pattern's footprint into the bytes still free and
//! the bytes other patterns hold.

use std::collections::BTreeMap;

/// Disjoint half-open ranges `[start, end)`, each with an owner.
#[derive(Clone, Debug, Default)]
pub struct Claims {
    /// start → (end, owner)
    ranges: BTreeMap<u64, (u64, usize)>,
}

/// What [`Claims::claim`] found for one range.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claimed {
    /// The parts that were free (now owned by the caller), in offset order.
    pub free: Vec<(u64, u64)>,
    /// Bytes already held, by owner, in first-seen order.
    pub held: Vec<(usize, u64)>,
}

impl Claims {
    /// Claims `[start, end)` for `owner`: the free parts become `owner`'s, the parts
    /// others hold stay theirs.
    pub fn claim(&mut self, start: u64, end: u64, owner: usize) -> Claimed {
        let mut out = Claimed::default();
        if start >= end {
            return out;
        }
        let mut at = start;
        // The range that may start before `start` and reach into it.
        let first = self
            .ranges
            .range(..=start)
            .next_back()
            .map(|(&s, &v)| (s, v))
            .filter(|&(_, (e, _))| e > start);
        let later: Vec<(u64, (u64, usize))> = self
            .ranges
            .range(start..end)
            .map(|(&s, &v)| (s, v))
            .filter(|&(s, _)| Some(s) != first.map(|f| f.0))
            .collect();
        for (s, (e, o)) in first.into_iter().chain(later) {
            if s > at {
                out.free.push((at, s));
            }
            let held = e.min(end) - s.max(at);
            match out.held.iter_mut().find(|(w, _)| *w == o) {
                Some((_, b)) => *b += held,
                None => out.held.push((o, held)),
            }
            at = at.max(e.min(end));
        }
        if at < end {
            out.free.push((at, end));
        }
        for &(s, e) in &out.free {
            self.ranges.insert(s, (e, owner));
        }
        out
    }

    /// The parts of `[start, end)` nobody holds, in offset order.
    pub fn unclaimed(&self, start: u64, end: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = start;
        for (&s, &(e, _)) in self.ranges.range(..end) {
            if e <= at {
                continue;
            }
            if s > at {
                out.push((at, s));
            }
            at = at.max(e);
        }
        if at < end {
            out.push((at, end));
        }
        out
    }
}

/// Byte ranges seen so far, merged (one process's footprint).
#[derive(Clone, Debug, Default)]
pub struct Seen(Claims);

impl Seen {
    /// Marks `[start, end)` seen; returns the parts that were new, in offset order.
    pub fn add(&mut self, start: u64, end: u64) -> Vec<(u64, u64)> {
        self.0.claim(start, end, 0).free
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Against a byte array of owners.
        #[test]
        fn claims_match_a_byte_model(ops in prop::collection::vec((0u64..200, 0u64..60), 1..40)) {
            let mut claims = Claims::default();
            let mut model: Vec<Option<usize>> = vec![None; 300];
            for (owner, &(start, len)) in ops.iter().enumerate() {
                let end = start + len;
                let got = claims.claim(start, end, owner);
                let mut free = Vec::new();
                let mut held: Vec<(usize, u64)> = Vec::new();
                for x in start..end {
                    match model[x as usize] {
                        None => {
                            match free.last_mut() {
                                Some((_, e)) if *e == x => *e = x + 1,
                                _ => free.push((x, x + 1)),
                            }
                            model[x as usize] = Some(owner);
                        }
                        Some(o) => match held.iter_mut().find(|(w, _)| *w == o) {
                            Some((_, b)) => *b += 1,
                            None => held.push((o, 1)),
                        },
                    }
                }
                prop_assert_eq!(&got.free, &free);
                let mut a = got.held.clone();
                a.sort();
                held.sort();
                prop_assert_eq!(a, held);
                let open: Vec<(u64, u64)> = claims.unclaimed(0, 300);
                let mut expect = Vec::new();
                for x in 0..300u64 {
                    if model[x as usize].is_none() {
                        match expect.last_mut() {
                            Some((_, e)) if *e == x => *e = x + 1,
                            _ => expect.push((x, x + 1)),
                        }
                    }
                }
                prop_assert_eq!(open, expect);
            }
        }
    }
}
