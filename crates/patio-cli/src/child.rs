//! Running a user's command under patio's preloaded libraries (`patio trace -- CMD`,
//! `patio run --mpiio -- CMD`): the libraries go in front of any `LD_PRELOAD` the user
//! already has, the command gets the terminal's signals itself (same process group),
//! SIGTERM and SIGHUP sent to patio alone (a launcher tearing the job down) are passed
//! on, and patio exits with the command's status (128 + signal when a signal ended it).

use anyhow::{Context, Result};
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, Ordering};

static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe { libc::kill(pid, sig) };
    }
}

/// `LD_PRELOAD` with `libraries` in front of what the environment already preloads.
pub fn preload_with(libraries: &[PathBuf]) -> OsString {
    let mut preload = OsString::new();
    for lib in libraries {
        if !preload.is_empty() {
            preload.push(" ");
        }
        preload.push(lib.as_os_str());
    }
    if let Some(old) = std::env::var_os("LD_PRELOAD").filter(|o| !o.is_empty()) {
        preload.push(" ");
        preload.push(old);
    }
    preload
}

/// Runs `command` (program and arguments) with `env` set (a `None` value removes the
/// variable) and returns its exit code.
pub fn run(command: &[OsString], env: &[(&str, Option<&OsStr>)]) -> Result<i32> {
    let (program, rest) = command.split_first().context("no command given")?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest);
    for (key, value) in env {
        match value {
            Some(v) => cmd.env(key, v),
            None => cmd.env_remove(key),
        };
    }
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run {}", program.to_string_lossy()))?;
    CHILD.store(child.id() as i32, Ordering::Relaxed);
    // SAFETY: installing handlers that only call kill(2), and ignoring two signals.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
        for sig in [libc::SIGTERM, libc::SIGHUP] {
            libc::signal(
                sig,
                forward as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    let status = child.wait().context("waiting for the command")?;
    use std::os::unix::process::ExitStatusExt;
    Ok(match (status.code(), status.signal()) {
        (Some(code), _) => code,
        (None, Some(sig)) => 128 + sig,
        _ => 1,
    })
}
