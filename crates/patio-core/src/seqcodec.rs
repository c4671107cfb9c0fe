//! Serialized form of pattern sequences (`PatternSeq`), shared by the map format,
//! the native trace format and `patio analyze`'s `encoded_bytes`.
//!
//! A [`SeqEncoder`] writes any number of sequences into one buffer and keeps a body
//! dictionary: the first node with a given body writes it in full, later nodes with
//! the same body (in this sequence or any later one in the same buffer) refer to it
//! by number. Thousands of ranks writing with one shape pay for it once. Decoding
//! rebuilds the in-memory `PatternSeq`, which is then queried without expansion.
//! A *column* (`encode_column`) is a sequence whose length the reader already knows:
//! a constant or arithmetic one takes one or two varints, any other is a sequence.
//! The byte layout is in docs/FORMATS.md ("Pattern sequence encoding").

use crate::codec::{put_ivarint, put_uvarint, unzigzag, zigzag, Cursor};
use crate::detect::Detector;
use crate::error::{CoreError, Result};
use crate::literal::{self, Coding, CODINGS};
use crate::tree::{Body, Node, PatternSeq, Piece};
use crate::unit::Shape;
use std::collections::HashMap;

/// Piece tags: `TAG_LITERAL + i` for a literal run in coding `literal::CODINGS[i]`,
/// `TAG_NEW_BODY` for a node whose body follows in full, and `TAG_BODY_REF + id` for a
/// node whose body was seen before.
const TAG_LITERAL: u64 = 0;
const TAG_NEW_BODY: u64 = TAG_LITERAL + CODINGS.len() as u64;
const TAG_BODY_REF: u64 = TAG_NEW_BODY + 1;

/// Column kinds: the low two bits of a column's first varint.
const COLUMN_CONSTANT: u64 = 0;
const COLUMN_STEP: u64 = 1;
const COLUMN_SEQUENCE: u64 = 2;

/// Deepest body nesting a decoder accepts.
const MAX_DECODE_DEPTH: usize = 64;

/// Writes sequences into a buffer, sharing bodies across them.
#[derive(Default)]
pub struct SeqEncoder {
    bodies: HashMap<Body, u64>,
    /// Literal runs only in the byte-aligned varint codings (for output that an
    /// entropy coder compresses further; bit-packed fields hide repeats from it).
    byte_aligned: bool,
}

impl SeqEncoder {
    pub fn new() -> Self {
        Self::default()
    }

    /// An encoder whose literal runs stay byte-aligned varints.
    pub fn byte_aligned() -> Self {
        SeqEncoder {
            byte_aligned: true,
            ..Self::default()
        }
    }

    /// Appends `seq` to `buf`: piece count, then each piece. Values are written as
    /// differences from the previous piece's last value.
    pub fn encode(&mut self, seq: &PatternSeq, buf: &mut Vec<u8>) {
        put_uvarint(buf, seq.pieces().len() as u64);
        let mut prev = 0i64;
        for piece in seq.pieces() {
            match piece {
                Piece::Literal(values) => {
                    let codings = if self.byte_aligned {
                        &literal::VARINT_CODINGS[..]
                    } else {
                        &CODINGS[..]
                    };
                    let (coding, bytes) = literal::encode_best(values, prev, codings);
                    let index = CODINGS
                        .iter()
                        .position(|&c| c == coding)
                        .expect("a known coding");
                    put_uvarint(buf, TAG_LITERAL + index as u64);
                    put_uvarint(buf, values.len() as u64);
                    buf.extend_from_slice(&bytes);
                    prev = *values.last().expect("literal runs are not empty");
                }
                Piece::Node(node) => {
                    self.put_body(&node.body, buf);
                    put_ivarint(buf, node.init.wrapping_sub(prev));
                    prev = node.last();
                }
            }
        }
    }

