//! The one harness that tests and benchmarks run a `patio mount …` process through:
//! start it, wait until its mount point is mounted, end it (`fusermount3 -u` or a
//! signal) and check that it ended cleanly, read its statistics, and remove it whatever
//! state it is in. `patio bench cache` uses it directly; Python's
//! `patio._mount_harness.MountProcess` (the tests, `bench/`, `patio bench reorg`) through
//! `patio._native`.
//!
//! The mount's stdout and stderr go to temporary files, not pipes: a mount that logs a lot
//! (`-v`) never blocks on a full pipe, and what it wrote so far can be read while it runs.
//! Every failure is a [`MountError`] whose message ends with the mount's stderr.

use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a mount may take to appear, and to exit once asked to.
pub const APPEAR: Duration = Duration::from_secs(15);
pub const EXIT: Duration = Duration::from_secs(60);

/// A mount that did not appear, died, or did not end cleanly (the message says which).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MountError(pub String);

pub type Result<T> = std::result::Result<T, MountError>;

/// How [`MountProcess::end`] ends a mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// `fusermount3 -u MNT`.
    Fusermount,
    /// A signal to the mount process (`SIGINT`, `SIGTERM`).
    Signal(i32),
}

impl End {
    /// `"fusermount"` or a signal's name (`"SIGINT"`, `"SIGTERM"`, `"SIGKILL"`, …).
    pub fn parse(how: &str) -> Result<End> {
        if how == "fusermount" {
            return Ok(End::Fusermount);
        }
        SIGNALS
            .iter()
            .find(|(name, _)| *name == how)
            .map(|&(_, sig)| End::Signal(sig))
            .ok_or_else(|| MountError(format!("cannot end a mount by {how:?}")))
    }

    fn describe(self) -> String {
        match self {
            End::Fusermount => "fusermount".into(),
            End::Signal(sig) => SIGNALS
                .iter()
                .find(|&&(_, s)| s == sig)
                .map_or_else(|| format!("signal {sig}"), |(name, _)| (*name).to_string()),
        }
    }
}

/// The signals a mount may be ended by, by name.
const SIGNALS: [(&str, i32); 7] = [
    ("SIGINT", libc::SIGINT),
    ("SIGTERM", libc::SIGTERM),
    ("SIGHUP", libc::SIGHUP),
    ("SIGQUIT", libc::SIGQUIT),
    ("SIGKILL", libc::SIGKILL),
    ("SIGUSR1", libc::SIGUSR1),
    ("SIGUSR2", libc::SIGUSR2),
];

/// The `fusermount3` (or `fusermount`) command.
pub fn fusermount() -> Result<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/bin", "/bin", "/usr/sbin", "/sbin"].map(PathBuf::from));
    for name in ["fusermount3", "fusermount"] {
        if let Some(found) = dirs.iter().map(|d| d.join(name)).find(|p| p.is_file()) {
            return Ok(found);
        }
    }
    Err(MountError(
        "fusermount3 is not installed (it comes with fuse3: run scripts/setup.sh)".into(),
    ))
}

/// A mountinfo path: space, tab, newline and backslash are octal escapes there.
fn unescape(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// Whether something is mounted at `mnt`, from `/proc/self/mountinfo`: a FUSE mount whose
/// process died (its accesses fail with ENOTCONN) counts, whatever a `stat` of its mount
/// point answers.
pub fn is_mounted(mnt: &Path) -> bool {
    let want = absolute(mnt);
    let Ok(text) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    text.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|p| Path::new(&unescape(p)) == want)
}

/// `mnt` with symbolic links resolved where it exists (a dead FUSE mount point cannot be
/// resolved: then its parent is, and the name kept).
fn absolute(mnt: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(mnt) {
        return p;
    }
    match (mnt.parent(), mnt.file_name()) {
        (Some(dir), Some(name)) => std::fs::canonicalize(if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        })
        .map(|d| d.join(name))
        .unwrap_or_else(|_| mnt.to_path_buf()),
        _ => mnt.to_path_buf(),
    }
}

