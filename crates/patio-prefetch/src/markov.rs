//! The Markov baseline (Oly & Reed 2002, as described in section 4.3 of the
//! pattern-detection paper): the file is cut into fixed blocks (8 KiB by default,
//! the paper's choice for Pagoda), every block a read touches is a state, and the
//! model counts transitions from each block to the block read next.
//!
//! * **Training.** The model is learned on an earlier run of the same program
//!   ([`Markov::train`]) and saved ([`Markov::save`], blob magic `PMKV`); it keeps
//!   learning while it predicts.
//! * **Prediction.** After a read, from its last block the model follows the most
//!   frequent successor, then that block's most frequent successor, and so on, until
//!   the blocks cover `depth` requests of the last request's size; the confidence of a
//!   block is the product of the transition probabilities leading to it. Adjacent
//!   blocks are issued as one range. A block never read before has no successors: the
//!   model cannot predict in regions the training run did not read.
//! * **Memory.** At most [`MAX_SUCCESSORS`] successors per block (the least frequent
//!   is replaced); [`Policy::model_bytes`] reports the table's heap size.

use crate::policy::{Hint, Policy};
use patio_core::codec::{put_ivarint, put_uvarint, read_blob, write_blob, Cursor, BLOB_HEADER};
use std::collections::HashMap;

/// Block size of the paper's Markov baseline.
pub const DEFAULT_BLOCK: u64 = 8192;
/// Successors kept per block.
pub const MAX_SUCCESSORS: usize = 8;

/// The magic of a saved markov model.
pub(crate) const MAGIC: &[u8; 4] = b"PMKV";
const VERSION: u16 = 1;

/// Block-transition model and predictor.
#[derive(Clone, Debug)]
pub struct Markov {
    block: u64,
    /// Block → `(successor, count)`, most frequent first.
    table: HashMap<u64, Vec<(u64, u32)>>,
    last: Option<u64>,
}

impl Markov {
    pub fn new(block: u64) -> Self {
        Markov {
            block: block.max(1),
            table: HashMap::new(),
            last: None,
        }
    }

    pub fn block(&self) -> u64 {
        self.block
    }

    /// Blocks with at least one successor.
    pub fn states(&self) -> usize {
        self.table.len()
    }

    /// Learns from a run's read requests (without predicting); the next stream
    /// starts afresh (no transition from the training run's last block).
    pub fn train(&mut self, requests: &[(u64, u64)]) {
        for &(o, l) in requests {
            self.learn(o, l);
        }
        self.last = None;
    }

    fn learn(&mut self, offset: u64, len: u64) {
        let first = offset / self.block;
        let last = offset.saturating_add(len.max(1) - 1) / self.block;
        for b in first..=last {
            if let Some(prev) = self.last.filter(|&p| p != b) {
                self.count(prev, b);
            }
            self.last = Some(b);
        }
    }

    fn count(&mut self, from: u64, to: u64) {
        let succ = self.table.entry(from).or_default();
        match succ.iter().position(|s| s.0 == to) {
            Some(i) => {
                succ[i].1 += 1;
                // Keep most frequent first (one bubble step suffices per increment).
                let mut i = i;
                while i > 0 && succ[i - 1].1 < succ[i].1 {
                    succ.swap(i - 1, i);
                    i -= 1;
                }
            }
            None if succ.len() < MAX_SUCCESSORS => succ.push((to, 1)),
            None => *succ.last_mut().expect("full") = (to, 1),
        }
    }

    /// The chain of most frequent successors from `block`, with cumulative
    /// probabilities, at most `blocks` long, without revisiting a block.
    fn chain(&self, block: u64, blocks: usize) -> Vec<(u64, f32)> {
        let mut out: Vec<(u64, f32)> = Vec::new();
        let (mut at, mut p) = (block, 1.0f32);
        while out.len() < blocks {
            let Some(succ) = self.table.get(&at) else {
                break;
            };
            let total: u32 = succ.iter().map(|s| s.1).sum();
            let (next, count) = succ[0];
            p *= count as f32 / total.max(1) as f32;
            if next == block || out.iter().any(|&(b, _)| b == next) {
                break;
            }
            out.push((next, p));
            at = next;
        }
        out
    }

    /// The model as a checksummed blob (docs/FORMATS.md, "Markov model").
    pub fn save_bytes(&self) -> Vec<u8> {
        let mut payload = Vec::new();
        put_uvarint(&mut payload, self.block);
        let mut keys: Vec<&u64> = self.table.keys().collect();
        keys.sort_unstable();
        put_uvarint(&mut payload, keys.len() as u64);
        let mut prev = 0u64;
        for &k in keys {
            put_uvarint(&mut payload, k - prev);
            prev = k;
            let succ = &self.table[&k];
            put_uvarint(&mut payload, succ.len() as u64);
            for &(s, c) in succ {
                put_ivarint(&mut payload, s.wrapping_sub(k) as i64);
                put_uvarint(&mut payload, c as u64);
            }
        }
        write_blob(MAGIC, VERSION, &payload)
    }

