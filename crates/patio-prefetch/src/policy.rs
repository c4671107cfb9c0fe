//! Prediction policies behind one interface: a policy observes each read request of
//! one stream and answers with the byte ranges it expects to be read next.
//!
//! | policy | what it predicts |
//! |---|---|
//! | `none` | nothing (the baseline every reduction is measured against) |
//! | `readahead` | Linux-like: sequential reads open a window of 128 KiB after the read; each time the reader enters the window the next one is issued at twice the size, up to a maximum; a non-sequential read resets it |
//! | `stride` | Lustre-like: one constant forward stride, confirmed twice (four requests), then a few strides ahead |
//! | `markov` | Oly & Reed: transition counts between fixed blocks, learned on an earlier run ([`crate::markov`]) |
//! | `pattern` | patio-core's online analyzer, with readahead windows on near-sequential runs and learned request lengths ([`crate::pattern`]) |
//! | `oracle` | the stream's future requests, known in advance: the upper bound |
//!
//! The engine tells the policy how many requests ahead it wants (`depth`, adapted to
//! lateness and waste) and issues the ranges whose confidence is high enough; policies
//! with a window of their own (readahead) ignore `depth`.

use crate::error::PrefetchError;
use crate::markov::Markov;
pub use crate::pattern::Pattern;
use std::sync::Arc;

/// A range to prefetch.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hint {
    pub offset: u64,
    pub len: u64,
    /// 0 to 1; the engine issues only hints above its threshold.
    pub confidence: f32,
    /// By which read from now (1 = the next one) the whole range is expected to have
    /// been read; the engine lets a prefetch wait about twice that long before it
    /// counts it as wasted.
    pub reads: u32,
}

impl Hint {
    pub fn new(offset: u64, len: u64, confidence: f32, reads: u64) -> Self {
        Hint {
            offset,
            len,
            confidence,
            reads: reads.min(u32::MAX as u64) as u32,
        }
    }

    /// A hint with confidence 1.
    pub fn sure(offset: u64, len: u64, reads: u64) -> Self {
        Hint::new(offset, len, 1.0, reads)
    }
}

/// A prediction policy for one stream of reads.
pub trait Policy: Send {
    /// The policy's name (`pattern`, `markov`, …).
    fn name(&self) -> &'static str;

    /// Records one read request (the application's own offset and length) and returns
    /// the ranges expected next, nearest first; `depth` is how many requests ahead
    /// the engine would like covered.
    fn observe(&mut self, offset: u64, len: u64, depth: usize) -> Vec<Hint>;

    /// Bytes of state the policy holds now.
    fn model_bytes(&self) -> usize;

    /// The learned model as bytes for the next run, if the policy learns one.
    fn save(&self) -> Option<Vec<u8>> {
        None
    }
}

/// The policies by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PolicyKind {
    None,
    Readahead,
    Stride,
    Markov,
    Pattern,
    Oracle,
}

impl PolicyKind {
    /// Every policy, in the order tables list them.
    pub const ALL: [PolicyKind; 6] = [
        PolicyKind::None,
        PolicyKind::Readahead,
        PolicyKind::Stride,
        PolicyKind::Markov,
        PolicyKind::Pattern,
        PolicyKind::Oracle,
    ];

