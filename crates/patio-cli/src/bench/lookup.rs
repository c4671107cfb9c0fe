//! `patio bench lookup`: the pattern map against the sorted 1-to-1 extent table
//! (binary search) on the same extents — size, build time and time per lookup —
//! reproducing the remap-table comparison of the file-reorganization slides
//! (1-to-1 table 64 MB / build 0.78 s / 10^6 lookups 0.49 s against an I/O signature
//! of 28 B / 2.7 µs / 0.025 s).

use super::workloads::lookup_inputs;
use super::{alternate, grouped, human_bytes, ms, print_json, progress, sig3, time, Table, SEED};
use anyhow::{bail, Result};
use patio_core::{Detector, ExtentTable, Lookup, PatternMap};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use std::hint::black_box;

/// Lookups timed per case (the slides' 10^6 accesses).
const LOOKUPS: usize = 1_000_000;
/// Lookups compared one by one between the two structures before timing.
const VERIFIED: usize = 10_000;

#[derive(Serialize)]
struct Case {
    name: &'static str,
    entries: u64,
    pattern_bytes: u64,
    table_bytes: u64,
    pattern_build_ms: f64,
    table_build_ms: f64,
    pattern_ns_per_lookup: f64,
    table_ns_per_lookup: f64,
    speedup: f64,
}

/// Folds a lookup result into a number, so the optimiser cannot skip the lookup and
/// so the two structures' answers can be compared in bulk.
fn digest(l: Lookup) -> u64 {
    match l {
        Lookup::Data {
            chunk,
            physical,
            len,
        } => physical ^ len.rotate_left(21) ^ chunk.rotate_left(42),
        Lookup::Hole { len } => len.rotate_left(7) ^ 0x5555,
        Lookup::Unmapped => 1,
    }
}

fn lookup_all(offsets: &[u64], f: impl Fn(u64) -> Lookup) -> u64 {
    let mut acc = 0u64;
    for &x in offsets {
        acc = acc.wrapping_mul(31).wrapping_add(digest(f(black_box(x))));
    }
    acc
}

pub fn run(entries: u64, reps: usize, json: bool) -> Result<()> {
    let reps = reps.max(1);
    let detector = Detector::default();
    let inputs = lookup_inputs(entries as usize);
    let bar = progress((inputs.len() * 4 * reps) as u64, json);
    let mut cases = Vec::new();
    let mut map_entries = Vec::new();
    for input in &inputs {
        bar.set_message(format!("{}: build", input.name));
        let extents = &input.extents;
        let mut map = PatternMap::default();
        let mut table = ExtentTable::default();
        let build = alternate(2, reps, |side| {
            let d = if side == 0 {
                let (d, m) = time(|| PatternMap::build(black_box(extents), &detector));
                map = m?;
                d
            } else {
                let (d, t) = time(|| ExtentTable::build(black_box(extents)));
                table = t;
                d
            };
            bar.inc(1);
            Ok(d)
        })?;

        let end = table.extents().last().map_or(0, |e| e.end());
        let mut rng = SmallRng::seed_from_u64(SEED);
        let offsets: Vec<u64> = (0..LOOKUPS).map(|_| rng.gen_range(0..end.max(1))).collect();
        for &x in offsets.iter().take(VERIFIED) {
            let (m, t) = (map.lookup(x), table.lookup(x));
            if m != t {
                bail!(
                    "{}: pattern map and extent table disagree at offset {x}: map {m:?}, table {t:?}",
                    input.name
                );
            }
        }

        bar.set_message(format!("{}: lookups", input.name));
        let mut sums = [0u64; 2];
        let lookups = alternate(2, reps, |side| {
            let (d, sum) = if side == 0 {
                time(|| lookup_all(&offsets, |x| map.lookup(x)))
            } else {
                time(|| lookup_all(&offsets, |x| table.lookup(x)))
            };
            sums[side] = black_box(sum);
            bar.inc(1);
            Ok(d)
        })?;
        if sums[0] != sums[1] {
            bail!(
                "{}: pattern map and extent table answered {LOOKUPS} random lookups differently",
                input.name
            );
        }

        let per_lookup = |i: usize| lookups[i].as_secs_f64() * 1e9 / LOOKUPS as f64;
        let (pattern_ns, table_ns) = (per_lookup(0), per_lookup(1));
        map_entries.push(map.stats().entries);
        cases.push(Case {
            name: input.name,
            entries,
            pattern_bytes: map.encode().len() as u64,
            table_bytes: 32 * table.len() as u64,
            pattern_build_ms: ms(build[0]),
            table_build_ms: ms(build[1]),
            pattern_ns_per_lookup: pattern_ns,
            table_ns_per_lookup: table_ns,
            speedup: table_ns / pattern_ns,
        });
    }
    bar.finish_and_clear();

    if json {
        return print_json(&cases);
    }
    let mut t = Table::new(
        format!(
            "bench lookup: pattern map vs sorted extent table, {} extents, {} random lookups, median of {reps}",
            grouped(entries),
            grouped(LOOKUPS as u64)
        ),
        &[
            "case",
            "map entries",
            "pattern bytes",
            "table bytes",
            "size ×",
            "build pattern",
            "build table",
            "pattern ns/lookup",
            "table ns/lookup",
            "speedup",
        ],
    );
    for (c, entries) in cases.iter().zip(&map_entries) {
        t.row(vec![
            c.name.to_string(),
            grouped(*entries as u64),
            human_bytes(c.pattern_bytes),
            human_bytes(c.table_bytes),
            sig3(c.table_bytes as f64 / c.pattern_bytes as f64),
            format!("{:.2} ms", c.pattern_build_ms),
            format!("{:.2} ms", c.table_build_ms),
            format!("{:.1}", c.pattern_ns_per_lookup),
            format!("{:.1}", c.table_ns_per_lookup),
            format!("{:.2}×", c.speedup),
        ]);
    }
    t.note("pattern bytes: PatternMap::encode() (with its 20-byte blob header); table bytes: 32 B × table entries.");
    t.note("slides, 1-D strided, 10^6 accesses: 1-to-1 table 64,000,000 B, build 0.78 s, 490 ns/lookup;");
    t.note("                                   I/O signature 28 B, build 2.7 µs, 25 ns/lookup (19.8× faster).");
    t.print()
}
