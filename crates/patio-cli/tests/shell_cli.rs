//! `patio completions` and `patio man`: generated from the CLI definition, so every
//! subcommand appears, and a bad shell name is one clear error.

use assert_cmd::Command;
use predicates::prelude::*;

#[test]
fn completions_name_every_subcommand() {
    for shell in ["bash", "zsh", "fish"] {
        let out = Command::cargo_bin("patio")
            .unwrap()
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}");
        let script = String::from_utf8(out.stdout).unwrap();
        for sub in ["analyze", "mount", "prefetch", "reorg", "store", "trace"] {
            assert!(script.contains(sub), "{shell} completion lacks {sub}");
        }
    }
}

#[test]
fn completions_refuse_an_unknown_shell() {
    Command::cargo_bin("patio")
        .unwrap()
        .args(["completions", "nosh"])
        .assert()
        .failure()
        .stderr(predicate::str::contains("invalid value 'nosh'"));
}

#[test]
fn man_writes_a_page_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("man1");
    Command::cargo_bin("patio")
        .unwrap()
        .args(["man", "--output"])
        .arg(&out)
        .assert()
        .success();
    for page in [
        "patio.1",
        "patio-mount-prefetch.1",
        "patio-reorg-apply.1",
        "patio-trace.1",
    ] {
        let text = std::fs::read_to_string(out.join(page)).unwrap();
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page} is not roff"
        );
    }
}
