//! Where the `group` policy's store puts things: the slots passing between the item
//! region ([`crate::plain`]) and the segments of groups within the group share
//! ([`crate::share`]), the share following what groups earn and cost, and `lru`'s
//! item-sized slots.

use crate::config::Policy;
use crate::core::State;
use crate::graph::Item;
use crate::plain::Place;

impl State {
    /// The group share changed: the item region gets the rest of the store.
    pub(crate) fn share_changed(&mut self) {
        self.resize_region(0);
    }

    /// Sets the item region's capacity: every slot but those segments hold within
    /// the share, less `leaving` more of the region's slots about to become
    /// segments (the least recently used items leave now).
    pub(crate) fn resize_region(&mut self, leaving: usize) {
        let slots = self.alloc.slots() as usize;
        let held = (self.segment_slots() + leaving).min(self.share.slots());
        let cap = (slots - held) * self.per;
        self.plain.resize(cap, slots * self.per - cap);
    }

    /// Groups earned `n` SOURCE requests ([`crate::share`]).
    pub(crate) fn earned(&mut self, n: u64) {
        if self.share.earned(n) {
            self.share_changed();
        }
    }

    /// Groups cost `n` SOURCE requests ([`crate::share`]).
    pub(crate) fn cost(&mut self, n: u64) {
        if n > 0 && self.share.cost(n) {
            self.share_changed();
        }
    }

    /// Pins the group share at `slots` (`None`: it follows earnings again).
    pub fn fix_share(&mut self, slots: Option<usize>) {
        if self.share.fix(slots) {
            self.share_changed();
        }
    }

    /// `items` missed both tiers (`group`): a miss the item region would have hit
    /// without the share is a cost of groups.
    pub(crate) fn missing(&mut self, items: impl Iterator<Item = Item>) {
        if self.policy != Policy::Group {
            return;
        }
        for i in items {
            if self.plain.ghost_hit(&i) && self.share.ghost_missed() {
                self.share_changed();
            }
            if self.share.missed() {
                self.share_changed();
            }
        }
    }

    /// Slots holding a group's segment.
    pub(crate) fn segment_slots(&self) -> usize {
        self.alloc.used() - self.plain.slots().len()
    }
    /// The slot a group's segment takes (`group`, while the share is on): a free
    /// one; else, while the segments hold fewer slots than the share, one of the item
    /// region (`Err`: the caller moves its items out); else the least recently used
    /// segment. `None`: no slot may take a segment now.
    pub(crate) fn segment_slot(&mut self) -> Option<Result<(u32, u64), u32>> {
        if !self.share.on() {
            return None;
        }
        if self.alloc.has_free() {
            let (slot, _) = self.alloc.alloc();
            let uses = self.fresh(slot);
            self.resize_region(0);
            return Some(Ok((slot, uses)));
        }
        let segments = self.segment_slots();
        if segments < self.share.slots() {
            if let Some(slot) = self.plain.emptiest_slot() {
                return Some(Err(slot));
            }
        }
        let slot = self.alloc.lru_order().find(|s| !self.plain.owns(*s))?;
        self.alloc.touch(slot);
        Some(Ok((slot, self.fresh(slot))))
    }

    /// A slot for the item region (`group`): a free one, else — while the segments
    /// hold more slots than the share — the least recently used segment.
    pub(crate) fn region_slot(&mut self) -> Option<u32> {
        let slot = if self.alloc.has_free() {
            self.alloc.alloc().0
        } else if self.segment_slots() > self.share.slots() {
            let slot = self.alloc.lru_order().find(|s| !self.plain.owns(*s))?;
            self.alloc.touch(slot);
            slot
        } else {
            return None;
        };
        self.fresh(slot);
        self.slot_items.remove(&slot);
        self.plain.add_slot(slot);
        self.resize_region(0);
        Some(slot)
    }

    /// A cell of the item region for `item`, which a reader asked for: where to
    /// write its bytes and the placement's ticket; `None` if the region holds it
    /// already (now the most recent) or may hold nothing.
    pub(crate) fn region_cell(&mut self, item: Item) -> Option<(u32, u64, u64)> {
        loop {
            match self.plain.place(item) {
                Place::Held | Place::Full => return None,
                Place::Write {
                    slot,
                    offset,
                    ticket,
                } => return Some((slot, offset, ticket)),
                Place::NeedSlot => {
                    self.region_slot()?;
                }
            }
        }
    }

    /// `slot` takes new contents: its old items are dropped; returns its new use
    /// number.
    pub(crate) fn fresh(&mut self, slot: u32) -> u64 {
        if let Some(old) = self.slot_items.remove(&slot) {
            self.stats.evicted_segments += 1;
            for i in old {
                if self.disk.get(&i).map(|(s, _)| *s) == Some(slot) {
                    self.disk.remove(&i);
                    self.dirty = true;
                }
            }
        }
        self.slot_items.insert(slot, Vec::new());
        let uses = self.slot_uses.entry(slot).or_insert(0);
        *uses += 1;
        *uses
    }

    /// An item-sized slot for new contents (`lru`): a free one, else the least
    /// recently used; its old items are dropped. Returns it and its use number.
    pub(crate) fn item_slot(&mut self) -> (u32, u64) {
        let (slot, _) = self.alloc.alloc();
        (slot, self.fresh(slot))
    }
}
