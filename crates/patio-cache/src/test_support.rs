//! Test support: the small cache configuration the tests of patio-cache and of its
//! front ends (`patio-fs::segcache`) share — budgets of a few segments, so that
//! eviction, grouping and restarts happen within a test's few hundred reads.
//! Compiled for this crate's tests and, through the `test-support` feature, for the
//! tests of crates that enable it in their dev-dependencies.

use crate::{CacheConfig, Policy, Popularity};
use std::time::Duration;

/// The test configuration under `policy`: 64 KiB of memory, 256 KiB of disk in
/// 32 KiB segments of 4 KiB items, popularity 1 of 2, no idle work during a test, and
/// groups built after 4 reads.
#[doc(hidden)]
pub fn config(policy: Policy) -> CacheConfig {
    CacheConfig {
        policy,
        memory: 64 << 10,
        disk: 256 << 10,
        segment: 32 << 10,
        item: 4096,
        popularity: Popularity {
            j: 1,
            k: 2,
            max_nodes: 1 << 16,
        },
        idle: Duration::from_secs(3600),
        build_after: 4,
    }
}
