//! Online access-pattern analysis for one request stream: recognise the pattern while
//! it forms and predict the next requests ("pattern growth", chapter 2 of the
//! prefetching thesis), built on the offline engine instead of a second rule set.
//!
//! * **Growth.** The active pattern is a first value and a [`Body`]; its element `i`
//!   is `init + body.offset_of(i)`, which extrapolates past the end of the body (flat
//!   units continue their delta vector, nested ones their outer stride). A request
//!   equal to the next expected element advances the pattern in O(1).
//! * **Detection** runs only when there is no active pattern or it failed: the
//!   detector and pattern tree over the recent history; a node is adopted when it has
//!   at least four elements (confirmed, not guessed) and its extrapolation explains
//!   every request after it. Contiguous runs (each request starts within a small gap
//!   of the previous end, whatever the sizes) are recognised directly.
//! * **Noise.** A request the pattern did not predict is a strike; the pattern is
//!   dropped after [`OnlineConfig::max_strikes`] strikes in a row, so a one-off random
//!   request does not break it while a real change is followed within a few requests.
//!   A request that skips one predicted element still matches.
//! * **History.** Dropped patterns' bodies are remembered (bounded): when a new run
//!   starts the way a remembered body starts, it is adopted at once — an earlier kd
//!   pattern is reused before the new one completes, and remembered bodies saved after
//!   a run ([`Predictor::save`]) let the next run predict from its first requests.
//! * **Correlation.** A bounded table of successors ("after offset A come B and C")
//!   predicts when no structured pattern is active, once an entry has been seen
//!   [`OnlineConfig::correlation_threshold`] times.

use crate::analysis::{body_kind, Kind};
use crate::codec::{put_uvarint, read_blob, write_blob, Cursor, BLOB_HEADER};
use crate::detect::Detector;
use crate::error::{CoreError, Result};
use crate::tree::{Body, PatternSeq, Piece};
use crate::unit::Shape;
use std::collections::VecDeque;

/// Tunables of the online analyzer.
#[derive(Clone, Debug)]
pub struct OnlineConfig {
    /// Requests kept for detection.
    pub history: usize,
    /// Detector search window over that history.
    pub window: usize,
    /// Unpredicted requests in a row after which the active pattern is dropped.
    pub max_strikes: u32,
    /// Largest gap (bytes) between one request's end and the next start that still
    /// counts as contiguous.
    pub contiguous_gap: u64,
    /// Bodies of earlier patterns remembered for reuse.
    pub remembered: usize,
    /// Entries of the correlation table.
    pub correlation_entries: usize,
    /// Times an offset must have been seen before its successors are predicted.
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
            correlation_entries: 32,
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
    Correlation,
}

/// The active structured pattern.
#[derive(Clone, Debug)]
enum Active {
    /// Next request starts `gap` after the previous end, with the previous size.
    Contiguous { gap: u64 },
    /// Offsets follow `init + body.offset_of(i)`; `next` is the next expected index.
    Pattern {
        init: i64,
        body: Body,
        next: u64,
        remembered: bool,
    },
}

/// A request seen after a correlation entry's offset, and how often.
#[derive(Clone, Debug)]
struct Successor {
    offset: u64,
    len: u64,
    count: u32,
}

/// One entry of the correlation table: an offset, how often it was seen, and the
/// requests that followed it (at most four).
#[derive(Clone, Debug)]
struct Correlated {
    offset: u64,
    seen: u32,
    successors: Vec<Successor>,
}

/// Per-stream online analyzer and predictor.
#[derive(Clone, Debug)]
pub struct Predictor {
    config: OnlineConfig,
    detector: Detector,
    history: VecDeque<(u64, u64)>,
    active: Option<Active>,
    /// Requests the active pattern has predicted correctly.
    confirmed: u64,
    strikes: u32,
    /// The last request matched by skipping one predicted element.
    skipped: bool,
    remembered: VecDeque<Body>,
    /// `(offset, successors with counts, times seen)`, most recent first.
    correlation: VecDeque<Correlated>,
}

impl Predictor {
    pub fn new(config: OnlineConfig) -> Self {
        let detector = Detector::new(config.window);
        Predictor {
            config,
            detector,
            history: VecDeque::new(),
            active: None,
            confirmed: 0,
            strikes: 0,
            skipped: false,
            remembered: VecDeque::new(),
            correlation: VecDeque::new(),
        }
    }

