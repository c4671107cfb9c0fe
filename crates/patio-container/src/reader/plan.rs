//! Logical extents turned into the physical reads that serve them: every piece's place
//! in a data log and in the caller's buffer, the pieces in data-log order, joined
//! into as few reads as the sieve allows ([`ExtentPlan`]). `read_extents` plans and
//! reads at once; a caller that schedules reads across processes (ordered collective
//! reads of a reorganized file, `patio.mpi`) plans first, learns where each read lies
//! ([`ExtentPlan::places`]) and reads the plan with a hook around every physical read.

use super::Reader;
use crate::error::{ContainerError, Result};
use patio_core::Lookup;

/// Forward gaps of up to this many bytes between the pieces a `read_extents` call
/// needs from one data log are read through and dropped instead of starting another
/// read (data sieving, as MPI-IO libraries do for independent non-contiguous reads): a
/// pattern read with requests a little smaller than planned stays one read.
pub const SIEVE_GAP: u64 = 256 << 10;
/// The most bytes one sieved read spans.
pub const SIEVE_SPAN: u64 = 16 << 20;

/// Where one physical read of a plan lies: data log `chunk` (the reader's writer
/// order), bytes `start..end` of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RunPlace {
    pub chunk: u32,
    pub start: u64,
    pub end: u64,
}

/// The physical reads that serve a list of logical extents, in data-log order, and
/// the holes (read as zeros) among them.
#[derive(Debug)]
pub struct ExtentPlan {
    runs: Vec<Run>,
    /// `(buffer position, length)` of the parts that no data covers.
    holes: Vec<(usize, usize)>,
    bytes: usize,
}

impl ExtentPlan {
    /// The bytes the extents hold (the buffer `read_plan` fills).
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The physical reads, in the order `read_plan` issues them (data-log order).
    pub fn places(&self) -> Vec<RunPlace> {
        self.runs
            .iter()
            .map(|r| RunPlace {
                chunk: r.chunk as u32,
                start: r.start,
                end: r.end,
            })
            .collect()
    }
}

/// Pieces of one data log read together: `(physical, buffer position, length)`.
#[derive(Debug)]
struct Run {
    chunk: usize,
    start: u64,
    end: u64,
    /// The pieces so far continue each other on disk and in the caller's buffer: one
    /// read straight into it.
    direct: bool,
    pieces: Vec<(u64, usize, usize)>,
}

impl Run {
    fn new(chunk: usize, piece: (u64, usize, usize)) -> Self {
        Run {
            chunk,
            start: piece.0,
            end: piece.0 + piece.2 as u64,
            direct: true,
            pieces: vec![piece],
        }
    }

    /// Whether `piece` of `chunk` joins this read: same log, forward, a gap of at most
    /// [`SIEVE_GAP`]. A read that goes through a scratch buffer (gaps on disk, or
    /// pieces out of order in the caller's buffer) spans at most [`SIEVE_SPAN`] bytes;
    /// one that lands straight in the caller's buffer any.
    fn takes(&self, chunk: usize, piece: (u64, usize, usize)) -> bool {
        let (physical, _, len) = piece;
        if chunk != self.chunk || physical < self.end || physical - self.end > SIEVE_GAP {
            return false;
        }
        (self.direct && self.continued_by(piece))
            || physical + len as u64 - self.start <= SIEVE_SPAN
    }

    /// `piece` starts where the last one ended, on disk and in the caller's buffer.
    fn continued_by(&self, piece: (u64, usize, usize)) -> bool {
        let (_, b, n) = *self.pieces.last().expect("a run has a piece");
        piece.0 == self.end && piece.1 == b + n
    }

    fn push(&mut self, piece: (u64, usize, usize)) {
        self.direct &= self.continued_by(piece);
        self.end = piece.0 + piece.2 as u64;
        self.pieces.push(piece);
    }
}

