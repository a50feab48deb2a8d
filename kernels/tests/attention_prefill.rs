//! `flash_latent_prefill` (the causal attention of a prefill chunk) against an f64 reference of
//! causal absorbed attention per (token, head) written from docs/decode-math.md#mla-attention
//! (steps 8-10), on fresh random non-zero inputs, the output poisoned with NaN and the cache NaN
//! past the chunk's last row (reading past it poisons the result). A one-token chunk is also
//! checked against one decode step (`flash_latent_mma` + `attn_merge`) at the same position.
//!
//! Tolerance, per (token, head), from the kernel's error model (the one `attention_mma.rs`
//! derives for the decode kernel, which feeds the tensor cores the same two f16 operands):
//! * the query enters as `f16(qs·q)`; its effect on the base-2 scores, `dq = max_t |s̃_t − s_t|`,
//!   is computed exactly here from the very f16 values;
//! * the scores accumulate in f32 over 18 `mma` steps per half plus the sum of the halves; each
//!   step rounds (the hardware may truncate) by at most 2^-22 of `A_t = Σ|q̃_i·k_ti|`:
//!   `dacc = 20·2^-22·max_t A_t`;
//! * a score error `δ` scales a weight by `2^δ` before normalization and the probabilities are
//!   rounded to f16 (relative 2^-11, ex2.approx adds 2^-22.5), so every normalized weight moves
//!   by a factor within `2^(±2δ)·(1 ± u)/(1 ∓ u)`; probabilities below 2^-14 carry up to 2^-25
//!   absolute each against `l ≥ 1`; a weight change `Σ|w' − w| = ρ` moves the output by at most
//!   `ρ·max_t |c_t − o|`;
//! * the output accumulates in f32 (an `mma` per 16 rows, a rescale per 32, one division):
//!   at most `(len/8 + 16)·2^-24·max|c|`.
//!
//! A mask that let a token see one row past its own moves that token's output by about
//! `|c − o| / len` (≈ 0.5/40 here), more than 20× the bound, so the causal mask is what the
//! two-token cases test: with the select removed they fail.

mod support;

use half::f16;
use ingot_kernels::ops::attention::{
    attn_merge, flash_latent_mma, flash_latent_prefill, part_ml_bytes, part_o_bytes, AttnShape,
    CacheType, FlashBufs, MergeBufs, PrefillBufs,
};
use ingot_kernels::{Accelerator, KernelError};
use rand::rngs::StdRng;
use support::attention::{cache_values, fill_random_rows, rand_nonzero, step_state, v2_lite_rope};
use support::{download_f32, f32_bytes, poisoned, upload};

/// f16 unit roundoff.
const U16: f64 = 1.0 / 2048.0;
/// f32 unit roundoff.
const U32: f64 = 1.0 / 16_777_216.0;

/// The logit scale of DeepSeek-V2-Lite (YaRN mscale² / √(d_nope + n_rope),
/// docs/decode-math.md#logit-scale).
fn kq_scale(s: &AttnShape) -> f32 {
    v2_lite_rope(s.n_rope).kq_scale(s.d_nope + s.n_rope)
}

/// Softmax-weighted average of the value rows from base-2 scores, in f64.
fn attend(scores: &[f64], cache: &[f64], row: usize, kv_lora: usize) -> Vec<f64> {
    let mx = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = scores.iter().map(|s| (s - mx).exp2()).collect();
    let z: f64 = e.iter().sum();
    let mut o = vec![0.0; kv_lora];
    for (t, et) in e.iter().enumerate() {
        for (d, od) in o.iter_mut().enumerate() {
            *od += et / z * cache[t * row + d];
        }
    }
    o
}

struct Case {
    n_head: usize,
    pos0: usize,
    ntok: usize,
    /// Query magnitude: large values make the softmax peaked, so the running max moves.
    q_amp: f32,
    cache: CacheType,
    /// Attention temperature: a factor per position, different for every token.
    temperature: bool,
}

