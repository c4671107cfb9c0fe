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

use crate::codec::{put_ivarint, put_uvarint, read_blob, write_blob, Cursor, BLOB_HEADER};
use crate::detect::Detector;
use crate::error::{CoreError, Result};
use crate::tree::{Body, PatternSeq, Piece};

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

// ---------------------------------------------------------------------------------
// Compact bodies
// ---------------------------------------------------------------------------------

/// Most levels a compact body may have.
const MAX_LEVELS: usize = 16;

/// Most bytes the remembered bodies may take (varint-encoded, with their request
/// lengths); older bodies are forgotten first.
pub const REMEMBERED_BYTES: usize = 128;

/// Most bytes the recorded phase ends may take (varint-coded); later phases are not
/// recorded once it is full.
pub const PHASE_ENDS_BYTES: usize = 128;

/// Longest history tail compared with a remembered body.
const MAX_TAIL: usize = 16;

/// A pattern body in compact form: its flat levels, outermost first, each stored as
/// `k, reps, d0 … dk-1` in one boxed slice. `outer × inner` nesting is associative,
/// so every tree [`Body`] flattens to such a list. A level with no deltas (or no
/// repetitions) is a single element.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pat(Box<[i64]>);

type Level<'a> = (&'a [i64], u64);

struct Levels<'a>(&'a [i64]);

impl<'a> Iterator for Levels<'a> {
    type Item = Level<'a>;

    fn next(&mut self) -> Option<Level<'a>> {
        let (&k, rest) = self.0.split_first()?;
        let (&reps, rest) = rest.split_first()?;
        let (deltas, rest) = rest.split_at((k as usize).min(rest.len()));
        self.0 = rest;
        Some((deltas, reps as u64))
    }
}

/// Elements of one flat level: `1 + k·r`.
fn level_len((deltas, reps): Level) -> u128 {
    if deltas.is_empty() {
        1
    } else {
        1 + deltas.len() as u128 * reps as u128
    }
}

/// Offset of element `i` of one flat level, extrapolated past its end.
fn flat_offset(deltas: &[i64], i: u128) -> Option<i128> {
    let k = deltas.len() as u128;
    if k == 0 {
        return (i == 0).then_some(0);
    }
    let stride: i128 = deltas.iter().map(|&d| d as i128).sum();
    let within: i128 = deltas[..(i % k) as usize].iter().map(|&d| d as i128).sum();
    i128::try_from(i / k)
        .ok()?
        .checked_mul(stride)?
        .checked_add(within)
}

