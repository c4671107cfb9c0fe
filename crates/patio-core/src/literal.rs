//! Codings of literal runs — the values no pattern describes — inside a pattern
//! sequence encoding. Four codings; the encoder keeps the smallest for each run:
//!
//! * `Diff1`: zigzag varints of first differences (`v - prev`);
//! * `Diff2`: zigzag varints of second differences (values that progress almost
//!   linearly);
//! * `PackedValues` / `PackedDiff1`: frame of reference — the values (or their first
//!   differences) minus their minimum, bit-packed at the width of the largest, so
//!   random values in a range cost their bits rather than whole varint bytes.
//!
//! `prev` is the last value before the run (0 at the start of a sequence).

use crate::codec::{put_ivarint, zigzag, Cursor};
use crate::error::{CoreError, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coding {
    Diff1,
    Diff2,
    PackedValues,
    PackedDiff1,
}

pub const CODINGS: [Coding; 4] = [
    Coding::Diff1,
    Coding::Diff2,
    Coding::PackedValues,
    Coding::PackedDiff1,
];

/// `v - prev` for each value, `prev` then the value before (wrapping).
fn differences(values: &[i64], mut prev: i64) -> impl ExactSizeIterator<Item = i64> + Clone + '_ {
    values.iter().map(move |&v| {
        let d = v.wrapping_sub(prev);
        prev = v;
        d
    })
}

/// The payload of `values` in `coding` (the run length is written by the caller).
pub fn encode(values: &[i64], prev: i64, coding: Coding) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 2);
    match coding {
        Coding::Diff1 => differences(values, prev).for_each(|d| put_ivarint(&mut out, d)),
        Coding::Diff2 => {
            let mut prev_diff = 0i64;
            for d in differences(values, prev) {
                put_ivarint(&mut out, d.wrapping_sub(prev_diff));
                prev_diff = d;
            }
        }
        Coding::PackedValues => pack(values.iter().copied(), &mut out),
        Coding::PackedDiff1 => pack(differences(values, prev), &mut out),
    }
    out
}

/// The codings whose output stays byte-aligned.
pub const VARINT_CODINGS: [Coding; 2] = [Coding::Diff1, Coding::Diff2];

/// The smallest of `codings` (not empty) for a run, and its payload (the first of equal
/// sizes). Sizes are counted in one pass without writing; only the chosen coding is
/// written.
pub fn encode_best(values: &[i64], prev: i64, codings: &[Coding]) -> (Coding, Vec<u8>) {
    let stats = RunStats::of(values, prev);
    let best = codings
        .iter()
        .copied()
        .min_by_key(|&c| stats.lens[c as usize])
        .expect("at least one coding");
    let mut out = Vec::with_capacity(stats.lens[best as usize]);
    match best {
        Coding::PackedValues => pack_range(values.iter().copied(), stats.values, &mut out),
        Coding::PackedDiff1 => pack_range(differences(values, prev), stats.diffs, &mut out),
        _ => return (best, encode(values, prev, best)),
    }
    (best, out)
}

/// Bytes of an unsigned LEB128 varint: `ceil(bits / 7)`, one for zero.
fn uvarint_len(v: u64) -> usize {
    (70 - (v | 1).leading_zeros() as usize) / 7
}

/// What choosing a run's coding needs, counted in one pass: `lens[c]` is
/// `encode(values, prev, c).len()` for every coding `c` (indexed as [`Coding`]'s
/// variants), `values` and `diffs` the smallest and largest value and difference.
struct RunStats {
    lens: [usize; 4],
    values: (i64, i64),
    diffs: (i64, i64),
}

