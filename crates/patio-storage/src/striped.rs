//! The striped storage model shared by every reorganization cost model and benchmark
//! (design: REORGANIZATION.md §E): a file striped round-robin over `targets` servers
//! (OSTs), each a FIFO server whose service time for one RPC is
//! `L(d) + bytes / bandwidth`, `d` being the seek distance from the end of that
//! target's previous RPC in object space.
//!
//! The same [`Striping`] drives
//!
//! * [`Striping::simulate`] — a deterministic discrete-event simulation of many clients
//!   (modelled seconds, no sleeping), in [`sim`];
//! * [`Striping::page_counts`] and [`Striping::jump_counts`] — the inputs of the page
//!   model (eq 3.1: pages and chunks per target) and of the AMR model (eq 4.1: short,
//!   medium and long jumps per target), in [`counts`];
//! * the real-time store: patio-prefetch's `SlowStore` given a striping serves each read as
//!   these RPCs on per-target FIFO clocks and sleeps until the modelled completion.
//!
//! # Geometry
//! File offset `o` lives on target `(o / stripe_size) % targets`, at object offset
//! `(o / (stripe_size * targets)) * stripe_size + o % stripe_size`. [`Striping::split`]
//! cuts an extent into pieces that never cross a target change or an
//! `rpc_size`-aligned boundary in object space. A request's pieces are rounded to
//! `page_size` pages (clipped to their RPC window) or, with `whole_rpc`, to the whole
//! `rpc_size`-aligned RPC (the "cut" effect of REORGANIZATION §B.3); rounded pieces of
//! one request on one target that overlap or touch inside one RPC window are coalesced
//! into one RPC, and a target receives a request's RPCs in object-offset order.
//!
//! # Cost of one RPC ([`Striping::rpc_cost`])
//! `L(d) + bytes / bandwidth`, scaled by a factor uniform in `1 ± jitter` when `jitter`
//! is positive (seeded). `L(d)` is `latency_seq` for `d == 0`, `latency_near` for
//! `0 < d <= rpc_size`, `latency_mid` for `d <= 10 * rpc_size`, `latency_far` beyond;
//! backwards seeks count by absolute distance. Every target's head starts at object
//! offset 0. `request_latency` (network and client cost) is added once per client
//! request, after its last RPC completes, and occupies no target.
//!
//! # Presets ([`Striping::by_name`])
//! | name | targets | stripe | RPC | L_seq | L_near | L_mid | L_far | bandwidth/target | request |
//! |---|---|---|---|---|---|---|---|---|---|
//! | `hdd` | 1 | 64 KiB | 64 KiB | 0.05 ms | 1 ms | 4 ms | 8 ms | 150 MB/s | 0 |
//! | `ssd` | 1 | 128 KiB | 128 KiB | 0.02 ms | 0.1 ms | 0.1 ms | 0.1 ms | 740 MB/s | 0 |
//! | `lustre` | 8 | 1 MiB | 1 MiB | 0.2 ms | 0.5 ms | 1 ms | 2 ms | 500 MB/s | 0.3 ms |
//!
//! All presets use 4 KiB pages, no jitter, page rounding (`whole_rpc = false`) and the
//! seed [`DEFAULT_SEED`]. MB is 10^6 bytes. [`Striping::default`] is one `lustre`
//! target without request latency.

pub mod counts;
pub mod sim;

pub use counts::{JumpCounts, PageCounts};
pub use sim::{SeekCounts, SimReport};

use crate::rng::Rng;

/// Names accepted by [`Striping::by_name`].
pub const PRESETS: [&str; 3] = ["hdd", "ssd", "lustre"];

/// Seed of the presets' (and the default's) jitter.
pub const DEFAULT_SEED: u64 = 0x5107_5702_e000_0002;

/// The most targets a striping may have (the simulator and the store keep state per
/// target).
pub const MAX_TARGETS: usize = 1 << 16;

/// Simulations and counts refuse inputs that would cut into more pieces than this
/// (estimated from the extents' lengths): 2^26 RPCs of 1 MiB are 64 TiB.
pub const MAX_PIECES: u64 = 1 << 26;

