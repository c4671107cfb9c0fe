//! Compact encoding of many request streams at once (the offsets and lengths of every
//! stream of a trace): what `patio analyze` reports as `encoded_bytes`.
//!
//! Scientific traces hold hundreds of ranks doing the same thing at different places,
//! differing in a few values (a rank-dependent metadata write, a final size). So each
//! stream is split in three:
//!
//! * its first offset and first length — two columns over all streams;
//! * its *skeleton*: the structure of its offset and length sequences (taken relative
//!   to the first values) without any value — per piece, a pattern's nesting and
//!   delta-vector lengths, or a literal run's length — stored once per distinct
//!   skeleton, with a column of skeleton ids over all streams;
//! * its *parameters*: every value the skeleton leaves open (each pattern's first
//!   value, deltas and repetition counts; each literal). The streams sharing a skeleton form a matrix of parameters,
//!   flattened column by column — one slot across all those streams, then the next —
//!   into one sequence, so a value that is constant or progresses regularly from rank
//!   to rank compresses to one unit, and a lone stream's values stay in order.
//!   Identical rows (the same requests issued to several files) are stored once, with
//!   a row-index column saying which distinct row each stream uses.
//!
//! Every column is itself a pattern sequence. A stream's offsets are taken either
//! directly or as gaps (offset minus the previous request's end), whichever encodes
//! smaller: a contiguous stream with varying request sizes is one run of zero gaps.
//! Decoding returns every stream exactly. Layout: docs/FORMATS.md, "Stream set".

use crate::codec::{put_uvarint, Cursor};
use crate::detect::Detector;
use crate::error::{CoreError, Result};
use crate::predict::{apply, get_predictions, predictions, put_predictions, Prediction};
use crate::seqcodec::{checked_node, encode_seq, SeqDecoder, SeqEncoder};
use crate::tree::{Body, PatternSeq, Piece};
use crate::unit::Shape;
use std::collections::HashMap;

/// Requests per stream a decoder expands at most (a few damaged bytes must not ask
/// for terabytes).
pub const MAX_STREAM_VALUES: u64 = 1 << 26;

const MODE_OFFSETS: u8 = 0;
const MODE_GAPS: u8 = 1;
/// Added to a skeleton's mode byte (version 2): some slots of its parameter matrix are
/// predicted by earlier ones, listed after its bones.
const PREDICTED: u8 = 2;

/// The structure of a body without any value: nesting and delta-vector lengths.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Form {
    Flat(usize),
    Nested(Box<Form>, Box<Form>),
}

impl Form {
    fn of(body: &Body) -> Form {
        match body {
            Body::Flat(s) => Form::Flat(s.deltas().len()),
            Body::Nested(o, i) => Form::Nested(Box::new(Form::of(o)), Box::new(Form::of(i))),
        }
    }

    /// Values a body of this form leaves open: each flat level's deltas and count.
    fn slots(&self) -> usize {
        match self {
            Form::Flat(k) => k + 1,
            Form::Nested(o, i) => o.slots() + i.slots(),
        }
    }
}

/// The part of a sequence that is not a value: body forms and literal-run lengths.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Bone {
    Node(Form),
    Literal(usize),
}

fn push_body_values(body: &Body, params: &mut Vec<i64>) {
    match body {
        Body::Flat(s) => {
            params.extend_from_slice(s.deltas());
            params.push(s.reps() as i64);
        }
        Body::Nested(o, i) => {
            push_body_values(o, params);
            push_body_values(i, params);
        }
    }
}

/// Rebuilds a body of `form` from parameters, refusing shapes too long for 64 bits.
fn take_body(form: &Form, next: &mut impl FnMut() -> Result<i64>, at: usize) -> Result<Body> {
    Ok(match form {
        Form::Flat(k) => {
            let deltas = (0..*k).map(|_| next()).collect::<Result<Vec<_>>>()?;
            let shape = Shape::checked(deltas, next()? as u64);
            Body::Flat(shape.ok_or_else(|| CoreError::corrupt(at, "pattern too long for 64 bits"))?)
        }
        Form::Nested(o, i) => {
            let (outer, inner) = (take_body(o, next, at)?, take_body(i, next, at)?);
            outer
                .len()
                .checked_mul(inner.len())
                .ok_or_else(|| CoreError::corrupt(at, "pattern too long for 64 bits"))?;
            Body::nested(outer, inner)
        }
    })
}

