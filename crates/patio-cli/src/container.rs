//! `patio container …`: tools for pattern-indexed containers (the log-structured N-1
//! files of patio-container): `stat` (the index and its compression), `map` (the
//! index as a trace CSV for `patio analyze`), `check` (verify every record),
//! `flatten` (write the logical file as a plain file) and `compact` (rewrite the
//! ended writers' live data into one log set).

use crate::report::{count_bytes, human_bytes, progress, sig3, spinner, write_stdout, PipeOut};
use anyhow::{bail, Context, Result};
use patio_container::compact::{compact_interleaved, Stage};
use patio_container::{check, flatten, stat, Plan, Reader};
use patio_core::trace::{Op, StreamKey, Trace};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(clap::Subcommand)]
pub enum ContainerCommand {
    /// Writers, writes, raw entries, index bytes on disk, map bytes in memory, compression ratio, global patterns.
    ///
    /// Opens the container as a reader would (every index log read and merged) and
    /// reports the index: how many writers and writes, how many entries a
    /// one-entry-per-write index would hold (24 bytes each), the bytes of the index
    /// logs on disk, the bytes of the merged map in memory, the ratio of the two
    /// index sizes, and the global patterns (tiles: interleaved strided writers).
    Stat {
        /// The container (the directory that holds the logical file).
        path: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
        /// Also print every global pattern entry.
        #[arg(long)]
        patterns: bool,
    },
    /// Print the index as a trace CSV (one stream per writer, in write order), readable by `patio analyze`.
    Map {
        /// The container (the directory that holds the logical file).
        path: PathBuf,
        /// Write the CSV here instead of standard output.
        #[arg(short, long = "output", value_name = "CSV", alias = "out")]
        out: Option<PathBuf>,
    },
    /// Verify every index record (checksum, decoding, bounds, data present); non-zero exit on damage.
    Check {
        /// The container (the directory that holds the logical file).
        path: PathBuf,
        /// Print the report as JSON (logs, records and writes checked, damage found,
        /// unindexed tail bytes).
        #[arg(long)]
        json: bool,
    },
    /// Write the logical file as a plain sparse file OUT (its holes stay holes), crash-safely; a damaged container is refused unless --force.
    ///
    /// OUT is written under a temporary name beside it, synced and renamed (an
    /// existing OUT is replaced only then). A container with index damage is refused
    /// (each damaged place is printed): the writes lost there would read as zeros.
    /// With --force it is flattened anyway and the exit status is still 0. A size the
    /// target file system cannot hold, or data larger than its free space, is refused.
    Flatten {
        /// The container (the directory that holds the logical file).
        path: PathBuf,
        /// The plain file to write.
        out: PathBuf,
        /// Flatten a damaged container anyway (lost writes become zeros).
        #[arg(long)]
        force: bool,
        /// Report what was written as JSON (path, out, size, data_bytes, damage); no progress bar.
        #[arg(long)]
        json: bool,
    },
    /// Rewrite the live data of every ended writer into one log set and remove the logs it replaces, crash-safely.
    ///
    /// Writers still writing (a process holding the file open through a mount or
    /// the library) are left alone; their logs stay as they are. Logs that hold
    /// nothing live (everything cut by a truncation) are removed with no
    /// replacement, and truncation records nothing needs any more are dropped. The
    /// new logs are written under temporary names, synced and published by one
    /// rename; a compaction killed at any point loses nothing, and what it leaves is
    /// cleaned by the next compaction or writer. Waits for a compaction already
    /// running on the same container. A damaged container is refused.
    Compact {
        /// The container (the directory that holds the logical file).
        path: PathBuf,
        /// Print what was done as JSON (log sets rewritten, live bytes copied, files and
        /// bytes on disk before and after); no progress bar.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: ContainerCommand) -> Result<()> {
    match cmd {
        ContainerCommand::Stat {
            path,
            json,
            patterns,
        } => stat_cmd(path, json, patterns),
        ContainerCommand::Map { path, out } => {
            crate::retired::warn_if_given("--out", "--output");
            map_cmd(path, out)
        }
        ContainerCommand::Check { path, json } => check_cmd(path, json),
        ContainerCommand::Compact { path, json } => compact_cmd(path, json),
        ContainerCommand::Flatten {
            path,
            out,
            force,
            json,
        } => flatten_cmd(&path, &out, force, json),
    }
}

/// What `container flatten --json` reports.
#[derive(Serialize)]
struct FlattenReport {
    path: String,
    out: String,
    /// Logical size of the file written.
    size: u64,
    /// Bytes of it that hold written data (the rest are holes).
    data_bytes: u64,
    /// Damaged places whose lost writes were written as zeros (only with --force).
    damage: Vec<String>,
}

fn flatten_cmd(path: &Path, out: &Path, force: bool, json: bool) -> Result<()> {
    if !force {
        // Every damaged place, before the one-line refusal.
        for d in Reader::open(path)?.damage() {
            eprintln!("patio: warning: damaged: {d}");
        }
    }
    let bar = progress(stat(path)?.size, json);
    let done = flatten(path, out, force, |done, total| {
        bar.set_length(total);
        bar.set_position(done)
    })?;
    bar.finish_and_clear();
    for d in &done.damage {
        eprintln!("patio: warning: damaged: {d} (lost writes written as zeros)");
    }
    if json {
        let report = FlattenReport {
            path: path.display().to_string(),
            out: out.display().to_string(),
            size: done.size,
            data_bytes: done.data_bytes,
            damage: done.damage.iter().map(|d| d.to_string()).collect(),
        };
        return write_stdout(&format!("{}\n", serde_json::to_string_pretty(&report)?));
    }
    eprintln!(
        "patio: wrote {} ({} bytes, {} of data)",
        out.display(),
        done.size,
        done.data_bytes
    );
    Ok(())
}

#[derive(Serialize)]
struct CompactReport {
    path: String,
    size: u64,
    sources: u64,
    active_writers: u64,
    new_log_set: Option<String>,
    live_bytes: u64,
    records: u64,
    files_before: u64,
    files_after: u64,
    disk_bytes_before: u64,
    disk_bytes_after: u64,
    truncations_dropped: u64,
    recovered_files: u64,
    ms: f64,
}

/// Files and allocated bytes of the container directory.
fn footprint(path: &std::path::Path) -> Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let (mut files, mut bytes) = (0u64, 0u64);
    for e in std::fs::read_dir(path).with_context(|| path.display().to_string())? {
        let m = e.with_context(|| path.display().to_string())?.metadata()?;
        files += 1;
        bytes += m.blocks() * 512;
    }
    Ok((files, bytes))
}