impl RunStats {
    fn of(values: &[i64], prev: i64) -> Self {
        let (mut diff1, mut diff2, mut last_diff) = (0usize, 0usize, 0i64);
        let (mut vmin, mut vmax) = (i64::MAX, i64::MIN);
        let (mut dmin, mut dmax) = (i64::MAX, i64::MIN);
        for (&v, d) in values.iter().zip(differences(values, prev)) {
            diff1 += uvarint_len(zigzag(d));
            diff2 += uvarint_len(zigzag(d.wrapping_sub(last_diff)));
            last_diff = d;
            (vmin, vmax) = (vmin.min(v), vmax.max(v));
            (dmin, dmax) = (dmin.min(d), dmax.max(d));
        }
        let n = values.len();
        RunStats {
            lens: [
                diff1,
                diff2,
                packed_len((vmin, vmax), n),
                packed_len((dmin, dmax), n),
            ],
            values: (vmin, vmax),
            diffs: (dmin, dmax),
        }
    }
}

/// The frame of reference of `n` values from `min` to `max` (none: `min > max`): the
/// minimum and the bits each value takes.
fn frame((min, max): (i64, i64), n: usize) -> (i64, u32) {
    if n == 0 {
        return (0, 1);
    }
    let widest = max.wrapping_sub(min) as u64;
    (min, (64 - widest.leading_zeros()).max(1))
}

/// [`pack`]'s output size for `n` values from `min` to `max`.
fn packed_len(range: (i64, i64), n: usize) -> usize {
    let (min, bits) = frame(range, n);
    uvarint_len(zigzag(min)) + 1 + (n * bits as usize).div_ceil(8)
}