#[derive(Clone, PartialEq, Eq, Hash)]
struct Skeleton {
    mode: u8,
    positions: Vec<Bone>,
    lengths: Vec<Bone>,
}

impl Skeleton {
    /// Values its bones leave open. Version 2 stores each sequence's first value only
    /// implicitly: relative to the stream's first offset and length (or as gaps), it is
    /// always 0.
    fn slots(&self, columns: Columns) -> usize {
        let count = |bones: &[Bone]| -> usize {
            let open: usize = bones
                .iter()
                .map(|b| match b {
                    Bone::Node(form) => 1 + form.slots(),
                    Bone::Literal(n) => *n,
                })
                .sum();
            match columns {
                Columns::Counted => open.saturating_sub(1),
                Columns::Sequences => open,
            }
        };
        count(&self.positions) + count(&self.lengths)
    }
}

/// Splits pieces into bones and parameters (node first values, deltas and counts,
/// and literal values).
fn split(pieces: &[Piece], bones: &mut Vec<Bone>, params: &mut Vec<i64>) {
    for piece in pieces {
        match piece {
            Piece::Node(n) => {
                bones.push(Bone::Node(Form::of(&n.body)));
                params.push(n.init);
                push_body_values(&n.body, params);
            }
            Piece::Literal(values) => {
                bones.push(Bone::Literal(values.len()));
                params.extend_from_slice(values);
            }
        }
    }
}

/// Rebuilds the values of one sequence from its bones, consuming parameters, into
/// `out` (cleared first).
fn join(
    bones: &[Bone],
    columns: Columns,
    params: &mut impl Iterator<Item = i64>,
    budget: &mut u64,
    at: usize,
    out: &mut Vec<i64>,
) -> Result<()> {
    out.clear();
    // Version 2 leaves out the first value (always 0).
    let mut implied = columns == Columns::Counted && !bones.is_empty();
    let mut next = || {
        if std::mem::take(&mut implied) {
            return Ok(0);
        }
        params
            .next()
            .ok_or_else(|| CoreError::corrupt(at, "parameter matrix too short"))
    };
    for bone in bones {
        match bone {
            Bone::Node(form) => {
                let init = next()?;
                let body = take_body(form, &mut next, at)?;
                if out.len() as u64 + body.len() > MAX_STREAM_VALUES.min(*budget) {
                    return Err(CoreError::corrupt(
                        at,
                        "stream longer than its stream set allows",
                    ));
                }
                let node = checked_node(init, body, at)?;
                out.reserve(node.len() as usize);
                node.body.expand_into(node.init, out);
            }
            Bone::Literal(n) => {
                if out.len() as u64 + *n as u64 > MAX_STREAM_VALUES.min(*budget) {
                    return Err(CoreError::corrupt(
                        at,
                        "stream longer than its stream set allows",
                    ));
                }
                for _ in 0..*n {
                    out.push(next()?);
                }
            }
        }
    }
    *budget = budget.saturating_sub(out.len() as u64);
    Ok(())
}

fn relative(values: &[u64], first: u64) -> Vec<i64> {
    values
        .iter()
        .map(|&v| v.wrapping_sub(first) as i64)
        .collect()
}

/// Gap before each request: its offset minus the previous request's end (0 for the
/// first request), wrapping.
pub fn gaps(offsets: &[u64], lengths: &[u64]) -> Vec<i64> {
    (0..offsets.len())
        .map(|i| match i {
            0 => 0,
            _ => offsets[i].wrapping_sub(offsets[i - 1].wrapping_add(lengths[i - 1])) as i64,
        })
        .collect()
}

