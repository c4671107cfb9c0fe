//! Selections of an n-dimensional array as HDF5 and h5py hand them over, in the one
//! shape the flattening code works on.
//!
//! * A **grid** is a Cartesian product of per-axis block lists: along axis `j` the
//!   sorted, disjoint blocks `(start, len)`. One HDF5 regular hyperslab
//!   (start/stride/count/block) is a grid whose axis lists are regular; a product of
//!   per-axis index sets (h5py fancy indexing, a sub-product of a concatenated replica)
//!   is a grid whose lists are the runs of each set. Elements are ordered row-major.
//! * A selection is a union of grids in buffer order (HDF5's irregular hyperslab unions
//!   arrive as one box per block), or a point list.
//!
//! Nothing here enumerates elements: a grid of `g` blocks costs `O(g)` to hold.

use crate::error::{LayoutError, Result};

/// Sorted, disjoint blocks `(start, len)` along one axis (`len > 0`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Axis {
    pub blocks: Vec<(u64, u64)>,
}

impl Axis {
    /// `count` blocks of `block` elements, the first at `start`, `stride` apart,
    /// written with dense runs joined (stride == block is one block).
    pub fn regular(start: u64, stride: u64, count: u64, block: u64) -> Result<Axis> {
        if count == 0 || block == 0 {
            return Ok(Axis { blocks: Vec::new() });
        }
        if count > 1 && stride < block {
            return Err(LayoutError::Selection(format!(
                "stride {stride} below block {block} (blocks overlap)"
            )));
        }
        if count == 1 || stride == block {
            let len = count.checked_mul(block).ok_or_else(too_large)?;
            return Ok(Axis {
                blocks: vec![(start, len)],
            });
        }
        let mut blocks = Vec::with_capacity(count as usize);
        for i in 0..count {
            let s = i
                .checked_mul(stride)
                .and_then(|d| d.checked_add(start))
                .ok_or_else(too_large)?;
            blocks.push((s, block));
        }
        Ok(Axis { blocks })
    }

    /// The runs of consecutive values of a sorted, duplicate-free index list.
    pub fn from_sorted_indices(values: &[u64]) -> Result<Axis> {
        let mut blocks: Vec<(u64, u64)> = Vec::new();
        for (i, &v) in values.iter().enumerate() {
            match blocks.last_mut() {
                Some((s, n)) if *s + *n == v => *n += 1,
                Some((s, n)) if *s + *n > v => {
                    return Err(LayoutError::Selection(format!(
                        "index {v} at position {i} is not above the one before it"
                    )))
                }
                _ => blocks.push((v, 1)),
            }
        }
        Ok(Axis { blocks })
    }

    /// Selected elements along the axis.
    pub fn len(&self) -> u64 {
        self.blocks.iter().map(|b| b.1).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// One past the last selected index (0 when empty).
    pub fn end(&self) -> u64 {
        self.blocks.last().map_or(0, |&(s, n)| s + n)
    }

    /// First selected index (0 when empty).
    pub fn first(&self) -> u64 {
        self.blocks.first().map_or(0, |b| b.0)
    }
}

fn too_large() -> LayoutError {
    LayoutError::Selection("a coordinate does not fit in 64 bits".into())
}

/// A Cartesian product of per-axis block lists.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Grid {
    pub axes: Vec<Axis>,
}

impl Grid {
    /// One HDF5 regular hyperslab (each slice of length `rank`).
    pub fn hyperslab(start: &[u64], stride: &[u64], count: &[u64], block: &[u64]) -> Result<Grid> {
        let d = start.len();
        if stride.len() != d || count.len() != d || block.len() != d {
            return Err(LayoutError::Selection(
                "start, stride, count and block differ in length".into(),
            ));
        }
        let axes = (0..d)
            .map(|j| Axis::regular(start[j], stride[j].max(1), count[j], block[j]))
            .collect::<Result<Vec<_>>>()?;
        Ok(Grid { axes })
    }

