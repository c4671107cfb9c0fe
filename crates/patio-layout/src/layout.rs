//! Where a stored array's bytes are: HDF5 contiguous storage at one address, or chunked
//! storage with one address per chunk of the chunk grid (row-major grid order) and,
//! for filtered (compressed, shuffled, checksummed) chunks, each chunk's *stored* size.
//!
//! A replica is described the same way: a transposed replica is a contiguous layout of
//! the permuted array, a re-chunked one (row, Morton or Hilbert allocation order) a
//! chunked layout whose addresses follow that order, a concatenated one the layout of
//! the small array it stores. Unfiltered chunks are row-major inside and full-size
//! (edge chunks padded), as HDF5 stores them; a filtered chunk is read whole and
//! decompressed whole, and so is an unfiltered chunk that fits the reader's chunk cache
//! (HDF5 brings such a chunk into its cache whole: 1 MiB by default).

use crate::error::{LayoutError, Result};

/// One stored array.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub shape: Vec<u64>,
    pub itemsize: u64,
    /// Chunk shape (for contiguous storage: the array's shape, sides at least 1).
    pub chunk: Vec<u64>,
    /// Byte address of each chunk in row-major grid order; `None` = not allocated
    /// (reads the fill value, no I/O).
    pub addresses: Vec<Option<u64>>,
    /// Stored bytes of each chunk when the chunks are filtered; `None` = unfiltered.
    pub stored: Option<Vec<u64>>,
    /// True for contiguous storage (one "chunk" the size of the array).
    pub contiguous: bool,
    /// The reader's chunk cache (bytes): an unfiltered chunk no larger than it is read
    /// whole into the cache, as HDF5 does (`H5D__chunk_cacheable`); a larger one is read
    /// in part. HDF5's and h5py's default is [`HDF5_CHUNK_CACHE_BYTES`].
    pub chunk_cache: u64,
}

/// HDF5's default raw-data chunk cache per dataset (`H5Pset_chunk_cache`'s `rdcc_nbytes`,
/// 1 MiB; h5py's default too).
pub const HDF5_CHUNK_CACHE_BYTES: u64 = 1 << 20;

impl Layout {
    /// Row-major storage at `base`.
    pub fn contiguous(shape: &[u64], itemsize: u64, base: u64) -> Result<Layout> {
        check_shape(shape, itemsize)?;
        Ok(Layout {
            shape: shape.to_vec(),
            itemsize,
            chunk: shape.iter().map(|&n| n.max(1)).collect(),
            addresses: vec![Some(base)],
            stored: None,
            contiguous: true,
            chunk_cache: HDF5_CHUNK_CACHE_BYTES,
        })
    }

    /// Chunked storage; `addresses` in row-major grid order (negative = unallocated),
    /// `stored` the stored sizes of filtered chunks.
    pub fn chunked(
        shape: &[u64],
        itemsize: u64,
        chunk: &[u64],
        addresses: &[i64],
        stored: Option<&[u64]>,
    ) -> Result<Layout> {
        check_shape(shape, itemsize)?;
        if chunk.len() != shape.len() || chunk.contains(&0) {
            return Err(LayoutError::Layout(format!(
                "chunk {chunk:?} must have {} positive sides",
                shape.len()
            )));
        }
        let cells = grid_of(shape, chunk)
            .iter()
            .try_fold(1u64, |a, &g| a.checked_mul(g))
            .ok_or_else(|| LayoutError::Layout("chunk grid too large".into()))?;
        if addresses.len() as u64 != cells {
            return Err(LayoutError::Layout(format!(
                "{} chunk addresses for a grid of {cells} chunks",
                addresses.len()
            )));
        }
        if let Some(s) = stored {
            if s.len() != addresses.len() {
                return Err(LayoutError::Layout(format!(
                    "{} stored sizes for {} chunks",
                    s.len(),
                    addresses.len()
                )));
            }
        }
        let chunk_bytes = chunk
            .iter()
            .try_fold(itemsize, |a, &c| a.checked_mul(c))
            .ok_or_else(|| LayoutError::Layout("chunk too large".into()))?;
        let mut addrs = Vec::with_capacity(addresses.len());
        for (i, &a) in addresses.iter().enumerate() {
            if a < 0 {
                addrs.push(None);
                continue;
            }
            let len = stored.map_or(chunk_bytes, |s| s[i]);
            if (a as u64).checked_add(len).is_none() {
                return Err(LayoutError::Layout(format!(
                    "chunk {i} at {a} of {len} bytes ends past 2^64"
                )));
            }
            addrs.push(Some(a as u64));
        }
        Ok(Layout {
            shape: shape.to_vec(),
            itemsize,
            chunk: chunk.to_vec(),
            addresses: addrs,
            stored: stored.map(<[u64]>::to_vec),
            contiguous: false,
            chunk_cache: HDF5_CHUNK_CACHE_BYTES,
        })
    }

    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Chunks per dimension (edge chunks included).
    pub fn grid(&self) -> Vec<u64> {
        grid_of(&self.shape, &self.chunk)
    }

    /// Bytes of one unfiltered (or decompressed) chunk.
    pub fn chunk_bytes(&self) -> u64 {
        self.chunk.iter().product::<u64>() * self.itemsize
    }

    /// True when chunks are filtered (read and decompressed whole).
    pub fn filtered(&self) -> bool {
        self.stored.is_some()
    }

    /// True when a read brings every chunk it touches in whole: filtered chunks, and
    /// unfiltered ones that fit the reader's chunk cache.
    pub fn whole_chunks(&self) -> bool {
        !self.contiguous && (self.filtered() || self.chunk_bytes() <= self.chunk_cache)
    }

    /// The same layout read with a chunk cache of `bytes` (0: unfiltered chunks are
    /// always read in part).
    pub fn with_chunk_cache(mut self, bytes: u64) -> Layout {
        self.chunk_cache = bytes;
        self
    }

    /// Bytes the data occupies (stored sizes for filtered chunks).
    pub fn stored_bytes(&self) -> u64 {
        if self.contiguous {
            return self.shape.iter().product::<u64>() * self.itemsize;
        }
        let n = self.addresses.iter().filter(|a| a.is_some()).count() as u64;
        match &self.stored {
            None => n * self.chunk_bytes(),
            Some(s) => self
                .addresses
                .iter()
                .zip(s)
                .filter(|(a, _)| a.is_some())
                .map(|(_, &b)| b)
                .sum(),
        }
    }
}

fn grid_of(shape: &[u64], chunk: &[u64]) -> Vec<u64> {
    shape
        .iter()
        .zip(chunk)
        .map(|(&n, &c)| n.div_ceil(c))
        .collect()
}

fn check_shape(shape: &[u64], itemsize: u64) -> Result<()> {
    if itemsize == 0 {
        return Err(LayoutError::Layout("itemsize must be at least 1".into()));
    }
    shape
        .iter()
        .try_fold(itemsize, |a, &n| a.checked_mul(n.max(1)))
        .map(|_| ())
        .ok_or_else(|| LayoutError::Layout(format!("array {shape:?} too large")))
}

/// Row-major strides of `dims` (in elements of the last dimension).
pub(crate) fn row_major_strides(dims: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; dims.len()];
    for j in (0..dims.len().saturating_sub(1)).rev() {
        s[j] = s[j + 1] * dims[j + 1];
    }
    s
}
