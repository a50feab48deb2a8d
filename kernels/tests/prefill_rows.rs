//! The per-token kernels of a prefill chunk against their decode twins: `rope_kv_q8_1_rows` must
//! write, for every token `t < n` of a chunk at `pos0`, the bytes `rope_kv_q8_1` writes for that
//! token alone at `pos0 + t` (its `q_pe` and q8_1 rows, and the same cache), and nothing for tokens
//! `t ≥ n` of the launch. The decode kernels' own tests check them against f64 references written
//! from docs/decode-math.md; here the rows are also checked against the f64 rotation and the CPU
//! q8_1 quantizer directly, so a bit-identical wrong answer cannot pass.
//!
//!
//! `moe_route_rows` must write, for every token `t < n`, the `ExpertSelection` bytes
//! `moe_route` writes for logits row `t`, under every routing flag (softmax and sigmoid, bias,
//! groups, normalization, scale), and nothing for tokens `t ≥ n`; `moe_route`'s own test
//! checks it against the oracle router.
//!
//! `moe_router_logits_rows` must give, for every live token, the f32 router logits in the
//! decode gemv's summation order bit for bit (a CPU model of that order), within a stated
//! bound of the f64 dot products, and write no logit of a token `t ≥ n`.
//!
//! Shapes are small (the simulator runs each token twice): a few tokens, V2-Lite's head shape
//! once per cache type.

mod support;

use ingot_abi::launch::ExpertSelection;
use ingot_kernels::ops::attention::RopeKvBufs;
use ingot_kernels::ops::attention::{rope_kv_q8_1, rope_kv_q8_1_rows, AttnShape, CacheType};
use ingot_kernels::ops::moe::{
    moe_route, moe_route_rows, moe_router_logits_rows, Gating, RouteParams,
};
use ingot_kernels::Accelerator;
use rand::rngs::StdRng;
use rand::Rng;
use std::mem::size_of;
use support::attention::{rand_nonzero, step_state, v2_lite_rope};
use support::{download, download_f32, f32_bytes, poisoned, upload};

/// One rope chunk: `ntok` rows in the buffers (the bucket), `n` of them live, from `pos0`.
#[derive(Clone, Copy, Debug)]
struct RopeCase {
    s: AttnShape,
    pos0: usize,
    ntok: usize,
    n: u32,
}

