//! Planning a reorganization: from the processes' requests on one file, the recurring
//! non-contiguous patterns (one per distinct footprint, shared by every process that
//! reads exactly it), their modelled value on the striped storage model, who keeps
//! bytes that several patterns want, and one physical order for the whole file.
//!
//! * A process's **footprint** is the bytes it touches in first-touch order, merged
//!   where they abut. Processes with the same footprint share one pattern.
//! * A footprint is **planned** when the process's requests form a pattern (strided,
//!   kd-strided or repeating deltas by `patio analyze`'s analysis), are not already
//!   contiguous, and packing the footprint saves modelled time; the others are listed
//!   with the reason.
//! * **Overlaps** go to the pattern with the largest modelled saving (its saving is
//!   the reads of all its processes); a pattern that loses bytes reads them where
//!   their owner put them, and the plan says so.
//! * **Order**: planned patterns in the order of their first byte in the file, each
//!   the bytes it owns in first-touch order; then every byte no pattern owns, in its
//!   original relative order.

use crate::error::{ReorgError, Result};
use crate::intervals::{Claims, Seen};
use crate::remap::{order_extents, Layout};
use crate::select::{select, Process, SelectOptions};
use patio_container::{index_log_bytes, IndexMode};
use patio_core::analysis::{analyze_stream, Kind};
use patio_core::{Detector, ExtentTable};
use patio_storage::striped::Striping;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// What a plan needs besides the trace and the file.
#[derive(Clone, Debug)]
pub struct PlanOptions {
    pub select: SelectOptions,
    /// The storage model the gain is priced on.
    pub striping: Striping,
    /// Detector window of the pattern analysis and the remap.
    pub window: usize,
}

/// The identity of a file's version (the core's one rule): a plan is valid for this
/// version only.
pub type FileIdentity = patio_core::FileVersion;

/// One planned pattern.
#[derive(Clone, Debug)]
pub struct PatternPlan {
    /// The processes that read exactly this footprint (`rank 3 read`).
    pub processes: Vec<String>,
    pub kind: Kind,
    /// The offsets' signature in unit notation.
    pub signature: String,
    /// Requests of all its processes.
    pub requests: u64,
    /// Bytes of the footprint.
    pub bytes: u64,
    /// Bytes placed with this pattern (the footprint less what others hold).
    pub owned_bytes: u64,
    /// `(pattern index, bytes)`: footprint bytes placed with another pattern.
    pub ceded: Vec<(usize, u64)>,
    /// Modelled seconds saved by packing the footprint, all its processes together.
    pub saving_s: f64,
    /// Physical extents one of its processes reads, before and after.
    pub extents_before: u64,
    pub extents_after: u64,
    owned: Vec<(u64, u64)>,
}

/// Processes left as they are, and why.
#[derive(Clone, Debug)]
pub struct Unplanned {
    pub processes: Vec<String>,
    pub requests: u64,
    pub reason: String,
}

/// A reorganization plan for one file.
#[derive(Clone, Debug)]
pub struct Plan {
    pub file: PathBuf,
    pub identity: FileIdentity,
    pub traced_file: String,
    pub module: String,
    pub patterns: Vec<PatternPlan>,
    pub unplanned: Vec<Unplanned>,
    /// The physical order: logical pieces `(offset, length)`, stored one after another.
    pub order: Vec<(u64, u64)>,
    /// Bytes of the remap as the container stores it: its index log, pattern records
    /// of the order in write order (logical offsets of physically consecutive pieces).
    pub remap_bytes: u64,
    /// Encoded bytes of a one-entry-per-piece table of the same mapping.
    pub table_bytes: u64,
    /// Physical extents all traced processes read (each process's requests in order,
    /// runs that follow each other on disk counted once), before and after.
    pub physical_extents_before: u64,
    pub physical_extents_after: u64,
    /// Modelled makespan of all traced processes reading together, before and after.
    pub model_seconds_before: f64,
    pub model_seconds_after: f64,
    /// The same after, each process reading its requests as one request of its
    /// physical runs (what `Reader::read_extents` and `patio.mpi` issue).
    pub model_seconds_one_request: f64,
}

impl Plan {
    pub fn layout(&self) -> Layout {
        Layout::from_order(&self.order)
    }
}

