//! The workspace's one stable 64-bit hash: FNV-1a over bytes. Seeds of synthetic tensors, model
//! fingerprints and test digests are computed with it, so a value written down on one machine or
//! Rust version means the same input on another (`core::hash` promises no such stability). Not for
//! untrusted keys in maps: it is not collision-resistant.

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a fed in pieces: `Fnv1a::new().bytes(a).bytes(b).finish()` equals [`fnv1a`] of `a` then `b`.
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a(u64);

impl Fnv1a {
    pub const fn new() -> Self {
        Fnv1a(OFFSET)
    }

    /// Adds `bytes` to the hash.
    pub fn bytes(mut self, bytes: &[u8]) -> Self {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(PRIME);
        }
        self
    }

    pub const fn finish(self) -> u64 {
        self.0
    }
}

impl Default for Fnv1a {
    fn default() -> Self {
        Self::new()
    }
}

/// FNV-1a 64 of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    Fnv1a::new().bytes(bytes).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_published_fnv1a_64_vectors() {
        // From the FNV reference test suite (Fowler, Noll, Vo): "", "a", "foobar".
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn pieces_hash_as_their_concatenation() {
        assert_eq!(
            Fnv1a::new().bytes(b"foo").bytes(b"bar").finish(),
            fnv1a(b"foobar")
        );
        assert_ne!(fnv1a(b"foobar"), fnv1a(b"barfoo"));
    }
}