/// The size of the region of the modelled address space each file gets
/// ([`Striping::file_base`]): 1 TiB.
pub const FILE_STRIDE: u64 = 1 << 40;

/// Parameters of the striped device model. Times are seconds, sizes bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct Striping {
    /// Number of targets (OSTs or servers), at least 1.
    pub targets: usize,
    /// Bytes of one stripe unit.
    pub stripe_size: u64,
    /// The largest request one target serves at once; RPCs never cross an
    /// `rpc_size`-aligned boundary in object space.
    pub rpc_size: u64,
    /// Page size of the rounding and of [`Striping::page_counts`].
    pub page_size: u64,
    /// `L(0)`: the RPC starts where the target's previous one ended.
    pub latency_seq: f64,
    /// `L(d)` for `0 < d <= rpc_size`.
    pub latency_near: f64,
    /// `L(d)` for `rpc_size < d <= 10 * rpc_size`.
    pub latency_mid: f64,
    /// `L(d)` for `d > 10 * rpc_size`.
    pub latency_far: f64,
    /// Bytes per second per target; `f64::INFINITY` for no transfer cost.
    pub bandwidth: f64,
    /// Network and client cost added once per client request.
    pub request_latency: f64,
    /// Each RPC's cost is scaled by a factor uniform in `1 ± jitter` (0 for none).
    pub jitter: f64,
    /// Seed of the jitter.
    pub seed: u64,
    /// Fetch every `rpc_size`-aligned RPC a read touches whole instead of the pages it
    /// touches.
    pub whole_rpc: bool,
}

/// Why a striping or an input was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StripingError {
    /// [`Striping::by_name`] was given a name not in [`PRESETS`].
    #[error("unknown storage preset {0:?} (valid: {valid}, probed)", valid = PRESETS.join(", "))]
    UnknownPreset(String),
    /// The preset `probed` could not be loaded (the message says why and what to run).
    #[error("{0}")]
    Probed(String),
    /// A parameter or an input is out of range (the message says which).
    #[error("invalid storage model input: {0}")]
    Invalid(String),
}

/// Latency class of a seek distance (also the jump classes of eq 4.1: near = short,
/// mid = medium, far = long).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SeekClass {
    Seq,
    Near,
    Mid,
    Far,
}

/// A byte range on one target, in object space: a piece of [`Striping::split`] or one
/// RPC of [`Striping::request_rpcs`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Piece {
    pub target: usize,
    pub object_offset: u64,
    pub len: u64,
}

impl Piece {
    /// The object offset just past the piece.
    pub fn end(&self) -> u64 {
        self.object_offset + self.len
    }
}

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

impl Default for Striping {
    /// One `lustre` target (1 MiB stripe and RPC, 0.2/0.5/1/2 ms, 500 MB/s), no
    /// request latency.
    fn default() -> Self {
        Striping {
            targets: 1,
            request_latency: 0.0,
            ..Striping::lustre()
        }
    }
}

impl Striping {
    /// A local hard disk: 1 target, 64 KiB stripe and RPC, `L` 0.05/1/4/8 ms, 150 MB/s.
    pub fn hdd() -> Self {
        Striping {
            targets: 1,
            stripe_size: 64 * KIB,
            rpc_size: 64 * KIB,
            page_size: 4096,
            latency_seq: 50e-6,
            latency_near: 1e-3,
            latency_mid: 4e-3,
            latency_far: 8e-3,
            bandwidth: 150e6,
            request_latency: 0.0,
            jitter: 0.0,
            seed: DEFAULT_SEED,
            whole_rpc: false,
        }
    }

    /// A flash device: 1 target, 128 KiB stripe and RPC, `L` 0.02 ms sequential and
    /// 0.1 ms otherwise, 740 MB/s.
    pub fn ssd() -> Self {
        Striping {
            stripe_size: 128 * KIB,
            rpc_size: 128 * KIB,
            latency_seq: 20e-6,
            latency_near: 100e-6,
            latency_mid: 100e-6,
            latency_far: 100e-6,
            bandwidth: 740e6,
            ..Striping::hdd()
        }
    }

