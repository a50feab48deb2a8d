//! A little-endian byte cursor whose reads fail with the offset and kind of the problem; the parser
//! adds the field name afterwards, only on the error path, so the hot path builds no strings.

use crate::error::{FormatError, GgufError};

/// A format problem at a byte offset, still waiting for its field name.
#[derive(Debug)]
pub(crate) struct Fault {
    pub offset: u64,
    pub kind: FormatError,
}

impl Fault {
    pub fn new(offset: u64, kind: FormatError) -> Self {
        Fault { offset, kind }
    }
}

/// Names the field of a [`Fault`], turning it into a [`GgufError::Format`].
pub(crate) trait Locate<T> {
    fn field(self, name: impl FnOnce() -> String) -> Result<T, GgufError>;
}

impl<T> Locate<T> for Result<T, Fault> {
    fn field(self, name: impl FnOnce() -> String) -> Result<T, GgufError> {
        self.map_err(|f| GgufError::Format {
            path: None,
            field: name(),
            offset: f.offset,
            kind: f.kind,
        })
    }
}

pub(crate) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    /// Offset of the next byte to read.
    pub fn pos(&self) -> u64 {
        self.pos as u64
    }

    /// Bytes left after the cursor.
    pub fn remaining(&self) -> u64 {
        (self.bytes.len() - self.pos) as u64
    }

    /// The next `n` bytes; fails without moving if fewer remain.
    pub fn take(&mut self, n: u64) -> Result<&'a [u8], Fault> {
        let rest = &self.bytes[self.pos..];
        match usize::try_from(n).ok().and_then(|n| rest.get(..n)) {
            Some(out) => {
                self.pos += out.len();
                Ok(out)
            }
            None => Err(self.truncated(n)),
        }
    }

    fn truncated(&self, needed: u64) -> Fault {
        Fault::new(
            self.pos(),
            FormatError::Truncated {
                needed,
                available: self.remaining(),
            },
        )
    }

    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Fault> {
        match self.bytes[self.pos..].first_chunk::<N>() {
            Some(chunk) => {
                self.pos += N;
                Ok(*chunk)
            }
            None => Err(self.truncated(N as u64)),
        }
    }

    pub fn u8(&mut self) -> Result<u8, Fault> {
        self.array::<1>().map(|b| b[0])
    }

    pub fn u32(&mut self) -> Result<u32, Fault> {
        self.array().map(u32::from_le_bytes)
    }

    pub fn u64(&mut self) -> Result<u64, Fault> {
        self.array().map(u64::from_le_bytes)
    }

    /// A GGUF string: u64 byte length, then that many UTF-8 bytes. A length beyond the remaining
    /// input is reported at the length prefix, before anything is allocated.
    pub fn str(&mut self) -> Result<&'a str, Fault> {
        let start = self.pos();
        let len = self.u64()?;
        if len > self.remaining() {
            return Err(Fault::new(
                start,
                FormatError::Truncated {
                    needed: len,
                    available: self.remaining(),
                },
            ));
        }
        let bytes = self.take(len)?;
        std::str::from_utf8(bytes).map_err(|_| Fault::new(start, FormatError::InvalidUtf8 { len }))
    }

    /// Fails at `at` unless `count` entries of at least `min_entry_bytes` each fit in what remains.
    /// This is what bounds every allocation by the size of the input.
    pub fn check_count(&self, at: u64, count: u64, min_entry_bytes: u64) -> Result<(), Fault> {
        let fits = count
            .checked_mul(min_entry_bytes)
            .is_some_and(|need| need <= self.remaining());
        if fits {
            Ok(())
        } else {
            Err(Fault::new(
                at,
                FormatError::CountExceedsInput {
                    count,
                    min_entry_bytes,
                    available: self.remaining(),
                },
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fail_in_place_when_short() {
        let mut c = Cursor::new(&[1, 0, 0, 0, 9]);
        assert_eq!(c.u32().unwrap(), 1);
        let f = c.u64().unwrap_err();
        assert_eq!(f.offset, 4);
        assert_eq!(
            f.kind,
            FormatError::Truncated {
                needed: 8,
                available: 1
            }
        );
        assert_eq!(c.pos(), 4, "a failed read does not move the cursor");
        assert!(c.take(u64::MAX).is_err());
    }

    #[test]
    fn string_length_is_checked_before_reading() {
        let mut bytes = u64::MAX.to_le_bytes().to_vec();
        bytes.extend_from_slice(b"abc");
        let f = Cursor::new(&bytes).str().unwrap_err();
        assert_eq!(f.offset, 0);
        assert_eq!(
            f.kind,
            FormatError::Truncated {
                needed: u64::MAX,
                available: 3
            }
        );
        let mut bad = 2u64.to_le_bytes().to_vec();
        bad.extend_from_slice(&[0xff, 0xfe]);
        let f = Cursor::new(&bad).str().unwrap_err();
        assert_eq!(f.kind, FormatError::InvalidUtf8 { len: 2 });
    }

    #[test]
    fn count_check_handles_overflow() {
        let c = Cursor::new(&[0; 16]);
        assert!(c.check_count(0, 2, 8).is_ok());
        assert!(c.check_count(0, 3, 8).is_err());
        assert!(c.check_count(0, u64::MAX, 8).is_err());
    }
}