/// What a compaction does after `stage` (the durable steps of patio-container's
/// `compact`: write the new log set, publish it, remove what it replaces).
fn stage_text(stage: Stage) -> &'static str {
    match stage {
        Stage::Locked => "reading the logs",
        Stage::Read | Stage::Copying { .. } => "writing the compacted log set",
        Stage::Step(1 | 2) => "publishing the new log set",
        Stage::Step(_) => "removing the replaced logs",
    }
}

fn compact_cmd(path: PathBuf, json: bool) -> Result<()> {
    let start = Instant::now();
    let (files_before, disk_bytes_before) = footprint(&path)?;
    let bar = spinner(json);
    bar.set_message(format!(
        "compacting {}: waiting for its lock",
        path.display()
    ));
    // A spinner while the logs are read, a bar of the live bytes while they are
    // copied, the spinner's message again for the last steps.
    let mut last = None;
    let done = compact_interleaved(&path, Plan::All, &mut |stage| {
        if let Stage::Copying { done, total } = stage {
            if bar.length() != Some(total) {
                count_bytes(&bar, total);
            }
            bar.set_position(done);
        }
        let text = stage_text(stage);
        if last != Some(text) {
            last = Some(text);
            bar.set_message(format!("compacting {}: {text}", path.display()));
        }
    });
    bar.finish_and_clear();
    let done = done?;
    let (files_after, disk_bytes_after) = footprint(&path)?;
    let report = CompactReport {
        path: path.display().to_string(),
        size: stat(&path)?.size,
        sources: done.sources,
        active_writers: done.active,
        new_log_set: done.writer.clone(),
        live_bytes: done.live_bytes,
        records: done.records,
        files_before,
        files_after,
        disk_bytes_before,
        disk_bytes_after,
        truncations_dropped: done.truncations_dropped,
        recovered_files: done.recovered,
        ms: start.elapsed().as_secs_f64() * 1e3,
    };
    if json {
        return write_stdout(&format!("{}\n", serde_json::to_string_pretty(&report)?));
    }
    let what = match (&report.new_log_set, report.sources) {
        (_, 0) => "nothing to compact".to_string(),
        (Some(w), n) => format!("{n} log set(s) rewritten into {w}"),
        (None, n) => format!("{n} log set(s) held nothing live: removed"),
    };
    write_stdout(&format!(
        "{}: {what}\n\
         size               {} bytes\n\
         live data copied   {} in {} record(s)\n\
         writers left alone {} (still writing)\n\
         files              {} -> {}\n\
         on disk            {} -> {}\n\
         truncations dropped {}\n\
         time               {} ms\n",
        report.path,
        report.size,
        human_bytes(report.live_bytes),
        report.records,
        report.active_writers,
        report.files_before,
        report.files_after,
        human_bytes(report.disk_bytes_before),
        human_bytes(report.disk_bytes_after),
        report.truncations_dropped,
        sig3(report.ms),
    ))
}

