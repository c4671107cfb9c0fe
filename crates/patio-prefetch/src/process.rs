//! The process's one prefetch engine, for front ends that live inside a user's process
//! (Python's `patio.open`, the MPI-IO layer through [`crate::capi`]): every file opened
//! with prefetching reads through one lazily created [`Engine`] — one cache budget and
//! one worker pool for all of them.
//!
//! * A [`Lease`] is one open file's claim on the engine; the engine is replaced (another
//!   budget asked for) only while no lease is held, and refused otherwise.
//! * A forked child gets an engine of its own on its first open: worker threads do not
//!   survive `fork`, and joining the parent's (dropping it) would wait forever, so an
//!   engine inherited through `fork` is forgotten, never dropped. A lease taken before
//!   the fork is inert in the child ([`Lease::inherited`]).

use crate::engine::{Engine, EngineConfig, Stats};
use crate::error::PrefetchError;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The budget of an engine started without one.
pub const DEFAULT_BUDGET: u64 = 64 << 20;

/// The process's engine, the process it was started in, and its budget.
struct Global {
    engine: Arc<Engine>,
    pid: u32,
    budget: u64,
}

static ENGINE: Mutex<Option<Global>> = Mutex::new(None);
/// Leases held now (an engine with leases is never replaced).
static OPEN: AtomicUsize = AtomicUsize::new(0);

fn global() -> MutexGuard<'static, Option<Global>> {
    ENGINE.lock().unwrap_or_else(|e| e.into_inner())
}

/// One open file's claim on the process's engine; released when dropped.
pub struct Lease {
    engine: Option<Arc<Engine>>,
    pid: u32,
}

impl Lease {
    pub fn engine(&self) -> &Arc<Engine> {
        self.engine.as_ref().expect("held until drop")
    }

    /// Whether this lease was taken in another process (a `fork` parent): its engine's
    /// threads and locks are not this process's.
    pub fn inherited(&self) -> bool {
        self.pid != std::process::id()
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        OPEN.fetch_sub(1, Ordering::SeqCst);
        if self.inherited() {
            std::mem::forget(self.engine.take());
        }
    }
}

/// A lease on the engine, started (or replaced, see the module comment) with `budget`
/// bytes when given, else the running engine's (or [`DEFAULT_BUDGET`]).
pub fn acquire(budget: Option<u64>) -> Result<Lease, PrefetchError> {
    let mut g = global();
    let pid = std::process::id();
    if let Some(old) = g.take_if(|g| g.pid != pid) {
        std::mem::forget(old);
        OPEN.store(0, Ordering::SeqCst);
    }
    let lease = |engine: &Arc<Engine>| {
        OPEN.fetch_add(1, Ordering::SeqCst);
        Lease {
            engine: Some(engine.clone()),
            pid,
        }
    };
    match g.as_ref() {
        Some(cur) if budget.is_none_or(|b| b == cur.budget) => return Ok(lease(&cur.engine)),
        Some(cur) if OPEN.load(Ordering::SeqCst) > 0 => {
            return Err(PrefetchError::Invalid(format!(
                "the prefetch cache is shared by all open patio files and is {} MiB while {} of \
                 them are open; close them first or leave the budget out",
                cur.budget >> 20,
                OPEN.load(Ordering::SeqCst)
            )))
        }
        _ => {}
    }
    let budget = budget.unwrap_or(DEFAULT_BUDGET);
    let engine = Arc::new(Engine::new(EngineConfig {
        budget,
        ..EngineConfig::default()
    }));
    // A replaced engine (no lease on it is held) stops its workers here.
    *g = Some(Global {
        engine: engine.clone(),
        pid,
        budget,
    });
    Ok(lease(&engine))
}

/// The counters of the whole engine (every file opened since it started); an empty
/// engine's when none was started in this process.
pub fn stats() -> Stats {
    let engine = global()
        .as_ref()
        .filter(|g| g.pid == std::process::id())
        .map(|g| g.engine.clone());
    engine.map(|e| e.stats()).unwrap_or_default()
}

/// Serialises the tests of this crate that hold leases (they share the one engine).
#[cfg(test)]
pub(crate) fn test_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_share_one_engine_and_a_new_budget_waits_for_them_to_close() {
        let _serial = test_lock();
        let a = acquire(Some(8 << 20)).unwrap();
        let b = acquire(None).unwrap();
        assert!(Arc::ptr_eq(a.engine(), b.engine()));
        let err = acquire(Some(16 << 20)).err().unwrap().to_string();
        assert!(err.contains("shared by all open patio files"), "{err}");
        drop((a, b));
        let c = acquire(Some(16 << 20)).unwrap();
        assert_eq!(c.engine().config().budget, 16 << 20);
        assert!(!c.inherited());
    }
}