    /// A Lustre-like file system: 8 OSTs, 1 MiB stripe and RPC, `L` 0.2/0.5/1/2 ms,
    /// 500 MB/s per OST, 0.3 ms per client request.
    pub fn lustre() -> Self {
        Striping {
            targets: 8,
            stripe_size: MIB,
            rpc_size: MIB,
            latency_seq: 0.2e-3,
            latency_near: 0.5e-3,
            latency_mid: 1e-3,
            latency_far: 2e-3,
            bandwidth: 500e6,
            request_latency: 0.3e-3,
            ..Striping::hdd()
        }
    }

    /// The preset called `name` (one of [`PRESETS`]), or `probed`: this machine's
    /// parameters saved by `patio store probe` ([`crate::probed`]).
    pub fn by_name(name: &str) -> Result<Self, StripingError> {
        match name {
            "hdd" => Ok(Striping::hdd()),
            "ssd" => Ok(Striping::ssd()),
            "lustre" => Ok(Striping::lustre()),
            "probed" => {
                crate::probed::load_default().map_err(|e| StripingError::Probed(e.to_string()))
            }
            other => Err(StripingError::UnknownPreset(other.to_string())),
        }
    }

    /// Checks every parameter: targets in `1..=MAX_TARGETS`, sizes at least 1, times
    /// finite and not negative, bandwidth positive (infinite allowed), jitter in
    /// `[0, 1]`.
    pub fn validate(&self) -> Result<(), StripingError> {
        let bad = |msg: String| Err(StripingError::Invalid(msg));
        if self.targets == 0 || self.targets > MAX_TARGETS {
            return bad(format!(
                "targets must be between 1 and {MAX_TARGETS}, got {}",
                self.targets
            ));
        }
        for (name, v) in [
            ("stripe_size", self.stripe_size),
            ("rpc_size", self.rpc_size),
            ("page_size", self.page_size),
        ] {
            if v == 0 {
                return bad(format!("{name} must be at least 1"));
            }
        }
        for (name, v) in [
            ("latency_seq", self.latency_seq),
            ("latency_near", self.latency_near),
            ("latency_mid", self.latency_mid),
            ("latency_far", self.latency_far),
            ("request_latency", self.request_latency),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return bad(format!("{name} must be a finite number >= 0, got {v}"));
            }
        }
        if self.bandwidth.is_nan() || self.bandwidth <= 0.0 {
            return bad(format!("bandwidth must be > 0, got {}", self.bandwidth));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            return bad(format!("jitter must be in [0, 1], got {}", self.jitter));
        }
        Ok(())
    }

    /// `(target, object offset)` of file offset `o`.
    pub fn locate(&self, o: u64) -> (usize, u64) {
        let (s, t) = (self.stripe_size.max(1), self.targets.max(1) as u64);
        let stripe = o / s;
        ((stripe % t) as usize, stripe / t * s + o % s)
    }

    /// Bytes of the file range `[0, o)` that live on `target`: the object offset file
    /// offset `o` has (or would have) on that target.
    pub fn object_floor(&self, target: usize, o: u64) -> u64 {
        let (s, t) = (self.stripe_size.max(1), self.targets.max(1) as u64);
        let (k, r, target) = (o / s, o % s, target as u64);
        let full = if k > target {
            (k - target - 1) / t + 1
        } else {
            0
        };
        full * s + if k % t == target { r } else { 0 }
    }

    /// Where file number `index` (0: the first file) starts in the modelled address
    /// space: its own [`FILE_STRIDE`] region, starting on target `index mod targets`
    /// (a parallel file system starts each new file's stripes on another target), so
    /// that two files' offset `o` are not the same head position.
    pub fn file_base(&self, index: u64) -> u64 {
        let t = self.targets.max(1) as u64;
        index
            .saturating_mul(FILE_STRIDE)
            .saturating_add(index % t * self.stripe_size)
    }

    /// The pieces of the file extent `[offset, offset + len)` (clipped at 2^64): one
    /// per run of bytes on one target, contiguous in object space, inside one
    /// `rpc_size`-aligned window; in file order.
    pub fn split(&self, offset: u64, len: u64) -> Split<'_> {
        Split {
            striping: self,
            offset,
            end: offset.saturating_add(len),
        }
    }

    /// The latency class of seek distance `d`.
    pub fn seek_class(&self, d: u64) -> SeekClass {
        let rpc = self.rpc_size.max(1);
        if d == 0 {
            SeekClass::Seq
        } else if d <= rpc {
            SeekClass::Near
        } else if d <= rpc.saturating_mul(10) {
            SeekClass::Mid
        } else {
            SeekClass::Far
        }
    }

    /// `L(d)` of a class.
    pub fn latency(&self, class: SeekClass) -> f64 {
        match class {
            SeekClass::Seq => self.latency_seq,
            SeekClass::Near => self.latency_near,
            SeekClass::Mid => self.latency_mid,
            SeekClass::Far => self.latency_far,
        }
    }

    /// Seconds one target spends on one RPC of `bytes` bytes after a seek of
    /// `distance`: `L(d) + bytes / bandwidth`, times `1 ± jitter` drawn from `rng` (which
    /// is only drawn from when `jitter > 0`). The one cost definition of the simulator
    /// and of the real-time store.
    pub fn rpc_cost(&self, distance: u64, bytes: u64, rng: &mut Rng) -> f64 {
        let transfer = if self.bandwidth.is_finite() && self.bandwidth > 0.0 {
            bytes as f64 / self.bandwidth
        } else {
            0.0
        };
        let base = self.latency(self.seek_class(distance)) + transfer;
        if self.jitter > 0.0 {
            base * (1.0 + self.jitter * (2.0 * rng.unit() - 1.0)).max(0.0)
        } else {
            base
        }
    }

    /// The object range `[start, end)` fetched for a piece: its pages (clipped to its
    /// RPC window) or, with `whole_rpc`, its whole RPC window.
    fn rounded(&self, p: Piece) -> (u64, u64) {
        let (rpc, page) = (self.rpc_size.max(1), self.page_size.max(1));
        let window = p.object_offset / rpc * rpc;
        let window_end = window.saturating_add(rpc);
        if self.whole_rpc {
            return (window, window_end);
        }
        let start = (p.object_offset / page * page).max(window);
        let end = p.end().div_ceil(page).saturating_mul(page).min(window_end);
        (start, end)
    }

    /// The RPCs of one client request (extents `(offset, len)` issued together), into
    /// `out` (cleared first): pieces rounded to pages or whole RPCs, then coalesced per
    /// target where they overlap or touch inside one RPC window; ordered by target,
    /// then object offset.
    pub fn request_rpcs_into(&self, extents: &[(u64, u64)], out: &mut Vec<Piece>) {
        out.clear();
        for &(offset, len) in extents {
            for p in self.split(offset, len) {
                let (start, end) = self.rounded(p);
                out.push(Piece {
                    target: p.target,
                    object_offset: start,
                    len: end - start,
                });
            }
        }
        out.sort_unstable();
        let rpc = self.rpc_size.max(1);
        let mut kept = 0;
        for i in 0..out.len() {
            let p = out[i];
            if kept > 0 {
                let last = &mut out[kept - 1];
                if last.target == p.target
                    && p.object_offset <= last.end()
                    && p.object_offset / rpc == last.object_offset / rpc
                {
                    last.len = last.end().max(p.end()) - last.object_offset;
                    continue;
                }
            }
            out[kept] = p;
            kept += 1;
        }
        out.truncate(kept);
    }

    /// [`Striping::request_rpcs_into`] into a new vector.
    pub fn request_rpcs(&self, extents: &[(u64, u64)]) -> Vec<Piece> {
        let mut out = Vec::new();
        self.request_rpcs_into(extents, &mut out);
        out
    }

    /// Refuses extents ending past 2^64 and inputs that would cut into more than
    /// [`MAX_PIECES`] pieces.
    pub(crate) fn check_extents<'a>(
        &self,
        extents: impl IntoIterator<Item = &'a (u64, u64)>,
    ) -> Result<(), StripingError> {
        let unit = self.rpc_size.min(self.stripe_size).max(1);
        let mut pieces = 0u64;
        for (i, &(offset, len)) in extents.into_iter().enumerate() {
            if offset.checked_add(len).is_none() {
                return Err(StripingError::Invalid(format!(
                    "extent {i} (offset {offset}, length {len}) does not end below 2^64"
                )));
            }
            if len > 0 {
                pieces = pieces.saturating_add(len / unit + 2);
            }
            if pieces > MAX_PIECES {
                return Err(StripingError::Invalid(format!(
                    "the extents cut into more than {MAX_PIECES} pieces"
                )));
            }
        }
        Ok(())
    }
}

