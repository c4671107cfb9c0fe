//! End-to-end tests of `patio analyze` and `patio convert` on good and bad inputs:
//! the report's JSON shape, exact round trips between formats, and one-line errors
//! with a non-zero exit (never a panic) for malformed, truncated and empty traces.

use assert_cmd::Command;
use patio_core::trace::{Op, StreamKey, Trace, CSV_HEADER};
use patio_core::Detector;
use predicates::prelude::*;
use std::path::Path;

fn patio() -> Command {
    Command::cargo_bin("patio").expect("binary built")
}

/// A small trace: rank-strided 2-D writes by 4 ranks and one contiguous reader.
fn sample_trace() -> Trace {
    let key = |rank, op| StreamKey {
        module: "POSIX".into(),
        file: "/scratch/out.dat".into(),
        rank,
        op,
    };
    let mut records = Vec::new();
    for rank in 0..4i64 {
        for (i, (row, col)) in (0..20u64)
            .flat_map(|r| (0..8u64).map(move |c| (r, c)))
            .enumerate()
        {
            let offset = row * 1_048_576 + col * 16_384 + rank as u64 * 4096;
            records.push((
                key(rank, Op::Write),
                offset,
                4096,
                i as f64 * 1e-3,
                i as f64 * 1e-3 + 1e-4,
            ));
        }
    }
    for i in 0..300u64 {
        records.push((
            key(9, Op::Read),
            i * 65_536,
            65_536,
            10.0 + i as f64 * 1e-3,
            10.0 + i as f64 * 1e-3 + 5e-4,
        ));
    }
    Trace::from_records(records)
}

fn write_csv(trace: &Trace, path: &Path) {
    let mut buf = Vec::new();
    trace.write_csv(&mut buf).unwrap();
    std::fs::write(path, buf).unwrap();
}

fn json_of(args: &[&str]) -> serde_json::Value {
    let out = patio()
        .args(args)
        .arg("--json")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).expect("valid JSON")
}

#[test]
fn report_has_the_documented_shape() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    write_csv(&sample_trace(), &csv);
    let report = json_of(&["analyze", csv.to_str().unwrap()]);
    let streams = report["streams"].as_array().unwrap();
    assert_eq!(streams.len(), 5);
    for s in streams {
        for key in [
            "module",
            "file",
            "rank",
            "op",
            "requests",
            "kind",
            "signature",
            "coverage",
        ] {
            assert!(!s[key].is_null(), "stream lacks {key}: {s}");
        }
    }
    let writer = streams.iter().find(|s| s["rank"] == 0).unwrap();
    assert_eq!(writer["kind"], "kd-strided");
    assert_eq!(writer["requests"], 160);
    assert_eq!(writer["coverage"], 1.0);
    let reader = streams.iter().find(|s| s["rank"] == 9).unwrap();
    assert_eq!(reader["kind"], "contiguous");
    let totals = &report["totals"];
    assert_eq!(totals["raw_bytes"], 16 * 940);
    for key in [
        "encoded_bytes",
        "ratio",
        "zlib_ratio",
        "xz_ratio",
        "delta_xz_ratio",
    ] {
        assert!(totals[key].as_f64().unwrap() > 0.0, "{key}");
    }
    // Four ranks doing the same thing: patterns must beat the generic compressors here.
    assert!(totals["ratio"].as_f64().unwrap() > totals["xz_ratio"].as_f64().unwrap());
}

