//! `patio reorg plan|apply|register|status|unregister`: pattern-aware reorganization of
//! a file from a trace of the programs that read it (patio-reorg). `plan` shows the
//! recurring patterns, what becomes contiguous, the remap's size and the modelled gain;
//! `apply` writes the reorganized copy as a container that serves the original logical
//! file and registers it for the file; the registration commands are in
//! `reorg_register`.

#[path = "reorg_register.rs"]
mod reorg_register;

use crate::load::load_trace;
use crate::report::{human_bytes, progress, sig3, write_stdout};
use anyhow::{Context, Result};
use patio_prefetch::striped::{Striping, StripingError, PRESETS};
use patio_reorg::{apply, plan, Plan, PlanOptions, SelectOptions};
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand)]
pub enum ReorgCommand {
    /// The recurring patterns a trace shows for a file, what would become contiguous, the remap's size and the modelled gain.
    ///
    /// Every process's requests on FILE (MPI-IO requests when the trace has them,
    /// else POSIX) become a footprint: the bytes it touches in first-touch order.
    /// Processes with the same footprint share a pattern. A pattern is planned when
    /// the requests are strided, kd-strided or repeating deltas, not already
    /// contiguous, and packing them saves time on the storage model (--store).
    /// Bytes wanted by several patterns stay with the one that saves most; the
    /// others read them where it put them (shown as "cedes"). Bytes no pattern
    /// covers follow in their original order. Exits non-zero when nothing recurs.
    #[command(
        after_help = "Examples:\n  patio reorg plan run.darshan --file data.bin\n  patio reorg plan run.ptrace --file /scratch/data.bin --trace-file /gpfs/run1/data.bin --json\n  patio reorg apply run.darshan --file data.bin -o data.pc\n  patio mount container . /mnt/reorg     # /mnt/reorg/data.pc reads as data.bin"
    )]
    Plan {
        /// The trace (.darshan, .csv, .ptrace, .praw).
        trace: PathBuf,
        /// The file the trace's programs read, as it is on this machine.
        #[arg(long)]
        file: PathBuf,
        #[command(flatten)]
        opts: Opts,
        /// Print the plan as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write a reorganized copy of FILE as a new container (a temporary name, synced, renamed; FILE is never modified) and register it for FILE.
    ///
    /// The container's one data log holds FILE's bytes in the planned order; its
    /// index is the remap. Read it with `patio mount container`, `patio.Container`,
    /// `patio.mpi.open`; `patio container flatten` gives FILE back. Refuses an
    /// existing output and removes a partial one on any failure (no space, FILE
    /// changed during the copy). Once in place, the container is registered for FILE
    /// (`.FILE.patio-reorg` beside it, with the version of FILE that was copied), so
    /// that the MPI-IO layer serves FILE's reads from it while FILE is unchanged;
    /// `--no-register` skips that.
    #[command(
        after_help = "Examples:\n  patio reorg apply run.darshan --file data.bin -o data.pc\n  patio reorg apply run.ptrace --file /scratch/data.bin --trace-file /gpfs/run1/data.bin -o /scratch/data.pc --json"
    )]
    Apply {
        /// The trace to plan from (.darshan, .csv, .ptrace, .praw); the file to
        /// reorganize with the retired order `apply FILE --trace TRACE`.
        #[arg(value_name = "TRACE")]
        input: PathBuf,
        /// The file to reorganize, as it is on this machine.
        #[arg(long, required_unless_present = "trace", conflicts_with = "trace")]
        file: Option<PathBuf>,
        /// Retired order: `reorg apply FILE --trace TRACE`.
        #[arg(long, hide = true)]
        trace: Option<PathBuf>,
        /// The container to create (must not exist).
        #[arg(short, long)]
        output: PathBuf,
        #[command(flatten)]
        opts: Opts,
        /// Do not register the container for FILE.
        #[arg(long)]
        no_register: bool,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Register an existing reorganized CONTAINER for FILE after checking it holds FILE's bytes.
    ///
    /// For a pair that was moved or copied, or a FILE seen through a mount (whose
    /// device and inode differ from where the container was made). The container's
    /// logical size must equal FILE's, and 4 KiB blocks — the first, the last and
    /// --samples more spread over the file — read from FILE and through the
    /// container must be equal; any difference refuses with one line. Records
    /// FILE's version as it is now, in `.FILE.patio-reorg` beside FILE (the
    /// container relative to FILE's directory when inside it, else absolute),
    /// replacing an earlier registration.
    #[command(
        after_help = "Examples:\n  patio reorg register /mnt/run/data.bin /mnt/run/data.pc\n  patio reorg register data.bin data.pc --samples 1024 --json"
    )]
    Register(reorg_register::RegisterArgs),
    /// Whether FILE's reads are served from its registered container, and why not.
    ///
    /// Served when FILE is still the version the container was built from (device,
    /// inode, size, modification and change times) and the container opens whole
    /// with FILE's size. Text: one line; exits non-zero when FILE has no
    /// registration. --json: {"file", "registration", "container", "source_matches",
    /// "served", "reason" (when not served), "patterns" (global patterns of the
    /// container's index, the remap's size), "index_records", "index_bytes",
    /// "registered_ns"}; with no registration "container" is null and the exit is 0.
    /// A corrupt registration is an error naming it.
    #[command(
        after_help = "Examples:\n  patio reorg status data.bin\n  patio reorg status data.bin --json"
    )]
    Status(reorg_register::StatusArgs),
    /// Remove FILE's registration (the container is left alone); nothing to do when there is none.
    #[command(after_help = "Example:\n  patio reorg unregister data.bin && rm -r data.pc")]
    Unregister(reorg_register::UnregisterArgs),
}