fn check_rope_rows<B: Accelerator>(b: &mut B, rng: &mut StdRng, c: RopeCase) {
    let RopeCase { s, pos0, ntok, n } = c;
    let p = v2_lite_rope(s.n_rope);
    let (eps, mscale) = (1e-6f32, p.rope_mscale());
    let q_len = s.n_head * (s.d_nope + s.n_rope);
    let pe_len = s.n_head * s.n_rope;
    let q8_len = s.n_head * s.d_nope / 32 * 36;
    let q = rand_nonzero(rng, ntok * q_len, -2.0, 2.0);
    let kv = rand_nonzero(rng, ntok * s.row(), -1.5, 1.5);
    let w = upload(b, &f32_bytes(&rand_nonzero(rng, s.kv_lora, 0.5, 1.5)));
    let freq: Vec<u8> = (0..s.n_rope / 2)
        .flat_map(|i| p.theta(1, i).to_le_bytes())
        .collect();
    let freq = upload(b, &freq);
    let cache_len = s.cache_bytes().unwrap();

    // The chunk launch.
    let (q_buf, kv_buf) = (upload(b, &f32_bytes(&q)), upload(b, &f32_bytes(&kv)));
    let state = upload(b, &step_state(pos0 as u32));
    let rows = upload(b, &n.to_le_bytes());
    let (q_pe, q8, cache) = (
        poisoned(b, ntok * pe_len * 4),
        poisoned(b, ntok * q8_len),
        poisoned(b, cache_len),
    );
    let bufs = RopeKvBufs {
        q: &q_buf,
        kv: &kv_buf,
        kv_norm: &w,
        rope_freq: &freq,
        state: &state,
        q_pe: &q_pe,
        cache: &cache,
    };
    rope_kv_q8_1_rows(b, &s, &bufs, &q8, &rows, ntok, eps, mscale).expect("rope_kv_q8_1_rows");
    let (got_pe, got_q8, got_cache) = (download(b, &q_pe), download(b, &q8), download(b, &cache));

    // The decode kernel once per live token, into one cache of its own.
    let live = (n as usize).min(ntok);
    let want_cache = poisoned(b, cache_len);
    for t in 0..live {
        let q_t = upload(b, &f32_bytes(&q[t * q_len..][..q_len]));
        let kv_t = upload(b, &f32_bytes(&kv[t * s.row()..][..s.row()]));
        let state_t = upload(b, &step_state((pos0 + t) as u32));
        let (pe_t, q8_t) = (poisoned(b, pe_len * 4), poisoned(b, q8_len));
        let bufs_t = RopeKvBufs {
            q: &q_t,
            kv: &kv_t,
            state: &state_t,
            q_pe: &pe_t,
            cache: &want_cache,
            ..bufs
        };
        rope_kv_q8_1(b, &s, &bufs_t, &q8_t, eps, mscale).expect("rope_kv_q8_1");
        assert!(
            got_pe[t * pe_len * 4..][..pe_len * 4] == download(b, &pe_t)[..],
            "{}: {c:?}: q_pe row {t} differs from rope_kv_q8_1 at pos {}",
            b.name(),
            pos0 + t
        );
        assert!(
            got_q8[t * q8_len..][..q8_len] == download(b, &q8_t)[..],
            "{}: {c:?}: q_nope_q8 row {t} differs from rope_kv_q8_1",
            b.name()
        );
    }
    // Rows written at `pos0 + t < ctx` only, with the decode kernel's bytes; 0xFF elsewhere.
    assert!(
        got_cache == download(b, &want_cache),
        "{}: {c:?}: cache differs from rope_kv_q8_1 token by token",
        b.name()
    );
    let row_bytes = s.row_bytes().unwrap();
    let written = got_cache
        .chunks_exact(row_bytes)
        .filter(|r| r.iter().any(|&x| x != 0xFF))
        .count();
    assert_eq!(
        written,
        live.min(s.ctx.saturating_sub(pos0)),
        "{c:?}: cache rows written"
    );
    // Tokens past `n` write nothing.
    assert!(
        got_pe[live * pe_len * 4..].iter().all(|&x| x == 0xFF)
            && got_q8[live * q8_len..].iter().all(|&x| x == 0xFF),
        "{}: {c:?}: a token past n = {n} wrote q_pe or q_nope_q8",
        b.name()
    );

    // The references of the decode test, on the chunk's rows. Rotation: within
    // 2e-6·(|a| + |b|) of the f64 rotation (cos/sin.approx on the f64-reduced angle, 2^-20.5
    // absolute, plus the f32 products; the bound `kernels/tests/attention.rs` justifies).
    // q8_1: the CPU quantizer bit for bit (the kernel uses its reduction order and rounding).
    let got_pe = download_f32(b, &q_pe, live * pe_len);
    for t in 0..live {
        for h in 0..s.n_head {
            let x = &q[t * q_len + h * (s.d_nope + s.n_rope) + s.d_nope..][..s.n_rope];
            for i in 0..s.n_rope / 2 {
                let (sn, cs) = p.theta(pos0 + t, i).sin_cos();
                let (a, bb, m) = (x[2 * i] as f64, x[2 * i + 1] as f64, mscale as f64);
                let want = [m * (a * cs - bb * sn), m * (a * sn + bb * cs)];
                let tol = 2e-6 * (a.abs() + bb.abs());
                for k in 0..2 {
                    let g = got_pe[t * pe_len + h * s.n_rope + 2 * i + k] as f64;
                    assert!(
                        (g - want[k]).abs() <= tol,
                        "{}: {c:?}: token {t} head {h} pair {i}: {g} vs {}",
                        b.name(),
                        want[k]
                    );
                }
            }
        }
        let nope: Vec<f32> = q[t * q_len..][..q_len]
            .chunks_exact(s.d_nope + s.n_rope)
            .flat_map(|head| head[..s.d_nope].iter().copied())
            .collect();
        let blocks = ingot_quant::quantize_q8_1(&nope);
        let want: &[u8] = bytemuck::cast_slice(&blocks);
        assert!(
            got_q8[t * q8_len..][..q8_len] == *want,
            "{}: {c:?}: token {t}: q_nope blocks differ from quantize_q8_1",
            b.name()
        );
    }
}

