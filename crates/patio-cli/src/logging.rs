//! Diagnostics of the `patio` process through the `log` facade and `env_logger`: the
//! level comes from `-v` (info), `-vv` (debug), `-vvv` (trace) or, without `-v`,
//! `PATIO_LOG=off|error|warn|info|debug|trace` (default warn); lines go to stderr as
//! `patio: warning: …`, or — after a mount's `--log FILE` — are appended to FILE with a
//! UTC timestamp, the level and the module. The one-line reports and errors of
//! commands (`patio: error: …`) are not log lines and always go to stderr.

use anyhow::{bail, Context, Result};
use log::{Level, LevelFilter};
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Where log lines go: stderr until a mount names a file.
static SINK: Mutex<Option<File>> = Mutex::new(None);

/// `--log FILE` of every mount.
#[derive(clap::Args, Clone, Debug)]
pub struct LogArg {
    /// Append the mount's log lines to FILE (timestamped; default: stderr). The level
    /// is warn, or what -v/-vv or PATIO_LOG=info|debug|trace say.
    #[arg(long = "log", value_name = "FILE")]
    pub log: Option<PathBuf>,
}

impl LogArg {
    /// Sends every later log line to the file, if one was named; a file inside
    /// `mountpoint` is refused (the mount would write its log through itself).
    pub fn apply(&self, mountpoint: &Path) -> Result<()> {
        let Some(path) = &self.log else {
            return Ok(());
        };
        let mnt = std::fs::canonicalize(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
        patio_fs::check_output(path, &mnt, "--log", "log")?;
        to_file(path)
    }
}

/// The level of `-v` given `verbose` times, else of `PATIO_LOG` (`env`), else warn.
fn level(verbose: u8, env: Option<&str>) -> Result<LevelFilter> {
    Ok(match verbose {
        0 => match env.map(str::trim).filter(|s| !s.is_empty()) {
            None => LevelFilter::Warn,
            Some(s) => match s.parse::<LevelFilter>() {
                Ok(l) => l,
                Err(_) => {
                    bail!("PATIO_LOG={s:?} is not a level (off, error, warn, info, debug, trace)")
                }
            },
        },
        1 => LevelFilter::Info,
        2 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    })
}

/// The writer env_logger is given: the log file when one is set, else stderr.
struct Sink;

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match sink().as_mut() {
            Some(f) => f.write_all(buf),
            None => io::stderr().write_all(buf),
        }
        .map(|()| buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn sink() -> std::sync::MutexGuard<'static, Option<File>> {
    SINK.lock().unwrap_or_else(|p| p.into_inner())
}

/// Installs the logger of the process at the level of `-v`/`PATIO_LOG`.
pub fn init(verbose: u8) -> Result<()> {
    let env = std::env::var("PATIO_LOG").ok();
    let level = level(verbose, env.as_deref())?;
    // fuser's own lines (a spurious "Unmount failed" at every unmount, say) only from
    // debug on.
    let fuser = if level >= LevelFilter::Debug {
        level
    } else {
        LevelFilter::Error
    };
    env_logger::Builder::new()
        .filter_level(level)
        .filter_module("fuser", fuser)
        .format(|buf, record| {
            let to_file = sink().is_some();
            if to_file {
                let ts = buf.timestamp_millis();
                writeln!(
                    buf,
                    "{ts} {:<5} {}: {}",
                    record.level(),
                    record.target(),
                    record.args()
                )
            } else {
                let tag = match record.level() {
                    Level::Error => "error: ",
                    Level::Warn => "warning: ",
                    Level::Info => "",
                    Level::Debug => "debug: ",
                    Level::Trace => "trace: ",
                };
                writeln!(buf, "patio: {tag}{}", record.args())
            }
        })
        .target(env_logger::Target::Pipe(Box::new(Sink)))
        .write_style(env_logger::WriteStyle::Never)
        .try_init()
        .context("cannot install the logger")
}

/// Appends every later log line to `path` (created when missing).
pub fn to_file(path: &Path) -> Result<()> {
    let file = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .with_context(|| format!("--log {}: cannot open for appending", path.display()))?;
    *sink() = Some(file);
    log::info!(
        "patio {} (pid {}) logging to {}",
        env!("CARGO_PKG_VERSION"),
        std::process::id(),
        path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_come_from_v_then_patio_log_then_default_warn() {
        assert_eq!(level(0, None).unwrap(), LevelFilter::Warn);
        assert_eq!(level(0, Some("debug")).unwrap(), LevelFilter::Debug);
        assert_eq!(level(0, Some(" TRACE ")).unwrap(), LevelFilter::Trace);
        assert_eq!(level(1, Some("off")).unwrap(), LevelFilter::Info);
        assert_eq!(level(2, None).unwrap(), LevelFilter::Debug);
        assert_eq!(level(5, None).unwrap(), LevelFilter::Trace);
        let e = level(0, Some("loud")).unwrap_err().to_string();
        assert!(
            e.contains("PATIO_LOG=\"loud\"") && e.contains("trace"),
            "{e}"
        );
    }
}
