//! Sizes on the command line, one spelling for every command (docs/CLI.md, "Shared
//! options"): a number with a binary unit — `512MiB`, `1.5GiB`, `64KiB`, `4096B`, with
//! `K`, `M`, `G`, `T` (and `KB`…, read as binary too) accepted for the same units — and
//! the per-unit options they replace (`--cache-mib 64`), which keep working for one
//! release with a deprecation line.

use anyhow::{bail, Result};
use std::fmt;
use std::str::FromStr;

/// A size in bytes, parsed from `NUMBER[UNIT]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Size(pub u64);

const UNITS: [(&str, u64); 5] = [
    ("T", 1 << 40),
    ("G", 1 << 30),
    ("M", 1 << 20),
    ("K", 1 << 10),
    ("", 1),
];

impl FromStr for Size {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let t = text.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let unit = unit.trim().to_ascii_uppercase();
        let stem = unit
            .strip_suffix("IB")
            .or_else(|| unit.strip_suffix('B'))
            .unwrap_or(&unit);
        let Some(&(_, scale)) = UNITS.iter().find(|(u, _)| *u == stem) else {
            return Err(format!(
                "{text:?}: not a size (a number with a unit: 512MiB, 1.5GiB, 64KiB, 4096B)"
            ));
        };
        let value: f64 = number
            .parse()
            .map_err(|_| format!("{text:?}: not a size (no number before the unit)"))?;
        let bytes = value * scale as f64;
        if !(bytes.is_finite() && bytes < 2f64.powi(63)) {
            return Err(format!("{text:?}: too large"));
        }
        Ok(Size(bytes.round() as u64))
    }
}

impl fmt::Display for Size {
    /// The largest unit that writes the size exactly: `64MiB`, `1536KiB`, `100B`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (unit, scale) in UNITS {
            if scale > 1 && self.0 >= scale && self.0.is_multiple_of(scale) {
                return write!(f, "{}{unit}iB", self.0 / scale);
            }
        }
        write!(f, "{}B", self.0)
    }
}

/// The value of a size option that replaced a per-unit one: `new` when given, else the
/// deprecated `old` (a count of `unit` bytes; a deprecation line goes to stderr), else
/// `default`. Both given is an error naming them.
pub fn resolve(
    new: Option<Size>,
    new_flag: &str,
    old: Option<f64>,
    old_flag: &str,
    unit: u64,
    default: Size,
) -> Result<u64> {
    match (new, old) {
        (Some(_), Some(_)) => {
            bail!("{new_flag} and {old_flag} name the same size: give only {new_flag}")
        }
        (Some(size), None) => Ok(size.0),
        (None, Some(count)) => {
            let bytes = count * unit as f64;
            if !(bytes.is_finite() && bytes >= 0.0 && bytes < 2f64.powi(63)) {
                bail!("{old_flag} {count}: not a size");
            }
            let size = Size(bytes.round() as u64);
            crate::retired::warn(old_flag, &format!("{new_flag} {size}"));
            Ok(size.0)
        }
        (None, None) => Ok(default.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn spellings() {
        let p = |s: &str| s.parse::<Size>().map(|s| s.0);
        assert_eq!(p("512MiB"), Ok(512 << 20));
        assert_eq!(p("512M"), Ok(512 << 20));
        assert_eq!(p("512mb"), Ok(512 << 20));
        assert_eq!(p("1.5GiB"), Ok(3 << 29));
        assert_eq!(p("64KiB"), Ok(64 << 10));
        assert_eq!(p("4096"), Ok(4096));
        assert_eq!(p("4096B"), Ok(4096));
        assert_eq!(p(" 8 GiB "), Ok(8 << 30));
        assert!(p("MiB").is_err());
        assert!(p("12XB").is_err());
        assert!(p("-1MiB").is_err());
        assert!(p("1e30TiB").is_err());
    }

    #[test]
    fn deprecated_and_new() {
        let d = Size(64 << 20);
        assert_eq!(
            resolve(None, "--memory", None, "--cache-mib", 1 << 20, d).unwrap(),
            64 << 20
        );
        assert_eq!(
            resolve(
                Some(Size(1 << 30)),
                "--memory",
                None,
                "--cache-mib",
                1 << 20,
                d
            )
            .unwrap(),
            1 << 30
        );
        assert_eq!(
            resolve(None, "--memory", Some(2.0), "--cache-mib", 1 << 20, d).unwrap(),
            2 << 20
        );
        assert!(resolve(Some(d), "--memory", Some(2.0), "--cache-mib", 1 << 20, d).is_err());
    }

    proptest! {
        #[test]
        fn display_parses_back(bytes in 0u64..(1 << 50)) {
            let size = Size(bytes);
            prop_assert_eq!(size.to_string().parse::<Size>(), Ok(size));
        }
    }
}
