//! `flash_latent_mma` (+ `attn_merge`) against f64 references written from docs/decode-math.md
//! (MLA attention steps 8-10, split-K attention, merging segments) and against the scalar
//! `flash_latent`, on fresh random non-zero inputs with poisoned outputs and NaN cache rows past
//! the position.
//!
//! The kernel feeds the tensor cores two f16 operands: the scaled query and the probabilities.
//! So every case is checked three ways:
//! * against the exact f64 attention of the f32 inputs, within a bound computed per head from
//!   the actual f16 rounding of the query (see [`Bounds`]);
//! * against the f64 attention of the very f16 query the kernel uses, where only the f16
//!   probabilities and f32 accumulation remain: a worst-case bound per element and a much
//!   tighter statistical bound on the RMS error per head, which is what catches a dropped,
//!   duplicated or misplaced row even at depth 4096;
//! * against the scalar kernel, within the first bound plus the scalar kernel's own tolerance.

mod support;

use half::f16;
use ingot_abi::launch::{FLASH_LATENT, FLASH_LATENT_MMA};
use ingot_kernels::ops::attention::{
    attn_merge, flash_latent, flash_latent_mma, part_ml_bytes, part_o_bytes, split_at, AttnShape,
    CacheType, FlashBufs, MergeBufs,
};
use ingot_kernels::{Accelerator, KernelError};
use rand::rngs::StdRng;
use rand::Rng;
use support::attention::{
    cache_values, f16_partial_bound, fill_random_rows, segment_means, step_state, v2_lite_rope,
};
use support::{download_f32, f32_bytes, poisoned, upload};

/// f16 unit roundoff: round-to-nearest of a normal value moves it by at most 2^-11 relative.
const U16: f64 = 1.0 / 2048.0;
/// f32 unit roundoff.
const U32: f64 = 1.0 / 16_777_216.0;

/// The logit scale of DeepSeek-V2-Lite (YaRN mscale² / √(d_nope + n_rope),
/// docs/decode-math.md#logit-scale).
fn kq_scale(s: &AttnShape) -> f32 {
    v2_lite_rope(s.n_rope).kq_scale(s.d_nope + s.n_rope)
}

/// Uniform in `(-amp, amp)`, never zero (a zero would hide a missing multiplication).
fn rand_vec(rng: &mut StdRng, n: usize, amp: f32) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let v: f32 = rng.random_range(-amp..amp);
            if v == 0.0 {
                amp / 2.0
            } else {
                v
            }
        })
        .collect()
}

/// Softmax-weighted average of the value rows for one head, from base-2 scores, in f64.
/// Returns the output and the weights.
fn attend(scores: &[f64], cache: &[f64], row: usize, kv_lora: usize) -> (Vec<f64>, Vec<f64>) {
    let mx = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = scores.iter().map(|s| (s - mx).exp2()).collect();
    let z: f64 = e.iter().sum();
    let w: Vec<f64> = e.iter().map(|x| x / z).collect();
    let mut o = vec![0.0; kv_lora];
    for (t, wt) in w.iter().enumerate() {
        for (d, od) in o.iter_mut().enumerate() {
            *od += wt * cache[t * row + d];
        }
    }
    (o, w)
}

/// Error bounds of one head, from the error model of the kernel:
/// * the query enters as `f16(qs·q)`; its effect on the base-2 scores, `dq = max_t |s̃_t − s_t|`,
///   is computed exactly here;
/// * the scores accumulate in f32 over 18 `mma` steps per half plus the sum of the halves; each
///   step rounds (the hardware may truncate) by at most 2^-22 of the row's `A_t = Σ|q̃_i·k_ti|`:
///   `dacc = 20·2^-22·max_t A_t`;
/// * a score error `δ` scales a weight by `2^δ` before normalization and the probabilities are
///   rounded to f16 (relative `U16`, ex2.approx adds 2^-22.5), so every normalized weight moves
///   by a factor within `2^(±2δ)·(1 ± u)/(1 ∓ u)`; probabilities below 2^-14 (f16 subnormal)
///   carry an absolute error up to 2^-25 each against a normalizer ≥ 1; a weight change
///   `Σ|w' − w| = ρ` moves the output by at most `ρ·max_t|c_t − o|`;
/// * the output accumulates in f32 (`mma` per 16 rows, a rescale per 32, the merge per
///   segment): at most `(len/8 + 16)·2^-24·max|c|`.
struct Bounds {
    /// Per element, against the exact f64 attention.
    exact: f64,
    /// Per element, against the f64 attention of the kernel's f16 query.
    q16: f64,
    /// RMS over the head's dims, against the f64 attention of the kernel's f16 query.
    q16_rms: f64,
}

