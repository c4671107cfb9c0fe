//! `patio store probe`: calibrates the striped storage model on the real file system of
//! a directory and saves the parameters for this machine, so that `--store probed`
//! (every command that takes `--store`) prices reads on them. The measurement is
//! patio-storage's [`patio_storage::probe`]; the saved file [`patio_storage::probed`].

use anyhow::{Context, Result};
use patio_storage::probe::{measure, ProbeOptions};
use patio_storage::probed::{self, Probe};
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum StoreCommand {
    /// Measure the striped model's parameters (latency by seek distance, bandwidth,
    /// request and page size) on the file system of --dir with the page cache out of
    /// the way (O_DIRECT, else fsync + POSIX_FADV_DONTNEED), and save them as the
    /// preset `probed` of this machine ($XDG_CONFIG_HOME/patio/store-probed.json).
    #[command(
        after_help = "Examples:\n  patio store probe --dir /scratch          measure and save\n  patio bench layout --store probed         price on this machine's parameters"
    )]
    Probe(ProbeArgs),
}

#[derive(clap::Args)]
pub struct ProbeArgs {
    /// A directory on the storage to measure (a scratch file is written there and removed).
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// Scratch file size, MiB (at least 4; seeks far apart need room: 256 measures
    /// every seek class on a device of 4 MiB requests).
    #[arg(long, default_value_t = 256, value_name = "MIB")]
    mib: u64,
    /// Timed requests per phase (at least 3).
    #[arg(long, default_value_t = 16)]
    samples: usize,
    /// Measure and print only; keep the saved parameters as they are.
    #[arg(long)]
    no_save: bool,
    /// Print the probe as JSON (with "saved_to").
    #[arg(long)]
    json: bool,
}

pub fn run(cmd: StoreCommand) -> Result<()> {
    match cmd {
        StoreCommand::Probe(a) => probe(a),
    }
}

fn probe(a: ProbeArgs) -> Result<()> {
    let bytes = a.mib.checked_mul(1 << 20).context("--mib is too large")?;
    let p = measure(
        &a.dir,
        ProbeOptions {
            bytes,
            samples: a.samples,
        },
    )
    .with_context(|| format!("store probe of {}", a.dir.display()))?;
    let saved = if a.no_save {
        None
    } else {
        let path = probed::default_path()?;
        probed::save(&p, &path)?;
        Some(path)
    };
    if a.json {
        let mut v = serde_json::to_value(&p)?;
        v["saved_to"] = serde_json::json!(saved.as_ref().map(|s| s.display().to_string()));
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        print!("{}", describe(&p));
        match saved {
            Some(path) => println!("saved to {} (use --store probed)", path.display()),
            None => println!("not saved (--no-save)"),
        }
    }
    Ok(())
}

/// The probe as a short report.
fn describe(p: &Probe) -> String {
    let s = &p.striping;
    let mut out = format!(
        "{} on {} ({}), {} MiB scratch file, {}\n",
        p.directory,
        p.device.as_deref().unwrap_or("no block device"),
        p.host,
        p.probe_bytes >> 20,
        if p.direct_io {
            "O_DIRECT reads"
        } else {
            "buffered reads, fsync + POSIX_FADV_DONTNEED before each"
        }
    );
    out += &format!(
        "{:<8} {:>10} {:>12} {:>9} {:>12}\n",
        "phase", "bytes", "distance", "requests", "median ms"
    );
    for x in &p.samples {
        out += &format!(
            "{:<8} {:>10} {:>12} {:>9} {:>12.4}\n",
            x.kind,
            x.bytes,
            x.distance,
            x.requests,
            x.seconds * 1e3
        );
    }
    out += &format!(
        "striped model: {} target, {} KiB requests ({}), {} B pages, L seq/near/mid/far {:.4}/{:.4}/{:.4}/{:.4} ms, {:.1} MB/s\n",
        s.targets,
        s.rpc_size >> 10,
        p.rpc_source,
        s.page_size,
        s.latency_seq * 1e3,
        s.latency_near * 1e3,
        s.latency_mid * 1e3,
        s.latency_far * 1e3,
        s.bandwidth / 1e6
    );
    if !p.unmeasured.is_empty() {
        out += &format!(
            "not measured (scratch file too small; the next shorter class's latency): {}\n",
            p.unmeasured.join(", ")
        );
    }
    out
}
