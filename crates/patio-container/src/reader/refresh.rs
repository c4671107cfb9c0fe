//! Bringing a reader up to date without merging every writer's records again: a
//! refresh from the backend whose new records and truncations are all newer than
//! what the reader holds ([`Reader::extend`]), and records and truncations the
//! caller's own writers appended, taken in without reading anything
//! ([`Reader::with_appended`]). Both lay the new changes over the shared merged index
//! (crate::delta) in key order.

use super::{first_offset, ContainerStats, Reader, WriterLog};
use crate::delta::Delta;
use crate::layout::{self, Damage};
use crate::record::{self, IndexEntry};
use std::sync::Arc;

impl Reader {
    /// `prev` refreshed incrementally ([`Reader::extended`]) when nothing but newer
    /// records and truncations were appended since it was built: the same logs (the
    /// same files, read cleanly), `prev`'s truncations followed by new ones, and
    /// every new key after `prev`'s newest. `None` otherwise; `writers` (in listing
    /// order) is then left for a full build.
    pub(super) fn extend(
        prev: &Reader,
        writers: &mut Vec<WriterLog>,
        damage: &[Damage],
        truncations: &(Vec<layout::Truncation>, Vec<Damage>),
    ) -> Option<Self> {
        let (ts, t_damage) = truncations;
        if !damage.is_empty()
            || !t_damage.is_empty()
            || writers.len() != prev.writers.len()
            || ts.len() < prev.truncations.len()
            || ts[..prev.truncations.len()] != prev.truncations[..]
            || ts[prev.truncations.len()..]
                .iter()
                .any(|t| t.key <= prev.newest_key)
        {
            return None;
        }
        let same = |new: &WriterLog, old: &WriterLog| {
            new.clean
                && new.file.is_some()
                && new.file == old.file
                && new.records.len() >= old.records.len()
                && first_offset(new) == first_offset(old)
                && new.records[old.records.len()..]
                    .iter()
                    .all(|r| r.key > prev.newest_key)
        };
        let mut by_name: std::collections::HashMap<&str, usize> = writers
            .iter()
            .enumerate()
            .map(|(i, w)| (w.name.as_str(), i))
            .collect();
        let mut order = Vec::with_capacity(writers.len());
        for old in &prev.writers {
            let i = by_name.remove(old.name.as_str())?;
            if !same(&writers[i], old) {
                return None;
            }
            order.push(i);
        }
        let mut taken: Vec<Option<WriterLog>> =
            std::mem::take(writers).into_iter().map(Some).collect();
        let ordered: Vec<WriterLog> = order
            .iter()
            .map(|&i| taken[i].take().expect("each once"))
            .collect();
        match Self::extended(prev, ordered, ts.clone()) {
            Ok(r) => Some(r),
            Err(ordered) => {
                *writers = ordered;
                None
            }
        }
    }

    /// This reader with `records` (appended by writers of this process since it was
    /// built, in order, [`crate::Writer::take_appended`]) and `truncations` (appended
    /// since, in key order) taken in without reading anything: applied over the
    /// merged index as a refresh would. `None` when they cannot be — a record of a log
    /// the reader does not know or did not read to its end, a key not newer than
    /// everything the reader holds, too many changes — and the caller refreshes.
    /// Changes others made since the reader was built stay unseen until a refresh.
    pub fn with_appended(
        &self,
        records: &[crate::writer::Appended],
        truncations: &[layout::Truncation],
    ) -> Option<Self> {
        let mut writers = self.writers.clone();
        for a in records {
            let w = writers.iter_mut().find(|w| w.name == a.writer)?;
            let frame = a.payload.len() as u64 + 8;
            if !w.clean || w.disk_bytes + frame != a.end {
                return None;
            }
            let path = layout::index_path(&self.dir, &w.name);
            let r = record::decode(&path, (w.disk_bytes + 8) as usize, &a.payload).ok()?;
            if r.key <= self.newest_key {
                return None;
            }
            w.records.push(Arc::new(r));
            w.disk_bytes = a.end;
        }
        if truncations.windows(2).any(|p| p[0].key > p[1].key)
            || truncations.iter().any(|t| t.key <= self.newest_key)
        {
            return None;
        }
        let mut all = self.truncations.clone();
        all.extend_from_slice(truncations);
        Self::extended(self, writers, all).ok()
    }

    /// The reader `prev` with `writers` (the same logs in the same chunk order, each
    /// grown by records keyed after everything `prev` applied) and `truncations`
    /// (`prev`'s followed by newer ones): the new records and truncations applied to
    /// its delta in key order, the merged index and data logs shared. The writers
    /// back when the delta would grow past its limit (the caller builds anew).
    fn extended(
        prev: &Reader,
        writers: Vec<WriterLog>,
        truncations: Vec<layout::Truncation>,
    ) -> std::result::Result<Self, Vec<WriterLog>> {
        // New writes as (key, chunk, position, entry), then truncations by key.
        let new_records = || {
            writers
                .iter()
                .zip(&prev.writers)
                .enumerate()
                .flat_map(|(chunk, (w, old))| {
                    w.records[old.records.len()..]
                        .iter()
                        .map(move |r| (chunk, r))
                })
        };
        let entries: u64 = new_records().map(|(_, r)| r.columns.len()).sum();
        if prev.delta.len() as u64 + entries > Delta::LIMIT as u64 {
            return Err(writers);
        }
        let mut writes: Vec<(u64, usize, u64, IndexEntry)> = Vec::with_capacity(entries as usize);
        for (chunk, r) in new_records() {
            for i in 0..r.columns.len() {
                writes.push((r.key, chunk, i, r.columns.get(i)));
            }
        }
        writes.sort_unstable_by_key(|&(key, chunk, i, _)| (key, chunk, i));
        let new_truncations = &truncations[prev.truncations.len()..];
        let mut delta = prev.delta.clone();
        let mut cuts = new_truncations.iter().peekable();
        let mut newest_key = prev.newest_key;
        for (key, chunk, _, e) in writes {
            while let Some(t) = cuts.next_if(|t| t.key < key) {
                delta.truncate(t.size);
            }
            delta.write(e.logical, e.length, chunk as u64, e.physical);
            newest_key = newest_key.max(key);
        }
        for t in cuts {
            delta.truncate(t.size);
        }
        if let Some(t) = new_truncations.last() {
            newest_key = newest_key.max(t.key);
        }
        // The merged index's counts are of the reader built whole.
        let stats = ContainerStats {
            index: prev.stats.index.clone(),
            ..ContainerStats::of_logs(prev.mode, delta.size(), &writers)
        };
        Ok(Reader {
            dir: prev.dir.clone(),
            mode: prev.mode,
            writers,
            data: prev.data.clone(),
            index: prev.index.clone(),
            delta,
            truncations,
            newest_key,
            merged_anew: false,
            stats,
            damage: Vec::new(),
        })
    }
}
