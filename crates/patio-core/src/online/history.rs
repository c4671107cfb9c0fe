//! The request history: the deltas between consecutive request offsets in a fixed
//! ring of 32-bit slots (a larger delta takes four).

/// Marks a delta that does not fit in 31 bits: `ESC, low half, high half, ESC`.
pub(super) const ESC: i32 = i32::MIN;

/// The deltas between consecutive request offsets, oldest first, in a fixed ring of
/// 32-bit slots. Whole entries leave the front when the ring is full.
#[derive(Clone, Debug)]
pub(super) struct DeltaRing {
    pub(super) slots: Box<[i32]>,
    pub(super) head: u16,
    pub(super) len: u16,
}

impl DeltaRing {
    pub(super) fn new(capacity: usize) -> Self {
        DeltaRing {
            slots: vec![0; capacity.max(4)].into(),
            head: 0,
            len: 0,
        }
    }

    pub(super) fn at(&self, i: usize) -> i32 {
        self.slots[(self.head as usize + i) % self.slots.len()]
    }

    pub(super) fn push(&mut self, delta: i64) {
        match i32::try_from(delta) {
            Ok(d) if d != ESC => self.push_entry(&[d]),
            _ => self.push_entry(&[ESC, delta as i32, (delta >> 32) as i32, ESC]),
        }
    }

    pub(super) fn push_entry(&mut self, entry: &[i32]) {
        let cap = self.slots.len();
        while self.len as usize + entry.len() > cap {
            let n = if self.at(0) == ESC { 4 } else { 1 };
            self.head = ((self.head as usize + n) % cap) as u16;
            self.len -= n as u16;
        }
        for &s in entry {
            let at = (self.head as usize + self.len as usize) % cap;
            self.slots[at] = s;
            self.len += 1;
        }
    }

    /// The deltas, newest first.
    pub(super) fn newest_first(&self) -> impl Iterator<Item = i64> + '_ {
        let mut i = self.len as usize;
        std::iter::from_fn(move || {
            if i == 0 {
                return None;
            }
            let s = self.at(i - 1);
            if s == ESC && i >= 4 {
                let (lo, hi) = (self.at(i - 3), self.at(i - 2));
                i -= 4;
                Some(((hi as i64) << 32) | (lo as u32 as i64))
            } else {
                i -= 1;
                Some(s as i64)
            }
        })
    }

    /// The offsets of the requests kept, oldest first, ending with `last`.
    pub(super) fn offsets(&self, last: u64) -> Vec<i64> {
        let mut out = vec![last as i64];
        for d in self.newest_first() {
            let prev = *out.last().expect("non-empty");
            out.push(prev.wrapping_sub(d));
        }
        out.reverse();
        out
    }
}
