//! Parameter slots of the stream set's pattern form (`streamset.rs`) predicted by an
//! earlier slot of the same row: where a slot's difference from (or sum with) an
//! earlier slot is one value across all distinct rows — an offset and the same
//! request's end, a value and its negation — the slot is stored as that difference, a
//! constant column of one or two bytes instead of one value per row. Layout:
//! docs/FORMATS.md, "Pattern form of a block".

use crate::codec::{put_uvarint, Cursor};
use crate::error::{CoreError, Result};

/// A slot of a parameter matrix stored as its difference from an earlier slot of the
/// same row (or its sum with it, `plus`): where that is one value for every row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prediction {
    pub slot: usize,
    pub from: usize,
    pub plus: bool,
}

/// How far back a slot looks for the slot that predicts it.
const PREDICTION_REACH: usize = 32;

/// The slots of a column-major matrix of `rows` rows that an earlier, varying slot
/// predicts exactly, in slot order.
pub fn predictions(matrix: &[i64], rows: usize, slots: usize) -> Vec<Prediction> {
    if rows < 2 {
        return Vec::new();
    }
    let column = |j: usize| &matrix[j * rows..(j + 1) * rows];
    let varies = |j: usize| column(j).iter().any(|&v| v != column(j)[0]);
    let mut out = Vec::new();
    for slot in (0..slots).filter(|&j| varies(j)) {
        for from in (slot.saturating_sub(PREDICTION_REACH)..slot).filter(|&i| varies(i)) {
            let pairs = || column(slot).iter().zip(column(from));
            let plus = if constant(pairs().map(|(a, b)| a.wrapping_sub(*b))) {
                false
            } else if constant(pairs().map(|(a, b)| a.wrapping_add(*b))) {
                true
            } else {
                continue;
            };
            out.push(Prediction { slot, from, plus });
            break;
        }
    }
    out
}

/// Whether every value is the same.
fn constant(mut values: impl Iterator<Item = i64>) -> bool {
    let first = values.next();
    values.all(|v| Some(v) == first)
}

/// Replaces predicted slots by their differences (`encode`) or back (decode). The
/// encoder goes from the last slot back, so every slot predicts from original values;
/// the decoder from the first on, so every slot it predicts from is restored.
pub fn apply(matrix: &mut [i64], rows: usize, predicted: &[Prediction], encode: bool) {
    let mut each = |p: &Prediction| {
        for r in 0..rows {
            let from = matrix[p.from * rows + r];
            let v = &mut matrix[p.slot * rows + r];
            *v = match (p.plus, encode) {
                (false, true) | (true, false) => v.wrapping_sub(from),
                (false, false) | (true, true) => v.wrapping_add(from),
            };
        }
    };
    if encode {
        predicted.iter().rev().for_each(&mut each);
    } else {
        predicted.iter().for_each(each);
    }
}

/// Writes predictions (in slot order): their count, then per prediction the slot
/// after the previous one's and how far back the predicting slot is, with `plus`.
pub fn put_predictions(predicted: &[Prediction], buf: &mut Vec<u8>) {
    put_uvarint(buf, predicted.len() as u64);
    let mut next = 0;
    for p in predicted {
        put_uvarint(buf, (p.slot - next) as u64);
        put_uvarint(buf, ((p.slot - 1 - p.from) as u64) << 1 | u64::from(p.plus));
        next = p.slot + 1;
    }
}

/// Reads the predictions of a skeleton of `slots` slots.
pub fn get_predictions(c: &mut Cursor, slots: usize) -> Result<Vec<Prediction>> {
    let n = c.count(slots, "prediction")?;
    let mut out = Vec::with_capacity(n);
    let mut next = 0u64;
    for _ in 0..n {
        let at = c.position();
        let slot = next.saturating_add(c.uvarint()?);
        let x = c.uvarint()?;
        let back = (x >> 1).saturating_add(1);
        if slot >= slots as u64 || back > slot {
            return Err(CoreError::corrupt(
                at,
                "prediction outside the parameter row",
            ));
        }
        out.push(Prediction {
            slot: slot as usize,
            from: (slot - back) as usize,
            plus: x & 1 == 1,
        });
        next = slot + 1;
    }
    Ok(out)
}