struct Inputs {
    q_abs: Vec<f32>,
    q_pe: Vec<f32>,
    cache_bytes: Vec<u8>,
    /// The values the kernel reads from the cache rows `0..pos0 + ntok`.
    cache: Vec<f64>,
    temp: Vec<f32>,
}

fn inputs(rng: &mut StdRng, s: &AttnShape, c: &Case) -> Inputs {
    let len = c.pos0 + c.ntok;
    let mut cache_bytes = vec![0xFFu8; s.cache_bytes().unwrap()];
    fill_random_rows(rng, s, len, &mut cache_bytes);
    let cache = cache_values(s, &cache_bytes[..len * s.row_bytes().unwrap()]);
    let rows = c.ntok * s.n_head;
    let temp = (0..s.ctx)
        .map(|p| 1.0 + 0.3 * (p as f32 + 2.0).ln())
        .collect();
    Inputs {
        q_abs: rand_nonzero(rng, rows * s.kv_lora, -c.q_amp, c.q_amp),
        q_pe: rand_nonzero(rng, rows * s.n_rope, -c.q_amp, c.q_amp),
        cache_bytes,
        cache,
        temp,
    }
}

/// Runs the chunk at `pos0` and returns `o_lat` (`ntok × n_head × kv_lora`).
fn run_prefill<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    inp: &Inputs,
    (pos0, ntok, temperature): (usize, usize, bool),
) -> Vec<f32> {
    let q_abs = upload(b, &f32_bytes(&inp.q_abs));
    let q_pe = upload(b, &f32_bytes(&inp.q_pe));
    let cache = upload(b, &inp.cache_bytes);
    let state = upload(b, &step_state(pos0 as u32));
    let temp = upload(b, &f32_bytes(&inp.temp));
    let n = ntok * s.n_head * s.kv_lora;
    let o_lat = poisoned(b, n * 4);
    let bufs = PrefillBufs {
        q_abs: &q_abs,
        q_pe: &q_pe,
        cache: &cache,
        state: &state,
        o_lat: &o_lat,
        temperature: temperature.then_some(&temp),
    };
    flash_latent_prefill(b, s, &bufs, ntok, kq_scale(s)).expect("flash_latent_prefill");
    download_f32(b, &o_lat, n)
}

/// One decode step at `pos` (one segment) with token 0's query: `n_head × kv_lora`.
fn run_decode<B: Accelerator>(b: &mut B, s: &AttnShape, inp: &Inputs, pos: usize) -> Vec<f32> {
    let q_abs = upload(b, &f32_bytes(&inp.q_abs[..s.n_head * s.kv_lora]));
    let q_pe = upload(b, &f32_bytes(&inp.q_pe[..s.n_head * s.n_rope]));
    let cache = upload(b, &inp.cache_bytes);
    let state = upload(b, &step_state(pos as u32));
    let part_o = poisoned(b, part_o_bytes(s, 1).unwrap());
    let part_ml = poisoned(b, part_ml_bytes(s, 1).unwrap());
    let o_lat = poisoned(b, s.n_head * s.kv_lora * 4);
    let fb = FlashBufs {
        q_abs: &q_abs,
        q_pe: &q_pe,
        cache: &cache,
        state: &state,
        part_o: &part_o,
        part_ml: &part_ml,
        temperature: None,
        ahead: [None, None],
    };
    flash_latent_mma(b, s, &fb, 1, kq_scale(s)).expect("flash_latent_mma");
    let mb = MergeBufs {
        part_o: &part_o,
        part_ml: &part_ml,
        state: &state,
        o_lat: &o_lat,
    };
    attn_merge(b, s, &mb, 1).expect("attn_merge");
    download_f32(b, &o_lat, s.n_head * s.kv_lora)
}

