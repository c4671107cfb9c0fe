//! The memory tier of the segment-grouping cache: an LRU of the items readers asked
//! for (*demand* items) beside the items a group brought ahead of demand (*ahead*
//! items: prefetched, nobody asked for them since) in at most `ahead_cap` bytes.
//!
//! **Never worse than the LRU inside, by construction.** Demand items leave only
//! from the LRU end, and only while the tier is over its budget; ahead items never
//! exceed `ahead_cap`. So the demand items are always the most recently used items
//! of the demand stream, at least `budget − ahead_cap` bytes of them: every access
//! a plain LRU of `budget − ahead_cap` bytes would hit, this tier hits too (the
//! ahead items then add hits of their own). An ahead item asked for becomes a demand
//! item (an LRU that missed would have inserted it there as well).

use crate::graph::Item;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

struct Entry {
    data: Arc<Vec<u8>>,
    stamp: u64,
    ahead: bool,
}

/// How a lookup found its item.
pub struct Found {
    pub data: Arc<Vec<u8>>,
    /// The item was ahead (a group brought it; this is its first use).
    pub was_ahead: bool,
}

/// The tier (see the module documentation). Items are at most `budget` bytes each.
pub struct MemTier {
    budget: u64,
    ahead_cap: u64,
    entries: HashMap<Item, Entry>,
    demand: BTreeMap<u64, Item>,
    ahead: BTreeMap<u64, Item>,
    demand_bytes: u64,
    ahead_bytes: u64,
    clock: u64,
    /// Ahead items dropped before anyone asked for them, not yet taken.
    wasted: Vec<Item>,
}

impl MemTier {
    pub fn new(budget: u64, ahead_cap: u64) -> Self {
        MemTier {
            budget,
            ahead_cap: ahead_cap.min(budget),
            entries: HashMap::new(),
            demand: BTreeMap::new(),
            ahead: BTreeMap::new(),
            demand_bytes: 0,
            ahead_bytes: 0,
            clock: 0,
            wasted: Vec::new(),
        }
    }

    pub fn bytes(&self) -> u64 {
        self.demand_bytes + self.ahead_bytes
    }

    pub fn ahead_cap(&self) -> u64 {
        self.ahead_cap
    }

    pub fn ahead_bytes(&self) -> u64 {
        self.ahead_bytes
    }

    pub fn contains(&self, item: &Item) -> bool {
        self.entries.contains_key(item)
    }

    pub fn items(&self) -> impl Iterator<Item = &Item> {
        self.entries.keys()
    }

