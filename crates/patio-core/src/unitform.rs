//! The *unit form* of a stream-set block (version 3): every piece (a stream's
//! requests inside the block) is one pattern, written as a tag and a handful of
//! values with no skeleton, column or dictionary around it. A stream that repeats
//! one request, or strides by one step, costs a few bytes: what the pattern form
//! (`streamset.rs`) spends on its per-block structure is more than such a stream's
//! values on a small or degenerate trace.
//!
//! A piece's offsets, and its lengths, are each *one cycle*: a first value and then
//! the same `k ≤ MAX_CYCLE` differences over and over (`[v, (d0…dk-1)^r]`, the last
//! repetition possibly cut short; `k = 0` when every value is the first). The piece's request
//! count comes from the set's index. Values are *aligned varints* ([`put_aligned`]):
//! I/O offsets and sizes are mostly multiples of large powers of two, so the value
//! is written as its odd part and its trailing zeros — 2^30 and 1 MiB take one byte.
//! Layout: docs/FORMATS.md, "Unit form of a block".

use crate::codec::{put_ivarint, put_uvarint, Cursor};
use crate::error::{CoreError, Result};

/// Differences per cycle at most.
pub const MAX_CYCLE: usize = 7;
/// The low six bits of an aligned varint less one: trailing zeros, or [`ESCAPE`].
const ZEROS: u64 = 63;
/// Marks an aligned varint whose value follows as a plain varint.
const ESCAPE: u64 = 63;

/// Writes `v = odd << zeros` as `uvar (1 + ((odd >> 1) << 6 | zeros))` (the odd
/// part's low bit is always 1 and not stored; 0 as `uvar 0`), or as `uvar 64`
/// (`zeros` = 63, the escape), `uvar v` when the odd part is too wide.
pub fn put_aligned(out: &mut Vec<u8>, v: u64) {
    if v == 0 {
        return put_uvarint(out, 0);
    }
    let z = v.trailing_zeros() as u64;
    let half = v >> z >> 1;
    if z < ESCAPE && half < 1 << 57 {
        put_uvarint(out, 1 + (half << 6 | z));
    } else {
        put_uvarint(out, 1 + ESCAPE);
        put_uvarint(out, v);
    }
}

/// The odd part (high bits, low bit restored) and the trailing zeros of an aligned
/// varint's `x - 1`, or `None` for the escape.
fn split_aligned(c: &Cursor, y: u64) -> Result<Option<(u64, u32)>> {
    match y & ZEROS {
        ESCAPE if y >> 6 == 0 => Ok(None),
        ESCAPE => Err(c.error("aligned varint with an escape and a value")),
        z => Ok(Some((y >> 6, z as u32))),
    }
}

/// Reads what [`put_aligned`] wrote.
pub fn get_aligned(c: &mut Cursor) -> Result<u64> {
    let x = c.uvarint()?;
    let Some(y) = x.checked_sub(1) else {
        return Ok(0);
    };
    match split_aligned(c, y)? {
        None => c.uvarint(),
        Some((half, z)) => {
            let v = (u128::from(half) << 1 | 1) << z;
            u64::try_from(v).map_err(|_| c.error("aligned varint beyond 64 bits"))
        }
    }
}

/// Writes a signed `v` as [`put_aligned`] writes its magnitude, with the sign as the
/// lowest bit of the stored odd part: `uvar (1 + (((odd >> 1) << 1 | negative) << 6
/// | zeros))` (0 as `uvar 0`), or `uvar 64, ivar v` when the odd part is too wide.
pub fn put_aligned_signed(out: &mut Vec<u8>, v: i64) {
    if v == 0 {
        return put_uvarint(out, 0);
    }
    let a = v.unsigned_abs();
    let z = a.trailing_zeros() as u64;
    let half = a >> z >> 1;
    if z < ESCAPE && half < 1 << 56 {
        put_uvarint(out, 1 + ((half << 1 | u64::from(v < 0)) << 6 | z));
    } else {
        put_uvarint(out, 1 + ESCAPE);
        put_ivarint(out, v);
    }
}