fn bounds(dq: f64, dacc: f64, spread: f64, e_rms: f64, len: usize, c_max: f64) -> Bounds {
    let u = U16 + 2f64.powf(-22.5);
    let p16 = (1.0 + u) / (1.0 - u);
    let sub = len as f64 * 2f64.powi(-25);
    let acc = (len as f64 / 8.0 + 16.0) * U32 * c_max;
    Bounds {
        exact: (p16 * (2.0 * (dq + dacc)).exp2() - 1.0 + sub) * spread + acc,
        q16: (p16 * (2.0 * dacc).exp2() - 1.0 + sub) * spread + acc,
        // Statistical: the rounding errors ε_t of different rows are independent (random
        // cache rows), so the RMS over dims of Σ_t w_t·ε_t·(c_t − o) is
        // ≈ √(Σ_t w_t²·ε_t²·mean_d (c_td − o_d)²) ≤ U16·e_rms, and ≈ U16/√3·e_rms on average.
        // 2·U16·e_rms leaves 2-3.5× margin; 2^-18·max|c| covers the f32 accumulations and
        // ex2.approx (their relative error is ≤ 2^-20 at the depths tested). A dropped or
        // duplicated row at depth 4096 moves the RMS by ~|c − o|/4096 ≈ 1.4e-4, ≥ 15× this.
        q16_rms: 2.0 * U16 * e_rms + 2f64.powi(-18) * c_max,
    }
}

struct Case {
    n_head: usize,
    kv_lora: usize,
    n_rope: usize,
    depth: usize,
    max_segments: usize,
    /// Query magnitude: large values make the softmax peaked, so the running max moves.
    q_amp: f32,
    cache: CacheType,
}

/// Runs the step at `pos = depth` over cache rows `0..=pos` with `flash` and `attn_merge`.
fn run<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    bufs: (&B::Buf, &B::Buf, &B::Buf, &B::Buf),
    max_segments: usize,
    mma: bool,
) -> Vec<f32> {
    run_scaled(b, s, bufs, max_segments, mma, (kq_scale(s), None))
}

/// [`run`] with the logit scale `kq` and an optional attention-temperature table.
fn run_scaled<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    bufs: (&B::Buf, &B::Buf, &B::Buf, &B::Buf),
    max_segments: usize,
    mma: bool,
    scale: (f32, Option<&B::Buf>),
) -> Vec<f32> {
    run_ahead(b, s, bufs, (max_segments, mma), scale, [None, None])
}

/// [`run_scaled`] with weights handed ahead (`FlashBufs::ahead`).
fn run_ahead<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    bufs: (&B::Buf, &B::Buf, &B::Buf, &B::Buf),
    (max_segments, mma): (usize, bool),
    (kq, temperature): (f32, Option<&B::Buf>),
    ahead: [Option<&B::Buf>; 2],
) -> Vec<f32> {
    let (q_abs, q_pe, cache, state) = bufs;
    let part_o = poisoned(b, part_o_bytes(s, max_segments).unwrap());
    let part_ml = poisoned(b, part_ml_bytes(s, max_segments).unwrap());
    let o_lat = poisoned(b, s.n_head * s.kv_lora * 4);
    let fb = FlashBufs {
        q_abs,
        q_pe,
        cache,
        state,
        part_o: &part_o,
        part_ml: &part_ml,
        temperature,
        ahead,
    };
    if mma {
        flash_latent_mma(b, s, &fb, max_segments, kq).expect("flash_latent_mma");
    } else {
        flash_latent(b, s, &fb, max_segments, kq).expect("flash_latent");
    }
    let mb = MergeBufs {
        part_o: &part_o,
        part_ml: &part_ml,
        state,
        o_lat: &o_lat,
    };
    attn_merge(b, s, &mb, max_segments).expect("attn_merge");
    download_f32(b, &o_lat, s.n_head * s.kv_lora)
}