#[derive(Serialize)]
struct StatReport {
    path: String,
    index_mode: &'static str,
    size: u64,
    writers: u64,
    records: u64,
    writes: u64,
    raw_entries: u64,
    raw_index_bytes: u64,
    index_disk_bytes: u64,
    map_mem_bytes: usize,
    compression_ratio: f64,
    global_patterns: u64,
    tiles: u64,
    loose_writes: u64,
    open_ms: f64,
    damage: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    patterns: Option<Vec<String>>,
}

fn stat_cmd(path: PathBuf, json: bool, patterns: bool) -> Result<()> {
    let start = Instant::now();
    let reader = Reader::open(&path)?;
    let open_ms = start.elapsed().as_secs_f64() * 1e3;
    let s = reader.stats();
    let report = StatReport {
        path: path.display().to_string(),
        index_mode: s.mode.name(),
        size: s.size,
        writers: s.writers,
        records: s.records,
        writes: s.writes,
        raw_entries: s.raw_entries,
        raw_index_bytes: s.raw_entries * 24,
        index_disk_bytes: s.index_disk_bytes,
        map_mem_bytes: s.index.mem_bytes,
        compression_ratio: s.compression_ratio(),
        global_patterns: s.index.global_patterns,
        tiles: s.index.tiles,
        loose_writes: s.index.loose_writes,
        open_ms,
        damage: reader.damage().iter().map(|d| d.to_string()).collect(),
        patterns: patterns.then(|| reader.index().describe()),
    };
    if json {
        return write_stdout(&format!("{}\n", serde_json::to_string_pretty(&report)?));
    }
    let mut text = format!(
        "{}: {} index, {} bytes\n\
         writers            {}\n\
         index records      {}\n\
         writes             {}\n\
         raw entries        {} ({} as a one-entry-per-write index)\n\
         index on disk      {}\n\
         map in memory      {}\n\
         compression ratio  {}×\n\
         global patterns    {} ({} tiles of interleaved writers)\n\
         writes merged one by one  {}\n\
         open time          {} ms\n",
        report.path,
        report.index_mode,
        report.size,
        report.writers,
        report.records,
        report.writes,
        report.raw_entries,
        human_bytes(report.raw_index_bytes),
        human_bytes(report.index_disk_bytes),
        human_bytes(report.map_mem_bytes as u64),
        sig3(report.compression_ratio),
        report.global_patterns,
        report.tiles,
        report.loose_writes,
        sig3(open_ms),
    );
    for line in report.patterns.iter().flatten() {
        text.push_str(&format!("  {line}\n"));
    }
    for d in &report.damage {
        text.push_str(&format!("damaged: {d}\n"));
    }
    write_stdout(&text)
}

fn map_cmd(path: PathBuf, out: Option<PathBuf>) -> Result<()> {
    let reader = Reader::open(&path)?;
    for d in reader.damage() {
        eprintln!("patio: warning: damaged index, rest of log not used: {d}");
    }
    let name = path.file_name().map_or_else(
        || path.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let records = reader.writes().map(|(chunk, key, e)| {
        let t = key as f64 * 1e-9;
        (
            StreamKey {
                module: "CONTAINER".into(),
                file: name.clone(),
                rank: chunk as i64,
                op: Op::Write,
            },
            e.logical,
            e.length,
            t,
            t,
        )
    });
    let trace = Trace::from_records(records);
    match out {
        Some(p) => {
            let f = std::fs::File::create(&p).with_context(|| format!("{}", p.display()))?;
            trace.write_csv(std::io::BufWriter::new(f))?;
        }
        None => {
            let mut stdout = PipeOut::new();
            let written = trace.write_csv(&mut stdout);
            stdout.finish(written)?
        }
    }
    Ok(())
}

#[derive(Serialize)]
struct CheckOut {
    path: String,
    logs: u64,
    records: u64,
    writes: u64,
    damage: Vec<String>,
    unindexed_tail_bytes: u64,
}

fn check_cmd(path: PathBuf, json: bool) -> Result<()> {
    let report = check(&path)?;
    let out = CheckOut {
        path: path.display().to_string(),
        logs: report.logs,
        records: report.records,
        writes: report.writes,
        damage: report.damage.iter().map(|d| d.to_string()).collect(),
        unindexed_tail_bytes: report.unindexed_tail_bytes,
    };
    if json {
        write_stdout(&format!("{}\n", serde_json::to_string_pretty(&out)?))?;
    } else {
        let mut text = format!(
            "{}: {} index logs, {} records, {} writes\n",
            out.path, out.logs, out.records, out.writes
        );
        for d in &out.damage {
            text.push_str(&format!("damaged: {d}\n"));
        }
        if out.unindexed_tail_bytes > 0 {
            text.push_str(&format!(
                "{} data bytes after the last indexed write of their writer (an unflushed tail, never acknowledged)\n",
                out.unindexed_tail_bytes
            ));
        }
        write_stdout(&text)?;
    }
    if !report.is_clean() {
        bail!(
            "{}: {} damaged place(s); the data before each is readable",
            out.path,
            out.damage.len()
        );
    }
    Ok(())
}
