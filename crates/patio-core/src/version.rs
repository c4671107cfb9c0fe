//! The file-version rule: whether a file is still the version something was built
//! from (a layout replica, a segment cache's items, a reorganization plan). One
//! definition for all of them: device, inode, size, and the modification and change
//! times in nanoseconds. The change time is what a restored modification time (`cp
//! -p`, `rsync -t`, a restore from backup, `touch -d`) cannot hide: any write or
//! `utime` moves it, and no user can set it. A promise that must hold even then (a
//! file system with coarse timestamps rewritten twice within one tick) adds a
//! checksum of the bytes it covers on top of this rule.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// One version of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileVersion {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
}

impl FileVersion {
    /// The version of the regular file at `path` (following links).
    pub fn of(path: &Path) -> std::io::Result<Self> {
        let m = std::fs::metadata(path)?;
        if !m.is_file() {
            return Err(std::io::Error::other("not a regular file"));
        }
        Ok(Self::from_metadata(&m))
    }

    pub fn from_metadata(m: &Metadata) -> Self {
        FileVersion {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() as i128 * 1_000_000_000 + m.mtime_nsec() as i128,
            ctime_ns: m.ctime() as i128 * 1_000_000_000 + m.ctime_nsec() as i128,
        }
    }

    /// How `self` differs from `then` (for a message), or `None` when it is the same
    /// version.
    pub fn difference(&self, then: &FileVersion) -> Option<String> {
        if (self.dev, self.ino) != (then.dev, then.ino) {
            Some("replaced by another file".into())
        } else if self.size != then.size {
            Some(format!("size {} → {}", then.size, self.size))
        } else if self.mtime_ns != then.mtime_ns {
            Some("modification time changed".into())
        } else if self.ctime_ns != then.ctime_ns {
            Some("changed (its change time moved; the modification time was kept)".into())
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_rewrite_with_the_modification_time_restored_is_another_version() {
        let dir = std::env::temp_dir().join(format!("patio-version-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        std::fs::write(&path, b"old contents").unwrap();
        let then = FileVersion::of(&path).unwrap();
        assert_eq!(FileVersion::of(&path).unwrap().difference(&then), None);
        let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.write_all(b"new contents").unwrap();
        f.set_modified(mtime).unwrap();
        drop(f);
        let now = FileVersion::of(&path).unwrap();
        assert_eq!(
            (now.size, now.mtime_ns, now.ino),
            (then.size, then.mtime_ns, then.ino)
        );
        assert!(now.difference(&then).unwrap().contains("change time"));
        assert!(FileVersion::of(&dir).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