fn check_case<B: Accelerator>(b: &mut B, rng: &mut StdRng, c: &Case) {
    let s = AttnShape {
        n_head: c.n_head,
        d_nope: 128,
        kv_lora: c.kv_lora,
        n_rope: c.n_rope,
        ctx: c.depth + 3,
        cache: c.cache,
    };
    let (h_n, r, row) = (s.n_head, s.kv_lora, s.row());
    let pos = c.depth;
    let len = pos + 1;

    // Rows 0..=pos random non-zero f16 values (stored as the cache type holds them), NaN
    // (0xFFFF; a q8_0 row's scales too) from pos + 1 on: reading past the context poisons the
    // result. `cache`: the values the kernels read (a q8_0 block's f16(q·d)).
    let mut cache_bytes = vec![0xFFu8; s.cache_bytes().unwrap()];
    fill_random_rows(rng, &s, len, &mut cache_bytes);
    let cache = cache_values(&s, &cache_bytes[..len * s.row_bytes().unwrap()]);
    let q_abs = rand_vec(rng, h_n * r, c.q_amp);
    let q_pe = rand_vec(rng, h_n * s.n_rope, c.q_amp);

    let bufs = (
        upload(b, &f32_bytes(&q_abs)),
        upload(b, &f32_bytes(&q_pe)),
        upload(b, &cache_bytes),
        upload(b, &step_state(pos as u32)),
    );
    let refs = (&bufs.0, &bufs.1, &bufs.2, &bufs.3);
    let t = std::time::Instant::now();
    let got = run(b, &s, refs, c.max_segments, true);
    let t_mma = t.elapsed();
    let t = std::time::Instant::now();
    let scalar = run(b, &s, refs, c.max_segments, false);
    let t_scalar = t.elapsed();

    // The kernel's query: f32 product with the f32 scale, rounded to f16 (cvt.rn).
    let qs32 = kq_scale(&s) * std::f32::consts::LOG2_E;
    let qs64 = kq_scale(&s) as f64 * std::f64::consts::LOG2_E;
    let c_max = cache.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let (mut worst_exact, mut worst_q16, mut worst_rms, mut worst_scalar) = (0.0, 0.0, 0.0, 0.0);
    let mut rms_ratio = 0.0f64;
    for h in 0..h_n {
        let q: Vec<f32> = q_abs[h * r..][..r]
            .iter()
            .chain(&q_pe[h * s.n_rope..][..s.n_rope])
            .copied()
            .collect();
        let q16: Vec<f64> = q
            .iter()
            .map(|&v| f16::from_f32(v * qs32).to_f64())
            .collect();
        let (mut dq, mut a_max) = (0.0f64, 0.0f64);
        let mut s_exact = Vec::with_capacity(len);
        let mut s_q16 = Vec::with_capacity(len);
        for t in 0..len {
            let k = &cache[t * row..][..row];
            let se = qs64 * q.iter().zip(k).map(|(&a, b)| a as f64 * b).sum::<f64>();
            let sq: f64 = q16.iter().zip(k).map(|(a, b)| a * b).sum();
            let a: f64 = q16.iter().zip(k).map(|(a, b)| (a * b).abs()).sum();
            dq = dq.max((se - sq).abs());
            a_max = a_max.max(a);
            s_exact.push(se);
            s_q16.push(sq);
        }
        let dacc = 20.0 * 4.0 * U32 * a_max;
        let (o_exact, _) = attend(&s_exact, &cache, row, r);
        let (o_q16, w_q16) = attend(&s_q16, &cache, row, r);
        let spread = |o: &[f64]| {
            (0..len)
                .flat_map(|t| (0..r).map(move |d| (t, d)))
                .fold(0.0f64, |m, (t, d)| m.max((cache[t * row + d] - o[d]).abs()))
        };
        let e_rms = ((0..len)
            .map(|t| {
                w_q16[t].powi(2)
                    * (0..r)
                        .map(|d| (cache[t * row + d] - o_q16[d]).powi(2))
                        .sum::<f64>()
            })
            .sum::<f64>()
            / r as f64)
            .sqrt();
        let be = bounds(dq, dacc, spread(&o_exact), e_rms, len, c_max);
        let bq = bounds(dq, dacc, spread(&o_q16), e_rms, len, c_max);
        // Each segment's output is stored as f16 (support::attention::f16_partial_bound), in
        // both kernels; its RMS over dims is at most the RMS of the per-dim bound.
        let fb = f16_partial_bound(&segment_means(&w_q16, &cache, row, r, c.max_segments), r);
        let fb_rms = (fb.iter().map(|x| x * x).sum::<f64>() / r as f64).sqrt();
        let g = &got[h * r..][..r];
        let sc = &scalar[h * r..][..r];
        let mut sq_err = 0.0;
        for d in 0..r {
            let gv = g[d] as f64;
            let (ee, eq) = ((gv - o_exact[d]).abs(), (gv - o_q16[d]).abs());
            let es = (gv - sc[d] as f64).abs();
            let at = || {
                format!(
                    "{}: head {h} dim {d}, R={r} P={} depth {} segs {} q_amp {}",
                    b.name(),
                    s.n_rope,
                    c.depth,
                    c.max_segments,
                    c.q_amp
                )
            };
            assert!(
                ee <= be.exact + fb[d],
                "{}: {gv} vs exact {} (bound {:.2e})",
                at(),
                o_exact[d],
                be.exact + fb[d]
            );
            assert!(
                eq <= bq.q16 + fb[d],
                "{}: {gv} vs f16-query {} (bound {:.2e})",
                at(),
                o_q16[d],
                bq.q16 + fb[d]
            );
            // The scalar test's own tolerance is 2e-5 plus its f16 term against the exact
            // attention.
            assert!(
                es <= be.exact + 2e-5 + 2.0 * fb[d],
                "{}: {gv} vs scalar {} (bound {:.2e})",
                at(),
                sc[d],
                be.exact + 2e-5 + 2.0 * fb[d]
            );
            worst_exact = f64::max(worst_exact, ee);
            worst_q16 = f64::max(worst_q16, eq);
            worst_scalar = f64::max(worst_scalar, es);
            sq_err += eq * eq;
        }
        let rms = (sq_err / r as f64).sqrt();
        assert!(
            rms <= bq.q16_rms + fb_rms,
            "{}: head {h} RMS error {rms:.2e} vs f16-query reference exceeds {:.2e} \
             (depth {} segs {})",
            b.name(),
            bq.q16_rms + fb_rms,
            c.depth,
            c.max_segments
        );
        worst_rms = f64::max(worst_rms, rms);
        rms_ratio = rms_ratio.max(rms / (bq.q16_rms + fb_rms));
    }
    let split = split_at(pos as u32, c.max_segments as u32);
    eprintln!(
        "{}: H={h_n} R={r} P={} depth {} q_amp {} max_segments {} → {} segments over {} tiles: max|err| exact {worst_exact:.2e}, \
         f16-query {worst_q16:.2e} (RMS {worst_rms:.2e}, {:.0}% of bound), vs scalar {worst_scalar:.2e}; \
         mma {t_mma:.2?}, scalar {t_scalar:.2?}",
        b.name(),
        s.n_rope,
        c.depth,
        c.q_amp,
        c.max_segments,
        split.count,
        split.tiles,
        100.0 * rms_ratio,
    );
}

