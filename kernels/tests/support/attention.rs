//! Inputs and traffic expectations shared by the latent-attention tests.

use half::f16;
use ingot_abi::launch::KernelDesc;
use ingot_abi::step::StepState;
use ingot_kernels::ops::attention::{split_at, AttnShape, CacheType};
use ingot_model::{RopeParams, RopeScalingType};
use rand::rngs::StdRng;
use rand::Rng;

/// `n` random floats in `lo..hi`, none zero (a zero would hide a missing multiplication).
pub fn rand_nonzero(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n)
        .map(|_| match rng.random_range(lo..hi) {
            0.0 => hi,
            v => v,
        })
        .collect()
}

/// Little-endian f16 bytes as values.
pub fn f16s(bytes: &[u8]) -> Vec<f16> {
    bytes
        .chunks_exact(2)
        .map(|c| f16::from_bits(u16::from_le_bytes([c[0], c[1]])))
        .collect()
}

/// DeepSeek-V2-Lite's rope hyper-parameters (docs/deepseek2-model.md#gguf-keys) with `n_rot`
/// rotated dims.
pub fn v2_lite_rope(n_rot: usize) -> RopeParams {
    RopeParams {
        n_rot,
        freq_base: 10000.0,
        scaling: RopeScalingType::Yarn,
        freq_scale: 1.0 / 40.0,
        n_ctx_orig: 4096,
        beta_fast: 32.0,
        beta_slow: 1.0,
        attn_factor: 1.0,
        yarn_log_mul: 0.0707,
    }
}

/// The rope's inputs for `s` and an activation of `ncols`, uploaded: a random non-zero
/// activation as q8_1, the latent norm's weights, V2-Lite's rope frequencies at `s`'s width.
pub fn rope_inputs<B: ingot_kernels::Accelerator>(
    b: &mut B,
    rng: &mut StdRng,
    s: &AttnShape,
    ncols: usize,
) -> (B::Buf, B::Buf, B::Buf) {
    let p = v2_lite_rope(s.n_rope);
    let xf = rand_nonzero(rng, ncols, -2.0, 2.0);
    let x = super::upload(b, bytemuck::cast_slice(&ingot_quant::quantize_q8_1(&xf)));
    let kv_norm = super::upload(
        b,
        &super::f32_bytes(&rand_nonzero(rng, s.kv_lora, 0.5, 1.5)),
    );
    let freq: Vec<u8> = (0..s.n_rope / 2)
        .flat_map(|i| p.theta(1, i).to_le_bytes())
        .collect();
    (x, kv_norm, super::upload(b, &freq))
}

/// The bytes of a `StepState` at `pos` (token 11, nothing decoded yet).
pub fn step_state(pos: u32) -> Vec<u8> {
    bytemuck::bytes_of(&StepState {
        token: 11,
        pos,
        next_token: 0,
        steps_done: 0,
    })
    .to_vec()
}

/// `n` f16 values uniform in `(-1, 1)`, little-endian.
pub fn random_f16_bytes(rng: &mut StdRng, n: usize) -> Vec<u8> {
    (0..n)
        .flat_map(|_| {
            f16::from_f32(rng.random_range(-1.0f32..1.0))
                .to_bits()
                .to_le_bytes()
        })
        .collect()
}

/// Global bytes a flash-attention launch (`flash_latent` or `flash_latent_mma`) at `pos` must
/// read: every cache row once, the query once per segment, `StepState.pos` once per thread.
pub struct FlashReads {
    /// Cache rows `0..=pos`, f16.
    pub cache: u64,
    /// One head-major query (`q_abs` and `q_pe`, f32).
    pub query: u64,
    /// One 4-byte `pos` load per thread of every launched block.
    pub state: u64,
    /// Segments that hold work (each re-reads the query).
    pub segments: u64,
}

impl FlashReads {
    pub fn new(s: &AttnShape, pos: u32, max_segments: u32, desc: &KernelDesc) -> Self {
        FlashReads {
            cache: (pos as u64 + 1) * s.row() as u64 * 2,
            query: (s.n_head * (s.kv_lora + s.n_rope) * 4) as u64,
            state: max_segments as u64 * desc.threads() as u64 * 4,
            segments: split_at(pos, max_segments).count as u64,
        }
    }

    /// The bytes a launch reads when it meets the contract.
    pub fn expected(&self) -> u64 {
        self.cache + self.segments * self.query + self.state
    }

    /// The bytes no launch can avoid: the cache rows and the query once.
    pub fn must(&self) -> u64 {
        self.cache + self.query
    }

    /// Bytes read per must-read cache byte once the query re-reads and `pos` loads are taken
    /// off `read` (1.0 when every cache row is read exactly once).
    pub fn cache_ratio(&self, read: u64) -> f64 {
        (read - self.segments * self.query - self.state) as f64 / self.cache as f64
    }
}

