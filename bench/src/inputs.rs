//! Bench inputs: Gaussian weights run through the project's reference quantizers, random
//! activations, and the checks that prove neither is degenerate.
//!
//! A gemv over zero or constant weights can run faster than over real ones (the hardware
//! compresses nothing here, but a kernel may skip zero scales, and constant data hides
//! unpacking mistakes), so every weight a bench uses comes from the quantizer `llama-quantize`
//! itself runs, fed with seeded Gaussian noise, and [`Variety`] checks the result.

use std::collections::HashSet;
use std::mem::offset_of;

use half::f16;
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::{CacheType, ExpertSelection, MAX_EXPERTS_USED};
use ingot_abi::weight_types::GemvType;
use ingot_gguf::GgmlType;
use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Normal};

use crate::error::{BenchError, Result};

/// Standard deviation of bench weights: the order of a trained transformer's linear weights
/// (DeepSeek initializes with 0.006..0.02). Only the spread of the quants matters to a kernel.
pub const WEIGHT_STD: f32 = 0.02;

/// Standard deviation of bench activations: a normed hidden state has unit RMS.
pub const ACTIVATION_STD: f32 = 1.0;

/// Largest tensor the bench builds, in elements (2^31: the V2-Lite lm_head is 2.1e8). A
/// larger request is a shape mistake and is refused before any allocation.
pub const MAX_ELEMENTS: usize = 1 << 31;

/// Fewest distinct dequantized values a 256-weight (k-quant) block, or a 32-value chunk of a
/// float type, must hold. Gaussian noise over the coarsest k-quant used here (Q3_K: 8 levels
/// per 16-weight sub-block, 16 sub-block scales) gives far more than 8; a zero or constant
/// block gives 1.
pub const MIN_DISTINCT_PER_BLOCK: usize = 8;

/// Fewest distinct values a 32-weight block must hold. Q4_0 and IQ4_NL map 32 Gaussian
/// samples onto 16 levels scaled to the block's largest magnitude, so most samples fall on the
/// 6-8 central levels: among the 2048 blocks of a 32 × 2048 bench slice the sparsest Q4_0
/// block has 7. A zero or constant block still gives 1.
pub const MIN_DISTINCT_PER_SMALL_BLOCK: usize = 5;

/// The distinct-value floor of one block of `ty` (see the two constants above).
pub fn min_distinct_per_block(ty: GgmlType) -> usize {
    if ty.is_quantized() && ty.block_size() as usize <= QK8_1 {
        MIN_DISTINCT_PER_SMALL_BLOCK
    } else {
        MIN_DISTINCT_PER_BLOCK
    }
}

/// `n` samples of N(0, std²) from a seeded generator.
pub fn gaussian(n: usize, std: f32, seed: u64) -> Result<Vec<f32>> {
    check_elements("gaussian", n)?;
    let normal = Normal::new(0.0f32, std).map_err(|e| BenchError::Shape {
        case: "gaussian".into(),
        reason: format!("standard deviation {std}: {e}"),
    })?;
    let mut rng = StdRng::seed_from_u64(seed);
    Ok((0..n).map(|_| normal.sample(&mut rng)).collect())
}

fn check_elements(what: &str, n: usize) -> Result<()> {
    if n == 0 || n > MAX_ELEMENTS {
        return Err(BenchError::Shape {
            case: what.into(),
            reason: format!("{n} elements (the bench builds 1..={MAX_ELEMENTS})"),
        });
    }
    Ok(())
}

/// Bytes of `rows` rows of `cols` elements of type `ty`, or a shape error when `cols` is not a
/// whole number of blocks or the size is beyond [`MAX_ELEMENTS`].
pub fn weight_bytes(ty: GgmlType, rows: usize, cols: usize) -> Result<usize> {
    let bad = |reason: String| BenchError::Shape {
        case: format!("{} weights {rows}x{cols}", ty.name()),
        reason,
    };
    let elements = rows
        .checked_mul(cols)
        .filter(|&n| n > 0 && n <= MAX_ELEMENTS)
        .ok_or_else(|| bad(format!("1..={MAX_ELEMENTS} elements required")))?;
    let bs = ty.block_size() as usize;
    if !cols.is_multiple_of(bs) {
        return Err(bad(format!("row length is not a multiple of {bs}")));
    }
    Ok(elements / bs * ty.type_size() as usize)
}