fn mma_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("flash_latent_mma");
    let cases = [
        (16, 512, 64, 1, 1, 1.0),
        (16, 512, 64, 17, 4, 8.0),
        (16, 512, 64, 300, 2, 1.0),
        (16, 512, 64, 300, 1, 8.0),
        (16, 512, 64, 4096, 16, 1.0),
        (16, 512, 64, 4096, 3, 8.0),
        (16, 128, 64, 300, 2, 1.0),
        (16, 128, 16, 17, 1, 8.0),
        (16, 64, 16, 40, 1, 1.0),
        (16, 256, 32, 600, 3, 4.0),
        // Head groups: Kimi-K2's 64 heads (4 groups), DeepSeek-V3's 128 (8 groups).
        (64, 512, 64, 100, 2, 1.0),
        (128, 512, 64, 100, 3, 8.0),
        // A partial last group: GLM-4.7-Flash's 20 heads (16 + 4), 4 heads, 17 (16 + 1).
        (20, 512, 64, 1, 1, 1.0),
        (20, 512, 64, 300, 3, 8.0),
        (4, 128, 64, 40, 2, 1.0),
        (17, 256, 32, 70, 1, 4.0),
        // 12 heads in a block of 16: rows 8-11 live, 12-15 skipped (softmax, stores).
        (12, 512, 64, 40, 1, 1.0),
    ];
    // The q8_0 cache (`flash_latent_mma_q8_0`, and `flash_latent_q8_0` beside it): V2-Lite's
    // rows, deep and split; 80-value rows whose last block is half padding; two head groups; a
    // partial one.
    let q8_0_cases = [
        (16, 512, 64, 300, 2, 1.0),
        (16, 512, 64, 4096, 16, 8.0),
        (16, 64, 16, 40, 1, 1.0),
        (32, 512, 64, 100, 3, 1.0),
        (20, 512, 64, 100, 2, 1.0),
    ];
    let all = (cases.into_iter().map(|c| (c, CacheType::F16)))
        .chain(q8_0_cases.into_iter().map(|c| (c, CacheType::Q8_0)));
    for ((n_head, kv_lora, n_rope, depth, max_segments, q_amp), cache) in all {
        let c = Case {
            n_head,
            kv_lora,
            n_rope,
            depth,
            max_segments,
            q_amp,
            cache,
        };
        check_case(b, &mut rng, &c);
    }
}

