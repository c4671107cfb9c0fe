//! End-to-end tests of `patio replay` and `patio bench prefetch`: the JSON shape and
//! its consistency, model save/load across runs, and one-line errors with exit
//! status 2 on bad input. Latencies are tiny (0.1 ms) to stay fast; no timings are
//! asserted.

use assert_cmd::Command;
use patio_core::trace::{Op, StreamKey, Trace};
use predicates::prelude::*;
use std::path::{Path, PathBuf};

fn patio() -> Command {
    Command::cargo_bin("patio").expect("binary built")
}

/// `patio replay TRACE --data DATA`, to which each test adds its options.
fn replay(trace: &Path, data: &Path) -> Command {
    let mut c = patio();
    c.arg("replay").arg(trace).arg("--data").arg(data);
    c
}

const FAST: [&str; 4] = ["--latency-ms", "0.1", "--bandwidth-mbps", "2000"];

/// A trace with two read streams (2-D strided and contiguous) and a write stream,
/// and a data file covering the reads.
fn fixture(dir: &Path) -> (PathBuf, PathBuf, usize) {
    let key = |rank, op| StreamKey {
        module: "POSIX".into(),
        file: "/scratch/in.dat".into(),
        rank,
        op,
    };
    let mut records = Vec::new();
    let mut reads = 0;
    for i in 0..60u64 {
        let (row, col) = (i / 6, i % 6);
        let t = i as f64 * 1e-3;
        records.push((key(0, Op::Read), row * 262_144 + col * 16_384, 4096, t, t));
        records.push((
            key(1, Op::Read),
            (4 << 20) + i * 8192,
            8192,
            t + 5e-4,
            t + 6e-4,
        ));
        records.push((key(2, Op::Write), i * 100, 100, t, t));
        reads += 2;
    }
    let trace = Trace::from_records(records);
    let trace_path = dir.join("run.csv");
    let mut buf = Vec::new();
    trace.write_csv(&mut buf).unwrap();
    std::fs::write(&trace_path, buf).unwrap();
    let data = dir.join("data.bin");
    let bytes: Vec<u8> = (0..5u32 << 20).map(|i| (i % 251) as u8).collect();
    std::fs::write(&data, bytes).unwrap();
    (trace_path, data, reads)
}

fn json(cmd: &mut Command) -> serde_json::Value {
    let out = cmd.arg("--json").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}

fn u(v: &serde_json::Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing in {v}"))
}

#[test]
fn replay_reports_consistent_counters_for_every_policy() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, data, reads) = fixture(dir.path());
    for policy in ["none", "readahead", "stride", "markov", "pattern", "oracle"] {
        let v = json(
            replay(&trace, &data)
                .args(["--policy", policy, "--verify"])
                .args(FAST),
        );
        for key in [
            "policy",
            "io_time_s",
            "total_time_s",
            "hits",
            "late_hits",
            "misses",
            "coverage",
            "wasted_bytes",
            "model_bytes",
            "backend_requests",
            "backend_bytes",
            "analyzer_ns_per_request",
        ] {
            assert!(!v[key].is_null(), "{policy}: {key} missing in {v}");
        }
        // Accuracy is null exactly when nothing was prefetched ("–" in text).
        assert!(
            v.get("accuracy").is_some(),
            "{policy}: accuracy missing in {v}"
        );
        assert_eq!(
            v["accuracy"].is_null(),
            u(&v, "prefetched_bytes") == 0,
            "{policy}: {v}"
        );
        assert_eq!(v["policy"], policy);
        assert_eq!(u(&v, "requests") as usize, reads);
        assert_eq!(u(&v, "streams"), 2);
        assert_eq!(
            u(&v, "hits") + u(&v, "late_hits") + u(&v, "misses"),
            u(&v, "requests"),
            "{v}"
        );
        assert_eq!(
            u(&v, "prefetched_bytes"),
            u(&v, "used_bytes") + u(&v, "wasted_bytes")
        );
        let (io, total) = (
            v["io_time_s"].as_f64().unwrap(),
            v["total_time_s"].as_f64().unwrap(),
        );
        assert!(io > 0.0 && io <= total, "{v}");
        assert!(v["accuracy"]
            .as_f64()
            .is_none_or(|a| (0.0..=1.0).contains(&a)));
        if policy == "pattern" || policy == "oracle" {
            assert!(u(&v, "hits") + u(&v, "late_hits") > 0, "{v}");
        }
    }
    // One stream only.
    let v = json(
        replay(&trace, &data)
            .args(["--policy", "pattern", "--stream", "1"])
            .args(FAST),
    );
    assert_eq!(u(&v, "requests"), 60);
    assert_eq!(u(&v, "streams"), 1);
    // One CSV line per read, its outcomes adding up to the counters.
    let csv = dir.path().join("reads.csv");
    let v = json(
        replay(&trace, &data)
            .args(["--policy", "pattern", "--reads-csv"])
            .arg(&csv)
            .args(FAST),
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("index,stream,offset,len,outcome,io_us"));
    let outcomes: Vec<&str> = lines.map(|l| l.split(',').nth(4).unwrap()).collect();
    assert_eq!(outcomes.len() as u64, u(&v, "requests"));
    for (name, key) in [("hit", "hits"), ("late", "late_hits"), ("miss", "misses")] {
        let n = outcomes.iter().filter(|&&o| o == name).count() as u64;
        assert_eq!(n, u(&v, key), "{name}");
    }
    // The readable report names the counters.
    replay(&trace, &data)
        .args(["--policy", "stride"])
        .args(FAST)
        .assert()
        .success()
        .stdout(predicate::str::contains("hits / late / misses"));
}