impl Pat {
    /// A body from its levels, outermost first; `None` beyond [`MAX_LEVELS`].
    fn from_levels<'a>(levels: impl IntoIterator<Item = Level<'a>>) -> Option<Pat> {
        let mut words = Vec::new();
        let mut n = 0;
        for (deltas, reps) in levels {
            n += 1;
            if deltas.is_empty() || reps == 0 {
                words.extend([0, 0]);
                continue;
            }
            // One form per sequence: a delta vector that repeats a shorter one is
            // stored as the shorter one.
            let k = deltas.len();
            let (deltas, reps) = (1..k)
                .filter(|p| k % p == 0)
                .find(|&p| deltas.iter().enumerate().all(|(i, &d)| d == deltas[i % p]))
                .and_then(|p| Some((&deltas[..p], reps.checked_mul((k / p) as u64)?)))
                .unwrap_or((deltas, reps));
            words.extend([deltas.len() as i64, reps as i64]);
            words.extend_from_slice(deltas);
        }
        (1..=MAX_LEVELS).contains(&n).then(|| Pat(words.into()))
    }

    fn flat(deltas: &[i64], reps: u64) -> Pat {
        Pat::from_levels([(deltas, reps)]).expect("one level")
    }

    /// The tree body flattened.
    fn from_body(body: &Body) -> Option<Pat> {
        fn collect<'a>(b: &'a Body, out: &mut Vec<Level<'a>>) {
            match b {
                Body::Flat(s) => out.push((s.deltas(), s.reps())),
                Body::Nested(o, i) => {
                    collect(o, out);
                    collect(i, out);
                }
            }
        }
        let mut levels = Vec::new();
        collect(body, &mut levels);
        Pat::from_levels(levels)
    }

    fn levels(&self) -> Levels<'_> {
        Levels(&self.0)
    }

    fn heap_bytes(&self) -> usize {
        self.0.len() * 8
    }

    /// Elements described (saturating).
    #[cfg(test)]
    fn len(&self) -> u128 {
        self.levels()
            .map(level_len)
            .fold(1u128, |a, b| a.saturating_mul(b))
    }

    /// Offset of element `i` from the first, extrapolated past the end by the
    /// outermost level; `None` when it leaves the `i128` range or the outermost level
    /// is a single element.
    fn offset_of(&self, i: u64) -> Option<i128> {
        let mut levels: [Level; MAX_LEVELS] = [(&[], 0); MAX_LEVELS];
        let mut n = 0;
        for l in self.levels() {
            levels[n] = l;
            n += 1;
        }
        let mut rest = i as u128;
        let mut total: i128 = 0;
        for j in (0..n).rev() {
            let at = if j == 0 {
                rest
            } else {
                let len = level_len(levels[j]);
                let at = rest % len;
                rest /= len;
                at
            };
            total = total.checked_add(flat_offset(levels[j].0, at)?)?;
        }
        Some(total)
    }

    /// The first `count` elements as a body of their own: within the first copy of
    /// the inner levels, those truncated; else whole repetitions of the outermost
    /// level.
    fn truncate(&self, count: u64) -> Option<Pat> {
        let levels: Vec<Level> = self.levels().collect();
        let inner: u128 = levels[1..]
            .iter()
            .map(|&l| level_len(l))
            .fold(1u128, |a, b| a.saturating_mul(b));
        if levels.len() > 1 && (count as u128) < inner {
            return Pat::from_levels(levels[1..].iter().copied())?.truncate(count);
        }
        let count = count as u128;
        if count == 0 || !count.is_multiple_of(inner) {
            return None;
        }
        let m = count / inner;
        let (deltas, _) = levels[0];
        if m == 1 {
            return if levels.len() > 1 {
                Pat::from_levels(levels[1..].iter().copied())
            } else {
                Some(Pat::flat(&[], 0))
            };
        }
        let k = deltas.len() as u128;
        if k == 0 {
            return None;
        }
        if (m - 1).is_multiple_of(k) {
            let reps = u64::try_from((m - 1) / k).ok()?;
            return Pat::from_levels(
                std::iter::once((deltas, reps)).chain(levels[1..].iter().copied()),
            );
        }
        if !m.is_multiple_of(k) {
            return None;
        }
        // Whole rows of `k` elements of a flat vector: rows `sum` apart.
        let sum = deltas.iter().try_fold(0i64, |a, &d| a.checked_add(d))?;
        let rows = u64::try_from(m / k - 1).ok()?;
        let row = &deltas[..deltas.len() - 1];
        let outer = [sum];
        let head: Vec<Level> = if rows == 0 {
            vec![(row, 1)]
        } else {
            vec![(&outer[..], rows), (row, 1)]
        };
        Pat::from_levels(head.into_iter().chain(levels[1..].iter().copied()))
    }

    /// The same body with its outermost repetition count set to one: the form
    /// remembered (matching extrapolates the outermost level anyway).
    fn canonical(&self) -> Pat {
        let mut words = self.0.clone();
        if words[0] > 0 {
            words[1] = 1;
        }
        Pat(words)
    }

    /// `outer × inner`.
    fn nest(outer: &Pat, inner: &Pat) -> Option<Pat> {
        Pat::from_levels(outer.levels().chain(inner.levels()))
    }

    /// Every delta multiplied by `num / den`, when all stay exact integers.
    fn scaled(&self, num: u64, den: u64) -> Option<Pat> {
        if den == 0 || num == 0 {
            return None;
        }
        let scale = |d: i64| -> Option<i64> {
            let v = (d as i128).checked_mul(num as i128)?;
            (v % den as i128 == 0)
                .then(|| i64::try_from(v / den as i128).ok())
                .flatten()
        };
        let mut levels: Vec<(Vec<i64>, u64)> = Vec::new();
        for (deltas, reps) in self.levels() {
            let d = deltas
                .iter()
                .map(|&d| scale(d))
                .collect::<Option<Vec<i64>>>()?;
            levels.push((d, reps));
        }
        Pat::from_levels(levels.iter().map(|(d, r)| (&d[..], *r)))
    }

    /// The body of records `from` bytes long (every delta a multiple of `from`,
    /// as when `p` processes' records interleave) for records `to` bytes long.
    fn rescaled(&self, from: u64, to: u64) -> Option<Pat> {
        let records = from > 0
            && from != to
            && self
                .levels()
                .all(|(d, _)| d.iter().all(|&x| x.unsigned_abs() % from == 0));
        if records {
            self.scaled(to, from)
        } else {
            None
        }
    }

    /// A 16-bit fingerprint of the body and a request length (never 0).
    fn fingerprint(&self, len: u64) -> u16 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &w in self.0.iter().chain(std::iter::once(&(len as i64))) {
            for b in w.to_le_bytes() {
                h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
            }
        }
        let h = h ^ (h >> 32);
        (h ^ (h >> 16)) as u16 | 1
    }

    fn kind(&self) -> Following {
        let mut levels = self.levels();
        let (Some((deltas, _)), None) = (levels.next(), levels.next()) else {
            return Following::KdStrided;
        };
        if deltas.len() <= 1 {
            return Following::Strided;
        }
        let (row, gap) = deltas.split_at(deltas.len() - 1);
        if row.iter().all(|&d| d == row[0]) && gap[0] != row[0] {
            Following::KdStrided
        } else {
            Following::RepeatingDeltas
        }
    }

    /// The body in the pattern-body encoding of the saved model (a nested body is
    /// `1, outer, inner`).
    fn encode(&self, out: &mut Vec<u8>) {
        let levels: Vec<Level> = self.levels().collect();
        for (i, &(deltas, reps)) in levels.iter().enumerate() {
            if i + 1 < levels.len() {
                put_uvarint(out, 1);
            }
            put_uvarint(out, (deltas.len() as u64) << 1);
            deltas.iter().for_each(|&d| put_ivarint(out, d));
            put_uvarint(out, reps);
        }
    }

    fn decode(c: &mut Cursor) -> Result<Pat> {
        let at = c.position();
        let mut levels: Vec<(Vec<i64>, u64)> = Vec::new();
        decode_levels(c, &mut levels, 0)?;
        Pat::from_levels(levels.iter().map(|(d, r)| (&d[..], *r)))
            .ok_or_else(|| CoreError::corrupt(at, "pattern nests too deep"))
    }
}

