//! Helpers the container's integration tests share.

use patio_container::Reader;
use std::path::Path;

/// The whole logical file, through a fresh reader that met no damage.
pub fn read_all(dir: &Path) -> Vec<u8> {
    let r = Reader::open(dir).unwrap();
    assert!(r.damage().is_empty(), "{:?}", r.damage());
    let mut buf = vec![0u8; r.size() as usize];
    assert_eq!(r.read_at(&mut buf, 0).unwrap(), buf.len());
    buf
}