fn rope_rows_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("prefill_rows_rope");
    let small = AttnShape {
        n_head: 4,
        d_nope: 32,
        kv_lora: 64,
        n_rope: 16,
        ctx: 64,
        cache: CacheType::F16,
    };
    let lite = AttnShape {
        n_head: 16,
        d_nope: 128,
        kv_lora: 512,
        n_rope: 64,
        ctx: 32,
        cache: CacheType::F16,
    };
    // 12 pairs: the per-pair angle paths; kv_lora 72: a q8_0 block straddling latent and rope.
    let odd = AttnShape {
        n_head: 2,
        kv_lora: 72,
        n_rope: 24,
        ..small
    };
    let q8 = |s: AttnShape| AttnShape {
        cache: CacheType::Q8_0,
        ..s
    };
    let cases = [
        // One token; a full chunk; a bucket of 9 running 7; a chunk running past `ctx`;
        // a row count above the bucket (the bucket bounds it).
        RopeCase {
            s: small,
            pos0: 0,
            ntok: 1,
            n: 1,
        },
        RopeCase {
            s: small,
            pos0: 5,
            ntok: 3,
            n: 3,
        },
        RopeCase {
            s: q8(small),
            pos0: 17,
            ntok: 9,
            n: 7,
        },
        RopeCase {
            s: q8(odd),
            pos0: 60,
            ntok: 9,
            n: 9,
        },
        RopeCase {
            s: odd,
            pos0: 1,
            ntok: 3,
            n: 100,
        },
        RopeCase {
            s: lite,
            pos0: 29,
            ntok: 3,
            n: 3,
        },
        RopeCase {
            s: q8(lite),
            pos0: 7,
            ntok: 3,
            n: 2,
        },
    ];
    for c in cases {
        check_rope_rows(b, &mut rng, c);
    }
}

#[test]
fn rope_kv_q8_1_rows_matches_decode() {
    on_every_backend!(rope_rows_cases);
}

/// One routing chunk: `ntok` logits rows, `n` of them live.
fn check_route_rows<B: Accelerator>(
    b: &mut B,
    rng: &mut StdRng,
    p: &RouteParams,
    with_bias: bool,
    (ntok, n): (usize, u32),
) {
    let ne = p.n_expert;
    let sel_len = size_of::<ExpertSelection>();
    // Logits on a coarse grid (`k/16`, |k| ≤ 24): equal values within a row, so the tie rule
    // is exercised too.
    let logits: Vec<f32> = (0..ntok * ne)
        .map(|_| rng.random_range(-24i32..=24) as f32 / 16.0)
        .collect();
    let bias: Vec<f32> = (0..ne).map(|_| rng.random_range(-0.5f32..0.5)).collect();
    let lg = upload(b, &f32_bytes(&logits));
    let bias = with_bias.then(|| upload(b, &f32_bytes(&bias)));
    let rows = upload(b, &n.to_le_bytes());
    let sel = poisoned(b, ntok * sel_len);
    moe_route_rows(b, &lg, bias.as_ref(), (&rows, ntok), &sel, p).expect("moe_route_rows");
    let got = download(b, &sel);
    let live = (n as usize).min(ntok);
    for t in 0..live {
        let lg_t = upload(b, &f32_bytes(&logits[t * ne..][..ne]));
        let sel_t = poisoned(b, sel_len);
        moe_route(b, &lg_t, bias.as_ref(), &sel_t, p).expect("moe_route");
        assert!(
            got[t * sel_len..][..sel_len] == download(b, &sel_t)[..],
            "{}: {p:?} bias {with_bias}: sel[{t}] differs from moe_route",
            b.name()
        );
    }
    assert!(
        got[live * sel_len..].iter().all(|&x| x == 0xFF),
        "{}: {p:?}: a token past n = {n} wrote its selection",
        b.name()
    );
}

fn route_rows_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("prefill_rows_route");
    let v2_lite = RouteParams {
        gating: Gating::Softmax,
        n_expert: 64,
        n_used: 6,
        n_group: 1,
        n_group_used: 1,
        normalize: false,
        scale: 1.0,
    };
    let v3 = RouteParams {
        gating: Gating::Sigmoid,
        n_expert: 256,
        n_used: 8,
        n_group: 8,
        n_group_used: 4,
        normalize: true,
        scale: 2.5,
    };
    // Grouped softmax with an expert count not a multiple of 32; the 16-slot path at the limit.
    let groups = RouteParams {
        n_expert: 48,
        n_used: 5,
        n_group: 6,
        n_group_used: 2,
        normalize: true,
        ..v2_lite
    };
    let wide = RouteParams {
        gating: Gating::Sigmoid,
        n_expert: 512,
        n_used: 16,
        n_group: 32,
        n_group_used: 8,
        normalize: true,
        scale: 1.8,
    };
    for (p, with_bias, chunk) in [
        (v2_lite, false, (1, 1)),
        (v2_lite, false, (9, 7)),
        (v3, true, (3, 3)),
        (groups, false, (3, 100)),
        (wide, true, (3, 2)),
    ] {
        check_route_rows(b, &mut rng, &p, with_bias, chunk);
    }
}

