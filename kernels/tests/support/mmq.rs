//! The weight types of the prefill GEMM kernels (`mmq`, `mmq_moe`): random valid blocks and the
//! f64 reference of one row's dot product with one token, shared by their tests.

use half::f16;
use ingot_abi::blocks::{get_scale_min_k4, BlockQ4K, BlockQ6K, BlockQ8_1, QK8_1, QK_K};
use rand::rngs::StdRng;
use rand::Rng;
use std::mem::size_of;

/// The weight types of the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Q4K,
    Q6K,
}

impl Kind {
    pub fn block_bytes(self) -> usize {
        match self {
            Kind::Q4K => size_of::<BlockQ4K>(),
            Kind::Q6K => size_of::<BlockQ6K>(),
        }
    }

    /// One random valid block's bytes.
    pub fn random_block(self, rng: &mut StdRng) -> Vec<u8> {
        let f16_in = |rng: &mut StdRng| f16::from_f32(rng.random_range(1e-3f32..1e-2)).to_bits();
        match self {
            Kind::Q4K => {
                let mut b = BlockQ4K {
                    d: f16_in(rng),
                    dmin: f16_in(rng),
                    scales: [0; 12],
                    qs: [0; 128],
                };
                rng.fill(&mut b.scales[..]);
                rng.fill(&mut b.qs[..]);
                bytemuck::bytes_of(&b).to_vec()
            }
            Kind::Q6K => {
                let d = f16_in(rng);
                let mut b = BlockQ6K {
                    ql: [0; 128],
                    qh: [0; 64],
                    scales: [0; 16],
                    d: if rng.random() { d } else { d | 0x8000 },
                };
                rng.fill(&mut b.ql[..]);
                rng.fill(&mut b.qh[..]);
                rng.fill(&mut b.scales[..]);
                bytemuck::bytes_of(&b).to_vec()
            }
        }
    }

    /// Rounded f32 operations the kernel spends per 32-weight sub-block: Q4_K one product
    /// (`scale·d8`) and two fused adds (scale and min terms); Q6_K one product (`d·d8`) and one
    /// fused add (its two groups are combined exactly in integers).
    pub fn roundings_per_sub_block(self) -> f64 {
        match self {
            Kind::Q4K => 3.0,
            Kind::Q6K => 2.0,
        }
    }

    /// The exact value of one row's dot product with one token's activation, and `Σ|term|`
    /// over the terms the kernel adds (the scale of its rounding error), in f64: every factor
    /// is an f16 or a small integer, so each term is exact.
    pub fn reference(self, row: &[u8], act: &[BlockQ8_1]) -> (f64, f64) {
        let (mut sum, mut mag) = (0.0, 0.0);
        for (s, bytes) in row.chunks_exact(self.block_bytes()).enumerate() {
            let act = &act[s * QK_K / QK8_1..(s + 1) * QK_K / QK8_1];
            let (v, m) = match self {
                Kind::Q4K => reference_q4k(&bytemuck::pod_read_unaligned(bytes), act),
                Kind::Q6K => reference_q6k(&bytemuck::pod_read_unaligned(bytes), act),
            };
            sum += v;
            mag += m;
        }
        (sum, mag)
    }
}

/// One Q4_K block against its 8 q8_1 blocks: per sub-block `j` of 32,
/// `d·sc_j·d8·Σ q·q8 − dmin·m_j·d8·Σ q8`.
fn reference_q4k(b: &BlockQ4K, act: &[BlockQ8_1]) -> (f64, f64) {
    let (mut sum, mut mag) = (0.0, 0.0);
    let d = f16::from_bits(b.d).to_f64();
    let dmin = f16::from_bits(b.dmin).to_f64();
    for (j, a) in act.iter().enumerate() {
        let (sc, m) = get_scale_min_k4(j, &b.scales);
        let d8 = f16::from_bits(a.d).to_f64();
        let (mut dot, mut qsum, mut abs) = (0i64, 0i64, 0i64);
        for i in 0..QK8_1 {
            let byte = b.qs[32 * (j / 2) + i];
            let q = i64::from(if j % 2 == 0 { byte & 0xF } else { byte >> 4 });
            let q8 = i64::from(a.qs[i]);
            dot += q * q8;
            qsum += q8;
            abs += q * q8.abs();
        }
        let (scale, min) = (d * f64::from(sc), dmin * f64::from(m));
        sum += scale * d8 * dot as f64 - min * d8 * qsum as f64;
        mag += (scale * abs as f64 + min * qsum.abs() as f64) * d8.abs();
    }
    (sum, mag)
}

/// One Q6_K block against its 8 q8_1 blocks (ggml's `dequantize_row_q6_K` layout): element
/// `128n + 32m + l` is `(ql[64n + 32(m%2) + l] >> 4(m/2) & 15 | (qh[32n + l] >> 2m & 3) << 4)
/// − 32`, scaled by `d·scales[8n + 2m + l/16]`.
fn reference_q6k(b: &BlockQ6K, act: &[BlockQ8_1]) -> (f64, f64) {
    let (mut sum, mut mag) = (0.0, 0.0);
    let d = f16::from_bits(b.d).to_f64();
    for e in 0..QK_K {
        let (n, m, l) = (e / 128, (e % 128) / 32, e % 32);
        let low = (b.ql[64 * n + 32 * (m % 2) + l] >> (4 * (m / 2))) & 15;
        let high = (b.qh[32 * n + l] >> (2 * m)) & 3;
        let q = i64::from(low | (high << 4)) - 32;
        let sc = f64::from(b.scales[8 * n + 2 * m + l / 16]);
        let a = &act[e / QK8_1];
        let term = d * sc * f16::from_bits(a.d).to_f64() * (q * i64::from(a.qs[e % QK8_1])) as f64;
        sum += term;
        mag += term.abs();
    }
    (sum, mag)
}