/// Launches a flash-attention kernel (`flash_latent` or `flash_latent_mma`, same parameters) on
/// a fresh simulator with poisoned partial outputs and returns its counters.
#[cfg(feature = "sim")]
pub fn flash_on_sim(
    module: &ptx_sim::Module,
    desc: &KernelDesc,
    s: &AttnShape,
    pos: u32,
    max_segments: u32,
    (q_abs, q_pe, cache): (&[u8], &[u8], &[u8]),
    kq_scale: f32,
) -> ptx_sim::LaunchStats {
    use ingot_kernels::ops::attention::{part_ml_bytes, part_o_bytes};
    use ptx_sim::{Arg, LaunchConfig, Sim};
    let mut sim = Sim::new();
    let mut up = |data: &[u8]| {
        let p = sim.alloc(data.len()).unwrap();
        sim.write(p, data).unwrap();
        Arg::Ptr(p)
    };
    let q_abs = up(q_abs);
    let args = [
        q_abs,
        up(q_pe),
        up(cache),
        up(&step_state(pos)),
        up(&vec![0xFF; part_o_bytes(s, max_segments as usize).unwrap()]),
        up(&vec![
            0xFF;
            part_ml_bytes(s, max_segments as usize).unwrap()
        ]),
        Arg::U32(s.n_head as u32),
        Arg::U32(s.kv_lora as u32),
        Arg::U32(s.n_rope as u32),
        Arg::U32(s.ctx as u32),
        Arg::U32(max_segments),
        Arg::F32(kq_scale),
        // No temperature: `temp` is never read.
        q_abs,
        Arg::U32(ingot_abi::launch::TEMPERATURE_NONE),
        // No weights handed ahead: 0 bytes of the query.
        q_abs,
        Arg::U32(0),
        q_abs,
        Arg::U32(0),
    ];
    let cfg = LaunchConfig {
        grid: desc.grid(max_segments),
        block: desc.block,
        shared_bytes: desc.shared_bytes,
    };
    sim.launch(module, desc.name, cfg, &args)
        .unwrap_or_else(|e| panic!("{}: {e}", desc.name))
}

/// Every row's `s.row()` values as the flash kernels read them: the f16 values, or a q8_0
/// block's `f16(q·d)` (the kernels widen each tile to f16 before the math). A poisoned q8_0 row
/// (NaN scales) gives NaN values, like a poisoned f16 row.
pub fn cache_values(s: &AttnShape, cache: &[u8]) -> Vec<f64> {
    let row = s.row();
    match s.cache {
        CacheType::F16 => f16s(cache).iter().map(|v| v.to_f64()).collect(),
        CacheType::Q8_0 => {
            let blocks = row.div_ceil(32);
            cache
                .chunks_exact(s.row_bytes().unwrap())
                .flat_map(|r| {
                    (0..row).map(move |j| {
                        let d = f16::from_le_bytes([
                            r[blocks * 32 + 2 * (j / 32)],
                            r[blocks * 32 + 2 * (j / 32) + 1],
                        ]);
                        f16::from_f64(r[j] as i8 as f64 * d.to_f64()).to_f64()
                    })
                })
                .collect()
        }
    }
}

/// Rows `0..rows` of `cache` (all rows of `s`'s format) as random non-zero f16 values in
/// (-1, 1), stored as `s.cache` holds them.
pub fn fill_random_rows(rng: &mut StdRng, s: &AttnShape, rows: usize, cache: &mut [u8]) {
    let row_bytes = s.row_bytes().unwrap();
    for r in 0..rows {
        let values: Vec<f32> = (0..s.row())
            .map(|_| {
                let v = f16::from_f32(rng.random_range(-1.0f32..1.0));
                if v.to_f32() == 0.0 {
                    1.0
                } else {
                    v.to_f32()
                }
            })
            .collect();
        cache[r * row_bytes..][..row_bytes]
            .copy_from_slice(&ingot_model::cache_type::encode_row(s.cache, &values));
    }
}

/// A step's merge inputs for `flash_latent`'s split of position `pos` over `max_segments`: the
/// used segments' random normalized outputs `ō` (f16 bytes, as `part_o` holds them) and
/// `(m, l)` pairs, NaN in every slot past them.
#[allow(dead_code)]
pub fn merge_partials(
    rng: &mut StdRng,
    s: &AttnShape,
    pos: usize,
    max_segments: usize,
) -> (Vec<u8>, Vec<f32>) {
    let count = ingot_abi::launch::flash_segments(pos as u32 + 1, max_segments as u32).count;
    let count = count as usize;
    let per_o = s.n_head * s.kv_lora;
    let mut o = vec![0xFFu8; max_segments * per_o * 2];
    for (dst, v) in o
        .chunks_exact_mut(2)
        .zip(rand_nonzero(rng, count * per_o, -1.0, 1.0))
    {
        let h = match f16::from_f32(v) {
            z if z.to_f32() == 0.0 => f16::ONE,
            h => h,
        };
        dst.copy_from_slice(&h.to_le_bytes());
    }
    let mut ml = vec![f32::NAN; max_segments * s.n_head * 2];
    for pair in ml[..count * s.n_head * 2].chunks_exact_mut(2) {
        pair[0] = rng.random_range(-6.0f32..6.0);
        pair[1] = rng.random_range(0.25f32..4.0);
    }
    (o, ml)
}