fn decode_levels(c: &mut Cursor, out: &mut Vec<(Vec<i64>, u64)>, depth: usize) -> Result<()> {
    let at = c.position();
    let head = c.uvarint()?;
    if head == 1 {
        if depth >= MAX_LEVELS {
            return Err(CoreError::corrupt(at, "pattern nests too deep"));
        }
        decode_levels(c, out, depth + 1)?;
        return decode_levels(c, out, depth + 1);
    }
    if head & 1 == 1 {
        return Err(CoreError::corrupt(at, "bad pattern body"));
    }
    let k = head >> 1;
    if k > c.remaining() as u64 {
        return Err(CoreError::corrupt(at, "delta count exceeds the input"));
    }
    let deltas = (0..k).map(|_| c.ivarint()).collect::<Result<Vec<_>>>()?;
    let reps = c.uvarint()?;
    if out.len() >= MAX_LEVELS {
        return Err(CoreError::corrupt(at, "pattern nests too deep"));
    }
    out.push((deltas, reps));
    Ok(())
}

// ---------------------------------------------------------------------------------
// Request history
// ---------------------------------------------------------------------------------

/// Marks a delta that does not fit in 31 bits: `ESC, low half, high half, ESC`.
const ESC: i32 = i32::MIN;

/// The deltas between consecutive request offsets, oldest first, in a fixed ring of
/// 32-bit slots. Whole entries leave the front when the ring is full.
#[derive(Clone, Debug)]
struct DeltaRing {
    slots: Box<[i32]>,
    head: u16,
    len: u16,
}

impl DeltaRing {
    fn new(capacity: usize) -> Self {
        DeltaRing {
            slots: vec![0; capacity.max(4)].into(),
            head: 0,
            len: 0,
        }
    }

    fn at(&self, i: usize) -> i32 {
        self.slots[(self.head as usize + i) % self.slots.len()]
    }

    fn push(&mut self, delta: i64) {
        match i32::try_from(delta) {
            Ok(d) if d != ESC => self.push_entry(&[d]),
            _ => self.push_entry(&[ESC, delta as i32, (delta >> 32) as i32, ESC]),
        }
    }

    fn push_entry(&mut self, entry: &[i32]) {
        let cap = self.slots.len();
        while self.len as usize + entry.len() > cap {
            let n = if self.at(0) == ESC { 4 } else { 1 };
            self.head = ((self.head as usize + n) % cap) as u16;
            self.len -= n as u16;
        }
        for &s in entry {
            let at = (self.head as usize + self.len as usize) % cap;
            self.slots[at] = s;
            self.len += 1;
        }
    }

    /// The deltas, newest first.
    fn newest_first(&self) -> impl Iterator<Item = i64> + '_ {
        let mut i = self.len as usize;
        std::iter::from_fn(move || {
            if i == 0 {
                return None;
            }
            let s = self.at(i - 1);
            if s == ESC && i >= 4 {
                let (lo, hi) = (self.at(i - 3), self.at(i - 2));
                i -= 4;
                Some(((hi as i64) << 32) | (lo as u32 as i64))
            } else {
                i -= 1;
                Some(s as i64)
            }
        })
    }

    /// The offsets of the requests kept, oldest first, ending with `last`.
    fn offsets(&self, last: u64) -> Vec<i64> {
        let mut out = vec![last as i64];
        for d in self.newest_first() {
            let prev = *out.last().expect("non-empty");
            out.push(prev.wrapping_sub(d));
        }
        out.reverse();
        out
    }
}