/// `rows × cols` Gaussian weights (std [`WEIGHT_STD`]) quantized to `ty` by
/// `ingot_quant::quantize_or_stand_in`: the bit-exact port of ggml's reference quantizers, or
/// for IQ2_XXS, IQ2_XS and IQ1_S (no quantizer here) stand-in blocks of the same magnitude.
pub fn quantized_weights(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Result<Vec<u8>> {
    let bytes = weight_bytes(ty, rows, cols)?;
    let x = gaussian(rows * cols, WEIGHT_STD, seed)?;
    let mut out = vec![0u8; bytes];
    ingot_quant::quantize_or_stand_in(ty, &x, &mut out)
        .map_err(|source| BenchError::Quant { ty, source })?;
    Ok(out)
}

/// `n` Gaussian activations (std [`ACTIVATION_STD`]) as q8_1 blocks, the CUDA variant the
/// gemv kernels read. `n` must be a multiple of 32.
pub fn q8_1_activation(n: usize, seed: u64) -> Result<Vec<u8>> {
    weight_bytes(GgmlType::Q8_1, 1, n)?;
    let x = gaussian(n, ACTIVATION_STD, seed)?;
    Ok(bytemuck::cast_slice(&ingot_quant::quantize_q8_1(&x)).to_vec())
}

/// `n` Gaussian f32 values with standard deviation `std`, little-endian bytes.
pub fn f32_values(n: usize, std: f32, seed: u64) -> Result<Vec<u8>> {
    Ok(bytemuck::cast_slice(&gaussian(n, std, seed)?).to_vec())
}

/// `n` Gaussian values with standard deviation `std` as little-endian f16 (the latent cache).
pub fn f16_values(n: usize, std: f32, seed: u64) -> Result<Vec<u8>> {
    Ok(gaussian(n, std, seed)?
        .into_iter()
        .flat_map(|v| f16::from_f32(v).to_le_bytes())
        .collect())
}

/// `rows` latent cache rows of `width` Gaussian values (standard deviation `std`) in the q8_0
/// row format (`CacheType::Q8_0`: each row's quants, then its f16 scales, then zero padding),
/// quantized by the reference `q8_0` quantizer, as the rope kernels would write them.
pub fn latent_q8_0_rows(rows: usize, width: usize, std: f32, seed: u64) -> Result<Vec<u8>> {
    let shape = |reason: String| BenchError::Shape {
        case: "q8_0 latent cache".into(),
        reason,
    };
    if width == 0 || width > MAX_ELEMENTS {
        return Err(shape(format!("row width {width}")));
    }
    let values = gaussian(
        rows.checked_mul(width)
            .ok_or_else(|| shape(format!("{rows} rows of {width}")))?,
        std,
        seed,
    )?;
    Ok(values
        .chunks_exact(width)
        .flat_map(|x| ingot_model::cache_type::encode_row(CacheType::Q8_0, x))
        .collect())
}

/// One `ExpertSelection` of `n_used` distinct experts out of `n_expert`: slot `k` names
/// expert `(offset + k·n_expert/n_used) mod n_expert` (`offset` from the seed), so the routed
/// rows a MoE kernel reads are spread over the stacked tensor as a real router's are; the
/// weights are positive and sum to 1 (V2-Lite's softmax gating).
pub fn expert_selection(n_expert: usize, n_used: usize, seed: u64) -> Result<Vec<u8>> {
    if n_used == 0 || n_used > MAX_EXPERTS_USED || n_used > n_expert || n_expert > u32::MAX as usize
    {
        return Err(BenchError::Shape {
            case: "expert selection".into(),
            reason: format!(
                "{n_used} of {n_expert} experts (1..={MAX_EXPERTS_USED} distinct ones required)"
            ),
        });
    }
    let offset = (seed % n_expert as u64) as usize;
    let raw: Vec<f32> = gaussian(n_used, 1.0, seed)?
        .into_iter()
        .map(|g| g.abs() + 0.1)
        .collect();
    let sum: f32 = raw.iter().sum();
    let mut sel = ExpertSelection::default();
    for (k, w) in raw.iter().enumerate() {
        // k·n_expert/n_used < n_expert, strictly increasing in k: the ids are distinct.
        sel.ids[k] = ((offset + k * n_expert / n_used) % n_expert) as u32;
        sel.weights[k] = w / sum;
    }
    Ok(bytemuck::bytes_of(&sel).to_vec())
}

/// Rope base of DeepSeek-V2 (`rope.freq_base`).
pub const ROPE_BASE: f64 = 10_000.0;

/// `pairs` rope frequencies `ROPE_BASE^(-i/pairs)` as little-endian f64 (no YaRN blend: the
/// kernel's cost does not depend on the angles).
pub fn rope_freq(pairs: usize) -> Result<Vec<u8>> {
    check_elements("rope_freq", pairs)?;
    Ok((0..pairs)
        .flat_map(|i| ROPE_BASE.powf(-(i as f64) / pairs as f64).to_le_bytes())
        .collect())
}

/// `pairs` flash partials `(m, l)` as f32: `m` ~ N(0, 1), `l = 1 + min(|g|, 3)` in `[1, 4]` (a
/// softmax denominator is at least 1: the maximum's own term).
pub fn softmax_stats(pairs: usize, seed: u64) -> Result<Vec<u8>> {
    let g = gaussian(pairs.checked_mul(2).unwrap_or(0), 1.0, seed)?;
    let mut out = Vec::with_capacity(pairs * 8);
    for p in g.chunks_exact(2) {
        out.extend_from_slice(&p[0].to_le_bytes());
        out.extend_from_slice(&(1.0 + p[1].abs().min(3.0)).to_le_bytes());
    }
    Ok(out)
}

/// Byte offset of the f16 block scale `d` in a block of `ty`: the first f16 field of its row in
/// the weight-type registry (`ingot_abi::weight_types`), or Q8_1's `d`; `None` for float types
/// (no scale), IQ1_M (`d` spread over its scales) and types without a row.
pub fn scale_offset(ty: GgmlType) -> Option<usize> {
    if ty == GgmlType::Q8_1 {
        return Some(offset_of!(BlockQ8_1, d));
    }
    GemvType::from_ggml_id(ty.id())?
        .f16_fields()
        .first()
        .copied()
}

/// How varied a buffer of quantized blocks is. Float types are looked at in chunks of 32
/// values, as if they were blocks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variety {
    pub ty: GgmlType,
    pub blocks: usize,
    /// Distinct raw byte patterns among the blocks.
    pub distinct_blocks: usize,
    /// Blocks whose f16 scale `d` is zero (always 0 for float types).
    pub zero_scales: usize,
    /// Fewest distinct dequantized values in any one block.
    pub min_distinct_values: usize,
}

