//! The request side of a concatenated point replica's candidate: a point request's
//! row-major linear indices, made once per decision instead of once per replica
//! weighed, and the split of the request into the points a replica holds and the rest.
//! A replica whose index range misses the request's is passed over without looking at
//! a point; a sorted request (what a boolean mask or an index's point list hands over)
//! is walked once against the replica's sorted indices, each search starting where the
//! last one ended.

/// A point request's linear indices and their range.
pub(crate) struct PointsRequest {
    lin: Vec<u64>,
    sorted: bool,
    lo: u64,
    hi: u64,
}

impl PointsRequest {
    /// The request's points `coords` (rank `shape.len()`, row-major) in an array of
    /// `shape`.
    pub(crate) fn new(shape: &[u64], coords: &[u64]) -> PointsRequest {
        let lin: Vec<u64> = coords
            .chunks(shape.len().max(1))
            .map(|p| p.iter().zip(shape).fold(0u64, |acc, (&c, &n)| acc * n + c))
            .collect();
        let sorted = lin.windows(2).all(|w| w[0] <= w[1]);
        let lo = lin.iter().copied().min().unwrap_or(u64::MAX);
        let hi = lin.iter().copied().max().unwrap_or(0);
        PointsRequest {
            lin,
            sorted,
            lo,
            hi,
        }
    }

    /// Whether a replica holding the sorted indices `linear` can hold a requested point
    /// (false means: it holds none).
    pub(crate) fn may_overlap(&self, linear: &[u64]) -> bool {
        match (linear.first(), linear.last()) {
            (Some(&first), Some(&last)) => {
                !self.lin.is_empty() && self.lo <= last && first <= self.hi
            }
            _ => false,
        }
    }

    /// The requested points a replica holding the sorted, distinct indices `linear`
    /// serves, as `(position in the replica, request point)` sorted by position, and
    /// the request points it lacks, in request order.
    pub(crate) fn split(&self, linear: &[u64]) -> (Vec<(u64, usize)>, Vec<usize>) {
        let n = self.lin.len();
        if !self.may_overlap(linear) {
            return (Vec::new(), (0..n).collect());
        }
        let (first, last) = (linear[0], linear[linear.len() - 1]);
        let mut held = Vec::new();
        let mut rest = Vec::new();
        if self.sorted {
            let a = self.lin.partition_point(|&v| v < first);
            let b = self.lin.partition_point(|&v| v <= last);
            rest.extend(0..a);
            let mut j = 0;
            for (k, &v) in self.lin.iter().enumerate().take(b).skip(a) {
                match linear[j..].binary_search(&v) {
                    Ok(at) => {
                        j += at;
                        held.push((j as u64, k));
                    }
                    Err(at) => {
                        j += at;
                        rest.push(k);
                    }
                }
            }
            rest.extend(b..n);
        } else {
            for (k, &v) in self.lin.iter().enumerate() {
                match linear.binary_search(&v) {
                    Ok(at) => held.push((at as u64, k)),
                    Err(_) => rest.push(k),
                }
            }
            held.sort_unstable();
        }
        (held, rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    /// The split by definition: every request point looked up on its own.
    fn reference(shape: &[u64], linear: &[u64], coords: &[u64]) -> (Vec<(u64, usize)>, Vec<usize>) {
        let mut held = Vec::new();
        let mut rest = Vec::new();
        for (k, p) in coords.chunks(shape.len()).enumerate() {
            let lin = p.iter().zip(shape).fold(0u64, |acc, (&c, &n)| acc * n + c);
            match linear.iter().position(|&l| l == lin) {
                Some(at) => held.push((at as u64, k)),
                None => rest.push(k),
            }
        }
        held.sort_unstable();
        (held, rest)
    }

    fn coords_of(shape: &[u64], lin: &[u64]) -> Vec<u64> {
        let mut out = Vec::new();
        for &l in lin {
            let mut c = vec![0; shape.len()];
            let mut r = l;
            for (d, &n) in shape.iter().enumerate().rev() {
                c[d] = r % n;
                r /= n;
            }
            out.extend(c);
        }
        out
    }

    proptest! {
        #[test]
        fn split_matches_looking_up_each_point(
            shape in prop::collection::vec(1..9u64, 1..4),
            held in prop::collection::btree_set(0..512u64, 0..40),
            picks in prop::collection::vec(0..512u64, 0..60),
            sort in any::<bool>(),
        ) {
            let size: u64 = shape.iter().product();
            let linear: Vec<u64> = held.into_iter().filter(|&l| l < size)
                .collect::<BTreeSet<_>>().into_iter().collect();
            let mut lin: Vec<u64> = picks.into_iter().map(|p| p % size).collect();
            if sort {
                lin.sort_unstable();
            }
            let coords = coords_of(&shape, &lin);
            let req = PointsRequest::new(&shape, &coords);
            let got = req.split(&linear);
            prop_assert_eq!(&got, &reference(&shape, &linear, &coords));
            prop_assert_eq!(req.may_overlap(&linear) || got.0.is_empty(), true);
        }
    }
}
