//! Tests of the replica sets serving reads without Python (`kbserve`).

use super::*;
use crate::kblog::{random_hex, MAGIC};

#[test]
fn json_as_python_writes_it() {
    let v = parse_json(r#"{"bandwidth": Infinity, "x": -Infinity}"#).unwrap();
    assert_eq!(v["bandwidth"], Value::Null);
    let s = striping_of(v.as_object().unwrap()).unwrap();
    assert!(s.bandwidth.is_infinite());
    assert_eq!(s.targets, Striping::lustre().targets);
    for bad in [r#"{"jitter": NaN}"#, r#"{"latency_far": "slow"}"#] {
        let v = parse_json(bad).unwrap();
        assert!(striping_of(v.as_object().unwrap()).is_err(), "{bad}");
    }
}

#[test]
fn hex_and_holds() {
    assert_eq!(hex_bytes("00ff10"), Some(vec![0, 255, 16]));
    assert_eq!(hex_bytes("0"), None);
    assert_eq!(hex_bytes("zz"), None);
    let blob = crate::kblog::ints_blob(&[5, 1, 3]);
    let h = holds_of("concat", &Value::Null, Some(&blob)).unwrap();
    assert!(matches!(h, Some(Holds::Points { linear }) if linear == vec![1, 3, 5]));
    let hexed: String = crate::kblog::ints_blob(&[0, 2, 4])
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let params = serde_json::json!({"axes_sets": [hexed.clone(), hexed], "axes": [1, 0]});
    let h = holds_of("concat", &params, None).unwrap();
    assert!(matches!(h, Some(Holds::Product { perm, .. }) if perm == vec![1, 0]));
    let t = holds_of("transposed", &serde_json::json!({"axes": [2, 0, 1]}), None).unwrap();
    assert!(matches!(t, Some(Holds::Transposed { perm }) if perm == vec![2, 0, 1]));
    assert!(holds_of("transposed", &Value::Null, None)
        .unwrap()
        .is_none());
    assert!(holds_of("unknown", &Value::Null, None).unwrap().is_none());
}

#[test]
fn ranges_and_checksum_of_a_layout() {
    let dir = std::env::temp_dir().join(format!("patio-kbserve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("f.bin");
    let bytes: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&file, &bytes).unwrap();
    // Two 2x2 chunks of 8-byte items (32 bytes each), one unallocated, stored out of
    // grid order: the ranges come ascending.
    let l = Layout::chunked(&[2, 6], 8, &[2, 2], &[1000, -1, 100], None).unwrap();
    assert_eq!(storage_ranges(&l), vec![(100, 32), (1000, 32)]);
    let mut h = crc32fast::Hasher::new();
    h.update(&bytes[100..132]);
    h.update(&bytes[1000..1032]);
    assert_eq!(
        ranges_crc(&file, &storage_ranges(&l)).unwrap(),
        h.finalize()
    );
    let c = Layout::contiguous(&[3, 4], 2, 64).unwrap();
    assert_eq!(storage_ranges(&c), vec![(64, 24)]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn versions_compare_on_the_current_keys() {
    let v = FileVersion {
        dev: 1,
        ino: 2,
        size: 3,
        mtime_ns: 4,
        ctime_ns: 5,
    };
    let now = version_map(&v);
    let mut rec = now.clone();
    rec.insert("crc".into(), 9.into());
    assert!(same_version(&now, &rec));
    rec.insert("size".into(), 4.into());
    assert!(!same_version(&now, &rec));
}

#[test]
fn a_served_log_is_a_version_2_record_log_of_one_frame_and_its_end() {
    let counts = vec![
        Served {
            id: 3,
            uses: 7,
            benefit: 0.25,
            last_used: 1.5e9,
            path: "/kb/replicas/r3.h5".into(),
        },
        Served {
            id: 9,
            uses: 1,
            benefit: 0.0,
            last_used: 1.5e9,
            path: String::new(),
        },
    ];
    let log = served_log(&counts);
    assert_eq!(&log[..4], MAGIC);
    assert_eq!(u16::from_le_bytes([log[4], log[5]]), 2);
    let n = u32::from_le_bytes(log[8..12].try_into().unwrap()) as usize;
    let payload = &log[16..16 + n];
    assert_eq!(
        u32::from_le_bytes(log[12..16].try_into().unwrap()),
        crc32fast::hash(payload)
    );
    assert_eq!(&payload[..8], &[3, 0, 0, 0, 2, 0, 0, 0]);
    let first = &payload[8..];
    assert_eq!(i64::from_le_bytes(first[..8].try_into().unwrap()), 3);
    assert_eq!(i64::from_le_bytes(first[8..16].try_into().unwrap()), 7);
    assert_eq!(f64::from_le_bytes(first[16..24].try_into().unwrap()), 0.25);
    assert_eq!(f64::from_le_bytes(first[24..32].try_into().unwrap()), 1.5e9);
    assert_eq!(u16::from_le_bytes([first[32], first[33]]), 18);
    assert_eq!(&first[34..52], b"/kb/replicas/r3.h5");
    // 34 + 0 bytes for the second entry, then the end frame.
    assert_eq!(n, 8 + (34 + 18) + 34);
    assert_eq!(&log[16 + n..], &crate::kblog::encode_end()[..]);

    let dir = std::env::temp_dir().join(format!("patio-served-{}", random_hex()));
    let a = write_served_log(&dir, &counts).unwrap();
    let b = write_served_log(&dir, &counts[1..]).unwrap();
    assert_ne!(a, b);
    assert_eq!(std::fs::read(&a).unwrap(), log);
    assert!(a.file_name().unwrap().to_str().unwrap().ends_with(".log"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A knowledge base database at `path` with the tables serving reads and one transposed
/// replica row per `(id, dataset, file, state)`.
fn replica_db(path: &Path, replicas: &[(i64, &str, &str, &str)]) -> Connection {
    let db = Connection::open(path).unwrap();
    db.execute_batch(
        "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT);
         INSERT INTO meta VALUES('schema_version', '2');
         CREATE TABLE replica(id INTEGER PRIMARY KEY, dset TEXT, kind TEXT, params TEXT,
             points BLOB, path TEXT, source TEXT, state TEXT);",
    )
    .unwrap();
    for (id, dset, file, state) in replicas {
        db.execute(
            "INSERT INTO replica VALUES(?1, ?2, 'transposed', '{}', NULL, ?3, '{}', ?4)",
            rusqlite::params![id, dset, file, state],
        )
        .unwrap();
    }
    db
}

#[test]
fn sets_come_from_the_snapshot_until_the_database_changes() {
    let dir = std::env::temp_dir().join(format!("patio-ready-{}", random_hex()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("run.h5");
    std::fs::write(&source, b"not read here").unwrap();
    let path = kb_path(&source);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let db = replica_db(&path, &[(1, "/other", "r1.h5", "ready")]);
    assert!(from_snapshot(&path, "/d").is_none());
    assert!(ServeSet::open(&source, "/d").unwrap().is_none());
    let (rows, _) = from_snapshot(&path, "/d").expect("kept while unchanged");
    assert!(rows.is_empty());
    let (rows, device) = from_snapshot(&path, "/other").unwrap();
    assert_eq!(rows.len(), 1);
    assert!(device.is_err()); // this database records no storage model
    assert!(ServeSet::open(&source, "/other").is_err()); // as read from the database

    // A replica of /d becomes ready: the database changed, it is read anew.
    db.execute(
        "INSERT INTO replica VALUES(2, '/d', 'transposed', '{}', NULL, 'r2.h5', '{}', 'ready')",
        [],
    )
    .unwrap();
    assert!(from_snapshot(&path, "/d").is_none());
    assert!(ServeSet::open(&source, "/d").is_err()); // read anew: now it has one
    assert_eq!(from_snapshot(&path, "/d").unwrap().0.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn counts_inherited_over_a_fork_are_the_parents() {
    let dir = std::env::temp_dir().join(format!("patio-fork-{}", random_hex()));
    std::fs::create_dir_all(&dir).unwrap();
    let source = dir.join("run.h5");
    std::fs::write(&source, b"x").unwrap();
    let replica = KbReplica {
        id: 4,
        kind: "transposed".into(),
        path: dir.join("r4.h5"),
        holds: Holds::Everything,
        source: Map::new(),
    };
    let mut set = ServeSet {
        db: None,
        source: source.clone(),
        dset: "/d".into(),
        version: FileVersion::of(&source).unwrap(),
        replicas: vec![replica],
        model: Striping::lustre(),
        consts: Constants {
            t_pg: 1.0,
            t_chk: 1.0,
            t_lat: 0.0,
            t_dec: DEFAULT_T_DEC,
        },
        uses: vec![(0, 0.0)],
        pid: std::process::id(),
        notes: Vec::new(),
    };
    let records = kb_dir(&source).join("records");
    let served = |records: &Path| -> Vec<Vec<u8>> {
        std::fs::read_dir(records)
            .map(|d| {
                d.map(|e| std::fs::read(e.unwrap().path()).unwrap())
                    .collect()
            })
            .unwrap_or_default()
    };
    set.used(0, 0.5);
    set.used(0, 0.5);
    set.pid = set.pid.wrapping_add(1); // as in a child forked after those two reads
    set.flush().unwrap();
    assert!(
        served(&records).is_empty(),
        "the child wrote its parent's counts"
    );
    set.pid = set.pid.wrapping_add(1);
    set.used(0, 0.25); // the child's own read
    set.flush().unwrap();
    let logs = served(&records);
    assert_eq!(logs.len(), 1);
    let first = &logs[0][16 + 8..];
    assert_eq!(i64::from_le_bytes(first[..8].try_into().unwrap()), 4);
    assert_eq!(i64::from_le_bytes(first[8..16].try_into().unwrap()), 1);
    assert_eq!(f64::from_le_bytes(first[16..24].try_into().unwrap()), 0.25);
    std::fs::remove_dir_all(&dir).unwrap();
    let _ = std::fs::remove_dir_all(kb_dir(&source));
}

#[test]
fn the_unlocked_read_is_trusted_only_without_a_journal_and_with_the_same_header() {
    let dir = std::env::temp_dir().join(format!("patio-unlocked-{}", random_hex()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("kb.sqlite");
    let db = replica_db(
        &path,
        &[(1, "/a", "r1.h5", "ready"), (2, "/a", "r2.h5", "stale")],
    );
    let before = kb_state(&path).expect("a quiet rollback-journal database");
    let (ready, _) = read_unlocked(&path).expect("trusted");
    assert_eq!(ready.len(), 1);
    assert_eq!(ready["/a"].iter().map(|r| r.0).collect::<Vec<_>>(), vec![1]);
    // A journal beside the database: a write may be in progress.
    let journal = dir.join("kb.sqlite-journal");
    std::fs::write(&journal, b"").unwrap();
    assert!(kb_state(&path).is_none() && read_unlocked(&path).is_none());
    std::fs::remove_file(&journal).unwrap();
    // A commit advances the change counter: the header's state differs.
    db.execute("UPDATE replica SET state='ready' WHERE id=2", [])
        .unwrap();
    assert_ne!(kb_state(&path).unwrap(), before);
    let (ready, _) = read_unlocked(&path).unwrap();
    assert_eq!(ready["/a"].len(), 2);
    // The same bytes as another file (a knowledge base removed and made again): the
    // header is the same, the state is not.
    drop(db);
    let now = kb_state(&path).unwrap();
    let copy = dir.join("kb.sqlite.new");
    std::fs::copy(&path, &copy).unwrap();
    std::fs::rename(&copy, &path).unwrap();
    let again = kb_state(&path).unwrap();
    assert_eq!(again[40..], now[40..], "same header bytes");
    assert_ne!(again, now);
    std::fs::remove_dir_all(&dir).unwrap();
}
