//! The `pattern` policy: patio-core's online analyzer
//! ([`patio_core::online::Predictor`]) for what has a pattern, a readahead window
//! ([`crate::window`]) for near-sequential runs, and request lengths learned per phase
//! ([`crate::lengths`]) — one policy that is never worse than readahead where the data
//! is read nearly in order and follows the analyzer where it is not.
//!
//! On each read:
//!
//! 1. **Window.** Where readahead would open or advance a window, so does this policy,
//!    but a run survives small forward skips, back-fills behind the frontier and a
//!    single stray read ([`crate::window::Window`]). When the analyzer follows a
//!    structured pattern (strided, kd-strided, repeating deltas, composed phases) and
//!    predicts a jump within the window, the window stops at the jump: the analyzer
//!    knows where the contiguous data ends.
//! 2. **Body after a jump.** A read that does not continue the previous one and whose
//!    length class is usually followed by longer contiguous data (an archive entry's
//!    header, then its data) gets the expected body prefetched right after it, before
//!    the data read — also inside a run's span, whose older windows may be used up,
//!    but not inside the last window issued.
//! 3. **Analyzer.** The analyzer's predictions, `depth` requests ahead, each with the
//!    length learned to follow the previous one ([`crate::lengths::Lengths`]) instead
//!    of the last request's. Inside an open window of unstructured data, predictions
//!    between the read and the end of the window after the last one, and those that
//!    continue that data contiguously past it, are left to the window (request-sized
//!    prefetches there would split its large requests). Predictions slightly out of
//!    order over contiguous data (page-cache readahead through a mount) are not a jump.
//!
//! On a stream the analyzer follows as strided, kd-strided or phased data nothing
//! reads sequentially, so no window opens and the hints are the analyzer's alone.

use crate::error::PrefetchError;
use crate::lengths::Lengths;
use crate::policy::{Hint, Policy, PolicyKind};
use crate::window::Window;
use patio_core::online::{Following, OnlineConfig, Predictor};

/// Requests ahead the analyzer is asked for to see whether a jump ends a window early.
const JUMP_LOOKAHEAD: usize = 64;
/// Confidence of a body predicted after a short read (above the engine's 0.55).
const BODY_CONFIDENCE: f32 = 0.7;

/// The `pattern` policy (see the module documentation).
pub struct Pattern {
    predictor: Predictor,
    window: Window,
    lengths: Lengths,
}

impl Pattern {
    /// The analyzer's defaults: a history of 32 requests (larger arrays nest as
    /// phases), 8 remembered bodies, 8 phases, 20 correlation entries.
    pub fn config() -> OnlineConfig {
        OnlineConfig::default()
    }

    pub fn new() -> Self {
        Self::with(Predictor::new(Self::config()))
    }

    fn with(predictor: Predictor) -> Self {
        Pattern {
            predictor,
            window: Window::new(),
            lengths: Lengths::new(),
        }
    }

    /// A predictor that starts with the patterns saved by an earlier run.
    pub fn load(bytes: &[u8]) -> Result<Self, PrefetchError> {
        crate::model::check_kind(PolicyKind::Pattern, bytes)?;
        Predictor::load(Self::config(), bytes)
            .map(Self::with)
            .map_err(|error| PrefetchError::Corrupt {
                what: "not a saved pattern model".into(),
                error,
            })
    }

    pub fn predictor(&self) -> &Predictor {
        &self.predictor
    }

    /// Whether the analyzer follows a structured pattern (strided, kd-strided,
    /// repeating deltas, composed phases) and, if so, where its predictions jump away
    /// from the contiguous data after `end`; a "stride" of back-to-back requests that
    /// jumps nowhere within [`JUMP_LOOKAHEAD`] predictions is contiguous data, left to
    /// the window.
    fn structure(&self, end: u64) -> Option<u64> {
        let kind = matches!(
            self.predictor.following(),
            Following::Strided
                | Following::KdStrided
                | Following::RepeatingDeltas
                | Following::Composed
        );
        kind.then(|| predicted_jump(&self.predictor.predict(JUMP_LOOKAHEAD), end))
            .flatten()
    }
}

impl Default for Pattern {
    fn default() -> Self {
        Self::new()
    }
}

/// How far predictions may wander around the data they cover and still count as
/// reading it contiguously: page-cache readahead through a mount delivers large
/// sequential requests slightly out of order (two in flight, served by two threads),
/// and the analyzer then follows a "pattern" of small jumps back and forth over
/// contiguous data.
const REORDER: u64 = 1 << 20;

