//! The passthrough's data path on open handles: reads (by `pread`, or by the
//! observer's reader), writes (`pwrite`, reported as changes), `fsync` and
//! `fallocate`; every served read and write is reported to the observer.

use super::{DataChange, Observer, PassthroughFs};
use crate::fusekit::{check, errno, sys, R};
use fuser::{FileHandle, Request};
use patio_core::trace::Op;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::time::Instant;

impl<O: Observer> PassthroughFs<O> {
    pub(super) fn do_read(
        &self,
        req: &Request,
        fh: FileHandle,
        offset: u64,
        size: u32,
    ) -> R<Vec<u8>> {
        let h = self.handle(fh)?;
        let t0 = Instant::now();
        let mut buf = vec![0u8; size as usize];
        let mut done = 0;
        if let Some(reader) = &h.reader {
            match reader.read_at(&h.file, offset, &mut buf, req.pid()) {
                Ok(n) => done = n.min(buf.len()),
                Err(e) => return Err(errno(&e)),
            }
        }
        while h.reader.is_none() && done < buf.len() {
            match h.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if done == 0 => return Err(errno(&e)),
                Err(_) => break,
            }
        }
        self.served(req, &h, Op::Read, offset, done, t0);
        buf.truncate(done);
        Ok(buf)
    }

    pub(super) fn do_write(
        &self,
        req: &Request,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
    ) -> R<usize> {
        let h = self.handle(fh)?;
        let t0 = Instant::now();
        let mut done = 0;
        let mut failed = None;
        self.observer.changing(h.id);
        while done < data.len() {
            match h.file.write_at(&data[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if done > 0 {
            let len = done as u64;
            self.observer
                .changed(h.id, DataChange::Written { offset, len });
        }
        if let (Some(e), 0) = (failed, done) {
            return Err(errno(&e));
        }
        self.served(req, &h, Op::Write, offset, done, t0);
        Ok(done)
    }

    pub(super) fn do_fsync(&self, fh: FileHandle, datasync: bool) -> R<()> {
        let h = self.handle(fh)?;
        sys(if datasync {
            h.file.sync_data()
        } else {
            h.file.sync_all()
        })
    }

    pub(super) fn do_fallocate(
        &self,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
    ) -> R<()> {
        let h = self.handle(fh)?;
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
            self.observer.changing(h.id);
        }
        // SAFETY: the descriptor is open for the duration of the call.
        check(unsafe {
            libc::fallocate(
                h.file.as_raw_fd(),
                mode,
                offset as libc::off_t,
                length as libc::off_t,
            )
        })?;
        // Plain allocation keeps the bytes; punching, zeroing, collapsing and
        // inserting change them from `offset` on (the last two shift the rest).
        if mode & !libc::FALLOC_FL_KEEP_SIZE != 0 {
            let len = u64::MAX - offset;
            self.observer
                .changed(h.id, DataChange::Written { offset, len });
        }
        Ok(())
    }
}