impl Reader {
    /// The physical reads that serve the logical `extents` `(offset, len)`, read one
    /// after another into a buffer of their total length: every piece's place on disk
    /// and in that buffer, the pieces in data-log order whatever the extents' order,
    /// and pieces that follow each other in the same data log — a pattern stored
    /// contiguously by a reorganization — joined into one read across forward gaps of
    /// up to [`SIEVE_GAP`] bytes (read and dropped). An extent past the end of the
    /// file is an error.
    pub fn plan_extents(&self, extents: &[(u64, u64)]) -> Result<ExtentPlan> {
        let size = self.size();
        let mut total = 0u64;
        for &(o, l) in extents {
            if o.checked_add(l).is_none_or(|end| end > size) {
                return Err(ContainerError::Invalid(format!(
                    "{}: extent of {l} bytes at offset {o} ends past the end of the file ({size} bytes)",
                    self.dir.display()
                )));
            }
            total += l;
        }
        let bytes = usize::try_from(total).map_err(|_| {
            ContainerError::Invalid(format!("extents hold {total} bytes: more than memory"))
        })?;
        let mut pieces: Vec<(usize, u64, usize, usize)> = Vec::new();
        let mut holes = Vec::new();
        let mut done = 0usize;
        for &(o, l) in extents {
            let mut x = o;
            let end = o + l;
            while x < end {
                let left = end - x;
                let n = match self.lookup(x) {
                    Lookup::Data {
                        chunk,
                        physical,
                        len,
                    } => {
                        let n = len.min(left) as usize;
                        pieces.push((chunk as usize, physical, done, n));
                        n
                    }
                    Lookup::Hole { len } => {
                        let n = len.min(left) as usize;
                        holes.push((done, n));
                        n
                    }
                    Lookup::Unmapped => {
                        holes.push((done, left as usize));
                        left as usize
                    }
                };
                x += n as u64;
                done += n;
            }
        }
        pieces.sort_unstable_by_key(|&(chunk, physical, at, _)| (chunk, physical, at));
        let mut runs: Vec<Run> = Vec::new();
        for (chunk, physical, at, n) in pieces {
            let piece = (physical, at, n);
            match runs.last_mut() {
                Some(r) if r.takes(chunk, piece) => r.push(piece),
                _ => runs.push(Run::new(chunk, piece)),
            }
        }
        Ok(ExtentPlan { runs, holes, bytes })
    }

    /// Reads `plan` into `buf` (exactly [`ExtentPlan::bytes`] long), holes as zeros.
    /// `pace(i, false)` runs before the plan's `i`-th physical read and `pace(i,
    /// true)` right after it (before its pieces are copied into place); an error from
    /// it stops the read. Returns the number of physical reads.
    pub fn read_plan<F>(&self, plan: &ExtentPlan, buf: &mut [u8], mut pace: F) -> Result<u64>
    where
        F: FnMut(usize, bool) -> Result<()>,
    {
        if plan.bytes != buf.len() {
            return Err(ContainerError::Invalid(format!(
                "extents hold {} bytes, the buffer {}",
                plan.bytes,
                buf.len()
            )));
        }
        for &(at, n) in &plan.holes {
            buf[at..at + n].fill(0);
        }
        for (i, run) in plan.runs.iter().enumerate() {
            pace(i, false)?;
            let (p0, b0, _) = run.pieces[0];
            if run.direct {
                let len = (run.end - p0) as usize;
                self.read_data(run.chunk, p0, &mut buf[b0..b0 + len])?;
                pace(i, true)?;
                continue;
            }
            let mut scratch = vec![0u8; (run.end - run.start) as usize];
            self.read_data(run.chunk, run.start, &mut scratch)?;
            pace(i, true)?;
            for &(p, b, n) in &run.pieces {
                let at = (p - run.start) as usize;
                buf[b..b + n].copy_from_slice(&scratch[at..at + n]);
            }
        }
        Ok(plan.runs.len() as u64)
    }

    /// Reads the logical `extents` `(offset, len)` one after another into `buf`
    /// (exactly their total length), one read per physical run of
    /// [`Reader::plan_extents`]. Returns the number of reads issued. Holes read as
    /// zeros; an extent past the end of the file is an error.
    pub fn read_extents(&self, extents: &[(u64, u64)], buf: &mut [u8]) -> Result<u64> {
        let plan = self.plan_extents(extents)?;
        self.read_plan(&plan, buf, |_, _| Ok(()))
    }
}
