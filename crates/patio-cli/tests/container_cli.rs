//! End-to-end tests of `patio container stat|map|check|flatten` and `patio bench
//! container`: JSON fields and their meaning, the map readable by `patio analyze`,
//! damage detected with a non-zero exit, flatten byte-exact, one-line errors.

use assert_cmd::Command;
use patio_container::{layout, IndexMode, Writer};
use predicates::prelude::*;
use std::path::Path;

fn patio() -> Command {
    Command::cargo_bin("patio").expect("binary built")
}

const WRITERS: u64 = 8;
const ROWS: u64 = 50;
const BLOCK: u64 = 256;

fn content(offset: u64, len: u64) -> Vec<u8> {
    (offset..offset + len).map(|i| (i % 251) as u8).collect()
}

/// An N-1 strided checkpoint: writer w writes blocks w, w+W, …
fn checkpoint(dir: &Path, mode: IndexMode) {
    let mut ws: Vec<Writer> = (0..WRITERS)
        .map(|_| Writer::create(dir, mode).unwrap())
        .collect();
    for row in 0..ROWS {
        for (w, writer) in ws.iter_mut().enumerate() {
            let off = (row * WRITERS + w as u64) * BLOCK;
            writer.write_at(off, &content(off, BLOCK)).unwrap();
        }
    }
    for w in ws {
        w.close().unwrap();
    }
}

fn json(cmd: &mut Command) -> serde_json::Value {
    let out = cmd.assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn stat_reports_a_pattern_index() {
    let tmp = tempfile::tempdir().unwrap();
    let (p, r) = (tmp.path().join("p"), tmp.path().join("r"));
    checkpoint(&p, IndexMode::Pattern);
    checkpoint(&r, IndexMode::Raw);
    let sp = json(patio().args(["container", "stat", "--json"]).arg(&p));
    let sr = json(patio().args(["container", "stat", "--json"]).arg(&r));
    for s in [&sp, &sr] {
        assert_eq!(s["size"], WRITERS * ROWS * BLOCK);
        assert_eq!(s["writers"], WRITERS);
        assert_eq!(s["writes"], WRITERS * ROWS);
        assert_eq!(s["raw_entries"], WRITERS * ROWS);
        assert_eq!(s["damage"].as_array().unwrap().len(), 0);
    }
    assert_eq!(sp["index_mode"], "pattern");
    assert_eq!(sp["tiles"], 1);
    assert_eq!(sp["loose_writes"], 0);
    assert!(sp["compression_ratio"].as_f64().unwrap() > 10.0, "{sp}");
    assert!(
        sr["index_disk_bytes"].as_u64().unwrap() > 10 * sp["index_disk_bytes"].as_u64().unwrap()
    );
    assert!(sr["map_mem_bytes"].as_u64().unwrap() > sp["map_mem_bytes"].as_u64().unwrap());
    patio()
        .args(["container", "stat", "--patterns"])
        .arg(&p)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("tile at 0")
                .and(predicate::str::contains("compression ratio")),
        );
}

#[test]
fn map_is_a_trace_patio_analyze_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("ckpt");
    checkpoint(&p, IndexMode::Pattern);
    let csv = tmp.path().join("map.csv");
    patio()
        .args(["container", "map"])
        .arg(&p)
        .arg("-o")
        .arg(&csv)
        .assert()
        .success();
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count() as u64, 1 + WRITERS * ROWS);
    let report = json(patio().arg("analyze").arg(&csv).arg("--json"));
    let streams = report["streams"].as_array().expect("streams");
    assert_eq!(streams.len() as u64, WRITERS);
    assert!(
        streams.iter().all(|s| s["kind"] == "strided"),
        "{}",
        report["streams"]
    );
}

#[test]
fn flatten_is_byte_exact_and_check_finds_damage() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("ckpt");
    checkpoint(&p, IndexMode::Pattern);
    let out = tmp.path().join("flat.bin");
    patio()
        .args(["container", "flatten"])
        .arg(&p)
        .arg(&out)
        .assert()
        .success();
    assert_eq!(
        std::fs::read(&out).unwrap(),
        content(0, WRITERS * ROWS * BLOCK)
    );

    patio()
        .args(["container", "check"])
        .arg(&p)
        .assert()
        .success();
    let name = &layout::list_writers(&p).unwrap()[3];
    let log = layout::index_path(&p, name);
    let mut bytes = std::fs::read(&log).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0xff;
    std::fs::write(&log, &bytes).unwrap();
    patio()
        .args(["container", "check"])
        .arg(&p)
        .assert()
        .failure()
        .stdout(predicate::str::contains(format!("index.{name}")))
        .stderr(predicate::str::contains("damaged"));
    // stat still works and reports the damage.
    let s = json(patio().args(["container", "stat", "--json"]).arg(&p));
    assert_eq!(s["damage"].as_array().unwrap().len(), 1);
    // flatten refuses (the lost writes would read as zeros), names the place, and
    // leaves the earlier output alone; --force writes it with a warning.
    let before = std::fs::read(&out).unwrap();
    patio()
        .args(["container", "flatten"])
        .arg(&p)
        .arg(&out)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains(format!("index.{name}"))
                .and(predicate::str::contains("patio: warning: damaged"))
                .and(predicate::str::contains("or force")),
        );
    assert_eq!(std::fs::read(&out).unwrap(), before);
    patio()
        .args(["container", "flatten", "--force"])
        .arg(&p)
        .arg(&out)
        .assert()
        .success()
        .stderr(predicate::str::contains("written as zeros"));
    let left: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 2, "no temporary file left: {left:?}");
}

