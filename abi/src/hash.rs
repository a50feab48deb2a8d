//! The workspace's one stable 64-bit hash: FNV-1a over bytes, and SplitMix64, the mixer that turns
//! a seed into a stream. Seeds of synthetic tensors, model fingerprints, test digests and test
//! inputs are computed with them, so a value written down on one machine or Rust version means the
//! same input on another (`core::hash` and `rand` promise no such stability). Not for untrusted
//! keys in maps: neither is collision-resistant.

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0000_0100_0000_01b3;

/// FNV-1a fed in pieces: `Fnv1a::new().bytes(a).bytes(b).finish()` equals [`fnv1a`] of `a` then
/// `b`.
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

/// SplitMix64 (Steele, Lea and Flood; Vigna's constants): advances `state` by the golden-ratio
/// increment and returns it mixed. One call per output makes a stream; a single call hashes a
/// `u64` (a counter, an index) to well-spread bits.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
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

    #[test]
    fn splitmix64_matches_the_reference_stream() {
        // Vigna's splitmix64.c seeded with 1234567: its first three outputs.
        let mut s = 1_234_567;
        assert_eq!(splitmix64(&mut s), 6_457_827_717_110_365_317);
        assert_eq!(splitmix64(&mut s), 3_203_168_211_198_807_973);
        assert_eq!(splitmix64(&mut s), 9_817_491_932_198_370_423);
    }
}
