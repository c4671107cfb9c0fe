//! The decoder suites' checks: an allocation probe, installed as the test binary's
//! global allocator, records the largest single allocation each thread asks for, so
//! that decoding untrusted bytes can be checked never to ask for more than a bound (a
//! length read from the input passed to `Vec::with_capacity` shows here long before it
//! exhausts memory); [`bounded`] and [`damaged`] run a decoder on arbitrary, truncated
//! and changed bytes under that bound. Included by path (`#[path = …] mod
//! alloc_probe;`) in the decoder suites of patio-core, patio-container and
//! patio-prefetch.
#![allow(dead_code)]

use proptest::prelude::*;
use proptest::sample::Index;
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, recording the largest request per thread.
pub struct Probe;

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

fn note(size: usize) {
    // `try_with`: the thread-local may already be gone while a thread exits.
    let _ = LARGEST.try_with(|l| {
        if size > l.get() {
            l.set(size);
        }
    });
}

// SAFETY: every call is forwarded unchanged to `System`; only sizes are recorded.
unsafe impl GlobalAlloc for Probe {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static PROBE: Probe = Probe;

/// Runs `f` and returns its result with the largest single allocation it asked for
/// (on this thread).
pub fn largest_allocation<R>(f: impl FnOnce() -> R) -> (R, usize) {
    LARGEST.with(|l| l.set(0));
    let r = f();
    (r, LARGEST.with(Cell::get))
}

/// The bound every decoder of `input_len` untrusted bytes stays within: a small
/// multiple of the input plus a fixed allowance (one entropy block, a few buffers).
pub fn bound(input_len: usize) -> usize {
    64 * input_len + (4 << 20)
}

/// Runs `decode` on `bytes` and checks the allocation bound; returns whether it
/// accepted them.
pub fn bounded<T, E>(bytes: &[u8], decode: impl FnOnce(&[u8]) -> Result<T, E>) -> bool {
    let (r, largest) = largest_allocation(|| decode(bytes).is_ok());
    assert!(
        largest <= bound(bytes.len()),
        "{} input bytes made the decoder ask for {largest} bytes at once",
        bytes.len()
    );
    r
}

/// Every prefix (truncations must be refused where `strict`), then the byte changes.
pub fn damaged<T, E>(
    valid: &[u8],
    flips: &[(Index, u8)],
    strict: bool,
    decode: impl Fn(&[u8]) -> Result<T, E>,
) {
    assert!(bounded(valid, &decode), "the valid encoding decodes");
    for cut in 0..valid.len() {
        let ok = bounded(&valid[..cut], &decode);
        assert!(
            !(strict && ok),
            "a prefix of {cut} of {} bytes decoded",
            valid.len()
        );
    }
    for &(at, x) in flips {
        let mut bad = valid.to_vec();
        let i = at.index(bad.len());
        bad[i] ^= x;
        bounded(&bad, &decode);
    }
}

/// Up to `most` single-byte changes (position, non-zero xor) for [`damaged`].
pub fn flips(most: usize) -> impl Strategy<Value = Vec<(Index, u8)>> {
    prop::collection::vec((any::<Index>(), 1u8..=255), 1..most)
}