/// A segment's heads shared by spare blocks (`ingot_abi::launch::flash_block`) change no bit:
/// every head's rows of the score and value products are its own, so `max_segments` = `count`
/// (16 heads a block) and `count·2^j` (16 >> j heads a block, j = 1..4) give the same `o_lat`,
/// bit for bit, for both kernels and both cache types, at depths of one and several segments
/// (the split's `count` is the same for every `max_segments` tried: asserted).
fn head_split_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("flash head split");
    for (n_head, depth, cache) in [
        (16, 0, CacheType::F16),
        (16, 40, CacheType::F16),
        (16, 200, CacheType::F16),
        (20, 0, CacheType::F16),
        (20, 100, CacheType::F16),
        (32, 70, CacheType::F16),
        (16, 0, CacheType::Q8_0),
        (20, 200, CacheType::Q8_0),
    ] {
        let s = AttnShape {
            n_head,
            d_nope: 128,
            kv_lora: 512,
            n_rope: 64,
            ctx: depth + 3,
            cache,
        };
        let len = depth + 1;
        let mut cache_bytes = vec![0xFFu8; s.cache_bytes().unwrap()];
        fill_random_rows(&mut rng, &s, len, &mut cache_bytes);
        let bufs = (
            upload(b, &f32_bytes(&rand_vec(&mut rng, n_head * s.kv_lora, 4.0))),
            upload(b, &f32_bytes(&rand_vec(&mut rng, n_head * s.n_rope, 4.0))),
            upload(b, &cache_bytes),
            upload(b, &step_state(depth as u32)),
        );
        let refs = (&bufs.0, &bufs.1, &bufs.2, &bufs.3);
        // The most segments the context splits into: FLASH_MIN_SEGMENT_TILES tiles each.
        let count = split_at(depth as u32, 1 << 16).count as usize;
        for mma in [true, false] {
            let whole = run(b, &s, refs, count, mma);
            for j in 1..=4 {
                let ms = count << j;
                assert_eq!(split_at(depth as u32, ms as u32).count as usize, count);
                let heads = ingot_abi::launch::flash_block_heads(count as u32, ms as u32);
                assert_eq!(heads, 16 >> j, "max_segments {ms}");
                let shared = run(b, &s, refs, ms, mma);
                let same = whole
                    .iter()
                    .zip(&shared)
                    .all(|(a, b)| a.to_bits() == b.to_bits());
                assert!(
                    same,
                    "H={n_head} depth {depth} {cache:?} mma {mma}: {heads} heads a block \
                     (max_segments {ms}) differ from 16 (max_segments {count})"
                );
            }
        }
    }
}

#[test]
fn head_split_changes_no_bit() {
    on_every_backend!(head_split_cases);
}

