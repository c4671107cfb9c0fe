//! The item region of the `group` policy's segment store: the items readers asked
//! for, one per item-sized *cell* of the slots the region owns, kept as an exact LRU
//! of `cap` items — what `lru`'s store of `cap` item-sized slots would hold. A miss
//! takes a free cell, else the cell of the least recently used item; a hit only moves
//! the item to the front. Slots pass between this region and the segments a whole
//! slot at a time (`core::State`), so neither side places item by item in the other.
//!
//! Evicted items are remembered (the *ghost*, at most `ghost_cap` of them: the items
//! a store without a group share would still hold); a miss on one is a hit the share
//! cost (`share`).

use crate::graph::Item;
use crate::table::Entry;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Where an item of the region lives: its cell, and its entry once written.
#[derive(Clone, Copy, Debug)]
pub struct Cell {
    pub slot: u32,
    pub cell: u32,
    /// `None` while the write of the item's bytes is under way.
    pub entry: Option<Entry>,
    stamp: u64,
    /// The placement this cell belongs to (a later placement of the item gets another).
    ticket: u64,
}

/// What [`Plain::place`] did with an item.
#[derive(Debug, PartialEq, Eq)]
pub enum Place {
    /// The region holds it already (it is now the most recent).
    Held,
    /// Write its bytes at `offset` of `slot`, then [`Plain::commit`] `ticket`.
    Write { slot: u32, offset: u64, ticket: u64 },
    /// No free cell and room for more items: the region needs another slot.
    NeedSlot,
    /// The region may hold nothing.
    Full,
}

/// The item region (see the module documentation).
pub struct Plain {
    per: u32,
    item: u64,
    cap: usize,
    slots: BTreeSet<u32>,
    free: BTreeSet<(u32, u32)>,
    at: HashMap<Item, Cell>,
    order: BTreeMap<u64, Item>,
    clock: u64,
    ghost: HashMap<Item, u64>,
    ghost_order: BTreeMap<u64, Item>,
    ghost_cap: usize,
}

impl Plain {
    /// A region of at most `cap` items of `item` bytes, `per` to a slot, remembering
    /// at most `ghost_cap` evicted ones.
    pub fn new(per: u32, item: u64, cap: usize, ghost_cap: usize) -> Self {
        Plain {
            per: per.max(1),
            item,
            cap,
            slots: BTreeSet::new(),
            free: BTreeSet::new(),
            at: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
            ghost: HashMap::new(),
            ghost_order: BTreeMap::new(),
            ghost_cap,
        }
    }

    pub fn len(&self) -> usize {
        self.at.len()
    }

    pub fn is_empty(&self) -> bool {
        self.at.is_empty()
    }

    pub fn cap(&self) -> usize {
        self.cap
    }

    /// The slots the region owns.
    pub fn slots(&self) -> &BTreeSet<u32> {
        &self.slots
    }

    pub fn owns(&self, slot: u32) -> bool {
        self.slots.contains(&slot)
    }

    /// Whether the region holds `item` (written or being written).
    pub fn contains(&self, item: &Item) -> bool {
        self.at.contains_key(item)
    }

    /// The slot and entry of `item` once its bytes are written.
    pub fn entry(&self, item: &Item) -> Option<(u32, Entry)> {
        let c = self.at.get(item)?;
        c.entry.map(|e| (c.slot, e))
    }

    pub fn items(&self) -> impl Iterator<Item = &Item> {
        self.at.keys()
    }

    /// The written entries of `slot`.
    pub fn entries(&self, slot: u32) -> Vec<Entry> {
        let mut out: Vec<Entry> = self
            .at
            .values()
            .filter(|c| c.slot == slot)
            .filter_map(|c| c.entry)
            .collect();
        out.sort_by_key(|e| e.offset);
        out
    }

    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// A reader asked for `item`: if held, it becomes the most recent. Whether held.
    pub fn touch(&mut self, item: Item) -> bool {
        let stamp = self.tick();
        let Some(c) = self.at.get_mut(&item) else {
            return false;
        };
        self.order.remove(&c.stamp);
        c.stamp = stamp;
        self.order.insert(stamp, item);
        true
    }