impl Variety {
    /// Measures `data`, a whole number of blocks of `ty`.
    pub fn measure(ty: GgmlType, data: &[u8]) -> Result<Variety> {
        let (block_elems, block_bytes) = if ty.is_quantized() {
            (ty.block_size() as usize, ty.type_size() as usize)
        } else {
            (QK8_1, QK8_1 * ty.type_size() as usize)
        };
        if data.is_empty() || !data.len().is_multiple_of(block_bytes) {
            return Err(BenchError::Shape {
                case: format!("{} variety", ty.name()),
                reason: format!(
                    "{} bytes is not a positive number of {block_bytes}-byte blocks",
                    data.len()
                ),
            });
        }
        let mut values = vec![0f32; block_elems];
        let mut patterns = HashSet::new();
        let mut zero_scales = 0;
        let mut min_distinct_values = usize::MAX;
        for block in data.chunks_exact(block_bytes) {
            patterns.insert(block);
            if let Some(at) = scale_offset(ty) {
                let d = f16::from_le_bytes([block[at], block[at + 1]]);
                if d.to_f32() == 0.0 {
                    zero_scales += 1;
                }
            }
            ingot_quant::dequantize_row(ty, block, &mut values)
                .map_err(|source| BenchError::Quant { ty, source })?;
            let distinct: HashSet<u32> = values.iter().map(|v| v.to_bits()).collect();
            min_distinct_values = min_distinct_values.min(distinct.len());
        }
        Ok(Variety {
            ty,
            blocks: data.len() / block_bytes,
            distinct_blocks: patterns.len(),
            zero_scales,
            min_distinct_values,
        })
    }

    /// `Ok` when no scale is zero, every block holds at least [`min_distinct_per_block`]
    /// distinct values and (with more than one block) not all blocks are equal; otherwise the
    /// first problem found, in words.
    pub fn check(&self) -> std::result::Result<(), String> {
        let ty = self.ty.name();
        if self.zero_scales > 0 {
            return Err(format!(
                "{ty}: {} of {} blocks have scale d = 0",
                self.zero_scales, self.blocks
            ));
        }
        let need = min_distinct_per_block(self.ty);
        if self.min_distinct_values < need {
            return Err(format!(
                "{ty}: a block holds only {} distinct values (need {need})",
                self.min_distinct_values
            ));
        }
        if self.blocks > 1 && self.distinct_blocks == 1 {
            return Err(format!("{ty}: all {} blocks are identical", self.blocks));
        }
        Ok(())
    }
}

