//! Demand recency of the segment-grouping cache's stored items: when readers last
//! asked for each item, so that the store can tell the items an LRU of the protected
//! size would hold (*hot*: among the `h` most recently asked-for items the store
//! holds) from the rest. Hot items are never given up for a group's segment and are
//! moved, not dropped, when their slot is reused (`core::State::claim_slot`); items
//! a group brought that nobody asked for have no recency and are never hot.

use crate::graph::Item;
use std::collections::{BTreeMap, HashMap};

/// Items remembered per item the store can hold (older ones are forgotten).
const REMEMBER: usize = 4;

/// Last demand of each item (see the module documentation).
#[derive(Default)]
pub struct Recency {
    stamp: HashMap<Item, u64>,
    order: BTreeMap<u64, Item>,
    clock: u64,
}

impl Recency {
    /// A reader asked for `item`: it becomes the most recent.
    pub fn touch(&mut self, item: Item, capacity: usize) {
        self.clock += 1;
        if let Some(old) = self.stamp.insert(item, self.clock) {
            self.order.remove(&old);
        }
        self.order.insert(self.clock, item);
        while self.order.len() > capacity.max(1) * REMEMBER {
            if let Some((_, i)) = self.order.pop_first() {
                self.stamp.remove(&i);
            }
        }
    }

    /// The oldest stamp that is still hot: that of the `h`-th most recently asked-for
    /// item among those `stored` says the store holds (0: fewer are held, every item
    /// with a stamp is hot).
    pub fn threshold(&self, h: usize, stored: impl Fn(&Item) -> bool) -> u64 {
        if h == 0 {
            return u64::MAX;
        }
        self.order
            .iter()
            .rev()
            .filter(|(_, i)| stored(i))
            .nth(h - 1)
            .map_or(0, |(s, _)| *s)
    }

    /// Whether `item` is hot under `threshold` (from [`Recency::threshold`]).
    pub fn hot(&self, item: &Item, threshold: u64) -> bool {
        self.stamp.get(item).is_some_and(|&s| s >= threshold)
    }

    pub fn clear(&mut self) {
        *self = Recency::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn it(i: u64) -> Item {
        Item { file: 0, index: i }
    }

    #[test]
    fn the_most_recent_stored_items_are_hot() {
        let mut r = Recency::default();
        for i in [1, 2, 3, 4, 2] {
            r.touch(it(i), 100);
        }
        // Most recent first: 2, 4, 3, 1; item 4 is not stored.
        let t = r.threshold(2, |i| i.index != 4);
        assert!(r.hot(&it(2), t) && r.hot(&it(3), t));
        assert!(!r.hot(&it(1), t));
        assert!(!r.hot(&it(9), t), "never asked for: never hot");
        assert_eq!(r.threshold(10, |_| true), 0);
        assert!(!r.hot(&it(1), r.threshold(0, |_| true)));
    }
}