    /// The bytes of `item` if held, leaving its place and kind as they are.
    pub fn peek(&self, item: Item) -> Option<Arc<Vec<u8>>> {
        self.entries.get(&item).map(|e| e.data.clone())
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// A reader asks for `item`: its bytes if held (it becomes the most recently
    /// used demand item).
    pub fn get(&mut self, item: Item) -> Option<Found> {
        let stamp = self.tick();
        let e = self.entries.get_mut(&item)?;
        let was_ahead = e.ahead;
        let len = e.data.len() as u64;
        if was_ahead {
            self.ahead.remove(&e.stamp);
            self.ahead_bytes -= len;
            self.demand_bytes += len;
            e.ahead = false;
        } else {
            self.demand.remove(&e.stamp);
        }
        e.stamp = stamp;
        self.demand.insert(stamp, item);
        Some(Found {
            data: e.data.clone(),
            was_ahead,
        })
    }

    /// Drops `item`; whether it was held.
    pub fn remove(&mut self, item: Item) -> bool {
        let Some(e) = self.entries.remove(&item) else {
            return false;
        };
        let len = e.data.len() as u64;
        if e.ahead {
            self.ahead.remove(&e.stamp);
            self.ahead_bytes -= len;
        } else {
            self.demand.remove(&e.stamp);
            self.demand_bytes -= len;
        }
        true
    }

    pub fn clear(&mut self) {
        *self = MemTier::new(self.budget, self.ahead_cap);
    }

    fn evict_ahead(&mut self) {
        if let Some((_, victim)) = self.ahead.pop_first() {
            let e = self.entries.remove(&victim).expect("indexed");
            self.ahead_bytes -= e.data.len() as u64;
            self.wasted.push(victim);
        }
    }

    fn evict_demand(&mut self) {
        if let Some((_, victim)) = self.demand.pop_first() {
            let e = self.entries.remove(&victim).expect("indexed");
            self.demand_bytes -= e.data.len() as u64;
        }
    }

    /// Inserts the bytes of `item` a reader asked for (missed) as the most recently
    /// used demand item; the older of the LRU demand item and the oldest ahead item
    /// leaves while over budget.
    pub fn put_demand(&mut self, item: Item, data: Arc<Vec<u8>>) {
        let len = data.len() as u64;
        if len > self.budget {
            return;
        }
        self.remove(item);
        while self.bytes() + len > self.budget {
            let d = self.demand.first_key_value().map(|(s, _)| *s);
            let a = self.ahead.first_key_value().map(|(s, _)| *s);
            match (d, a) {
                (Some(d), Some(a)) if a < d => self.evict_ahead(),
                (Some(_), _) => self.evict_demand(),
                (None, Some(_)) => self.evict_ahead(),
                (None, None) => break,
            }
        }
        let stamp = self.tick();
        self.demand_bytes += len;
        self.demand.insert(stamp, item);
        self.entries.insert(
            item,
            Entry {
                data,
                stamp,
                ahead: false,
            },
        );
    }

    /// Inserts the bytes of `item` a group brought ahead of demand; an item already
    /// held keeps its place. Older ahead items leave to stay within `ahead_cap`,
    /// then least recently used demand items while over budget.
    pub fn put_ahead(&mut self, item: Item, data: Arc<Vec<u8>>) {
        let len = data.len() as u64;
        if len > self.ahead_cap {
            return;
        }
        if let Some(e) = self.entries.get_mut(&item) {
            if e.data.len() as u64 == len {
                e.data = data;
                return;
            }
            self.remove(item);
        }
        while self.ahead_bytes + len > self.ahead_cap {
            self.evict_ahead();
        }
        while self.bytes() + len > self.budget {
            if self.demand.is_empty() {
                self.evict_ahead();
            } else {
                self.evict_demand();
            }
        }
        let stamp = self.tick();
        self.ahead_bytes += len;
        self.ahead.insert(stamp, item);
        self.entries.insert(
            item,
            Entry {
                data,
                stamp,
                ahead: true,
            },
        );
    }

    /// Ahead items dropped unused since the last call.
    pub fn take_wasted(&mut self) -> Vec<Item> {
        std::mem::take(&mut self.wasted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A plain LRU of `cap` items: the reference.
    struct Lru {
        cap: usize,
        order: Vec<u64>,
    }

    impl Lru {
        /// Whether `x` hit; `x` becomes the most recently used.
        fn access(&mut self, x: u64) -> bool {
            let hit = if let Some(p) = self.order.iter().position(|&y| y == x) {
                self.order.remove(p);
                true
            } else {
                false
            };
            self.order.push(x);
            if self.order.len() > self.cap {
                self.order.remove(0);
            }
            hit
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        Read(u64),
        Ahead(Vec<u64>),
        Drop(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u64..40).prop_map(Op::Read),
            2 => proptest::collection::vec(0u64..40, 1..6).prop_map(Op::Ahead),
            1 => (0u64..40).prop_map(Op::Drop),
        ]
    }

    fn it(i: u64) -> Item {
        Item { file: 0, index: i }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// The same trace through the tier and through a plain LRU of the tier's
        /// budget less the ahead space: every LRU hit is a tier hit, the tier stays
        /// within its budget and its ahead cap, and it serves what was put.
        #[test]
        fn every_hit_of_the_lru_inside_is_a_hit(
            cap in 2usize..12,
            ahead in 0usize..6,
            ops in proptest::collection::vec(op(), 1..300),
        ) {
            let unit = 4096u64;
            let ahead = ahead.min(cap - 1);
            let mut tier = MemTier::new(cap as u64 * unit, ahead as u64 * unit);
            let mut lru = Lru { cap: cap - ahead, order: Vec::new() };
            let (mut tier_hits, mut lru_hits) = (0, 0);
            let bytes = |i: u64| Arc::new(vec![i as u8; unit as usize]);
            for op in &ops {
                match op {
                    Op::Read(x) => {
                        let ref_hit = lru.access(*x);
                        let got = tier.get(it(*x));
                        if let Some(f) = &got {
                            prop_assert_eq!(f.data[0], *x as u8);
                            tier_hits += 1;
                        } else {
                            tier.put_demand(it(*x), bytes(*x));
                        }
                        prop_assert!(!ref_hit || got.is_some(), "LRU hit {} the tier missed", x);
                        lru_hits += ref_hit as u32;
                    }
                    Op::Ahead(xs) => {
                        for x in xs {
                            tier.put_ahead(it(*x), bytes(*x));
                        }
                    }
                    Op::Drop(x) => {
                        // A change drops the item from the tier; the reference
                        // forgets it too (both miss it next).
                        tier.remove(it(*x));
                        lru.order.retain(|y| y != x);
                    }
                }
                prop_assert!(tier.bytes() <= cap as u64 * unit);
                prop_assert!(tier.ahead_bytes() <= ahead as u64 * unit);
            }
            prop_assert!(tier_hits >= lru_hits);
        }
    }

    #[test]
    fn ahead_items_used_become_demand_and_unused_ones_are_reported() {
        let mut t = MemTier::new(4 * 4096, 2 * 4096);
        let b = |v: u8| Arc::new(vec![v; 4096]);
        t.put_ahead(it(1), b(1));
        t.put_ahead(it(2), b(2));
        t.put_ahead(it(3), b(3)); // over the ahead cap: 1 leaves unused
        assert_eq!(t.take_wasted(), vec![it(1)]);
        assert!(t.get(it(2)).unwrap().was_ahead);
        assert!(!t.get(it(2)).unwrap().was_ahead);
        assert_eq!(t.ahead_bytes(), 4096);
        for i in 10..14 {
            t.put_demand(it(i), b(i as u8));
        }
        assert_eq!(t.bytes(), 4 * 4096);
        assert!(!t.contains(&it(3)), "the oldest ahead item left first");
    }
}
