//! The store-facing fill paths of the segment-grouping cache: reading a slot (a
//! group's whole segment or one plain item), building a group's segment from members
//! held in memory, in other slots or, for the rest, in SOURCE, appending missed items
//! to the open plain slot, bringing a strided stream's next periods ahead, and
//! writing a fresh slot.

use crate::core::{lock, Cache, Policy};
use crate::graph::Item;
use crate::stride::{near_periods, periods};
use crate::table::Entry;
use patio_prefetch::DataFile;
use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::Arc;

impl Cache {
    /// Reads `slot` and puts its valid items in memory; the bytes of `want`, or
    /// `None` if its checksum (or the epoch of its file) no longer matches.
    pub(crate) fn read_slot(
        &self,
        slot: u32,
        entries: &[Entry],
        grouped: bool,
        want: Item,
        epoch: u64,
    ) -> io::Result<Option<Arc<Vec<u8>>>> {
        let store = self.store.as_ref().expect("a store");
        let from = entries.iter().map(|e| e.offset as u64).min().unwrap_or(0);
        let to = entries
            .iter()
            .map(|e| e.offset as u64 + e.len as u64)
            .max()
            .unwrap_or(0);
        let bytes = store.read_at(slot, from, (to - from) as usize)?;
        let mut st = lock(&self.state);
        st.stats.segment_reads += 1;
        st.stats.segment_read_bytes += to - from;
        let mut out = None;
        for e in entries {
            let at = (e.offset as u64 - from) as usize;
            let body = &bytes[at..at + e.len as usize];
            if patio_core::codec::crc32c(body) != e.crc {
                st.stats.checksum_misses += 1;
                if st.disk.get(&e.item).map(|(s, _)| *s) == Some(slot) {
                    st.disk.remove(&e.item);
                    st.dirty = true;
                }
                continue;
            }
            let data = Arc::new(body.to_vec());
            let fe = st.files[e.item.file as usize].epoch;
            let e_epoch = if e.item.file == want.file { epoch } else { fe };
            if e.item == want {
                out = Some(data.clone());
            }
            // The item wanted is a demand item; the rest of a segment comes ahead.
            st.mem_put(e.item, data, grouped && e.item != want, e_epoch);
        }
        if out.is_some() {
            st.stats.accesses += 1;
            st.stats.group_hits += grouped as u64;
            st.stats.plain_hits += !grouped as u64;
        }
        Ok(out)
    }

