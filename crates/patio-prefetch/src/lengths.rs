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
//!   were (a slowly decaying maximum): a header read whose entry's data follows it
//!   gets the data prefetched with it, even though the data's length varies. Only
//!   classes seen followed by contiguous data take an entry.
//!
//! Three successor entries and four body entries, bit-packed (48 B in all); the most
//! recently used first.

/// Entries of the successor table and of the body table.
const PAIRS: usize = 3;
const BODIES: usize = 4;
/// Votes a successor length or a contiguous follower needs before it is used.
const TRUSTED: u64 = 2;
/// Longest body predicted after a short read.
pub const MAX_BODY: u64 = 128 << 10;
/// The body's decaying maximum loses `1/BODY_DECAY` of itself per contiguous
/// follower: it aims at the largest recent data length, since bytes prefetched past
/// the data cost only transfer time while a data read longer than the body is a miss
/// that costs a whole request's latency (on the compss log, a decay of 1/4 per entry
/// left 368 reads missed, 1/64 left 307).
const BODY_DECAY: u32 = 64;
/// Lengths up to this are learned (28 bits); longer requests are not.
const MAX_LEN: u64 = (1 << 28) - 1;

/// `from` (28 bits) · `to` (28 bits) · `votes` (8 bits); 0 is an unused entry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pair(u64);

impl Pair {
    fn new(from: u64, to: u64, votes: u64) -> Self {
        Pair(from << 36 | to << 8 | votes)
    }
    fn from(self) -> u64 {
        self.0 >> 36
    }
    fn to(self) -> u64 {
        (self.0 >> 8) & MAX_LEN
    }
    fn votes(self) -> u64 {
        self.0 & 0xff
    }
}

/// `class` (7 bits: `1 + log2` of the length a body follows; 0 unused) · `follows`
/// (2 bits: votes for "followed by a contiguous read") · `len` (18 bits: decaying
/// maximum of the contiguous followers' lengths, at most [`MAX_BODY`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Body(u32);

impl Body {
    fn new(class: u32, follows: u32, len: u32) -> Self {
        Body(class << 25 | follows << 18 | len)
    }
    fn class(self) -> u32 {
        self.0 >> 25
    }
    fn follows(self) -> u32 {
        (self.0 >> 18) & 3
    }
    fn len(self) -> u32 {
        self.0 & ((1 << 18) - 1)
    }
}

/// Learned request lengths of one stream (48 B).
#[derive(Clone, Debug, Default)]
pub struct Lengths {
    pairs: [Pair; PAIRS],
    bodies: [Body; BODIES],
    /// Length of the previous request plus one (0: none yet, or too long to learn).
    prev: u32,
}

fn small(len: u64) -> Option<u64> {
    (len <= MAX_LEN).then_some(len)
}

fn class(len: u64) -> u32 {
    u64::BITS - len.leading_zeros() + 1
}

/// Moves entry `i` to the front.
fn promote<T: Copy>(table: &mut [T], i: usize) {
    table[..=i].rotate_right(1);
}

impl Lengths {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one request of `len` bytes; `contiguous`: it starts where the previous
    /// one ended.
    pub fn observe(&mut self, len: u64, contiguous: bool) {
        if let Some(prev) = (self.prev as u64).checked_sub(1) {
            if let Some(to) = small(len) {
                self.vote_pair(prev, to);
            }
            self.vote_body(class(prev), contiguous, len);
        }
        self.prev = small(len).map_or(0, |l| l as u32 + 1);
    }

    fn vote_pair(&mut self, from: u64, to: u64) {
        match self
            .pairs
            .iter()
            .position(|p| p.votes() > 0 && p.from() == from)
        {
            Some(i) => {
                let p = self.pairs[i];
                self.pairs[i] = if p.to() == to {
                    Pair::new(from, to, (p.votes() + 1).min(8))
                } else if p.votes() > 1 {
                    Pair::new(from, p.to(), p.votes() - 1)
                } else {
                    Pair::new(from, to, 1)
                };
                promote(&mut self.pairs, i);
            }
            None => {
                self.pairs[PAIRS - 1] = Pair::new(from, to, 1);
                promote(&mut self.pairs, PAIRS - 1);
            }
        }
    }

    fn vote_body(&mut self, class: u32, contiguous: bool, len: u64) {
        let i = match self.bodies.iter().position(|b| b.class() == class) {
            Some(i) => i,
            // A class never seen followed by contiguous data is as good as absent:
            // it takes no entry (the data lengths after headers, each followed by a
            // jump, would otherwise evict the headers' classes).
            None if !contiguous => return,
            None => {
                self.bodies[BODIES - 1] = Body::new(class, 0, 0);
                BODIES - 1
            }
        };
        let b = self.bodies[i];
        self.bodies[i] = if contiguous {
            let len = len.min(MAX_BODY) as u32;
            let decayed = b.len() - b.len() / BODY_DECAY;
            Body::new(class, (b.follows() + 1).min(3), len.max(decayed))
        } else {
            Body::new(class, b.follows().saturating_sub(1), b.len())
        };
        promote(&mut self.bodies, i);
    }

    /// The length expected after a request of length `len`, once seen often enough.
    pub fn next_len(&self, len: u64) -> Option<u64> {
        let from = small(len)?;
        self.pairs
            .iter()
            .find(|p| p.votes() >= TRUSTED && p.from() == from)
            .map(|p| p.to())
    }

    /// The bytes expected to be read right after a request of length `len`, when
    /// requests of its class are usually followed by contiguous ones.
    pub fn body_after(&self, len: u64) -> Option<u64> {
        let c = class(len);
        self.bodies
            .iter()
            .find(|b| b.class() == c && b.follows() >= TRUSTED as u32 && b.len() > 0)
            .map(|b| b.len() as u64)
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
        for i in 0..6u64 {
            l.observe(64, false);
            l.observe(4096 + 512 * i, true);
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
    fn data_followed_by_jumps_does_not_evict_header_classes() {
        let mut l = Lengths::new();
        // Headers of two length classes, data of many classes, each data read followed
        // by a jump to the next header.
        for i in 0..40u64 {
            l.observe(if i % 3 == 0 { 40 } else { 90 }, false);
            l.observe(300 << (i % 9), true);
        }
        assert!(l.body_after(40).is_some());
        assert!(l.body_after(90).is_some());
        // The body aims at the largest recent data length.
        assert!(
            l.body_after(90).unwrap() >= 60 << 10,
            "{:?}",
            l.body_after(90)
        );
    }

    #[test]
    fn successor_lengths_by_majority() {
        let mut l = Lengths::new();
        for _ in 0..10 {
            l.observe(100, true);
            l.observe(60, true);
        }
        assert_eq!(l.next_len(100), Some(60));
        assert_eq!(l.next_len(60), Some(100));
        // One odd successor does not overturn a majority.
        l.observe(7, false);
        assert_eq!(l.next_len(100), Some(60));
        assert_eq!(l.next_len(7), None);
        assert_eq!(std::mem::size_of::<Lengths>(), 48);
    }
}
