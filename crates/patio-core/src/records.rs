//! The record form of a piece of a stream: per request the gap before it (its offset
//! minus the previous request's end, the first against 0) as a signed varint and its
//! length as an unsigned varint. Byte-aligned, so a block coder finds the repeats a
//! pattern does not describe (the same group of requests against many files); the
//! fallback of the stream-set encoding for streams with little pattern coverage.

use crate::codec::{put_ivarint, put_uvarint, Cursor};
use crate::error::Result;

fn varint_len(v: u64) -> usize {
    (64 - v.leading_zeros() as usize).max(1).div_ceil(7)
}

/// Bytes each request of `(offsets, lengths)` takes in record form, in order.
pub fn sizes<'a>(offsets: &'a [u64], lengths: &'a [u64]) -> impl Iterator<Item = usize> + 'a {
    let mut end = 0u64;
    offsets.iter().zip(lengths).map(move |(&o, &l)| {
        let gap = o.wrapping_sub(end) as i64;
        end = o.wrapping_add(l);
        varint_len(crate::codec::zigzag(gap)) + varint_len(l)
    })
}

/// Appends the records of `(offsets, lengths)` to `buf`.
pub fn put(offsets: &[u64], lengths: &[u64], buf: &mut Vec<u8>) {
    let mut end = 0u64;
    for (&o, &l) in offsets.iter().zip(lengths) {
        put_ivarint(buf, o.wrapping_sub(end) as i64);
        put_uvarint(buf, l);
        end = o.wrapping_add(l);
    }
}

/// Reads `n` records (the caller bounds `n`).
pub fn get(c: &mut Cursor, n: usize) -> Result<(Vec<u64>, Vec<u64>)> {
    let (mut offsets, mut lengths) = (Vec::new(), Vec::new());
    get_into(c, n, &mut offsets, &mut lengths)?;
    Ok((offsets, lengths))
}

/// Reads `n` records, appending them to `offsets` and `lengths` (the caller bounds
/// `n`).
pub fn get_into(
    c: &mut Cursor,
    n: usize,
    offsets: &mut Vec<u64>,
    lengths: &mut Vec<u64>,
) -> Result<()> {
    let cap = n.min(c.remaining() / 2);
    offsets.reserve(cap);
    lengths.reserve(cap);
    let mut end = 0u64;
    for _ in 0..n {
        let o = end.wrapping_add(c.ivarint()? as u64);
        let l = c.uvarint()?;
        offsets.push(o);
        lengths.push(l);
        end = o.wrapping_add(l);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_sizes_are_exact() {
        let offsets = [0u64, 4096, 100, u64::MAX, 7];
        let lengths = [4096u64, 10, u64::MAX, 1, 0];
        let mut buf = Vec::new();
        put(&offsets, &lengths, &mut buf);
        assert_eq!(sizes(&offsets, &lengths).sum::<usize>(), buf.len());
        let mut c = Cursor::new(&buf);
        assert_eq!(
            get(&mut c, 5).unwrap(),
            (offsets.to_vec(), lengths.to_vec())
        );
        assert!(c.is_at_end());
        assert!(get(&mut Cursor::new(&buf[..buf.len() - 1]), 5).is_err());
    }
}