#[test]
fn moe_route_rows_matches_decode() {
    on_every_backend!(route_rows_cases);
}

/// `W[e]·x` in the f32 gemv's order (`f32_row_dot`): lane `l` adds the float4 dots of chunks
/// `l, l + 32, …` (each `((a0·b0 + a1·b1) + a2·b2) + a3·b3`), then the xor butterfly (16, 8, 4,
/// 2, 1). Each step is one f32 `.rn` operation, so the kernel must match it bit for bit.
fn gemv_order(row: &[f32], x: &[f32]) -> f32 {
    let chunks = x.len() / 4;
    let mut v: Vec<f32> = (0..32)
        .map(|lane| {
            let mut acc = 0.0f32;
            let mut c = lane;
            while c < chunks {
                let (a, b) = (&row[4 * c..4 * c + 4], &x[4 * c..4 * c + 4]);
                acc += a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3];
                c += 32;
            }
            acc
        })
        .collect();
    for m in [16, 8, 4, 2, 1] {
        v = (0..32).map(|l| v[l] + v[l ^ m]).collect();
    }
    v[0]
}

fn check_logits_rows<B: Accelerator>(
    b: &mut B,
    rng: &mut StdRng,
    (n_expert, ncols): (usize, usize),
    (ntok, n): (usize, u32),
) {
    let w: Vec<f32> = (0..n_expert * ncols)
        .map(|_| rng.random_range(-0.05f32..0.05))
        .collect();
    let x: Vec<f32> = (0..ntok * ncols)
        .map(|_| rng.random_range(-3.0f32..3.0))
        .collect();
    let (wb, xb) = (upload(b, &f32_bytes(&w)), upload(b, &f32_bytes(&x)));
    let rows = upload(b, &n.to_le_bytes());
    let lg = poisoned(b, ntok * n_expert * 4);
    moe_router_logits_rows(b, (&wb, &xb, &lg), (&rows, ntok), ncols, n_expert)
        .expect("moe_router_logits_rows");
    let got = download(b, &lg);
    let live = (n as usize).min(ntok);
    let what = format!("{}: {n_expert}x{ncols}, ntok {ntok}, n {n}", b.name());
    for t in 0..live {
        let xt = &x[t * ncols..][..ncols];
        for e in 0..n_expert {
            let row = &w[e * ncols..][..ncols];
            let at = 4 * (t * n_expert + e);
            let g = f32::from_le_bytes(got[at..at + 4].try_into().unwrap());
            let want = gemv_order(row, xt);
            assert_eq!(
                g.to_bits(),
                want.to_bits(),
                "{what}: logit [{t}][{e}] {g} vs gemv order {want}"
            );
            // f64: each logit is a sum of ncols rounded products in a tree of depth at most
            // ceil(ncols/128) (a lane's chunks) + 4 (a chunk) + 5 (butterfly); each level
            // rounds by ≤ 2^-24 relative of a partial sum bounded by Σ|w·x|, so |err| ≤
            // depth·2^-24·Σ|w·x| (first order). The bound is used as is.
            let exact: f64 = row.iter().zip(xt).map(|(&a, &c)| a as f64 * c as f64).sum();
            let mag: f64 = row
                .iter()
                .zip(xt)
                .map(|(&a, &c)| (a as f64 * c as f64).abs())
                .sum();
            let depth = ncols.div_ceil(128) as f64 + 10.0;
            let tol = depth * f32::EPSILON as f64 / 2.0 * mag;
            assert!(
                (g as f64 - exact).abs() <= tol,
                "{what}: logit [{t}][{e}] {g} vs f64 {exact} (tol {tol})"
            );
        }
    }
    assert!(
        got[4 * live * n_expert..].iter().all(|&x| x == 0xFF),
        "{what}: a token past n wrote logits"
    );
}

fn logits_rows_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("prefill_rows_logits");
    // V2-Lite (64 × 2048) over one token and a tile and a bit; an odd shape (37 rows, 33
    // chunks: lane 0 takes two) with a bucket running fewer tokens, and with n past the bucket.
    for (shape, chunk) in [
        ((64, 2048), (1, 1)),
        ((64, 2048), (9, 9)),
        ((37, 132), (17, 11)),
        ((37, 132), (3, 100)),
    ] {
        check_logits_rows(b, &mut rng, shape, chunk);
    }
}

#[test]
fn moe_router_logits_rows_matches_gemv_order() {
    on_every_backend!(logits_rows_cases);
}

