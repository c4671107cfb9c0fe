//! The logical→physical mapping of a physical order, and what it does to requests:
//! the physical pieces a request becomes, the physical runs a process's requests
//! make, and the requests handed to the striped storage model.

use patio_core::{Extent, ExtentTable, Lookup};

/// Where every logical byte of a file lives, for the original file (identity) or for a
/// reorganized one (the pieces of an order stored one after another).
#[derive(Clone, Debug)]
pub struct Layout {
    table: ExtentTable,
}

impl Layout {
    /// The original file: every byte where it is.
    pub fn identity(size: u64) -> Self {
        Layout {
            table: ExtentTable::build(&[Extent::new(0, size, 0, 0)]),
        }
    }

    /// Piece `i` of `order` (logical offset, length) stored right after piece `i-1`.
    pub fn from_order(order: &[(u64, u64)]) -> Self {
        Layout {
            table: ExtentTable::build(&order_extents(order)),
        }
    }

    /// The physical pieces of logical `[offset, offset + len)`, merged where they
    /// continue each other; unmapped bytes are skipped.
    pub fn map_into(&self, offset: u64, len: u64, out: &mut Vec<(u64, u64)>) {
        let end = offset + len;
        let mut x = offset;
        while x < end {
            match self.table.lookup(x) {
                Lookup::Data { physical, len, .. } => {
                    let n = len.min(end - x);
                    match out.last_mut() {
                        Some((p, l)) if *p + *l == physical => *l += n,
                        _ => out.push((physical, n)),
                    }
                    x += n;
                }
                Lookup::Hole { len } => x += len,
                Lookup::Unmapped => break,
            }
        }
    }

    /// The physical pieces of one request.
    pub fn map(&self, offset: u64, len: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        self.map_into(offset, len, &mut out);
        out
    }

    /// Physical runs (maximal contiguous extents) of `requests` read one after
    /// another, as a reader that coalesces what follows on disk sees them.
    pub fn runs(&self, requests: &[(u64, u64)]) -> u64 {
        let mut runs = 0;
        let mut end: Option<u64> = None;
        let mut pieces = Vec::new();
        for &(o, l) in requests {
            pieces.clear();
            self.map_into(o, l, &mut pieces);
            for &(p, n) in &pieces {
                if end != Some(p) {
                    runs += 1;
                }
                end = Some(p + n);
            }
        }
        runs
    }

    /// Each request as the physical extents it reads (storage-model input).
    pub fn client(&self, requests: &[(u64, u64)]) -> Vec<Vec<(u64, u64)>> {
        requests.iter().map(|&(o, l)| self.map(o, l)).collect()
    }
}

/// The extents (logical, length, physical, chunk 0) of an order.
pub fn order_extents(order: &[(u64, u64)]) -> Vec<Extent> {
    let mut physical = 0;
    order
        .iter()
        .map(|&(logical, len)| {
            let e = Extent::new(logical, len, physical, 0);
            physical += len;
            e
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_strided_pattern_packed_first_is_one_run() {
        // 4 pieces of 10 bytes every 40 bytes, then the rest.
        let mut order: Vec<(u64, u64)> = (0..4).map(|i| (i * 40, 10)).collect();
        for i in 0..4 {
            order.push((i * 40 + 10, 30));
        }
        let layout = Layout::from_order(&order);
        let reqs: Vec<(u64, u64)> = (0..4).map(|i| (i * 40, 10)).collect();
        assert_eq!(layout.runs(&reqs), 1);
        assert_eq!(Layout::identity(160).runs(&reqs), 4);
        assert_eq!(layout.map(35, 10), vec![(65, 5), (10, 5)]);
    }
}
