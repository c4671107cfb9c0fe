//! Tests of the registration: round trip, corruption, a stale source, a missing or
//! damaged container; and the fixture the C ABI's tests share (a source file of
//! random bytes and a container holding them in a pattern-contiguous order).

use super::*;
use patio_container::{IndexMode, Writer};
use proptest::prelude::*;

/// Deterministic bytes (a 64-bit LCG), so that two blocks never look alike.
pub(crate) fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 56) as u8
        })
        .collect()
}

/// Writes `data` as the source `dir/name` and as the container `container`, the
/// pieces of `piece` bytes stored strided (every 4th piece first, as a reorganization
/// of a 4-way strided pattern would), and registers the container.
pub(crate) fn reorganized(
    dir: &Path,
    name: &str,
    data: &[u8],
    container: &Path,
    piece: usize,
) -> (PathBuf, Registration) {
    let source = dir.join(name);
    std::fs::write(&source, data).unwrap();
    let mut w = Writer::create(container, IndexMode::Pattern).unwrap();
    let pieces = data.len().div_ceil(piece);
    for start in 0..4 {
        for i in (start..pieces).step_by(4) {
            let a = i * piece;
            let b = (a + piece).min(data.len());
            w.write_at(a as u64, &data[a..b]).unwrap();
        }
    }
    w.close().unwrap();
    let version = FileVersion::of(&source).unwrap();
    let reg = register(&source, container, &version).unwrap();
    (source, reg)
}

fn served(source: &Path) -> bool {
    matches!(resolve(source).unwrap(), Resolved::Served { .. })
}

fn bypass_reason(source: &Path) -> String {
    match resolve(source).unwrap() {
        Resolved::Bypassed { reason, .. } => reason,
        Resolved::Served { .. } => panic!("served"),
        Resolved::NotRegistered => panic!("not registered"),
    }
}

#[test]
fn a_registration_reads_back_with_the_container_relative_to_the_source() {
    let t = tempfile::tempdir().unwrap();
    let data = bytes(50_000, 1);
    let (source, reg) = reorganized(t.path(), "data.bin", &data, &t.path().join("data.pc"), 1000);
    assert_eq!(reg.path, t.path().join(".data.bin.patio-reorg"));
    assert!(reg.relative);
    let back = lookup(&source).unwrap().unwrap();
    assert_eq!(back, reg);
    assert_eq!(back.container, t.path().join("data.pc"));
    assert_eq!(back.version, FileVersion::of(&source).unwrap());
    assert!(served(&source));
    let st = status(&source).unwrap().unwrap();
    assert!(st.source_matches && st.served && st.reason.is_none());
    assert!(st.patterns.unwrap() >= 1);
    // Moving the directory keeps the pair together.
    let moved = t.path().join("moved");
    std::fs::create_dir(&moved).unwrap();
    std::fs::rename(t.path().join("data.pc"), moved.join("data.pc")).unwrap();
    std::fs::rename(&reg.path, moved.join(".data.bin.patio-reorg")).unwrap();
    std::fs::rename(&source, moved.join("data.bin")).unwrap();
    // The registration moved along still finds the container beside it (whether a
    // rename moved the source's change time depends on the file system).
    let found = lookup(&moved.join("data.bin")).unwrap().unwrap();
    assert_eq!(found.container, moved.join("data.pc"));
    let v = FileVersion::of(&moved.join("data.bin")).unwrap();
    register(&moved.join("data.bin"), &moved.join("data.pc"), &v).unwrap();
    assert!(served(&moved.join("data.bin")));
}

#[test]
fn a_container_outside_the_directory_is_stored_absolute() {
    let t = tempfile::tempdir().unwrap();
    let other = tempfile::tempdir().unwrap();
    let (source, reg) = reorganized(t.path(), "f", &bytes(9000, 2), &other.path().join("c"), 512);
    assert!(!reg.relative);
    assert!(reg.container.is_absolute());
    assert!(served(&source));
    assert!(unregister(&source).unwrap());
    assert!(!unregister(&source).unwrap());
    assert!(lookup(&source).unwrap().is_none());
    assert!(matches!(resolve(&source).unwrap(), Resolved::NotRegistered));
    assert!(status(&source).unwrap().is_none());
}

#[test]
fn a_stale_source_is_bypassed_with_the_reason() {
    let t = tempfile::tempdir().unwrap();
    let data = bytes(20_000, 3);
    let (source, _) = reorganized(t.path(), "s", &data, &t.path().join("s.pc"), 700);
    // Rewritten in place with the same bytes: the change time moved.
    std::thread::sleep(std::time::Duration::from_millis(20));
    std::fs::write(&source, &data).unwrap();
    let why = bypass_reason(&source);
    assert!(
        why.contains("not the version") && why.contains("s.pc"),
        "{why}"
    );
    let st = status(&source).unwrap().unwrap();
    assert!(!st.source_matches && !st.served && st.reason.is_some());
    // Touched only.
    let v = FileVersion::of(&source).unwrap();
    register(&source, &t.path().join("s.pc"), &v).unwrap();
    assert!(served(&source));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let f = std::fs::File::options().write(true).open(&source).unwrap();
    f.set_modified(std::time::SystemTime::now()).unwrap();
    drop(f);
    assert!(bypass_reason(&source).contains("modification time"));
    // Removed.
    std::fs::remove_file(&source).unwrap();
    assert!(bypass_reason(&source).contains("cannot be read"));
}