#[test]
fn models_are_saved_and_loaded() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, data, _) = fixture(dir.path());
    for policy in ["markov", "pattern"] {
        let model = dir.path().join(format!("{policy}.model"));
        let first = json(
            replay(&trace, &data)
                .args(["--policy", policy, "--save-model"])
                .arg(&model)
                .args(FAST),
        );
        assert!(model.exists());
        let second = json(
            replay(&trace, &data)
                .args(["--policy", policy, "--model"])
                .arg(&model)
                .args(FAST),
        );
        if policy == "markov" {
            // Trained on this very run, the model predicts from the first request.
            assert!(
                u(&second, "used_bytes") > u(&first, "used_bytes"),
                "{second}"
            );
        }
        // A model does not fit another policy or another number of streams.
        replay(&trace, &data)
            .args(["--policy", "stride", "--model"])
            .arg(&model)
            .assert()
            .code(2);
        replay(&trace, &data)
            .args(["--policy", policy, "--stream", "0", "--model"])
            .arg(&model)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("stream models"));
    }
}

fn one_line_error(cmd: &mut Command, needle: &str) {
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("patio: error: "), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(needle), "{err} lacks {needle}");
}

#[test]
fn replay_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, data, _) = fixture(dir.path());
    let replay = |trace: &Path, data: &Path, policy: &str| {
        let mut c = replay(trace, data);
        c.args(["--policy", policy]);
        c
    };
    one_line_error(
        &mut replay(&trace, &dir.path().join("missing.bin"), "pattern"),
        "missing.bin",
    );
    let small = dir.path().join("small.bin");
    std::fs::write(&small, vec![0u8; 1000]).unwrap();
    one_line_error(&mut replay(&trace, &small, "pattern"), "reads up to byte");
    let writes = dir.path().join("writes.csv");
    std::fs::write(
        &writes,
        "module,file,rank,op,offset,length,start,end\nPOSIX,f,0,write,0,10,0,1\n",
    )
    .unwrap();
    one_line_error(&mut replay(&writes, &data, "pattern"), "no read requests");
    one_line_error(&mut replay(&trace, &data, "lru"), "unknown policy");
    one_line_error(
        replay(&trace, &data, "pattern").args(["--stream", "7"]),
        "read streams",
    );
    one_line_error(
        replay(&trace, &data, "none").arg("--latency-ms=-1"),
        "--latency-ms",
    );
    one_line_error(
        replay(&trace, &data, "none").arg("--latency-ms=1e12"),
        "more than a minute",
    );
    one_line_error(
        &mut replay(&trace, dir.path(), "none"),
        "not a regular file",
    );
    one_line_error(
        &mut replay(&dir.path().join("nope.csv"), &data, "none"),
        "nope.csv",
    );
}

#[test]
fn bench_prefetch_runs_every_policy_side_by_side() {
    let v = json(
        patio()
            .args([
                "bench",
                "prefetch",
                "--workload",
                "strided",
                "--requests",
                "60",
            ])
            .args(FAST),
    );
    assert_eq!(v["workload"], "strided");
    assert!(v["latency_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(v["compute_ratio"].as_f64(), Some(1.0));
    let policies = v["policies"].as_object().unwrap();
    let names: Vec<&str> = policies.keys().map(|k| k.as_str()).collect();
    for p in [
        "none",
        "readahead",
        "stride",
        "markov",
        "pattern",
        "pattern+model",
        "oracle",
    ] {
        assert!(names.contains(&p), "{names:?}");
        let r = &policies[p];
        assert_eq!(u(r, "requests"), 60);
        assert_eq!(u(r, "hits") + u(r, "late_hits") + u(r, "misses"), 60);
        assert!(r["io_time_reduction"].is_f64(), "{r}");
    }
    assert_eq!(policies["none"]["io_time_reduction"].as_f64(), Some(0.0));
    assert_eq!(v["training"], "other");
    // Several workloads: a list; the table is printed without --json.
    let v = json(
        patio()
            .args(["bench", "prefetch", "--workload", "random", "--workload"])
            .args(["pagoda-noisy", "--requests", "20"])
            .args(FAST),
    );
    assert_eq!(v["workloads"].as_array().unwrap().len(), 2);
    patio()
        .args([
            "bench",
            "prefetch",
            "--workload",
            "deltas-change",
            "--requests",
            "20",
        ])
        .args(FAST)
        .assert()
        .success()
        .stdout(predicate::str::contains("oracle").and(predicate::str::contains("I/O cut")));
    one_line_error(
        patio().args(["bench", "prefetch", "--workload", "sequential"]),
        "unknown workload",
    );
}

#[test]
fn memory_is_a_size_and_the_old_spelling_still_works() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, data, _) = fixture(dir.path());
    let report = json(replay(&trace, &data).args(["--policy", "pattern", "--memory", "3MiB"]));
    assert_eq!(u(&report, "cache_budget_bytes"), 3 << 20);
    // The deprecated per-unit option: the same budget, and one warning naming the new one.
    let out = replay(&trace, &data)
        .args(["--policy", "pattern", "--budget-mib", "3", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let again: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(u(&again, "cache_budget_bytes"), 3 << 20);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--budget-mib is deprecated") && err.contains("--memory 3MiB"),
        "{err}"
    );
    one_line_error(
        replay(&trace, &data).args(["--policy", "none", "--memory", "1MiB", "--budget-mib", "1"]),
        "give only --memory",
    );
    one_line_error(
        replay(&trace, &data).args(["--policy", "none", "--memory", "0"]),
        "--memory",
    );
}
