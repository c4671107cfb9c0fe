//! The progress observers of the trace writers (`blockset::encode_observed`,
//! `ptrace::encode_observed`, `Trace::write_csv_observed`): they write exactly what the
//! plain writers write, and report counts that start at 0 of a pass's total, never go
//! back within a pass, never pass its total and end at it.

use patio_core::blockset::{self, Options};
use patio_core::trace::{Op, StreamKey, Trace};
use patio_core::{ptrace, Detector};

/// A small deterministic generator (xorshift64*): offsets spread over 2^40 bytes.
struct Rng(u64);

impl Rng {
    fn offset(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 24
    }
}

/// Splits `(done, total)` reports into passes (a pass starts at done == 0) and checks
/// each: monotone, within its total, ending at it. Returns each pass's total.
fn passes(reports: &[(u64, u64)]) -> Vec<u64> {
    let mut totals = Vec::new();
    let mut last: Option<(u64, u64)> = None;
    for &(done, total) in reports {
        assert!(done <= total, "{done} of {total}");
        match last {
            Some((d, t)) if done != 0 || d == 0 => {
                assert_eq!(t, total, "the total changed within a pass");
                assert!(done >= d, "went back from {d} to {done}");
            }
            Some((d, t)) => assert_eq!(d, t, "a pass ended at {d} of {t}"),
            None => assert_eq!(done, 0, "the first report is not 0"),
        }
        if done == 0 && last.is_none_or(|(d, _)| d != 0) {
            totals.push(total);
        }
        last = Some((done, total));
    }
    let (d, t) = last.expect("at least one report");
    assert_eq!(d, t, "the last pass ended at {d} of {t}");
    totals
}

fn random_columns(rng: &mut Rng, n: usize) -> (Vec<u64>, Vec<u64>) {
    let offsets = (0..n).map(|_| rng.offset()).collect();
    (offsets, vec![4096; n])
}

/// The reports of encoding `columns`, checked to write what the plain encoder writes.
fn observed(columns: &[(&[u64], &[u64])]) -> Vec<(u64, u64)> {
    let opts = Options::default();
    let mut reports = Vec::new();
    let bytes = blockset::encode_observed(columns, &Detector::default(), &opts, &mut |d, t| {
        reports.push((d, t))
    });
    assert_eq!(
        bytes,
        blockset::encode(columns, &Detector::default(), &opts)
    );
    reports
}

#[test]
fn blockset_reports_every_block_of_one_pass() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ 3);
    let (a, la) = random_columns(&mut rng, 40_000);
    let (b, lb) = random_columns(&mut rng, 30_000);
    let reports = observed(&[(&a, &la), (&b, &lb)]);
    assert_eq!(passes(&reports), vec![70_000]);
    // Random offsets fill many blocks: progress is reported along the way.
    assert!(reports.len() > 3, "{reports:?}");
}

#[test]
fn blockset_reports_stored_requests_then_a_pass_without_copies() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ 4);
    let (a, la) = random_columns(&mut rng, 20_000);
    // The same stream twice: stored once (20,000 requests coded); the encoder also tries
    // every request coded (40,000) and keeps the smaller.
    let reports = observed(&[(&a, &la), (&a, &la)]);
    assert_eq!(passes(&reports), vec![20_000, 40_000]);
}

#[test]
fn a_small_set_reports_its_one_block() {
    let offsets: Vec<u64> = (0..1000).map(|i| i * 4096).collect();
    let lengths = vec![4096; 1000];
    let columns: Vec<(&[u64], &[u64])> = vec![(&offsets, &lengths)];
    let mut reports = Vec::new();
    blockset::encode_observed(
        &columns,
        &Detector::default(),
        &Options::default(),
        &mut |d, t| reports.push((d, t)),
    );
    assert_eq!(reports, vec![(0, 1000), (1000, 1000)]);
}

fn trace(n: usize) -> Trace {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ 5);
    Trace::from_records((0..n).map(|i| {
        let key = StreamKey {
            module: "POSIX".into(),
            file: "/d".into(),
            rank: (i % 3) as i64,
            op: Op::Read,
        };
        let t = i as f64 * 1e-6;
        (key, rng.offset(), 4096, t, t + 1e-7)
    }))
}

#[test]
fn ptrace_and_csv_writers_report_and_write_the_same_bytes() {
    let trace = trace(150_000);
    let mut reports = Vec::new();
    let observed = ptrace::encode_observed(&trace, &Detector::default(), &mut |d, t| {
        reports.push((d, t))
    })
    .unwrap();
    assert_eq!(
        observed,
        ptrace::encode(&trace, &Detector::default()).unwrap()
    );
    assert_eq!(passes(&reports), vec![150_000]);

    let (mut plain, mut seen) = (Vec::new(), Vec::new());
    let mut rows = Vec::new();
    trace.write_csv(&mut plain).unwrap();
    trace
        .write_csv_observed(&mut seen, &mut |r| rows.push(r))
        .unwrap();
    assert_eq!(plain, seen);
    assert_eq!(rows, vec![65_536, 131_072, 150_000]);
}