    pub fn name(self) -> &'static str {
        match self {
            PolicyKind::None => "none",
            PolicyKind::Readahead => "readahead",
            PolicyKind::Stride => "stride",
            PolicyKind::Markov => "markov",
            PolicyKind::Pattern => "pattern",
            PolicyKind::Oracle => "oracle",
        }
    }

    /// Whether the policy learns a model that can be saved and loaded.
    pub fn has_model(self) -> bool {
        matches!(self, PolicyKind::Markov | PolicyKind::Pattern)
    }

    /// A policy for one stream. `future` is the stream's requests (read by `oracle`
    /// only); `model` a model saved by an earlier run (`markov`, `pattern`).
    pub fn build(
        self,
        future: &[(u64, u64)],
        model: Option<&[u8]>,
    ) -> Result<Box<dyn Policy>, PrefetchError> {
        if model.is_some() && !self.has_model() {
            return Err(PrefetchError::Invalid(format!(
                "the {} policy takes no model",
                self.name()
            )));
        }
        Ok(match self {
            PolicyKind::None => Box::new(NoPrefetch),
            PolicyKind::Readahead => Box::new(Readahead::new(ReadaheadConfig::default())),
            PolicyKind::Stride => Box::new(Stride::default()),
            PolicyKind::Markov => Box::new(match model {
                Some(bytes) => {
                    crate::model::check_kind(PolicyKind::Markov, bytes)?;
                    Markov::load(bytes).map_err(|error| PrefetchError::Corrupt {
                        what: "not a saved markov model".into(),
                        error,
                    })?
                }
                None => Markov::new(crate::markov::DEFAULT_BLOCK),
            }),
            PolicyKind::Pattern => Box::new(match model {
                Some(bytes) => Pattern::load(bytes)?,
                None => Pattern::new(),
            }),
            PolicyKind::Oracle => Box::new(Oracle::new(future.into())),
        })
    }
}

impl std::str::FromStr for PolicyKind {
    type Err = PrefetchError;

    fn from_str(s: &str) -> Result<Self, PrefetchError> {
        PolicyKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = PolicyKind::ALL.iter().map(|k| k.name()).collect();
                PrefetchError::Invalid(format!(
                    "unknown policy {s:?} (one of {})",
                    names.join(", ")
                ))
            })
    }
}

impl std::fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `none`: never prefetches.
pub struct NoPrefetch;

impl Policy for NoPrefetch {
    fn name(&self) -> &'static str {
        "none"
    }

    fn observe(&mut self, _: u64, _: u64, _: usize) -> Vec<Hint> {
        Vec::new()
    }

    fn model_bytes(&self) -> usize {
        0
    }
}

/// Window sizes of [`Readahead`].
#[derive(Clone, Copy, Debug)]
pub struct ReadaheadConfig {
    /// First window (at least twice the request is used when requests are larger).
    pub initial: u64,
    /// Largest window.
    pub max: u64,
}

impl Default for ReadaheadConfig {
    /// 128 KiB doubling to 2 MiB.
    fn default() -> Self {
        ReadaheadConfig {
            initial: 128 << 10,
            max: 2 << 20,
        }
    }
}

/// `readahead`: Linux's on-demand readahead reduced to its core. A read that starts
/// where the previous one ended (or at offset 0, the first read of a file) is
/// sequential and opens a window right after it; when a later read enters the window
/// (the kernel's `PG_readahead` marker sits on its first page) the next window is
/// issued, twice as large, up to `max`. Any other read resets the state, so a
/// strided stream never gets a window.
pub struct Readahead {
    config: ReadaheadConfig,
    prev_end: Option<u64>,
    /// The last window issued: `(start, size)`.
    window: Option<(u64, u64)>,
}

impl Readahead {
    pub fn new(config: ReadaheadConfig) -> Self {
        Readahead {
            config,
            prev_end: None,
            window: None,
        }
    }
}

impl Policy for Readahead {
    fn name(&self) -> &'static str {
        "readahead"
    }

    fn observe(&mut self, offset: u64, len: u64, _depth: usize) -> Vec<Hint> {
        let end = offset.saturating_add(len);
        let sequential = self.prev_end.map_or(offset == 0, |p| p == offset);
        let in_window = self
            .window
            .is_some_and(|(s, n)| offset >= s && offset < s.saturating_add(n));
        self.prev_end = Some(end);
        let next = match self.window {
            _ if !sequential && !in_window => {
                self.window = None;
                None
            }
            None => {
                let size = self.config.initial.max(2 * len).min(self.config.max);
                Some((end, size))
            }
            // The read reached the last window: issue the next one.
            Some((s, n)) if end > s => {
                let size = (2 * n).min(self.config.max);
                Some((s.saturating_add(n).max(end), size))
            }
            Some(_) => None,
        };
        match next {
            Some((s, n)) => {
                self.window = Some((s, n));
                let reads = (s.saturating_add(n) - end).div_ceil(len.max(1));
                vec![Hint::sure(s, n, reads)]
            }
            None => Vec::new(),
        }
    }

    fn model_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