    /// Builds the segment of `group`: members memory holds are taken from there,
    /// members another slot holds are read from the store (checksum checked), the
    /// rest — if their file is open — from SOURCE (contiguous ones in one request, in
    /// file order); writes the group as one segment in group order and puts it in
    /// memory. Returns the bytes of the item wanted (with its file and that file's
    /// epoch), if a read missed it.
    pub(crate) fn fill_group(
        &self,
        want: Option<(Item, Arc<DataFile>, u64)>,
        group: &[Item],
    ) -> io::Result<Option<Arc<Vec<u8>>>> {
        let b = self.cfg.item;
        let mut sources: HashMap<u32, (Arc<DataFile>, u64)> = HashMap::new();
        let mut got: HashMap<Item, Arc<Vec<u8>>> = HashMap::new();
        let mut stored: Vec<(u32, Entry)> = Vec::new();
        {
            let st = lock(&self.state);
            for i in group {
                let f = &st.files[i.file as usize];
                if let Some(d) = f.data.clone() {
                    sources.insert(i.file, (d, f.epoch));
                }
            }
            if let Some((item, data, epoch)) = &want {
                sources.insert(item.file, (data.clone(), *epoch));
            }
            for i in group {
                if let Some(d) = st.mem_peek(*i) {
                    got.insert(*i, d);
                } else if let Some(&(slot, e)) = st.disk.get(i) {
                    if sources.contains_key(&i.file) {
                        stored.push((slot, e));
                    }
                }
            }
        }
        let local = self.reuse_stored(&stored, &mut got)?;
        let mut sorted: Vec<Item> = group
            .iter()
            .filter(|i| sources.contains_key(&i.file) && !got.contains_key(i))
            .copied()
            .collect();
        sorted.sort();
        let (mut requests, mut read) = (0u64, 0u64);
        let mut k = 0;
        while k < sorted.len() {
            let mut e = k;
            while e + 1 < sorted.len()
                && sorted[e + 1].file == sorted[k].file
                && sorted[e + 1].index == sorted[e].index + 1
            {
                e += 1;
            }
            let data = &sources[&sorted[k].file].0;
            let bytes = data.read(sorted[k].index * b, (e - k + 1) as u64 * b)?;
            requests += 1;
            read += bytes.len() as u64;
            for (n, c) in bytes.chunks(b as usize).enumerate() {
                got.insert(sorted[k + n], Arc::new(c.to_vec()));
            }
            k = e + 1;
        }
        let items: Vec<(Item, Arc<Vec<u8>>, u64)> = group
            .iter()
            .filter_map(|i| got.get(i).map(|d| (*i, d.clone(), sources[&i.file].1)))
            .filter(|(_, d, _)| !d.is_empty())
            .collect();
        let wanted = want.as_ref().and_then(|(i, _, _)| got.get(i).cloned());
        {
            let mut st = lock(&self.state);
            st.stats.source_requests += requests;
            st.stats.source_bytes += read;
            let demand = wanted.as_ref().map_or(0, |d| d.len() as u64);
            let extra = read.saturating_sub(demand);
            st.stats.grouping_source_bytes += extra;
            st.stats.grouping_local_bytes += local;
            st.stats.grouping_io_bytes += extra + local;
            if want.is_some() {
                st.stats.accesses += 1;
                st.stats.misses += 1;
            }
            let wanted_item = want.as_ref().map(|w| w.0);
            for (i, d, ep) in &items {
                st.mem_put(*i, d.clone(), Some(*i) != wanted_item, *ep);
            }
        }
        if !self.write_slot(&items, true)? {
            // No slot may take the segment: the item asked for is kept like a miss.
            if let (Some((item, _, epoch)), Some(d)) = (&want, &wanted) {
                if !d.is_empty() {
                    self.append_plain(&[(*item, d.clone(), *epoch)])?;
                }
            }
        }
        Ok(wanted)
    }

    /// Reads the `stored` entries (slot, entry) from the store into `got`, one read
    /// per slot spanning its entries; entries whose checksum no longer matches are
    /// left out (read from SOURCE instead). Returns the bytes read.
    fn reuse_stored(
        &self,
        stored: &[(u32, Entry)],
        got: &mut HashMap<Item, Arc<Vec<u8>>>,
    ) -> io::Result<u64> {
        let Some(store) = self.store.as_ref() else {
            return Ok(0);
        };
        let mut by_slot: BTreeMap<u32, Vec<Entry>> = BTreeMap::new();
        for (slot, e) in stored {
            by_slot.entry(*slot).or_default().push(*e);
        }
        let mut total = 0u64;
        for (slot, entries) in by_slot {
            for e in &entries {
                // One entry at a time: a plain slot's neighbours are rarely members.
                let bytes = store.read_at(slot, e.offset as u64, e.len as usize)?;
                total += bytes.len() as u64;
                if patio_core::codec::crc32c(&bytes) == e.crc {
                    got.insert(e.item, Arc::new(bytes));
                }
            }
        }
        let mut st = lock(&self.state);
        st.stats.segment_reads += stored.len() as u64;
        st.stats.segment_read_bytes += total;
        Ok(total)
    }

