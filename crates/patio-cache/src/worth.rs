//! Whether grouping work of the `group` policy saves anything against an LRU of the
//! whole store — the cache `group` must never lose to. Building a group's segment
//! or bringing a strided stream's periods ahead is worth its I/O only for the items
//! such an LRU would have to read from SOURCE. The item region and its ghosts
//! ([`crate::plain`]) are exactly what that LRU holds: an item the region holds, or
//! evicted only because of the group share, is one it would serve without a SOURCE
//! request, so bringing it ahead saves nothing, and a segment assembled only from
//! such members (however cheaply, from the store) never pays for its slot.

use crate::core::State;
use crate::graph::Item;

impl State {
    /// Whether an LRU of the whole store would hold `item` now: the item region
    /// holds it, or evicted it only because of the group share (a ghost).
    pub(crate) fn lru_holds(&self, item: &Item) -> bool {
        self.plain.contains(item) || self.plain.is_ghost(item)
    }

    /// Whether grouping work may bring `item` ahead: no tier holds it and an LRU of
    /// the whole store would miss it.
    pub(crate) fn worth_bringing(&self, item: &Item) -> bool {
        !self.holds(item) && !self.lru_holds(item)
    }

    /// The SOURCE requests building `group`'s segment makes: its members no tier
    /// holds, one request per run of consecutive ones.
    pub(crate) fn source_runs(&self, group: &[Item]) -> u64 {
        let mut absent: Vec<Item> = group.iter().filter(|i| !self.holds(i)).copied().collect();
        absent.sort();
        absent
            .windows(2)
            .filter(|w| w[1].file != w[0].file || w[1].index != w[0].index + 1)
            .count() as u64
            + !absent.is_empty() as u64
    }

    /// Whether building `group`'s segment — on a miss of `want`, or ahead of any
    /// reader (`None`) — saves SOURCE requests against an LRU of the whole store:
    /// some member other than `want` is one that LRU would miss, and the build
    /// reads SOURCE no more often than that LRU would for those members and `want`
    /// (read on this miss either way).
    pub(crate) fn build_saves(&self, group: &[Item], want: Option<Item>) -> bool {
        let saved = group
            .iter()
            .filter(|i| Some(**i) != want && self.worth_bringing(i))
            .count() as u64;
        let demand = want.is_some_and(|w| group.contains(&w) && !self.holds(&w)) as u64;
        saved > 0 && self.source_runs(group) <= saved + demand
    }
}