/// A stream's skeleton and parameters.
fn dissect(offsets: &[u64], lengths: &[u64], detector: &Detector) -> (Skeleton, Vec<i64>) {
    let first_off = offsets.first().copied().unwrap_or(0);
    let first_len = lengths.first().copied().unwrap_or(0);
    let direct = PatternSeq::build(&relative(offsets, first_off), detector);
    let gapped = PatternSeq::build(&gaps(offsets, lengths), detector);
    let (mode, positions) = if encode_seq(&gapped).len() < encode_seq(&direct).len() {
        (MODE_GAPS, gapped)
    } else {
        (MODE_OFFSETS, direct)
    };
    let mut skeleton = Skeleton {
        mode,
        positions: Vec::new(),
        lengths: Vec::new(),
    };
    let mut params = Vec::new();
    // Each sequence's first value is 0 (relative to the first offset or length, or
    // the first gap): not stored.
    split(positions.pieces(), &mut skeleton.positions, &mut params);
    if !params.is_empty() {
        debug_assert_eq!(params[0], 0);
        params.remove(0);
    }
    // Every length the first one (most streams): no length bones at all.
    if lengths.iter().any(|&l| l != first_len) {
        let lengths = PatternSeq::build(&relative(lengths, first_len), detector);
        let first = params.len();
        split(lengths.pieces(), &mut skeleton.lengths, &mut params);
        debug_assert_eq!(params[first], 0);
        params.remove(first);
    }
    (skeleton, params)
}

/// Bone tags: 0 literal run (count follows), 1 nested form (outer and inner follow),
/// `2 + k` flat form with `k` deltas.
fn put_form(form: &Form, buf: &mut Vec<u8>) {
    match form {
        Form::Flat(k) => put_uvarint(buf, 2 + *k as u64),
        Form::Nested(o, i) => {
            put_uvarint(buf, 1);
            put_form(o, buf);
            put_form(i, buf);
        }
    }
}

/// Reads a form whose tag (≥ 1) has already been read at `at`.
fn get_form(tag: u64, c: &mut Cursor, at: usize, depth: usize) -> Result<Form> {
    match tag {
        0 => Err(CoreError::corrupt(at, "literal tag inside a pattern form")),
        1 if depth >= 64 => Err(CoreError::corrupt(at, "pattern nested too deeply")),
        1 => {
            let mut part = || -> Result<Form> {
                let at = c.position();
                let tag = c.uvarint()?;
                get_form(tag, c, at, depth + 1)
            };
            let outer = part()?;
            Ok(Form::Nested(Box::new(outer), Box::new(part()?)))
        }
        tag => {
            let k = tag - 2;
            if k > c.remaining() as u64 * 8 {
                return Err(CoreError::corrupt(
                    at,
                    "delta count exceeds what the input can hold",
                ));
            }
            Ok(Form::Flat(k as usize))
        }
    }
}

fn put_bones(bones: &[Bone], buf: &mut Vec<u8>) {
    put_uvarint(buf, bones.len() as u64);
    for bone in bones {
        match bone {
            Bone::Node(form) => put_form(form, buf),
            Bone::Literal(n) => {
                put_uvarint(buf, 0);
                put_uvarint(buf, *n as u64);
            }
        }
    }
}

fn get_bones(c: &mut Cursor) -> Result<Vec<Bone>> {
    let n = c.count(c.remaining(), "piece")?;
    let mut bones = Vec::with_capacity(n);
    for _ in 0..n {
        let at = c.position();
        bones.push(match c.uvarint()? {
            0 => Bone::Literal(c.count(c.remaining() * 8, "literal")?),
            tag => Bone::Node(get_form(tag, c, at, 0)?),
        });
    }
    Ok(bones)
}

