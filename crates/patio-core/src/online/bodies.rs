//! Compact pattern bodies (flat levels, outermost first: element offsets in O(levels),
//! varint coding) and the bodies of earlier patterns the predictor remembers, reuses
//! and rescales.

use super::{Active, Following, Predictor, Run, Source};
use crate::codec::{put_ivarint, put_uvarint, Cursor};
use crate::error::{CoreError, Result};
use crate::tree::Body;

/// Most levels a compact body may have.
pub(super) const MAX_LEVELS: usize = 16;

/// Most bytes the remembered bodies may take (varint-encoded, with their request
/// lengths); older bodies are forgotten first.
pub const REMEMBERED_BYTES: usize = 128;

/// Longest history tail compared with a remembered body.
pub(super) const MAX_TAIL: usize = 16;

/// A pattern body in compact form: its flat levels, outermost first, each stored as
/// `k, reps, d0 … dk-1` in one boxed slice. `outer × inner` nesting is associative,
/// so every tree [`Body`] flattens to such a list. A level with no deltas (or no
/// repetitions) is a single element.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Pat(pub(super) Box<[i64]>);

pub(super) type Level<'a> = (&'a [i64], u64);

pub(super) struct Levels<'a>(&'a [i64]);

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
pub(super) fn level_len((deltas, reps): Level) -> u128 {
    if deltas.is_empty() {
        1
    } else {
        1 + deltas.len() as u128 * reps as u128
    }
}

/// Offset of element `i` of one flat level, extrapolated past its end.
pub(super) fn flat_offset(deltas: &[i64], i: u128) -> Option<i128> {
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
    pub(super) fn from_levels<'a>(levels: impl IntoIterator<Item = Level<'a>>) -> Option<Pat> {
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

    pub(super) fn flat(deltas: &[i64], reps: u64) -> Pat {
        Pat::from_levels([(deltas, reps)]).expect("one level")
    }

    /// The tree body flattened.
    pub(super) fn from_body(body: &Body) -> Option<Pat> {
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

    pub(super) fn levels(&self) -> Levels<'_> {
        Levels(&self.0)
    }

    pub(super) fn heap_bytes(&self) -> usize {
        self.0.len() * 8
    }

    /// Elements described (saturating).
    #[cfg(test)]
    pub(super) fn len(&self) -> u128 {
        self.levels()
            .map(level_len)
            .fold(1u128, |a, b| a.saturating_mul(b))
    }

    /// Offset of element `i` from the first, extrapolated past the end by the
    /// outermost level; `None` when it leaves the `i128` range or the outermost level
    /// is a single element.
    pub(super) fn offset_of(&self, i: u64) -> Option<i128> {
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
    pub(super) fn truncate(&self, count: u64) -> Option<Pat> {
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
    pub(super) fn canonical(&self) -> Pat {
        let mut words = self.0.clone();
        if words[0] > 0 {
            words[1] = 1;
        }
        Pat(words)
    }

    /// `outer × inner`.
    pub(super) fn nest(outer: &Pat, inner: &Pat) -> Option<Pat> {
        Pat::from_levels(outer.levels().chain(inner.levels()))
    }

    /// Every delta multiplied by `num / den`, when all stay exact integers.
    pub(super) fn scaled(&self, num: u64, den: u64) -> Option<Pat> {
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
    pub(super) fn rescaled(&self, from: u64, to: u64) -> Option<Pat> {
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
    pub(super) fn fingerprint(&self, len: u64) -> u16 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &w in self.0.iter().chain(std::iter::once(&(len as i64))) {
            for b in w.to_le_bytes() {
                h = (h ^ b as u64).wrapping_mul(0x0100_0000_01b3);
            }
        }
        let h = h ^ (h >> 32);
        (h ^ (h >> 16)) as u16 | 1
    }

    pub(super) fn kind(&self) -> Following {
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
    pub(super) fn encode(&self, out: &mut Vec<u8>) {
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

    pub(super) fn decode(c: &mut Cursor) -> Result<Pat> {
        let at = c.position();
        let mut levels: Vec<(Vec<i64>, u64)> = Vec::new();
        decode_levels(c, &mut levels, 0)?;
        Pat::from_levels(levels.iter().map(|(d, r)| (&d[..], *r)))
            .ok_or_else(|| CoreError::corrupt(at, "pattern nests too deep"))
    }
}

pub(super) fn decode_levels(
    c: &mut Cursor,
    out: &mut Vec<(Vec<i64>, u64)>,
    depth: usize,
) -> Result<()> {
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

impl Predictor {
    /// Puts a body first in the memory (once; a point is not worth remembering).
    pub(super) fn remember(&mut self, body: &Pat, len: u64) {
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
    pub(super) fn entries(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut c = Cursor::new(&self.remembered);
        std::iter::from_fn(move || {
            let n = c.uvarint().ok()? as usize;
            c.take(n).ok()
        })
    }

    /// The remembered bodies with their request lengths, most recent first.
    pub(super) fn remembered_bodies(&self) -> impl Iterator<Item = (u64, Pat)> + '_ {
        self.entries().filter_map(|e| {
            let mut c = Cursor::new(e);
            Some((c.uvarint().ok()?, Pat::decode(&mut c).ok()?))
        })
    }

    /// A remembered body (or one scaled to the request length) whose beginning
    /// matches the longest tail of the history. One request is enough when nothing is
    /// followed or at a phase boundary; against an active pattern it takes two, so a
    /// lone random request cannot replace it. On equal tails, a body seen with this
    /// request length wins over a scaled one, which wins over the rest.
    pub(super) fn explaining_memory(
        &self,
        offsets: &[i64],
        len: u64,
        boundary: bool,
    ) -> Option<Active> {
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
}
