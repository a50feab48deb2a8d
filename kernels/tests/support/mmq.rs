//! The weight types of the prefill GEMM kernels (`mmq`, `mmq_moe`): random valid blocks and the
//! f64 reference of one row's dot product with one token, shared by their tests.

use half::f16;
use ingot_abi::blocks::{
    get_scale_min_k4, q3k_scale, BlockIq4Nl, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ5K,
    BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8_0, BlockQ8_1, KVALUES_IQ4NL, QK8_1, QK_K,
};
use rand::rngs::StdRng;
use rand::Rng;
use std::mem::size_of;

/// The weight types of the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Q4K,
    Q6K,
    Q5_0,
    Q8_0,
    Q5K,
    Q3K,
    Q4_0,
    Iq4Nl,
    Q4_1,
    Q5_1,
}

impl Kind {
    /// The launchers' name of the type.
    pub fn ty(self) -> ingot_abi::weight_types::GemvType {
        use ingot_abi::weight_types::GemvType;
        match self {
            Kind::Q4K => GemvType::Q4K,
            Kind::Q6K => GemvType::Q6K,
            Kind::Q5_0 => GemvType::Q5_0,
            Kind::Q8_0 => GemvType::Q8_0,
            Kind::Q5K => GemvType::Q5K,
            Kind::Q3K => GemvType::Q3K,
            Kind::Q4_0 => GemvType::Q4_0,
            Kind::Iq4Nl => GemvType::Iq4Nl,
            Kind::Q4_1 => GemvType::Q4_1,
            Kind::Q5_1 => GemvType::Q5_1,
        }
    }

    pub fn block_bytes(self) -> usize {
        match self {
            Kind::Q4K => size_of::<BlockQ4K>(),
            Kind::Q6K => size_of::<BlockQ6K>(),
            Kind::Q5_0 => size_of::<BlockQ5_0>(),
            Kind::Q8_0 => size_of::<BlockQ8_0>(),
            Kind::Q5K => size_of::<BlockQ5K>(),
            Kind::Q3K => size_of::<BlockQ3K>(),
            Kind::Q4_0 => size_of::<BlockQ4_0>(),
            Kind::Iq4Nl => size_of::<BlockIq4Nl>(),
            Kind::Q4_1 => size_of::<BlockQ4_1>(),
            Kind::Q5_1 => size_of::<BlockQ5_1>(),
        }
    }

    /// Weights per block (`ncols` must be a multiple of it).
    pub fn block_weights(self) -> usize {
        match self {
            Kind::Q4K | Kind::Q6K | Kind::Q5K | Kind::Q3K => QK_K,
            Kind::Q5_0 | Kind::Q8_0 | Kind::Q4_0 | Kind::Iq4Nl | Kind::Q4_1 | Kind::Q5_1 => QK8_1,
        }
    }