/// Reads what [`put_aligned_signed`] wrote.
pub fn get_aligned_signed(c: &mut Cursor) -> Result<i64> {
    let x = c.uvarint()?;
    let Some(y) = x.checked_sub(1) else {
        return Ok(0);
    };
    match split_aligned(c, y)? {
        None => c.ivarint(),
        Some((q, z)) => {
            let a = (u128::from(q >> 1) << 1 | 1) << z;
            let v = if q & 1 == 1 { -(a as i128) } else { a as i128 };
            i64::try_from(v).map_err(|_| c.error("aligned varint beyond 64 bits"))
        }
    }
}

/// The shortest cycle of differences that rebuilds `values` from their first, as
/// wrapping differences (none when every value is the first), or `None` when it is
/// longer than [`MAX_CYCLE`].
fn cycle(values: &[u64]) -> Option<Vec<i64>> {
    let d: Vec<i64> = values
        .windows(2)
        .map(|w| w[1].wrapping_sub(w[0]) as i64)
        .collect();
    if d.iter().all(|&d| d == 0) {
        return Some(Vec::new());
    }
    (1..=MAX_CYCLE.min(d.len()))
        .find(|&k| (k..d.len()).all(|i| d[i] == d[i - k]))
        .map(|k| d[..k].to_vec())
}

/// The unit form of a block's pieces, or `None` when some piece is not one cycle of
/// offsets and one of lengths.
pub fn encode(pieces: &[(&[u64], &[u64])]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    for &(offsets, lengths) in pieces {
        let (first_offset, first_length) = (*offsets.first()?, *lengths.first()?);
        let (o, l) = (cycle(offsets)?, cycle(lengths)?);
        put_uvarint(&mut out, (o.len() * (MAX_CYCLE + 1) + l.len()) as u64);
        put_aligned(&mut out, first_offset);
        for &d in &o {
            put_aligned_signed(&mut out, d);
        }
        put_aligned(&mut out, first_length);
        for &d in &l {
            put_aligned_signed(&mut out, d);
        }
    }
    Some(out)
}

/// Reads one column of `n` values: its first value and cycle.
fn column(c: &mut Cursor, k: usize, n: usize, out: Option<&mut Vec<u64>>) -> Result<()> {
    let first = get_aligned(c)?;
    let mut cycle = [0i64; MAX_CYCLE];
    for d in cycle.iter_mut().take(k) {
        *d = get_aligned_signed(c)?;
    }
    match out {
        None => {}
        Some(out) if k == 0 => out.extend(std::iter::repeat_n(first, n)),
        Some(out) => {
            out.reserve(n);
            let mut v = first;
            out.push(v);
            for i in 1..n {
                v = v.wrapping_add(cycle[(i - 1) % k] as u64);
                out.push(v);
            }
        }
    }
    Ok(())
}

