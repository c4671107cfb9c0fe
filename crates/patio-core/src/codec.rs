//! Byte-level building blocks shared by every patio format: LEB128 varints, zigzag
//! signed varints, CRC32C, checksummed blobs (magic + version + length + CRC) and
//! length-prefixed checksummed frames for append-only logs. All integers are
//! little-endian.

use crate::error::{CoreError, Result};

pub fn put_uvarint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

pub fn put_ivarint(buf: &mut Vec<u8>, v: i64) {
    put_uvarint(buf, zigzag(v));
}

pub fn crc32c(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// A reading position over a byte slice; every error names the absolute offset.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    /// Added to `pos` in error messages (where this slice sits in its file).
    base: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Self::with_base(bytes, 0)
    }

    pub fn with_base(bytes: &'a [u8], base: usize) -> Self {
        Cursor {
            bytes,
            pos: 0,
            base,
        }
    }

    pub fn position(&self) -> usize {
        self.base + self.pos
    }

    pub fn is_at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    pub fn error(&self, reason: impl Into<String>) -> CoreError {
        CoreError::corrupt(self.position(), reason)
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.bytes.len() - self.pos < n {
            return Err(self.error(format!(
                "truncated: needed {n} bytes, {} left",
                self.bytes.len() - self.pos
            )));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub fn u16_le(&mut self) -> Result<u16> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().unwrap()))
    }

    pub fn u32_le(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }

    pub fn u64_le(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }

    pub fn uvarint(&mut self) -> Result<u64> {
        // One byte: most values of a record or a column.
        if let Some(&b) = self.bytes.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(b as u64);
            }
        }
        let start = self.position();
        let mut v: u64 = 0;
        for shift in (0..70).step_by(7) {
            let b = self.u8()?;
            if shift == 63 && b > 1 {
                return Err(CoreError::corrupt(start, "varint overflows 64 bits"));
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(CoreError::corrupt(start, "varint longer than 10 bytes"))
    }

    pub fn ivarint(&mut self) -> Result<i64> {
        Ok(unzigzag(self.uvarint()?))
    }

    /// A count that is about to size an allocation: must not exceed `limit`.
    pub fn count(&mut self, limit: usize, what: &str) -> Result<usize> {
        let at = self.position();
        let n = self.uvarint()?;
        if n > limit as u64 {
            return Err(CoreError::corrupt(
                at,
                format!("{what} count {n} exceeds what the remaining bytes can hold"),
            ));
        }
        Ok(n as usize)
    }

    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }
}

/// Size of a blob header: magic (4), version (2), reserved (2), payload length (8),
/// CRC32C of the payload (4).
pub const BLOB_HEADER: usize = 20;

/// Wraps `payload` as a self-describing checksummed blob.
pub fn write_blob(magic: &[u8; 4], version: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(BLOB_HEADER + payload.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32c(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

/// Checks a blob's magic, version (≤ `max_version`), length and checksum and returns
/// `(version, payload)`.
pub fn read_blob<'a>(
    magic: &[u8; 4],
    max_version: u16,
    bytes: &'a [u8],
) -> Result<(u16, &'a [u8])> {
    let mut c = Cursor::new(bytes);
    let m = c
        .take(4)
        .map_err(|_| CoreError::corrupt(0, "too short to hold a header"))?;
    if m != magic {
        return Err(CoreError::corrupt(
            0,
            format!(
                "bad magic {:?}, expected {:?}",
                String::from_utf8_lossy(m),
                String::from_utf8_lossy(magic)
            ),
        ));
    }
    let version = c.u16_le()?;
    if version == 0 || version > max_version {
        return Err(CoreError::corrupt(
            4,
            format!("unsupported version {version} (this build reads up to {max_version})"),
        ));
    }
    if c.u16_le()? != 0 {
        return Err(CoreError::corrupt(6, "reserved header bytes are not zero"));
    }
    let len = c.u64_le()?;
    let crc = c.u32_le()?;
    if (c.remaining() as u64) < len {
        return Err(CoreError::corrupt(
            BLOB_HEADER,
            format!(
                "truncated: header announces {len} payload bytes, {} present",
                c.remaining()
            ),
        ));
    }
    let payload = c.take(len as usize)?;
    if crc32c(payload) != crc {
        return Err(CoreError::corrupt(BLOB_HEADER, "checksum mismatch"));
    }
    Ok((version, payload))
}

/// Appends one frame: payload length (u32), CRC32C of the payload (u32), payload.
pub fn put_frame(out: &mut Vec<u8>, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c(payload).to_le_bytes());
    out.extend_from_slice(payload);
}

/// The frames of an append-only log, in order, stopping at the first torn or
/// corrupt frame. The error (if any) says where and why the rest was dropped.
pub fn read_frames(bytes: &[u8], base: usize) -> (Vec<(usize, &[u8])>, Option<CoreError>) {
    let mut frames = Vec::new();
    let mut c = Cursor::with_base(bytes, base);
    while !c.is_at_end() {
        let at = c.position();
        let header = (|| -> Result<(u32, u32)> { Ok((c.u32_le()?, c.u32_le()?)) })();
        let (len, crc) = match header {
            Ok(h) => h,
            Err(_) => return (frames, Some(CoreError::corrupt(at, "torn frame header"))),
        };
        if c.remaining() < len as usize {
            let msg = format!(
                "torn frame: {len} bytes announced, {} present",
                c.remaining()
            );
            return (frames, Some(CoreError::corrupt(at, msg)));
        }
        let payload = c.take(len as usize).expect("length checked");
        if crc32c(payload) != crc {
            return (
                frames,
                Some(CoreError::corrupt(at, "frame checksum mismatch")),
            );
        }
        frames.push((at + 8, payload));
    }
    (frames, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_at_the_limits() {
        for v in [0i64, 1, -1, 63, -64, 64, i64::MAX, i64::MIN] {
            let mut b = Vec::new();
            put_ivarint(&mut b, v);
            assert_eq!(Cursor::new(&b).ivarint().unwrap(), v);
        }
        let mut b = Vec::new();
        put_uvarint(&mut b, u64::MAX);
        assert_eq!(b.len(), 10);
        assert_eq!(Cursor::new(&b).uvarint().unwrap(), u64::MAX);
        assert!(Cursor::new(&[0xff; 11]).uvarint().is_err());
        assert!(Cursor::new(&[0x80]).uvarint().is_err());
    }

    #[test]
    fn blobs_detect_damage() {
        let blob = write_blob(b"TEST", 1, b"hello");
        assert_eq!(read_blob(b"TEST", 1, &blob).unwrap(), (1, &b"hello"[..]));
        let mut bad = blob.clone();
        *bad.last_mut().unwrap() ^= 1;
        assert!(read_blob(b"TEST", 1, &bad).is_err());
        assert!(read_blob(b"TEST", 1, &blob[..blob.len() - 1]).is_err());
        assert!(read_blob(b"NOPE", 1, &blob).is_err());
        assert!(read_blob(b"TEST", 0, &blob).is_err());
    }

    #[test]
    fn frames_keep_the_intact_prefix() {
        let mut log = Vec::new();
        put_frame(&mut log, b"one");
        put_frame(&mut log, b"two");
        let full = log.len();
        put_frame(&mut log, b"three");
        let (frames, err) = read_frames(&log[..log.len() - 2], 0);
        assert_eq!(frames.len(), 2);
        assert!(err.unwrap().to_string().contains(&format!("byte {full}")));
    }
}