#[derive(clap::Args)]
pub struct Opts {
    /// The file's name in the trace when it differs from FILE (another path, another machine).
    #[arg(long, value_name = "NAME")]
    trace_file: Option<String>,
    /// The trace module to use (default MPIIO when present, else POSIX).
    #[arg(long)]
    module: Option<String>,
    /// Storage model the gain is priced on: hdd, ssd or lustre (presets of the striped
    /// model), or probed (this machine's, from `patio store probe`).
    #[arg(long, value_name = "PRESET", default_value = "lustre")]
    store: String,
    /// The number of targets (servers) of the --store model instead of the preset's.
    #[arg(long, value_name = "N")]
    store_targets: Option<usize>,
    /// The stripe size in KiB of the --store model instead of the preset's (RPCs stay
    /// at most one stripe).
    #[arg(long, value_name = "KIB")]
    store_stripe_kib: Option<u64>,
    /// Pattern detector window.
    #[arg(long, default_value_t = 64)]
    window: usize,
}

impl Opts {
    /// The model as the text report names it: the preset, and what was changed of it.
    fn store_shown(&self) -> String {
        let mut shown = self.store.clone();
        if let Some(t) = self.store_targets {
            shown += &format!(", {t} targets");
        }
        if let Some(k) = self.store_stripe_kib {
            shown += &format!(", {k} KiB stripes");
        }
        shown
    }

    fn plan_options(&self) -> Result<PlanOptions> {
        let striping = Striping::by_name(&self.store).map_err(|e| match e {
            StripingError::Probed(why) => anyhow::anyhow!("--store probed: {why}"),
            _ => anyhow::anyhow!(
                "--store must be one of {}, probed, not {:?}",
                PRESETS.join(", "),
                self.store
            ),
        })?;
        let striping = crate::store_args::overridden(
            striping,
            &self.store,
            self.store_targets,
            self.store_stripe_kib,
        )?;
        if self.window < 2 {
            anyhow::bail!("--window must be at least 2, not {}", self.window);
        }
        Ok(PlanOptions {
            select: SelectOptions {
                traced_name: self.trace_file.clone(),
                module: self.module.clone(),
            },
            striping,
            window: self.window,
        })
    }
}

#[derive(Serialize)]
struct Ceded {
    pattern: usize,
    bytes: u64,
}

#[derive(Serialize)]
struct PatternJson {
    processes: Vec<String>,
    signature: String,
    requests: u64,
    bytes: u64,
    kind: &'static str,
    owned_bytes: u64,
    ceded: Vec<Ceded>,
    extents_before: u64,
    extents_after: u64,
    modelled_saving_s: f64,
}

