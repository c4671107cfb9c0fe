//! A readahead window for near-sequential reads: the part of the `pattern` policy
//! that covers data the online analyzer cannot name request by request (archive
//! entries of unknown length, a reader with a second, lagging cursor, streams too
//! short to confirm a pattern).
//!
//! It opens exactly where Linux-like readahead ([`crate::policy::Readahead`]) opens
//! one — on a read that starts where the previous one ended, or at offset 0 as the
//! first read — with the same sizes: the first window `max(initial, 2·len)` right
//! after the read, then twice the last one (up to `max`) each time a read reaches the
//! last window. Unlike readahead, a run is not reset by every read that is not
//! strictly sequential:
//!
//! * a read inside the run's span — from one window size before the run's first read
//!   to a small skip (32 KiB or four requests) past the last window — keeps the run
//!   alive: small forward skips and back-fills behind the frontier (a lagging cursor)
//!   are part of it;
//! * a read outside the span is a strike; the run ends at the second strike in a row,
//!   or at once when the read outside starts a sequential run of its own.
//!
//! So on a strictly sequential stream the windows are readahead's; the tolerance only
//! changes what happens after irregular reads.

use crate::policy::ReadaheadConfig;

/// A forward skip past the last window that still continues the run (at least;
/// four request lengths when larger, at most the window).
pub const SKIP: u64 = 32 << 10;
/// Strikes (reads outside the span, in a row) that end a run.
const MAX_STRIKES: u8 = 2;

/// Readahead windows with small-skip and back-fill tolerance (32 B).
#[derive(Clone, Debug)]
pub struct Window {
    /// End of the previous read (`u64::MAX` before the first).
    prev_end: u64,
    /// The run followed (when `active`): the lowest offset read in it, and the last
    /// window issued, `[start, start + size)`.
    lo: u64,
    start: u64,
    size: u32,
    /// Reads outside the run in a row.
    strikes: u8,
    active: bool,
}

impl Default for Window {
    fn default() -> Self {
        Self::new()
    }
}

impl Window {
    /// Readahead's default sizes ([`ReadaheadConfig::default`]).
    pub fn new() -> Self {
        Window {
            prev_end: u64::MAX,
            lo: 0,
            start: 0,
            size: 0,
            strikes: 0,
            active: false,
        }
    }

    /// Whether a run is being followed.
    pub fn active(&self) -> bool {
        self.active
    }

    fn window_end(&self) -> u64 {
        self.start.saturating_add(self.size as u64)
    }

    /// Where the previous read ended (none before the first).
    pub fn previous_end(&self) -> Option<u64> {
        (self.prev_end != u64::MAX).then_some(self.prev_end)
    }

    /// Whether the previous read ended at `offset` (or, before any read, `offset` is
    /// 0).
    pub fn continues(&self, offset: u64) -> bool {
        if self.prev_end == u64::MAX {
            offset == 0
        } else {
            self.prev_end == offset
        }
    }

    /// Whether a read at `offset` of `len` bytes belongs to the run: from one window
    /// size before its first read to a small skip past its last window.
    fn spans(&self, offset: u64, len: u64) -> bool {
        let size = self.size as u64;
        let skip = SKIP.max(4 * len).min(size);
        self.active
            && offset >= self.lo.saturating_sub(size)
            && offset <= self.window_end().saturating_add(skip)
    }

    /// Whether `offset` lies in what the run's windows covered, `[first read, end of
    /// the last window)`.
    pub fn covers(&self, offset: u64) -> bool {
        self.active && offset >= self.lo && offset < self.window_end()
    }

    /// Whether `offset` lies in the last window issued (recent enough to be cached or
    /// in flight, unlike the older windows of the run's span).
    pub fn in_last(&self, offset: u64) -> bool {
        self.active && offset >= self.start && offset < self.window_end()
    }

    /// Where the window after the last one will end, while a run is followed.
    pub fn ahead(&self) -> Option<u64> {
        let next = (2 * self.size as u64).min(ReadaheadConfig::default().max);
        self.active.then(|| self.window_end().saturating_add(next))
    }

    /// Cuts the last window at `stop` (where another predictor knows the contiguous
    /// data ends); a window cut to nothing ends the run.
    pub fn clip(&mut self, stop: u64) {
        if !self.active {
            return;
        }
        if stop <= self.start {
            self.active = false;
        } else {
            self.size = self
                .size
                .min((stop - self.start).min(u32::MAX as u64) as u32);
        }
    }

    /// Records one read; returns the window to issue now, `(start, size)`, if any.
    pub fn observe(&mut self, offset: u64, len: u64) -> Option<(u64, u64)> {
        let config = ReadaheadConfig::default();
        let end = offset.saturating_add(len);
        let sequential = self.continues(offset);
        self.prev_end = end;
        if self.spans(offset, len) {
            self.strikes = 0;
            self.lo = self.lo.min(offset);
            // The read reached the last window: issue the next one.
            if end > self.start {
                let size = (2 * self.size as u64).min(config.max);
                self.start = self.window_end().max(end);
                self.size = size as u32;
                return Some((self.start, size));
            }
            return None;
        }
        if sequential {
            let size = config.initial.max(2 * len).min(config.max);
            (self.lo, self.start, self.size) = (offset, end, size as u32);
            (self.strikes, self.active) = (0, true);
            return Some((end, size));
        }
        if self.active {
            self.strikes += 1;
            if self.strikes >= MAX_STRIKES {
                self.active = false;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, Readahead};

    const K: u64 = 1 << 10;

    #[test]
    fn sequential_stream_gets_readaheads_windows() {
        let mut w = Window::new();
        let mut ra = Readahead::new(ReadaheadConfig::default());
        for i in 0..200u64 {
            let (o, l) = (i * 16 * K, 16 * K);
            let ours = w.observe(o, l);
            let theirs: Vec<(u64, u64)> = ra
                .observe(o, l, 4)
                .iter()
                .map(|h| (h.offset, h.len))
                .collect();
            assert_eq!(ours.into_iter().collect::<Vec<_>>(), theirs, "read {i}");
        }
    }

    #[test]
    fn backfills_and_small_skips_keep_the_run() {
        let mut w = Window::new();
        assert_eq!(w.observe(0, K), Some((K, 128 * K)));
        // Skip ahead inside the window, then back-fill behind the frontier.
        assert!(
            w.observe(8 * K, K).is_some(),
            "entering the window issues the next"
        );
        assert!(w.observe(3 * K, K).is_none());
        assert!(w.active());
        // One far read is a strike; returning keeps the run.
        assert!(w.observe(100 << 20, K).is_none());
        assert!(w.active());
        assert!(w.observe(10 * K, K).is_none());
        // Two far reads in a row end it.
        w.observe(100 << 20, K);
        w.observe(200 << 20, K);
        assert!(!w.active());
    }

    #[test]
    fn strided_reads_open_nothing() {
        let mut w = Window::new();
        for i in 1..50u64 {
            assert!(w.observe(i * 256 * K, 32 * K).is_none());
        }
        assert_eq!(std::mem::size_of::<Window>(), 32);
    }
}