fn shape(n_head: usize, ctx: usize, cache: CacheType) -> AttnShape {
    AttnShape {
        n_head,
        d_nope: 128,
        kv_lora: 512,
        n_rope: 64,
        ctx,
        cache,
    }
}

/// The case's shape: a cache of 5 rows more than the chunk needs (NaN past it).
fn case_shape(c: &Case) -> AttnShape {
    shape(c.n_head, c.pos0 + c.ntok + 5, c.cache)
}

/// Checks every (token, head) of the chunk against the f64 references; returns the largest
/// bound used (for the decode comparison).
fn check_case<B: Accelerator>(b: &mut B, c: &Case, inp: &Inputs) -> f64 {
    let s = case_shape(c);
    let (h_n, r, p, row) = (s.n_head, s.kv_lora, s.n_rope, s.row());
    let t = std::time::Instant::now();
    let got = run_prefill(b, &s, inp, (c.pos0, c.ntok, c.temperature));
    let elapsed = t.elapsed();
    let c_max = inp.cache.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let (mut worst_exact, mut worst_q16, mut worst_bound) = (0.0f64, 0.0f64, 0.0f64);
    for tok in 0..c.ntok {
        let pos = c.pos0 + tok;
        let len = pos + 1;
        let factor = if c.temperature { inp.temp[pos] } else { 1.0 };
        // The kernel's scale: f32 products, as `logit_scale` forms them.
        let qs32 = kq_scale(&s) * factor * std::f32::consts::LOG2_E;
        let qs64 = kq_scale(&s) as f64 * factor as f64 * std::f64::consts::LOG2_E;
        for h in 0..h_n {
            let qr = tok * h_n + h;
            let q: Vec<f32> = inp.q_abs[qr * r..][..r]
                .iter()
                .chain(&inp.q_pe[qr * p..][..p])
                .copied()
                .collect();
            let q16: Vec<f64> = q
                .iter()
                .map(|&v| f16::from_f32(v * qs32).to_f64())
                .collect();
            let (mut dq, mut a_max) = (0.0f64, 0.0f64);
            let (mut s_exact, mut s_q16) = (Vec::new(), Vec::new());
            for t in 0..len {
                let k = &inp.cache[t * row..][..row];
                let se = qs64 * q.iter().zip(k).map(|(&a, b)| a as f64 * b).sum::<f64>();
                let sq: f64 = q16.iter().zip(k).map(|(a, b)| a * b).sum();
                let a: f64 = q16.iter().zip(k).map(|(a, b)| (a * b).abs()).sum();
                dq = dq.max((se - sq).abs());
                a_max = a_max.max(a);
                s_exact.push(se);
                s_q16.push(sq);
            }
            let dacc = 20.0 * 4.0 * U32 * a_max;
            let o_exact = attend(&s_exact, &inp.cache, row, r);
            let o_q16 = attend(&s_q16, &inp.cache, row, r);
            let spread = |o: &[f64]| {
                (0..len)
                    .flat_map(|t| (0..r).map(move |d| (t, d)))
                    .fold(0.0f64, |m, (t, d)| {
                        m.max((inp.cache[t * row + d] - o[d]).abs())
                    })
            };
            let u = U16 + 2f64.powf(-22.5);
            let p16 = (1.0 + u) / (1.0 - u);
            let sub = len as f64 * 2f64.powi(-25);
            let acc = (len as f64 / 8.0 + 16.0) * U32 * c_max;
            let b_exact = (p16 * (2.0 * (dq + dacc)).exp2() - 1.0 + sub) * spread(&o_exact) + acc;
            let b_q16 = (p16 * (2.0 * dacc).exp2() - 1.0 + sub) * spread(&o_q16) + acc;
            let g = &got[qr * r..][..r];
            for d in 0..r {
                let gv = g[d] as f64;
                let (ee, eq) = ((gv - o_exact[d]).abs(), (gv - o_q16[d]).abs());
                let at = || {
                    format!(
                        "{}: token {tok} (pos {pos}) head {h} dim {d}, H={h_n} pos0 {} ntok {} \
                         q_amp {} {:?} temperature {}",
                        b.name(),
                        c.pos0,
                        c.ntok,
                        c.q_amp,
                        c.cache,
                        c.temperature
                    )
                };
                assert!(
                    ee <= b_exact,
                    "{}: {gv} vs exact {} (bound {b_exact:.2e})",
                    at(),
                    o_exact[d]
                );
                assert!(
                    eq <= b_q16,
                    "{}: {gv} vs f16-query {} (bound {b_q16:.2e})",
                    at(),
                    o_q16[d]
                );
                worst_exact = worst_exact.max(ee);
                worst_q16 = worst_q16.max(eq);
            }
            worst_bound = worst_bound.max(b_exact);
        }
    }
    eprintln!(
        "{}: H={h_n} pos0 {} ntok {} q_amp {} {:?} temperature {}: max|err| exact \
         {worst_exact:.2e}, f16-query {worst_q16:.2e} (largest bound {worst_bound:.2e}); {elapsed:.2?}",
        b.name(),
        c.pos0,
        c.ntok,
        c.q_amp,
        c.cache,
        c.temperature
    );
    worst_bound
}