/// `stride`: Lustre-like stride detection. The difference between consecutive
/// request offsets is a candidate stride; once the same forward stride has been seen
/// three times in a row (the stride and two confirmations), the next `depth` strides
/// (at most [`Stride::MAX_AHEAD`]) are prefetched with the last request's length.
/// Any other difference replaces the candidate.
#[derive(Default)]
pub struct Stride {
    last: Option<u64>,
    stride: u64,
    seen: u32,
}

impl Stride {
    /// "A few strides ahead".
    pub const MAX_AHEAD: usize = 8;
    /// Times a stride must be seen before it is used.
    pub const CONFIRMATIONS: u32 = 3;
}

impl Policy for Stride {
    fn name(&self) -> &'static str {
        "stride"
    }

    fn observe(&mut self, offset: u64, len: u64, depth: usize) -> Vec<Hint> {
        if let Some(last) = self.last {
            match offset.checked_sub(last).filter(|&d| d > 0) {
                Some(d) if d == self.stride => self.seen += 1,
                Some(d) => (self.stride, self.seen) = (d, 1),
                None => (self.stride, self.seen) = (0, 0),
            }
        }
        self.last = Some(offset);
        if self.seen < Self::CONFIRMATIONS {
            return Vec::new();
        }
        (1..=depth.min(Self::MAX_AHEAD) as u64)
            .map_while(|k| {
                let at = offset.checked_add(self.stride.checked_mul(k)?)?;
                Some(Hint::sure(at, len, k))
            })
            .collect()
    }

    fn model_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
    }
}

/// `oracle`: knows the stream's requests in advance and predicts exactly the next
/// `depth` of them. It sees the same cache budget and workers as every other policy,
/// so it bounds what prediction alone can gain.
pub struct Oracle {
    future: Arc<[(u64, u64)]>,
    next: usize,
}

impl Oracle {
    pub fn new(future: Arc<[(u64, u64)]>) -> Self {
        Oracle { future, next: 0 }
    }
}

