//! Tests of the container mount's parts without the kernel (the mount itself is
//! tested by mounting, in tests/test_mount_container.py).

use super::state::{Handle, Shared};
use super::*;
use crate::fusekit::lock;
use fuser::FileHandle;
use patio_container::{tools, Writer};
use std::fs;
use std::sync::atomic::Ordering;
use std::sync::Mutex;

#[test]
fn mount_options_are_parsed_or_refused_with_a_reason() {
    let (opts, other) = parse_options(&["ro,noatime".into(), "allow_other".into()]).unwrap();
    assert_eq!(opts, vec![MountOption::RO, MountOption::NoAtime]);
    assert!(other);
    let (opts, other) = parse_options(&["fsname=ckpt,default_permissions".into()]).unwrap();
    assert_eq!(opts, vec![MountOption::FSName("ckpt".into())]);
    assert!(!other);
    let e = parse_options(&["direct_io".into()])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("-o direct_io") && e.contains("unsupported"),
        "{e}"
    );
}

#[test]
fn bad_backends_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let msg = |p: &Path| check_backend(p).unwrap_err().to_string();
    let missing = dir.path().join("nope");
    assert!(msg(&missing).contains("does not exist"));
    let file = dir.path().join("f");
    fs::write(&file, b"x").unwrap();
    assert!(msg(&file).contains("not a directory"));
    let c = dir.path().join("c");
    layout::create(&c, IndexMode::Pattern).unwrap();
    assert!(msg(&c).contains("itself a patio container"));
    assert_eq!(
        check_backend(dir.path()).unwrap(),
        fs::canonicalize(dir.path()).unwrap()
    );
}

/// Drives the file system's state machine without the kernel: two processes
/// write interleaved blocks, a read publishes them, a truncation closes writers.
#[test]
fn writers_per_process_publish_on_read_and_close_on_release() {
    let dir = tempfile::tempdir().unwrap();
    let fs = ContainerFs::new(dir.path().to_path_buf(), IndexMode::Pattern);
    let s = &fs.shared;
    let rel = PathBuf::from("f");
    layout::create(&s.full(&rel), IndexMode::Pattern).unwrap();
    // Two handles of two "processes" (bypassing Request: the handle's opener pid
    // is what writes use when the pid matches).
    let open = |pid: u32| {
        let file = Shared::state(&mut lock(&s.files), &s.root, &rel);
        lock(&file.inner).handles += 1;
        let w = lock(&file.inner).procs.entry(pid).or_default().clone();
        lock(&w).handles += 1;
        let fh = s.next_fh.fetch_add(1, Ordering::Relaxed);
        s.handles.insert(
            fh,
            Handle {
                file,
                opener: pid,
                opener_writing: Some(w),
                pids: Mutex::new(vec![pid]),
            },
        );
        FileHandle(fh)
    };
    let (a, b) = (open(100), open(200));
    let write = |fh: FileHandle, pid: u32, off: u64, byte: u8| {
        let h = s.handle(fh).unwrap();
        let w = s.writing_for(&h, pid);
        let mut g = lock(&w);
        if g.writer.is_none() {
            g.writer = Some(Writer::open(&h.file.dir()).unwrap());
        }
        g.writer
            .as_mut()
            .unwrap()
            .write_at(off, &[byte; 4096])
            .unwrap();
        g.dirty = true;
        g.unsynced = true;
        h.file.live_end.fetch_max(off + 4096, Ordering::AcqRel);
        h.file.unpublished.fetch_add(1, Ordering::AcqRel);
    };
    for i in 0..8u64 {
        write(a, 100, i * 8192, 1);
        write(b, 200, i * 8192 + 4096, 2);
    }
    let attr = s.attr_at(5, &s.full(&rel), None).unwrap();
    assert_eq!(
        attr.size, 65536,
        "live writers' ends count before any flush"
    );
    let got = s.read(a, 0, 65536).unwrap();
    assert_eq!(got.len(), 65536);
    for (i, chunk) in got.chunks(4096).enumerate() {
        assert!(chunk.iter().all(|&x| x == 1 + (i % 2) as u8), "block {i}");
    }
    assert_eq!(layout::list_writers(&s.full(&rel)).unwrap().len(), 2);
    // Truncation publishes both writers and lets them write on; the size follows,
    // from the meta files alone.
    let f = s.kept(&rel).unwrap();
    s.truncate(&f, 10_000).unwrap();
    assert_eq!(s.attr_at(5, &s.full(&rel), None).unwrap().size, 10_000);
    assert!(lock(&f.inner)
        .procs
        .values()
        .all(|w| lock(w).writer.is_some()));
    assert!(tools::stat(&s.full(&rel)).unwrap().from_meta);
    write(a, 100, 20_000, 3);
    assert_eq!(s.read(b, 16_384, 8192).unwrap().len(), 24_096 - 16_384);
    assert_eq!(s.read(b, 20_000, 10).unwrap(), vec![3u8; 10]);
    s.release(a);
    s.release(b);
    assert!(s.kept(&rel).is_none(), "the last release forgets the file");
    assert_eq!(tools::stat(&s.full(&rel)).unwrap().size, 24_096);
    assert_eq!(layout::list_writers(&s.full(&rel)).unwrap().len(), 2);
    let summary = s.finish(Ended::Unmounted);
    assert_eq!(summary.flushed_at_unmount, 0);
}
