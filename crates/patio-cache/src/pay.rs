//! Whether a file's groups earn their place: the items they brought ahead of demand
//! that readers used, and those dropped unused. A file whose groups do not pay gets
//! none until it has missed long enough to deserve another chance.

/// Ahead items of a file dropped unused before its groups are judged.
const JUDGE_AFTER: u64 = 64;
/// Misses of a file whose groups do not pay before it is given another chance.
const RETRY_AFTER: u64 = 1024;

/// Whether a file's groups earn their place: their ahead items used and dropped
/// unused (halved as they grow, so the record follows the recent past).
#[derive(Default, Clone, Copy)]
pub struct Pay {
    pub used: u64,
    pub wasted: u64,
    /// Misses since the file's groups were switched off, while they are.
    pub off_misses: Option<u64>,
}

impl Pay {
    /// Groups pay while at least one ahead item in three is used.
    pub fn judge(&mut self) {
        if self.used + self.wasted > 4096 {
            self.used /= 2;
            self.wasted /= 2;
        }
        if self.off_misses.is_none() && self.wasted >= JUDGE_AFTER && 2 * self.used < self.wasted {
            self.off_misses = Some(0);
        }
    }

    pub fn on(&self) -> bool {
        self.off_misses.is_none()
    }

    pub fn missed(&mut self) {
        if let Some(n) = &mut self.off_misses {
            *n += 1;
            if *n >= RETRY_AFTER {
                *self = Pay::default();
            }
        }
    }
}