fn prefill_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("flash_latent_prefill");
    let case = |pos0, ntok, q_amp, cache, temperature| Case {
        n_head: 16,
        pos0,
        ntok,
        q_amp,
        cache,
        temperature,
    };
    for c in [
        // A chunk from position 0, odd: the last block has one live token.
        case(0, 5, 1.0, CacheType::F16, false),
        // Earlier rows; the pair (31, 32) makes token 31 see a tile (row 32 alone) it must
        // mask entirely, and peaked scores move the running max.
        case(29, 4, 8.0, CacheType::F16, false),
        // Every token at its own temperature factor; three tiles deep.
        case(70, 3, 4.0, CacheType::F16, true),
        // The q8_0 cache.
        case(40, 3, 1.0, CacheType::Q8_0, false),
        // Two head groups (32 heads).
        Case {
            n_head: 32,
            ..case(12, 2, 1.0, CacheType::F16, false)
        },
        // A partial last group: GLM-4.7-Flash's 20 heads (16 + 4), an odd chunk, both caches;
        // 8 heads (one group of 8).
        Case {
            n_head: 20,
            ..case(29, 5, 4.0, CacheType::F16, false)
        },
        Case {
            n_head: 20,
            ..case(3, 4, 1.0, CacheType::Q8_0, true)
        },
        Case {
            n_head: 8,
            ..case(0, 3, 1.0, CacheType::F16, false)
        },
    ] {
        let inp = inputs(&mut rng, &case_shape(&c), &c);
        check_case(b, &c, &inp);
    }
}

/// A one-token chunk is one decode step: within the reference bound of each (their two bounds
/// added) of `flash_latent_mma` + `attn_merge` at the same position.
fn one_token_case<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("flash_latent_prefill one token");
    let c = Case {
        n_head: 16,
        pos0: 45,
        ntok: 1,
        q_amp: 4.0,
        cache: CacheType::F16,
        temperature: false,
    };
    let s = case_shape(&c);
    let inp = inputs(&mut rng, &s, &c);
    let bound = check_case(b, &c, &inp);
    let prefill = run_prefill(b, &s, &inp, (c.pos0, 1, false));
    let decode = run_decode(b, &s, &inp, c.pos0);
    // NaN-aware: the outputs start poisoned with NaN, so an unwritten value must fail here.
    // The decode step's one segment is stored as f16 before the merge: half an f16 ulp of the
    // value (2^-11 relative, 2^-25 absolute below 2^-14) on top of the two kernels' bounds;
    // the excess over that allowance is what must stay at or below zero.
    let excess = ingot_testdata::worst_f64(prefill.iter().zip(&decode).map(|(a, d)| {
        let allowed = 2.0 * bound + (*d as f64).abs() * 2f64.powi(-11) + 2f64.powi(-25);
        (*a as f64 - *d as f64).abs() - allowed
    }));
    let worst = ingot_testdata::worst_f64(
        prefill
            .iter()
            .zip(&decode)
            .map(|(a, d)| (*a as f64 - *d as f64).abs()),
    );
    assert!(
        excess <= 0.0,
        "{}: one-token prefill vs decode step: {worst:.2e}, {excess:.2e} past 2 x {bound:.2e} \
         plus the f16 partial",
        b.name(),
    );
    eprintln!(
        "{}: one-token prefill vs decode at pos {}: max|diff| {worst:.2e}",
        b.name(),
        c.pos0
    );
}

