//! A small, self-contained deterministic generator, so a model made from `--seed S` is the same
//! file on every machine and with every version of the `rand` crates.
//!
//! xoshiro256++ seeded through splitmix64; normals by Box-Muller. Each tensor (and each chunk of a
//! tensor) gets its own stream derived from (seed, tensor name, chunk index), which makes parallel
//! generation independent of the thread count.

use ingot_abi::hash::{fnv1a, splitmix64};

pub struct Rng {
    s: [u64; 4],
    spare_normal: Option<f32>,
}

impl Rng {
    pub fn new(seed: u64) -> Rng {
        let mut sm = seed;
        let s = [
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
            splitmix64(&mut sm),
        ];
        Rng {
            s,
            spare_normal: None,
        }
    }

    /// The stream of one chunk of one tensor of a model seeded with `seed`.
    pub fn for_stream(seed: u64, name: &str, chunk: u64) -> Rng {
        let mut sm = seed ^ fnv1a(name.as_bytes());
        let a = splitmix64(&mut sm);
        Rng::new(a ^ chunk.wrapping_mul(0xd134_2543_de82_ef95))
    }

    pub fn next_u64(&mut self) -> u64 {
        let result = (self.s[0].wrapping_add(self.s[3]))
            .rotate_left(23)
            .wrapping_add(self.s[0]);
        let t = self.s[1] << 17;
        self.s[2] ^= self.s[0];
        self.s[3] ^= self.s[1];
        self.s[1] ^= self.s[2];
        self.s[0] ^= self.s[3];
        self.s[2] ^= t;
        self.s[3] = self.s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1) with 53 bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box-Muller, both outputs used).
    pub fn normal(&mut self) -> f32 {
        if let Some(z) = self.spare_normal.take() {
            return z;
        }
        // 1 - u keeps the logarithm's argument in (0, 1].
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        let r = (-2.0 * u1.ln()).sqrt();
        let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
        self.spare_normal = Some((r * s) as f32);
        (r * c) as f32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_deterministic_and_distinct() {
        let a: Vec<u64> = (0..4)
            .map({
                let mut r = Rng::for_stream(7, "blk.0.attn_q.weight", 0);
                move |_| r.next_u64()
            })
            .collect();
        let mut r = Rng::for_stream(7, "blk.0.attn_q.weight", 0);
        let b: Vec<u64> = (0..4).map(|_| r.next_u64()).collect();
        assert_eq!(a, b);
        let mut other = Rng::for_stream(7, "blk.0.attn_q.weight", 1);
        assert_ne!(a[0], other.next_u64());
        let mut seed2 = Rng::for_stream(8, "blk.0.attn_q.weight", 0);
        assert_ne!(a[0], seed2.next_u64());
    }

    #[test]
    fn normal_has_unit_moments() {
        let mut r = Rng::new(1);
        let n = 200_000;
        let xs: Vec<f64> = (0..n).map(|_| f64::from(r.normal())).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        // Standard error of the mean is 1/sqrt(n) ~ 0.0022; of the variance ~ sqrt(2/n) ~ 0.0032.
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!((var - 1.0).abs() < 0.015, "var {var}");
    }
}