    /// Records one request; returns whether it was the one predicted next.
    pub fn observe(&mut self, offset: u64, len: u64) -> bool {
        let predicted = self.advance(offset);
        self.learn_correlation(offset, len);
        self.history.push_back((offset, len));
        if self.history.len() > self.config.history {
            self.history.pop_front();
        }
        if !predicted {
            // A pattern that explains the recent requests, including this one, replaces
            // the active one at once; otherwise the miss is a strike against it.
            match self.detect() {
                Some(found) => {
                    self.drop_active();
                    self.adopt(found);
                }
                None if self.active.is_some() => {
                    self.strikes += 1;
                    if self.strikes > self.config.max_strikes {
                        self.drop_active();
                    }
                }
                None => {}
            }
        }
        predicted
    }

    /// Moves the active pattern along; `true` when `offset` was predicted.
    fn advance(&mut self, offset: u64) -> bool {
        let hit = match &mut self.active {
            None => false,
            Some(Active::Contiguous { gap }) => {
                let (prev_off, prev_len) = *self.history.back().expect("active implies history");
                prev_off.wrapping_add(prev_len).wrapping_add(*gap) == offset
            }
            Some(Active::Pattern {
                init, body, next, ..
            }) => {
                // The expected element, or the one after it (one predicted request
                // skipped) — but not twice in a row, which would lock onto a stride of
                // half the real one.
                let skips = if self.skipped { 1 } else { 2 };
                let step = (0..skips).find(|&s| element(*init, body, *next + s) == Some(offset));
                if let Some(s) = step {
                    *next += s + 1;
                }
                self.skipped = step == Some(1);
                step.is_some()
            }
        };
        if hit {
            self.confirmed += 1;
            self.strikes = 0;
        }
        hit
    }

    fn drop_active(&mut self) {
        if let Some(Active::Pattern {
            body,
            remembered: false,
            ..
        }) = self.active.take()
        {
            self.remember(body);
        }
        self.confirmed = 0;
        self.strikes = 0;
    }

    fn remember(&mut self, body: Body) {
        self.remembered.retain(|b| *b != body);
        self.remembered.push_front(body);
        self.remembered.truncate(self.config.remembered);
    }

    /// A pattern that explains the most recent requests: a detected node, else a
    /// contiguous run, else a remembered body.
    fn detect(&self) -> Option<Active> {
        let offsets: Vec<i64> = self.history.iter().map(|&(o, _)| o as i64).collect();
        self.explaining_node(&offsets)
            .or_else(|| self.contiguous_tail())
            .or_else(|| self.explaining_memory(&offsets))
    }

    /// Contiguous when the last three requests each start the same gap (within the
    /// tolerance) after the previous end.
    fn contiguous_tail(&self) -> Option<Active> {
        let n = self.history.len();
        if n < 3 {
            return None;
        }
        let h: Vec<(u64, u64)> = self.history.iter().skip(n - 3).copied().collect();
        let gap = |a: (u64, u64), b: (u64, u64)| b.0.checked_sub(a.0.checked_add(a.1)?);
        match (gap(h[0], h[1]), gap(h[1], h[2])) {
            (Some(a), Some(b)) if a == b && a <= self.config.contiguous_gap => {
                Some(Active::Contiguous { gap: a })
            }
            _ => None,
        }
    }

    fn adopt(&mut self, active: Active) {
        self.active = Some(active);
        self.confirmed = 0;
        self.strikes = 0;
        self.skipped = false;
    }

    /// The latest detected node of at least four elements whose extrapolation explains
    /// every request after it.
    fn explaining_node(&self, offsets: &[i64]) -> Option<Active> {
        let seq = PatternSeq::build(offsets, &self.detector);
        let mut start = offsets.len() as u64;
        for piece in seq.pieces().iter().rev() {
            start -= piece.len();
            let Piece::Node(node) = piece else { continue };
            if node.len() < 4 {
                continue;
            }
            let after = &offsets[(start + node.len()) as usize..];
            let explained = after.iter().enumerate().all(|(j, &o)| {
                element(node.init, &node.body, node.len() + j as u64) == Some(o as u64)
            });
            if explained {
                let next = node.len() + after.len() as u64;
                return Some(Active::Pattern {
                    init: node.init,
                    body: node.body.clone(),
                    next,
                    remembered: false,
                });
            }
        }
        None
    }

