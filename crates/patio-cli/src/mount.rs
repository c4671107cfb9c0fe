//! `patio mount …`: FUSE mounts served by this process in the foreground.
//! `patio mount trace` records every read and write made through a passthrough mount
//! (patio-fs's tracing mount).

use anyhow::Result;
use patio_fs::session::Ended;
use patio_fs::tracing::{self, TraceMount};
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum MountCommand {
    /// Mount SOURCE_DIR at MOUNTPOINT and record every read and write made through it.
    ///
    /// A passthrough FUSE mount: everything done under MOUNTPOINT happens to the files
    /// in SOURCE_DIR. Files are opened in direct-I/O mode (FOPEN_DIRECT_IO), so each
    /// read and write reaches the tracer with the application's own offset and size
    /// rather than as page-cache or readahead chunks (requests above the kernel's
    /// per-request limit, 1 MiB today, arrive split). Each request is recorded as
    /// module FUSE, the file's path inside the mount, the caller's pid as rank, the op,
    /// the offset, the bytes transferred and the service start and end times (seconds
    /// since the mount was made).
    ///
    /// Runs in the foreground. Stop it with Ctrl-C, SIGTERM, or `fusermount3 -u
    /// MOUNTPOINT`; the trace is written then (native format, or CSV when TRACE ends in
    /// .csv). If the mount point is busy, a second signal detaches it lazily.
    #[command(
        after_help = "Example:\n  patio mount trace data/ /mnt/traced --out run.ptrace &\n  ./app /mnt/traced/input.h5\n  fusermount3 -u /mnt/traced        # or kill -INT the patio process\n  patio analyze run.ptrace"
    )]
    Trace(TraceArgs),
}

#[derive(clap::Args)]
pub struct TraceArgs {
    /// Directory whose files the mount serves.
    #[arg(value_name = "SOURCE_DIR")]
    source: PathBuf,
    /// Empty directory to mount on (outside SOURCE_DIR).
    #[arg(value_name = "MOUNTPOINT")]
    mountpoint: PathBuf,
    /// Trace file written when the mount ends (.csv for CSV, anything else native).
    #[arg(long, short, value_name = "TRACE")]
    out: PathBuf,
    /// Let other users use the mount too (FUSE allow_other; permission checks stay the
    /// kernel's, against the source's owners and modes). A non-root user needs
    /// `user_allow_other` in /etc/fuse.conf.
    #[arg(long)]
    allow_other: bool,
}

pub fn run(cmd: MountCommand) -> Result<()> {
    match cmd {
        MountCommand::Trace(args) => trace(args),
    }
}

fn trace(args: TraceArgs) -> Result<()> {
    let req = TraceMount {
        source: args.source,
        mountpoint: args.mountpoint,
        out: args.out,
        allow_other: args.allow_other,
    };
    let pid = std::process::id();
    let mut notify = |msg: &str| {
        if msg.starts_with("mounted") {
            eprintln!(
                "patio: tracing {} {msg} (direct I/O); stop with Ctrl-C, `kill {pid}` or \
                 `fusermount3 -u {}`",
                req.source.display(),
                req.mountpoint.display()
            );
        } else {
            eprintln!("patio: {msg}");
        }
    };
    let summary = tracing::run(&req, &mut notify)?;
    let how = match summary.ended {
        Ended::Signal(_) => "unmounted",
        Ended::Unmounted => "unmounted externally",
        Ended::Detached => "detached lazily",
    };
    eprintln!(
        "patio: {} {how}; wrote {}: {} requests in {} streams",
        req.mountpoint.display(),
        req.out.display(),
        summary.requests,
        summary.streams
    );
    Ok(())
}