#[test]
fn native_and_csv_give_the_same_report() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    let native = dir.path().join("t.ptrace");
    write_csv(&sample_trace(), &csv);
    patio()
        .args([
            "convert",
            csv.to_str().unwrap(),
            "-o",
            native.to_str().unwrap(),
        ])
        .assert()
        .success();
    let a = json_of(&["analyze", csv.to_str().unwrap()]);
    let b = json_of(&["analyze", native.to_str().unwrap()]);
    assert_eq!(a, b);
    // `convert --json` reports what it wrote: the counts of the trace, the file's size.
    let report = json_of(&[
        "convert",
        csv.to_str().unwrap(),
        "-o",
        native.to_str().unwrap(),
    ]);
    let original = sample_trace();
    assert_eq!(report["format"], "ptrace");
    assert_eq!(report["requests"], original.requests() as u64);
    assert_eq!(report["streams"], original.streams.len() as u64);
    assert_eq!(report["bytes"], std::fs::metadata(&native).unwrap().len());
    assert_eq!(report["inputs"][0], csv.to_str().unwrap());
    // And back to CSV, record for record (times kept to the native format's 1 ns).
    let again = dir.path().join("again.csv");
    patio()
        .args([
            "convert",
            native.to_str().unwrap(),
            "-o",
            again.to_str().unwrap(),
        ])
        .assert()
        .success();
    let (back, original) = (Trace::read_csv(&again).unwrap(), sample_trace());
    assert_eq!(back.streams.len(), original.streams.len());
    for (b, o) in back.streams.iter().zip(&original.streams) {
        assert!(
            b.key == o.key && b.offsets == o.offsets && b.lengths == o.lengths,
            "stream {} differs",
            o.key
        );
        let close = |x: &[f64], y: &[f64]| x.iter().zip(y).all(|(a, b)| (a - b).abs() <= 1e-9);
        assert!(
            close(&b.starts, &o.starts) && close(&b.ends, &o.ends),
            "times of {} differ",
            o.key
        );
    }
}

#[test]
fn malformed_csv_names_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(
        &bad,
        format!("{CSV_HEADER}\nPOSIX,f,0,write,0,10,0.0,0.1\nPOSIX,f,0,write,-5,10,0.0,0.1\n"),
    )
    .unwrap();
    patio()
        .args(["analyze", bad.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.csv:3:").and(predicate::str::contains("offset")))
        .stderr(predicate::str::contains("panicked").not());
    std::fs::write(&bad, "time,offset\n1,2\n").unwrap();
    patio()
        .args(["analyze", bad.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("header"));
}

#[test]
fn truncated_native_trace_keeps_what_is_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.ptrace");
    let bytes = sample_trace().encode_native(&Detector::default()).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 7]).unwrap();
    let out = patio()
        .args(["analyze", path.to_str().unwrap(), "--json"])
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).to_string();
    assert!(
        stderr.contains("damaged trace") && stderr.contains("dropped"),
        "{stderr}"
    );
    let report: serde_json::Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(
        report["streams"].as_array().unwrap().len(),
        4,
        "all but the torn last stream"
    );
    // A corrupt header is an error, not a crash.
    std::fs::write(&path, b"PTRC\x09\x00\x00\x00").unwrap();
    patio()
        .args(["analyze", path.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("version"));
}

#[test]
fn empty_trace_is_an_empty_report() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in [
        ("empty.csv", String::new()),
        ("header.csv", format!("{CSV_HEADER}\n")),
        ("empty.ptrace", String::new()),
    ] {
        let path = dir.path().join(name);
        std::fs::write(&path, content).unwrap();
        let report = json_of(&["analyze", path.to_str().unwrap()]);
        assert_eq!(report["streams"].as_array().unwrap().len(), 0, "{name}");
        assert_eq!(report["totals"]["requests"], 0);
        assert_eq!(report["totals"]["raw_bytes"], 0);
        let text = patio()
            .args(["analyze", path.to_str().unwrap()])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("no requests") && !text.contains("ratio"),
            "{text}"
        );
    }
}

#[test]
fn a_damaged_native_trace_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.ptrace");
    std::fs::write(&bad, b"garbage!").unwrap();
    patio()
        .args(["analyze", bad.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("bad.ptrace").and(predicate::str::contains("magic")));
}

#[test]
fn missing_and_unknown_files_are_clear_errors() {
    patio()
        .args(["analyze", "/nonexistent/trace.csv"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/nonexistent/trace.csv"));
    let dir = tempfile::tempdir().unwrap();
    let odd = dir.path().join("trace.bin");
    std::fs::write(&odd, b"hello").unwrap();
    patio()
        .args(["analyze", odd.to_str().unwrap()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("unknown trace format"));
}