#[test]
fn check_reports_orphaned_data_logs_and_stray_logs() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("ckpt");
    checkpoint(&p, IndexMode::Pattern);
    let name = layout::list_writers(&p).unwrap()[2].clone();
    std::fs::remove_file(layout::index_path(&p, &name)).unwrap();
    std::fs::create_dir(p.join("index.stray")).unwrap();
    let out = patio()
        .args(["container", "check", "--json"])
        .arg(&p)
        .assert()
        .code(2)
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let damage: Vec<String> = v["damage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d.as_str().unwrap().to_string())
        .collect();
    assert!(
        damage
            .iter()
            .any(|d| d.contains(&format!("data.{name}")) && d.contains("without an index log")),
        "{damage:?}"
    );
    assert!(
        damage
            .iter()
            .any(|d| d.contains("index.stray") && d.contains("not a regular file")),
        "{damage:?}"
    );
    // Readers report the stray log as damage instead of failing.
    let s = json(patio().args(["container", "stat", "--json"]).arg(&p));
    assert!(s["damage"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d.to_string().contains("index.stray")));
}

#[test]
fn flatten_keeps_holes_as_holes() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("sparse");
    let mut w = Writer::create(&p, IndexMode::Pattern).unwrap();
    w.write_at(0, &[7u8; 4096]).unwrap();
    w.write_at(1 << 30, &[9u8; 4096]).unwrap();
    w.close().unwrap();
    let out = tmp.path().join("flat.bin");
    let report = json(
        patio()
            .args(["container", "flatten", "--json"])
            .arg(&p)
            .arg(&out),
    );
    assert_eq!(report["size"], (1u64 << 30) + 4096);
    assert_eq!(report["data_bytes"], 8192);
    assert_eq!(report["damage"], serde_json::json!([]));
    let m = std::fs::metadata(&out).unwrap();
    assert_eq!(m.len(), (1 << 30) + 4096);
    assert!(
        m.blocks() * 512 < 1 << 20,
        "{} blocks allocated",
        m.blocks()
    );
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(&out).unwrap();
    let mut b = [0u8; 4096];
    f.read_exact_at(&mut b, 1 << 30).unwrap();
    assert_eq!(b, [9u8; 4096]);
    f.read_exact_at(&mut b, 1 << 20).unwrap();
    assert_eq!(b, [0u8; 4096]);
}

#[test]
fn bad_paths_give_one_line_errors() {
    let tmp = tempfile::tempdir().unwrap();
    for cmd in ["stat", "check", "map"] {
        patio()
            .args(["container", cmd])
            .arg(tmp.path())
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains("not a patio container")
                    .and(predicate::str::contains("panicked").not()),
            );
    }
    patio()
        .args(["container", "stat"])
        .arg(tmp.path().join("missing"))
        .assert()
        .code(2);
    patio()
        .args(["bench", "container", "--writes", "zero"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--writes"));
}

#[test]
fn bench_container_json() {
    let tmp = tempfile::tempdir().unwrap();
    let v = json(
        patio()
            .args([
                "bench",
                "container",
                "--writers",
                "16",
                "--writes",
                "64,1Ki",
                "--reps",
                "1",
                "--json",
                "--dir",
            ])
            .arg(tmp.path()),
    );
    let cases = v["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 2);
    assert_eq!(cases[1]["writes"], 1024);
    for c in cases {
        for side in ["pattern", "raw"] {
            for f in ["index_disk_bytes", "map_mem_bytes", "open_ms"] {
                assert!(c[side][f].as_f64().unwrap() > 0.0, "{side}.{f}");
            }
        }
        assert!(c["raw"]["index_disk_bytes"].as_u64() > c["pattern"]["index_disk_bytes"].as_u64());
    }
}

#[test]
fn map_into_a_closed_pipe_ends_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command as Std, Stdio};
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("many");
    let mut w = Writer::create(&p, IndexMode::Raw).unwrap();
    for i in 0..20_000u64 {
        w.write_at(i * 8192, &[1u8; 16]).unwrap();
    }
    w.close().unwrap();
    let mut child = Std::new(assert_cmd::cargo::cargo_bin("patio"))
        .args(["container", "map"])
        .arg(&p)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    assert!(first.starts_with("module,file"));
    // The reader is gone (as with `| head -1`): more than a pipe's worth is left.
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