impl Policy for Oracle {
    fn name(&self) -> &'static str {
        "oracle"
    }

    fn observe(&mut self, offset: u64, len: u64, depth: usize) -> Vec<Hint> {
        // Follow the stream: the request observed is normally the next one; if the
        // caller diverged, resynchronise on the next matching request.
        if let Some(i) = self.future[self.next.min(self.future.len())..]
            .iter()
            .position(|&r| r == (offset, len))
        {
            self.next += i + 1;
        }
        let from = self.next.min(self.future.len());
        let to = (from + depth).min(self.future.len());
        self.future[from..to]
            .iter()
            .zip(1..)
            .map(|(&(o, l), k)| Hint::sure(o, l, k))
            .collect()
    }

    fn model_bytes(&self) -> usize {
        // The oracle's knowledge is the trace itself.
        self.future.len() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offsets(p: &mut dyn Policy, reqs: &[(u64, u64)], depth: usize) -> Vec<Vec<u64>> {
        reqs.iter()
            .map(|&(o, l)| p.observe(o, l, depth).iter().map(|h| h.offset).collect())
            .collect()
    }

    #[test]
    fn names_round_trip() {
        for k in PolicyKind::ALL {
            assert_eq!(k.name().parse::<PolicyKind>().unwrap(), k);
            assert_eq!(k.build(&[], None).unwrap().name(), k.name());
        }
        assert!("lru".parse::<PolicyKind>().is_err());
        assert!(PolicyKind::Stride.build(&[], Some(b"x")).is_err());
        assert!(PolicyKind::Markov.build(&[], Some(b"junk")).is_err());
    }

    #[test]
    fn readahead_ramps_and_resets() {
        let mut ra = Readahead::new(ReadaheadConfig::default());
        let k = 1u64 << 10;
        let mut hints = Vec::new();
        for i in 0..40u64 {
            hints.push(ra.observe(i * 32 * k, 32 * k, 4));
        }
        // First read at 0 opens 128 KiB after it; entering each window issues the next,
        // doubling up to the 2 MiB maximum.
        assert_eq!(hints[0], [Hint::sure(32 * k, 128 * k, 4)]);
        let sizes: Vec<u64> = hints.iter().flatten().map(|h| h.len).collect();
        assert_eq!(sizes, [128 * k, 256 * k, 512 * k, 1024 * k, 2048 * k]);
        let windows: Vec<(u64, u64)> = hints.iter().flatten().map(|h| (h.offset, h.len)).collect();
        for w in windows.windows(2) {
            assert_eq!(w[0].0 + w[0].1, w[1].0, "windows are back to back");
        }
        // A jump resets; a sequential read afterwards starts again at 128 KiB.
        assert!(ra.observe(100 << 20, 4 * k, 4).is_empty());
        assert_eq!(
            ra.observe((100 << 20) + 4 * k, 4 * k, 4),
            [Hint::sure((100 << 20) + 8 * k, 128 * k, 32)]
        );
        // Strided reads never open a window.
        let mut ra = Readahead::new(ReadaheadConfig::default());
        let strided: Vec<(u64, u64)> = (1..20).map(|i| (i * 100 * k, 4 * k)).collect();
        assert!(offsets(&mut ra, &strided, 4).iter().all(|h| h.is_empty()));
    }

    #[test]
    fn stride_needs_two_confirmations() {
        let mut s = Stride::default();
        let reqs: Vec<(u64, u64)> = (0..6).map(|i| (1000 + i * 300, 100)).collect();
        let got = offsets(&mut s, &reqs, 2);
        assert!(got[..3].iter().all(|h| h.is_empty()), "{got:?}");
        assert_eq!(got[3], [2200, 2500]);
        assert_eq!(got[5], [2800, 3100]);
        // A different delta restarts the count.
        assert!(s.observe(10_000, 100, 2).is_empty());
        assert_eq!(s.observe(20_000, 100, 20).len(), 0);
        let far: Vec<Vec<u64>> = (3..6)
            .map(|i| {
                s.observe(i * 10_000, 100, 20)
                    .iter()
                    .map(|h| h.offset)
                    .collect()
            })
            .collect();
        assert_eq!(far[2].len(), Stride::MAX_AHEAD);
    }

    #[test]
    fn oracle_predicts_exactly_the_future() {
        let reqs: Vec<(u64, u64)> = vec![(5, 1), (100, 2), (7, 3), (1, 1)];
        let mut o = Oracle::new(reqs.clone().into());
        assert_eq!(
            o.observe(5, 1, 2),
            [Hint::sure(100, 2, 1), Hint::sure(7, 3, 2)]
        );
        assert_eq!(
            o.observe(100, 2, 5),
            [Hint::sure(7, 3, 1), Hint::sure(1, 1, 2)]
        );
        assert!(o.observe(7, 3, 5).len() == 1);
        assert!(o.observe(1, 1, 5).is_empty());
    }

    #[test]
    fn pattern_predicts_strides_and_saves() {
        let mut p = Pattern::new();
        let reqs: Vec<(u64, u64)> = (0..12).map(|i| (i * 3 * 4096, 4096)).collect();
        let got = offsets(&mut p, &reqs, 3);
        assert_eq!(got[11], [12 * 3 * 4096, 13 * 3 * 4096, 14 * 3 * 4096]);
        let saved = p.save().unwrap();
        let q = PolicyKind::Pattern.build(&[], Some(&saved)).unwrap();
        assert!(q.model_bytes() > 0);
        assert!(PolicyKind::Pattern.build(&[], Some(&saved[1..])).is_err());
    }
}