/// Seed of token `t`'s selection in a prefill chunk ([`chunk_selections`]): a fixed hash of
/// `t` (SplitMix64), not a buffer seed, so the pair lists built from the same chunk
/// ([`chunk_routing`]) agree with the selections whatever buffer they fill.
fn chunk_token_seed(t: usize) -> u64 {
    ingot_abi::hash::splitmix64(&mut (t as u64))
}

/// The `ntok` `ExpertSelection`s of a prefill chunk: token `t`'s is
/// [`expert_selection`]`(n_expert, n_used, …)` from its own seed, so each token's `n_used`
/// experts are spread over the stacked tensor and the tokens start at different experts (a
/// 512-token chunk of V2-Lite: 3072 pairs over the 64 experts, about 48 each).
pub fn chunk_selections(ntok: usize, n_expert: usize, n_used: usize) -> Result<Vec<u8>> {
    check_elements("chunk selections", ntok)?;
    let mut out = Vec::with_capacity(ntok * size_of::<ExpertSelection>());
    for t in 0..ntok {
        out.extend(expert_selection(n_expert, n_used, chunk_token_seed(t))?);
    }
    Ok(out)
}

/// The expert-sorted pair list of [`chunk_selections`], as `moe_pairs` writes it (a stable
/// counting sort over choice `j = t·n_used + s`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkRouting {
    /// `n_expert + 1` offsets into the sorted pairs.
    pub expert_start: Vec<u32>,
    /// The token of each sorted pair.
    pub pair_token: Vec<u32>,
    /// Where choice `j` landed among the sorted pairs.
    pub pair_of: Vec<u32>,
}

impl ChunkRouting {
    /// Pairs routed to each expert.
    pub fn counts(&self) -> Vec<usize> {
        self.expert_start
            .windows(2)
            .map(|w| (w[1] - w[0]) as usize)
            .collect()
    }
}

/// The routing of [`chunk_selections`]`(ntok, n_expert, n_used)`.
pub fn chunk_routing(ntok: usize, n_expert: usize, n_used: usize) -> Result<ChunkRouting> {
    let sel_bytes = chunk_selections(ntok, n_expert, n_used)?;
    let sels: Vec<ExpertSelection> = sel_bytes
        .chunks_exact(size_of::<ExpertSelection>())
        .map(bytemuck::pod_read_unaligned)
        .collect();
    let choices: Vec<usize> = sels
        .iter()
        .flat_map(|s| s.ids[..n_used].iter().map(|&e| e as usize))
        .collect();
    let mut expert_start = vec![0u32; n_expert + 1];
    for &e in &choices {
        expert_start[e + 1] += 1;
    }
    for e in 0..n_expert {
        expert_start[e + 1] += expert_start[e];
    }
    let mut next = expert_start.clone();
    let mut pair_token = vec![0u32; choices.len()];
    let mut pair_of = vec![0u32; choices.len()];
    for (j, &e) in choices.iter().enumerate() {
        let p = next[e];
        next[e] += 1;
        pair_token[p as usize] = (j / n_used) as u32;
        pair_of[j] = p;
    }
    Ok(ChunkRouting {
        expert_start,
        pair_token,
        pair_of,
    })
}

/// Little-endian bytes of `words`.
pub fn u32_bytes(words: &[u32]) -> Vec<u8> {
    bytemuck::cast_slice(words).to_vec()
}

/// The constant pair list of the per-head products of an `ntok`-token chunk (heads as the
/// experts, pairs sorted by head, as the prefill plan builds it): with `starts`, the
/// `n_head + 1` offsets `h·ntok`; else the `ntok·n_head` words `t·n_head + h` at pair
/// `p = h·ntok + t` (each pair's input row and output row).
pub fn head_pairs(ntok: usize, n_head: usize, starts: bool) -> Result<Vec<u8>> {
    check_elements("head pairs", ntok.saturating_mul(n_head))?;
    let words: Vec<u32> = if starts {
        (0..=n_head).map(|h| (h * ntok) as u32).collect()
    } else {
        (0..n_head)
            .flat_map(|h| (0..ntok).map(move |t| (t * n_head + h) as u32))
            .collect()
    };
    Ok(u32_bytes(&words))
}