    /// A reader asked for `item`: the most recent from now on, in a cell of its own
    /// (see [`Place`]). Least recently used items leave while the region is full.
    pub fn place(&mut self, item: Item) -> Place {
        if self.touch(item) {
            return Place::Held;
        }
        if self.cap == 0 {
            return Place::Full;
        }
        while self.at.len() >= self.cap {
            self.evict_lru();
        }
        let Some((slot, cell)) = self.free.pop_first() else {
            return Place::NeedSlot;
        };
        let ticket = self.tick();
        self.order.insert(ticket, item);
        self.at.insert(
            item,
            Cell {
                slot,
                cell,
                entry: None,
                stamp: ticket,
                ticket,
            },
        );
        if let Some(s) = self.ghost.remove(&item) {
            self.ghost_order.remove(&s);
        }
        Place::Write {
            slot,
            offset: cell as u64 * self.item,
            ticket,
        }
    }

    /// The bytes of the placement `ticket` of `entry.item` are written: the item is
    /// readable, unless it left (or was placed again) meanwhile. Whether it is.
    pub fn commit(&mut self, ticket: u64, entry: Entry) -> bool {
        match self.at.get_mut(&entry.item) {
            Some(c) if c.ticket == ticket && c.entry.is_none() => {
                c.entry = Some(Entry {
                    offset: (c.cell as u64 * self.item) as u32,
                    ..entry
                });
                true
            }
            _ => false,
        }
    }

    /// The cells of `slot` join the region.
    pub fn add_slot(&mut self, slot: u32) {
        if self.slots.insert(slot) {
            self.free.extend((0..self.per).map(|c| (slot, c)));
        }
    }

    /// `slot` leaves the region; returns the items it held (no longer in the region).
    pub fn take_slot(&mut self, slot: u32) -> Vec<(Item, Cell)> {
        if !self.slots.remove(&slot) {
            return Vec::new();
        }
        self.free.retain(|(s, _)| *s != slot);
        let gone: Vec<(Item, Cell)> = self
            .at
            .iter()
            .filter(|(_, c)| c.slot == slot)
            .map(|(i, c)| (*i, *c))
            .collect();
        for (i, c) in &gone {
            self.at.remove(i);
            self.order.remove(&c.stamp);
        }
        gone
    }

    /// The slot of the region holding the fewest items.
    pub fn emptiest_slot(&self) -> Option<u32> {
        let mut held: HashMap<u32, usize> = self.slots.iter().map(|&s| (s, 0)).collect();
        for c in self.at.values() {
            *held.entry(c.slot).or_default() += 1;
        }
        held.into_iter()
            .min_by_key(|&(s, n)| (n, s))
            .map(|(s, _)| s)
    }

    /// Puts `item` (taken out of a slot that left) back in a free cell at the age
    /// `cell` had: where to write its bytes (its entry's new offset), if a cell is
    /// free.
    pub fn reinsert(&mut self, item: Item, cell: &Cell) -> Option<(u32, Entry)> {
        let e = cell.entry?;
        let (slot, c) = self.free.pop_first()?;
        let entry = Entry {
            offset: (c as u64 * self.item) as u32,
            ..e
        };
        self.order.insert(cell.stamp, item);
        self.at.insert(
            item,
            Cell {
                slot,
                cell: c,
                entry: Some(entry),
                ..*cell
            },
        );
        Some((slot, entry))
    }

    /// Drops `item` (invalidated, or its bytes did not check); whether it was held.
    pub fn remove(&mut self, item: &Item) -> bool {
        let Some(c) = self.at.remove(item) else {
            return false;
        };
        self.order.remove(&c.stamp);
        if self.slots.contains(&c.slot) {
            self.free.insert((c.slot, c.cell));
        }
        true
    }

    /// The least recently used item leaves, remembered as a ghost.
    fn evict_lru(&mut self) {
        let Some((_, item)) = self.order.first_key_value().map(|(s, i)| (*s, *i)) else {
            return;
        };
        self.remove(&item);
        if self.ghost_cap > 0 {
            let stamp = self.tick();
            self.ghost.insert(item, stamp);
            self.ghost_order.insert(stamp, item);
            while self.ghost.len() > self.ghost_cap {
                if let Some((_, g)) = self.ghost_order.pop_first() {
                    self.ghost.remove(&g);
                }
            }
        }
    }

    /// The region may hold `cap` items (the least recent leave now) and remember
    /// `ghost_cap` evicted ones.
    pub fn resize(&mut self, cap: usize, ghost_cap: usize) {
        self.cap = cap;
        self.ghost_cap = ghost_cap;
        while self.at.len() > cap {
            self.evict_lru();
        }
        while self.ghost.len() > ghost_cap {
            if let Some((_, g)) = self.ghost_order.pop_first() {
                self.ghost.remove(&g);
            }
        }
    }

