//! The store-facing fill paths of the segment-grouping cache: reading a slot (a
//! group's whole segment or one item), building a group's segment from members held
//! in memory, in the store or, for the rest, in SOURCE, putting the items readers
//! asked for in the item region's cells, bringing a strided stream's next periods
//! ahead, and writing a fresh slot (moving the items of an item-region slot that a
//! segment takes over).

use crate::core::{lock, Cache, Policy};
use crate::graph::Item;
use crate::stride::{gap, near_periods, periods, run_ahead};
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
                if st.plain.entry(&e.item).is_some_and(|(s, _)| s == slot) {
                    st.plain.remove(&e.item);
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
                } else if let Some((slot, e)) = st.plain.entry(i).or(st.disk.get(i).copied()) {
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
            // Every request beyond the one a miss makes anyway is a cost of groups.
            st.cost(requests.saturating_sub(want.is_some() as u64));
            if want.is_some() {
                st.stats.accesses += 1;
                st.stats.misses += 1;
            }
            let wanted_item = want.as_ref().map(|w| w.0);
            for (i, d, ep) in &items {
                st.mem_put(*i, d.clone(), Some(*i) != wanted_item, *ep);
            }
        }
        // No slot may take the segment: the item asked for still goes to the item
        // region (its reader's `plain_put`), like a miss.
        self.write_slot(&items, true)?;
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
    /// ([`near_periods`]) and its next period has items worth bringing (nobody holds
    /// them and an LRU of the whole store would miss them, `worth`), the next
    /// periods' such items are read from SOURCE (contiguous ones in one request, in
    /// file order) — while the file's groups pay and grouping I/O stays within its
    /// cap — and put in memory ahead of demand (the store gets them when used). If
    /// another caller holds an item of the gap the stream skips, the run of items
    /// after the span, gaps included, comes ahead instead (at most the ahead share
    /// of memory).
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
            if !st.share.on()
                || !st.files[file as usize].pay.on()
                || !next.iter().any(|&i| st.worth_bringing(&it(i)))
            {
                return Ok(());
            }
            let depth = st.ahead_items(b) / (span.1 - span.0 + 1);
            // Other callers read the gap this stream skips: together the callers read
            // the file in order, so the items after the span come ahead as one run
            // (the periods alone would be a request each, out of that order).
            let together = gap(span.0, span.1, stride, items).any(|i| st.holds(&it(i)));
            let ahead = if together {
                let all = st.ahead_items(b) * st.strides.active().max(1) as u64;
                let len = (stride.unsigned_abs() * depth.max(1)).min(all);
                run_ahead(span.0, span.1, stride, len, items)
            } else {
                periods(span.0, span.1, stride, depth, items)
            };
            let mut want: Vec<u64> = ahead
                .into_iter()
                .filter(|&i| !(span.0..=span.1).contains(&i) && st.worth_bringing(&it(i)))
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
            st.cost(requests);
            for (i, d, ep) in &got {
                st.mem_put(*i, d.clone(), true, *ep);
            }
        }
        Ok(())
    }

    /// Puts `items` (read by a reader under the epochs given) in the item region
    /// (`group`): each becomes its most recent item, written to a cell of its own
    /// unless the region holds it already.
    pub(crate) fn plain_put(&self, items: &[(Item, Arc<Vec<u8>>, u64)]) -> io::Result<()> {
        let store = self.store.as_ref().expect("a store");
        for (item, data, epoch) in items {
            let placed = {
                let mut st = lock(&self.state);
                if st.disabled.is_some() || st.files[item.file as usize].epoch != *epoch {
                    continue;
                }
                st.region_cell(*item)
            };
            let Some((slot, offset, ticket)) = placed else {
                continue;
            };
            let mut buf = data.to_vec();
            buf.resize(buf.len().div_ceil(4096) * 4096, 0);
            if let Err(e) = store.write_at(slot, offset, &buf) {
                lock(&self.state).plain.remove(item);
                return Err(e);
            }
            let mut st = lock(&self.state);
            st.stats.segment_writes += 1;
            st.stats.segment_write_bytes += buf.len() as u64;
            let entry = Entry {
                item: *item,
                offset: offset as u32,
                len: data.len() as u32,
                crc: patio_core::codec::crc32c(data),
            };
            if st.files[item.file as usize].epoch != *epoch {
                st.plain.remove(item);
            } else if st.plain.commit(ticket, entry) {
                st.dirty = true;
            }
        }
        Ok(())
    }

    /// `slot` leaves the item region for a group's segment: the region shrinks by a
    /// slot (least recently used items out) and the slot's items move to free
    /// cells of the region's other slots (read and written again under the lock,
    /// local grouping I/O) at the age they had. Returns the slot's new use number.
    fn vacate(&self, slot: u32) -> io::Result<u64> {
        let store = self.store.as_ref().expect("a store");
        let mut st = lock(&self.state);
        let mut moved = 0u64;
        st.resize_region(1);
        for (item, cell) in st.plain.take_slot(slot) {
            let Some(e) = cell.entry else { continue };
            let body = store.read_at(slot, e.offset as u64, e.len as usize)?;
            moved += body.len() as u64;
            if patio_core::codec::crc32c(&body) != e.crc {
                st.stats.checksum_misses += 1;
                continue;
            }
            let Some((to, entry)) = st.plain.reinsert(item, &cell) else {
                continue;
            };
            let mut buf = body;
            buf.resize(buf.len().div_ceil(4096) * 4096, 0);
            if let Err(err) = store.write_at(to, entry.offset as u64, &buf) {
                st.plain.remove(&item);
                return Err(err);
            }
            moved += buf.len() as u64;
            st.stats.segment_writes += 1;
            st.stats.segment_write_bytes += buf.len() as u64;
        }
        st.stats.grouping_local_bytes += moved;
        st.stats.grouping_io_bytes += moved;
        st.dirty = true;
        st.alloc.touch(slot);
        Ok(st.fresh(slot))
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
        let (slot, uses) = if self.cfg.policy == Policy::Group {
            let claimed = lock(&self.state).segment_slot();
            match claimed {
                None => return Ok(false),
                Some(Ok(got)) => got,
                Some(Err(slot)) => (slot, self.vacate(slot)?),
            }
        } else {
            lock(&self.state).item_slot()
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
