//! The group share of the `group` policy: how many slots of the store groups may
//! hold, following what groups earn. Both sides are counted in SOURCE requests,
//! against an LRU of the whole store: a lookup a group served (a segment or an item
//! brought ahead answered it) that the item region did not hold and would not hold
//! without the share either *earned* one; a miss on an item the region
//! evicted because of the share (a ghost, `plain`) and every SOURCE request made
//! for grouping (members and strides nobody asked for yet) *cost* one. A segment's
//! worth of net earnings grows the share by one slot, a segment's worth of net cost
//! shrinks it by one. Ghost misses in a row, with nothing earned between them, weigh
//! more and more (the n-th one n requests, up to a segment's worth): a share that
//! only costs — the working set fits the store and an LRU of the store would hit
//! it all, or a new phase of the readers that groups do not serve — is given up
//! within a few dozen misses, a slot per miss, rather than a segment's worth of
//! misses per slot, while a share whose groups keep earning between its ghost misses
//! pays one request per miss. At zero no group is formed, built or brought ahead, and the
//! item region has the whole store: `group` is then `lru`. After a while at zero
//! (misses worth four stores) groups get one slot again to show what they earn.
//!
//! Work done ahead of any reader (segment builds in idle periods) is paid from the
//! *balance*, what groups earned net of what they cost over the recent past: a build
//! whose SOURCE requests exceed it is not started.

/// Misses at a share of zero, per item the store holds, before groups get a slot
/// again.
const RETRY_PER_ITEM: u64 = 4;

/// The share and its accounting (see the module documentation).
#[derive(Clone, Debug)]
pub struct Share {
    slots: usize,
    max: usize,
    per: i64,
    credit: i64,
    /// Earned less cost, within ± `bound`.
    balance: i64,
    bound: i64,
    fixed: bool,
    /// Ghost misses since groups last earned, at most `per`.
    streak: i64,
    misses_at_zero: u64,
    retry_after: u64,
}

impl Share {
    /// A share of at most `max` slots of `per` items each, starting at `max`, in a
    /// store of `pages` items.
    pub fn new(max: usize, per: usize, pages: usize) -> Self {
        Share {
            slots: max,
            max,
            per: per.max(1) as i64,
            credit: 0,
            balance: 0,
            bound: pages.max(1) as i64,
            fixed: false,
            streak: 0,
            misses_at_zero: 0,
            retry_after: RETRY_PER_ITEM * pages.max(1) as u64,
        }
    }

    /// Slots groups may hold now.
    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Slots groups may ever hold.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Whether groups are formed at all.
    pub fn on(&self) -> bool {
        self.slots > 0
    }

    /// Whether groups are on and their balance pays for work ahead of any reader
    /// that makes `requests` SOURCE requests.
    pub fn affords(&self, requests: u64) -> bool {
        self.on() && (requests == 0 || self.balance >= requests as i64)
    }

    /// Pins the share at `slots` (at most the maximum; `None`: it follows earnings
    /// again). Returns whether the share changed.
    pub fn fix(&mut self, slots: Option<usize>) -> bool {
        let before = self.slots;
        self.fixed = slots.is_some();
        if let Some(s) = slots {
            self.slots = s.min(self.max);
        }
        self.credit = 0;
        before != self.slots
    }

    /// Groups earned `n` SOURCE requests. Returns whether the share changed.
    pub fn earned(&mut self, n: u64) -> bool {
        if n > 0 {
            self.streak = 0;
        }
        self.credit = self.credit.saturating_add(n as i64);
        self.balance = (self.balance + n as i64).min(self.bound);
        self.step()
    }

    /// Groups cost `n` SOURCE requests. Returns whether the share changed.
    pub fn cost(&mut self, n: u64) -> bool {
        self.credit = self.credit.saturating_sub(n as i64);
        self.balance = (self.balance - n as i64).max(-self.bound);
        self.step()
    }

    /// A lookup missed an item the item region evicted because of the share (a
    /// ghost): one SOURCE request against the balance, and against the share the
    /// number of ghost misses since groups last earned (at most a segment's worth).
    /// Returns whether the share changed.
    pub fn ghost_missed(&mut self) -> bool {
        self.streak = (self.streak + 1).min(self.per);
        self.balance = (self.balance - 1).max(-self.bound);
        self.credit = self.credit.saturating_sub(self.streak);
        self.step()
    }