// ---------------------------------------------------------------------------------
// State
// ---------------------------------------------------------------------------------

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

/// A completed run: where it started, how many elements it had, and a 16-bit
/// fingerprint of its body truncated to them with its request length (0: not
/// composable; also when it had more than 65,535 elements).
#[derive(Clone, Copy, Debug)]
struct Phase {
    start: [u32; 2],
    count: u16,
    fp: u16,
}

impl Phase {
    fn start(&self) -> i64 {
        (self.start[0] as u64 | (self.start[1] as u64) << 32) as i64
    }
}

/// A correlation entry: after the request at an offset whose 28-bit hash is in
/// `key`'s high bits, the request at `next` followed; `key`'s low four bits count how
/// much more often than others (saturating at 15). Successors are predicted with the
/// length of the last request.
#[derive(Clone, Copy, Debug)]
struct Link {
    key: u32,
    next: [u32; 2],
}

impl Link {
    fn new(tag: u32, next: u64) -> Self {
        Link {
            key: tag | 1,
            next: [next as u32, (next >> 32) as u32],
        }
    }

    fn tag(&self) -> u32 {
        self.key & !0xf
    }

    fn count(&self) -> u8 {
        (self.key & 0xf) as u8
    }

    fn set_count(&mut self, count: u8) {
        self.key = self.tag() | count.min(15) as u32;
    }

    fn next(&self) -> u64 {
        self.next[0] as u64 | (self.next[1] as u64) << 32
    }
}

