//! `patio query TRACE --stream K [--index I | --offset X]`: one stream's requests, one
//! request, or the requests touching one byte, answered from the stream-set encoding
//! by decoding only the blocks that hold them. An indexed `.ptrace` (version 2) is
//! queried in place; any other trace is encoded in memory first.

use crate::load::load_trace;
use anyhow::{bail, Context, Result};
use patio_core::blockset::{self, Answer, StreamSet};
use patio_core::ptrace::{Indexed, INDEXED_VERSION};
use patio_core::trace::{StreamKey, NATIVE_MAGIC};
use patio_core::Detector;
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
#[command(
    after_help = "Examples:\n  patio convert run.darshan -o run.ptrace\n  patio query run.ptrace --stream 3 --json            every request of stream 3\n  patio query run.ptrace --stream 3 --index 10 --json request 10 of it\n  patio query run.ptrace --stream 3 --offset 4096     the requests touching byte 4096\n\nK is the stream's position in `patio analyze --json`'s streams list."
)]
pub struct Args {
    /// Trace: an indexed .ptrace (queried in place), or any trace patio reads.
    trace: PathBuf,
    /// Stream number: its position in `patio analyze --json`'s `streams` list.
    // A negative number is a bad value (one error line), not an unknown option.
    #[arg(long, value_name = "K", allow_negative_numbers = true)]
    stream: usize,
    /// Only request I of the stream (from 0).
    #[arg(
        long,
        value_name = "I",
        conflicts_with = "offset",
        allow_negative_numbers = true
    )]
    index: Option<u64>,
    /// Only the requests touching byte X (offset <= X < offset + length).
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    offset: Option<u64>,
    /// Print {"stream": {...}, "requests": [[offset, length], ...], "blocks_decoded": n}.
    #[arg(long)]
    json: bool,
}

#[derive(Serialize)]
struct Key<'a> {
    module: &'a str,
    file: &'a str,
    rank: i64,
    op: &'static str,
}

#[derive(Serialize)]
struct Output<'a> {
    stream: Key<'a>,
    requests: Vec<(u64, u64)>,
    blocks_decoded: usize,
}

/// The answer of one query on an opened set.
fn ask(set: &StreamSet, args: &Args) -> patio_core::Result<Answer> {
    match (args.index, args.offset) {
        (Some(i), _) => set.request(args.stream, i),
        (None, Some(x)) => set.touching(args.stream, x),
        (None, None) => set.stream(args.stream),
    }
}

fn is_indexed(bytes: &[u8]) -> bool {
    bytes.starts_with(NATIVE_MAGIC) && bytes.get(4..6) == Some(&INDEXED_VERSION.to_le_bytes()[..])
}

pub fn run(args: Args) -> Result<()> {
    let path = args.trace.display().to_string();
    let bytes = std::fs::read(&args.trace).with_context(|| format!("cannot read {path}"))?;
    if is_indexed(&bytes) {
        let trace = Indexed::open(&bytes).with_context(|| path.clone())?;
        return answer(&trace.keys, &trace.set, &args, &path);
    }
    let trace = load_trace(&args.trace)?;
    let columns: Vec<(&[u64], &[u64])> = trace
        .streams
        .iter()
        .map(|s| (s.offsets.as_slice(), s.lengths.as_slice()))
        .collect();
    let encoded = blockset::encode(&columns, &Detector::default(), &Default::default());
    let set = StreamSet::open(&encoded).context("the stream set just encoded does not open")?;
    let keys: Vec<StreamKey> = trace.streams.iter().map(|s| s.key.clone()).collect();
    answer(&keys, &set, &args, &path)
}

fn answer(keys: &[StreamKey], set: &StreamSet, args: &Args, path: &str) -> Result<()> {
    let Some(key) = keys.get(args.stream) else {
        bail!(
            "{path}: no stream {}: the trace has {} streams",
            args.stream,
            keys.len()
        );
    };
    let answer = ask(set, args).with_context(|| path.to_string())?;
    let out = Output {
        stream: Key {
            module: &key.module,
            file: &key.file,
            rank: key.rank,
            op: key.op.as_str(),
        },
        requests: answer.requests,
        blocks_decoded: answer.blocks_decoded,
    };
    let stdout = std::io::stdout();
    let mut w = stdout.lock();
    if args.json {
        serde_json::to_writer(&mut w, &out)?;
        writeln!(w)?;
    } else {
        writeln!(
            w,
            "stream {}: {} ({} requests shown, {} blocks decoded)",
            args.stream,
            key,
            out.requests.len(),
            out.blocks_decoded
        )?;
        for (o, l) in &out.requests {
            writeln!(w, "{o}\t{l}")?;
        }
    }
    Ok(())
}