    /// A remembered body whose beginning matches the longest tail of the history
    /// (at least the last request).
    fn explaining_memory(&self, offsets: &[i64]) -> Option<Active> {
        // The longest tail any remembered body explains. One request is enough only
        // when nothing is being followed (the start of a repeated run); against an
        // active pattern it takes two, so a lone random request cannot replace it.
        let shortest = if self.active.is_some() { 2 } else { 1 };
        let mut best: Option<(usize, &Body)> = None;
        for body in &self.remembered {
            let longest = offsets.len().min(body.len().min(u32::MAX as u64) as usize);
            let explained = (shortest..=longest).rev().find(|&m| {
                let tail = &offsets[offsets.len() - m..];
                tail.iter()
                    .enumerate()
                    .all(|(i, &o)| element(tail[0], body, i as u64) == Some(o as u64))
            });
            if let Some(m) = explained.filter(|&m| best.is_none_or(|(b, _)| m > b)) {
                best = Some((m, body));
            }
        }
        best.map(|(m, body)| Active::Pattern {
            init: offsets[offsets.len() - m],
            body: body.clone(),
            next: m as u64,
            remembered: true,
        })
    }

    fn learn_correlation(&mut self, offset: u64, len: u64) {
        if let Some(&(prev, _)) = self.history.back() {
            if let Some(entry) = self.correlation.iter_mut().find(|e| e.offset == prev) {
                let successors = &mut entry.successors;
                if let Some(s) = successors.iter_mut().find(|s| s.offset == offset) {
                    s.count += 1;
                } else if successors.len() < 4 {
                    successors.push(Successor {
                        offset,
                        len,
                        count: 1,
                    });
                }
            }
        }
        match self.correlation.iter().position(|e| e.offset == offset) {
            Some(pos) => {
                let mut entry = self.correlation.remove(pos).expect("position found");
                entry.seen += 1;
                self.correlation.push_front(entry);
            }
            None => {
                self.correlation.push_front(Correlated {
                    offset,
                    seen: 1,
                    successors: Vec::new(),
                });
                self.correlation.truncate(self.config.correlation_entries);
            }
        }
    }

    /// The next `count` requests expected, most likely first.
    pub fn predict(&self, count: usize) -> Vec<Prediction> {
        let Some(&(last_off, last_len)) = self.history.back() else {
            return Vec::new();
        };
        let confidence = self.confidence();
        match &self.active {
            Some(Active::Contiguous { gap }) => (0..count as u64)
                .map_while(|i| {
                    let step = last_len.checked_add(*gap)?;
                    let offset = last_off.checked_add(step.checked_mul(i + 1)?)?;
                    Some(Prediction {
                        offset,
                        len: last_len,
                        confidence,
                    })
                })
                .collect(),
            Some(Active::Pattern {
                init, body, next, ..
            }) => (0..count as u64)
                .map_while(|i| element(*init, body, next + i))
                .map(|offset| Prediction {
                    offset,
                    len: last_len,
                    confidence,
                })
                .collect(),
            None => {
                let Some(entry) = self.correlation.iter().find(|e| e.offset == last_off) else {
                    return Vec::new();
                };
                if entry.seen < self.config.correlation_threshold {
                    return Vec::new();
                }
                let total: u32 = entry.successors.iter().map(|s| s.count).sum();
                let mut frequent: Vec<&Successor> = entry
                    .successors
                    .iter()
                    .filter(|s| s.count + 1 >= self.config.correlation_threshold)
                    .collect();
                frequent.sort_by_key(|s| std::cmp::Reverse(s.count));
                frequent
                    .into_iter()
                    .take(count)
                    .map(|s| Prediction {
                        offset: s.offset,
                        len: s.len,
                        confidence: s.count as f32 / total.max(1) as f32,
                    })
                    .collect()
            }
        }
    }

    fn confidence(&self) -> f32 {
        let base = match &self.active {
            Some(Active::Pattern {
                remembered: true, ..
            }) => 0.5,
            _ => 0.75,
        };
        let grown = base + (1.0 - base) * (self.confirmed as f32 / (self.confirmed as f32 + 4.0));
        grown / (1 + self.strikes) as f32
    }

    /// What the analyzer follows now.
    pub fn following(&self) -> Following {
        match &self.active {
            Some(Active::Contiguous { .. }) => Following::Contiguous,
            Some(Active::Pattern { body, .. }) => match body_kind(body) {
                Kind::KdStrided => Following::KdStrided,
                Kind::Strided => Following::Strided,
                _ => Following::RepeatingDeltas,
            },
            None if !self.predict(1).is_empty() => Following::Correlation,
            None => Following::Nothing,
        }
    }