/// Encodes `(offsets, lengths)` of every stream, in order. With `byte_aligned`,
/// literal values stay whole varints (for a block coder to compress further).
pub fn encode_streams(
    streams: &[(&[u64], &[u64])],
    detector: &Detector,
    byte_aligned: bool,
) -> Vec<u8> {
    let mut skeletons: Vec<Skeleton> = Vec::new();
    let mut ids: HashMap<Skeleton, usize> = HashMap::new();
    let mut members: Vec<Vec<Vec<i64>>> = Vec::new(); // per skeleton: parameters of its streams
    let (mut skeleton_ids, mut first_offsets, mut first_lengths) = (vec![], vec![], vec![]);
    for (offsets, lengths) in streams {
        assert_eq!(
            offsets.len(),
            lengths.len(),
            "offset and length columns differ"
        );
        let (skeleton, params) = dissect(offsets, lengths, detector);
        let id = *ids.entry(skeleton.clone()).or_insert_with(|| {
            skeletons.push(skeleton);
            members.push(Vec::new());
            skeletons.len() - 1
        });
        members[id].push(params);
        skeleton_ids.push(id as i64);
        first_offsets.push(offsets.first().copied().unwrap_or(0) as i64);
        first_lengths.push(lengths.first().copied().unwrap_or(0) as i64);
    }
    // Identical parameter rows (the same requests in several files) are stored once;
    // a row-index column says which distinct row each stream uses. The distinct rows
    // go column by column, slots that an earlier slot predicts as their difference.
    let matrices: Vec<(Vec<i64>, Vec<i64>, Vec<Prediction>)> = skeletons
        .iter()
        .zip(&members)
        .map(|(s, rows)| {
            let mut distinct: Vec<&Vec<i64>> = Vec::new();
            let mut index_of: HashMap<&Vec<i64>, usize> = HashMap::new();
            let row_ids = rows
                .iter()
                .map(|r| {
                    *index_of.entry(r).or_insert_with(|| {
                        distinct.push(r);
                        distinct.len() - 1
                    }) as i64
                })
                .collect();
            let mut matrix: Vec<i64> = (0..s.slots(Columns::Counted))
                .flat_map(|slot| distinct.iter().map(move |r| r[slot]))
                .collect();
            let predicted = predictions(&matrix, distinct.len(), s.slots(Columns::Counted));
            apply(&mut matrix, distinct.len(), &predicted, true);
            (row_ids, matrix, predicted)
        })
        .collect();
    let mut buf = Vec::new();
    let mut enc = if byte_aligned {
        SeqEncoder::byte_aligned()
    } else {
        SeqEncoder::new()
    };
    put_uvarint(&mut buf, skeletons.len() as u64);
    for (s, (_, _, predicted)) in skeletons.iter().zip(&matrices) {
        buf.push(s.mode | if predicted.is_empty() { 0 } else { PREDICTED });
        put_bones(&s.positions, &mut buf);
        put_bones(&s.lengths, &mut buf);
        if !predicted.is_empty() {
            put_predictions(predicted, &mut buf);
        }
    }
    for column in [skeleton_ids, first_offsets, first_lengths] {
        enc.encode_column(&column, detector, &mut buf);
    }
    for (row_ids, matrix, _) in &matrices {
        enc.encode_column(row_ids, detector, &mut buf);
        enc.encode_column(matrix, detector, &mut buf);
    }
    buf
}

/// How the columns of a pattern-form block are written: stream sets of version 1
/// wrote every column as a sequence carrying its own length; version 2 writes
/// columns whose length the reader knows (`SeqEncoder::encode_column`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Columns {
    Sequences,
    Counted,
}

/// The next sequence, expanded, refused beyond `limit` (at most
/// [`MAX_STREAM_VALUES`]) values.
fn column(dec: &mut SeqDecoder, c: &mut Cursor, limit: u64) -> Result<Vec<i64>> {
    let at = c.position();
    let seq = dec.decode(c)?;
    if seq.len() > MAX_STREAM_VALUES.min(limit) {
        return Err(CoreError::corrupt(
            at,
            format!(
                "column of {} values, more than a stream set decodes",
                seq.len()
            ),
        ));
    }
    Ok(seq.expand())
}

/// Decodes what [`encode_streams`] wrote for `streams` streams.
pub fn decode_streams(bytes: &[u8], streams: u64) -> Result<Vec<(Vec<u64>, Vec<u64>)>> {
    decode_streams_within(bytes, streams, u64::MAX, 0)
}

