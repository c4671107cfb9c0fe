//! Per-stream pattern analysis behind `patio analyze`: the pattern kind of a stream,
//! its signature in unit notation, the share of requests covered by patterns, and the
//! pattern segments for plotting. The encoded size of all streams is in `streamset`.

use crate::detect::Detector;
use crate::tree::{Body, PatternSeq, Piece};

/// How a stream (or one segment of it) accesses its file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Contiguous,
    Strided,
    KdStrided,
    RepeatingDeltas,
    Irregular,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Contiguous => "contiguous",
            Kind::Strided => "strided",
            Kind::KdStrided => "kd-strided",
            Kind::RepeatingDeltas => "repeating deltas",
            Kind::Irregular => "irregular",
        }
    }
}

/// Share of consecutive request pairs that must abut for a stream to be contiguous.
const CONTIGUOUS_SHARE: f64 = 0.9;
/// Below this pattern coverage a stream is irregular.
const PATTERN_SHARE: f64 = 0.5;
/// Pieces spelled out in a signature before it is abbreviated.
const SIGNATURE_PIECES: usize = 3;

/// One run of requests described by one piece, for plots: `[start, end)` indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segment {
    pub start: u64,
    pub end: u64,
    /// `None` for literal runs.
    pub kind: Option<Kind>,
}

/// What analysis says about one stream.
#[derive(Clone, Debug)]
pub struct StreamAnalysis {
    pub requests: u64,
    pub kind: Kind,
    pub signature: String,
    pub length_signature: String,
    pub coverage: f64,
    pub segments: Vec<Segment>,
    pub offsets: PatternSeq,
    pub lengths: PatternSeq,
}

fn abuts(offsets: &[u64], lengths: &[u64], i: usize) -> bool {
    offsets[i].checked_add(lengths[i]) == Some(offsets[i + 1])
}

/// The kind of access a pattern body describes. A flat delta vector that is one stride
/// repeated and then a different gap (`(S, S, S, G)^r`) is a 2-D array read row by row,
/// so it is kd-strided like its nested form.
pub fn body_kind(body: &Body) -> Kind {
    match body {
        Body::Nested(..) => Kind::KdStrided,
        Body::Flat(s) if s.deltas().len() <= 1 => Kind::Strided,
        Body::Flat(s) => {
            let (row, gap) = s.deltas().split_at(s.deltas().len() - 1);
            if row.iter().all(|&d| d == row[0]) && gap[0] != row[0] {
                Kind::KdStrided
            } else {
                Kind::RepeatingDeltas
            }
        }
    }
}

/// One piece of a column of offsets or lengths: its absolute values (a pattern's first
/// value, literals) are unsigned 64-bit quantities held as `i64` by the engine, so
/// they are shown as `u64` (2^63 and beyond are not negative); deltas keep their sign.
fn unsigned_piece(p: &Piece) -> String {
    match p {
        Piece::Node(n) => format!("[{}, {}]", n.init as u64, n.body),
        Piece::Literal(v) if v.len() <= 4 => v
            .iter()
            .map(|&x| (x as u64).to_string())
            .collect::<Vec<_>>()
            .join(", "),
        Piece::Literal(_) => p.to_string(),
    }
}

/// Compact unit-notation signature of a column of offsets or lengths.
pub fn signature(seq: &PatternSeq) -> String {
    let pieces = seq.pieces();
    let mut parts: Vec<String> = pieces
        .iter()
        .take(SIGNATURE_PIECES)
        .map(unsigned_piece)
        .collect();
    if pieces.len() > SIGNATURE_PIECES {
        parts.push(format!("… +{} pieces", pieces.len() - SIGNATURE_PIECES));
    }
    parts.join(" ")
}