    /// Appends a column: values whose count the reader knows. Every value `v`:
    /// `uvar (zigzag(v) << 2)`; `v, v + d, …`: `uvar (zigzag(v) << 2 | 1), ivar d`;
    /// otherwise `uvar 2` and the values as a sequence. An empty column is constant.
    pub fn encode_column(&mut self, values: &[i64], detector: &Detector, buf: &mut Vec<u8>) {
        let first = values.first().copied().unwrap_or(0);
        let step = match values {
            [a, b, ..] => b.wrapping_sub(*a),
            _ => 0,
        };
        let regular = values.windows(2).all(|w| w[1].wrapping_sub(w[0]) == step);
        let head = zigzag(first);
        if regular && head < 1 << 62 {
            if step == 0 {
                put_uvarint(buf, head << 2 | COLUMN_CONSTANT);
            } else {
                put_uvarint(buf, head << 2 | COLUMN_STEP);
                put_ivarint(buf, step);
            }
        } else {
            put_uvarint(buf, COLUMN_SEQUENCE);
            self.encode(&PatternSeq::build(values, detector), buf);
        }
    }

    /// Writes the tag of a node with this body: the body in full the first time, a
    /// reference to it afterwards. Never writes [`TAG_LITERAL`].
    pub fn put_body(&mut self, body: &Body, buf: &mut Vec<u8>) {
        match self.bodies.get(body) {
            Some(&id) => put_uvarint(buf, TAG_BODY_REF + id),
            None => {
                put_uvarint(buf, TAG_NEW_BODY);
                encode_body(body, buf);
                let id = self.bodies.len() as u64;
                self.bodies.insert(body.clone(), id);
            }
        }
    }
}

fn encode_body(body: &Body, buf: &mut Vec<u8>) {
    match body {
        Body::Flat(s) => {
            put_uvarint(buf, (s.deltas().len() as u64) << 1);
            for &d in s.deltas() {
                put_ivarint(buf, d);
            }
            put_uvarint(buf, s.reps());
        }
        Body::Nested(o, i) => {
            put_uvarint(buf, 1);
            encode_body(o, buf);
            encode_body(i, buf);
        }
    }
}

/// Reads sequences written by one [`SeqEncoder`], in the same order.
#[derive(Default)]
pub struct SeqDecoder {
    bodies: Vec<Body>,
}

impl SeqDecoder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn decode(&mut self, c: &mut Cursor) -> Result<PatternSeq> {
        let count = c.count(c.remaining(), "piece")?;
        let mut pieces = Vec::with_capacity(count);
        let mut total: u64 = 0;
        let mut prev = 0i64;
        for _ in 0..count {
            let at = c.position();
            let piece = match self.get_tag(c)? {
                Tag::Literal(coding) => {
                    let n =
                        c.count(c.remaining().saturating_mul(8).saturating_add(8), "literal")?;
                    if n == 0 {
                        return Err(CoreError::corrupt(at, "empty literal run"));
                    }
                    let values = literal::decode(c, n, prev, coding)?;
                    prev = *values.last().expect("n > 0");
                    Piece::Literal(values)
                }
                Tag::Node(body) => {
                    let node = checked_node(prev.wrapping_add(c.ivarint()?), body, at)?;
                    prev = node.last();
                    Piece::Node(node)
                }
            };
            total = total
                .checked_add(piece.len())
                .ok_or_else(|| CoreError::corrupt(at, "sequence longer than 2^64 elements"))?;
            pieces.push(piece);
        }
        Ok(PatternSeq::from_pieces(pieces))
    }

    /// Reads a column of exactly `n` values written by [`SeqEncoder::encode_column`],
    /// expanded (the caller bounds `n`).
    pub fn decode_column(&mut self, c: &mut Cursor, n: usize) -> Result<Vec<i64>> {
        let at = c.position();
        let head = c.uvarint()?;
        let first = unzigzag(head >> 2);
        match head & 3 {
            COLUMN_CONSTANT => Ok(vec![first; n]),
            COLUMN_STEP => {
                let step = c.ivarint()?;
                let mut v = first;
                Ok((0..n)
                    .map(|_| {
                        let here = v;
                        v = v.wrapping_add(step);
                        here
                    })
                    .collect())
            }
            COLUMN_SEQUENCE if head == COLUMN_SEQUENCE => {
                let seq = self.decode(c)?;
                if seq.len() != n as u64 {
                    return Err(CoreError::corrupt(
                        at,
                        format!("column of {} values, expected {n}", seq.len()),
                    ));
                }
                Ok(seq.expand())
            }
            _ => Err(CoreError::corrupt(
                at,
                format!("unknown column kind {head}"),
            )),
        }
    }

    /// Reads a piece tag: a literal run's difference order, or a node's body (read in
    /// full or looked up by reference).
    fn get_tag(&mut self, c: &mut Cursor) -> Result<Tag> {
        let at = c.position();
        let tag = c.uvarint()?;
        Ok(match tag {
            t if t < TAG_NEW_BODY => Tag::Literal(CODINGS[t as usize]),
            TAG_NEW_BODY => {
                let b = decode_body(c, 0)?;
                self.bodies.push(b.clone());
                Tag::Node(b)
            }
            _ => {
                let id = (tag - TAG_BODY_REF) as usize;
                let b = self.bodies.get(id).cloned();
                Tag::Node(b.ok_or_else(|| {
                    CoreError::corrupt(at, format!("reference to unknown body {id}"))
                })?)
            }
        })
    }
}

