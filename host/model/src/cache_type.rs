//! How the latent cache stores a row `[c | k_pe]` (`--cache-type`, as llama.cpp's `-ctk`).

use std::fmt;
use std::str::FromStr;

use ingot_quant::blocks::QK8_0;
use ingot_quant::q8_0;

/// The number format of the latent cache's rows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CacheType {
    /// Full precision: f16 rows on the GPU, f32 rows on the CPU backends.
    #[default]
    F16,
    /// ggml's q8_0 per 32 values of a row (`d = amax/127` stored as f16, `q = roundf(x·(1/d))`): about half the
    /// bytes of an f16 row where a backend stores the blocks. The CPU backend keeps the dequantized
    /// values (`q·d`, exact in f32) in its f32 rows: the values a q8_0 cache holds, which is what the
    /// gates compare, not its memory saving.
    Q8_0,
}

impl CacheType {
    /// Every type, in the order `--help` lists them.
    pub const ALL: [CacheType; 2] = [CacheType::F16, CacheType::Q8_0];

    pub fn name(self) -> &'static str {
        match self {
            CacheType::F16 => "f16",
            CacheType::Q8_0 => "q8_0",
        }
    }

    /// Rounds a cache row to the values this type holds (in place; F16 leaves it as it is, the CPU
    /// keeping f32). A last group shorter than 32 values is quantized as if padded with zeros.
    pub fn round_row(self, row: &mut [f32]) {
        if self == CacheType::F16 {
            return;
        }
        for chunk in row.chunks_mut(QK8_0) {
            let mut block = [0.0f32; QK8_0];
            block[..chunk.len()].copy_from_slice(chunk);
            let q = q8_0::quantize(&block);
            q8_0::dequantize(&q, &mut block);
            chunk.copy_from_slice(&block[..chunk.len()]);
        }
    }
}

impl fmt::Display for CacheType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for CacheType {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|t| t.name()).collect();
                format!(
                    "unknown cache type `{s}` (expected one of: {})",
                    names.join(", ")
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_an_error() {
        for t in CacheType::ALL {
            assert_eq!(t.name().parse::<CacheType>(), Ok(t));
        }
        let e = "q4_0".parse::<CacheType>().unwrap_err();
        assert!(e.contains("f16, q8_0"), "{e}");
    }

    #[test]
    fn q8_0_rows_hold_the_dequantized_blocks() {
        // 576 = 18 blocks (V2-Lite's kv_lora + rope), then a 40-value row with a short last group.
        for n in [576usize, 40] {
            let x: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013 + 0.001)
                .collect();
            let mut r = x.clone();
            CacheType::Q8_0.round_row(&mut r);
            for (b, (xs, rs)) in x.chunks(QK8_0).zip(r.chunks(QK8_0)).enumerate() {
                let amax = xs.iter().fold(0.0f32, |m, v| m.max(v.abs()));
                for (&a, &q) in xs.iter().zip(rs) {
                    // Half a quant step, plus the f16 rounding of d (2^-11 relative, 127 steps).
                    let bound = amax / 127.0 * (0.5 + 127.0 * 2f32.powi(-11)) * 1.0001;
                    assert!(
                        (a - q).abs() <= bound,
                        "block {b}: {a} -> {q}, bound {bound}"
                    );
                }
                assert!(rs.iter().any(|&v| v != 0.0), "block {b} lost every value");
            }
            let mut same = x.clone();
            CacheType::F16.round_row(&mut same);
            assert_eq!(same, x);
        }
    }
}