/// Weights handed ahead change no bit: both kernels, both cache types, one segment and several,
/// two spans of random bytes (one shorter than a grid's reach, one longer) against none.
fn handoff_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("flash handoff");
    let a: Vec<u8> = (0..100_000).map(|_| rng.random()).collect();
    let w: Vec<u8> = (0..4 << 20).map(|_| rng.random()).collect();
    let (wa, wb) = (upload(b, &a), upload(b, &w));
    for (depth, cache, segs) in [
        (0, CacheType::F16, 4),
        (150, CacheType::F16, 3),
        (90, CacheType::Q8_0, 8),
    ] {
        let s = AttnShape {
            n_head: 16,
            d_nope: 128,
            kv_lora: 512,
            n_rope: 64,
            ctx: depth + 3,
            cache,
        };
        let mut cache_bytes = vec![0xFFu8; s.cache_bytes().unwrap()];
        fill_random_rows(&mut rng, &s, depth + 1, &mut cache_bytes);
        let bufs = (
            upload(b, &f32_bytes(&rand_vec(&mut rng, 16 * s.kv_lora, 4.0))),
            upload(b, &f32_bytes(&rand_vec(&mut rng, 16 * s.n_rope, 4.0))),
            upload(b, &cache_bytes),
            upload(b, &step_state(depth as u32)),
        );
        let refs = (&bufs.0, &bufs.1, &bufs.2, &bufs.3);
        for mma in [true, false] {
            let scale = (kq_scale(&s), None);
            let plain = run_ahead(b, &s, refs, (segs, mma), scale, [None, None]);
            let ahead = run_ahead(b, &s, refs, (segs, mma), scale, [Some(&wa), Some(&wb)]);
            assert!(
                plain
                    .iter()
                    .zip(&ahead)
                    .all(|(x, y)| x.to_bits() == y.to_bits()),
                "depth {depth} {cache:?} mma {mma}: weights handed ahead changed the output"
            );
        }
    }
}

#[test]
fn weights_handed_ahead_change_no_bit() {
    on_every_backend!(handoff_cases);
}

/// The weights handed ahead are asked for line by line, each line of a span once over the grid
/// (`FLASH_HANDOFF_LINES_PER_THREAD` lines per thread and span at most: a longer span is cut),
/// and a span that runs past its buffer faults in the simulator: the plan-level sim runs check
/// every prefetch address against the launch's buffers.
#[cfg(feature = "sim")]
#[test]
fn weights_handed_ahead_are_prefetched_once_each() {
    use ingot_abi::launch::{
        flash_items, FLASH_HANDOFF_LINES_PER_THREAD, FLASH_LATENT_MMA, FLASH_MMA_THREADS,
    };
    use ptx_sim::{Arg, LaunchConfig, Sim, SimError};

    let module = ingot_kernels::backend::sim::module().expect("the committed PTX parses");
    let segs = 4;
    let grid = flash_items(16, segs);
    let reach = (grid * FLASH_MMA_THREADS * FLASH_HANDOFF_LINES_PER_THREAD * 128) as usize;
    let (n_a, n_b) = (100_000usize, reach + 4096);
    let launch = |b_bytes: usize, b_alloc: usize| {
        let mut sim = Sim::new();
        let q_abs = sim.alloc(16 * 512 * 4).unwrap();
        let q_pe = sim.alloc(16 * 64 * 4).unwrap();
        let cache = sim.alloc(8 * 576 * 2).unwrap();
        let state = sim.alloc(16).unwrap();
        sim.write(state, &step_state(2)).unwrap();
        let part_o = sim.alloc(segs as usize * 16 * 512 * 2).unwrap();
        let part_ml = sim.alloc(segs as usize * 16 * 8).unwrap();
        let wa = sim.alloc(n_a).unwrap();
        let wb = sim.alloc(b_alloc).unwrap();
        let args = [
            Arg::Ptr(q_abs),
            Arg::Ptr(q_pe),
            Arg::Ptr(cache),
            Arg::Ptr(state),
            Arg::Ptr(part_o),
            Arg::Ptr(part_ml),
            Arg::U32(16),
            Arg::U32(512),
            Arg::U32(64),
            Arg::U32(8),
            Arg::U32(segs),
            Arg::F32(0.1),
            Arg::Ptr(q_abs),
            Arg::U32(0),
            Arg::Ptr(wa),
            Arg::U32(n_a as u32),
            Arg::Ptr(wb),
            Arg::U32(b_bytes as u32),
        ];
        let cfg = LaunchConfig {
            grid: [grid, 1, 1],
            block: FLASH_LATENT_MMA.desc.block,
            shared_bytes: FLASH_LATENT_MMA.desc.shared_bytes,
        };
        sim.launch(module, FLASH_LATENT_MMA.desc.name, cfg, &args)
    };
    let stats = launch(n_b, n_b).expect("runs");
    assert_eq!(
        stats.prefetch_lanes as usize,
        n_a.div_ceil(128) + reach / 128
    );
    let stats = launch(1000, n_b).expect("runs");
    assert_eq!(
        stats.prefetch_lanes as usize,
        n_a.div_ceil(128) + 1000usize.div_ceil(128)
    );
    match launch(n_b, 1000) {
        Err(SimError::Fault(f)) => assert!(f.detail.contains("prefetch"), "{}", f.detail),
        other => panic!("a span past its buffer must fault, got {other:?}"),
    }
}