enum Tag {
    Literal(Coding),
    Node(Body),
}

/// A node from a decoded first value and body, refused when some element would leave
/// the `i64` range.
pub fn checked_node(init: i64, body: Body, at: usize) -> Result<Node> {
    let (lo, hi) = body_range(&body);
    if init as i128 + lo < i64::MIN as i128 || init as i128 + hi > i64::MAX as i128 {
        return Err(CoreError::corrupt(at, "pattern leaves the 64-bit range"));
    }
    Ok(Node::new(init, body))
}

fn decode_body(c: &mut Cursor, depth: usize) -> Result<Body> {
    if depth > MAX_DECODE_DEPTH {
        return Err(c.error("pattern nested too deeply"));
    }
    let at = c.position();
    let head = c.uvarint()?;
    if head == 1 {
        let outer = decode_body(c, depth + 1)?;
        let inner = decode_body(c, depth + 1)?;
        outer
            .len()
            .checked_mul(inner.len())
            .ok_or_else(|| CoreError::corrupt(at, "pattern longer than 2^64 elements"))?;
        return Ok(Body::nested(outer, inner));
    }
    if head & 1 == 1 {
        return Err(CoreError::corrupt(at, format!("unknown body kind {head}")));
    }
    let k = (head >> 1) as usize;
    if k > c.remaining() {
        return Err(CoreError::corrupt(
            at,
            "delta count exceeds the remaining bytes",
        ));
    }
    let deltas = (0..k).map(|_| c.ivarint()).collect::<Result<Vec<_>>>()?;
    let reps = c.uvarint()?;
    Shape::checked(deltas, reps).map(Body::Flat).ok_or_else(|| {
        CoreError::corrupt(
            at,
            "pattern longer than 2^64 elements or beyond the 64-bit range",
        )
    })
}

/// Smallest and largest element offsets of a body, exact: the levels are independent.
pub(crate) fn body_range(body: &Body) -> (i128, i128) {
    match body {
        Body::Flat(s) => (s.min_offset(), s.max_offset()),
        Body::Nested(o, i) => {
            let (olo, ohi) = body_range(o);
            let (ilo, ihi) = body_range(i);
            (olo + ilo, ohi + ihi)
        }
    }
}

/// Encodes one sequence on its own.
pub fn encode_seq(seq: &PatternSeq) -> Vec<u8> {
    let mut buf = Vec::new();
    SeqEncoder::new().encode(seq, &mut buf);
    buf
}

/// Decodes one sequence written by [`encode_seq`]; trailing bytes are an error.
pub fn decode_seq(bytes: &[u8]) -> Result<PatternSeq> {
    let mut c = Cursor::new(bytes);
    let seq = SeqDecoder::new().decode(&mut c)?;
    if !c.is_at_end() {
        return Err(c.error("trailing bytes after the sequence"));
    }
    Ok(seq)
}
