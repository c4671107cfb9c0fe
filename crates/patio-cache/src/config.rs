//! What `patio mount cache` is asked to be: the policy and the budgets, and why a
//! set of them cannot work.

use crate::graph::Popularity;
use std::time::Duration;

/// Caching policy of the mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    None,
    Lru,
    Group,
}

impl Policy {
    pub fn parse(s: &str) -> Result<Policy, String> {
        match s {
            "none" => Ok(Policy::None),
            "lru" => Ok(Policy::Lru),
            "group" => Ok(Policy::Group),
            _ => Err(format!("unknown cache policy {s:?} (none, lru, group)")),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Policy::None => "none",
            Policy::Lru => "lru",
            Policy::Group => "group",
        }
    }

    /// The policy's code in the segment table.
    pub fn code(self) -> u8 {
        self as u8
    }
}

/// What the cache is asked to be.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    pub policy: Policy,
    /// Memory budget of cached items, bytes.
    pub memory: u64,
    /// Disk budget of the segment store, bytes.
    pub disk: u64,
    /// Segment (slot) size of `group`, bytes; `lru` uses item-sized slots.
    pub segment: u64,
    /// Item size, bytes (a multiple of 4 KiB).
    pub item: u64,
    pub popularity: Popularity,
    /// No requests for this long is an idle period (groups built, table saved).
    pub idle: Duration,
    /// Graph changes that trigger a rebuild of the groups on a miss.
    pub build_after: u64,
}

impl CacheConfig {
    /// Bytes of one slot of the store.
    pub fn slot_size(&self) -> u64 {
        match self.policy {
            Policy::Group => self.segment,
            _ => self.item,
        }
    }

    /// Slots that fit the disk budget.
    pub fn slots(&self) -> u64 {
        self.disk / self.slot_size()
    }

    /// Why these budgets cannot work, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.item == 0 || !self.item.is_multiple_of(4096) {
            return Err(format!(
                "item size {} is not a positive multiple of 4 KiB",
                self.item
            ));
        }
        if self.policy == Policy::None {
            return Ok(());
        }
        let slot = self.slot_size();
        if !self.segment.is_multiple_of(self.item) || self.segment < self.item {
            return Err(format!(
                "segment size {} is not a multiple of the item size {}",
                self.segment, self.item
            ));
        }
        if self.disk < slot {
            return Err(format!(
                "disk budget {} bytes is smaller than one segment ({slot} bytes)",
                self.disk
            ));
        }
        if self.slots() > u32::MAX as u64 {
            return Err("disk budget holds more than 2^32 segments".into());
        }
        if self.memory < slot {
            return Err(format!(
                "memory budget {} bytes is smaller than one segment ({slot} bytes)",
                self.memory
            ));
        }
        Ok(())
    }
}