    /// Bytes a sim launch reads per block beyond the block's own: a Q6_K block that starts 2
    /// bytes off a 4-byte word (210 ≡ 2 mod 4) is read from the word before it and reads 2
    /// bytes of `d` again; Q4_K's are aligned, as are Q4_1's and Q5_1's (whole words), and the
    /// other 32-weight types read each misaligned block's end words as the 16 bits it has of
    /// them.
    pub fn realign_bytes(self, block_index: usize) -> u64 {
        match self {
            Kind::Q6K if block_index % 2 == 1 => 4,
            _ => 0,
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
            Kind::Q3K => {
                let d = f16_in(rng);
                let mut b = BlockQ3K {
                    hmask: [0; 32],
                    qs: [0; 64],
                    scales: [0; 12],
                    d: if rng.random() { d } else { d | 0x8000 },
                };
                rng.fill(&mut b.hmask[..]);
                rng.fill(&mut b.qs[..]);
                rng.fill(&mut b.scales[..]);
                bytemuck::bytes_of(&b).to_vec()
            }
            Kind::Q5K => {
                let mut b = BlockQ5K {
                    d: f16_in(rng),
                    dmin: f16_in(rng),
                    scales: [0; 12],
                    qh: [0; 32],
                    qs: [0; 128],
                };
                rng.fill(&mut b.scales[..]);
                rng.fill(&mut b.qh[..]);
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
            Kind::Q5_0 => {
                let d = f16_in(rng);
                let mut b = BlockQ5_0 {
                    d: if rng.random() { d } else { d | 0x8000 },
                    qh: [0; 4],
                    qs: [0; 16],
                };
                rng.fill(&mut b.qh[..]);
                rng.fill(&mut b.qs[..]);
                bytemuck::bytes_of(&b).to_vec()
            }
            Kind::Q8_0 => {
                let d = f16_in(rng);
                let mut b = BlockQ8_0 {
                    d: if rng.random() { d } else { d | 0x8000 },
                    qs: [0; 32],
                };
                rng.fill(&mut b.qs[..]);
                bytemuck::bytes_of(&b).to_vec()
            }
            Kind::Q4_0 | Kind::Iq4Nl => {
                // The two layouts are alike: `d`, then 16 bytes of nibbles.
                let d = f16_in(rng);
                let mut b = BlockQ4_0 {
                    d: if rng.random() { d } else { d | 0x8000 },
                    qs: [0; 16],
                };
                rng.fill(&mut b.qs[..]);
                bytemuck::bytes_of(&b).to_vec()
            }
            Kind::Q4_1 => {
                let (d, m) = (f16_in(rng), f16_in(rng));
                let mut b = BlockQ4_1 {
                    d: if rng.random() { d } else { d | 0x8000 },
                    m: if rng.random() { m } else { m | 0x8000 },
                    qs: [0; 16],
                };
                rng.fill(&mut b.qs[..]);
                bytemuck::bytes_of(&b).to_vec()
            }
            Kind::Q5_1 => {
                let (d, m) = (f16_in(rng), f16_in(rng));
                let mut b = BlockQ5_1 {
                    d: if rng.random() { d } else { d | 0x8000 },
                    m: if rng.random() { m } else { m | 0x8000 },
                    qh: [0; 4],
                    qs: [0; 16],
                };
                rng.fill(&mut b.qh[..]);
                rng.fill(&mut b.qs[..]);
                bytemuck::bytes_of(&b).to_vec()
            }
        }
    }

    /// Rounded f32 operations the kernel spends per 32-weight sub-block: Q4_K and Q5_K one product
    /// (`scale·d8`) and two fused adds (scale and min terms); Q6_K one product (`d·d8`) and one
    /// fused add (its two groups are combined exactly in integers); the 32-weight types one
    /// fused add (their `d·d8`, a product of two f16 values, is exact in f32), Q4_1 and Q5_1
    /// two (scale and min terms: `d·d8` is exact, and so is the min's `s8 = d8·Σq8`, an f16
    /// times an integer below 2^13).
    pub fn roundings_per_sub_block(self) -> f64 {
        match self {
            Kind::Q4K | Kind::Q5K => 3.0,
            Kind::Q6K | Kind::Q3K | Kind::Q4_1 | Kind::Q5_1 => 2.0,
            Kind::Q5_0 | Kind::Q8_0 | Kind::Q4_0 | Kind::Iq4Nl => 1.0,
        }
    }

    /// The exact value of one row's dot product with one token's activation, and `Σ|term|`
    /// over the terms the kernel adds (the scale of its rounding error), in f64: every factor
    /// is an f16 or a small integer, so each term is exact.
    pub fn reference(self, row: &[u8], act: &[BlockQ8_1]) -> (f64, f64) {
        let (mut sum, mut mag) = (0.0, 0.0);
        for (s, bytes) in row.chunks_exact(self.block_bytes()).enumerate() {
            let n = self.block_weights() / QK8_1;
            let act = &act[s * n..(s + 1) * n];
            let (v, m) = match self {
                Kind::Q4K => reference_q4k(&bytemuck::pod_read_unaligned(bytes), act),
                Kind::Q3K => reference_q3k(&bytemuck::pod_read_unaligned(bytes), act),
                Kind::Q5K => reference_q5k(&bytemuck::pod_read_unaligned(bytes), act),
                Kind::Q6K => reference_q6k(&bytemuck::pod_read_unaligned(bytes), act),
                Kind::Q5_0 => reference_q5_0(&bytemuck::pod_read_unaligned(bytes), &act[0]),
                Kind::Q8_0 => reference_q8_0(&bytemuck::pod_read_unaligned(bytes), &act[0]),
                Kind::Q4_0 => reference_q4_0(&bytemuck::pod_read_unaligned(bytes), &act[0]),
                Kind::Iq4Nl => reference_iq4_nl(&bytemuck::pod_read_unaligned(bytes), &act[0]),
                Kind::Q4_1 => reference_q4_1(&bytemuck::pod_read_unaligned(bytes), &act[0]),
                Kind::Q5_1 => reference_q5_1(&bytemuck::pod_read_unaligned(bytes), &act[0]),
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

/// One Q5_K block against its 8 q8_1 blocks (ggml's layout): element `64p + 32h + l` of
/// sub-block `j = 2p + h` is nibble `h` of `qs[32p + l]` plus 16 times bit `j` of `qh[l]`; per
/// sub-block `d·sc_j·d8·Σ q·q8 − dmin·m_j·d8·Σ q8`.
fn reference_q5k(b: &BlockQ5K, act: &[BlockQ8_1]) -> (f64, f64) {
    let (mut sum, mut mag) = (0.0, 0.0);
    let d = f16::from_bits(b.d).to_f64();
    let dmin = f16::from_bits(b.dmin).to_f64();
    for (j, a) in act.iter().enumerate() {
        let (sc, m) = get_scale_min_k4(j, &b.scales);
        let d8 = f16::from_bits(a.d).to_f64();
        let (mut dot, mut qsum, mut abs) = (0i64, 0i64, 0i64);
        for i in 0..QK8_1 {
            let byte = b.qs[32 * (j / 2) + i];
            let nib = if j % 2 == 0 { byte & 0xF } else { byte >> 4 };
            let q = i64::from(nib | ((b.qh[i] >> j) & 1) << 4);
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

/// One Q3_K block against its 8 q8_1 blocks (ggml's `dequantize_row_q3_K` layout): element
/// `128n + 32j + l` is `(qs[32n + l] >> 2j & 3) − (hmask[l] bit 4n + j ? 0 : 4)`, scaled by
/// `d·q3k_scale(e/16)`.
fn reference_q3k(b: &BlockQ3K, act: &[BlockQ8_1]) -> (f64, f64) {
    let (mut sum, mut mag) = (0.0, 0.0);
    let d = f16::from_bits(b.d).to_f64();
    for e in 0..QK_K {
        let (n, j, l) = (e / 128, (e % 128) / 32, e % 32);
        let low = i64::from((b.qs[32 * n + l] >> (2 * j)) & 3);
        let high = (b.hmask[l] >> (4 * n + j)) & 1;
        let q = low - if high == 1 { 0 } else { 4 };
        let sc = f64::from(q3k_scale(&b.scales, e / 16));
        let a = &act[e / QK8_1];
        let term = d * sc * f16::from_bits(a.d).to_f64() * (q * i64::from(a.qs[e % QK8_1])) as f64;
        sum += term;
        mag += term.abs();
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

/// One block of 32 levels `q` with factor `d` against its q8_1 block: `d·d8·Σ q·q8` (the
/// decode gemv's formula; for Q5_0 and Q4_0 `q` is the level minus 16 or 8, their
/// `d·(d8·Σq·q8 − 16·s8)` and `d·(d8·Σq·q8 − 8·s8)` with `s8 = d8·Σq8`), and `|d·d8|·Σ|q·q8|`.
fn reference_levels(d: u16, q: impl Fn(usize) -> i64, a: &BlockQ8_1) -> (f64, f64) {
    let scale = f16::from_bits(d).to_f64() * f16::from_bits(a.d).to_f64();
    let (mut dot, mut abs) = (0i64, 0i64);
    for i in 0..QK8_1 {
        let p = q(i) * i64::from(a.qs[i]);
        dot += p;
        abs += p.abs();
    }
    (scale * dot as f64, scale.abs() * abs as f64)
}

/// One Q5_0 block (ggml's layout): element `i < 16` is the low nibble of `qs[i]`, element
/// `16 + i` its high nibble, bit `i` (`16 + i`) of `qh` their fifth bit; level `q − 16`.
fn reference_q5_0(b: &BlockQ5_0, a: &BlockQ8_1) -> (f64, f64) {
    let qh = u32::from_le_bytes(b.qh);
    reference_levels(
        b.d,
        |i| {
            let nib = if i < 16 {
                b.qs[i] & 15
            } else {
                b.qs[i - 16] >> 4
            };
            i64::from(u32::from(nib) | ((qh >> i) & 1) << 4) - 16
        },
        a,
    )
}

/// One Q8_0 block: levels as stored.
fn reference_q8_0(b: &BlockQ8_0, a: &BlockQ8_1) -> (f64, f64) {
    reference_levels(b.d, |i| i64::from(b.qs[i]), a)
}

/// Nibble `i` of a Q4_0 / IQ4_NL block's `qs` (ggml's layout): element `i < 16` is the low
/// nibble of `qs[i]`, element `16 + i` its high nibble.
fn nibble(qs: &[u8; 16], i: usize) -> usize {
    usize::from(if i < 16 { qs[i] & 15 } else { qs[i - 16] >> 4 })
}

/// One Q4_0 block: level `q − 8`.
fn reference_q4_0(b: &BlockQ4_0, a: &BlockQ8_1) -> (f64, f64) {
    reference_levels(b.d, |i| nibble(&b.qs, i) as i64 - 8, a)
}

/// One IQ4_NL block: level `KVALUES_IQ4NL[q]`.
fn reference_iq4_nl(b: &BlockIq4Nl, a: &BlockQ8_1) -> (f64, f64) {
    reference_levels(b.d, |i| i64::from(KVALUES_IQ4NL[nibble(&b.qs, i)]), a)
}

/// One block of 32 levels `q` with `W = d·q + m` against its q8_1 block:
/// `d·d8·Σ q·q8 + m·d8·Σ q8` (the decode gemv's formula, with the integer `Σq8`), and
/// `|d·d8|·Σ|q·q8| + |m·d8·Σq8|`.
fn reference_min(d: u16, m: u16, q: impl Fn(usize) -> i64, a: &BlockQ8_1) -> (f64, f64) {
    let (dot, mag) = reference_levels(d, q, a);
    let qsum: i64 = a.qs.iter().map(|&q8| i64::from(q8)).sum();
    let min = f16::from_bits(m).to_f64() * f16::from_bits(a.d).to_f64() * qsum as f64;
    (dot + min, mag + min.abs())
}

/// One Q4_1 block: level `q`, a nibble.
fn reference_q4_1(b: &BlockQ4_1, a: &BlockQ8_1) -> (f64, f64) {
    reference_min(b.d, b.m, |i| nibble(&b.qs, i) as i64, a)
}

/// One Q5_1 block (Q5_0's layout): level `q`, five bits.
fn reference_q5_1(b: &BlockQ5_1, a: &BlockQ8_1) -> (f64, f64) {
    let qh = b.qh_bits();
    reference_min(
        b.d,
        b.m,
        |i| (nibble(&b.qs, i) as i64) | i64::from((qh >> i) & 1) << 4,
        a,
    )
}