#[test]
fn flash_latent_mma_matches_references_and_scalar_kernel() {
    on_every_backend!(mma_cases);
}

#[cfg(feature = "sim")]
#[test]
fn mma_bad_shapes_are_typed_errors() {
    let mut b = ingot_kernels::backend::sim::SimAccelerator::new().expect("ptx-sim backend");
    let good = AttnShape {
        n_head: 16,
        d_nope: 128,
        kv_lora: 512,
        n_rope: 64,
        ctx: 64,
        cache: CacheType::F16,
    };
    let big = b.alloc(1 << 18).unwrap();
    let tiny = b.alloc(16).unwrap();
    let fb = FlashBufs {
        q_abs: &big,
        q_pe: &big,
        cache: &big,
        state: &big,
        part_o: &big,
        part_ml: &big,
        temperature: None,
        ahead: [None, None],
    };
    for bad in [
        AttnShape { n_head: 0, ..good },
        AttnShape {
            n_head: 144,
            ..good
        },
        AttnShape {
            kv_lora: 520,
            ..good
        },
        AttnShape { n_rope: 12, ..good },
        AttnShape { ctx: 0, ..good },
    ] {
        let e = flash_latent_mma(&mut b, &bad, &fb, 4, 0.1).unwrap_err();
        assert!(matches!(e, KernelError::Shape { .. }), "{bad:?}: {e}");
    }
    for segs in [0, ingot_kernels::ops::attention::MAX_SEGMENTS + 1] {
        let e = flash_latent_mma(&mut b, &good, &fb, segs, 0.1).unwrap_err();
        assert!(matches!(e, KernelError::Shape { .. }), "{segs}: {e}");
    }
    let e = flash_latent_mma(&mut b, &good, &fb, 4, f32::INFINITY).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let small = FlashBufs { cache: &tiny, ..fb };
    let e = flash_latent_mma(&mut b, &good, &small, 4, 0.1).unwrap_err();
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "cache", .. }),
        "{e}"
    );
}

/// A position at or past the cache capacity: the kernel reads no row, and the merge turns
/// `o_lat` into NaN.
fn mma_overflow_case<B: Accelerator>(b: &mut B) {
    let s = AttnShape {
        n_head: 16,
        d_nope: 128,
        kv_lora: 512,
        n_rope: 64,
        ctx: 40,
        cache: CacheType::F16,
    };
    let q = upload(b, &f32_bytes(&vec![0.5; s.n_head * s.kv_lora]));
    let cache = poisoned(b, s.cache_bytes().unwrap());
    let st = upload(b, &step_state(40));
    let got = run(b, &s, (&q, &q, &cache, &st), 2, true);
    assert!(got.iter().all(|v| v.is_nan()), "{}", b.name());
}

#[test]
fn mma_position_past_capacity_is_visible() {
    on_every_backend!(mma_overflow_case);
}

