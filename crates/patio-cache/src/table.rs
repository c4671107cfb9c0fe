//! The persisted segment table of the segment-grouping cache (`table.bin` in the cache
//! directory; format in docs/FORMATS.md): which slot of the segment store holds which
//! items, with a CRC32C per item, and the identity of every source file they came
//! from. Written crash-safely (temporary file, fsync, rename, fsync of the directory)
//! with a generation number one higher each time; a torn or corrupt table is
//! reported as [`TableError::Damaged`] and the cache starts cold.

use crate::graph::Item;
use patio_core::codec::{put_uvarint, read_blob, write_blob, Cursor};
use std::fs;
use std::io::{self, Write};
use std::path::Path;

pub const TABLE_FILE: &str = "table.bin";
pub const MAGIC: &[u8; 4] = b"PSGT";
pub const VERSION: u16 = 2;

/// A source file as it was when its items were cached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileRec {
    /// Path inside the source directory.
    pub path: String,
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

/// One item stored in a slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub item: Item,
    /// Offset of its bytes inside the slot, and their length.
    pub offset: u32,
    pub len: u32,
    /// CRC32C of its bytes.
    pub crc: u32,
}

/// The items of one slot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentRec {
    pub slot: u32,
    /// A plain slot (items appended as they were missed, read one at a time) rather
    /// than a group's segment (read whole).
    pub plain: bool,
    pub entries: Vec<Entry>,
}

/// The whole table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    pub generation: u64,
    pub slot_size: u64,
    pub slots: u32,
    pub item_size: u64,
    /// 1 = lru (one item per slot), 2 = group.
    pub policy: u8,
    pub files: Vec<FileRec>,
    pub segments: Vec<SegmentRec>,
    /// The counters of the run that saved the table, by name.
    pub counters: Vec<(String, u64)>,
}

/// Why a saved table cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("written by a newer patio (segment table format {0}, this build reads {VERSION})")]
    Newer(u16),
    #[error("damaged segment table: {0}")]
    Damaged(String),
    #[error("{0}")]
    Io(#[from] io::Error),
}