/// `fusermount3 -u [-z] MNT`; the caller decides what a failure means.
pub fn unmount(mnt: &Path, lazy: bool) -> Result<Output> {
    let mut cmd = Command::new(fusermount()?);
    cmd.arg("-u");
    if lazy {
        cmd.arg("-z");
    }
    cmd.arg(mnt)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| MountError(format!("cannot run fusermount3: {e}")))
}

/// One `patio mount KIND …` process serving a mount point.
pub struct MountProcess {
    argv: Vec<OsString>,
    mnt: PathBuf,
    stats_file: Option<PathBuf>,
    child: Child,
    out: File,
    err: File,
    status: Option<ExitStatus>,
    /// What the mount wrote to stdout and stderr, as of the last collection.
    pub stdout: String,
    pub stderr: String,
}

impl MountProcess {
    /// Runs `argv` (`env`: the whole environment, or `None` for this process's) and waits
    /// (at most `timeout`) until `mnt` is mounted. `stats_file` is where the mount writes
    /// its counters when it ends (its `--stats-json`), if anywhere.
    pub fn start(
        argv: &[OsString],
        mnt: &Path,
        stats_file: Option<&Path>,
        timeout: Duration,
        env: Option<&[(OsString, OsString)]>,
    ) -> Result<MountProcess> {
        let Some((program, args)) = argv.split_first() else {
            return Err(MountError("no command to start a mount with".into()));
        };
        let temp = || tempfile::tempfile().map_err(|e| MountError(format!("temporary file: {e}")));
        let (out, err) = (temp()?, temp()?);
        let mut cmd = Command::new(program);
        cmd.args(args).stdin(Stdio::null());
        cmd.stdout(out.try_clone().map_err(|e| MountError(e.to_string()))?);
        cmd.stderr(err.try_clone().map_err(|e| MountError(e.to_string()))?);
        if let Some(env) = env {
            cmd.env_clear().envs(env.iter().map(|(k, v)| (k, v)));
        }
        let child = cmd.spawn().map_err(|e| {
            MountError(format!(
                "cannot start {}: {e}",
                Path::new(program).display()
            ))
        })?;
        let mut m = MountProcess {
            argv: argv.to_vec(),
            mnt: mnt.to_path_buf(),
            stats_file: stats_file.map(Path::to_path_buf),
            child,
            out,
            err,
            status: None,
            stdout: String::new(),
            stderr: String::new(),
        };
        let deadline = Instant::now() + timeout;
        while !is_mounted(&m.mnt) {
            if !m.running() {
                m.collect();
                let code = m.status.map(describe_status).unwrap_or_default();
                return Err(MountError(format!(
                    "{} exited with {code} before {} was mounted: {}",
                    m.name(),
                    m.mnt.display(),
                    m.stderr.trim()
                )));
            }
            if Instant::now() > deadline {
                m.cleanup();
                return Err(MountError(format!(
                    "{}: {} was not mounted within {} s: {}",
                    m.name(),
                    m.mnt.display(),
                    timeout.as_secs_f64(),
                    m.stderr.trim()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(m)
    }

    /// `patio mount KIND` (what the messages call this mount).
    pub fn name(&self) -> String {
        let args: Vec<String> = self
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let kind = args
            .iter()
            .position(|a| a == "mount")
            .and_then(|i| args.get(i + 1))
            .map_or("?", String::as_str);
        format!("patio mount {kind}")
    }

    /// The mount point.
    pub fn mnt(&self) -> &Path {
        &self.mnt
    }

    /// The mount process's id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The mount's exit status once it ended, as Python's `subprocess` gives it: the
    /// exit code, or minus the signal that ended it (`None` while it runs).
    pub fn returncode(&self) -> Option<i32> {
        self.status.map(returncode_of)
    }

    /// Sends `sig` to the mount process while it runs.
    pub fn send_signal(&mut self, sig: i32) {
        if self.running() {
            self.signal(sig);
        }
    }

    /// Whether the mount process still runs.
    pub fn running(&mut self) -> bool {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status.is_none()
    }

    /// What the mount wrote to stderr so far (its log lines, while it runs).
    pub fn output(&mut self) -> String {
        self.collect();
        self.stderr.clone()
    }

    fn collect(&mut self) {
        for (file, text) in [
            (&mut self.out, &mut self.stdout),
            (&mut self.err, &mut self.stderr),
        ] {
            let mut bytes = Vec::new();
            if file.seek(SeekFrom::Start(0)).is_ok() && file.read_to_end(&mut bytes).is_ok() {
                *text = String::from_utf8_lossy(&bytes).into_owned();
            }
        }
    }

    /// Whether the mount prints its counters as JSON on stdout when it ends (`--json`).
    pub fn json_output(&self) -> bool {
        self.argv.iter().any(|a| a == "--json")
    }

    fn wait(&mut self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while self.running() {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    fn signal(&self, sig: i32) {
        // SAFETY: a signal to our own child, which has not been reaped (`running`).
        unsafe { libc::kill(self.child.id() as libc::pid_t, sig) };
    }

    /// Ends the mount and checks that it ended cleanly: exit status 0, unmounted, no
    /// panic, and on stdout nothing but, with `--json`, one JSON object (a mount's report
    /// goes to stderr). Returns its stderr.
    pub fn end(&mut self, how: End, timeout: Duration) -> Result<String> {
        match how {
            End::Fusermount => {
                let done = unmount(&self.mnt, false)?;
                if !done.status.success() {
                    return Err(MountError(format!(
                        "fusermount3 -u {}: {}",
                        self.mnt.display(),
                        String::from_utf8_lossy(&done.stderr).trim()
                    )));
                }
            }
            End::Signal(sig) => {
                if self.running() {
                    self.signal(sig);
                }
            }
        }
        if !self.wait(timeout) {
            self.collect();
            return Err(MountError(format!(
                "{} did not exit within {} s of {}: {}",
                self.name(),
                timeout.as_secs_f64(),
                how.describe(),
                self.stderr.trim()
            )));
        }
        self.collect();
        let mut problems = Vec::new();
        if let Some(status) = self.status.filter(|s| !s.success()) {
            problems.push(format!("exited with {}", describe_status(status)));
        }
        if is_mounted(&self.mnt) {
            problems.push(format!("left {} mounted", self.mnt.display()));
        }
        if self.stderr.contains("panicked") {
            problems.push("panicked".into());
        }
        if self.json_output() {
            let printed: Option<serde_json::Value> = serde_json::from_str(&self.stdout).ok();
            if !printed.as_ref().is_some_and(serde_json::Value::is_object) {
                problems.push(format!(
                    "printed no JSON object with --json ({:?})",
                    head(&self.stdout)
                ));
            }
        } else if !self.stdout.is_empty() {
            problems.push(format!("wrote to stdout ({:?})", head(&self.stdout)));
        }
        if !problems.is_empty() {
            return Err(MountError(format!(
                "{} (ended by {}) {}: {}",
                self.name(),
                how.describe(),
                problems.join(", "),
                self.stderr.trim()
            )));
        }
        Ok(self.stderr.clone())
    }

    /// The counters the mount reported when it ended: the text of its `--stats-json`
    /// file, or with `--json` alone what it printed on stdout.
    pub fn stats_text(&mut self) -> Result<String> {
        let (where_, text) = if let Some(path) = &self.stats_file {
            (
                path.display().to_string(),
                std::fs::read_to_string(path).map_err(|e| e.to_string()),
            )
        } else if self.json_output() {
            self.collect();
            ("its stdout".to_string(), Ok(self.stdout.clone()))
        } else {
            return Err(MountError(format!(
                "{} was started without --stats-json or --json",
                self.name()
            )));
        };
        let text = text
            .map_err(|e| MountError(format!("{}: no statistics in {where_}: {e}", self.name())))?;
        match serde_json::from_str::<serde_json::Value>(&text) {
            Ok(v) if v.is_object() => Ok(text),
            Ok(_) => Err(MountError(format!(
                "{}: no statistics in {where_}: not a JSON object",
                self.name()
            ))),
            Err(e) => Err(MountError(format!(
                "{}: no statistics in {where_}: {e}",
                self.name()
            ))),
        }
    }

    /// SIGKILL, as a crash would end it, then detaches the dead mount (lazily).
    pub fn kill(&mut self) {
        self.kill_and_detach();
    }

    /// SIGKILL if still running, a lazy unmount of what is left, the output collected.
    fn kill_and_detach(&mut self) {
        if self.running() {
            let _ = self.child.kill();
            self.wait(Duration::from_secs(30));
        }
        if is_mounted(&self.mnt) {
            let _ = unmount(&self.mnt, true);
        }
        self.collect();
    }

    /// Removes the mount whatever state it is in, never failing: `fusermount3 -u`; if
    /// that is refused (a file is open on it) or the mount does not exit, SIGTERM and, if
    /// it is still busy, SIGTERM again (patio then detaches it lazily); then SIGKILL;
    /// then a lazy unmount of what is left.
    pub fn cleanup(&mut self) {
        if self.running()
            && is_mounted(&self.mnt)
            && unmount(&self.mnt, false).is_ok_and(|o| o.status.success())
        {
            self.wait(Duration::from_secs(10));
        }
        for wait in [2, 5] {
            if self.running() {
                self.signal(libc::SIGTERM);
                self.wait(Duration::from_secs(wait));
            }
        }
        self.kill_and_detach();
    }
}

impl Drop for MountProcess {
    fn drop(&mut self) {
        if self.running() || is_mounted(&self.mnt) {
            self.cleanup();
        }
    }
}

/// The exit code, or minus the signal that ended the process.
fn returncode_of(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| -s))
        .unwrap_or(i32::MIN)
}

fn describe_status(status: ExitStatus) -> String {
    format!("status {}", returncode_of(status))
}

fn head(text: &str) -> &str {
    let end = text.char_indices().nth(200).map_or(text.len(), |(i, _)| i);
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_command_that_exits_before_mounting_is_an_error_with_its_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = argv(&[
            "sh",
            "-c",
            "echo mount-failed >&2; exit 3",
            "patio",
            "mount",
            "x",
        ]);
        let err = MountProcess::start(&cmd, dir.path(), None, APPEAR, None)
            .err()
            .expect("no mount appears");
        assert!(err.0.contains("exited with status 3"), "{err}");
        assert!(err.0.ends_with("mount-failed"), "{err}");
    }

    #[test]
    fn a_mount_that_never_appears_is_removed_after_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let cmd = argv(&["sleep", "30"]);
        let t = Instant::now();
        let err = MountProcess::start(&cmd, dir.path(), None, Duration::from_millis(200), None)
            .err()
            .expect("no mount appears");
        assert!(err.0.contains("was not mounted within 0.2 s"), "{err}");
        assert!(t.elapsed() < Duration::from_secs(20));
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape("/a\\040b\\011c\\134d"), "/a b\tc\\d");
        assert!(!is_mounted(Path::new("/nonexistent/patio-harness")));
        assert!(is_mounted(Path::new("/proc")));
    }

    #[test]
    fn end_names_are_parsed() {
        assert_eq!(End::parse("fusermount").unwrap(), End::Fusermount);
        assert_eq!(End::parse("SIGINT").unwrap(), End::Signal(libc::SIGINT));
        assert_eq!(End::parse("SIGKILL").unwrap().describe(), "SIGKILL");
        assert!(End::parse("SIGWHAT").is_err());
    }
}