#[test]
fn a_missing_damaged_or_other_size_container_is_bypassed() {
    let t = tempfile::tempdir().unwrap();
    let data = bytes(30_000, 4);
    let c = t.path().join("x.pc");
    let (source, reg) = reorganized(t.path(), "x", &data, &c, 1000);
    assert!(served(&source));
    // Another size: a container of other bytes registered for the source.
    let other = t.path().join("other.pc");
    let mut w = Writer::create(&other, IndexMode::Pattern).unwrap();
    w.write_at(0, &data[..100]).unwrap();
    w.close().unwrap();
    register(&source, &other, &reg.version).unwrap();
    let why = bypass_reason(&source);
    assert!(why.contains("holds 100 bytes"), "{why}");
    // Deleted.
    register(&source, &c, &reg.version).unwrap();
    std::fs::remove_dir_all(&c).unwrap();
    let why = bypass_reason(&source);
    assert!(why.contains("x.pc"), "{why}");
    let st = status(&source).unwrap().unwrap();
    assert!(st.source_matches && !st.served && st.patterns.is_none());
}

#[test]
fn a_truncated_or_corrupt_registration_is_a_typed_error_naming_it() {
    let t = tempfile::tempdir().unwrap();
    let (source, reg) = reorganized(t.path(), "d", &bytes(5000, 5), &t.path().join("d.pc"), 100);
    let good = std::fs::read(&reg.path).unwrap();
    for cut in [0, 3, 19, 20, good.len() - 1] {
        std::fs::write(&reg.path, &good[..cut]).unwrap();
        let e = lookup(&source).unwrap_err();
        assert!(matches!(e, ReorgError::BadRegistration { .. }), "{e}");
        assert!(e.to_string().contains(".d.patio-reorg"), "{e}");
        assert!(matches!(
            resolve(&source).unwrap(),
            Resolved::Bypassed { .. }
        ));
    }
    for at in 0..good.len() {
        let mut bad = good.clone();
        bad[at] ^= 0x40;
        std::fs::write(&reg.path, &bad).unwrap();
        let e = lookup(&source).unwrap_err();
        assert!(
            matches!(e, ReorgError::BadRegistration { .. }),
            "byte {at}: {e}"
        );
    }
    std::fs::write(&reg.path, &good).unwrap();
    assert!(served(&source));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_version_and_path_round_trips(
        dev in any::<u64>(), ino in any::<u64>(), size in any::<u64>(),
        mtime in any::<i64>(), ctime in any::<i64>(), created in any::<u64>(),
        name in "[a-zA-Z0-9._-]{1,40}", relative in any::<bool>(),
    ) {
        let version = FileVersion { dev, ino, size, mtime_ns: mtime as i128 * 7, ctime_ns: ctime as i128 };
        let stored = if relative { PathBuf::from(&name) } else { Path::new("/abs/dir").join(&name) };
        let bytes = encode(&stored, relative, &version, created);
        let reg = decode(Path::new("/d/.s.patio-reorg"), Path::new("/d/s"), &bytes).unwrap();
        prop_assert_eq!(reg.version, version);
        prop_assert_eq!(reg.created_ns, created);
        prop_assert_eq!(reg.relative, relative);
        let want = if relative { Path::new("/d").join(&name) } else { stored };
        prop_assert_eq!(reg.container, want);
    }
}

#[test]
fn a_symbolic_link_finds_the_registration_of_its_target() {
    let t = tempfile::tempdir().unwrap();
    let data = bytes(12_000, 6);
    let sub = t.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let (source, reg) = reorganized(&sub, "t", &data, &sub.join("t.pc"), 500);
    let link = t.path().join("link");
    std::os::unix::fs::symlink(&source, &link).unwrap();
    let found = lookup(&link).unwrap().unwrap();
    assert_eq!(found.path, reg.path.canonicalize().unwrap());
    assert_eq!(found.container, sub.canonicalize().unwrap().join("t.pc"));
    assert!(served(&link));
    assert!(unregister(&link).unwrap());
    assert!(!reg.path.exists());
    assert!(matches!(resolve(&link).unwrap(), Resolved::NotRegistered));
}

#[test]
fn a_damaged_container_is_bypassed() {
    let t = tempfile::tempdir().unwrap();
    let c = t.path().join("g.pc");
    let (source, _) = reorganized(t.path(), "g", &bytes(40_000, 8), &c, 1000);
    let index = std::fs::read_dir(&c)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("index.")
        })
        .expect("an index log");
    let mut raw = std::fs::read(&index).unwrap();
    let last = raw.len() - 1;
    raw[last] ^= 0xFF;
    std::fs::write(&index, &raw).unwrap();
    let why = bypass_reason(&source);
    assert!(why.contains("g.pc"), "{why}");
}

#[test]
fn what_a_killed_registration_left_is_removed_by_the_next() {
    let t = tempfile::tempdir().unwrap();
    let host = patio_container::layout::host_name();
    // A process id that does not exist (above the kernel's pid_max), and this process.
    let dead = t
        .path()
        .join(format!(".k.patio-reorg.tmp-{host}.2147483646-1"));
    let alive = t.path().join(format!(
        ".k.patio-reorg.tmp-{host}.{}-1",
        std::process::id()
    ));
    std::fs::write(&dead, b"half").unwrap();
    std::fs::write(&alive, b"half").unwrap();
    let (_, reg) = reorganized(t.path(), "k", &bytes(3000, 12), &t.path().join("k.pc"), 100);
    assert!(!dead.exists() && alive.exists() && reg.path.exists());
}