/// Per segment of `flash_latent`'s split of rows `0..len` over `max_segments`, the normalized
/// output `ō_s[d] = Σ_{t∈s} w_t·c_t[d] / Σ_{t∈s} w_t` of the first `r` dims, in f64: what the
/// flash kernels round to f16 into `part_o`. `w`: the rows' softmax weights (any common scale).
#[allow(dead_code)]
pub fn segment_means(
    w: &[f64],
    cache: &[f64],
    row: usize,
    r: usize,
    max_segments: usize,
) -> Vec<Vec<f64>> {
    let len = w.len();
    let split = ingot_abi::launch::flash_segments(len as u32, max_segments as u32);
    (0..split.count as usize)
        .map(|s| {
            let (t0, t1) = split.rows(s as u32, len as u32);
            let rows = t0 as usize..t1 as usize;
            let z: f64 = w[rows.clone()].iter().sum();
            (0..r)
                .map(|d| rows.clone().map(|t| w[t] * cache[t * row + d]).sum::<f64>() / z)
                .collect()
        })
        .collect()
}

/// Per latent dim, the most the f16 rounding of the per-segment outputs in `part_o` can move the
/// merged output: the merge is a convex combination of the rounded `ō_s`, each within half an
/// f16 ulp (2^-11 relative, 2^-25 absolute below 2^-14) of the f32 value the kernel held, so the
/// merged error is at most `max_s 2^-11·|ō_s[d]| + 2^-25`. It scales with the segment outputs,
/// not the cache values (at depth a segment's mean of random rows is small).
#[allow(dead_code)]
pub fn f16_partial_bound(means: &[Vec<f64>], r: usize) -> Vec<f64> {
    (0..r)
        .map(|d| {
            means
                .iter()
                .fold(0.0f64, |a, m| a.max(m[d].abs() * 2f64.powi(-11)))
                + 2f64.powi(-25)
        })
        .collect()
}

/// What the flash kernels stored for head `h` of `n_head` against the f64 per-segment outputs
/// `means` ([`segment_means`]), and the merged output `got` (the head's `kv_lora` values) against
/// the merge of those stored partials in f64. Each stored `ō_s` may differ from its mean by the
/// f32 error of the attention tests (2e-5) plus half an f16 ulp; one dropped row moves a 64-row
/// segment's output by ~|c − ō|/64 ≈ 1e-2, far past that. The merge's f32 sums of ≤ 66 weighted
/// segments and ex2.approx (2^-22.5 relative) on |ō| ≤ 1.5 stay below 1e-6; 1e-5 is allowed.
#[allow(dead_code)]
pub fn check_partials(
    at: &str,
    (part, ml): (&[f16], &[f32]),
    (h, n_head): (usize, usize),
    means: &[Vec<f64>],
    got: &[f32],
) {
    let kv_lora = got.len();
    let stored = |seg: usize, d: usize| part[(seg * n_head + h) * kv_lora + d].to_f64();
    for (seg, mean) in means.iter().enumerate() {
        for (d, &mv) in mean.iter().enumerate() {
            let tol = 2e-5 + mv.abs() * 2f64.powi(-11) + 2f64.powi(-25);
            assert!(
                (stored(seg, d) - mv).abs() <= tol,
                "{at}: segment {seg} dim {d}: stored {} vs {mv}",
                stored(seg, d)
            );
        }
    }
    let m_of = |seg: usize| ml[(seg * n_head + h) * 2] as f64;
    let l_of = |seg: usize| ml[(seg * n_head + h) * 2 + 1] as f64;
    let top = (0..means.len()).map(m_of).fold(f64::NEG_INFINITY, f64::max);
    let wts: Vec<f64> = (0..means.len())
        .map(|k| (m_of(k) - top).exp2() * l_of(k))
        .collect();
    let den: f64 = wts.iter().sum();
    for (d, &gv) in got.iter().enumerate() {
        let merged = (0..means.len()).map(|k| wts[k] * stored(k, d)).sum::<f64>() / den;
        assert!(
            (gv as f64 - merged).abs() <= 1e-5,
            "{at}: dim {d}: merge {gv} vs {merged} from the stored partials"
        );
    }
}