/// Where the contiguous data the predictions continue from `end` stops, if they jump
/// away from it. Predictions up to the first one more than [`REORDER`] bytes behind
/// `end` or past the data before it are taken as a set: the first hole in their union
/// after `end` is the jump (unless only the last two predictions lie past it); without
/// a hole, the far prediction is.
fn predicted_jump(predictions: &[patio_core::online::Prediction], end: u64) -> Option<u64> {
    let mut near = Vec::with_capacity(predictions.len());
    let mut far = false;
    let mut reach = end;
    for p in predictions {
        let hi = p.offset.saturating_add(p.len.max(1));
        if p.offset.saturating_add(REORDER) < end || p.offset > reach.saturating_add(REORDER) {
            far = true;
            break;
        }
        reach = reach.max(hi);
        near.push((p.offset, hi));
    }
    near.sort_unstable();
    let mut at = end;
    for (i, &(lo, hi)) in near.iter().enumerate() {
        if hi <= at {
            continue;
        }
        if lo > at {
            // A hole with at most two predictions past it is where the lookahead
            // cut a reordered pair, not a jump.
            if near.len() - i <= 2 && !far {
                return None;
            }
            return Some(at);
        }
        at = hi;
    }
    far.then_some(at)
}

impl Policy for Pattern {
    fn name(&self) -> &'static str {
        "pattern"
    }

    fn observe(&mut self, offset: u64, len: u64, depth: usize) -> Vec<Hint> {
        self.predictor.observe(offset, len);
        let contiguous = self.window.continues(offset);
        let previous_end = self.window.previous_end();
        self.lengths.observe(len, contiguous);
        let window = self.window.observe(offset, len);
        let end = offset.saturating_add(len);
        // A back-fill just behind the previous read (two requests arriving swapped):
        // the data up to the previous read's end has been read, and a jump the
        // predictions make over it is no jump.
        let read_to = match previous_end {
            Some(p) if p > end && p - end <= REORDER => p,
            _ => end,
        };
        let jump = self.structure(read_to);
        let structured = jump.is_some();
        let mut hints = Vec::new();
        if let Some(jump) = jump {
            self.window.clip(jump);
        }
        if let Some((start, size)) = window {
            let stop = start.saturating_add(size).min(jump.unwrap_or(u64::MAX));
            if stop > start {
                let reads = (stop - end).div_ceil(len.max(1));
                hints.push(Hint::sure(start, stop - start, reads));
            }
        }
        // After a jump to a short read (a header reached from elsewhere), the longer
        // data that usually follows reads of its length. Not after a contiguous read
        // (the window covers what follows), not where the followers are no longer than
        // the read (that is sequential reading, out of order as page-cache readahead
        // through a mount delivers it: request-sized bodies would split the windows'
        // large requests) and not inside the last window issued. Issued where an older
        // window of the run passed: its bytes may be gone (used or expired), and the
        // engine fetches only what is not cached.
        if !contiguous && !self.window.in_last(end) {
            if let Some(body) = self.lengths.body_after(len).filter(|&b| b > len) {
                hints.push(Hint::new(end, body, BODY_CONFIDENCE, 1));
            }
        }
        // Within a window, the analyzer's predictions between this read and the end of
        // the window after the last one are left to the window: request-sized
        // prefetches there would split its large backend requests. So are those that
        // continue the data contiguously past it: when reads come faster than the
        // store (the engine deepens on late hits), request-sized prefetches beyond the
        // window would reserve its next range piece by piece, one backend request per
        // read (predictions out of order by up to [`REORDER`] still continue it).
        // Predictions behind the read (back-fills), and past the windows after a jump
        // away from contiguous data, stay.
        // `reach`: how far the window and the predictions left to it cover.
        let mut reach = (!structured).then(|| self.window.ahead()).flatten();
        let mut prev = len;
        for (p, k) in self.predictor.predict(depth).into_iter().zip(1..) {
            if let Some(r) = reach {
                if p.offset >= end {
                    if p.offset <= r.saturating_add(REORDER) {
                        reach = Some(r.max(p.offset.saturating_add(p.len)));
                        continue;
                    }
                    // A jump away from the window's data: the rest stays.
                    reach = None;
                }
            }
            let len = self.lengths.next_len(prev).unwrap_or(p.len);
            hints.push(Hint::new(p.offset, len, p.confidence, k));
            prev = len;
        }
        hints
    }

    fn model_bytes(&self) -> usize {
        self.predictor.model_bytes() + std::mem::size_of::<Window>() + self.lengths.bytes()
    }

    fn save(&self) -> Option<Vec<u8>> {
        Some(self.predictor.save())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Readahead, ReadaheadConfig};
    use crate::workloads;
    use proptest::prelude::*;

    /// The byte ranges of `hints`, merged, as a sorted list.
    fn bytes(hints: &[Hint]) -> Vec<(u64, u64)> {
        let mut r: Vec<(u64, u64)> = hints
            .iter()
            .filter(|h| h.len > 0)
            .map(|h| (h.offset, h.offset + h.len))
            .collect();
        r.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (lo, hi) in r {
            match out.last_mut() {
                Some(last) if lo <= last.1 => last.1 = last.1.max(hi),
                _ => out.push((lo, hi)),
            }
        }
        out
    }

    fn covered(outer: &[(u64, u64)], lo: u64, hi: u64) -> bool {
        outer.iter().any(|&(a, b)| a <= lo && hi <= b)
    }

    /// The bare analyzer's hints, as the `pattern` policy gave them before windows and
    /// learned lengths.
    fn analyzer_alone(p: &mut Predictor, offset: u64, len: u64, depth: usize) -> Vec<(u64, u64)> {
        p.observe(offset, len);
        p.predict(depth).iter().map(|q| (q.offset, q.len)).collect()
    }

    #[test]
    fn sequential_stream_gets_a_growing_window_from_its_first_read() {
        let mut p = Pattern::new();
        let k = 1u64 << 10;
        let first = p.observe(0, 4 * k, 4);
        assert_eq!(first[0], Hint::sure(4 * k, 128 * k, 32));
        let mut sizes = vec![first[0].len];
        for i in 1..1000u64 {
            let h = p.observe(i * 4 * k, 4 * k, 4);
            sizes.extend(h.iter().filter(|h| h.len > 64 * k).map(|h| h.len));
        }
        assert_eq!(&sizes[..5], [128 * k, 256 * k, 512 * k, 1024 * k, 2048 * k]);
    }

    #[test]
    fn sequential_reads_prefetch_in_windows_not_per_request() {
        let mut p = Pattern::new();
        let k = 1u64 << 10;
        for i in 0..500u64 {
            for h in p.observe(i * 64 * k, 64 * k, 16) {
                assert!(h.len >= 128 * k, "read {i}: a request-sized hint {h:?}");
            }
        }
    }

    #[test]
    fn deep_sequential_reads_prefetch_in_windows_not_per_request() {
        // Page-cache readahead through a mount, reads coming faster than the store:
        // the engine asks for many predictions ahead; past the window they continue
        // the same contiguous data and are left to the window too.
        let mut p = Pattern::new();
        let k = 1u64 << 10;
        let mut off = 0;
        let mut len = 128 * k;
        for i in 0..1000u64 {
            for h in p.observe(off, len, 64) {
                assert!(
                    h.len >= 512 * k || i < 4,
                    "read {i}: a request-sized hint {h:?}"
                );
            }
            off += len;
            len = 256 * k;
        }
    }

    #[test]
    fn swapped_sequential_reads_still_prefetch_in_windows() {
        // As above, with a pair of requests arriving swapped every third request: the
        // analyzer follows the small jumps back and forth as a pattern, but the data
        // they cover is contiguous, and the window keeps prefetching it in large pieces.
        let mut p = Pattern::new();
        let k = 1u64 << 10;
        let mut order: Vec<u64> = (0..400).collect();
        for i in (8..396).step_by(3) {
            order.swap(i, i + 1);
        }
        // Request-sized hints for bytes no earlier hint covered (those the engine
        // would fetch on their own; back-fills inside a window cost nothing).
        let (mut small, mut issued) = (0, Vec::new());
        for (n, &i) in order.iter().enumerate() {
            let hints = p.observe(i * 256 * k, 256 * k, 64);
            let before = bytes(&issued);
            for h in &hints {
                let steady = (16..390).contains(&n);
                if steady && h.len < 512 * k && !covered(&before, h.offset, h.offset + h.len) {
                    small += 1;
                }
            }
            issued.extend(hints);
        }
        assert!(small <= 8, "{small} request-sized hints");
    }

    #[test]
    fn out_of_order_sequential_reads_get_no_bodies() {
        // Page-cache readahead through a mount: large sequential requests, every
        // fourth pair arriving swapped (a jump back, then one ahead).
        let mut p = Pattern::new();
        let k = 1u64 << 10;
        let mut order: Vec<u64> = (0..400).collect();
        for i in (8..396).step_by(4) {
            order.swap(i, i + 1);
        }
        for (n, &i) in order.iter().enumerate() {
            for h in p.observe(i * 128 * k, 128 * k, 8) {
                assert!(h.confidence != BODY_CONFIDENCE, "read {n}: a body {h:?}");
            }
        }
    }

    #[test]
    fn header_gets_its_body_before_the_data_read() {
        let mut p = Pattern::new();
        let mut last = Vec::new();
        // Entries scattered over the file: a 60 B header, then its data.
        for i in 0..8u64 {
            let at = ((i * 7919) % 13) << 20;
            last = p.observe(at, 60, 4);
            p.observe(at + 60, 20_000 + 1000 * i, 4);
        }
        let at = 99 << 20;
        let hints = p.observe(at, 60, 4);
        assert!(
            hints
                .iter()
                .any(|h| h.offset == at + 60 && h.len >= 20_000 && h.confidence >= 0.55),
            "{hints:?} (before: {last:?})"
        );
    }

    #[test]
    fn structured_workloads_keep_the_analyzers_predictions() {
        for name in [
            "strided",
            "strided-2d",
            "strided-3d",
            "deltas",
            "climate-row",
            "climate-col",
            "pagoda",
        ] {
            for seed in 1..4 {
                let w = workloads::generate(name, 600, seed).unwrap();
                let mut p = Pattern::new();
                let mut alone = Predictor::new(Pattern::config());
                let mut confident = false;
                for (i, &(o, l)) in w.requests.iter().enumerate() {
                    let ours: Vec<(u64, u64)> = p
                        .observe(o, l, 8)
                        .iter()
                        .map(|h| (h.offset, h.len))
                        .collect();
                    let theirs = analyzer_alone(&mut alone, o, l, 8);
                    // A first read at offset 0 opens a window, as readahead's does,
                    // until the analyzer has its pattern.
                    confident |= p.structure(o + l).is_some();
                    if confident || o > 0 && i == 0 {
                        assert_eq!(ours, theirs, "{name} seed {seed} request {i}");
                    }
                }
            }
        }
    }

    /// The policy holds 80 B beside the analyzer (window 32 B, lengths 48 B), whatever
    /// the stream; `--nocapture` prints each workload's peak, as docs/BENCHMARKS.md
    /// quotes it.
    #[test]
    fn policy_state_beside_the_analyzer_is_80_bytes() {
        for name in workloads::names() {
            let w = workloads::generate(&name, 1000, 0x7061_7469_6f5f_6265).unwrap();
            let mut p = Pattern::new();
            let (mut peak, mut analyzer_peak) = (0, 0);
            for &(o, l) in &w.requests {
                p.observe(o, l, 4);
                assert_eq!(p.model_bytes(), p.predictor().model_bytes() + 80);
                peak = peak.max(p.model_bytes());
                analyzer_peak = analyzer_peak.max(p.predictor().model_bytes());
            }
            println!("{name}: peak {peak} B (analyzer {analyzer_peak} B)");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// On contiguous reads of any sizes, every byte readahead prefetches is
        /// prefetched by `pattern` too, from the first read on.
        #[test]
        fn sequential_covers_readahead(lens in prop::collection::vec(1u64..200_000, 1..150)) {
            let mut p = Pattern::new();
            let mut ra = Readahead::new(ReadaheadConfig::default());
            let (mut at, mut ours, mut theirs) = (0u64, Vec::new(), Vec::new());
            for &l in &lens {
                ours.extend(p.observe(at, l, 4));
                theirs.extend(ra.observe(at, l, 4));
                at += l;
            }
            let ours = bytes(&ours);
            for (lo, hi) in bytes(&theirs) {
                prop_assert!(covered(&ours, lo, hi), "readahead's [{lo}, {hi}) not in {ours:?}");
            }
        }

        /// Where no read continues the previous one and the analyzer predicts
        /// nothing, the policy predicts nothing either (as readahead would not).
        #[test]
        fn nothing_when_analyzer_has_nothing(
            blocks in prop::collection::vec((1u64..1 << 20, 1u64..64), 1..200),
        ) {
            let mut p = Pattern::new();
            let mut prev_end = None;
            for &(block, len) in &blocks {
                let (o, l) = (block * 4096, len * 512);
                if prev_end == Some(o) || o == 0 {
                    continue;
                }
                prev_end = Some(o + l);
                let hints = p.observe(o, l, 4);
                if p.predictor().predict(4).is_empty() {
                    prop_assert!(hints.is_empty(), "{hints:?}");
                }
            }
        }
    }
}