    /// Caller `pid` read items `span` of `file` (of `size` bytes, checked at
    /// `epoch`): if its stream is strided with periods near one another
    /// ([`near_periods`]) and its next period is not held, the next periods nobody
    /// holds are read from SOURCE (contiguous ones in one request, in
    /// file order) — while the file's groups pay and grouping I/O stays within its
    /// cap — and put in memory ahead of demand (the store gets them when used).
    pub(crate) fn stride_ahead(
        &self,
        pid: u32,
        file: u32,
        span: (u64, u64),
        size: u64,
        epoch: u64,
        data: &Arc<DataFile>,
    ) -> io::Result<()> {
        let b = self.cfg.item;
        let want: Vec<u64> = {
            let mut st = lock(&self.state);
            let Some(stride) = st.strides.observe(pid, file, span.0) else {
                return Ok(());
            };
            if !near_periods(span.0, span.1, stride, b) {
                return Ok(());
            }
            let items = size.div_ceil(b);
            let it = |index| Item { file, index };
            let next = periods(span.0, span.1, stride, 1, items);
            if !st.files[file as usize].pay.on() || next.iter().all(|&i| st.holds(&it(i))) {
                return Ok(());
            }
            let depth = st.ahead_items(b) / (span.1 - span.0 + 1);
            let mut want: Vec<u64> = periods(span.0, span.1, stride, depth, items)
                .into_iter()
                .filter(|&i| !(span.0..=span.1).contains(&i) && !st.holds(&it(i)))
                .collect();
            want.sort_unstable();
            want.dedup();
            if want.is_empty() || !st.grouping_affords(want.len() as u64 * b) {
                return Ok(());
            }
            want
        };
        let mut got: Vec<(Item, Arc<Vec<u8>>, u64)> = Vec::new();
        let (mut requests, mut read) = (0u64, 0u64);
        let mut k = 0;
        while k < want.len() {
            let mut e = k;
            while e + 1 < want.len() && want[e + 1] == want[e] + 1 {
                e += 1;
            }
            let bytes = data.read(want[k] * b, (e - k + 1) as u64 * b)?;
            requests += 1;
            read += bytes.len() as u64;
            for (n, c) in bytes.chunks(b as usize).enumerate() {
                let item = Item {
                    file,
                    index: want[k + n],
                };
                got.push((item, Arc::new(c.to_vec()), epoch));
            }
            k = e + 1;
        }
        {
            let mut st = lock(&self.state);
            st.stats.source_requests += requests;
            st.stats.source_bytes += read;
            st.stats.grouping_source_bytes += read;
            st.stats.grouping_io_bytes += read;
            st.stats.stride_batches += 1;
            st.stats.stride_bytes += read;
            for (i, d, ep) in &got {
                st.mem_put(*i, d.clone(), true, *ep);
            }
        }
        Ok(())
    }