/// One distinct footprint and the processes that share it.
struct Group<'a> {
    footprint: Vec<(u64, u64)>,
    processes: Vec<&'a Process>,
}

fn footprint(requests: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut seen = Seen::default();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &(o, l) in requests {
        for (s, e) in seen.add(o, o + l) {
            match out.last_mut() {
                Some((po, pl)) if *po + *pl == s => *pl += e - s,
                _ => out.push((s, e - s)),
            }
        }
    }
    out
}

fn labels(ps: &[&Process]) -> Vec<String> {
    ps.iter().map(|p| p.label()).collect()
}

fn simulate(striping: &Striping, clients: &[Vec<Vec<(u64, u64)>>]) -> Result<f64> {
    striping
        .simulate(clients)
        .map(|r| r.seconds)
        .map_err(|e| ReorgError::Model(e.to_string()))
}

/// Plans the reorganization of `file` from the processes of `trace` that access it.
pub fn plan(trace: &patio_core::trace::Trace, file: &Path, opts: &PlanOptions) -> Result<Plan> {
    let identity = FileIdentity::of(file).map_err(|e| ReorgError::io(file, e))?;
    let size = identity.size;
    let sel = select(trace, file, size, &opts.select)?;
    let detector = Detector::new(opts.window);

    let mut groups: Vec<Group> = Vec::new();
    let mut by_footprint: HashMap<Vec<(u64, u64)>, usize> = HashMap::new();
    for p in &sel.processes {
        let f = footprint(&p.requests);
        match by_footprint.get(&f) {
            Some(&g) => groups[g].processes.push(p),
            None => {
                by_footprint.insert(f.clone(), groups.len());
                groups.push(Group {
                    footprint: f,
                    processes: vec![p],
                });
            }
        }
    }

    // Candidates: (group, kind, signature, saving).
    let mut candidates = Vec::new();
    let mut unplanned = Vec::new();
    for (gi, g) in groups.iter().enumerate() {
        let first = g.processes[0];
        let requests: u64 = g.processes.iter().map(|p| p.requests.len() as u64).sum();
        let offsets: Vec<u64> = first.requests.iter().map(|r| r.0).collect();
        let lengths: Vec<u64> = first.requests.iter().map(|r| r.1).collect();
        let analysis = analyze_stream(&offsets, &lengths, &detector);
        let reason = if g.footprint.len() <= 1 {
            Some("already contiguous".to_string())
        } else {
            match analysis.kind {
                Kind::Contiguous => Some("already contiguous".to_string()),
                Kind::Irregular => Some(format!(
                    "irregular ({:.0} % of requests in patterns)",
                    analysis.coverage * 100.0
                )),
                _ => None,
            }
        };
        if let Some(reason) = reason {
            unplanned.push(Unplanned {
                processes: labels(&g.processes),
                requests,
                reason,
            });
            continue;
        }
        let packed = Layout::from_order(&g.footprint);
        let identity_layout = Layout::identity(size);
        let before = simulate(&opts.striping, &[identity_layout.client(&first.requests)])?;
        let after = simulate(&opts.striping, &[packed.client(&first.requests)])?;
        let saving = (before - after) * g.processes.len() as f64;
        if saving <= 0.0 {
            unplanned.push(Unplanned {
                processes: labels(&g.processes),
                requests,
                reason: format!(
                    "no modelled gain ({:.3} ms → {:.3} ms per process)",
                    before * 1e3,
                    after * 1e3
                ),
            });
            continue;
        }
        candidates.push((gi, analysis.kind, analysis.signature, saving, requests));
    }
    if candidates.is_empty() {
        let why = if unplanned.is_empty() {
            "no requests".to_string()
        } else {
            let mut reasons: Vec<String> = Vec::new();
            for u in &unplanned {
                let short = u.reason.split(" (").next().unwrap_or(&u.reason).to_string();
                if !reasons.contains(&short) {
                    reasons.push(short);
                }
            }
            format!("{} processes: {}", sel.processes.len(), reasons.join(", "))
        };
        return Err(ReorgError::NoPattern {
            file: file.display().to_string(),
            why,
        });
    }

    // Placement order: by first byte in the file; claims: by saving.
    candidates.sort_by_key(|c| groups[c.0].footprint.iter().map(|f| f.0).min());
    let mut priority: Vec<usize> = (0..candidates.len()).collect();
    priority.sort_by(|&a, &b| candidates[b].3.total_cmp(&candidates[a].3).then(a.cmp(&b)));
    let mut claims = Claims::default();
    let mut owned: Vec<Vec<(u64, u64)>> = vec![Vec::new(); candidates.len()];
    let mut ceded: Vec<Vec<(usize, u64)>> = vec![Vec::new(); candidates.len()];
    for &c in &priority {
        for &(o, l) in &groups[candidates[c].0].footprint {
            let got = claims.claim(o, o + l, c);
            for (s, e) in got.free {
                match owned[c].last_mut() {
                    Some((po, pl)) if *po + *pl == s => *pl += e - s,
                    _ => owned[c].push((s, e - s)),
                }
            }
            for (other, bytes) in got.held {
                match ceded[c].iter_mut().find(|(w, _)| *w == other) {
                    Some((_, b)) => *b += bytes,
                    None => ceded[c].push((other, bytes)),
                }
            }
        }
    }
    let mut order: Vec<(u64, u64)> = Vec::new();
    let mut push = |s: u64, l: u64| match order.last_mut() {
        Some((po, pl)) if *po + *pl == s => *pl += l,
        _ => order.push((s, l)),
    };
    for pieces in &owned {
        for &(s, l) in pieces {
            push(s, l);
        }
    }
    for (s, e) in claims.unclaimed(0, size) {
        push(s, e - s);
    }
    let layout = Layout::from_order(&order);
    let identity_layout = Layout::identity(size);

    let patterns: Vec<PatternPlan> = candidates
        .into_iter()
        .enumerate()
        .map(|(c, (gi, kind, signature, saving, requests))| {
            let g = &groups[gi];
            let first = &g.processes[0].requests;
            PatternPlan {
                processes: labels(&g.processes),
                kind,
                signature,
                requests,
                bytes: g.footprint.iter().map(|f| f.1).sum(),
                owned_bytes: owned[c].iter().map(|f| f.1).sum(),
                ceded: std::mem::take(&mut ceded[c]),
                saving_s: saving,
                extents_before: identity_layout.runs(first),
                extents_after: layout.runs(first),
                owned: std::mem::take(&mut owned[c]),
            }
        })
        .collect();

    let remap_bytes = index_log_bytes(IndexMode::Pattern, &order, &detector);
    let table_bytes = ExtentTable::build(&order_extents(&order)).encode().len() as u64;
    let before_clients: Vec<_> = sel
        .processes
        .iter()
        .map(|p| identity_layout.client(&p.requests))
        .collect();
    let after_clients: Vec<_> = sel
        .processes
        .iter()
        .map(|p| layout.client(&p.requests))
        .collect();
    let one_request: Vec<Vec<Vec<(u64, u64)>>> = after_clients
        .iter()
        .map(|requests| {
            let mut merged: Vec<(u64, u64)> = Vec::new();
            for &(p, n) in requests.iter().flatten() {
                match merged.last_mut() {
                    Some((q, m)) if *q + *m == p => *m += n,
                    _ => merged.push((p, n)),
                }
            }
            vec![merged]
        })
        .collect();
    Ok(Plan {
        model_seconds_one_request: simulate(&opts.striping, &one_request)?,
        file: file.to_path_buf(),
        identity,
        traced_file: sel.traced_file,
        module: sel.module,
        physical_extents_before: sel
            .processes
            .iter()
            .map(|p| identity_layout.runs(&p.requests))
            .sum(),
        physical_extents_after: sel.processes.iter().map(|p| layout.runs(&p.requests)).sum(),
        model_seconds_before: simulate(&opts.striping, &before_clients)?,
        model_seconds_after: simulate(&opts.striping, &after_clients)?,
        patterns,
        unplanned,
        order,
        remap_bytes,
        table_bytes,
    })
}

impl PatternPlan {
    /// The bytes placed with this pattern, in placement order.
    pub fn owned(&self) -> &[(u64, u64)] {
        &self.owned
    }
}
