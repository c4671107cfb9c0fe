//! Strided streams of the segment-grouping cache: a caller whose requests start a
//! constant number of items apart (sequential, strided, the rows of a tile) is
//! recognised after four requests (three equal strides), and the next periods of its
//! stream — the request's span shifted by one, two, … strides — form a group brought
//! ahead of demand at once, without waiting for the stream to repeat, when they lie
//! near one another ([`near_periods`]). When other callers read the gap a stream
//! skips (interleaved views, the rows of tiles side by side), the callers read the
//! file in order together: the items after the span, gaps included, come ahead as
//! one run ([`gap`], [`run_ahead`]).

use std::collections::HashMap;

/// Callers followed at once (more: all start again).
const MAX_STREAMS: usize = 4096;
/// Repeats of one stride in a row before the stream counts as strided.
const CONFIRM: u32 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stream {
    file: u32,
    first: u64,
    stride: i64,
    run: u32,
}

/// The streams of every caller.
#[derive(Default)]
pub struct Strides {
    streams: HashMap<u32, Stream>,
}

impl Strides {
    /// Caller `pid` read items `first..=last` of `file`: the stride of its stream, in
    /// items, once confirmed.
    pub fn observe(&mut self, pid: u32, file: u32, first: u64) -> Option<i64> {
        if self.streams.len() >= MAX_STREAMS && !self.streams.contains_key(&pid) {
            self.streams.clear();
        }
        let s = self.streams.entry(pid).or_insert(Stream {
            file,
            first,
            stride: 0,
            run: 0,
        });
        let stride = first as i64 - s.first as i64;
        if s.file == file && stride != 0 && stride == s.stride {
            s.run += 1;
        } else {
            s.run = 0;
        }
        *s = Stream {
            file,
            first,
            stride,
            run: s.run,
        };
        (s.run >= CONFIRM && stride != 0).then_some(stride)
    }

    /// Callers whose streams are strided now.
    pub fn active(&self) -> usize {
        self.streams.values().filter(|s| s.run >= CONFIRM).count()
    }
}

/// Bytes between the end of one period and the start of the next beyond which a
/// strided stream's next periods are not brought ahead. Periods further apart are a
/// seek each whether read ahead or on demand: reading them ahead saves no request,
/// puts their seeks inside the reader's request, and on one disk moves the head away
/// from where the other readers are (zoom: four readers 1.6 MiB strides apart each,
/// the first pass 3.3 s under `lru`, 4.1 s with their periods brought ahead).
pub const AHEAD_GAP: u64 = 1 << 20;

/// Whether the periods of a stream reading items `first..=last` (of `item` bytes)
/// at `stride` items lie within [`AHEAD_GAP`] of one another.
pub fn near_periods(first: u64, last: u64, stride: i64, item: u64) -> bool {
    let span = last - first + 1;
    stride
        .unsigned_abs()
        .saturating_sub(span)
        .saturating_mul(item)
        <= AHEAD_GAP
}

/// Items of the next `depth` periods after the span `first..=last` at `stride`,
/// within `0..items`, in period order.
pub fn periods(first: u64, last: u64, stride: i64, depth: u64, items: u64) -> Vec<u64> {
    let mut out = Vec::new();
    for k in 1..=depth as i64 {
        for i in first..=last {
            let j = i as i64 + k * stride;
            if j >= 0 && (j as u64) < items {
                out.push(j as u64);
            }
        }
    }
    out
}

/// Items the stream reading items `first..=last` at `stride` skips before its next
/// period (the gap between the span and that period), within `0..items`.
pub fn gap(first: u64, last: u64, stride: i64, items: u64) -> std::ops::Range<u64> {
    let span = last - first + 1;
    if stride > 0 {
        let end = (first + stride as u64).min(items);
        (last + 1).min(end)..end
    } else {
        let start = (first as i64 + stride + span as i64).max(0) as u64;
        start.min(first)..first
    }
}

/// The `n` items after the span `first..=last` in the direction of `stride`
/// (gaps and periods alike), within `0..items`, nearest first.
pub fn run_ahead(first: u64, last: u64, stride: i64, n: u64, items: u64) -> Vec<u64> {
    if stride > 0 {
        (last + 1..last.saturating_add(1 + n).min(items)).collect()
    } else {
        (first.saturating_sub(n)..first).rev().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_constant_stride_is_confirmed_after_four_requests() {
        let mut s = Strides::default();
        assert_eq!(s.observe(1, 0, 8), None);
        assert_eq!(s.observe(1, 0, 10), None);
        assert_eq!(s.observe(1, 0, 12), None);
        assert_eq!(s.observe(1, 0, 14), Some(2));
        assert_eq!(s.observe(2, 0, 100), None, "each caller is its own stream");
        assert_eq!(s.observe(1, 0, 16), Some(2));
        assert_eq!(s.active(), 1);
        assert_eq!(s.observe(1, 0, 17), None, "a broken stride starts again");
        assert_eq!(s.observe(1, 1, 19), None, "another file starts again");
        assert_eq!(s.observe(1, 0, 17), None);
        assert_eq!(s.observe(1, 0, 17), None, "the same item is no stride");
    }

    #[test]
    fn periods_are_near_within_the_gap_either_way() {
        let kib = 1024;
        // Contiguous or overlapping periods, and gaps up to the limit.
        assert!(near_periods(4, 5, 2, 64 * kib));
        assert!(near_periods(4, 7, 1, 64 * kib));
        assert!(
            near_periods(4, 4, 17, 64 * kib),
            "16 items of 64 KiB: 1 MiB"
        );
        assert!(near_periods(4, 4, -17, 64 * kib));
        // One item more is too far, backwards too.
        assert!(!near_periods(4, 4, 18, 64 * kib));
        assert!(!near_periods(40, 40, -18, 64 * kib));
        // zoom's 4 KiB pieces of one reader: 25 items of 64 KiB apart.
        assert!(!near_periods(0, 0, 25, 64 * kib));
        // A wider span narrows the gap.
        assert!(near_periods(0, 8, 25, 64 * kib));
    }

    #[test]
    fn the_gap_lies_between_the_span_and_its_next_period() {
        assert_eq!(gap(4, 4, 4, 100), 5..8);
        assert_eq!(gap(4, 5, 2, 100), 6..6, "contiguous periods: no gap");
        assert_eq!(gap(8, 8, -4, 100), 5..8);
        assert_eq!(gap(2, 2, -4, 100), 0..2, "cut at the file's start");
        assert_eq!(gap(98, 98, 4, 100), 99..100, "cut at its end");
        assert_eq!(run_ahead(4, 5, 3, 4, 100), vec![6, 7, 8, 9]);
        assert_eq!(run_ahead(4, 5, -3, 3, 100), vec![3, 2, 1]);
        assert_eq!(run_ahead(97, 97, 2, 5, 100), vec![98, 99]);
    }

    #[test]
    fn periods_shift_the_span_and_stay_in_the_file() {
        assert_eq!(periods(4, 5, 3, 2, 100), vec![7, 8, 10, 11]);
        assert_eq!(periods(4, 4, -3, 3, 100), vec![1]);
        assert_eq!(periods(8, 9, 1, 2, 11), vec![9, 10, 10]);
    }
}
