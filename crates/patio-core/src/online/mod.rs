//! Online access-pattern analysis for one request stream: recognise the pattern while
//! it forms and predict the next requests ("pattern growth", chapter 2 of the
//! prefetching thesis), built on the offline engine instead of a second rule set.
//!
//! * **Growth.** The active pattern is a first value and a compact body (flat levels,
//!   outermost first); its element `i` is `init + offset_of(i)`, which extrapolates
//!   past the end of the body (flat units continue their delta vector, nested ones
//!   their outer stride). A request equal to the next expected element advances the
//!   pattern in O(1).
//! * **Detection** runs only when there is no active pattern or it failed: the
//!   detector and pattern tree over the recent history; a node is adopted when it has
//!   at least four elements (confirmed, not guessed) and its extrapolation explains
//!   every request after it. Contiguous runs (each request starts within a small gap
//!   of the previous end, whatever the sizes) are recognised directly; requests of
//!   one size among them are followed as a stride, so that they can become a phase.
//! * **Noise.** A request the pattern did not predict is a strike; the pattern is
//!   dropped after [`OnlineConfig::max_strikes`] strikes in a row, so a one-off random
//!   request does not break it while a real change is followed within a few requests.
//!   A request that skips one predicted element still matches.
//! * **History.** The recent requests are kept as a ring of 32-bit offset deltas (a
//!   larger delta takes four slots). Dropped patterns' bodies are remembered
//!   (bounded, varint-encoded with their request length): when a new run starts the
//!   way a remembered body starts, it is adopted at once — an earlier kd pattern is
//!   reused before the new one completes, and bodies saved after a run
//!   ([`Predictor::save`]) let the next run predict from its first requests. A body
//!   whose deltas are multiples of its request length (records of `p` processes
//!   interleaved) is also tried scaled to a new request length: a request of a new
//!   length starts a new phase, and the old run is kept in case the next request
//!   continues it.
//! * **Phases.** Each run of a pattern that ends is a phase `(start, body, count)`.
//!   When the phase a new run starts is the same inner pattern as the phases before
//!   it and their starts form a pattern of their own (the detector over the starts:
//!   four or more, or three evenly spaced) or recur (a start seen before begins the
//!   same cycle again), the two compose into one nested pattern, so the jump to the
//!   next phase and its first requests are predicted. Without an outer pattern, the
//!   phase before predicts where the current one ends: nothing is predicted past that
//!   end (a run that goes on past it simply continues, its end unknown again).
//! * **Phase ends.** Where a phase that started at a given offset ended is recorded
//!   when nothing predicted it (bounded by [`PHASE_ENDS_BYTES`]) and saved with the
//!   bodies: a repeated run over the same file then stops prefetching exactly at each
//!   such end — variables of irregular record counts, for example — instead of
//!   prefetching past it.
//! * **Depth.** A new pattern predicts one request ahead, doubling with every
//!   request it predicted, so a wrong guess after a change costs little.
//! * **Correlation.** A bounded table of successors ("after offset A comes B"; new
//!   entries only for unpredicted requests) predicts, chained (A → B → C), with the
//!   last request's length, once an entry has been seen
//!   [`OnlineConfig::correlation_threshold`] times more often than others: when no
//!   structured pattern is active, or the active one is still a guess (a remembered
//!   body confirmed fewer than twice, or a pattern that just missed).
//!
//! Everything the analyzer holds is bounded by its configuration (remembered bodies
//! by [`REMEMBERED_BYTES`] too) and counted by [`Predictor::model_bytes`]; with the
//! defaults it stays under 1 KiB on every workload measured.
//!
//! The analyzer's parts, one module each: [`bodies`] (compact pattern bodies and the
//! remembered ones), [`history`] (the ring of recent offset deltas), `growth`
//! (following the active pattern, detecting a new one), [`phases`] (finished runs,
//! their composition and recorded ends), [`correlation`] (the successor table) and
//! [`model`] (the saved model file); this module holds the public types, the state and
//! the prediction.

mod bodies;
mod correlation;
mod growth;
mod history;
mod model;
mod phases;
#[cfg(test)]
mod tests;

pub use bodies::REMEMBERED_BYTES;
pub use model::MODEL_MAGIC;
pub use phases::PHASE_ENDS_BYTES;

use bodies::Pat;
use correlation::Link;
use history::DeltaRing;
use phases::Phase;

