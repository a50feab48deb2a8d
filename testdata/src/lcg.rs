//! The tests' one small deterministic generator, so test inputs (prompts, random strings) are the
//! same on every machine and need no RNG crate. Not for anything but test inputs: it is a plain
//! LCG.

/// Knuth's 64-bit linear congruential generator (MMIX constants). Each draw advances the state once
/// and reads its high bits (an LCG's low bits are weak).
#[derive(Clone, Debug)]
pub struct Lcg(pub u64);

impl Lcg {
    /// The next state.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0
    }

    /// The next state's high 31 bits.
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 33) as u32
    }

    /// A value in `0..n` (`n > 0`; slightly biased for an `n` that does not divide 2^31, which test
    /// inputs do not mind).
    pub fn below(&mut self, n: usize) -> usize {
        self.next_u32() as usize % n
    }

    /// Uniform in `[0, 1)` from the state's high 24 bits: exact in f32.
    pub fn unit_f32(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }

    /// `n` token ids in `0..vocab`: a prompt for tests that need tokens, not text.
    pub fn tokens(&mut self, n: usize, vocab: usize) -> Vec<u32> {
        (0..n).map(|_| self.below(vocab) as u32).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_the_states_high_bits() {
        let mut a = Lcg(1);
        let s = 1u64
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        assert_eq!(a.next_u32(), (s >> 33) as u32);
        let mut b = Lcg(1);
        assert_eq!(b.below(1000), ((s >> 33) % 1000) as usize);
        assert_eq!(Lcg(1).tokens(1, 1000), vec![((s >> 33) % 1000) as u32]);
    }
}