/// The launchers refuse buffers too short for `ntok` rows, a missing `rows` word, `ntok = 0`
/// and bad shapes, with errors (nothing launches).
#[test]
fn rows_launchers_reject_bad_args() {
    use ingot_kernels::KernelError;
    #[cfg(feature = "sim")]
    {
        let mut b = ingot_kernels::backend::sim::SimAccelerator::new().expect("sim");
        let b = &mut b;
        let too_small = |e: KernelError| matches!(e, KernelError::BufferTooSmall { .. });
        let bad_shape = |e: KernelError| matches!(e, KernelError::Shape { .. });

        // Router logits: 64 × 256, 3 tokens.
        let w = upload(b, &[0u8; 64 * 256 * 4]);
        let x = upload(b, &[0u8; 3 * 256 * 4]);
        let lg = upload(b, &[0u8; 3 * 64 * 4]);
        let rows = upload(b, &3u32.to_le_bytes());
        let short = upload(b, &[0u8; 2]);
        let run = |b: &mut _, x, lg, rows, ntok, ncols, ne| {
            moe_router_logits_rows(b, (&w, x, lg), (rows, ntok), ncols, ne).expect_err("accepted")
        };
        assert!(too_small(run(b, &x, &lg, &rows, 4, 256, 64)));
        assert!(too_small(run(b, &x, &lg, &short, 3, 256, 64)));
        assert!(too_small(run(b, &x, &short, &rows, 3, 256, 64)));
        assert!(bad_shape(run(b, &x, &lg, &rows, 3, 254, 64)));
        assert!(bad_shape(run(b, &x, &lg, &rows, 3, 256, 0)));
        assert!(bad_shape(run(b, &x, &lg, &rows, 0, 256, 64)));

        // Routing: 3 tokens of 64 logits.
        let p = RouteParams {
            gating: Gating::Softmax,
            n_expert: 64,
            n_used: 6,
            n_group: 1,
            n_group_used: 1,
            normalize: false,
            scale: 1.0,
        };
        let sel = upload(b, &vec![0u8; 3 * size_of::<ExpertSelection>()]);
        let e = moe_route_rows(b, &lg, None, (&rows, 4), &sel, &p).expect_err("accepted");
        assert!(too_small(e));
        let e = moe_route_rows(b, &lg, None, (&short, 3), &sel, &p).expect_err("accepted");
        assert!(too_small(e));
        let e = moe_route_rows(b, &lg, None, (&rows, 0), &sel, &p).expect_err("accepted");
        assert!(bad_shape(e));
        let bad = RouteParams { n_used: 0, ..p };
        let e = moe_route_rows(b, &lg, None, (&rows, 3), &sel, &bad).expect_err("accepted");
        assert!(bad_shape(e));

        // Rope: a small shape, 2 tokens' rows; the launch asks for 3.
        let s = AttnShape {
            n_head: 4,
            d_nope: 32,
            kv_lora: 64,
            n_rope: 16,
            ctx: 8,
            cache: CacheType::F16,
        };
        let q = upload(b, &vec![0u8; 2 * 4 * 48 * 4]);
        let kv = upload(b, &vec![0u8; 2 * 80 * 4]);
        let norm = upload(b, &[0u8; 64 * 4]);
        let freq = upload(b, &[0u8; 8 * 8]);
        let state = upload(b, &step_state(0));
        let q_pe = upload(b, &vec![0u8; 2 * 4 * 16 * 4]);
        let q8 = upload(b, &vec![0u8; 2 * 4 * 36]);
        let cache = upload(b, &vec![0u8; s.cache_bytes().unwrap()]);
        let bufs = RopeKvBufs {
            q: &q,
            kv: &kv,
            kv_norm: &norm,
            rope_freq: &freq,
            state: &state,
            q_pe: &q_pe,
            cache: &cache,
        };
        let e = rope_kv_q8_1_rows(b, &s, &bufs, &q8, &rows, 3, 1e-6, 1.0).expect_err("accepted");
        assert!(too_small(e));
        let e = rope_kv_q8_1_rows(b, &s, &bufs, &q8, &short, 2, 1e-6, 1.0).expect_err("accepted");
        assert!(too_small(e));
        let e = rope_kv_q8_1_rows(b, &s, &bufs, &q8, &rows, 0, 1e-6, 1.0).expect_err("accepted");
        assert!(bad_shape(e));
        let odd = AttnShape { d_nope: 16, ..s };
        let e = rope_kv_q8_1_rows(b, &odd, &bufs, &q8, &rows, 1, 1e-6, 1.0).expect_err("accepted");
        assert!(bad_shape(e));
        rope_kv_q8_1_rows(b, &s, &bufs, &q8, &rows, 2, 1e-6, 1.0).expect("2 rows fit");
    }
}