/// Tunables of the online analyzer.
#[derive(Clone, Debug)]
pub struct OnlineConfig {
    /// Requests kept for detection (4 to 4096).
    pub history: usize,
    /// Detector search window over that history.
    pub window: usize,
    /// Unpredicted requests in a row after which the active pattern is dropped.
    pub max_strikes: u32,
    /// Largest gap (bytes, at most 4 GiB) between one request's end and the next
    /// start that still counts as contiguous.
    pub contiguous_gap: u64,
    /// Bodies of earlier patterns remembered for reuse (at most 255, and at most
    /// [`REMEMBERED_BYTES`] encoded).
    pub remembered: usize,
    /// Completed phases (runs of one pattern) kept to compose them (at most 255).
    pub phases: usize,
    /// Entries of the correlation table (at most 255).
    pub correlation_entries: usize,
    /// Times a successor must have been seen before it is predicted.
    pub correlation_threshold: u32,
}

impl Default for OnlineConfig {
    fn default() -> Self {
        OnlineConfig {
            history: 32,
            window: 16,
            max_strikes: 2,
            contiguous_gap: 0,
            remembered: 8,
            phases: 8,
            correlation_entries: 20,
            correlation_threshold: 3,
        }
    }
}

/// A predicted request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    pub offset: u64,
    pub len: u64,
    /// 0 to 1: how sure the analyzer is.
    pub confidence: f32,
}

/// What the analyzer currently follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Following {
    Nothing,
    Contiguous,
    Strided,
    KdStrided,
    RepeatingDeltas,
    /// Phases of one inner pattern whose starts follow an outer pattern (or recur).
    Composed,
    Correlation,
}

/// The configuration in the few bytes the predictor keeps.
#[derive(Clone, Copy, Debug)]
struct Limits {
    contiguous_gap: u32,
    history: u16,
    window: u16,
    max_strikes: u8,
    remembered: u8,
    phases: u8,
    links: u8,
    link_threshold: u8,
}

impl Limits {
    fn new(c: &OnlineConfig) -> Self {
        let small = |v: usize| v.min(u8::MAX as usize) as u8;
        Limits {
            contiguous_gap: c.contiguous_gap.min(u32::MAX as u64) as u32,
            history: c.history.clamp(4, 4096) as u16,
            window: c.window.clamp(1, 4096) as u16,
            max_strikes: c.max_strikes.min(u8::MAX as u32) as u8,
            remembered: small(c.remembered),
            phases: small(c.phases),
            links: small(c.correlation_entries),
            link_threshold: c.correlation_threshold.clamp(1, 15) as u8,
        }
    }
}

/// How the active pattern was found; sets its starting confidence and depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// Detected over the history (at least four elements).
    Detected,
    /// A remembered body that matched a tail of the history.
    Remembered,
    /// A remembered body adopted on the first request of a new phase (the request
    /// length changed, or the previous phase ended where predicted).
    Boundary,
    /// Phases composed with their starts' pattern.
    Composed,
}

/// A pattern being followed.
#[derive(Clone, Debug)]
struct Run {
    init: i64,
    pat: Pat,
    /// Index of the next expected element.
    next: u64,
    source: Source,
    /// Number of the request (in this predictor's count) of element 0.
    first: u64,
    /// Request length when the run was adopted.
    len: u64,
    /// Elements per phase of a composed run (0 otherwise).
    phase: u32,
    /// Element index where the run is expected to end (`u32::MAX`: unknown).
    end: u32,
}

impl Run {
    fn end(&self) -> u64 {
        match self.end {
            u32::MAX => u64::MAX,
            e => e as u64,
        }
    }

    fn phase(&self) -> u64 {
        self.phase as u64
    }

    fn element(&self, i: u64) -> Option<u64> {
        u64::try_from(self.init as i128 + self.pat.offset_of(i)?).ok()
    }
}

#[derive(Clone, Debug)]
enum Active {
    /// Next request starts `gap` after the previous end, with the previous size.
    Contiguous {
        gap: u64,
    },
    Run(Run),
}

/// Per-stream online analyzer and predictor.
#[derive(Clone, Debug)]
pub struct Predictor {
    limits: Limits,
    history: DeltaRing,
    /// Offset of the last request (when `seen > 0`).
    last: u64,
    /// Lengths of the last three requests, newest last.
    lens: [u64; 3],
    /// Requests observed.
    seen: u64,
    active: Option<Active>,
    /// The run a phase-boundary adoption replaced, restored when the next request
    /// continues it (the boundary was a one-off request).
    previous: Option<Box<Run>>,
    /// Requests the active pattern has predicted correctly.
    confirmed: u32,
    strikes: u16,
    /// The last request matched by skipping one predicted element.
    skipped: bool,
    /// Remembered bodies, most recent first: `uvar size, uvar request length, body`.
    remembered: Box<[u8]>,
    phases: Vec<Phase>,
    /// Phases whose end nothing predicted, oldest first (see [`encode_phase_ends`]).
    ends: Box<[u8]>,
    /// Correlation table, most recently used first.
    links: Vec<Link>,
}