impl Table {
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
        p.extend_from_slice(&self.generation.to_le_bytes());
        p.extend_from_slice(&self.slot_size.to_le_bytes());
        p.extend_from_slice(&self.slots.to_le_bytes());
        p.extend_from_slice(&self.item_size.to_le_bytes());
        p.push(self.policy);
        put_uvarint(&mut p, self.files.len() as u64);
        for f in &self.files {
            put_uvarint(&mut p, f.path.len() as u64);
            p.extend_from_slice(f.path.as_bytes());
            for v in [f.dev, f.ino, f.size] {
                p.extend_from_slice(&v.to_le_bytes());
            }
            p.extend_from_slice(&f.mtime_ns.to_le_bytes());
            p.extend_from_slice(&f.ctime_ns.to_le_bytes());
        }
        put_uvarint(&mut p, self.segments.len() as u64);
        for s in &self.segments {
            p.extend_from_slice(&s.slot.to_le_bytes());
            p.push(s.plain as u8);
            put_uvarint(&mut p, s.entries.len() as u64);
            for e in &s.entries {
                put_uvarint(&mut p, e.item.file as u64);
                put_uvarint(&mut p, e.item.index);
                put_uvarint(&mut p, e.offset as u64);
                put_uvarint(&mut p, e.len as u64);
                p.extend_from_slice(&e.crc.to_le_bytes());
            }
        }
        put_uvarint(&mut p, self.counters.len() as u64);
        for (name, v) in &self.counters {
            put_uvarint(&mut p, name.len() as u64);
            p.extend_from_slice(name.as_bytes());
            p.extend_from_slice(&v.to_le_bytes());
        }
        write_blob(MAGIC, VERSION, &p)
    }

    pub fn decode(bytes: &[u8]) -> Result<Table, TableError> {
        if bytes.len() >= 6 && &bytes[..4] == MAGIC {
            let v = u16::from_le_bytes([bytes[4], bytes[5]]);
            if v > VERSION {
                return Err(TableError::Newer(v));
            }
        }
        let bad = |e: patio_core::CoreError| TableError::Damaged(e.to_string());
        let (version, payload) = read_blob(MAGIC, VERSION, bytes).map_err(bad)?;
        let mut c = Cursor::new(payload);
        let mut t = Table {
            generation: c.u64_le().map_err(bad)?,
            slot_size: c.u64_le().map_err(bad)?,
            slots: c.u32_le().map_err(bad)?,
            item_size: c.u64_le().map_err(bad)?,
            policy: c.u8().map_err(bad)?,
            files: Vec::new(),
            segments: Vec::new(),
            counters: Vec::new(),
        };
        let nfiles = c.count(c.remaining(), "files").map_err(bad)?;
        for _ in 0..nfiles {
            let len = c.count(c.remaining(), "path bytes").map_err(bad)?;
            let path = String::from_utf8(c.take(len).map_err(bad)?.to_vec())
                .map_err(|_| TableError::Damaged("a path is not UTF-8".into()))?;
            t.files.push(FileRec {
                path,
                dev: c.u64_le().map_err(bad)?,
                ino: c.u64_le().map_err(bad)?,
                size: c.u64_le().map_err(bad)?,
                mtime_ns: c.u64_le().map_err(bad)? as i64,
                ctime_ns: c.u64_le().map_err(bad)? as i64,
            });
        }
        let nseg = c.count(c.remaining(), "segments").map_err(bad)?;
        for _ in 0..nseg {
            let slot = c.u32_le().map_err(bad)?;
            // Version 1 had no kind: `lru` slots are plain, `group` slots segments.
            let plain = if version >= 2 {
                match c.u8().map_err(bad)? {
                    0 => false,
                    1 => true,
                    k => return Err(TableError::Damaged(format!("slot kind {k}"))),
                }
            } else {
                t.policy == 1
            };
            let n = c.count(c.remaining(), "entries").map_err(bad)?;
            let mut entries = Vec::with_capacity(n);
            for _ in 0..n {
                let file = c.uvarint().map_err(bad)?;
                let index = c.uvarint().map_err(bad)?;
                let offset = c.uvarint().map_err(bad)?;
                let len = c.uvarint().map_err(bad)?;
                let crc = c.u32_le().map_err(bad)?;
                if file >= t.files.len() as u64 || offset + len > t.slot_size {
                    return Err(TableError::Damaged(
                        "an entry lies outside its slot or names no file".into(),
                    ));
                }
                entries.push(Entry {
                    item: Item {
                        file: file as u32,
                        index,
                    },
                    offset: offset as u32,
                    len: len as u32,
                    crc,
                });
            }
            if slot >= t.slots {
                return Err(TableError::Damaged(format!(
                    "slot {slot} of {} slots",
                    t.slots
                )));
            }
            t.segments.push(SegmentRec {
                slot,
                plain,
                entries,
            });
        }
        let n = c.count(c.remaining(), "counters").map_err(bad)?;
        for _ in 0..n {
            let len = c.count(c.remaining(), "name bytes").map_err(bad)?;
            let name = String::from_utf8(c.take(len).map_err(bad)?.to_vec())
                .map_err(|_| TableError::Damaged("a counter name is not UTF-8".into()))?;
            t.counters.push((name, c.u64_le().map_err(bad)?));
        }
        if !c.is_at_end() {
            return Err(TableError::Damaged("trailing bytes".into()));
        }
        Ok(t)
    }

    /// The table saved in `dir`, `None` if there is none.
    pub fn load(dir: &Path) -> Result<Option<Table>, TableError> {
        match fs::read(dir.join(TABLE_FILE)) {
            Ok(bytes) => Table::decode(&bytes).map(Some),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Replaces the table in `dir` atomically: a temporary file, fsync, rename, fsync
    /// of the directory.
    pub fn save(&self, dir: &Path) -> io::Result<()> {
        let tmp = dir.join(format!("{TABLE_FILE}.tmp"));
        let mut f = fs::File::create(&tmp)?;
        f.write_all(&self.encode())?;
        f.sync_all()?;
        drop(f);
        fs::rename(&tmp, dir.join(TABLE_FILE))?;
        fs::File::open(dir)?.sync_all()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Table {
        Table {
            generation: 7,
            slot_size: 1 << 20,
            slots: 4,
            item_size: 65536,
            policy: 2,
            files: vec![FileRec {
                path: "a/b.dat".into(),
                dev: 1,
                ino: 2,
                size: 3,
                mtime_ns: -4,
                ctime_ns: 5,
            }],
            segments: vec![SegmentRec {
                slot: 3,
                plain: true,
                entries: vec![Entry {
                    item: Item { file: 0, index: 9 },
                    offset: 4096,
                    len: 100,
                    crc: 0xdead_beef,
                }],
            }],
            counters: vec![("group_hits".into(), 12)],
        }
    }

    #[test]
    fn round_trip_and_every_damage_is_detected() {
        let t = sample();
        let bytes = t.encode();
        assert_eq!(Table::decode(&bytes).unwrap(), t);
        for cut in 0..bytes.len() {
            assert!(Table::decode(&bytes[..cut]).is_err(), "torn at {cut}");
        }
        for at in 0..bytes.len() {
            let mut b = bytes.clone();
            b[at] ^= 0x10;
            assert!(Table::decode(&b).is_err(), "flip at {at}");
        }
        let mut newer = bytes.clone();
        newer[4] = 9;
        assert!(matches!(Table::decode(&newer), Err(TableError::Newer(9))));
    }

    #[test]
    fn save_replaces_and_load_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        assert!(Table::load(dir.path()).unwrap().is_none());
        let mut t = sample();
        t.save(dir.path()).unwrap();
        t.generation += 1;
        t.save(dir.path()).unwrap();
        assert_eq!(Table::load(dir.path()).unwrap().unwrap(), t);
        assert!(!dir.path().join("table.bin.tmp").exists());
    }
}
