//! Following the active pattern and finding a new one: a new request length, a
//! request that advances the pattern (or skips one element), misses and strikes, the
//! end of a run, and detection over the history (contiguous runs, the detector's
//! nodes) when nothing is active.

use super::{Active, Pat, Predictor, Run, Source};
use crate::detect::Detector;
use crate::tree::{PatternSeq, Piece};

impl Predictor {
    /// A predicted request whose length differs from the run's starts a new phase
    /// when the run's body is one of interleaved records: the body rescaled to the
    /// new record length is followed from this request (the old run is kept in case
    /// the next request continues it).
    pub(super) fn new_length(&mut self, offset: u64, len: u64) {
        let Some(Active::Run(run)) = &self.active else {
            return;
        };
        if run.len == len || run.source == Source::Composed {
            return;
        }
        let Some(pat) = run.pat.rescaled(run.len, len) else {
            return;
        };
        let old = run.clone();
        let fresh = Run {
            init: offset as i64,
            pat: pat.canonical(),
            next: 1,
            source: Source::Boundary,
            first: self.seen - 1,
            len,
            phase: 0,
            end: u32::MAX,
        };
        // The old run's phase ended with the request before this one (and before the
        // element this request skipped, if it matched by skipping one).
        let mut ended = old.clone();
        ended.next = ended.next.saturating_sub(1 + self.skipped as u64);
        self.active = Some(Active::Run(ended));
        self.end_active(Some(fresh.first));
        self.previous = Some(Box::new(old));
        self.adopt(Active::Run(fresh));
    }

    /// Moves the active pattern along; `true` when `offset` was predicted.
    pub(super) fn advance(&mut self, offset: u64) -> bool {
        let mut crossed = None;
        let last = self.last();
        let hit = match &mut self.active {
            None => false,
            Some(Active::Contiguous { gap }) => match last {
                Some(prev) => prev.wrapping_add(self.lens[2]).wrapping_add(*gap) == offset,
                None => false,
            },
            Some(Active::Run(run)) => {
                // The expected element, or the one after it (one predicted request
                // skipped) — but not twice in a row, which would lock onto a stride of
                // half the real one. A run that goes on past its predicted end was a
                // longer phase: its end is unknown again.
                let skips = if self.skipped { 1 } else { 2 };
                let step = (0..skips).find(|&s| run.element(run.next + s) == Some(offset));
                if let Some(s) = step {
                    if run.next + s >= run.end() {
                        run.end = u32::MAX;
                    }
                    let before = run.next;
                    run.next += s + 1;
                    if run.phase() > 0 && before / run.phase() != run.next / run.phase() {
                        crossed = Some(run.next / run.phase() * run.phase() - run.phase());
                    }
                }
                self.skipped = step == Some(1);
                step.is_some()
            }
        };
        if let (Some(at), Some(Active::Run(run))) = (crossed, &self.active) {
            // A composed run finished one of its phases.
            let phase = run.phase();
            let done = run
                .element(at)
                .zip(run.pat.truncate(phase))
                .map(|(start, inner)| (start as i64, inner.fingerprint(run.len)));
            if let Some((start, fp)) = done {
                self.push_phase(start, phase, fp);
            }
        }
        if hit {
            self.confirmed = self.confirmed.saturating_add(1);
            self.strikes = 0;
            if self.confirmed >= 2 {
                self.previous = None;
            }
        } else if let Some(prev) = self.previous.take() {
            // The request continues the run a phase-boundary adoption replaced: the
            // boundary was a one-off request; follow the old run again.
            let step = (0..2).find(|&s| prev.element(prev.next + s) == Some(offset));
            if let Some(s) = step {
                let mut prev = *prev;
                prev.next += s + 1;
                self.active = Some(Active::Run(prev));
                self.confirmed = 1;
                self.strikes = 0;
                self.skipped = false;
                return true;
            }
        }
        hit
    }

    /// Reacts to a request the active pattern did not predict (it is already in the
    /// history).
    pub(super) fn missed(&mut self, len: u64) {
        let finished = matches!(&self.active, Some(Active::Run(r)) if r.next >= r.end());
        if finished {
            self.end_active(None);
        }
        let active_len = match &self.active {
            Some(Active::Run(r)) => Some(r.len),
            _ => None,
        };
        // A new request length while a run is followed marks the start of a new
        // phase, as does the end of a run that ended where predicted.
        let boundary = finished || active_len.is_some_and(|l| l != len);
        match self.detect(len, boundary) {
            Some(found) => {
                let (first, keep) = match &found {
                    Active::Run(r) => (Some(r.first), r.source == Source::Boundary),
                    Active::Contiguous { .. } => (None, false),
                };
                // A boundary adoption keeps the run it replaces, in case the boundary
                // was a one-off request.
                let previous = match &self.active {
                    Some(Active::Run(old)) if keep => Some(Box::new(old.clone())),
                    _ => None,
                };
                self.end_active(first);
                self.previous = previous;
                self.adopt(found);
            }
            None if self.active.is_some() => {
                self.strikes = self.strikes.saturating_add(1);
                if self.strikes > self.limits.max_strikes as u16 {
                    self.end_active(None);
                }
            }
            None => {}
        }
    }

