//! Live statistics of running mounts: the content of the stats file every mount
//! rewrites while it serves (patio-fs's `live` module places and rewrites it), and
//! `patio mount stat MNT [--json]`, which reads it without touching the mount.
//!
//! The file is one JSON object: `mount` (kind, pid, source, mount point, when it was
//! written), `stats` (exactly the object the mount writes to `--stats-json` when it
//! ends, with `"ended": "running"`) and `text` (the report the mount prints when it
//! ends, rendered by the mount itself so both read alike). `mount stat --json` prints
//! `stats`, so one reader handles the at-unmount file and the live one. Without MNT,
//! `patio mount stat` lists the user's running mounts.

use anyhow::{Context, Result};
use patio_fs::live::Render;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(clap::Args)]
pub struct StatArgs {
    /// Mount point of a running patio mount (of this user, on this machine); without
    /// it, every running mount of this user is listed.
    #[arg(value_name = "MOUNTPOINT")]
    mountpoint: Option<PathBuf>,
    /// Print the counters as JSON: the object `--stats-json` holds at unmount (a list
    /// of {"mount", "stats"} objects without MOUNTPOINT).
    #[arg(long)]
    json: bool,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The stats file's text for a mount of `kind` over `source` at `mountpoint`: `json`
/// gives the counters' `--stats-json` object, `text` the report printed at unmount.
pub fn renderer<S: 'static>(
    kind: &'static str,
    source: &Path,
    mountpoint: &Path,
    json: impl Fn(&S) -> Value + Send + 'static,
    text: impl Fn(&S) -> String + Send + 'static,
) -> Render<S> {
    let source = std::fs::canonicalize(source).unwrap_or_else(|_| source.to_path_buf());
    let mountpoint = std::fs::canonicalize(mountpoint).unwrap_or_else(|_| mountpoint.to_path_buf());
    let pid = std::process::id();
    Box::new(move |s: &S| {
        let file = json!({
            "mount": {
                "kind": kind,
                "pid": pid,
                "source": source,
                "mountpoint": mountpoint,
                "updated_unix_ms": now_ms(),
            },
            "stats": json(s),
            "text": text(s),
        });
        format!("{file}\n")
    })
}

/// Whether process `pid` exists (it may be another user's).
fn alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// The live statistics of the mount at `mnt`, or why there are none (one line).
fn read(mnt: &Path) -> Result<std::result::Result<Value, String>> {
    let shown = mnt.display();
    let canonical = match std::fs::canonicalize(mnt) {
        Ok(c) => c,
        Err(e) => return Ok(Err(format!("{shown}: {e}"))),
    };
    let Some(path) = patio_fs::live::find_stats(&canonical) else {
        let dir = patio_fs::live::runtime_dir()?;
        return Ok(Err(format!(
            "{shown} is not a running patio mount of this user (no live statistics in {})",
            dir.display()
        )));
    };
    check(&path, &canonical, &shown.to_string())
}

/// The stats file at `path` if it is a running mount's at `canonical` (shown to the
/// user as `shown`), or why it is not (one line).
fn check(path: &Path, canonical: &Path, shown: &str) -> Result<std::result::Result<Value, String>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let file: Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return Ok(Err(format!("{}: not a stats file ({e})", path.display()))),
    };
    let mount = &file["mount"];
    if mount["mountpoint"].as_str() != canonical.to_str() {
        return Ok(Err(format!(
            "{shown} is not a running patio mount of this user ({} is about {})",
            path.display(),
            mount["mountpoint"]
        )));
    }
    let pid = mount["pid"].as_i64().unwrap_or(0);
    if !alive(pid as i32) {
        return Ok(Err(format!(
            "{shown} is not a running patio mount (its patio process {pid} has ended; \
             `fusermount3 -u {shown}` if it is still mounted)"
        )));
    }
    if !patio_fs::session::is_mount_point(canonical) {
        return Ok(Err(format!(
            "{shown} is not a running patio mount (process {pid} published statistics for \
             it, but nothing is mounted there)"
        )));
    }
    Ok(Ok(file))
}

/// `patio mount stat`: 0 with the counters printed, 1 when MNT is not a running mount.
pub fn run(args: StatArgs) -> Result<u8> {
    let Some(mountpoint) = &args.mountpoint else {
        return list(args.json);
    };
    let file = match read(mountpoint)? {
        Ok(f) => f,
        Err(why) => {
            eprintln!("patio: {why}");
            return Ok(1);
        }
    };
    if args.json {
        println!("{}", serde_json::to_string_pretty(&file["stats"])?);
        return Ok(0);
    }
    let m = &file["mount"];
    let age = now_ms().saturating_sub(m["updated_unix_ms"].as_u64().unwrap_or(0));
    println!(
        "patio mount {} of {} (pid {}; counters of {:.1} s ago)",
        m["kind"].as_str().unwrap_or("?"),
        m["source"].as_str().unwrap_or("?"),
        m["pid"],
        age as f64 / 1000.0
    );
    print!("{}", file["text"].as_str().unwrap_or(""));
    Ok(0)
}

/// `patio mount stat` without MOUNTPOINT: the running mounts of this user, one line
/// each (kind, mount point, source, pid), or their files' `mount` and `stats` as JSON.
fn list(json: bool) -> Result<u8> {
    let mut running = Vec::new();
    for path in patio_fs::live::all_stats() {
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(file) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let Some(mnt) = file["mount"]["mountpoint"].as_str().map(PathBuf::from) else {
            continue;
        };
        if let Ok(file) = check(&path, &mnt, &mnt.display().to_string())? {
            running.push(file);
        }
    }
    running.sort_by(|a, b| {
        a["mount"]["mountpoint"]
            .as_str()
            .cmp(&b["mount"]["mountpoint"].as_str())
    });
    if json {
        let out: Vec<Value> = running
            .iter()
            .map(|f| json!({"mount": f["mount"], "stats": f["stats"]}))
            .collect();
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    if running.is_empty() {
        eprintln!("patio: no running patio mounts of this user");
    }
    for f in &running {
        let m = &f["mount"];
        println!(
            "{:<10} {}  (of {}, pid {})",
            m["kind"].as_str().unwrap_or("?"),
            m["mountpoint"].as_str().unwrap_or("?"),
            m["source"].as_str().unwrap_or("?"),
            m["pid"]
        );
    }
    Ok(0)
}