/// A chunk past the cache capacity (rows 38..41 of 40) writes NaN to every output, over a
/// finite (zero) cache and a zeroed output, so the NaN can only come from the overflow path.
fn overflow_case<B: Accelerator>(b: &mut B) {
    let s = shape(16, 40, CacheType::F16);
    let n = 3 * s.n_head * s.kv_lora;
    let q = upload(b, &f32_bytes(&vec![0.5; n]));
    let cache = upload(b, &vec![0u8; s.cache_bytes().unwrap()]);
    let state = upload(b, &step_state(38));
    let o_lat = upload(b, &vec![0u8; n * 4]);
    let bufs = PrefillBufs {
        q_abs: &q,
        q_pe: &q,
        cache: &cache,
        state: &state,
        o_lat: &o_lat,
        temperature: None,
    };
    flash_latent_prefill(b, &s, &bufs, 3, 0.1).expect("flash_latent_prefill");
    let got = download_f32(b, &o_lat, n);
    assert!(got.iter().all(|v| v.is_nan()), "{}", b.name());
}

/// Shapes and buffers the kernel does not take are typed errors before any launch.
fn bad_shapes_case<B: Accelerator>(b: &mut B) {
    let good = shape(16, 64, CacheType::F16);
    let big = b.alloc(1 << 18).unwrap();
    let tiny = b.alloc(16).unwrap();
    let pb = PrefillBufs {
        q_abs: &big,
        q_pe: &big,
        cache: &big,
        state: &big,
        o_lat: &big,
        temperature: None,
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
        AttnShape { ctx: 0, ..good },
    ] {
        let e = flash_latent_prefill(b, &bad, &pb, 2, 0.1).unwrap_err();
        assert!(matches!(e, KernelError::Shape { .. }), "{bad:?}: {e}");
    }
    for ntok in [0, 513] {
        let e = flash_latent_prefill(b, &good, &pb, ntok, 0.1).unwrap_err();
        assert!(matches!(e, KernelError::Shape { .. }), "ntok {ntok}: {e}");
    }
    let e = flash_latent_prefill(b, &good, &pb, 2, f32::NAN).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let small = PrefillBufs { o_lat: &tiny, ..pb };
    let e = flash_latent_prefill(b, &good, &small, 2, 0.1).unwrap_err();
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "o_lat", .. }),
        "{e}"
    );
}

/// Every case in one test: each backend is built once (the simulator's parse of the whole PTX
/// takes seconds and gigabytes), and the traffic check's own parse runs after that one is
/// dropped, not beside it.
fn all_cases<B: Accelerator>(b: &mut B) {
    prefill_cases(b);
    one_token_case(b);
    overflow_case(b);
    bad_shapes_case(b);
}

#[test]
fn flash_latent_prefill_matches_causal_reference_and_traffic() {
    on_every_backend!(all_cases);
    #[cfg(feature = "sim")]
    traffic();
}

