//! The saved model file of the online analyzer: the remembered bodies (the active one
//! first) with their request lengths and the recorded phase ends, as a versioned,
//! checksummed blob.

use super::phases::{phase_ends, with_phase_end};
use super::{Active, OnlineConfig, Pat, Predictor};
use crate::codec::{put_uvarint, read_blob, write_blob, Cursor, BLOB_HEADER};
use crate::error::Result;

/// The magic of a saved model (what tells it from other policies' models).
pub const MODEL_MAGIC: &[u8; 4] = b"PPRD";
pub(super) const MODEL_VERSION: u16 = 3;

impl Predictor {
    /// The remembered pattern bodies (the active one first) with their request
    /// lengths, and the recorded phase ends, as a versioned, checksummed blob, for
    /// [`Predictor::load`] at the next run.
    pub fn save(&self) -> Vec<u8> {
        let mut entries: Vec<Vec<u8>> = Vec::new();
        if let Some(Active::Run(r)) = &self.active {
            let mut e = Vec::new();
            put_uvarint(&mut e, r.len);
            r.pat.canonical().encode(&mut e);
            entries.push(e);
        }
        for e in self.entries() {
            if !entries.iter().any(|x| x == e) {
                entries.push(e.to_vec());
            }
        }
        let mut payload = Vec::new();
        put_uvarint(&mut payload, entries.len() as u64);
        entries.iter().for_each(|e| payload.extend_from_slice(e));
        // A run still going ended here, as far as this run knows.
        let ends = match &self.active {
            Some(Active::Run(r)) if r.phase() == 0 && r.end() != r.next => {
                with_phase_end(&self.ends, r.init, r.next)
            }
            _ => None,
        };
        let ends = ends.as_deref().unwrap_or(&self.ends);
        put_uvarint(&mut payload, ends.len() as u64);
        payload.extend_from_slice(ends);
        write_blob(MODEL_MAGIC, MODEL_VERSION, &payload)
    }

    /// A predictor that starts with the bodies and phase ends saved by
    /// [`Predictor::save`] (this version, version 2 without phase ends or version 1,
    /// which has no request lengths either).
    pub fn load(config: OnlineConfig, bytes: &[u8]) -> Result<Self> {
        let (version, payload) = read_blob(MODEL_MAGIC, MODEL_VERSION, bytes)?;
        let mut c = Cursor::with_base(payload, BLOB_HEADER);
        let n = c.count(c.remaining(), "pattern")?;
        let mut bodies = Vec::with_capacity(n.min(256));
        for _ in 0..n {
            let len = if version >= 2 { c.uvarint()? } else { 0 };
            bodies.push((len, Pat::decode(&mut c)?));
        }
        let mut ends = Vec::new();
        if version >= 3 {
            let n = c.count(c.remaining(), "phase end byte")?;
            let at = c.position();
            ends = phase_ends(Cursor::with_base(c.take(n)?, at))?;
        }
        if !c.is_at_end() {
            return Err(c.error("trailing bytes after the saved patterns"));
        }
        let mut p = Predictor::new(config);
        // Oldest first, so that the first saved body ends up most recent.
        for (len, body) in bodies.iter().take(p.limits.remembered as usize).rev() {
            p.remember(body, *len);
        }
        for (start, count) in ends {
            p.record_end(start, count);
        }
        Ok(p)
    }
}