#[derive(Serialize)]
struct UnplannedJson {
    processes: Vec<String>,
    requests: u64,
    reason: String,
}

#[derive(Serialize)]
struct PlanJson {
    file: String,
    traced_file: String,
    module: String,
    size: u64,
    patterns: Vec<PatternJson>,
    unplanned: Vec<UnplannedJson>,
    pieces: u64,
    remap_bytes: u64,
    table_bytes: u64,
    physical_extents_before: u64,
    physical_extents_after: u64,
    store: String,
    /// --store-targets and --store-stripe-kib when given (else the preset's).
    store_targets: Option<usize>,
    store_stripe_kib: Option<u64>,
    model_seconds_before: f64,
    model_seconds_after: f64,
    model_seconds_one_request: f64,
}

fn plan_json(p: &Plan, opts: &Opts) -> PlanJson {
    PlanJson {
        file: p.file.display().to_string(),
        traced_file: p.traced_file.clone(),
        module: p.module.clone(),
        size: p.identity.size,
        patterns: p
            .patterns
            .iter()
            .map(|q| PatternJson {
                processes: q.processes.clone(),
                signature: q.signature.clone(),
                requests: q.requests,
                bytes: q.bytes,
                kind: q.kind.as_str(),
                owned_bytes: q.owned_bytes,
                ceded: q
                    .ceded
                    .iter()
                    .map(|&(pattern, bytes)| Ceded { pattern, bytes })
                    .collect(),
                extents_before: q.extents_before,
                extents_after: q.extents_after,
                modelled_saving_s: q.saving_s,
            })
            .collect(),
        unplanned: p
            .unplanned
            .iter()
            .map(|u| UnplannedJson {
                processes: u.processes.clone(),
                requests: u.requests,
                reason: u.reason.clone(),
            })
            .collect(),
        pieces: p.order.len() as u64,
        remap_bytes: p.remap_bytes,
        table_bytes: p.table_bytes,
        physical_extents_before: p.physical_extents_before,
        physical_extents_after: p.physical_extents_after,
        store: opts.store.clone(),
        store_targets: opts.store_targets,
        store_stripe_kib: opts.store_stripe_kib,
        model_seconds_before: p.model_seconds_before,
        model_seconds_after: p.model_seconds_after,
        model_seconds_one_request: p.model_seconds_one_request,
    }
}

fn processes_text(ps: &[String]) -> String {
    if ps.len() <= 3 {
        ps.join(", ")
    } else {
        format!("{}, … ({} processes)", ps[..2].join(", "), ps.len())
    }
}

fn plan_text(p: &Plan, store: &str) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} ({}): {} patterns from the {} requests of \"{}\"",
        p.file.display(),
        human_bytes(p.identity.size),
        p.patterns.len(),
        p.module,
        p.traced_file
    );
    for (i, q) in p.patterns.iter().enumerate() {
        let _ = writeln!(
            s,
            "  #{i} {}: {} {}, {} requests, {} → {} extents per process, saves {} ms modelled\n      {}",
            processes_text(&q.processes),
            q.kind.as_str(),
            human_bytes(q.bytes),
            q.requests,
            q.extents_before,
            q.extents_after,
            sig3(q.saving_s * 1e3),
            q.signature
        );
        for &(other, bytes) in &q.ceded {
            let _ = writeln!(
                s,
                "      cedes {} to #{other} (also read by it, which saves more); read where #{other} put them",
                human_bytes(bytes)
            );
        }
    }
    for u in &p.unplanned {
        let _ = writeln!(
            s,
            "  left in place: {} ({} requests): {}",
            processes_text(&u.processes),
            u.requests,
            u.reason
        );
    }
    let _ = writeln!(
        s,
        "remap: {} as patterns; {} as a one-entry-per-piece table ({} pieces)",
        human_bytes(p.remap_bytes),
        human_bytes(p.table_bytes),
        p.order.len()
    );
    let _ = writeln!(
        s,
        "physical extents read by all traced processes: {} → {}",
        p.physical_extents_before, p.physical_extents_after
    );
    let _ = writeln!(
        s,
        "modelled on {store}, all processes together: {} s as traced → {} s reorganized, {} s reorganized with one request per process",
        sig3(p.model_seconds_before),
        sig3(p.model_seconds_after),
        sig3(p.model_seconds_one_request)
    );
    s
}