    /// A lookup missed both tiers. Returns whether the share changed (a retry).
    pub fn missed(&mut self) -> bool {
        if self.fixed || self.slots > 0 || self.max == 0 {
            return false;
        }
        self.misses_at_zero += 1;
        if self.misses_at_zero < self.retry_after {
            return false;
        }
        self.misses_at_zero = 0;
        self.slots = 1;
        self.credit = 0;
        true
    }

    fn step(&mut self) -> bool {
        if self.fixed {
            self.credit = 0;
            return false;
        }
        if self.credit >= self.per && self.slots < self.max {
            self.slots += 1;
            self.credit = 0;
            return true;
        }
        if self.credit <= -self.per && self.slots > 0 {
            self.slots -= 1;
            self.credit = 0;
            return true;
        }
        self.credit = self.credit.clamp(-self.per, self.per);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_share_follows_earnings_within_its_bounds() {
        let mut s = Share::new(3, 4, 24);
        assert_eq!(s.slots(), 3);
        assert!(!s.earned(100), "already at its maximum");
        assert!(
            !s.cost(7),
            "the credit kept at its maximum is a segment's worth"
        );
        assert!(s.cost(1), "a segment's worth of net cost shrinks it");
        assert_eq!(s.slots(), 2);
        for _ in 0..2 {
            s.cost(4);
        }
        assert_eq!(s.slots(), 0);
        assert!(!s.on() && !s.affords(0));
        assert!(!s.cost(100));
        for _ in 0..4 * 24 - 1 {
            assert!(!s.missed());
        }
        assert!(s.missed(), "groups get one slot again after a while");
        assert_eq!(s.slots(), 1);
        s.earned(4);
        assert_eq!(s.slots(), 2);
    }

    #[test]
    fn work_ahead_is_paid_from_the_balance() {
        let mut s = Share::new(3, 4, 24);
        assert!(s.affords(0) && !s.affords(1), "nothing earned yet");
        s.earned(3);
        assert!(s.affords(3) && !s.affords(4));
        s.cost(5);
        assert!(!s.affords(1) && s.affords(0));
        s.earned(1000);
        assert!(s.affords(24) && !s.affords(25), "the balance is bounded");
    }

    #[test]
    fn ghost_misses_in_a_row_give_the_share_up_fast() {
        // A share of 8 slots of 16 items: a segment's worth of net cost per slot
        // would take 128 ghost misses to reach zero.
        let mut s = Share::new(8, 16, 256);
        let mut misses = 0;
        while s.on() {
            s.ghost_missed();
            misses += 1;
            assert!(misses <= 128, "never gave up");
        }
        // The n-th miss in a row costs n: 6 misses for the first slot (1 + … + 6 =
        // 21), then ever faster, a slot per miss from the 16th on.
        assert!(misses <= 30, "{misses} ghost misses to give up 8 slots");
        // The balance counts requests, not the weights: one per miss.
        assert!(!s.affords(1));
        s.earned(misses as u64);
        assert!(s.affords(0) && !s.affords(1));
    }

    #[test]
    fn ghost_misses_between_earnings_cost_one_each() {
        let mut s = Share::new(8, 16, 256);
        for _ in 0..100 {
            s.ghost_missed();
            s.ghost_missed();
            s.earned(1);
        }
        // Two ghost misses in a row (weights 1 + 2) against one request earned, 100
        // times: a net weight of 200, twelve slots' worth.
        assert_eq!(s.slots(), 0);
        let mut t = Share::new(8, 16, 256);
        for _ in 0..100 {
            t.ghost_missed();
            t.earned(1);
        }
        assert_eq!(t.slots(), 8, "one ghost miss per request earned is level");
    }

    #[test]
    fn a_fixed_share_stays() {
        let mut s = Share::new(3, 4, 24);
        assert!(s.fix(Some(0)));
        for _ in 0..1000 {
            s.earned(4);
            s.missed();
        }
        assert_eq!(s.slots(), 0);
        s.fix(None);
        s.earned(4);
        assert_eq!(s.slots(), 1);
    }
}