/// The attention temperature multiplies the logit scale by the table's factor at `pos` (f32,
/// the same product the host would form): both kernels must give bit for bit what they give
/// with the product passed as `kq_scale`. Every other entry of the table is NaN, so reading
/// the wrong position poisons the output.
fn temperature_case<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("flash temperature");
    let s = AttnShape {
        n_head: 16,
        d_nope: 128,
        kv_lora: 512,
        n_rope: 64,
        ctx: 64,
        cache: CacheType::F16,
    };
    let pos = 41;
    let mut cache = vec![0xFFu8; s.cache_bytes().unwrap()];
    for x in 0..(pos + 1) * s.row() {
        let v = f16::from_f32(rng.random_range(-1.0f32..1.0));
        cache[2 * x..2 * x + 2].copy_from_slice(&v.to_bits().to_le_bytes());
    }
    let bufs = (
        upload(
            b,
            &f32_bytes(&rand_vec(&mut rng, s.n_head * s.kv_lora, 4.0)),
        ),
        upload(b, &f32_bytes(&rand_vec(&mut rng, s.n_head * s.n_rope, 4.0))),
        upload(b, &cache),
        upload(b, &step_state(pos as u32)),
    );
    let refs = (&bufs.0, &bufs.1, &bufs.2, &bufs.3);
    let factor = 1.0 + 0.3 * 11f32.ln();
    let mut table = vec![f32::NAN; s.ctx];
    table[pos] = factor;
    let table = upload(b, &f32_bytes(&table));
    for mma in [true, false] {
        let with = run_scaled(b, &s, refs, 3, mma, (kq_scale(&s), Some(&table)));
        let folded = run_scaled(b, &s, refs, 3, mma, (kq_scale(&s) * factor, None));
        let plain = run(b, &s, refs, 3, mma);
        assert!(
            with.iter()
                .map(|v| v.to_bits())
                .eq(folded.iter().map(|v| v.to_bits())),
            "{}: mma {mma}: the temperature table differs from the folded scale",
            b.name()
        );
        assert!(
            with != plain,
            "{}: mma {mma}: the factor had no effect",
            b.name()
        );
    }
}

#[test]
fn temperature_scales_the_logits() {
    on_every_backend!(temperature_case);
}

/// ptx-sim's counters for both kernels at depth 4096, V2-Lite shapes: every cache row read
/// once, the query once per segment; tensor instructions per cache row.
#[cfg(feature = "sim")]
#[test]
fn flash_latent_mma_traffic_at_depth_4096() {
    use support::attention::{flash_on_sim, random_f16_bytes, FlashReads};
    let s = AttnShape {
        n_head: 16,
        d_nope: 128,
        kv_lora: 512,
        n_rope: 64,
        ctx: 4096,
        cache: CacheType::F16,
    };
    let pos = 4095u32;
    let len = pos as u64 + 1;
    let mut rng = support::rng("flash_latent_mma traffic");
    let module = ingot_kernels::backend::sim::module().expect("parse PTX");
    let cache = random_f16_bytes(&mut rng, s.ctx * s.row());
    let q_abs = f32_bytes(&rand_vec(&mut rng, s.n_head * s.kv_lora, 1.0));
    let q_pe = f32_bytes(&rand_vec(&mut rng, s.n_head * s.n_rope, 1.0));
    let inputs = (&q_abs[..], &q_pe[..], &cache[..]);
    for max_segments in [1u32, 16, 82] {
        let split = split_at(pos, max_segments);
        let mut warp_instr = [0u64; 2];
        for (k, desc) in [FLASH_LATENT_MMA, FLASH_LATENT].iter().enumerate() {
            let st = flash_on_sim(module, desc, &s, pos, max_segments, inputs, 0.1147);
            warp_instr[k] = st.warp_instructions;
            if k == 1 {
                break;
            }
            let reads = FlashReads::new(&s, pos, max_segments, desc);
            assert_eq!(
                st.global_bytes_read,
                reads.expected(),
                "each cache row once, the query once per segment, the position once per thread"
            );
            // 8 warps × (18 + 16) mma per 32-row tile; depth 4096 is whole tiles.
            assert_eq!(st.by_class.tensor * 32, len * 8 * 34);
            eprintln!(
                "flash_latent_mma depth 4096, max_segments {max_segments}: {} segments over {} tiles; \
                 read {} B vs {} B must-read = {:.3} (cache rows alone: {:.3}); \
                 {:.2} sectors per global request; {:.2} mma per cache row; \
                 {} shared requests, {} bank conflicts",
                split.count,
                split.tiles,
                st.global_bytes_read,
                reads.must(),
                st.global_bytes_read as f64 / reads.must() as f64,
                reads.cache_ratio(st.global_bytes_read),
                st.sectors_read as f64 / st.global_requests as f64,
                st.by_class.tensor as f64 / len as f64,
                st.shared_requests,
                st.shared_bank_conflicts,
            );
        }
        eprintln!(
            "  warp instructions per cache row: mma {:.1}, scalar {:.1}",
            warp_instr[0] as f64 / len as f64,
            warp_instr[1] as f64 / len as f64
        );
    }
}