fn make_plan(trace: &Path, file: &Path, opts: &Opts) -> Result<Plan> {
    let options = opts.plan_options()?;
    let trace_data = load_trace(trace)?;
    plan(&trace_data, file, &options)
        .with_context(|| format!("reorg plan from {}", trace.display()))
}

#[derive(Serialize)]
struct ApplyJson {
    output: String,
    registration: Option<reorg_register::RegistrationJson>,
    bytes: u64,
    pieces: u64,
    index_bytes: u64,
    seconds: f64,
    plan: PlanJson,
}

/// `reorg apply`'s trace and file: `TRACE --file FILE` (the order of `reorg plan` and
/// `layout learn`), or the retired `FILE --trace TRACE` with a deprecation line.
fn apply_inputs(
    input: PathBuf,
    file: Option<PathBuf>,
    trace: Option<PathBuf>,
) -> Result<(PathBuf, PathBuf)> {
    Ok(match (file, trace) {
        (Some(file), _) => (input, file),
        (None, Some(trace)) => {
            crate::retired::warn(
                "`patio reorg apply FILE --trace TRACE`",
                "`patio reorg apply TRACE --file FILE`",
            );
            (trace, input)
        }
        (None, None) => anyhow::bail!("reorg apply: give the file to reorganize: --file FILE"),
    })
}

pub fn run(cmd: ReorgCommand) -> Result<()> {
    match cmd {
        ReorgCommand::Plan {
            trace,
            file,
            opts,
            json,
        } => {
            let p = make_plan(&trace, &file, &opts)?;
            if json {
                write_stdout(&(serde_json::to_string_pretty(&plan_json(&p, &opts))? + "\n"))
            } else {
                write_stdout(&plan_text(&p, &opts.store_shown()))
            }
        }
        ReorgCommand::Apply {
            input,
            file,
            trace,
            output,
            opts,
            no_register,
            json,
        } => {
            let (trace, file) = apply_inputs(input, file, trace)?;
            if std::fs::symlink_metadata(&output).is_ok() {
                anyhow::bail!(
                    "{}: already exists; choose another output or remove it first",
                    output.display()
                );
            }
            let p = make_plan(&trace, &file, &opts)?;
            let bar = progress(p.identity.size, json);
            let started = std::time::Instant::now();
            let applied = apply(&p, &output, |done, _| bar.set_position(done))?;
            bar.finish_and_clear();
            let seconds = started.elapsed().as_secs_f64();
            let registration = if no_register {
                None
            } else {
                Some(
                    patio_reorg::registry::register(&file, &output, &p.identity).with_context(
                        || format!("wrote {} but could not register it", output.display()),
                    )?,
                )
            };
            if json {
                let j = ApplyJson {
                    output: output.display().to_string(),
                    registration: registration
                        .as_ref()
                        .map(|r| reorg_register::registration_json(&file, r)),
                    bytes: applied.bytes,
                    pieces: applied.pieces,
                    index_bytes: applied.index_bytes,
                    seconds,
                    plan: plan_json(&p, &opts),
                };
                write_stdout(&(serde_json::to_string_pretty(&j)? + "\n"))
            } else {
                write_stdout(&plan_text(&p, &opts.store_shown()))?;
                write_stdout(&format!(
                    "wrote {}: {} in {} pieces, index {} on disk, {} s\n",
                    output.display(),
                    human_bytes(applied.bytes),
                    applied.pieces,
                    human_bytes(applied.index_bytes),
                    sig3(seconds)
                ))?;
                if let Some(r) = &registration {
                    write_stdout(&format!(
                        "registered for {} ({})\n",
                        file.display(),
                        r.path.display()
                    ))?;
                }
                Ok(())
            }
        }
        ReorgCommand::Register(a) => reorg_register::register(a),
        ReorgCommand::Status(a) => reorg_register::status(a),
        ReorgCommand::Unregister(a) => reorg_register::unregister(a),
    }
}