    /// Bytes of analyzer state (history, active pattern, memory, correlation table).
    pub fn model_bytes(&self) -> usize {
        let body = |b: &Body| 32 + b.delta_count() * 8 * 2;
        let active = match &self.active {
            Some(Active::Pattern { body: b, .. }) => 32 + body(b),
            _ => 32,
        };
        std::mem::size_of::<Self>()
            + self.history.len() * 16
            + active
            + self.remembered.iter().map(body).sum::<usize>()
            + self
                .correlation
                .iter()
                .map(|e| 24 + e.successors.len() * 20)
                .sum::<usize>()
    }

    /// The remembered pattern bodies (including the active one) as a versioned,
    /// checksummed blob, for [`Predictor::load`] at the next run.
    pub fn save(&self) -> Vec<u8> {
        let active = match &self.active {
            Some(Active::Pattern { body, .. }) => Some(body),
            _ => None,
        };
        let bodies: Vec<&Body> = active
            .into_iter()
            .chain(self.remembered.iter().filter(|b| Some(*b) != active))
            .collect();
        let mut payload = Vec::new();
        put_uvarint(&mut payload, bodies.len() as u64);
        for b in bodies {
            put_body(b, &mut payload);
        }
        write_blob(MODEL_MAGIC, MODEL_VERSION, &payload)
    }

    /// A predictor that starts with the bodies saved by [`Predictor::save`].
    pub fn load(config: OnlineConfig, bytes: &[u8]) -> Result<Self> {
        let (_, payload) = read_blob(MODEL_MAGIC, MODEL_VERSION, bytes)?;
        let mut c = Cursor::with_base(payload, BLOB_HEADER);
        let n = c.count(c.remaining(), "pattern")?;
        let mut p = Predictor::new(config);
        for _ in 0..n {
            let body = get_body(&mut c, 0)?;
            p.remembered.push_back(body);
        }
        p.remembered.truncate(p.config.remembered);
        if !c.is_at_end() {
            return Err(c.error("trailing bytes after the saved patterns"));
        }
        Ok(p)
    }
}

const MODEL_MAGIC: &[u8; 4] = b"PPRD";
const MODEL_VERSION: u16 = 1;

fn put_body(body: &Body, out: &mut Vec<u8>) {
    match body {
        Body::Flat(s) => {
            put_uvarint(out, (s.deltas().len() as u64) << 1);
            s.deltas()
                .iter()
                .for_each(|&d| crate::codec::put_ivarint(out, d));
            put_uvarint(out, s.reps());
        }
        Body::Nested(o, i) => {
            put_uvarint(out, 1);
            put_body(o, out);
            put_body(i, out);
        }
    }
}

fn get_body(c: &mut Cursor, depth: usize) -> Result<Body> {
    let at = c.position();
    let head = c.uvarint()?;
    if head == 1 && depth < 64 {
        let outer = get_body(c, depth + 1)?;
        return Ok(Body::nested(outer, get_body(c, depth + 1)?));
    }
    if head & 1 == 1 {
        return Err(CoreError::corrupt(at, "bad pattern body"));
    }
    let k = (head >> 1) as usize;
    if k > c.remaining() {
        return Err(CoreError::corrupt(at, "delta count exceeds the input"));
    }
    let deltas = (0..k).map(|_| c.ivarint()).collect::<Result<Vec<_>>>()?;
    let reps = c.uvarint()?;
    Shape::checked(deltas, reps)
        .map(Body::Flat)
        .ok_or_else(|| CoreError::corrupt(at, "pattern too long for 64 bits"))
}