impl Predictor {
    pub fn new(config: OnlineConfig) -> Self {
        let limits = Limits::new(&config);
        Predictor {
            history: DeltaRing::new(limits.history as usize - 1),
            limits,
            last: 0,
            lens: [0; 3],
            seen: 0,
            active: None,
            previous: None,
            confirmed: 0,
            strikes: 0,
            skipped: false,
            remembered: Box::default(),
            phases: Vec::new(),
            ends: Box::default(),
            links: Vec::new(),
        }
    }

    fn last(&self) -> Option<u64> {
        (self.seen > 0).then_some(self.last)
    }

    /// Records one request; returns whether it was the one predicted next.
    pub fn observe(&mut self, offset: u64, len: u64) -> bool {
        let predicted = self.advance(offset);
        self.learn_link(offset, !predicted);
        if let Some(last) = self.last() {
            self.history.push(offset.wrapping_sub(last) as i64);
        }
        self.last = offset;
        self.lens = [self.lens[1], self.lens[2], len];
        self.seen += 1;
        if predicted {
            self.new_length(offset, len);
        } else {
            self.missed(len);
        }
        predicted
    }

    /// The next `count` requests expected, most likely first.
    pub fn predict(&self, count: usize) -> Vec<Prediction> {
        let Some(last) = self.last() else {
            return Vec::new();
        };
        let last_len = self.lens[2];
        let confidence = self.confidence();
        let ahead = count.min(self.ahead()) as u64;
        if let Some(Active::Run(r)) = &self.active {
            // A remembered body hardly confirmed yet, or a pattern that just missed,
            // is a guess: successors seen often enough are better ones.
            let guess =
                matches!(r.source, Source::Remembered | Source::Boundary) && self.confirmed < 2;
            if guess || self.strikes > 0 {
                let chained = self.chain(last, last_len, count);
                if !chained.is_empty() {
                    return chained;
                }
            }
        }
        match &self.active {
            Some(Active::Contiguous { gap }) => (0..ahead)
                .map_while(|i| {
                    let step = last_len.checked_add(*gap)?;
                    let offset = last.checked_add(step.checked_mul(i + 1)?)?;
                    Some(Prediction {
                        offset,
                        len: last_len,
                        confidence,
                    })
                })
                .collect(),
            Some(Active::Run(run)) => (0..ahead.min(run.end().saturating_sub(run.next)))
                .map_while(|i| run.element(run.next.checked_add(i)?))
                .map(|offset| Prediction {
                    offset,
                    len: last_len,
                    confidence,
                })
                .collect(),
            None => self.chain(last, last_len, count),
        }
    }

    /// Requests ahead the active pattern may predict: one when it was just adopted,
    /// doubling with each request it predicted (a new pattern prefetches shallow
    /// until it is confirmed).
    fn ahead(&self) -> usize {
        1 << self.confirmed.min(16)
    }

    fn confidence(&self) -> f32 {
        let base = match &self.active {
            Some(Active::Run(r)) => match r.source {
                Source::Remembered => 0.5,
                Source::Boundary => 0.6,
                Source::Detected | Source::Composed => 0.75,
            },
            _ => 0.75,
        };
        let grown = base + (1.0 - base) * (self.confirmed as f32 / (self.confirmed as f32 + 4.0));
        grown / (1 + self.strikes) as f32
    }

    /// What the analyzer follows now.
    pub fn following(&self) -> Following {
        match &self.active {
            Some(Active::Contiguous { .. }) => Following::Contiguous,
            Some(Active::Run(r)) if r.source == Source::Composed => Following::Composed,
            Some(Active::Run(r)) if r.pat.0[..] == [1, 1, r.len as i64][..] => {
                Following::Contiguous
            }
            Some(Active::Run(r)) => r.pat.kind(),
            None if !self.predict(1).is_empty() => Following::Correlation,
            None => Following::Nothing,
        }
    }

    /// Bytes the analyzer holds: the predictor itself and every heap allocation it
    /// owns (history ring, active and previous bodies, remembered bodies, phases,
    /// correlation table), by capacity.
    pub fn model_bytes(&self) -> usize {
        let run = |r: &Run| r.pat.heap_bytes();
        let active = match &self.active {
            Some(Active::Run(r)) => run(r),
            _ => 0,
        };
        std::mem::size_of::<Self>()
            + self.history.slots.len() * std::mem::size_of::<i32>()
            + active
            + self
                .previous
                .as_ref()
                .map_or(0, |r| std::mem::size_of::<Run>() + run(r))
            + self.remembered.len()
            + self.phases.capacity() * std::mem::size_of::<Phase>()
            + self.ends.len()
            + self.links.capacity() * std::mem::size_of::<Link>()
    }
}
