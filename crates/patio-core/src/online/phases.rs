//! Phases: finished runs of one pattern, composed into one nested pattern when their
//! starts form a pattern (or recur), and the recorded ends of phases nothing
//! predicted (saved with the model so that a repeated run stops at each).

use super::{Pat, Predictor, Run, Source};
use crate::codec::{put_ivarint, put_uvarint, Cursor};
use crate::detect::Detector;
use crate::error::Result;
use crate::tree::{PatternSeq, Piece};

/// Most bytes the recorded phase ends may take (varint-coded); later phases are not
/// recorded once it is full.
pub const PHASE_ENDS_BYTES: usize = 128;

/// A completed run: where it started, how many elements it had, and a 16-bit
/// fingerprint of its body truncated to them with its request length (0: not
/// composable; also when it had more than 65,535 elements).
#[derive(Clone, Copy, Debug)]
pub(super) struct Phase {
    pub(super) start: [u32; 2],
    pub(super) count: u16,
    pub(super) fp: u16,
}

impl Phase {
    pub(super) fn start(&self) -> i64 {
        (self.start[0] as u64 | (self.start[1] as u64) << 32) as i64
    }
}

impl Predictor {
    pub(super) fn push_phase(&mut self, start: i64, count: u64, fp: u16) {
        let cap = self.limits.phases as usize;
        if cap == 0 {
            return;
        }
        if self.phases.len() == cap {
            self.phases.remove(0);
        }
        if self.phases.capacity() == 0 {
            self.phases.reserve_exact(cap);
        }
        let fits = count <= u16::MAX as u64;
        self.phases.push(Phase {
            start: [start as u32, (start as u64 >> 32) as u32],
            count: count.min(u16::MAX as u64) as u16,
            fp: if fits { fp } else { 0 },
        });
    }

    /// Records that the phase starting at `start` had `count` elements.
    pub(super) fn record_end(&mut self, start: i64, count: u64) {
        if let Some(bytes) = with_phase_end(&self.ends, start, count) {
            self.ends = bytes.into_boxed_slice();
        }
    }

    /// Elements of the phase that started at `start`, if its end was recorded.
    pub(super) fn known_end(&self, start: i64) -> Option<u64> {
        phase_ends(Cursor::new(&self.ends))
            .ok()?
            .into_iter()
            .find(|e| e.0 == start)
            .map(|e| e.1)
    }

    /// Composes a new run with the phases before it ([`Predictor::compose_phases`]);
    /// a run that is not composed ends where a phase starting at the same offset
    /// ended before, when that was recorded.
    pub(super) fn compose(&self, run: Run) -> Run {
        let mut run = self.compose_phases(run);
        if run.source != Source::Composed {
            if let Some(count) = self.known_end(run.init).filter(|&c| c > run.next) {
                run.end = count.min(u32::MAX as u64 - 1) as u32;
            }
        }
        run
    }

    /// Composes a new run with the phases before it: when they are the same inner
    /// pattern (same body over the same count and request length) and their starts,
    /// with the new run's, form a pattern of their own or recur, the result is one
    /// nested run whose outer level is that pattern. Without an outer pattern, the
    /// phase before it sets where the new run is expected to end.
    pub(super) fn compose_phases(&self, mut run: Run) -> Run {
        let Some(last) = self.phases.last() else {
            return run;
        };
        let count = last.count as u64;
        if last.fp == 0 || run.next >= count {
            return run;
        }
        let Some(inner) = run.pat.truncate(count) else {
            return run;
        };
        let fp = inner.fingerprint(run.len);
        let same = self
            .phases
            .iter()
            .rev()
            .take_while(|p| p.fp == fp && p.count == last.count)
            .count();
        if same == 0 {
            return run;
        }
        let mut starts: Vec<i64> = self.phases[self.phases.len() - same..]
            .iter()
            .map(Phase::start)
            .collect();
        starts.push(run.init);
        let composed =
            outer_pattern(&starts, self.limits.window as usize).and_then(|(j, outer)| {
                let pat = Pat::nest(&outer, &inner)?;
                let before = (starts.len() - 1 - j) as u64;
                Some(Run {
                    init: starts[j],
                    pat,
                    next: before * count + run.next,
                    source: Source::Composed,
                    phase: count as u32,
                    end: u32::MAX,
                    ..run.clone()
                })
            });
        match composed {
            Some(c) => c,
            None => {
                run.end = count.min(u32::MAX as u64 - 1) as u32;
                run
            }
        }
    }
}

/// Decodes recorded phase ends: `(start, count)`, oldest first.
pub(super) fn phase_ends(mut c: Cursor) -> Result<Vec<(i64, u64)>> {
    let mut start = 0i64;
    let mut out = Vec::new();
    while !c.is_at_end() {
        let head = c.uvarint()?;
        let delta = c.ivarint()?.wrapping_shl((head & 63) as u32);
        start = start.wrapping_add(delta);
        out.push((start, head >> 6));
    }
    Ok(out)
}

/// Recorded phase ends `ends` with the phase starting at `start` recorded as `count`
/// elements; `None` when nothing changes: already recorded, a phase of one element
/// (no phase), or no room left within [`PHASE_ENDS_BYTES`].
pub(super) fn with_phase_end(ends: &[u8], start: i64, count: u64) -> Option<Vec<u8>> {
    if !(2..1 << 32).contains(&count) {
        return None;
    }
    let mut ends = phase_ends(Cursor::new(ends)).ok()?;
    match ends.iter_mut().find(|e| e.0 == start) {
        Some(e) if e.1 == count => return None,
        Some(e) => e.1 = count,
        None => ends.push((start, count)),
    }
    Some(encode_phase_ends(&ends)).filter(|b| b.len() <= PHASE_ENDS_BYTES)
}

/// Phase ends, oldest first, each `uvar count << 6 | shift, ivar (start - previous
/// start) >> shift` where `shift` is the difference's trailing zero bits: starts of
/// aligned data take a byte or two.
pub(super) fn encode_phase_ends(ends: &[(i64, u64)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut previous = 0i64;
    for &(start, count) in ends {
        let delta = start.wrapping_sub(previous);
        let shift = if delta == 0 {
            0
        } else {
            delta.trailing_zeros()
        };
        put_uvarint(&mut out, count << 6 | shift as u64);
        put_ivarint(&mut out, delta >> shift);
        previous = start;
    }
    out
}

/// The outer pattern of phase starts: `(index of its first start, body)`. A detected
/// node of at least four starts ending at the last one; else the last three evenly
/// spaced; else a cycle: the last start seen before, the starts since then repeat.
pub(super) fn outer_pattern(starts: &[i64], window: usize) -> Option<(usize, Pat)> {
    let n = starts.len();
    if n < 2 {
        return None;
    }
    let seq = PatternSeq::build(starts, &Detector::new(window));
    if let Some(Piece::Node(node)) = seq.pieces().last() {
        if node.len() >= 4 {
            return Some((n - node.len() as usize, Pat::from_body(&node.body)?));
        }
    }
    let deltas: Option<Vec<i64>> = starts.windows(2).map(|w| w[1].checked_sub(w[0])).collect();
    let deltas = deltas?;
    if n >= 3 && deltas[n - 2] == deltas[n - 3] {
        return Some((n - 3, Pat::flat(&[deltas[n - 2]], 2)));
    }
    let j = starts[..n - 1].iter().rposition(|&s| s == starts[n - 1])?;
    Some((j, Pat::flat(&deltas[j..], 1)))
}
