//! Registering an existing container for a source (`patio reorg register`): after the
//! pair was moved, or for a source seen through a mount (another device and inode),
//! nothing but the bytes says the container is a reorganized copy of the source. The
//! check here: the same logical size, and sampled 4 KiB blocks — the first, the last
//! and one at a hashed place in each of `samples` equal parts of the file (every block
//! when there are no more) — read from the source and through the container are
//! equal; the source must not change during the check.

use crate::error::{ReorgError, Result};
use crate::registry::{register, Registration};
use patio_container::Reader;
use patio_core::FileVersion;
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Bytes of one sampled block.
pub const BLOCK: u64 = 4096;

/// SplitMix64: a fixed spread of sample positions (the same for every run).
fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The blocks compared for a file of `size` bytes: `(offset, len)`, sorted, distinct;
/// the first and the last block always, and up to `samples` more.
pub fn sample_blocks(size: u64, samples: u64) -> Vec<(u64, u64)> {
    if size == 0 {
        return Vec::new();
    }
    let blocks = size.div_ceil(BLOCK);
    let mut picked: Vec<u64> = vec![0, blocks - 1];
    if samples >= blocks {
        picked.extend(0..blocks);
    } else {
        // One block in each of `samples` equal strata, at a hashed place in it.
        picked.extend((0..samples).map(|i| {
            let (lo, hi) = (
                (i as u128 * blocks as u128 / samples as u128) as u64,
                ((i + 1) as u128 * blocks as u128 / samples as u128) as u64,
            );
            lo + splitmix(i) % (hi - lo).max(1)
        }));
    }
    picked.sort_unstable();
    picked.dedup();
    picked
        .into_iter()
        .map(|b| (b * BLOCK, BLOCK.min(size - b * BLOCK)))
        .collect()
}

/// Where the source's bytes and the container's first differ among the sampled
/// blocks, or `None` when they agree.
pub fn compare(source: &Path, reader: &Reader, samples: u64) -> Result<Option<String>> {
    let file = std::fs::File::open(source).map_err(|e| ReorgError::io(source, e))?;
    let size = file
        .metadata()
        .map_err(|e| ReorgError::io(source, e))?
        .len();
    if reader.size() != size {
        return Ok(Some(format!(
            "it holds {} bytes, the file {size}",
            reader.size()
        )));
    }
    let mut a = vec![0u8; BLOCK as usize];
    let mut b = vec![0u8; BLOCK as usize];
    for (offset, len) in sample_blocks(size, samples) {
        let (a, b) = (&mut a[..len as usize], &mut b[..len as usize]);
        file.read_exact_at(a, offset)
            .map_err(|e| ReorgError::io(source, e))?;
        reader.read_extents(&[(offset, len)], b)?;
        if a != b {
            let at = offset
                + a.iter()
                    .zip(b.iter())
                    .position(|(x, y)| x != y)
                    .unwrap_or(0) as u64;
            return Ok(Some(format!("bytes differ at offset {at}")));
        }
    }
    Ok(None)
}

/// Registers `container` for `source` after checking it serves the source's bytes
/// (above) and is undamaged; records the source's version as it is now.
pub fn register_checked(source: &Path, container: &Path, samples: u64) -> Result<Registration> {
    let before = FileVersion::of(source).map_err(|e| ReorgError::io(source, e))?;
    let reader = Reader::open(container)?;
    let refuse = |what: String| ReorgError::NotACopy {
        path: source.to_path_buf(),
        container: container.to_path_buf(),
        what,
    };
    if let Some(d) = reader.damage().first() {
        return Err(refuse(format!("it is damaged: {d}")));
    }
    if let Some(what) = compare(source, &reader, samples)? {
        return Err(refuse(what));
    }
    let after = FileVersion::of(source).map_err(|e| ReorgError::io(source, e))?;
    if let Some(what) = after.difference(&before) {
        return Err(ReorgError::SourceChanged {
            path: source.to_path_buf(),
            what,
        });
    }
    register(source, container, &after)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::tests::{bytes, reorganized};

    #[test]
    fn samples_cover_the_first_and_last_block_and_stay_inside() {
        assert!(sample_blocks(0, 64).is_empty());
        assert_eq!(sample_blocks(10, 64), vec![(0, 10)]);
        let s = sample_blocks(1_000_000, 64);
        assert_eq!(s[0], (0, BLOCK));
        assert_eq!(*s.last().unwrap(), (999_424, 576));
        assert!(s.len() >= 64 && s.len() <= 66, "{}", s.len());
        assert_eq!(sample_blocks(40_000, 64).len(), 10);
        assert!(s.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0));
        assert_eq!(s, sample_blocks(1_000_000, 64));
    }

    #[test]
    fn a_container_of_other_bytes_is_refused_and_a_copy_registered() {
        let t = tempfile::tempdir().unwrap();
        let data = bytes(100_000, 11);
        let c = t.path().join("a.pc");
        let (source, _) = reorganized(t.path(), "a", &data, &c, 4000);
        crate::registry::unregister(&source).unwrap();
        // Another file of the same size, one byte different in the last block.
        let mut other = data.clone();
        other[99_999] ^= 1;
        let o = t.path().join("o");
        std::fs::write(&o, &other).unwrap();
        let e = register_checked(&o, &c, 64).unwrap_err();
        assert!(
            e.to_string().contains("bytes differ at offset 99999"),
            "{e}"
        );
        assert!(crate::registry::lookup(&o).unwrap().is_none());
        // Another size.
        std::fs::write(&o, &data[..5000]).unwrap();
        let e = register_checked(&o, &c, 64).unwrap_err();
        assert!(e.to_string().contains("holds 100000 bytes"), "{e}");
        // A copy under another name (another inode) is registered.
        std::fs::write(&o, &data).unwrap();
        let reg = register_checked(&o, &c, 64).unwrap();
        assert_eq!(reg.version, FileVersion::of(&o).unwrap());
        assert!(matches!(
            crate::registry::resolve(&o).unwrap(),
            crate::registry::Resolved::Served { .. }
        ));
    }
}
