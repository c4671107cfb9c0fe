//! The storage-model options shared by the mounts (`patio mount prefetch`, `patio
//! mount cache`; `patio reorg` takes the striped ones through [`overridden`]): the flat slow store (`--latency-ms`, `--bandwidth-mbps`) or the
//! striped model of a preset (`--store hdd|ssd|lustre`, `--store-targets`,
//! `--store-stripe-kib`), and how it is shown.

use anyhow::{bail, Result};
use patio_prefetch::striped::Striping;
use patio_prefetch::StoreConfig;
use serde::Serialize;

/// What the mount reads SOURCE through.
#[derive(clap::Args, Clone, Debug)]
pub struct StoreArgs {
    /// Slow-store model: latency of every backend request, in milliseconds (default:
    /// no model, the source's own speed; 0 with --bandwidth-mbps).
    #[arg(long)]
    pub latency_ms: Option<f64>,
    /// Slow-store model: bandwidth of every backend request, in MB/s (10^6 bytes); 0
    /// for unlimited (the default when only --latency-ms is given).
    #[arg(long)]
    pub bandwidth_mbps: Option<f64>,
    /// Striped storage model instead of the flat slow store: hdd, ssd, lustre, or probed
    /// (this machine's, measured by `patio store probe`). Each read becomes RPCs on
    /// per-target FIFO servers costing latency by seek distance + bytes / bandwidth. One
    /// model for the mount.
    #[arg(long, value_name = "PRESET", conflicts_with_all = ["latency_ms", "bandwidth_mbps"])]
    pub store: Option<String>,
    /// With --store: the number of targets (servers) instead of the preset's.
    #[arg(long, value_name = "N", requires = "store")]
    pub store_targets: Option<usize>,
    /// With --store: the stripe size in KiB instead of the preset's (RPCs stay at most
    /// one stripe).
    #[arg(long, value_name = "KIB", requires = "store")]
    pub store_stripe_kib: Option<u64>,
    /// Backend requests served at the same time.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
}

impl StoreArgs {
    /// The storage model asked for: the striped model of a preset, the flat slow store,
    /// or none (the source's own speed). `--concurrency` is checked and applied.
    pub fn config(&self) -> Result<Option<StoreConfig>> {
        let args = self;
        if args.concurrency == 0 {
            bail!("--concurrency must be at least 1");
        }
        if let Some(name) = &args.store {
            let striping = Striping::by_name(name).map_err(|e| anyhow::anyhow!("--store: {e}"))?;
            let striping = overridden(striping, name, args.store_targets, args.store_stripe_kib)?;
            return Ok(Some(StoreConfig {
                concurrency: args.concurrency,
                ..StoreConfig::striped(striping)
            }));
        }
        for (flag, v) in [
            ("--latency-ms", args.latency_ms),
            ("--bandwidth-mbps", args.bandwidth_mbps),
        ] {
            if let Some(v) = v {
                crate::replay::check_store_value(flag, v)?;
            }
        }
        if args.latency_ms.is_none() && args.bandwidth_mbps.is_none() {
            return Ok(None);
        }
        Ok(Some(StoreConfig {
            concurrency: args.concurrency,
            ..StoreConfig::with(
                args.latency_ms.unwrap_or(0.0),
                args.bandwidth_mbps.unwrap_or(0.0),
            )
        }))
    }
}

/// The preset `name`'s `striping` with `--store-targets` and `--store-stripe-kib`
/// applied by the storage model's rule ([`Striping::with_overrides`]), an error naming
/// the preset: every command that takes `--store` takes these two the same way.
pub fn overridden(
    striping: Striping,
    name: &str,
    targets: Option<usize>,
    stripe_kib: Option<u64>,
) -> Result<Striping> {
    striping
        .with_overrides(targets, stripe_kib)
        .map_err(|e| anyhow::anyhow!("--store {name}: {e}"))
}

/// The storage model as shown in messages.
pub fn describe_store(store: Option<&StoreConfig>) -> String {
    match store {
        None => "no slow-store model".into(),
        Some(StoreConfig {
            striping: Some(t), ..
        }) => format!(
            "striped store: {} targets, {} KiB stripes, {} MB/s per target, {}/{}/{}/{} ms by seek distance",
            t.targets,
            t.stripe_size / 1024,
            t.bandwidth / 1e6,
            t.latency_seq * 1e3,
            t.latency_near * 1e3,
            t.latency_mid * 1e3,
            t.latency_far * 1e3
        ),
        Some(s) => {
            let bw = if s.bandwidth.is_finite() {
                format!("{} MB/s", s.bandwidth / 1e6)
            } else {
                "unlimited bandwidth".into()
            };
            format!(
                "slow store {} ms + {bw}, {} concurrent",
                s.latency.as_secs_f64() * 1e3,
                s.concurrency
            )
        }
    }
}

/// The storage model as written in `--stats-json` files.
#[derive(Serialize, Clone, Debug)]
pub struct StoreJson {
    pub latency_ms: Option<f64>,
    pub bandwidth_mbps: Option<f64>,
    /// The striped storage model's preset (--store), its targets and stripe size.
    pub store: Option<String>,
    pub store_targets: Option<usize>,
    pub store_stripe_bytes: Option<u64>,
    pub concurrency: usize,
}

impl StoreArgs {
    /// `store` (from [`StoreArgs::config`]) as written in statistics.
    pub fn json(&self, store: Option<&StoreConfig>) -> StoreJson {
        let striping = store.and_then(|s| s.striping.as_ref());
        StoreJson {
            latency_ms: store
                .filter(|s| s.striping.is_none())
                .map(|s| s.latency.as_secs_f64() * 1e3),
            bandwidth_mbps: store
                .filter(|s| s.striping.is_none())
                .map(|s| s.bandwidth / 1e6)
                .filter(|b| b.is_finite()),
            store: self.store.clone(),
            store_targets: striping.map(|t| t.targets),
            store_stripe_bytes: striping.map(|t| t.stripe_size),
            concurrency: self.concurrency,
        }
    }
}