/// ptx-sim's counters at V2-Lite shapes: each block reads its rows `0..=p_b` exactly once for
/// both of its tokens (so the chunk reads about half a row per token and visible row), each
/// token's query once and `StepState.pos` once per thread; it runs 8 warps × (36 + 32) `mma`
/// per 32-row tile, 17 per row of a whole tile, for two tokens.
#[cfg(feature = "sim")]
fn traffic() {
    use ingot_abi::launch::{flash_prefill_items, FLASH_LATENT_PREFILL, FLASH_TILE};
    use ptx_sim::{Arg, LaunchConfig, Sim};
    use support::attention::random_f16_bytes;
    let s = shape(16, 128, CacheType::F16);
    let (pos0, ntok) = (58u32, 6u32);
    let mut rng = support::rng("flash_latent_prefill traffic");
    // The process's lazily lowered module, as every other kernel test: parsing all 21 MB
    // eagerly took seconds and gigabytes for the one kernel launched here.
    let module = ingot_kernels::backend::sim::module().expect("parse PTX");
    let cache = random_f16_bytes(&mut rng, s.ctx * s.row());
    let rows = ntok as usize * s.n_head;
    let q_abs = f32_bytes(&rand_nonzero(&mut rng, rows * s.kv_lora, -1.0, 1.0));
    let q_pe = f32_bytes(&rand_nonzero(&mut rng, rows * s.n_rope, -1.0, 1.0));
    let mut sim = Sim::new();
    let mut up = |data: &[u8]| {
        let p = sim.alloc(data.len()).unwrap();
        sim.write(p, data).unwrap();
        Arg::Ptr(p)
    };
    let q = up(&q_abs);
    let args = [
        q,
        up(&q_pe),
        up(&cache),
        up(&step_state(pos0)),
        up(&vec![0xFF; rows * s.kv_lora * 4]),
        Arg::U32(s.n_head as u32),
        Arg::U32(s.kv_lora as u32),
        Arg::U32(s.n_rope as u32),
        Arg::U32(s.ctx as u32),
        Arg::U32(ntok),
        Arg::F32(kq_scale(&s)),
        // No temperature: `temp` is never read.
        q,
        Arg::U32(ingot_abi::launch::TEMPERATURE_NONE),
    ];
    let d = &FLASH_LATENT_PREFILL;
    let items = flash_prefill_items(s.n_head as u32, ntok);
    let cfg = LaunchConfig {
        grid: d.grid(items),
        block: d.block,
        shared_bytes: d.shared_bytes,
    };
    let st = sim.launch(module, d.name, cfg, &args).expect("launch");
    // Token pair k (ntok even) streams rows 0..=pos0 + 2k + 1.
    let lens: Vec<u64> = (0..ntok / 2).map(|k| (pos0 + 2 * k + 2) as u64).collect();
    let row_reads: u64 = lens.iter().sum();
    let row_bytes = s.row_bytes().unwrap() as u64;
    let query = (rows * s.row() * 4) as u64;
    let state = items as u64 * d.threads() as u64 * 4;
    assert_eq!(
        st.global_bytes_read,
        row_reads * row_bytes + query + state,
        "each block's rows once, each token's query once, the position once per thread"
    );
    let tiles: u64 = lens.iter().map(|l| l.div_ceil(FLASH_TILE as u64)).sum();
    assert_eq!(st.by_class.tensor, tiles * 8 * (36 + 32));
    let token_rows: u64 = (0..ntok as u64).map(|t| pos0 as u64 + t + 1).sum();
    eprintln!(
        "flash_latent_prefill pos0 {pos0} ntok {ntok}: {} blocks; cache {:.1} B per visible \
         (token, row) vs {row_bytes} B per row; {:.2} mma per streamed row (17 for whole tiles); \
         {} shared requests, {} bank conflicts",
        items,
        (row_reads * row_bytes) as f64 / token_rows as f64,
        st.by_class.tensor as f64 / row_reads as f64,
        st.shared_requests,
        st.shared_bank_conflicts,
    );
}
