//! Request lengths learned per phase, for the `pattern` policy: the online analyzer
//! predicts *where* the next requests start but repeats the last request's length,
//! which is wrong wherever lengths alternate (a 30–80 B archive entry header, then its
//! data) or change between phases.
//!
//! * **Successor lengths.** For a few recent lengths, the length of the request that
//!   followed, kept by majority vote (a different successor lowers the count and
//!   replaces it at zero), so that `header → body → header` pairs of fixed sizes are
//!   predicted with the right length once seen twice.
//! * **Bodies after short reads.** For a few power-of-two length classes, whether a
//!   read of that class is usually followed by a contiguous read, and how long those
//!   were (a decaying maximum): a header read whose entry's data follows it gets the
//!   data prefetched with it, even though the data's length varies.
//!
//! Four entries of each (40 B in all); the most recently used first.

/// Entries of each table.
const ENTRIES: usize = 4;
/// Votes a successor length or a contiguous follower needs before it is used.
const TRUSTED: u8 = 2;
/// Longest body predicted after a short read.
pub const MAX_BODY: u64 = 128 << 10;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pair {
    from: u32,
    to: u32,
    votes: u8,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Body {
    /// `1 + log2(length)` of the read the body follows (0: unused entry).
    class: u8,
    /// Votes for "followed by a contiguous read" (0 to 3).
    follows: u8,
    /// Decaying maximum of the contiguous followers' lengths.
    len: u32,
}

/// Learned request lengths of one stream.
#[derive(Clone, Debug, Default)]
pub struct Lengths {
    pairs: [Pair; ENTRIES],
    bodies: [Body; ENTRIES],
    /// End and length of the previous request.
    prev: Option<(u64, u64)>,
}

fn small(len: u64) -> u32 {
    len.min(u32::MAX as u64) as u32
}

fn class(len: u64) -> u8 {
    (u64::BITS - len.leading_zeros()) as u8 + 1
}

/// Moves entry `i` to the front.
fn promote<T: Copy>(table: &mut [T], i: usize) {
    table[..=i].rotate_right(1);
}

impl Lengths {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one request.
    pub fn observe(&mut self, offset: u64, len: u64) {
        if let Some((prev_end, prev_len)) = self.prev {
            self.vote_pair(small(prev_len), small(len));
            self.vote_body(class(prev_len), offset == prev_end, len);
        }
        self.prev = Some((offset.saturating_add(len), len));
    }

    fn vote_pair(&mut self, from: u32, to: u32) {
        match self
            .pairs
            .iter()
            .position(|p| p.votes > 0 && p.from == from)
        {
            Some(i) => {
                let p = &mut self.pairs[i];
                if p.to == to {
                    p.votes = p.votes.saturating_add(1).min(8);
                } else if p.votes > 1 {
                    p.votes -= 1;
                } else {
                    *p = Pair { from, to, votes: 1 };
                }
                promote(&mut self.pairs, i);
            }
            None => {
                self.pairs[ENTRIES - 1] = Pair { from, to, votes: 1 };
                promote(&mut self.pairs, ENTRIES - 1);
            }
        }
    }

    fn vote_body(&mut self, class: u8, contiguous: bool, len: u64) {
        let i = match self.bodies.iter().position(|b| b.class == class) {
            Some(i) => i,
            None => {
                self.bodies[ENTRIES - 1] = Body {
                    class,
                    follows: 0,
                    len: 0,
                };
                ENTRIES - 1
            }
        };
        let b = &mut self.bodies[i];
        if contiguous {
            b.follows = (b.follows + 1).min(3);
            let len = small(len.min(MAX_BODY));
            b.len = len.max(b.len - b.len / 4);
        } else {
            b.follows = b.follows.saturating_sub(1);
        }
        promote(&mut self.bodies, i);
    }

    /// The length expected after a request of length `len`, once seen often enough.
    pub fn next_len(&self, len: u64) -> Option<u64> {
        let from = small(len);
        self.pairs
            .iter()
            .find(|p| p.votes >= TRUSTED && p.from == from)
            .map(|p| p.to as u64)
    }

    /// The bytes expected to be read right after a request of length `len`, when
    /// requests of its class are usually followed by contiguous ones.
    pub fn body_after(&self, len: u64) -> Option<u64> {
        let c = class(len);
        self.bodies
            .iter()
            .find(|b| b.class == c && b.follows >= TRUSTED && b.len > 0)
            .map(|b| b.len as u64)
    }

    /// Bytes of state.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_body_pairs() {
        let mut l = Lengths::new();
        let mut at = 0;
        for i in 0..6u64 {
            let body = 4096 + 512 * i;
            l.observe(at, 64);
            l.observe(at + 64, body);
            at += 1 << 20;
        }
        // Headers are followed by their bodies: a decaying maximum of their lengths.
        let b = l.body_after(64).unwrap();
        assert!((4096..=4096 + 512 * 5).contains(&b), "{b}");
        // Bodies are followed by jumps, not by contiguous reads.
        assert_eq!(l.body_after(4096 + 512 * 5), None);
        // No fixed successor length of a header (the bodies vary).
        assert_eq!(l.next_len(64), None);
    }

    #[test]
    fn successor_lengths_by_majority() {
        let mut l = Lengths::new();
        for i in 0..10u64 {
            l.observe(i * 200, 100);
            l.observe(i * 200 + 100, 60);
        }
        assert_eq!(l.next_len(100), Some(60));
        assert_eq!(l.next_len(60), Some(100));
        // One odd successor does not overturn a majority.
        l.observe(5000, 7);
        assert_eq!(l.next_len(100), Some(60));
        assert_eq!(l.next_len(7), None);
    }
}