/// Element `i` of `[init, body]`, extrapolated past the body's end; `None` outside
/// the `u64` offset range.
fn element(init: i64, body: &Body, i: u64) -> Option<u64> {
    u64::try_from(init as i128 + body.offset_of(i)).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(p: &mut Predictor, offsets: &[u64], len: u64) -> Vec<bool> {
        offsets.iter().map(|&o| p.observe(o, len)).collect()
    }

    #[test]
    fn strided_is_confirmed_then_predicted() {
        let mut p = Predictor::new(OnlineConfig::default());
        let offsets: Vec<u64> = (0..20).map(|i| 1000 + i * 300).collect();
        let hits = run(&mut p, &offsets, 100);
        let first_hit = hits.iter().position(|&h| h).unwrap();
        assert!(first_hit <= 4, "{hits:?}");
        assert!(hits[first_hit..].iter().all(|&h| h));
        assert_eq!(p.following(), Following::Strided);
        assert_eq!(
            p.predict(2).iter().map(|x| x.offset).collect::<Vec<_>>(),
            [7000, 7300]
        );
    }

    #[test]
    fn repeating_deltas_and_kd_strided() {
        let mut p = Predictor::new(OnlineConfig::default());
        let deltas: Vec<u64> = (0..20)
            .flat_map(|r| [0, 3, 7].map(|c| r * 14 + c))
            .collect();
        let hits = run(&mut p, &deltas, 1);
        assert!(hits[9..].iter().all(|&h| h), "{hits:?}");
        let mut q = Predictor::new(OnlineConfig::default());
        let grid: Vec<u64> = (0..10)
            .flat_map(|r| (0..6).map(move |c| r * 10_000 + c * 64))
            .collect();
        let hits = run(&mut q, &grid, 8);
        assert!(hits[20..].iter().all(|&h| h), "{hits:?}");
        assert_eq!(q.following(), Following::KdStrided);
    }

    #[test]
    fn one_random_request_does_not_break_a_pattern() {
        let mut p = Predictor::new(OnlineConfig::default());
        run(
            &mut p,
            &(0..10).map(|i| i * 4096 * 3).collect::<Vec<_>>(),
            4096,
        );
        assert!(!p.observe(999_999_999, 4096));
        assert!(p.observe(10 * 4096 * 3, 4096));
        assert_eq!(p.following(), Following::Strided);
    }

    #[test]
    fn a_random_request_does_not_switch_to_a_remembered_pattern() {
        let mut p = Predictor::new(OnlineConfig::default());
        // Remember a stride-100 pattern, then lock onto a stride-4096 one.
        run(
            &mut p,
            &(0..10).map(|i| 1_000_000 + i * 100).collect::<Vec<_>>(),
            8,
        );
        run(&mut p, &(0..10).map(|i| i * 4096).collect::<Vec<_>>(), 8);
        assert!(!p.observe(777_777, 8));
        assert!(
            p.observe(10 * 4096, 8),
            "the stride-4096 pattern survives one random request"
        );
    }

    #[test]
    fn skips_do_not_lock_onto_half_the_stride() {
        let mut p = Predictor::new(OnlineConfig::default());
        run(&mut p, &(0..10).map(|i| i * 32).collect::<Vec<_>>(), 8);
        p.observe(5_000_000, 8);
        p.observe(9_000_000, 8);
        p.observe(13_000_000, 8);
        // A stride of 64 from a fresh start: every request would "match" stride 32 by
        // skipping one; the analyzer must find the real stride instead.
        let hits = run(
            &mut p,
            &(0..20).map(|i| 100_000 + i * 64).collect::<Vec<_>>(),
            8,
        );
        assert!(hits[8..].iter().all(|&h| h), "{hits:?}");
        assert_eq!(p.predict(1)[0].offset, 100_000 + 20 * 64);
    }

    #[test]
    fn contiguous_with_varying_sizes() {
        let mut p = Predictor::new(OnlineConfig::default());
        let mut at = 0;
        let mut hits = Vec::new();
        for i in 0..10u64 {
            let len = 100 + (i * 37) % 50;
            hits.push(p.observe(at, len));
            at += len;
        }
        assert!(hits[3..].iter().all(|&h| h), "{hits:?}");
        assert_eq!(p.following(), Following::Contiguous);
    }

    #[test]
    fn saved_patterns_predict_the_next_run_early() {
        let grid: Vec<u64> = (0..8)
            .flat_map(|r| (0..5).map(move |c| r * 1000 + c * 10))
            .collect();
        let mut first = Predictor::new(OnlineConfig::default());
        run(&mut first, &grid, 10);
        let saved = first.save();
        let mut second = Predictor::load(OnlineConfig::default(), &saved).unwrap();
        let shifted: Vec<u64> = grid.iter().map(|o| o + 50_000).collect();
        let hits = run(&mut second, &shifted, 10);
        assert!(hits[1..].iter().all(|&h| h), "{hits:?}");
        assert!(Predictor::load(OnlineConfig::default(), &saved[..saved.len() - 1]).is_err());
    }

    #[test]
    fn correlation_predicts_frequent_successors() {
        let mut p = Predictor::new(OnlineConfig::default());
        for round in 0..4u64 {
            for o in [10u64, 20, 30, 5_000 + round * 7919 % 1000] {
                p.observe(o * 4096, 4096);
            }
        }
        p.observe(10 * 4096, 4096);
        let next = p.predict(1);
        assert_eq!(
            next.first().map(|x| x.offset),
            Some(20 * 4096),
            "{:?}",
            p.following()
        );
    }
}