/// Iterator of [`Striping::split`].
pub struct Split<'a> {
    striping: &'a Striping,
    offset: u64,
    end: u64,
}

impl Iterator for Split<'_> {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        if self.offset >= self.end {
            return None;
        }
        let s = self.striping;
        let (target, object_offset) = s.locate(self.offset);
        let rpc = s.rpc_size.max(1);
        let mut len = (self.end - self.offset).min(rpc - object_offset % rpc);
        if s.targets > 1 {
            let stripe = s.stripe_size.max(1);
            len = len.min(stripe - self.offset % stripe);
        }
        self.offset += len;
        Some(Piece {
            target,
            object_offset,
            len,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::rng::Rng;
    use proptest::prelude::*;

    /// A small striping for tests (also used by the submodules' tests).
    pub(crate) fn small(targets: usize, stripe: u64, rpc: u64, page: u64) -> Striping {
        Striping {
            targets,
            stripe_size: stripe,
            rpc_size: rpc,
            page_size: page,
            ..Striping::default()
        }
    }

    /// Byte-by-byte: consecutive bytes stay in one piece while on one target,
    /// contiguous in object space and not crossing an RPC boundary.
    fn split_reference(s: &Striping, offset: u64, len: u64) -> Vec<Piece> {
        let mut out: Vec<Piece> = Vec::new();
        for o in offset..offset + len {
            let stripe = o / s.stripe_size;
            let target = (stripe % s.targets as u64) as usize;
            let obj = (o / (s.stripe_size * s.targets as u64)) * s.stripe_size + o % s.stripe_size;
            if let Some(last) = out.last_mut() {
                if last.target == target && last.end() == obj && !obj.is_multiple_of(s.rpc_size) {
                    last.len += 1;
                    continue;
                }
            }
            out.push(Piece {
                target,
                object_offset: obj,
                len: 1,
            });
        }
        out
    }

    proptest! {
        #[test]
        fn split_matches_bytewise_reference(
            targets in 1usize..5, stripe in 1u64..40, rpc in 1u64..60,
            offset in 0u64..500, len in 0u64..300,
        ) {
            let s = small(targets, stripe, rpc, 4);
            let got: Vec<Piece> = s.split(offset, len).collect();
            prop_assert_eq!(got, split_reference(&s, offset, len));
        }

        #[test]
        fn object_floor_counts_bytes_before(
            targets in 1usize..5, stripe in 1u64..20, o in 0u64..400,
        ) {
            let s = small(targets, stripe, 8, 4);
            for t in 0..targets {
                let want = (0..o).filter(|&b| s.locate(b).0 == t).count() as u64;
                prop_assert_eq!(s.object_floor(t, o), want);
            }
        }
    }

    #[test]
    fn split_at_the_top_of_the_address_space_stops() {
        let s = Striping::lustre();
        let pieces: Vec<Piece> = s.split(u64::MAX - 10, 100).collect();
        assert_eq!(pieces.iter().map(|p| p.len).sum::<u64>(), 10);
    }

    #[test]
    fn every_file_has_its_own_region_starting_on_the_next_target() {
        let s = small(4, 16, 16, 4);
        assert_eq!(s.file_base(0), 0);
        for i in 0..9u64 {
            let (base, next) = (s.file_base(i), s.file_base(i + 1));
            assert!(next - base >= FILE_STRIDE - 3 * 16, "{i}");
            assert_eq!(s.locate(base).0, (i % 4) as usize);
            // Offset 0 of two files is not one object position on one target.
            assert_ne!(s.locate(base), s.locate(next));
        }
    }

    #[test]
    fn presets_and_names() {
        for name in PRESETS {
            let s = Striping::by_name(name).unwrap();
            s.validate().unwrap();
        }
        assert_eq!(Striping::by_name("lustre").unwrap().targets, 8);
        assert_eq!(Striping::hdd().latency_far, 8e-3);
        let e = Striping::by_name("tape").unwrap_err();
        assert_eq!(e, StripingError::UnknownPreset("tape".into()));
        assert!(e.to_string().contains("hdd, ssd, lustre"));
        Striping::default().validate().unwrap();
        for broken in [
            Striping {
                targets: 0,
                ..Striping::default()
            },
            Striping {
                bandwidth: 0.0,
                ..Striping::default()
            },
            Striping {
                latency_far: f64::NAN,
                ..Striping::default()
            },
            Striping {
                jitter: 1.5,
                ..Striping::default()
            },
        ] {
            assert!(broken.validate().is_err(), "{broken:?}");
        }
    }

    #[test]
    fn seek_classes_and_cost() {
        let s = Striping::hdd();
        let rpc = s.rpc_size;
        assert_eq!(s.seek_class(0), SeekClass::Seq);
        assert_eq!(s.seek_class(1), SeekClass::Near);
        assert_eq!(s.seek_class(rpc), SeekClass::Near);
        assert_eq!(s.seek_class(rpc + 1), SeekClass::Mid);
        assert_eq!(s.seek_class(10 * rpc), SeekClass::Mid);
        assert_eq!(s.seek_class(10 * rpc + 1), SeekClass::Far);
        let mut rng = Rng::new(1);
        let c = s.rpc_cost(0, 150_000, &mut rng);
        assert!((c - (50e-6 + 1e-3)).abs() < 1e-12);
        let j = Striping { jitter: 0.5, ..s };
        for _ in 0..100 {
            let c = j.rpc_cost(u64::MAX, 0, &mut rng);
            assert!((4e-3..=12e-3).contains(&c), "{c}");
        }
    }

    #[test]
    fn rpcs_round_and_coalesce() {
        let s = small(1, 1 << 20, 16384, 4096);
        // Two extents in one page and one in the next: one RPC of two pages.
        let r = s.request_rpcs(&[(100, 10), (4000, 10), (5000, 10)]);
        assert_eq!(
            r,
            vec![Piece {
                target: 0,
                object_offset: 0,
                len: 8192
            }]
        );
        // A gap of a page: two RPCs; an extent across an RPC boundary: two RPCs.
        let r = s.request_rpcs(&[(0, 10), (8192, 10)]);
        assert_eq!(r.len(), 2);
        let r = s.request_rpcs(&[(16000, 1000)]);
        assert_eq!(
            r,
            vec![
                Piece {
                    target: 0,
                    object_offset: 12288,
                    len: 4096
                },
                Piece {
                    target: 0,
                    object_offset: 16384,
                    len: 4096
                },
            ]
        );
        // Whole RPCs: everything in one window is one full RPC.
        let w = Striping {
            whole_rpc: true,
            ..s
        };
        let r = w.request_rpcs(&[(0, 10), (8192, 10), (20000, 1)]);
        assert_eq!(
            r,
            vec![
                Piece {
                    target: 0,
                    object_offset: 0,
                    len: 16384
                },
                Piece {
                    target: 0,
                    object_offset: 16384,
                    len: 16384
                },
            ]
        );
    }
}
