//! The inode table of a mount: the mount's own inode numbers, handed out per path on
//! lookup and dropped when the kernel forgets them; renames move the numbers of the
//! renamed entry and everything below it, unlink detaches a number from its path.

use super::{enoent, R};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The root directory's inode number.
pub(crate) const ROOT: u64 = 1;

struct Node {
    /// Path relative to the source root; `None` once unlinked.
    path: Option<PathBuf>,
    /// Lookups the kernel holds (entries replied minus forgotten).
    lookups: u64,
}

/// Inode number ↔ relative path.
pub(crate) struct Inodes {
    by_ino: HashMap<u64, Node>,
    by_path: HashMap<PathBuf, u64>,
    next: u64,
}

impl Inodes {
    pub(crate) fn new() -> Self {
        let mut t = Inodes {
            by_ino: HashMap::new(),
            by_path: HashMap::new(),
            next: ROOT + 1,
        };
        t.by_ino.insert(
            ROOT,
            Node {
                path: Some(PathBuf::new()),
                lookups: 1,
            },
        );
        t.by_path.insert(PathBuf::new(), ROOT);
        t
    }

    pub(crate) fn path(&self, ino: u64) -> R<PathBuf> {
        self.by_ino
            .get(&ino)
            .and_then(|n| n.path.clone())
            .ok_or_else(enoent)
    }

    /// The inode of `path`, allocated if new; counts one lookup.
    pub(crate) fn remember(&mut self, path: PathBuf) -> u64 {
        if let Some(&ino) = self.by_path.get(&path) {
            if let Some(node) = self.by_ino.get_mut(&ino) {
                node.lookups += 1;
                return ino;
            }
        }
        let ino = self.next;
        self.next += 1;
        self.by_path.insert(path.clone(), ino);
        self.by_ino.insert(
            ino,
            Node {
                path: Some(path),
                lookups: 1,
            },
        );
        ino
    }

    pub(crate) fn forget(&mut self, ino: u64, n: u64) {
        if ino == ROOT {
            return;
        }
        let Some(node) = self.by_ino.get_mut(&ino) else {
            return;
        };
        node.lookups = node.lookups.saturating_sub(n);
        if node.lookups == 0 {
            if let Some(path) = self.by_ino.remove(&ino).and_then(|n| n.path) {
                if self.by_path.get(&path) == Some(&ino) {
                    self.by_path.remove(&path);
                }
            }
        }
    }

    /// The inode of `path` if the kernel holds one.
    pub(crate) fn ino_of(&self, path: &Path) -> Option<u64> {
        self.by_path.get(path).copied()
    }

    /// Entries at or below `path`.
    fn under(&self, path: &Path) -> Vec<(PathBuf, u64)> {
        self.by_path
            .iter()
            .filter(|(p, _)| p.starts_with(path))
            .map(|(p, &i)| (p.clone(), i))
            .collect()
    }

    /// `path` (and anything below it) no longer exists.
    pub(crate) fn detach(&mut self, path: &Path) {
        for (p, ino) in self.under(path) {
            self.by_path.remove(&p);
            if let Some(node) = self.by_ino.get_mut(&ino) {
                node.path = None;
            }
        }
    }

    fn move_entries(&mut self, entries: Vec<(PathBuf, u64)>, from: &Path, to: &Path) {
        for (p, ino) in entries {
            let rest = p.strip_prefix(from).expect("entry lies under `from`");
            let new = if rest.as_os_str().is_empty() {
                to.to_path_buf()
            } else {
                to.join(rest)
            };
            if let Some(node) = self.by_ino.get_mut(&ino) {
                node.path = Some(new.clone());
            }
            self.by_path.insert(new, ino);
        }
    }

    /// `from` was renamed to `to`, replacing whatever was there.
    pub(crate) fn rename(&mut self, from: &Path, to: &Path) {
        let moving = self.under(from);
        for (p, _) in &moving {
            self.by_path.remove(p);
        }
        self.detach(to);
        self.move_entries(moving, from, to);
    }

    /// `a` and `b` swapped places (`RENAME_EXCHANGE`).
    pub(crate) fn exchange(&mut self, a: &Path, b: &Path) {
        let (under_a, under_b) = (self.under(a), self.under(b));
        for (p, _) in under_a.iter().chain(&under_b) {
            self.by_path.remove(p);
        }
        self.move_entries(under_a, a, b);
        self.move_entries(under_b, b, a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn lookups_share_one_inode_per_path_until_forgotten() {
        let mut t = Inodes::new();
        let a = t.remember(p("a"));
        assert_eq!(t.remember(p("a")), a);
        assert_ne!(t.remember(p("b")), a);
        t.forget(a, 1);
        assert_eq!(t.path(a).unwrap(), p("a"));
        t.forget(a, 1);
        assert!(t.path(a).is_err());
        assert_ne!(t.remember(p("a")), a, "inode numbers are never reused");
        t.forget(ROOT, 100);
        assert_eq!(t.path(ROOT).unwrap(), p(""));
    }

    #[test]
    fn rename_moves_a_directory_and_everything_below_it() {
        let mut t = Inodes::new();
        let d = t.remember(p("d"));
        let f = t.remember(p("d/sub/f"));
        let other = t.remember(p("dx"));
        let victim = t.remember(p("e"));
        t.rename(&p("d"), &p("e"));
        assert_eq!(t.path(d).unwrap(), p("e"));
        assert_eq!(t.path(f).unwrap(), p("e/sub/f"));
        assert_eq!(
            t.path(other).unwrap(),
            p("dx"),
            "component-wise prefix only"
        );
        assert!(t.path(victim).is_err(), "the replaced entry is detached");
        assert_eq!(t.by_path.get(&p("e/sub/f")), Some(&f));
        assert!(!t.by_path.contains_key(&p("d/sub/f")));
    }

    #[test]
    fn exchange_swaps_and_unlink_detaches() {
        let mut t = Inodes::new();
        let (a, b) = (t.remember(p("a")), t.remember(p("b")));
        let inner = t.remember(p("a/x"));
        t.exchange(&p("a"), &p("b"));
        assert_eq!(t.path(a).unwrap(), p("b"));
        assert_eq!(t.path(b).unwrap(), p("a"));
        assert_eq!(t.path(inner).unwrap(), p("b/x"));
        t.detach(&p("b"));
        assert!(t.path(a).is_err() && t.path(inner).is_err());
        assert_eq!(t.path(b).unwrap(), p("a"));
    }
}