    /// Ends the active pattern: a run becomes a phase and its body is remembered —
    /// unless the pattern replacing it starts at or before it (`replaced_from`: the
    /// new run's first request), which then grew out of it.
    pub(super) fn end_active(&mut self, replaced_from: Option<u64>) {
        if let Some(Active::Run(run)) = self.active.take() {
            let grown = replaced_from.is_some_and(|f| f <= run.first);
            if !grown {
                let truncated = run.pat.truncate(run.next);
                if run.phase() == 0 {
                    let fp = truncated.as_ref().map_or(0, |t| t.fingerprint(run.len));
                    self.push_phase(run.init, run.next, fp);
                    if run.end() != run.next {
                        self.record_end(run.init, run.next);
                    }
                }
                let body = match truncated {
                    Some(t) if run.phase() == 0 && t.0[0] > 0 => t,
                    _ => run.pat,
                };
                self.remember(&body, run.len);
            }
        }
        self.confirmed = 0;
        self.strikes = 0;
        self.skipped = false;
    }

    /// A pattern that explains the most recent requests: a detected node, else a
    /// contiguous run, else a remembered body.
    pub(super) fn detect(&self, len: u64, boundary: bool) -> Option<Active> {
        let offsets = self.history.offsets(self.last()?);
        self.explaining_node(&offsets, len)
            .or_else(|| self.contiguous_tail(&offsets))
            .or_else(|| self.explaining_memory(&offsets, len, boundary))
    }

    /// Contiguous when the last three requests each start the same gap (within the
    /// tolerance) after the previous end.
    pub(super) fn contiguous_tail(&self, offsets: &[i64]) -> Option<Active> {
        let n = offsets.len();
        if n < 3 {
            return None;
        }
        let h: Vec<(u64, u64)> = (0..3)
            .map(|i| (offsets[n - 3 + i] as u64, self.lens[i]))
            .collect();
        let gap = |a: (u64, u64), b: (u64, u64)| b.0.checked_sub(a.0.checked_add(a.1)?);
        match (gap(h[0], h[1]), gap(h[1], h[2])) {
            (Some(a), Some(b)) if a == b && a <= self.limits.contiguous_gap as u64 => {
                // Requests of one size are a stride: a run that can become a phase.
                let step = i64::try_from(self.lens[0].checked_add(a)?).ok();
                match step.filter(|_| self.lens.iter().all(|&l| l == self.lens[0])) {
                    Some(step) => Some(Active::Run(Run {
                        init: offsets[n - 3],
                        pat: Pat::flat(&[step], 2),
                        next: 3,
                        source: Source::Detected,
                        first: self.seen - 3,
                        len: self.lens[2],
                        phase: 0,
                        end: u32::MAX,
                    })),
                    None => Some(Active::Contiguous { gap: a }),
                }
            }
            _ => None,
        }
    }

    /// The latest detected node of at least four elements whose extrapolation explains
    /// every request after it.
    pub(super) fn explaining_node(&self, offsets: &[i64], len: u64) -> Option<Active> {
        let seq = PatternSeq::build(offsets, &Detector::new(self.limits.window as usize));
        let mut start = offsets.len() as u64;
        for piece in seq.pieces().iter().rev() {
            start -= piece.len();
            let Piece::Node(node) = piece else { continue };
            if node.len() < 4 {
                continue;
            }
            let Some(pat) = Pat::from_body(&node.body) else {
                continue;
            };
            let run = Run {
                init: node.init,
                pat,
                next: 0,
                source: Source::Detected,
                first: 0,
                len,
                phase: 0,
                end: u32::MAX,
            };
            let after = &offsets[(start + node.len()) as usize..];
            let explained = after
                .iter()
                .enumerate()
                .all(|(j, &o)| run.element(node.len() + j as u64) == Some(o as u64));
            if explained {
                let next = node.len() + after.len() as u64;
                return Some(Active::Run(Run {
                    next,
                    first: self.seen - next,
                    ..run
                }));
            }
        }
        None
    }

    pub(super) fn adopt(&mut self, found: Active) {
        self.confirmed = 0;
        self.strikes = 0;
        self.skipped = false;
        self.active = Some(match found {
            Active::Run(run) => Active::Run(self.compose(run)),
            other => other,
        });
    }
}
