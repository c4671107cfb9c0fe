//! `patio bench compress`: index compression of synthetic HPC write workloads
//! (Figure 1 and section 3.2 of the pattern-PLFS papers): the raw per-write index
//! (32 bytes per entry) against per-writer pattern maps (the local indices the
//! writers write), one pattern map over all writes (the merged global index), and
//! zlib-9 / xz-9 of the raw index bytes.

use super::detect::xz;
use super::workloads::{write_workloads, WriteWorkload};
use super::{grouped, human_bytes, print_json, progress, sig3, Table};
use anyhow::{bail, Context, Result};
use flate2::write::ZlibEncoder;
use flate2::Compression;
use patio_core::{Detector, Extent, ExtentTable, PatternMap};
use serde::Serialize;
use std::io::Write;

/// Most lookups compared between a pattern map and its extent table per check.
const MAX_CHECKS: usize = 100_000;

#[derive(Serialize)]
struct Case {
    name: &'static str,
    entries: u64,
    raw_bytes: u64,
    local_pattern_bytes: u64,
    global_pattern_bytes: u64,
    zlib_bytes: u64,
    xz_bytes: u64,
    local_ratio: f64,
    global_ratio: f64,
    zlib_ratio: f64,
    xz_ratio: f64,
}

/// The raw index as the writers write it: every writer's entries in write order,
/// `logical, length, physical, chunk` as little-endian u64s, writer after writer.
fn raw_index(w: &WriteWorkload) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 * w.entries());
    for e in w.writers.iter().flatten() {
        for v in [e.logical, e.length, e.physical, e.chunk] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    out
}

fn zlib(data: &[u8], level: u32) -> Result<Vec<u8>> {
    let mut enc = ZlibEncoder::new(Vec::with_capacity(data.len() / 4), Compression::new(level));
    enc.write_all(data)?;
    Ok(enc.finish()?)
}

/// Checks `map` against the extent table of the same extents at the first and last
/// byte of (a sample of at most `MAX_CHECKS / 2` of) the input extents.
fn verify(name: &str, what: &str, extents: &[Extent], map: &PatternMap) -> Result<()> {
    let table = ExtentTable::build(extents);
    let step = extents.len().div_ceil(MAX_CHECKS / 2).max(1);
    for e in extents.iter().step_by(step) {
        for x in [e.logical, e.end() - 1] {
            let (m, t) = (map.lookup(x), table.lookup(x));
            if m != t {
                bail!("{name}: {what} pattern map and extent table disagree at offset {x}: map {m:?}, table {t:?}");
            }
        }
    }
    Ok(())
}

pub fn run(json: bool) -> Result<()> {
    let detector = Detector::default();
    let workloads = write_workloads();
    let bar = progress(workloads.len() as u64 * 4, json);
    let mut cases = Vec::new();
    let mut notes = Vec::new();
    for w in &workloads {
        bar.set_message(format!("{}: local maps", w.name));
        let mut local = 0u64;
        let mut local_entries = 0usize;
        for (rank, writer) in w.writers.iter().enumerate() {
            let map = PatternMap::build(writer, &detector)
                .with_context(|| format!("{}: local map of writer {rank}", w.name))?;
            local += map.encode().len() as u64;
            local_entries += map.stats().entries;
            if rank == 0 {
                verify(w.name, "writer 0's local", writer, &map)?;
            }
        }
        bar.inc(1);

        bar.set_message(format!("{}: global map", w.name));
        let all = w.global_order();
        let global_map = PatternMap::build(&all, &detector)
            .with_context(|| format!("{}: global map", w.name))?;
        let global = global_map.encode().len() as u64;
        verify(w.name, "global", &all, &global_map)?;
        bar.inc(1);

        bar.set_message(format!("{}: zlib-9", w.name));
        let raw = raw_index(w);
        let zlib_bytes = zlib(&raw, 9)?.len() as u64;
        bar.inc(1);
        bar.set_message(format!("{}: xz-9", w.name));
        let xz_bytes = xz(&raw, 9)?.len() as u64;
        bar.inc(1);

        let raw_bytes = raw.len() as u64;
        let ratio = |b: u64| raw_bytes as f64 / b as f64;
        notes.push((
            w.paper,
            w.writers.len(),
            local_entries,
            global_map.stats().entries,
        ));
        cases.push(Case {
            name: w.name,
            entries: w.entries() as u64,
            raw_bytes,
            local_pattern_bytes: local,
            global_pattern_bytes: global,
            zlib_bytes,
            xz_bytes,
            local_ratio: ratio(local),
            global_ratio: ratio(global),
            zlib_ratio: ratio(zlib_bytes),
            xz_ratio: ratio(xz_bytes),
        });
    }
    bar.finish_and_clear();

    if json {
        return print_json(&cases);
    }
    let mut t = Table::new(
        "bench compress: index of synthetic write workloads, raw 32 B/entry vs pattern maps, zlib-9, xz-9",
        &[
            "workload",
            "writers",
            "entries",
            "raw",
            "local map (entries)",
            "global map (entries)",
            "zlib-9",
            "xz-9",
            "raw/local",
            "raw/global",
            "raw/zlib",
            "raw/xz",
            "paper",
        ],
    )
    .left_align(12);
    for (c, (paper, writers, local_entries, global_entries)) in cases.iter().zip(&notes) {
        t.row(vec![
            c.name.to_string(),
            writers.to_string(),
            grouped(c.entries),
            human_bytes(c.raw_bytes),
            format!(
                "{} ({})",
                human_bytes(c.local_pattern_bytes),
                grouped(*local_entries as u64)
            ),
            format!(
                "{} ({})",
                human_bytes(c.global_pattern_bytes),
                grouped(*global_entries as u64)
            ),
            human_bytes(c.zlib_bytes),
            human_bytes(c.xz_bytes),
            sig3(c.local_ratio),
            sig3(c.global_ratio),
            sig3(c.zlib_ratio),
            sig3(c.xz_ratio),
            paper.to_string(),
        ]);
    }
    t.note(
        "local: sum over writers of PatternMap::build(writer).encode() (20-byte blob header each);",
    );
    t.note("global: PatternMap::build(all writes, round-robin time order).encode(); entries = map entries.");
    t.note("paper: compression rate reported for the modelled application (Pattern PLFS index; Fig. 1 values are");
    t.note("       not in the text, only \"orders of magnitude\"). Workload definitions: bench/workloads.rs.");
    t.print()
}