/// Frame of reference: `ivar min`, `u8 bits`, then the values minus `min` as `bits`-wide
/// little-endian bit fields (first value in the lowest bits of the first byte). Values
/// take at least one bit even when they are all equal: decoders bound a run's length
/// by the bytes left (at most 8 values per byte), so that a damaged length cannot make
/// them allocate more than the input justifies.
fn pack(values: impl ExactSizeIterator<Item = i64> + Clone, out: &mut Vec<u8>) {
    let range = values
        .clone()
        .fold((i64::MAX, i64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    pack_range(values, range, out);
}

/// [`pack`] of values whose smallest and largest are known.
fn pack_range(values: impl ExactSizeIterator<Item = i64>, range: (i64, i64), out: &mut Vec<u8>) {
    let n = values.len();
    let (min, bits) = frame(range, n);
    put_ivarint(out, min);
    out.push(bits as u8);
    out.reserve((n * bits as usize).div_ceil(8));
    let (mut acc, mut filled) = (0u128, 0u32);
    for v in values {
        acc |= (v.wrapping_sub(min) as u64 as u128) << filled;
        filled += bits;
        if filled >= 64 {
            out.extend_from_slice(&(acc as u64).to_le_bytes());
            acc >>= 64;
            filled -= 64;
        }
    }
    out.extend_from_slice(&(acc as u64).to_le_bytes()[..filled.div_ceil(8) as usize]);
}

fn unpack(c: &mut Cursor, n: usize) -> Result<Vec<i64>> {
    let min = c.ivarint()?;
    let at = c.position();
    let bits = c.u8()? as u32;
    if bits > 64 {
        return Err(CoreError::corrupt(
            at,
            format!("bit width {bits} exceeds 64"),
        ));
    }
    let bytes = (n as u128 * bits as u128).div_ceil(8);
    if bytes > c.remaining() as u128 {
        return Err(c.error(format!(
            "packed run needs {bytes} bytes, {} left",
            c.remaining()
        )));
    }
    let data = c.take(bytes as usize)?;
    let mask = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let (mut acc, mut filled, mut next) = (0u128, 0u32, 0usize);
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        while filled < bits {
            acc |= (data[next] as u128) << filled;
            next += 1;
            filled += 8;
        }
        out.push(min.wrapping_add((acc as u64 & mask) as i64));
        acc = if bits == 64 { acc >> 64 } else { acc >> bits };
        filled -= bits;
    }
    Ok(out)
}

/// Reads a run of `n` values written in `coding`.
pub fn decode(c: &mut Cursor, n: usize, mut prev: i64, coding: Coding) -> Result<Vec<i64>> {
    let to_values = |diffs: Vec<i64>, mut prev: i64| -> Vec<i64> {
        diffs
            .into_iter()
            .map(|d| {
                prev = prev.wrapping_add(d);
                prev
            })
            .collect()
    };
    Ok(match coding {
        Coding::Diff1 | Coding::Diff2 => {
            let mut out = Vec::with_capacity(n.min(c.remaining()));
            let mut diff = 0i64;
            for _ in 0..n {
                let coded = c.ivarint()?;
                diff = if coding == Coding::Diff2 {
                    diff.wrapping_add(coded)
                } else {
                    coded
                };
                prev = prev.wrapping_add(diff);
                out.push(prev);
            }
            out
        }
        Coding::PackedValues => unpack(c, n)?,
        Coding::PackedDiff1 => to_values(unpack(c, n)?, prev),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_coding_round_trips_at_the_limits() {
        let runs: [&[i64]; 5] = [
            &[7],
            &[0, 0, 0],
            &[i64::MIN, i64::MAX, 0, -1, 1],
            &[100, 2000, 35, 99_999, 4],
            &[10, 21, 29, 41, 50, 61],
        ];
        for run in runs {
            for prev in [0, -5, i64::MAX] {
                for coding in CODINGS {
                    let bytes = encode(run, prev, coding);
                    let mut c = Cursor::new(&bytes);
                    assert_eq!(
                        decode(&mut c, run.len(), prev, coding).unwrap(),
                        run,
                        "{coding:?}"
                    );
                    assert!(c.is_at_end());
                    if !bytes.is_empty() {
                        let mut short = Cursor::new(&bytes[..bytes.len() - 1]);
                        assert!(
                            decode(&mut short, run.len(), prev, coding).is_err(),
                            "{coding:?} truncated"
                        );
                    }
                }
            }
        }
    }

    /// Equal first differences that no pattern holds (they overflow, as between
    /// i64::MIN and 0): packed, they still take a bit each, within the length bound
    /// the sequence decoder applies.
    #[test]
    fn equal_values_take_a_bit_each() {
        let values: Vec<i64> = (0..105).map(|i| [i64::MIN, 0][i % 2]).collect();
        let (coding, bytes) = encode_best(&values, 0, &CODINGS);
        assert!(
            bytes.len() * 8 + 8 >= values.len(),
            "{coding:?}: {} bytes",
            bytes.len()
        );
        let mut c = Cursor::new(&bytes);
        assert_eq!(decode(&mut c, values.len(), 0, coding).unwrap(), values);
        let seq = crate::PatternSeq::build(&values, &crate::Detector::new(1));
        let encoded = crate::seqcodec::encode_seq(&seq);
        assert_eq!(
            crate::seqcodec::decode_seq(&encoded).unwrap().expand(),
            values
        );
    }

    #[test]
    fn random_values_in_a_range_cost_their_bits() {
        let values: Vec<i64> = (0..1000).map(|i| 50 + (i * 7919) % 64).collect();
        let (coding, bytes) = encode_best(&values, 0, &CODINGS);
        assert_eq!(coding, Coding::PackedValues);
        assert!(bytes.len() <= 2 + 750 + 1, "{} bytes", bytes.len());
    }

    proptest::proptest! {
        /// The counted size is the written size for every coding, and the chosen
        /// coding is the first of the smallest written ones.
        #[test]
        fn counted_sizes_are_written_sizes(
            values in proptest::collection::vec(proptest::prop_oneof![
                -300i64..300, proptest::num::i64::ANY, 0i64..1 << 40], 1..200),
            prev in proptest::num::i64::ANY,
        ) {
            let written: Vec<usize> = CODINGS.iter().map(|&c| encode(&values, prev, c).len()).collect();
            for (&c, &len) in CODINGS.iter().zip(&written) {
                proptest::prop_assert_eq!(RunStats::of(&values, prev).lens[c as usize], len, "{:?}", c);
            }
            for codings in [&CODINGS[..], &VARINT_CODINGS[..]] {
                let smallest = codings
                    .iter()
                    .map(|&c| (c, encode(&values, prev, c)))
                    .min_by_key(|(_, b)| b.len())
                    .unwrap();
                proptest::prop_assert_eq!(encode_best(&values, prev, codings), smallest);
            }
        }
    }
}