    /// A model saved by [`Markov::save_bytes`].
    pub fn load(bytes: &[u8]) -> patio_core::Result<Self> {
        let (_, payload) = read_blob(MAGIC, VERSION, bytes)?;
        let mut c = Cursor::with_base(payload, BLOB_HEADER);
        let block = c.uvarint()?;
        if block == 0 {
            return Err(c.error("block size 0"));
        }
        let n = c.count(c.remaining(), "block")?;
        let mut m = Markov::new(block);
        let mut key = 0u64;
        for i in 0..n {
            let at = c.position();
            let delta = c.uvarint()?;
            key = key
                .checked_add(delta)
                .filter(|_| i == 0 || delta > 0)
                .ok_or_else(|| patio_core::CoreError::corrupt(at, "blocks out of order"))?;
            let k = c.count(MAX_SUCCESSORS, "successor")?;
            let mut succ = Vec::with_capacity(k);
            for _ in 0..k {
                let s = key.wrapping_add(c.ivarint()? as u64);
                let at = c.position();
                let count = u32::try_from(c.uvarint()?)
                    .ok()
                    .filter(|&x| x > 0)
                    .ok_or_else(|| patio_core::CoreError::corrupt(at, "bad transition count"))?;
                succ.push((s, count));
            }
            succ.sort_by_key(|s| std::cmp::Reverse(s.1));
            if !succ.is_empty() {
                m.table.insert(key, succ);
            }
        }
        if !c.is_at_end() {
            return Err(c.error("trailing bytes after the Markov model"));
        }
        Ok(m)
    }
}

impl PartialEq for Markov {
    fn eq(&self, other: &Self) -> bool {
        self.block == other.block && self.table == other.table
    }
}

impl Policy for Markov {
    fn name(&self) -> &'static str {
        "markov"
    }

    fn observe(&mut self, offset: u64, len: u64, depth: usize) -> Vec<Hint> {
        self.learn(offset, len);
        let Some(last) = self.last else {
            return Vec::new();
        };
        let per_request = len.div_ceil(self.block).max(1) as usize;
        let chain = self.chain(last, depth.max(1) * per_request);
        // Adjacent blocks become one range (confidence of its first block).
        let mut hints: Vec<Hint> = Vec::new();
        for (j, (b, p)) in chain.into_iter().enumerate() {
            let at = b * self.block;
            let reads = (j / per_request + 1) as u32;
            match hints.last_mut() {
                Some(h) if h.offset + h.len == at => {
                    h.len += self.block;
                    h.reads = reads;
                }
                _ => hints.push(Hint::new(at, self.block, p, reads as u64)),
            }
        }
        hints
    }

    fn model_bytes(&self) -> usize {
        let entry = std::mem::size_of::<(u64, Vec<(u64, u32)>)>() + 1;
        std::mem::size_of::<Self>()
            + self.table.capacity() * entry
            + self
                .table
                .values()
                .map(|v| v.capacity() * std::mem::size_of::<(u64, u32)>())
                .sum::<usize>()
    }

    fn save(&self) -> Option<Vec<u8>> {
        Some(self.save_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figure_19_example() {
        // Blocks 2, 3, 6, 7, 10, 11 read: after block 3 comes block 6.
        let mut m = Markov::new(1);
        m.train(&[(2, 2), (6, 2), (10, 2)]);
        assert_eq!(m.chain(3, 1), [(6, 1.0)]);
        assert_eq!(
            m.chain(2, 10).iter().map(|c| c.0).collect::<Vec<_>>(),
            [3, 6, 7, 10, 11]
        );
    }

    #[test]
    fn predicts_learned_successors_as_ranges() {
        let b = DEFAULT_BLOCK;
        let reqs: Vec<(u64, u64)> = (0..10).map(|i| (i * 5 * b, 2 * b)).collect();
        let mut m = Markov::new(b);
        m.train(&reqs);
        // Reading the third request predicts the next two requests (two blocks each).
        let hints = m.observe(2 * 5 * b, 2 * b, 2);
        assert_eq!(
            hints.iter().map(|h| (h.offset, h.len)).collect::<Vec<_>>(),
            [(15 * b, 2 * b), (20 * b, 2 * b)]
        );
        assert!(hints.iter().all(|h| h.confidence == 1.0));
        // Unseen regions: nothing.
        assert!(m.observe(1000 * b, b, 4).is_empty());
    }

    #[test]
    fn most_frequent_successor_wins() {
        let mut m = Markov::new(1);
        for _ in 0..3 {
            m.train(&[(1, 1), (5, 1)]);
        }
        m.train(&[(1, 1), (9, 1)]);
        let c = m.chain(1, 1);
        assert_eq!(c[0].0, 5);
        assert!((c[0].1 - 0.75).abs() < 1e-6);
        // Successor lists are bounded.
        for s in 100..200 {
            m.train(&[(1, 1), (s, 1)]);
        }
        assert!(m.table[&1].len() <= MAX_SUCCESSORS);
        assert_eq!(m.table[&1][0], (5, 3));
    }

    #[test]
    fn save_load_round_trip() {
        let mut m = Markov::new(DEFAULT_BLOCK);
        let reqs: Vec<(u64, u64)> = (0..500)
            .map(|i| ((i * 7919 % 1000) * 4096, 4096 + (i % 3) * 8192))
            .collect();
        m.train(&reqs);
        let bytes = m.save_bytes();
        let back = Markov::load(&bytes).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.save_bytes(), bytes);
        assert!(m.model_bytes() > m.states() * 16);
        // Damage is refused.
        assert!(Markov::load(&bytes[..bytes.len() - 1]).is_err());
        let mut bad = bytes.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        assert!(Markov::load(&bad).is_err());
    }
}