/// Reads the unit form of pieces of `counts` requests (from the set's index),
/// appending the offsets and lengths of piece `want` (every piece when `None`) to
/// `offsets` and `lengths`. The cursor must end with the form.
pub fn decode_into(
    c: &mut Cursor,
    counts: &[usize],
    want: Option<usize>,
    offsets: &mut Vec<u64>,
    lengths: &mut Vec<u64>,
) -> Result<()> {
    for (p, &n) in counts.iter().enumerate() {
        let at = c.position();
        let tag = c.uvarint()? as usize;
        let (ko, kl) = (tag / (MAX_CYCLE + 1), tag % (MAX_CYCLE + 1));
        if ko > MAX_CYCLE {
            return Err(CoreError::corrupt(at, format!("unit tag {tag} unknown")));
        }
        let keep = want.is_none_or(|w| w == p);
        column(c, ko, n, keep.then_some(&mut *offsets))?;
        column(c, kl, n, keep.then_some(&mut *lengths))?;
    }
    if !c.is_at_end() {
        return Err(c.error("trailing bytes after the block's units"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn aligned_values_take_one_byte() {
        for v in [0u64, 1, 3, 4096, 3 << 12, 1 << 20, 1 << 30, 1 << 62] {
            let mut out = Vec::new();
            put_aligned(&mut out, v);
            assert_eq!(out.len(), 1, "{v}");
        }
        let mut out = Vec::new();
        put_aligned_signed(&mut out, -(1 << 18));
        put_aligned_signed(&mut out, 1 << 40);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn a_repeated_request_is_a_few_bytes() {
        let (o, l) = (vec![1u64 << 30; 65_536], vec![1u64 << 20; 65_536]);
        let bytes = encode(&[(&o, &l)]).unwrap();
        assert_eq!(bytes.len(), 3);
        let (mut ro, mut rl) = (Vec::new(), Vec::new());
        decode_into(&mut Cursor::new(&bytes), &[65_536], None, &mut ro, &mut rl).unwrap();
        assert_eq!((ro, rl), (o, l));
    }

    #[test]
    fn streams_of_no_cycle_have_no_unit_form() {
        let o = [0u64, 1, 3, 7, 15, 31, 63, 127, 255, 511];
        assert!(encode(&[(&o, &o)]).is_none());
    }

    proptest! {
        #[test]
        fn values_round_trip(u in any::<u64>(), s in any::<i64>(), z in 0u32..64) {
            for (u, s) in [(u, s), (u << z, s << z)] {
                let mut out = Vec::new();
                put_aligned(&mut out, u);
                put_aligned_signed(&mut out, s);
                let mut c = Cursor::new(&out);
                prop_assert_eq!(get_aligned(&mut c).unwrap(), u);
                prop_assert_eq!(get_aligned_signed(&mut c).unwrap(), s);
                prop_assert!(c.is_at_end());
            }
        }

        #[test]
        fn cycles_round_trip_and_damage_is_an_error(
            pieces in proptest::collection::vec(
                (any::<u64>(), proptest::collection::vec(any::<i64>(), 0..4),
                 any::<u64>(), proptest::collection::vec(-5i64..5, 0..3), 1usize..40),
                1..6),
            want in any::<prop::sample::Index>(),
        ) {
            let build = |first: u64, d: &[i64], n: usize| -> Vec<u64> {
                (0..n).scan(first, |v, i| {
                    let here = *v;
                    if !d.is_empty() { *v = v.wrapping_add(d[i % d.len()] as u64); }
                    Some(here)
                }).collect()
            };
            let streams: Vec<(Vec<u64>, Vec<u64>)> = pieces.iter().map(|(o, od, l, ld, n)| {
                let n = *n;
                (build(*o, od, n), build(*l, ld, n))
            }).collect();
            let views: Vec<(&[u64], &[u64])> =
                streams.iter().map(|(o, l)| (o.as_slice(), l.as_slice())).collect();
            let counts: Vec<usize> = streams.iter().map(|s| s.0.len()).collect();
            let bytes = encode(&views).unwrap();
            let (mut o, mut l) = (Vec::new(), Vec::new());
            decode_into(&mut Cursor::new(&bytes), &counts, None, &mut o, &mut l).unwrap();
            prop_assert_eq!(o, streams.iter().flat_map(|s| s.0.clone()).collect::<Vec<_>>());
            prop_assert_eq!(l, streams.iter().flat_map(|s| s.1.clone()).collect::<Vec<_>>());
            let w = want.index(streams.len());
            let (mut o, mut l) = (Vec::new(), Vec::new());
            decode_into(&mut Cursor::new(&bytes), &counts, Some(w), &mut o, &mut l).unwrap();
            prop_assert_eq!((o, l), streams[w].clone());
            for cut in 0..bytes.len() {
                let (mut o, mut l) = (Vec::new(), Vec::new());
                prop_assert!(decode_into(&mut Cursor::new(&bytes[..cut]), &counts, None, &mut o, &mut l).is_err());
            }
        }
    }
}