/// The 28-bit hash of an offset that keys the correlation table (in the high bits).
fn tag(offset: u64) -> u32 {
    (offset.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as u32 & !0xf
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

    /// A predicted request whose length differs from the run's starts a new phase
    /// when the run's body is one of interleaved records: the body rescaled to the
    /// new record length is followed from this request (the old run is kept in case
    /// the next request continues it).
    fn new_length(&mut self, offset: u64, len: u64) {
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
    fn advance(&mut self, offset: u64) -> bool {
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
    fn missed(&mut self, len: u64) {
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
    fn end_active(&mut self, replaced_from: Option<u64>) {
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

    fn push_phase(&mut self, start: i64, count: u64, fp: u16) {
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
    fn record_end(&mut self, start: i64, count: u64) {
        if let Some(bytes) = with_phase_end(&self.ends, start, count) {
            self.ends = bytes.into_boxed_slice();
        }
    }

    /// Elements of the phase that started at `start`, if its end was recorded.
    fn known_end(&self, start: i64) -> Option<u64> {
        phase_ends(Cursor::new(&self.ends))
            .ok()?
            .into_iter()
            .find(|e| e.0 == start)
            .map(|e| e.1)
    }

    /// Puts a body first in the memory (once; a point is not worth remembering).
    fn remember(&mut self, body: &Pat, len: u64) {
        if self.limits.remembered == 0 || body.0[0] == 0 && body.0.len() == 2 {
            return;
        }
        let mut entry = Vec::new();
        put_uvarint(&mut entry, len);
        body.canonical().encode(&mut entry);
        let mut out = Vec::with_capacity(self.remembered.len() + entry.len() + 2);
        put_uvarint(&mut out, entry.len() as u64);
        out.extend_from_slice(&entry);
        if out.len() > REMEMBERED_BYTES {
            return;
        }
        let mut kept = 1;
        for e in self.entries() {
            if e != entry.as_slice() && kept < self.limits.remembered {
                let before = out.len();
                put_uvarint(&mut out, e.len() as u64);
                out.extend_from_slice(e);
                if out.len() > REMEMBERED_BYTES {
                    out.truncate(before);
                    break;
                }
                kept += 1;
            }
        }
        self.remembered = out.into_boxed_slice();
    }

    /// The remembered entries' bytes (`uvar request length, body`), most recent first.
    fn entries(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut c = Cursor::new(&self.remembered);
        std::iter::from_fn(move || {
            let n = c.uvarint().ok()? as usize;
            c.take(n).ok()
        })
    }

    /// The remembered bodies with their request lengths, most recent first.
    fn remembered_bodies(&self) -> impl Iterator<Item = (u64, Pat)> + '_ {
        self.entries().filter_map(|e| {
            let mut c = Cursor::new(e);
            Some((c.uvarint().ok()?, Pat::decode(&mut c).ok()?))
        })
    }

    /// A pattern that explains the most recent requests: a detected node, else a
    /// contiguous run, else a remembered body.
    fn detect(&self, len: u64, boundary: bool) -> Option<Active> {
        let offsets = self.history.offsets(self.last()?);
        self.explaining_node(&offsets, len)
            .or_else(|| self.contiguous_tail(&offsets))
            .or_else(|| self.explaining_memory(&offsets, len, boundary))
    }

    /// Contiguous when the last three requests each start the same gap (within the
    /// tolerance) after the previous end.
    fn contiguous_tail(&self, offsets: &[i64]) -> Option<Active> {
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
    fn explaining_node(&self, offsets: &[i64], len: u64) -> Option<Active> {
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

    /// A remembered body (or one scaled to the request length) whose beginning
    /// matches the longest tail of the history. One request is enough when nothing is
    /// followed or at a phase boundary; against an active pattern it takes two, so a
    /// lone random request cannot replace it. On equal tails, a body seen with this
    /// request length wins over a scaled one, which wins over the rest.
    fn explaining_memory(&self, offsets: &[i64], len: u64, boundary: bool) -> Option<Active> {
        let shortest = if self.active.is_none() || boundary {
            1
        } else {
            2
        };
        // A request of a new length starts the tail: the jump to it is no element.
        let longest = if self.lens[1] != len {
            1
        } else {
            offsets.len().min(MAX_TAIL)
        };
        let explains = |pat: &Pat, m: usize| {
            let tail = &offsets[offsets.len() - m..];
            (0..m).rev().all(|i| {
                pat.offset_of(i as u64)
                    .and_then(|o| u64::try_from(tail[0] as i128 + o).ok())
                    == Some(tail[i] as u64)
            })
        };
        let mut best: Option<(usize, u8, Pat)> = None;
        // At a boundary the run followed so far is a candidate too (most recent).
        let current = match &self.active {
            Some(Active::Run(r)) if boundary => Some((r.len, r.pat.canonical())),
            _ => None,
        };
        for (seen_len, pat) in current.into_iter().chain(self.remembered_bodies()) {
            let mut candidates = Vec::with_capacity(2);
            if seen_len == len || seen_len == 0 {
                candidates.push((2, pat));
            } else {
                if let Some(s) = pat.rescaled(seen_len, len) {
                    candidates.push((1, s));
                }
                candidates.push((0, pat));
            }
            for (rank, pat) in candidates {
                if longest < shortest {
                    continue;
                }
                let m = (shortest..=longest).rev().find(|&m| explains(&pat, m));
                if let Some(m) = m {
                    if best.as_ref().is_none_or(|b| (m, rank) > (b.0, b.1)) {
                        best = Some((m, rank, pat));
                    }
                }
            }
        }
        let (m, _, pat) = best?;
        let source = if m == 1 && boundary {
            Source::Boundary
        } else {
            Source::Remembered
        };
        Some(Active::Run(Run {
            init: offsets[offsets.len() - m],
            pat,
            next: m as u64,
            source,
            first: self.seen - m as u64,
            len,
            phase: 0,
            end: u32::MAX,
        }))
    }

    fn adopt(&mut self, found: Active) {
        self.confirmed = 0;
        self.strikes = 0;
        self.skipped = false;
        self.active = Some(match found {
            Active::Run(run) => Active::Run(self.compose(run)),
            other => other,
        });
    }

    /// Composes a new run with the phases before it ([`Predictor::compose_phases`]);
    /// a run that is not composed ends where a phase starting at the same offset
    /// ended before, when that was recorded.
    fn compose(&self, run: Run) -> Run {
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
    fn compose_phases(&self, mut run: Run) -> Run {
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

    /// Counts `offset` as the successor of the previous request; a new entry only
    /// when `insert` (the request was not predicted by a pattern).
    fn learn_link(&mut self, offset: u64, insert: bool) {
        let (Some(prev), cap) = (self.last(), self.limits.links as usize) else {
            return;
        };
        if cap == 0 {
            return;
        }
        let t = tag(prev);
        let fresh = Link::new(t, offset);
        if let Some(pos) = self.links.iter().position(|l| l.tag() == t) {
            let l = &mut self.links[pos];
            if l.next() == offset {
                l.set_count(l.count() + 1);
            } else if l.count() <= 1 {
                *l = fresh;
            } else {
                l.set_count(l.count() - 1);
            }
            self.links[..=pos].rotate_right(1);
            return;
        }
        if !insert {
            return;
        }
        if self.links.capacity() == 0 {
            self.links.reserve_exact(cap);
        }
        if self.links.len() == cap {
            // Replace the least recent entry seen at most once; if every entry has
            // been confirmed, age the least recent one instead.
            match self.links.iter().rposition(|l| l.count() <= 1) {
                Some(pos) => {
                    self.links.remove(pos);
                }
                None => {
                    let l = self.links.last_mut().expect("full table");
                    l.set_count(l.count() - 1);
                    return;
                }
            }
        }
        self.links.insert(0, fresh);
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

    /// Successors of `from` along the correlation table, each at most once.
    fn chain(&self, from: u64, len: u64, count: usize) -> Vec<Prediction> {
        let mut out: Vec<Prediction> = Vec::new();
        let mut at = from;
        let mut confidence = 1.0f32;
        while out.len() < count {
            let t = tag(at);
            let Some(l) = self
                .links
                .iter()
                .find(|l| l.tag() == t && l.count() >= self.limits.link_threshold)
            else {
                break;
            };
            let next = l.next();
            if next == from || out.iter().any(|p| p.offset == next) {
                break;
            }
            confidence *= l.count() as f32 / (l.count() as f32 + 1.0);
            out.push(Prediction {
                offset: next,
                len,
                confidence,
            });
            at = next;
        }
        out
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

    /// The remembered pattern bodies (the active one first) with their request
    /// lengths, and the recorded phase ends, as a versioned, checksummed blob, for
    /// [`Predictor::load`] at the next run.
    pub fn save(&self) -> Vec<u8> {
        let mut entries: Vec<Vec<u8>> = Vec::new();
        if let Some(Active::Run(r)) = &self.active {
            let mut e = Vec::new();
            put_uvarint(&mut e, r.len);
            r.pat.canonical().encode(&mut e);
            entries.push(e);
        }
        for e in self.entries() {
            if !entries.iter().any(|x| x == e) {
                entries.push(e.to_vec());
            }
        }
        let mut payload = Vec::new();
        put_uvarint(&mut payload, entries.len() as u64);
        entries.iter().for_each(|e| payload.extend_from_slice(e));
        // A run still going ended here, as far as this run knows.
        let ends = match &self.active {
            Some(Active::Run(r)) if r.phase() == 0 && r.end() != r.next => {
                with_phase_end(&self.ends, r.init, r.next)
            }
            _ => None,
        };
        let ends = ends.as_deref().unwrap_or(&self.ends);
        put_uvarint(&mut payload, ends.len() as u64);
        payload.extend_from_slice(ends);
        write_blob(MODEL_MAGIC, MODEL_VERSION, &payload)
    }

    /// A predictor that starts with the bodies and phase ends saved by
    /// [`Predictor::save`] (this version, version 2 without phase ends or version 1,
    /// which has no request lengths either).
    pub fn load(config: OnlineConfig, bytes: &[u8]) -> Result<Self> {
        let (version, payload) = read_blob(MODEL_MAGIC, MODEL_VERSION, bytes)?;
        let mut c = Cursor::with_base(payload, BLOB_HEADER);
        let n = c.count(c.remaining(), "pattern")?;
        let mut bodies = Vec::with_capacity(n.min(256));
        for _ in 0..n {
            let len = if version >= 2 { c.uvarint()? } else { 0 };
            bodies.push((len, Pat::decode(&mut c)?));
        }
        let mut ends = Vec::new();
        if version >= 3 {
            let n = c.count(c.remaining(), "phase end byte")?;
            let at = c.position();
            ends = phase_ends(Cursor::with_base(c.take(n)?, at))?;
        }
        if !c.is_at_end() {
            return Err(c.error("trailing bytes after the saved patterns"));
        }
        let mut p = Predictor::new(config);
        // Oldest first, so that the first saved body ends up most recent.
        for (len, body) in bodies.iter().take(p.limits.remembered as usize).rev() {
            p.remember(body, *len);
        }
        for (start, count) in ends {
            p.record_end(start, count);
        }
        Ok(p)
    }
}

const MODEL_MAGIC: &[u8; 4] = b"PPRD";
const MODEL_VERSION: u16 = 3;

/// Decodes recorded phase ends: `(start, count)`, oldest first.
fn phase_ends(mut c: Cursor) -> Result<Vec<(i64, u64)>> {
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
fn with_phase_end(ends: &[u8], start: i64, count: u64) -> Option<Vec<u8>> {
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
fn encode_phase_ends(ends: &[(i64, u64)]) -> Vec<u8> {
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
fn outer_pattern(starts: &[i64], window: usize) -> Option<(usize, Pat)> {
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
        // Nor does one of another length: the old pattern is followed again.
        assert!(!p.observe(555_555, 16));
        assert!(p.observe(11 * 4096, 8));
        assert_eq!(p.predict(1)[0].offset, 12 * 4096);
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
    fn version_1_models_load() {
        // PPRD version 1: `uvar count`, bodies without request lengths.
        let mut payload = Vec::new();
        put_uvarint(&mut payload, 1);
        Pat::flat(&[64], 3).encode(&mut payload);
        let blob = write_blob(MODEL_MAGIC, 1, &payload);
        let mut p = Predictor::load(OnlineConfig::default(), &blob).unwrap();
        let hits = run(
            &mut p,
            &(0..6).map(|i| 5000 + i * 64).collect::<Vec<_>>(),
            8,
        );
        assert!(hits[1..].iter().all(|&h| h), "{hits:?}");
        // Version 2 has request lengths and no phase ends.
        let mut v2 = Vec::new();
        put_uvarint(&mut v2, 1);
        put_uvarint(&mut v2, 8);
        Pat::flat(&[64], 3).encode(&mut v2);
        let mut p =
            Predictor::load(OnlineConfig::default(), &write_blob(MODEL_MAGIC, 2, &v2)).unwrap();
        let hits = run(
            &mut p,
            &(0..6).map(|i| 9000 + i * 64).collect::<Vec<_>>(),
            8,
        );
        assert!(hits[1..].iter().all(|&h| h), "{hits:?}");
        let bad = write_blob(MODEL_MAGIC, MODEL_VERSION + 1, &payload);
        assert!(Predictor::load(OnlineConfig::default(), &bad).is_err());
    }

    /// Variables of interleaved records, each with its own record length and an
    /// irregular record count: `(offsets, length)` per variable.
    fn variables(counts: &[u64]) -> Vec<(Vec<u64>, u64)> {
        let (procs, rank) = (16u64, 3u64);
        let mut base = 1 << 20;
        counts
            .iter()
            .enumerate()
            .map(|(v, &count)| {
                let size = 4096 * (1 + v as u64 % 5);
                let offsets = (0..count)
                    .map(|j| base + (j * procs + rank) * size)
                    .collect();
                base += count * procs * size;
                (offsets, size)
            })
            .collect()
    }

    /// Predictions made right after the last request of each variable that fall
    /// outside the stream's remaining requests.
    fn past_variable_ends(p: &mut Predictor, vars: &[(Vec<u64>, u64)]) -> Vec<usize> {
        let all: Vec<u64> = vars.iter().flat_map(|v| v.0.clone()).collect();
        let mut seen = 0;
        let mut wasted = Vec::new();
        for (offsets, len) in vars {
            for &o in offsets {
                p.observe(o, *len);
                seen += 1;
            }
            let rest = &all[seen..];
            wasted.push(
                p.predict(8)
                    .iter()
                    .filter(|x| !rest.contains(&x.offset))
                    .count(),
            );
        }
        wasted
    }

    #[test]
    fn recorded_phase_ends_stop_a_repeated_run_at_each_end() {
        let vars = variables(&[23, 41, 17, 30, 44, 19, 36]);
        let mut first = Predictor::new(OnlineConfig::default());
        let wasted = past_variable_ends(&mut first, &vars);
        assert!(wasted.iter().sum::<usize>() > 0, "{wasted:?}");
        let saved = first.save();
        let mut second = Predictor::load(OnlineConfig::default(), &saved).unwrap();
        let wasted = past_variable_ends(&mut second, &vars);
        assert!(wasted.iter().all(|&w| w == 0), "{wasted:?}");
        // Saved again, the ends are kept, once each.
        let again = second.save();
        assert_eq!(again.len(), saved.len());
        let mut third = Predictor::load(OnlineConfig::default(), &again).unwrap();
        assert!(past_variable_ends(&mut third, &vars)
            .iter()
            .all(|&w| w == 0));
    }

    /// The first record of the next variable can land exactly one element past the
    /// end of the last one's stride (here element 9 of variable 0): it matches by
    /// skipping one, yet variable 0 had 8 records, not 9.
    #[test]
    fn a_phase_ended_by_a_skipping_match_counts_what_was_read() {
        let (procs, rank) = (15u64, 5u64);
        let mut p = Predictor::new(OnlineConfig::default());
        let mut base = 0;
        for size in [3 * 4096, 12 * 4096] {
            run(
                &mut p,
                &(0..8)
                    .map(|j| base + (j * procs + rank) * size)
                    .collect::<Vec<_>>(),
                size,
            );
            base += 8 * procs * size;
        }
        let ends = phase_ends(Cursor::new(&p.ends)).unwrap();
        assert_eq!(ends, [(5 * 3 * 4096, 8)]);
    }

    #[test]
    fn phase_ends_are_bounded() {
        let counts: Vec<u64> = (0..200).map(|i| 16 + i * 7 % 32).collect();
        let mut p = Predictor::new(OnlineConfig::default());
        past_variable_ends(&mut p, &variables(&counts));
        assert!(!p.ends.is_empty() && p.ends.len() <= PHASE_ENDS_BYTES);
        assert!(p.model_bytes() < 1024, "{}", p.model_bytes());
        let mut bad = Vec::new();
        put_uvarint(&mut bad, 0);
        put_uvarint(&mut bad, 3);
        bad.extend_from_slice(&[0x02, 0x80, 0x80]);
        let err = Predictor::load(OnlineConfig::default(), &write_blob(MODEL_MAGIC, 3, &bad));
        assert!(err.is_err());
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
        let next = p.predict(2);
        assert_eq!(
            next.iter().map(|x| x.offset).collect::<Vec<_>>(),
            [20 * 4096, 30 * 4096],
            "{:?}",
            p.following()
        );
    }

    #[test]
    fn compact_bodies_flatten_nesting_and_extrapolate() {
        use crate::unit::Shape;
        let row = Body::Flat(Shape::new(vec![8], 3));
        let grid = Body::nested(Body::Flat(Shape::new(vec![100], 4)), row.clone());
        let cube = Body::nested(Body::Flat(Shape::new(vec![10_000], 1)), grid.clone());
        for body in [row, grid, cube] {
            let pat = Pat::from_body(&body).unwrap();
            for i in 0..body.len() {
                assert_eq!(pat.offset_of(i), Some(body.offset_of(i)), "{body} at {i}");
            }
            // Past the end, the outermost level continues.
            assert_eq!(
                pat.offset_of(body.len()),
                Some(body.offset_of(body.len())),
                "{body}"
            );
            let mut bytes = Vec::new();
            pat.encode(&mut bytes);
            assert_eq!(Pat::decode(&mut Cursor::new(&bytes)).unwrap(), pat);
        }
        let grid = Pat::from_body(&Body::nested(
            Body::Flat(Shape::new(vec![100], 4)),
            Body::Flat(Shape::new(vec![8], 3)),
        ))
        .unwrap();
        assert_eq!(grid.truncate(8).unwrap().len(), 8);
        assert_eq!(grid.truncate(4).unwrap(), Pat::flat(&[8], 3));
        assert!(grid.truncate(6).is_none());
        assert_eq!(grid.truncate(3), Some(Pat::flat(&[8], 2)));
        assert_eq!(
            Pat::flat(&[3, 4], 9).truncate(5),
            Some(Pat::flat(&[3, 4], 2))
        );
        assert!(Pat::flat(&[3, 4, 5], 9).truncate(5).is_none());
        // A 2-D array in its flat form (row, then gap) truncates to whole rows, in the
        // same form as the nested one.
        let flat_grid = Pat::flat(&[8, 8, 8, 76], 4);
        assert_eq!(flat_grid.truncate(8), grid.truncate(8));
        assert_eq!(Pat::flat(&[5, 5, 5], 2), Pat::flat(&[5], 6));
        assert_eq!(Pat::flat(&[48], 9).scaled(3, 4), Some(Pat::flat(&[36], 9)));
        assert!(Pat::flat(&[10], 9).scaled(3, 4).is_none());
    }

    #[test]
    fn history_keeps_large_deltas_exactly() {
        let mut ring = DeltaRing::new(9);
        let offsets = [5u64, 1 << 40, 3, u64::MAX, 0, 7, 1 << 62, 9];
        for w in offsets.windows(2) {
            ring.push(w[1].wrapping_sub(w[0]) as i64);
        }
        let kept = ring.offsets(9);
        let expect: Vec<i64> = offsets.iter().map(|&o| o as i64).collect();
        assert!(expect.ends_with(&kept) && kept.len() >= 3, "{kept:?}");
    }

    #[test]
    fn a_new_request_length_scales_the_remembered_stride() {
        // Records of 16 processes interleaved: the stride is 16 record lengths, and
        // the next variable has records of another length.
        let mut p = Predictor::new(OnlineConfig::default());
        let first: Vec<u64> = (0..20).map(|j| (j * 16 + 5) * 4096).collect();
        run(&mut p, &first, 4096);
        let base = 20 * 16 * 4096;
        let second: Vec<u64> = (0..20).map(|j| base + (j * 16 + 5) * 8192).collect();
        let hits = run(&mut p, &second, 8192);
        assert!(hits[1..].iter().all(|&h| h), "{hits:?}");
    }

    #[test]
    fn phases_compose_with_their_starts() {
        // Time steps 5, 6, 14, 15, 29, 30, …, each read as 16 strided requests.
        let steps: Vec<u64> = [5u64, 6, 14, 15]
            .iter()
            .cycle()
            .zip(0..)
            .map(|(&t, i)| t + 24 * (i / 4))
            .take(24)
            .collect();
        let offsets: Vec<u64> = steps
            .iter()
            .flat_map(|&t| (0..16).map(move |l| t * (1 << 22) + l * (1 << 18) + 3 * (1 << 15)))
            .collect();
        let mut p = Predictor::new(OnlineConfig::default());
        let hits = run(&mut p, &offsets, 1 << 15);
        let locked = hits.iter().rposition(|&h| !h).map_or(0, |i| i + 1);
        assert!(locked <= 6 * 32, "locked from {locked}: {hits:?}");
        assert_eq!(p.following(), Following::Composed);
        let next = steps.last().unwrap() + 14;
        let at = p.predict(64);
        assert_eq!(at.len(), 64);
        assert_eq!(at[0].offset, next * (1 << 22) + 3 * (1 << 15));
    }
}