    /// The box `[lo, hi)`.
    pub fn boxed(lo: &[u64], hi: &[u64]) -> Result<Grid> {
        let axes = lo
            .iter()
            .zip(hi)
            .map(|(&l, &h)| {
                Ok(Axis {
                    blocks: if h > l { vec![(l, h - l)] } else { Vec::new() },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Grid { axes })
    }

    pub fn rank(&self) -> usize {
        self.axes.len()
    }

    /// Selected elements (saturating: a count that large is never enumerated).
    pub fn nelements(&self) -> u64 {
        self.axes
            .iter()
            .fold(1u64, |acc, a| acc.saturating_mul(a.len()))
    }

    pub fn is_empty(&self) -> bool {
        self.axes.iter().any(|a| a.is_empty())
    }

    /// Blocks held (the size of the description).
    pub fn nblocks(&self) -> usize {
        self.axes.iter().map(|a| a.blocks.len()).sum()
    }
}

/// What is selected: grids in buffer order, or points (row `i` of `coords` is point
/// `i`, `rank` coordinates each).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Selection {
    Grids(Vec<Grid>),
    Points { rank: usize, coords: Vec<u64> },
}

impl Selection {
    pub fn grid(g: Grid) -> Selection {
        Selection::Grids(vec![g])
    }

    /// Selected elements.
    pub fn nelements(&self) -> u64 {
        match self {
            Selection::Grids(gs) => gs
                .iter()
                .fold(0u64, |acc, g| acc.saturating_add(g.nelements())),
            Selection::Points { rank, coords } => {
                if *rank == 0 {
                    coords.len() as u64
                } else {
                    (coords.len() / rank) as u64
                }
            }
        }
    }

    /// Blocks (grids) or points held: what a decision's cost is proportional to.
    pub fn nblocks(&self) -> usize {
        match self {
            Selection::Grids(gs) => gs.iter().map(Grid::nblocks).sum(),
            Selection::Points { .. } => self.nelements() as usize,
        }
    }

    /// Checks that every grid or point lies inside an array of `shape`.
    pub fn check(&self, shape: &[u64]) -> Result<()> {
        let d = shape.len();
        match self {
            Selection::Grids(gs) => {
                for (i, g) in gs.iter().enumerate() {
                    if g.rank() != d {
                        return Err(LayoutError::Selection(format!(
                            "block {i} has rank {} in an array of rank {d}",
                            g.rank()
                        )));
                    }
                    if g.is_empty() {
                        continue;
                    }
                    for (j, a) in g.axes.iter().enumerate() {
                        let mut prev_end = 0u64;
                        for (k, &(s, n)) in a.blocks.iter().enumerate() {
                            let end = s.checked_add(n).ok_or_else(too_large)?;
                            if n == 0 || (k > 0 && s < prev_end) || end > shape[j] {
                                return Err(LayoutError::Selection(format!(
                                    "block {i} axis {j}: [{s}, {end}) is not sorted, \
                                     disjoint and inside 0..{}",
                                    shape[j]
                                )));
                            }
                            prev_end = end;
                        }
                    }
                }
                Ok(())
            }
            Selection::Points { rank, coords } => {
                if *rank != d || (d > 0 && coords.len() % d != 0) {
                    return Err(LayoutError::Selection(format!(
                        "points of rank {rank} in an array of rank {d}"
                    )));
                }
                for (i, p) in coords.chunks(d.max(1)).enumerate() {
                    if d > 0 && p.iter().zip(shape).any(|(&c, &n)| c >= n) {
                        return Err(LayoutError::Selection(format!(
                            "point {i} {p:?} lies outside the array {shape:?}"
                        )));
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_axes_join_dense_runs() {
        assert_eq!(Axis::regular(2, 3, 4, 3).unwrap().blocks, vec![(2, 12)]);
        assert_eq!(
            Axis::regular(0, 4, 3, 2).unwrap().blocks,
            vec![(0, 2), (4, 2), (8, 2)]
        );
        assert!(Axis::regular(0, 1, 3, 2).is_err());
    }

    #[test]
    fn index_runs() {
        let a = Axis::from_sorted_indices(&[1, 2, 3, 7, 9, 10]).unwrap();
        assert_eq!(a.blocks, vec![(1, 3), (7, 1), (9, 2)]);
        assert!(Axis::from_sorted_indices(&[3, 2]).is_err());
        assert!(Axis::from_sorted_indices(&[3, 3]).is_err());
    }

    #[test]
    fn checks_bounds_and_rank() {
        let g = Grid::boxed(&[0, 0], &[2, 5]).unwrap();
        assert!(Selection::grid(g.clone()).check(&[2, 5]).is_ok());
        assert!(Selection::grid(g.clone()).check(&[2, 4]).is_err());
        assert!(Selection::grid(g).check(&[2, 5, 1]).is_err());
        let p = Selection::Points {
            rank: 2,
            coords: vec![1, 4, 2, 0],
        };
        assert!(p.check(&[2, 5]).is_err());
        assert!(p.check(&[3, 5]).is_ok());
    }
}