    /// Appends `items` (consecutive ones read from SOURCE under `lru`-like caching of
    /// `group`) to the open plain slot, claiming a fresh one when it is full; the hot
    /// items a reused slot held are written into it again first (their move is
    /// local grouping I/O: slots are a segment wide, an LRU's are an item wide).
    pub(crate) fn append_plain(&self, items: &[(Item, Arc<Vec<u8>>, u64)]) -> io::Result<()> {
        let store = self.store.as_ref().expect("a store");
        let cap = store.slot_size();
        let mut k = 0;
        while k < items.len() {
            let mut buf = Vec::new();
            let mut entries = Vec::new();
            let (slot, uses, base, moved) = {
                let mut st = lock(&self.state);
                let room = st.open_plain.map_or(0, |(_, at)| cap - at);
                let first = items[k].1.len().div_ceil(4096) as u64 * 4096;
                let (slot, at, rescue) = match st.open_plain {
                    Some((slot, at)) if first <= room => (slot, at, Vec::new()),
                    _ => match st.claim_slot(true) {
                        Some((slot, _, rescue)) => (slot, 0, rescue),
                        None => return Ok(()),
                    },
                };
                let uses = st.slot_uses[&slot];
                let mut moved = 0u64;
                for e in rescue {
                    // Read before the slot is written again, under the lock: the
                    // slot is claimed, nobody else reads or writes it meanwhile.
                    let body = store.read_at(slot, e.offset as u64, e.len as usize)?;
                    moved += body.len() as u64;
                    st.stats.segment_reads += 1;
                    st.stats.segment_read_bytes += body.len() as u64;
                    if patio_core::codec::crc32c(&body) != e.crc {
                        st.stats.checksum_misses += 1;
                        continue;
                    }
                    let offset = buf.len() as u64;
                    buf.extend_from_slice(&body);
                    buf.resize(buf.len().div_ceil(4096) * 4096, 0);
                    let epoch = st.files[e.item.file as usize].epoch;
                    entries.push((
                        Entry {
                            offset: offset as u32,
                            ..e
                        },
                        epoch,
                    ));
                }
                // Read back, and written again.
                moved += buf.len() as u64;
                let before = k;
                while k < items.len() {
                    let (i, d, ep) = &items[k];
                    let offset = buf.len() as u64;
                    if at + offset + d.len() as u64 > cap {
                        break;
                    }
                    buf.extend_from_slice(d);
                    buf.resize(buf.len().div_ceil(4096) * 4096, 0);
                    let e = Entry {
                        item: *i,
                        offset: (at + offset) as u32,
                        len: d.len() as u32,
                        crc: patio_core::codec::crc32c(d),
                    };
                    entries.push((e, *ep));
                    k += 1;
                }
                if k == before && at == 0 {
                    // Nothing of `items` fits beside what had to stay: keep that.
                    k = items.len();
                }
                st.open_plain = Some((slot, at + buf.len() as u64));
                st.alloc.touch(slot);
                (slot, uses, at, moved)
            };
            if buf.is_empty() {
                continue;
            }
            if let Err(e) = store.write_at(slot, base, &buf) {
                let mut st = lock(&self.state);
                if st.open_plain.is_some_and(|(s, _)| s == slot) {
                    st.open_plain = None;
                }
                return Err(e);
            }
            let mut st = lock(&self.state);
            st.stats.segment_writes += 1;
            st.stats.segment_write_bytes += buf.len() as u64;
            st.stats.grouping_local_bytes += moved;
            st.stats.grouping_io_bytes += moved;
            st.record(slot, uses, entries);
        }
        Ok(())
    }

    /// Writes `items` into a fresh slot (see [`State::claim_slot`]) and records
    /// them, unless their files changed meanwhile. Whether a slot took them (a
    /// group's segment finds none when every slot holds hot items).
    ///
    /// [`State::claim_slot`]: crate::core::State::claim_slot
    pub(crate) fn write_slot(
        &self,
        items: &[(Item, Arc<Vec<u8>>, u64)],
        grouping: bool,
    ) -> io::Result<bool> {
        if items.is_empty() {
            return Ok(false);
        }
        let store = self.store.as_ref().expect("a store");
        let mut buf = Vec::new();
        let mut entries = Vec::with_capacity(items.len());
        for (i, d, ep) in items {
            let offset = buf.len().div_ceil(4096) * 4096;
            if (offset + d.len()) as u64 > store.slot_size() {
                break;
            }
            buf.resize(offset, 0);
            buf.extend_from_slice(d);
            let e = Entry {
                item: *i,
                offset: offset as u32,
                len: d.len() as u32,
                crc: patio_core::codec::crc32c(d),
            };
            entries.push((e, *ep));
        }
        let claimed = lock(&self.state).claim_slot(self.cfg.policy != Policy::Group);
        let Some((slot, uses, _)) = claimed else {
            return Ok(false);
        };
        let written = store.write(slot, &buf);
        let mut st = lock(&self.state);
        if let Err(e) = written {
            if st.slot_uses.get(&slot) == Some(&uses) {
                st.alloc.release(slot);
                st.slot_items.remove(&slot);
            }
            return Err(e);
        }
        st.stats.segment_writes += 1;
        st.stats.segment_write_bytes += buf.len() as u64;
        if grouping {
            st.stats.grouping_local_bytes += buf.len() as u64;
            st.stats.grouping_io_bytes += buf.len() as u64;
        }
        st.record(slot, uses, entries);
        Ok(true)
    }
}
