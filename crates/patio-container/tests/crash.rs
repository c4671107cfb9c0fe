//! Crash safety and damaged inputs: a writer process killed with SIGKILL at random
//! points loses at most its unflushed tail; torn, truncated and corrupted index logs
//! are detected, the intact part is used and the loss is reported; bad containers
//! give errors, not panics.

use patio_container::{check, layout, IndexMode, Reader, Writer};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

const BLOCK: usize = 1000;

fn block(i: u64) -> Vec<u8> {
    (0..BLOCK as u64).map(|j| (i * 7 + j) as u8 | 1).collect()
}

/// Offset of block `i`: two interleaved strided phases so the index has patterns.
fn offset(i: u64) -> u64 {
    i * 2 * BLOCK as u64
}

/// The child side: runs only when the parent sets PATIO_CRASH_DIR. Writes blocks,
/// flushing every few, and reports each flush on stdout.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("PATIO_CRASH_DIR") else {
        return;
    };
    let every: u64 = std::env::var("PATIO_CRASH_EVERY").unwrap().parse().unwrap();
    let mut w = Writer::create(Path::new(&dir), IndexMode::Pattern).unwrap();
    w.set_index_buffer(5);
    for i in 0..1_000_000u64 {
        w.write_at(offset(i), &block(i)).unwrap();
        if (i + 1) % every == 0 {
            w.flush().unwrap();
            println!("flushed {}", i + 1);
        }
    }
}

#[test]
fn sigkill_loses_only_the_unflushed_tail() {
    let exe = std::env::current_exe().unwrap();
    for round in 0..6u64 {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("c");
        let every = 3 + round * 5;
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "crash_child",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env("PATIO_CRASH_DIR", &dir)
            .env("PATIO_CRASH_EVERY", every.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stop_after = 2 + round * 3;
        let mut flushed = 0u64;
        let mut seen = 0;
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if let Some(n) = line.strip_prefix("flushed ") {
                flushed = n.trim().parse().unwrap();
                seen += 1;
                if seen == stop_after {
                    break;
                }
            }
        }
        // Let the writer run on a little (round-dependent), then kill it mid-stream.
        std::thread::sleep(std::time::Duration::from_micros(round * 300));
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(flushed > 0);

        let r = Reader::open(&dir).unwrap();
        assert!(r.size() >= offset(flushed - 1) + BLOCK as u64);
        for i in 0..flushed {
            let mut buf = vec![0u8; BLOCK];
            assert_eq!(r.read_at(&mut buf, offset(i)).unwrap(), BLOCK);
            assert_eq!(buf, block(i), "round {round}: flushed block {i} lost");
        }
        // Whatever survived beyond the flushed part is either the right data or absent.
        let mut i = flushed;
        while offset(i) < r.size() {
            let mut buf = vec![0u8; BLOCK];
            let n = r.read_at(&mut buf, offset(i)).unwrap();
            assert!(buf[..n] == block(i)[..n] || buf[..n].iter().all(|&b| b == 0));
            i += 1;
        }
        // A torn tail record is reported by check, never silently misread.
        let report = check(&dir).unwrap();
        assert_eq!(report.damage.len(), r.damage().len());
    }
}

/// A container with one writer that flushed `records` records of 4 blocks each.
fn container(dir: &Path, records: u64) {
    let mut w = Writer::create(dir, IndexMode::Pattern).unwrap();
    for i in 0..records * 4 {
        w.write_at(offset(i), &block(i)).unwrap();
        if (i + 1) % 4 == 0 {
            w.flush().unwrap();
        }
    }
    w.close().unwrap();
}

fn index_log(dir: &Path) -> std::path::PathBuf {
    let names = layout::list_writers(dir).unwrap();
    layout::index_path(dir, &names[0])
}

/// Blocks readable from the reader, counted from the start.
fn intact_blocks(r: &Reader) -> u64 {
    let mut i = 0;
    loop {
        let mut buf = vec![0u8; BLOCK];
        if r.read_at(&mut buf, offset(i)).unwrap() < BLOCK || buf != block(i) {
            return i;
        }
        i += 1;
    }
}

#[test]
fn truncated_index_logs_keep_every_whole_record() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    container(&dir, 6);
    let log = index_log(&dir);
    let full = std::fs::read(&log).unwrap();
    // Record boundaries: where a cut loses nothing.
    let mut whole = 0;
    for cut in (0..=full.len()).rev() {
        std::fs::write(&log, &full[..cut]).unwrap();
        let r = Reader::open(&dir).unwrap();
        let blocks = intact_blocks(&r);
        assert_eq!(blocks % 4, 0, "cut {cut}: a record was half used");
        if cut == full.len() {
            assert_eq!(blocks, 24);
            assert!(r.damage().is_empty());
            whole = blocks;
        } else {
            assert!(blocks <= whole);
        }
        let damaged = !r.damage().is_empty();
        assert_eq!(damaged, !check(&dir).unwrap().is_clean(), "cut {cut}");
        if damaged {
            let d = &r.damage()[0];
            assert_eq!(d.path, log);
            assert!(d.offset <= cut as u64);
        }
    }
}

#[test]
fn corrupted_records_are_reported_and_the_rest_used() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    container(&dir, 6);
    let log = index_log(&dir);
    let full = std::fs::read(&log).unwrap();
    for at in (8..full.len()).step_by(3) {
        let mut bad = full.clone();
        bad[at] ^= 0x5a;
        std::fs::write(&log, &bad).unwrap();
        let r = Reader::open(&dir).unwrap();
        assert!(!r.damage().is_empty(), "flip at {at} went unnoticed");
        assert!(intact_blocks(&r) < 24);
        assert!(!check(&dir).unwrap().is_clean());
    }
    std::fs::write(&log, &full).unwrap();
    assert!(check(&dir).unwrap().is_clean());
}

#[test]
fn bad_containers_give_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let plain = tmp.path().join("plain");
    std::fs::create_dir(&plain).unwrap();
    let e = Reader::open(&plain).err().unwrap().to_string();
    assert!(e.contains("not a patio container"), "{e}");
    let missing = tmp.path().join("missing");
    assert!(Reader::open(&missing).is_err());
    assert!(Writer::open(&missing).is_err());

    let dir = tmp.path().join("c");
    container(&dir, 2);
    std::fs::write(dir.join(layout::MARKER), b"garbage").unwrap();
    let e = Reader::open(&dir).err().unwrap().to_string();
    assert!(e.contains("PATIO") && e.contains("byte"), "{e}");

    // Data log shorter than its index: the read fails and names the data log.
    let dir = tmp.path().join("d");
    container(&dir, 2);
    let names = layout::list_writers(&dir).unwrap();
    let data = layout::data_path(&dir, &names[0]);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&data)
        .unwrap()
        .set_len(10)
        .unwrap();
    let r = Reader::open(&dir).unwrap();
    let mut buf = vec![0u8; 4 * BLOCK];
    let e = r.read_at(&mut buf, offset(1)).err().unwrap().to_string();
    assert!(e.contains("data.") && e.contains("ends before"), "{e}");
    assert!(!check(&dir).unwrap().is_clean());

    // Writes beyond 2^63 are refused.
    let mut w = Writer::open(&dir).unwrap();
    assert!(w.write_at(i64::MAX as u64, b"x").is_err());
}