/// Decodes what [`encode_streams`] wrote for `streams` streams, refusing more than
/// `max_requests` requests in all; `base` is where `bytes` sit in their file (for
/// error offsets).
pub fn decode_streams_within(
    bytes: &[u8],
    streams: u64,
    max_requests: u64,
    base: usize,
) -> Result<Vec<(Vec<u64>, Vec<u64>)>> {
    let (mut offsets, mut lengths) = (Vec::new(), Vec::new());
    let counts = decode_streams_into(
        bytes,
        streams,
        max_requests,
        base,
        Columns::Counted,
        None,
        &mut offsets,
        &mut lengths,
    )?;
    let mut at = 0;
    Ok(counts
        .into_iter()
        .map(|n| {
            at += n;
            (offsets[at - n..at].to_vec(), lengths[at - n..at].to_vec())
        })
        .collect())
}

/// A stream rebuilt relative to its first offset and length: positions (or gaps) and
/// lengths.
type RelativeRow = (Vec<i64>, Vec<i64>);

/// Decodes what [`encode_streams`] wrote (or, with [`Columns::Sequences`], what a
/// version 1 stream set wrote) like [`decode_streams_within`], appending every
/// stream's offsets and lengths, stream after stream, to `offsets` and `lengths`;
/// returns each stream's request count. `streams` is the number of streams (with
/// [`Columns::Sequences`], the most there may be). With `only`, stream `only` alone is
/// rebuilt (the others parsed) and its count is the one returned. No allocation per
/// stream: streams that share a skeleton and a parameter row (the same requests from
/// another first offset) are rebuilt once.
#[allow(clippy::too_many_arguments)]
pub fn decode_streams_into(
    bytes: &[u8],
    streams: u64,
    max_requests: u64,
    base: usize,
    columns: Columns,
    only: Option<usize>,
    offsets: &mut Vec<u64>,
    lengths: &mut Vec<u64>,
) -> Result<Vec<usize>> {
    // Offsets and lengths are both counted.
    let mut budget = max_requests.saturating_mul(2);
    // Parameters: at most two values per request, plus each piece's handful.
    let max_params = budget.saturating_add(bytes.len() as u64 * 8);
    let mut c = Cursor::with_base(bytes, base);
    let mut dec = SeqDecoder::new();
    let n_skeletons = c.count(c.remaining(), "skeleton")?;
    let mut skeletons = Vec::with_capacity(n_skeletons);
    let mut predicted = Vec::with_capacity(n_skeletons);
    let known = match columns {
        Columns::Sequences => MODE_GAPS,
        Columns::Counted => MODE_GAPS | PREDICTED,
    };
    for _ in 0..n_skeletons {
        let at = c.position();
        let byte = c.u8()?;
        if byte & !known != 0 {
            return Err(CoreError::corrupt(
                at,
                format!("unknown offset mode {byte}"),
            ));
        }
        let skeleton = Skeleton {
            mode: byte & MODE_GAPS,
            positions: get_bones(&mut c)?,
            lengths: get_bones(&mut c)?,
        };
        predicted.push(match byte & PREDICTED {
            0 => Vec::new(),
            _ => get_predictions(&mut c, skeleton.slots(columns))?,
        });
        skeletons.push(skeleton);
    }
    // A column of `n` values (at most `limit` for version 1's sequences).
    let mut next = |c: &mut Cursor, n: u64, limit: u64| -> Result<Vec<i64>> {
        match columns {
            Columns::Sequences => column(&mut dec, c, limit),
            Columns::Counted if n > MAX_STREAM_VALUES.min(limit) => Err(c.error(format!(
                "column of {n} values, more than a stream set decodes"
            ))),
            Columns::Counted => dec.decode_column(c, n as usize),
        }
    };
    let ids = next(&mut c, streams, streams)?;
    let first_offsets = next(&mut c, streams, streams)?;
    let first_lengths = next(&mut c, streams, streams)?;
    if first_offsets.len() != ids.len() || first_lengths.len() != ids.len() {
        return Err(c.error("stream columns differ in length"));
    }
    let mut member_count = vec![0usize; skeletons.len()];
    for &id in &ids {
        let slot = member_count.get_mut(id as usize);
        *slot.ok_or_else(|| c.error(format!("stream refers to unknown skeleton {id}")))? += 1;
    }
    // Per skeleton: which distinct row each member uses, then the distinct rows
    // column by column.
    let mut matrices = Vec::with_capacity(skeletons.len());
    for (s, &count) in skeletons.iter().zip(&member_count) {
        let row_ids = next(&mut c, count as u64, streams)?;
        if row_ids.len() != count {
            return Err(c.error("row-index column length differs from the stream count"));
        }
        // Rows are numbered in order of first use: the largest number is the last.
        let rows = row_ids
            .iter()
            .max()
            .map_or(0, |&m| (m as u64).saturating_add(1));
        let slots = s.slots(columns);
        let mut values = next(&mut c, rows.saturating_mul(slots as u64), max_params)?;
        let distinct = values
            .len()
            .checked_div(slots)
            .unwrap_or_else(|| row_ids.iter().max().map_or(0, |&m| m as usize + 1));
        if distinct * slots != values.len()
            || row_ids.iter().any(|&r| r < 0 || r as usize >= distinct)
        {
            return Err(c.error("parameter matrix does not match its row-index column"));
        }
        apply(&mut values, distinct, &predicted[matrices.len()], false);
        matrices.push((row_ids.into_iter(), values, distinct));
    }
    if !c.is_at_end() {
        return Err(c.error("trailing bytes after the stream set"));
    }
    let at = c.position();
    // Per skeleton and distinct row: the members using it, and the row rebuilt
    // (relative positions or gaps, relative lengths) once a second member needs it.
    // A skeleton without parameters (empty streams) has nothing to rebuild, and its
    // row ids bound nothing: no table for it.
    let mut uses: Vec<Vec<u32>> = matrices
        .iter()
        .zip(&skeletons)
        .map(|((_, _, distinct), s)| {
            // Streams that rebuild nothing (no bones) need no table.
            let empty = s.positions.is_empty() && s.lengths.is_empty();
            vec![0; if empty { 0 } else { *distinct }]
        })
        .collect();
    for (id, (row_ids, _, _)) in matrices.iter().enumerate() {
        for &r in row_ids.as_slice() {
            if let Some(u) = uses[id].get_mut(r as usize) {
                *u += 1;
            }
        }
    }
    let mut memo: Vec<Vec<Option<RelativeRow>>> =
        uses.iter().map(|u| vec![None; u.len()]).collect();
    let (mut positions, mut rel_lengths) = (Vec::new(), Vec::new());
    let mut counts = Vec::with_capacity(ids.len());
    let each = ids.iter().zip(&first_offsets).zip(&first_lengths);
    for (k, ((&id, &first_off), &first_len)) in each.enumerate() {
        let s = &skeletons[id as usize];
        let (row_ids, values, distinct) = &mut matrices[id as usize];
        let row = row_ids.next().expect("one row per member") as usize;
        if only.is_some_and(|o| o != k) {
            continue;
        }
        let (pos, len): (&[i64], &[i64]) = match memo[id as usize].get(row) {
            Some(Some((p, l))) => {
                let n = (p.len() as u64).saturating_mul(2);
                if n > budget {
                    return Err(CoreError::corrupt(
                        at,
                        "stream longer than its stream set allows",
                    ));
                }
                budget -= n;
                (p, l)
            }
            _ => {
                let mut params = (0..s.slots(columns)).map(|slot| values[slot * *distinct + row]);
                join(
                    &s.positions,
                    columns,
                    &mut params,
                    &mut budget,
                    at,
                    &mut positions,
                )?;
                if s.lengths.is_empty() && columns == Columns::Counted {
                    // No length bones: every length is the first.
                    rel_lengths.clear();
                    rel_lengths.resize(positions.len(), 0);
                    budget = budget.saturating_sub(positions.len() as u64);
                } else {
                    join(
                        &s.lengths,
                        columns,
                        &mut params,
                        &mut budget,
                        at,
                        &mut rel_lengths,
                    )?;
                }
                if positions.len() != rel_lengths.len() {
                    return Err(CoreError::corrupt(
                        at,
                        "offset and length columns differ in length",
                    ));
                }
                if uses[id as usize].get(row).is_some_and(|&u| u > 1) {
                    let slot = &mut memo[id as usize][row];
                    let (p, l) = slot.insert((positions.clone(), rel_lengths.clone()));
                    (p, l)
                } else {
                    (&positions, &rel_lengths)
                }
            }
        };
        let from = lengths.len();
        lengths.extend(
            len.iter()
                .map(|&v| (v as u64).wrapping_add(first_len as u64)),
        );
        if s.mode == MODE_GAPS {
            // Each offset follows the previous request's end by its gap; the first is
            // the stream's first offset.
            let mut end = first_off as u64;
            for (i, (&gap, &l)) in pos.iter().zip(&lengths[from..]).enumerate() {
                let here = if i == 0 {
                    end
                } else {
                    end.wrapping_add(gap as u64)
                };
                offsets.push(here);
                end = here.wrapping_add(l);
            }
        } else {
            offsets.extend(
                pos.iter()
                    .map(|&v| (v as u64).wrapping_add(first_off as u64)),
            );
        }
        counts.push(pos.len());
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_sharing() {
        let d = Detector::default();
        let ranks: Vec<(Vec<u64>, Vec<u64>)> = (0..64u64)
            .map(|r| {
                // Same strided body for every rank, a rank-dependent metadata write at the end.
                let mut o: Vec<u64> = (0..100).map(|i| (i * 64 + r) * 4096).collect();
                let mut l = vec![4096; 100];
                o.push(1_000_000 + r * 96);
                l.push(90 + (r * 7) % 13);
                (o, l)
            })
            .chain(std::iter::once((
                (0..50u64).map(|i| i * i * 7).collect(),
                (0..50u64).map(|i| i * i * 7 + 1).collect(),
            )))
            .chain(std::iter::once((vec![], vec![])))
            .collect();
        let views: Vec<(&[u64], &[u64])> = ranks
            .iter()
            .map(|(o, l)| (o.as_slice(), l.as_slice()))
            .collect();
        let bytes = encode_streams(&views, &d, false);
        assert_eq!(decode_streams(&bytes, ranks.len() as u64).unwrap(), ranks);
        // 64 rank-strided streams cost little more than one.
        assert!(bytes.len() < 400, "{} bytes", bytes.len());
        for cut in 0..bytes.len() {
            assert!(decode_streams(&bytes[..cut], ranks.len() as u64).is_err());
        }
    }

    #[test]
    fn damaged_bytes_are_errors_or_streams_never_panics() {
        let d = Detector::default();
        let offsets: Vec<u64> = (0..300u64)
            .map(|i| (i % 17) * 4096 + (i / 17) * 1_000_000)
            .collect();
        let lengths: Vec<u64> = (0..300u64).map(|i| 4096 + (i * 7919) % 100).collect();
        let bytes = encode_streams(&[(&offsets, &lengths), (&lengths, &offsets)], &d, false);
        for at in 0..bytes.len() {
            for flip in [0x01u8, 0x40, 0xff] {
                let mut damaged = bytes.clone();
                damaged[at] ^= flip;
                let _ = decode_streams(&damaged, 2);
            }
        }
    }

    #[test]
    fn contiguous_varying_sizes_use_gaps() {
        let lengths: Vec<u64> = (0..500u64).map(|i| 100 + (i * 7919) % 1000).collect();
        let offsets: Vec<u64> = lengths
            .iter()
            .scan(0u64, |at, &l| {
                let o = *at;
                *at += l;
                Some(o)
            })
            .collect();
        let (skeleton, _) = dissect(&offsets, &lengths, &Detector::default());
        assert_eq!(skeleton.mode, MODE_GAPS);
        assert_eq!(skeleton.positions.len(), 1);
    }
}
