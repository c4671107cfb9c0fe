//! `patio trace recover TRACE [--json]`: the journal a killed `patio mount trace` left
//! (the append-only native format) becomes the trace, and the report — text or JSON —
//! counts what the journal held; a torn last frame is reported and the rest kept.

use assert_cmd::Command;
use patio_core::trace::{Op, StreamKey, Trace};
use patio_core::Detector;
use std::path::Path;

fn recorded() -> Trace {
    Trace::from_records((0..300u64).map(|i| {
        let key = StreamKey {
            module: "FUSE".into(),
            file: format!("/f{}", i % 3),
            rank: 0,
            op: if i % 2 == 0 { Op::Read } else { Op::Write },
        };
        let t = i as f64 * 1e-3;
        (key, i * 4096, 4096, t, t + 1e-4)
    }))
}

/// Leaves `trace`'s journal as a killed mount would, with `tail` appended (a torn frame).
fn journal(out: &Path, trace: &Trace, tail: &[u8]) {
    let mut bytes = trace.encode_native(&Detector::default()).unwrap();
    bytes.extend_from_slice(tail);
    let name = format!(".{}.journal", out.file_name().unwrap().to_str().unwrap());
    std::fs::write(out.with_file_name(name), bytes).unwrap();
}

fn recover(out: &Path, json: bool) -> std::process::Output {
    let mut cmd = Command::cargo_bin("patio").unwrap();
    cmd.args(["trace", "recover"]).arg(out);
    if json {
        cmd.arg("--json");
    }
    cmd.output().unwrap()
}

#[test]
fn recover_reports_as_json_what_the_journal_held() {
    let dir = tempfile::tempdir().unwrap();
    let trace = recorded();
    let out = dir.path().join("run.csv");
    journal(&out, &trace, &[]);
    let done = recover(&out, true);
    assert!(done.status.success(), "{:?}", done);
    let report: serde_json::Value = serde_json::from_slice(&done.stdout).unwrap();
    assert_eq!(report["requests"], 300);
    assert_eq!(report["streams"], trace.streams.len());
    assert_eq!(report["output"], out.display().to_string());
    assert!(report["journal"]
        .as_str()
        .unwrap()
        .ends_with(".run.csv.journal"));
    assert!(report["damage"].is_null());
    let back = Trace::read_csv(&out).unwrap();
    assert_eq!(back.requests(), 300);
    assert_eq!(back.streams.len(), trace.streams.len());
}

#[test]
fn a_torn_journal_is_reported_in_both_forms() {
    let dir = tempfile::tempdir().unwrap();
    let trace = recorded();
    let (a, b) = (dir.path().join("a.ptrace"), dir.path().join("b.ptrace"));
    journal(&a, &trace, &[0x50, 0x00, 0x00]);
    journal(&b, &trace, &[0x50, 0x00, 0x00]);
    let json = recover(&a, true);
    assert!(json.status.success(), "{:?}", json);
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["requests"], 300);
    assert!(report["damage"].is_string(), "{report}");
    let text = recover(&b, false);
    assert!(text.status.success(), "{:?}", text);
    let line = String::from_utf8(text.stdout).unwrap();
    assert!(
        line.starts_with("recovered 300 requests in 6 streams from "),
        "{line}"
    );
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}
