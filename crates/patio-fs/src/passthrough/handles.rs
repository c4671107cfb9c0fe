//! The passthrough's file handles: opening and creating files with the application's
//! flags (minus what the kernel already did), registering the handle and letting the
//! observer take over its reads.

use super::{DataChange, FileId, Observer, OpenFile, PassthroughFs};
use crate::fusekit::{self, errno, lock, sys, R};
use fuser::{FileAttr, INodeNo, Request};
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Open flags passed on to the real file: the application's, minus those the kernel
/// has already acted on (creation, truncation, append position) and `O_DIRECT`, whose
/// alignment rules apply to the application's buffers, not to ours.
fn open_options(flags: i32, extra: i32) -> OpenOptions {
    let acc = flags & libc::O_ACCMODE;
    let mut o = OpenOptions::new();
    o.read(acc == libc::O_RDONLY || acc == libc::O_RDWR);
    o.write(acc == libc::O_WRONLY || acc == libc::O_RDWR);
    let stripped = libc::O_ACCMODE
        | libc::O_CREAT
        | libc::O_EXCL
        | libc::O_TRUNC
        | libc::O_NOCTTY
        | libc::O_APPEND
        | libc::O_DIRECT;
    o.custom_flags((flags & !stripped) | extra);
    o
}

impl<O: Observer> PassthroughFs<O> {
    /// Registers an open file (`flags`: the application's open flags) and returns its
    /// handle; the observer may take over its reads.
    fn add_handle(&self, file: File, rel: &Path, flags: i32) -> R<u64> {
        let id = FileId::of(&sys(file.metadata())?);
        let path: Arc<str> = rel.to_string_lossy().into();
        let acc = flags & libc::O_ACCMODE;
        let reader = if acc == libc::O_RDONLY || acc == libc::O_RDWR {
            self.observer.open_reader(&path, id, &file)
        } else {
            None
        };
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        self.files.insert(
            fh,
            OpenFile {
                file,
                path,
                id,
                reader,
            },
        );
        Ok(fh)
    }

    pub(super) fn do_open(&self, ino: INodeNo, flags: i32) -> R<u64> {
        let rel = self.path(ino)?;
        let file = sys(open_options(flags, 0).open(self.full(&rel)))?;
        self.add_handle(file, &rel, flags)
    }

    pub(super) fn do_create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
    ) -> R<(FileAttr, u64)> {
        let rel = self.child(parent, name)?;
        let full = self.full(&rel);
        let perm = mode & !umask & 0o7777;
        let keep = flags & libc::O_TRUNC;
        let created = open_options(flags, libc::O_CREAT | libc::O_EXCL | keep)
            .mode(perm)
            .open(&full);
        let file = match created {
            Ok(f) => {
                fusekit::settle_new_entry(req, &full, self.as_root, Some(perm))?;
                f
            }
            // Someone created it between the kernel's lookup and now: open it as an
            // existing file, as the application's open(2) would have.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && flags & libc::O_EXCL == 0 => {
                let f = sys(open_options(flags, keep).open(&full))?;
                if keep != 0 {
                    let meta = sys(f.metadata())?;
                    self.observer
                        .changed(FileId::of(&meta), DataChange::Resized { size: 0 });
                }
                f
            }
            Err(e) => return Err(errno(&e)),
        };
        let meta = sys(file.metadata())?;
        let fh = self.add_handle(file, &rel, flags)?;
        let ino = lock(&self.inodes).remember(rel);
        Ok((fusekit::attr(ino, &meta), fh))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn open_flags_drop_what_the_kernel_handled() {
        // Only checks that the options build for every access mode; the flags
        // themselves are exercised through real mounts in tests/test_mount_trace.py.
        for acc in [libc::O_RDONLY, libc::O_WRONLY, libc::O_RDWR] {
            let dir = tempfile::tempdir().unwrap();
            let f = dir.path().join("f");
            fs::write(&f, b"x").unwrap();
            open_options(acc | libc::O_APPEND | libc::O_TRUNC, 0)
                .open(&f)
                .unwrap();
            assert_eq!(fs::read(&f).unwrap(), b"x", "O_TRUNC is the kernel's job");
        }
    }
}