/// Analyses one stream's offsets and lengths.
///
/// # Panics
/// When the two columns differ in length (a caller bug: streams always pair them).
pub fn analyze_stream(offsets: &[u64], lengths: &[u64], detector: &Detector) -> StreamAnalysis {
    assert_eq!(
        offsets.len(),
        lengths.len(),
        "offset and length columns differ"
    );
    let as_i64 = |v: &[u64]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    let off_seq = PatternSeq::build(&as_i64(offsets), detector);
    let len_seq = PatternSeq::build(&as_i64(lengths), detector);
    let n = offsets.len();
    let abutting = (0..n.saturating_sub(1))
        .filter(|&i| abuts(offsets, lengths, i))
        .count();
    let mut segments = Vec::with_capacity(off_seq.pieces().len());
    let mut at = 0u64;
    let mut largest: Option<(u64, Kind)> = None;
    for piece in off_seq.pieces() {
        let (start, end) = (at, at + piece.len());
        at = end;
        let kind = match piece {
            Piece::Literal(_) => None,
            Piece::Node(node) => {
                let contiguous =
                    (start as usize..end as usize - 1).all(|i| abuts(offsets, lengths, i));
                let k = if contiguous {
                    Kind::Contiguous
                } else {
                    body_kind(&node.body)
                };
                if largest.is_none_or(|(len, _)| piece.len() > len) {
                    largest = Some((piece.len(), k));
                }
                Some(k)
            }
        };
        segments.push(Segment { start, end, kind });
    }
    // A contiguous run is a pattern too (each request starts where the previous ended),
    // whatever the request sizes: count the better of the two views.
    let gap_seq = PatternSeq::build(&crate::streamset::gaps(offsets, lengths), detector);
    let coverage = off_seq.coverage().max(gap_seq.coverage());
    // A nested pattern over most of the stream (e.g. contiguous runs placed at a
    // stride) describes it better than "contiguous", whatever the share of abutting
    // requests inside the runs.
    let dominant_nested = largest
        .is_some_and(|(len, k)| k == Kind::KdStrided && len as f64 >= PATTERN_SHARE * n as f64);
    let kind = if dominant_nested {
        Kind::KdStrided
    } else if n <= 1 || abutting as f64 >= CONTIGUOUS_SHARE * (n - 1) as f64 {
        Kind::Contiguous
    } else if coverage < PATTERN_SHARE {
        Kind::Irregular
    } else {
        largest.map_or(Kind::Irregular, |(_, k)| k)
    };
    StreamAnalysis {
        requests: n as u64,
        kind,
        signature: signature(&off_seq),
        length_signature: signature(&len_seq),
        coverage,
        segments,
        offsets: off_seq,
        lengths: len_seq,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_past_2_63_are_shown_unsigned() {
        let offsets: Vec<u64> = (0..8).map(|i| (1u64 << 63) + i * 4096).collect();
        let a = analyze_stream(&offsets, &[4096; 8], &Detector::default());
        assert_eq!(a.signature, "[9223372036854775808, (4096)^7]");
        assert!(!a.signature.contains('-'));
    }

    #[test]
    fn kinds() {
        let d = Detector::default();
        let contiguous: Vec<u64> = (0..100).map(|i| i * 10).collect();
        assert_eq!(
            analyze_stream(&contiguous, &[10; 100], &d).kind,
            Kind::Contiguous
        );
        assert_eq!(
            analyze_stream(&contiguous, &[4; 100], &d).kind,
            Kind::Strided
        );
        // Contiguous runs at a stride: kd-strided, although 98 % of requests abut.
        let staircase: Vec<u64> = (0..8)
            .flat_map(|s| (0..50).map(move |i| s * (1 << 30) + i * 512))
            .collect();
        assert_eq!(
            analyze_stream(&staircase, &[512; 400], &d).kind,
            Kind::KdStrided
        );
        let kd: Vec<u64> = (0..20)
            .flat_map(|r| (0..50).map(move |c| r * 10_000 + c * 64))
            .collect();
        let a = analyze_stream(&kd, &[8; 1000], &d);
        assert_eq!((a.kind, a.coverage), (Kind::KdStrided, 1.0));
        let deltas: Vec<u64> = (0..30)
            .flat_map(|r| [0, 3, 7].map(|c| r * 14 + c))
            .collect();
        assert_eq!(
            analyze_stream(&deltas, &[1; 90], &d).kind,
            Kind::RepeatingDeltas
        );
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let random: Vec<u64> = (0..200)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state % 1_000_003
            })
            .collect();
        assert_eq!(analyze_stream(&random, &[1; 200], &d).kind, Kind::Irregular);
        assert_eq!(analyze_stream(&[], &[], &d).requests, 0);
    }
}