    /// Whether `item` is a ghost: one a region without the group share would hold.
    pub fn is_ghost(&self, item: &Item) -> bool {
        self.ghost.contains_key(item)
    }

    /// Whether a miss on `item` is one a region without the group share would have
    /// hit (it is forgotten as a ghost either way).
    pub fn ghost_hit(&mut self, item: &Item) -> bool {
        match self.ghost.remove(item) {
            Some(s) => {
                self.ghost_order.remove(&s);
                true
            }
            None => false,
        }
    }

    /// Restores `entry` of `slot` from a saved table as the most recent item, if its
    /// offset is a cell's, its cell free and the region has room.
    pub fn restore(&mut self, slot: u32, entry: Entry) -> bool {
        let cell = entry.offset as u64 / self.item;
        if !(entry.offset as u64).is_multiple_of(self.item)
            || entry.len as u64 > self.item
            || cell >= self.per as u64
            || self.at.len() >= self.cap
            || self.at.contains_key(&entry.item)
        {
            return false;
        }
        self.add_slot(slot);
        if !self.free.remove(&(slot, cell as u32)) {
            return false;
        }
        let stamp = self.tick();
        self.order.insert(stamp, entry.item);
        self.at.insert(
            entry.item,
            Cell {
                slot,
                cell: cell as u32,
                entry: Some(entry),
                stamp,
                ticket: stamp,
            },
        );
        true
    }

    pub fn clear(&mut self) {
        *self = Plain::new(self.per, self.item, self.cap, self.ghost_cap);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn it(i: u64) -> Item {
        Item { file: 0, index: i }
    }

    fn entry(i: u64) -> Entry {
        Entry {
            item: it(i),
            offset: 0,
            len: 4096,
            crc: 0,
        }
    }

    /// Places `x` as the cache does: a slot when asked, the write committed.
    fn access(p: &mut Plain, next_slot: &mut u32, slots: u32, x: u64) -> bool {
        loop {
            match p.place(it(x)) {
                Place::Held => return true,
                Place::Write { ticket, .. } => {
                    assert!(p.commit(ticket, entry(x)));
                    return false;
                }
                Place::NeedSlot => {
                    assert!(
                        *next_slot < slots,
                        "the region asked for a slot beyond its cap"
                    );
                    p.add_slot(*next_slot);
                    *next_slot += 1;
                }
                Place::Full => return false,
            }
        }
    }

    proptest! {
        #[test]
        fn the_region_is_an_exact_lru(
            trace in proptest::collection::vec(0u64..40, 1..400),
            per in 1u32..6,
            slots in 1u32..6,
        ) {
            let cap = (per * slots) as usize;
            let mut p = Plain::new(per, 4096, cap, 8);
            let mut reference: VecDeque<u64> = VecDeque::new();
            let mut next = 0;
            for &x in &trace {
                let hit = access(&mut p, &mut next, slots, x);
                let ref_hit = match reference.iter().position(|&y| y == x) {
                    Some(k) => { reference.remove(k); true }
                    None => false,
                };
                reference.push_back(x);
                if reference.len() > cap {
                    reference.pop_front();
                }
                prop_assert_eq!(hit, ref_hit);
                prop_assert!(p.len() <= cap);
                prop_assert!(p.entry(&it(x)).is_some());
            }
        }
    }

    #[test]
    fn items_of_a_slot_taken_away_come_back_at_their_age() {
        let mut p = Plain::new(2, 4096, 6, 4);
        let mut next = 0;
        for x in 0..4 {
            access(&mut p, &mut next, 3, x);
        }
        p.resize(4, 2);
        let gone = p.take_slot(0);
        assert_eq!(gone.len(), 2);
        p.add_slot(5);
        for (i, c) in &gone {
            let (slot, e) = p.reinsert(*i, c).expect("a free cell");
            assert_eq!(slot, 5);
            assert_eq!(e.offset as u64 % 4096, 0);
        }
        assert_eq!(p.len(), 4);
        // Item 0 is still the least recently used: a new item evicts it.
        assert!(matches!(p.place(it(9)), Place::Write { .. }));
        assert!(!p.contains(&it(0)) && p.contains(&it(1)));
        assert!(p.is_ghost(&it(0)) && p.ghost_hit(&it(0)));
        assert!(!p.ghost_hit(&it(0)), "a ghost is forgotten once hit");
        assert!(!p.is_ghost(&it(0)));
    }
}
