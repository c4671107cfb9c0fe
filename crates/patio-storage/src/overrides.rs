//! The one rule for changing a preset's targets and stripe size: what `--store-targets N`
//! and `--store-stripe-kib K` mean on every command that takes `--store` (the mounts,
//! `patio reorg`, and the Python front ends through `patio._native`).

use crate::striped::{Striping, StripingError};

impl Striping {
    /// This model with `targets` servers and `stripe_kib`-KiB stripes instead of its
    /// own, where given. RPCs stay at most one stripe (a smaller stripe shrinks them;
    /// a larger one leaves them as they are). The result is checked with
    /// [`Striping::validate`].
    pub fn with_overrides(
        mut self,
        targets: Option<usize>,
        stripe_kib: Option<u64>,
    ) -> Result<Striping, StripingError> {
        if let Some(t) = targets {
            self.targets = t;
        }
        if let Some(k) = stripe_kib {
            let bytes = k.checked_mul(1024).ok_or_else(|| {
                StripingError::Invalid(format!("a stripe of {k} KiB is too large"))
            })?;
            self.stripe_size = bytes;
            self.rpc_size = self.rpc_size.min(bytes);
        }
        self.validate()?;
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::striped::{MAX_TARGETS, PRESETS};
    use proptest::prelude::*;

    #[test]
    fn nothing_given_is_the_preset() {
        for name in PRESETS {
            let s = Striping::by_name(name).unwrap();
            assert_eq!(s.clone().with_overrides(None, None).unwrap(), s);
        }
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let s = Striping::lustre();
        for (t, k) in [
            (Some(0), None),
            (Some(MAX_TARGETS + 1), None),
            (None, Some(0)),
            (None, Some(u64::MAX / 1024 + 1)),
        ] {
            let e = s.clone().with_overrides(t, k).unwrap_err();
            assert!(matches!(e, StripingError::Invalid(_)), "{t:?} {k:?}: {e}");
        }
    }

    proptest! {
        /// Against the rule written out: the given fields replaced, RPCs the smaller of
        /// the preset's and the stripe, every other parameter the preset's.
        #[test]
        fn replaces_targets_and_stripe_and_caps_rpcs(
            preset in 0..PRESETS.len(),
            targets in proptest::option::of(1..=MAX_TARGETS),
            stripe_kib in proptest::option::of(1u64..1 << 20),
        ) {
            let base = Striping::by_name(PRESETS[preset]).unwrap();
            let got = base.clone().with_overrides(targets, stripe_kib).unwrap();
            let stripe = stripe_kib.map_or(base.stripe_size, |k| k * 1024);
            let want = Striping {
                targets: targets.unwrap_or(base.targets),
                stripe_size: stripe,
                rpc_size: if stripe_kib.is_some() { base.rpc_size.min(stripe) } else { base.rpc_size },
                ..base
            };
            prop_assert_eq!(&got, &want);
            prop_assert!(got.rpc_size <= got.stripe_size || stripe_kib.is_none());
        }
    }
}
