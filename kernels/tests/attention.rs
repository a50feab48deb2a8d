//! `rope_kv`, `flash_latent` and `attn_merge` against f64 references written from
//! docs/decode-math.md (MLA attention steps 4-10, logit scale, RoPE), on fresh random non-zero
//! inputs with poisoned outputs.
//!
//! Rope angles come from `ingot_model::RopeParams` (the project's oracle) and are checked against
//! the documented formulas; attention is recomputed in f64 from the very f16 cache contents the
//! kernels wrote or read.

mod support;

use half::f16;
use ingot_abi::launch::{FLASH_LATENT, FLASH_MIN_SEGMENT_TILES, FLASH_TILE};
use ingot_kernels::ops::attention::{
    attn_merge, attn_merge_q8_1, flash_latent, part_ml_bytes, part_o_bytes, rope_kv, rope_kv_q8_1,
    split_at, AttnShape, CacheType, FlashBufs, MergeBufs, RopeKvBufs,
};
use ingot_kernels::{Accelerator, KernelError};
use ingot_model::RopeParams;
use rand::rngs::StdRng;
use support::attention::{
    cache_values, check_partials, f16_partial_bound, f16s, fill_random_rows, rand_nonzero,
    segment_means, step_state, v2_lite_rope,
};
use support::{download, download_f32, f32_bytes, poisoned, upload};

/// The kernel's frequency table: `θ_i / pos`, taken from the oracle at pos 1 (θ is linear in pos).
fn freq_table(p: &RopeParams) -> Vec<u8> {
    (0..p.n_rot / 2)
        .flat_map(|i| p.theta(1, i).to_le_bytes())
        .collect()
}

/// Largest |a − b| / (1 + |b|)-free absolute error, for the report.
fn max_abs_err(got: &[f32], want: &[f64]) -> f64 {
    ingot_testdata::worst_f64(got.iter().zip(want).map(|(&g, &w)| (g as f64 - w).abs()))
}

#[test]
fn yarn_table_matches_spec() {
    // docs/decode-math.md#rope for V2-Lite: correction dims 10 / 23, pairs 0..=10 unscaled,
    // 23..=31 divided by 40, base^(−2i/64) frequencies.
    let p = v2_lite_rope(64);
    assert_eq!(p.corr_dims(), [10.0, 23.0]);
    for i in 0..32 {
        let extrap = 10000f64.powf(-2.0 * i as f64 / 64.0);
        let want = match i {
            0..=10 => extrap,
            23.. => extrap / 40.0,
            _ => {
                let mix = 1.0 - (i as f64 - 10.0) / 13.0;
                extrap / 40.0 * (1.0 - mix) + extrap * mix
            }
        };
        let got = p.theta(1, i);
        // The oracle holds freq_scale = 1/40 as f32 (relative error ≤ 2^-24) and the
        // correction dims as f32 integers; everything else is f64.
        assert!(
            (got - want).abs() <= 1e-7 * want,
            "pair {i}: {got} vs {want}"
        );
        // Linearity in the position, which the kernel's `pos · rope_freq[i]` relies on.
        let far = p.theta(100_000, i);
        assert!((far - 100_000.0 * got).abs() <= 1e-10 * far);
    }
}

/// One `rope_kv` check at `pos`: rotated query parts, the cache row, and no other row touched.
fn check_rope_kv<B: Accelerator>(b: &mut B, rng: &mut StdRng, s: &AttnShape, pos: usize) {
    let p = v2_lite_rope(s.n_rope);
    let eps = 1e-6f32;
    let q = rand_nonzero(rng, s.n_head * (s.d_nope + s.n_rope), -2.0, 2.0);
    let kv = rand_nonzero(rng, s.row(), -1.5, 1.5);
    let w = rand_nonzero(rng, s.kv_lora, 0.5, 1.5);
    let cache_len = s.cache_bytes().unwrap();
    let bufs = (
        upload(b, &f32_bytes(&q)),
        upload(b, &f32_bytes(&kv)),
        upload(b, &f32_bytes(&w)),
        upload(b, &freq_table(&p)),
        upload(b, &step_state(pos as u32)),
        poisoned(b, s.n_head * s.n_rope * 4),
        poisoned(b, cache_len),
    );
    let rb = RopeKvBufs {
        q: &bufs.0,
        kv: &bufs.1,
        kv_norm: &bufs.2,
        rope_freq: &bufs.3,
        state: &bufs.4,
        q_pe: &bufs.5,
        cache: &bufs.6,
    };
    rope_kv(b, s, &rb, eps, p.rope_mscale()).expect("rope_kv");
    check_rope_kv_q8_1(b, s, &rb, &q, (eps, p.rope_mscale()));

    let rot = |x: &[f32], i: usize| -> (f64, f64) {
        let (sn, cs) = p.theta(pos, i).sin_cos();
        let m = p.rope_mscale() as f64;
        let (a, bb) = (x[2 * i] as f64, x[2 * i + 1] as f64);
        (m * (a * cs - bb * sn), m * (a * sn + bb * cs))
    };
    // Rotation error: cos/sin.approx on the f64-reduced f32 angle are within 2^-20.5 absolute
    // (PTX ISA), the f32 rounding of the reduced angle adds ≤ π·2^-24 rad, and the two f32
    // products/FMA ≤ 2 ulp: 2e-6·(|a| + |b|) covers all with margin.
    let got = download_f32(b, &bufs.5, s.n_head * s.n_rope);
    for h in 0..s.n_head {
        let x = &q[h * (s.d_nope + s.n_rope) + s.d_nope..][..s.n_rope];
        for i in 0..s.n_rope / 2 {
            let (wa, wb) = rot(x, i);
            let tol = 2e-6 * (x[2 * i].abs() + x[2 * i + 1].abs()) as f64;
            let (ga, gb) = (got[h * s.n_rope + 2 * i], got[h * s.n_rope + 2 * i + 1]);
            assert!(
                (ga as f64 - wa).abs() <= tol && (gb as f64 - wb).abs() <= tol,
                "{}: q_pe head {h} pair {i} at pos {pos}: ({ga}, {gb}) vs ({wa}, {wb})",
                b.name()
            );
        }
    }

    let cache = download(b, &bufs.6);
    let row_bytes = s.row_bytes().unwrap();
    for (r, chunk) in cache.chunks_exact(row_bytes).enumerate() {
        if r != pos {
            assert!(
                chunk.iter().all(|&x| x == 0xFF),
                "{}: rope_kv wrote cache row {r}, expected only {pos}",
                b.name()
            );
        }
    }
    let row = &cache[pos * row_bytes..][..row_bytes];
    let ms = kv[..s.kv_lora]
        .iter()
        .map(|&v| (v as f64).powi(2))
        .sum::<f64>()
        / s.kv_lora as f64;
    let scale = 1.0 / (ms + eps as f64).sqrt();
    let mut want: Vec<f64> = (0..s.kv_lora)
        .map(|j| kv[j] as f64 * scale * w[j] as f64)
        .collect();
    // The f32 value's error before the f16 rounding: ≤ 2e-6 relative for the normalized latent
    // dims; for the rotated dims the rotation bound above, which is absolute in the pair's inputs
    // (a rotated value near 0 from large inputs has no relative bound: seen on an H200, where
    // cos/sin.approx differ from the simulator's, at 1.3 f16 ulp with a relative-only tolerance).
    let mut f32_err: Vec<f64> = want.iter().map(|w| w.abs() * 2e-6).collect();
    for i in 0..s.n_rope / 2 {
        let x = &kv[s.kv_lora..];
        let (a, bb) = rot(x, i);
        want.extend([a, bb]);
        let e = 2e-6 * (x[2 * i].abs() + x[2 * i + 1].abs()) as f64;
        f32_err.extend([e, e]);
    }
    match s.cache {
        CacheType::F16 => check_f16_row(b.name(), pos, &f16s(row), &want, &f32_err),
        CacheType::Q8_0 => check_q8_0_row(b.name(), pos, row, &want, &f32_err),
    }
}

/// An f16 cache row against the f64 values `want`, whose f32 computation may be `f32_err` off.
fn check_f16_row(name: &str, pos: usize, row: &[f16], want: &[f64], f32_err: &[f64]) {
    // Stored as f16: the f32 value rounds to nearest, so the stored value is within half an f16
    // ulp of it (2^-11 relative, 2^-25 absolute below the normal range) plus that f32 error.
    for (j, (g, w)) in row.iter().zip(want).enumerate() {
        let tol = (w.abs() + f32_err[j]) * 2f64.powi(-11) + f32_err[j] + 2f64.powi(-25);
        assert!(
            (g.to_f64() - w).abs() <= tol,
            "{name}: cache[{pos}][{j}] = {g} vs {w}"
        );
    }
}

/// A q8_0 cache row (`CacheType::Q8_0`'s split layout: quants, then f16 scales) against the
/// f64 values `want`, whose f32 computation may be `f32_err` off.
fn check_q8_0_row(name: &str, pos: usize, row: &[u8], want: &[f64], f32_err: &[f64]) {
    let blocks = want.len().div_ceil(32);
    let (quants, scales) = row.split_at(blocks * 32);
    for b in 0..blocks {
        let idx = |l: usize| b * 32 + l;
        let x = |l: usize| want.get(idx(l)).copied().unwrap_or(0.0);
        let err = |l: usize| f32_err.get(idx(l)).copied().unwrap_or(0.0);
        let amax = (0..32).map(|l| x(l).abs()).fold(0.0, f64::max);
        let amax_err = (0..32).map(err).fold(0.0, f64::max);
        let d_want = amax / 127.0;
        let d = f16::from_le_bytes([scales[2 * b], scales[2 * b + 1]]).to_f64();
        // d = f16(amax_f32 / 127): the f32 amax is off by at most the values' f32 error, the
        // division by ≤ 1 ulp of f32, and the f16 rounding by half an ulp (2^-11 relative).
        let d_tol = (d_want + amax_err / 127.0) * (2f64.powi(-11) + 2f64.powi(-23))
            + amax_err / 127.0
            + 2f64.powi(-25);
        assert!(
            (d - d_want).abs() <= d_tol,
            "{name}: cache[{pos}] block {b}: d = {d} vs amax/127 = {d_want}"
        );
        for l in 0..32 {
            let q = quants[idx(l)] as i8 as f64;
            // q = roundf(x_f32 · (1/d_f32)): within half a step of x_f32 (plus the f32 rounding
            // of 1/d and the product, 2 ulp of x/d), and d_f32 is d to 2^-11; the values past
            // the row are exactly 0.
            let tol =
                0.5 * d + 127.0 * d * 2f64.powi(-11) + err(l) + 2.0 * 2f64.powi(-23) * x(l).abs();
            assert!(
                (q * d - x(l)).abs() <= tol,
                "{name}: cache[{pos}][{}] = {q}·{d} vs {}",
                idx(l),
                x(l)
            );
            if idx(l) >= want.len() {
                assert_eq!(q, 0.0, "{name}: cache[{pos}] quant {} past the row", idx(l));
            }
        }
    }
}

/// `rope_kv_q8_1` on the inputs `rb` holds (after `rope_kv` ran on them): `q_pe` and the cache
/// must equal `rope_kv`'s bytes (the same instructions), and the q8_1 blocks must equal the CPU
/// `quantize_q8_1` of each head's nope slice bit for bit (same reduction order and rounding).
fn check_rope_kv_q8_1<B: Accelerator>(
    b: &mut B,
    s: &AttnShape,
    rb: &RopeKvBufs<'_, B::Buf>,
    q: &[f32],
    (eps, mscale): (f32, f32),
) {
    let q_pe = poisoned(b, s.n_head * s.n_rope * 4);
    let cache = poisoned(b, s.cache_bytes().unwrap());
    let q8 = poisoned(b, s.n_head * s.d_nope / 32 * 36);
    let bufs = RopeKvBufs {
        q_pe: &q_pe,
        cache: &cache,
        ..*rb
    };
    rope_kv_q8_1(b, s, &bufs, &q8, eps, mscale).expect("rope_kv_q8_1");
    assert!(
        download(b, &q_pe) == download(b, rb.q_pe),
        "{}: rope_kv_q8_1 q_pe differs from rope_kv",
        b.name()
    );
    assert!(
        download(b, &cache) == download(b, rb.cache),
        "{}: rope_kv_q8_1 cache differs from rope_kv",
        b.name()
    );
    let nope: Vec<f32> = q
        .chunks_exact(s.d_nope + s.n_rope)
        .flat_map(|head| head[..s.d_nope].iter().copied())
        .collect();
    let want: Vec<u8> = bytemuck::cast_slice(&ingot_quant::quantize_q8_1(&nope)).to_vec();
    assert!(
        download(b, &q8) == want,
        "{}: rope_kv_q8_1 q_nope blocks differ from quantize_q8_1",
        b.name()
    );
}

fn rope_kv_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("rope_kv");
    let small = AttnShape {
        n_head: 4,
        d_nope: 32,
        kv_lora: 64,
        n_rope: 16,
        ctx: 163_840,
        cache: CacheType::F16,
    };
    let lite = AttnShape {
        n_head: 16,
        d_nope: 128,
        kv_lora: 512,
        n_rope: 64,
        ctx: 4096,
        cache: CacheType::F16,
    };
    for pos in [0, 1, 17, 300, 4095, 163_839] {
        check_rope_kv(b, &mut rng, &small, pos);
    }
    for pos in [0, 17, 300, 4095] {
        check_rope_kv(b, &mut rng, &lite, pos);
    }
    // 12 rope pairs do not divide the block: each query pair computes its own angle (the
    // kernels' second loop), not the thread's one; 32 heads make 384 pairs, more than a block
    // of threads, so a thread's second pair has another angle than its first.
    let odd_pairs = AttnShape {
        n_head: 32,
        n_rope: 24,
        ..small
    };
    for pos in [0, 17, 4095] {
        check_rope_kv(b, &mut rng, &odd_pairs, pos);
    }
    // The q8_0 cache: V2-Lite's 18 whole blocks, and 88-value rows (kv_lora 72 + 16 rope) whose
    // last block holds latent dims, rope dims and 8 values of padding (both with rope pairs that
    // divide a warp: angles by shuffle), and 12 pairs (each lane computes its angle).
    let straddling = AttnShape {
        kv_lora: 72,
        ..small
    };
    for (shape, positions) in [
        (lite, [0, 300, 4095]),
        (straddling, [0, 17, 163_839]),
        (odd_pairs, [0, 17, 4095]),
    ] {
        let q8 = AttnShape {
            cache: CacheType::Q8_0,
            ..shape
        };
        for pos in positions {
            check_rope_kv(b, &mut rng, &q8, pos);
        }
    }
}

#[test]
fn rope_kv_matches_reference() {
    on_every_backend!(rope_kv_cases);
}

/// One attention case: `depth` rows already cached, the step at `pos = depth` writes its own
/// row with `rope_kv`, then `flash_latent` + `attn_merge` attend over all `depth + 1` rows.
struct Case {
    shape: AttnShape,
    depth: usize,
    max_segments: usize,
    /// Query magnitude: large values make the softmax peaked, so the running max moves.
    q_amp: f32,
    /// The attention-temperature factor at `pos` (a table of `ctx` factors, NaN everywhere
    /// else, so a read of any other entry poisons the output); `None`: no table.
    temperature: Option<f32>,
}

fn check_attention<B: Accelerator>(b: &mut B, rng: &mut StdRng, c: &Case) {
    let s = &c.shape;
    let pos = c.depth;
    let p = v2_lite_rope(s.n_rope);
    let kq_scale = p.kq_scale(s.d_nope + s.n_rope);
    let row = s.row();

    // Cache: random rows before `pos`, NaN (0xFFFF; a q8_0 row's scales too) from `pos` on, so
    // a row read past the context poisons the result.
    let mut cache = vec![0xFFu8; s.cache_bytes().unwrap()];
    fill_random_rows(rng, s, pos, &mut cache);
    let q = rand_nonzero(rng, s.n_head * (s.d_nope + s.n_rope), -c.q_amp, c.q_amp);
    let kv = rand_nonzero(rng, row, -1.5, 1.5);
    let w = rand_nonzero(rng, s.kv_lora, 0.5, 1.5);
    let q_abs = rand_nonzero(rng, s.n_head * s.kv_lora, -c.q_amp, c.q_amp);

    let cache_buf = upload(b, &cache);
    let state_buf = upload(b, &step_state(pos as u32));
    let q_pe_buf = poisoned(b, s.n_head * s.n_rope * 4);
    let (q_buf, kv_buf, w_buf, freq_buf) = (
        upload(b, &f32_bytes(&q)),
        upload(b, &f32_bytes(&kv)),
        upload(b, &f32_bytes(&w)),
        upload(b, &freq_table(&p)),
    );
    let rb = RopeKvBufs {
        q: &q_buf,
        kv: &kv_buf,
        kv_norm: &w_buf,
        rope_freq: &freq_buf,
        state: &state_buf,
        q_pe: &q_pe_buf,
        cache: &cache_buf,
    };
    rope_kv(b, s, &rb, 1e-6, p.rope_mscale()).expect("rope_kv");

    let q_abs_buf = upload(b, &f32_bytes(&q_abs));
    let part_o = poisoned(b, part_o_bytes(s, c.max_segments).unwrap());
    let part_ml = poisoned(b, part_ml_bytes(s, c.max_segments).unwrap());
    let o_lat = poisoned(b, s.n_head * s.kv_lora * 4);
    let temp_buf = c.temperature.map(|f| {
        let mut table = vec![f32::NAN; s.ctx];
        table[pos] = f;
        upload(b, &f32_bytes(&table))
    });
    let logit_scale = kq_scale as f64 * c.temperature.map_or(1.0, f64::from);
    let fb = FlashBufs {
        q_abs: &q_abs_buf,
        q_pe: &q_pe_buf,
        cache: &cache_buf,
        state: &state_buf,
        part_o: &part_o,
        part_ml: &part_ml,
        temperature: temp_buf.as_ref(),
        ahead: [None, None],
    };
    let t = std::time::Instant::now();
    flash_latent(b, s, &fb, c.max_segments, kq_scale).expect("flash_latent");
    let mb = MergeBufs {
        part_o: &part_o,
        part_ml: &part_ml,
        state: &state_buf,
        o_lat: &o_lat,
    };
    attn_merge(b, s, &mb, c.max_segments).expect("attn_merge");
    let elapsed = t.elapsed();

    // f64 reference from the cache as the kernels saw it (row `pos` as rope_kv wrote it).
    let cache = cache_values(s, &download(b, &cache_buf));
    let q_pe = download_f32(b, &q_pe_buf, s.n_head * s.n_rope);
    let got = download_f32(b, &o_lat, s.n_head * s.kv_lora);
    let len = pos + 1;
    let split = split_at(pos as u32, c.max_segments as u32);
    let part = f16s(&download(b, &part_o));
    let ml = download_f32(b, &part_ml, split.count as usize * s.n_head * 2);
    let mut worst = 0.0f64;
    for h in 0..s.n_head {
        let qh: Vec<f64> = q_abs[h * s.kv_lora..][..s.kv_lora]
            .iter()
            .chain(&q_pe[h * s.n_rope..][..s.n_rope])
            .map(|&v| v as f64)
            .collect();
        let scores: Vec<f64> = (0..len)
            .map(|t| {
                let k = &cache[t * row..][..row];
                logit_scale * qh.iter().zip(k).map(|(a, b)| a * b).sum::<f64>()
            })
            .collect();
        let mx = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = scores.iter().map(|s| (s - mx).exp()).collect();
        let z: f64 = e.iter().sum();
        let want: Vec<f64> = (0..s.kv_lora)
            .map(|d| (0..len).map(|t| e[t] * cache[t * row + d]).sum::<f64>() / z)
            .collect();
        let means = segment_means(&e, &cache, row, s.kv_lora, c.max_segments);
        let f16_bound = f16_partial_bound(&means, s.kv_lora);
        let g = &got[h * s.kv_lora..][..s.kv_lora];
        // Error model (f32 everywhere, |c| ≤ 1.5): each score is a 576-term f32 FMA chain plus
        // a 16-lane tree, whose rounding error is ~√576·2^-24·√(Σ(q·k)²)·kq_scale ≈ 1e-6 at
        // q_amp 8, shifting each weight by that much relatively; ex2.approx adds 2^-22.5
        // relative; the weighted sums of ≤ 4097 rows add ~√4097·2^-24 ≈ 4e-6 relative.
        // Observed worst case is ~2e-6; 2e-5 leaves 10× margin. On top, each segment's output
        // is stored as f16 ([`f16_partial_bound`]). [`check_partials`] below keeps the
        // sensitivity to one dropped or duplicated row (~|c − o|/4096 ≈ 2e-4 at depth 4096, about
        // the f16 term): it checks each stored segment output, which one row moves by ~1e-2.
        for (d, (&gv, &wv)) in g.iter().zip(&want).enumerate() {
            let tol = 2e-5 + f16_bound[d];
            assert!(
                (gv as f64 - wv).abs() <= tol,
                "{}: head {h} dim {d} depth {} segs {}: {gv} vs {wv} (tol {tol:.2e})",
                b.name(),
                c.depth,
                c.max_segments
            );
        }
        let at = format!("{}: head {h} depth {}", b.name(), c.depth);
        check_partials(&at, (&part, &ml), (h, s.n_head), &means, g);
        worst = worst.max(max_abs_err(g, &want));
    }
    // The q8_1 variant runs the same f32 merge and the same quantization as
    // `quantize_q8_1`, so its blocks must equal the CPU quantization of `o_lat` bit for bit.
    let o_q8 = poisoned(b, s.n_head * s.kv_lora / 32 * 36);
    let mb_q8 = MergeBufs { o_lat: &o_q8, ..mb };
    attn_merge_q8_1(b, s, &mb_q8, c.max_segments).expect("attn_merge_q8_1");
    let want_q8: Vec<u8> = bytemuck::cast_slice(&ingot_quant::quantize_q8_1(&got)).to_vec();
    assert!(
        download(b, &o_q8) == want_q8,
        "{}: attn_merge_q8_1 differs from quantize_q8_1(attn_merge) at depth {}",
        b.name(),
        c.depth
    );
    eprintln!(
        "{}: H={} R={} P={} depth {} max_segments {} → {} segment(s) over {} tiles: max |err| {worst:.2e}, {:.2?}",
        b.name(),
        s.n_head,
        s.kv_lora,
        s.n_rope,
        c.depth,
        c.max_segments,
        split.count,
        split.tiles,
        elapsed
    );
}

fn attention_cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("attention");
    let shape = |n_head, kv_lora, n_rope, depth: usize| AttnShape {
        n_head,
        d_nope: 128,
        kv_lora,
        n_rope,
        ctx: depth + 3,
        cache: CacheType::F16,
    };
    let cases = [
        (4, 64, 16, 1, 1, 1.0),
        (4, 64, 16, 17, 3, 1.0),
        (4, 64, 16, 300, 1, 8.0),
        (4, 64, 16, 300, 3, 1.0),
        (16, 128, 64, 300, 2, 1.0),
        (16, 128, 16, 17, 1, 8.0),
        (16, 512, 64, 1, 4, 1.0),
        (16, 512, 64, 17, 4, 8.0),
        (16, 512, 64, 300, 2, 1.0),
        (16, 512, 64, 4096, 16, 1.0),
        (16, 512, 64, 4096, 3, 8.0),
        // Head groups: GLM-4.7-Flash's 20 heads (a partial second group), Kimi-K2's 64,
        // DeepSeek-V3's 128 (8 groups), each over more than one segment.
        (20, 512, 64, 300, 2, 1.0),
        (64, 128, 64, 100, 3, 8.0),
        (128, 512, 64, 100, 2, 1.0),
    ];
    for (h, r, p, depth, max_segments, q_amp) in cases {
        let c = Case {
            shape: shape(h, r, p, depth),
            depth,
            max_segments,
            q_amp,
            temperature: None,
        };
        check_attention(b, &mut rng, &c);
    }
    // The q8_0 cache (`flash_latent_q8_0`): the tiny models' 144-value rows (a last block of
    // 16 values and 16 of padding), V2-Lite's 576 over several segments, and 20 heads.
    for (h, r, p, depth, max_segments, q_amp) in [
        (4, 128, 16, 17, 3, 8.0),
        (4, 128, 16, 300, 2, 1.0),
        (16, 512, 64, 300, 3, 1.0),
        (20, 512, 64, 100, 2, 8.0),
    ] {
        let c = Case {
            shape: AttnShape {
                cache: CacheType::Q8_0,
                ..shape(h, r, p, depth)
            },
            depth,
            max_segments,
            q_amp,
            temperature: None,
        };
        check_attention(b, &mut rng, &c);
    }
    // Attention temperature: the factor at `pos` sharpens (> 1) or flattens (< 1) the softmax.
    for (h, r, p, depth, max_segments, q_amp, factor) in [
        (4, 64, 16, 17, 3, 8.0, 1.7f32),
        (20, 512, 64, 300, 2, 1.0, 0.6),
    ] {
        let c = Case {
            shape: shape(h, r, p, depth),
            depth,
            max_segments,
            q_amp,
            temperature: Some(factor),
        };
        check_attention(b, &mut rng, &c);
    }
}

#[test]
fn attention_matches_f64_reference() {
    on_every_backend!(attention_cases);
}

#[test]
fn segments_cover_the_context() {
    for max_segments in [1u32, 2, 3, 16, 82, 132, 1000] {
        for len in (1..5000).chain([163_840, 1 << 24]) {
            let s = ingot_abi::launch::flash_segments(len, max_segments);
            assert!(
                s.count >= 1 && s.count <= max_segments,
                "{len}/{max_segments}: {s:?}"
            );
            assert_eq!(s.tiles, len.div_ceil(FLASH_TILE));
            // Segments tile the rows in order, none empty, none past len, none longer than
            // the busiest block's share of a plain ⌈tiles / max_segments⌉ split (or, while
            // spare blocks share heads, FLASH_MIN_SEGMENT_TILES).
            let most = s.tiles.div_ceil(max_segments).max(FLASH_MIN_SEGMENT_TILES) * FLASH_TILE;
            let mut next = 0;
            for seg in 0..s.count {
                let (t0, t1) = s.rows(seg, len);
                assert!(
                    t0 == next && t1 > t0 && t1 - t0 <= most,
                    "{len}/{max_segments}: {s:?} {seg}"
                );
                next = t1;
            }
            assert_eq!(next, len, "{len}/{max_segments}: {s:?}");
            // Short contexts keep whole minimum segments (one merge input at depth 0).
            if 2 * s.tiles.div_ceil(FLASH_MIN_SEGMENT_TILES) <= max_segments {
                assert_eq!(s.count, s.tiles.div_ceil(FLASH_MIN_SEGMENT_TILES));
            } else {
                assert_eq!(s.count, s.tiles.min(max_segments), "{len}/{max_segments}");
            }
        }
    }
}

#[cfg(feature = "sim")]
#[test]
fn bad_shapes_are_typed_errors() {
    let mut b = ingot_kernels::backend::sim::SimAccelerator::new().expect("ptx-sim backend");
    let good = AttnShape {
        n_head: 16,
        d_nope: 128,
        kv_lora: 512,
        n_rope: 64,
        ctx: 64,
        cache: CacheType::F16,
    };
    let buf = |b: &mut ingot_kernels::backend::sim::SimAccelerator, n| b.alloc(n).unwrap();
    // Large enough for every buffer of `good` with 4 segments.
    let big = buf(&mut b, 1 << 18);
    let tiny = buf(&mut b, 16);
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
        AttnShape {
            n_head: 129,
            ..good
        },
        AttnShape { n_head: 0, ..good },
        AttnShape {
            kv_lora: 520,
            ..good
        },
        AttnShape {
            kv_lora: 60,
            ..good
        },
        AttnShape { n_rope: 12, ..good },
        AttnShape { n_rope: 72, ..good },
        AttnShape {
            d_nope: 127,
            ..good
        },
        AttnShape { ctx: 0, ..good },
    ] {
        let e = flash_latent(&mut b, &bad, &fb, 4, 0.1).unwrap_err();
        assert!(matches!(e, KernelError::Shape { .. }), "{bad:?}: {e}");
    }
    for segs in [0, ingot_kernels::ops::attention::MAX_SEGMENTS + 1] {
        let e = flash_latent(&mut b, &good, &fb, segs, 0.1).unwrap_err();
        assert!(matches!(e, KernelError::Shape { .. }), "{segs}: {e}");
    }
    let e = flash_latent(&mut b, &good, &fb, 4, f32::NAN).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let small = FlashBufs {
        part_o: &tiny,
        ..fb
    };
    let e = flash_latent(&mut b, &good, &small, 4, 0.1).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::BufferTooSmall {
                param: "part_o",
                ..
            }
        ),
        "{e}"
    );
    let rb = RopeKvBufs {
        q: &big,
        kv: &big,
        kv_norm: &big,
        rope_freq: &big,
        state: &big,
        q_pe: &big,
        cache: &tiny,
    };
    let e = rope_kv(&mut b, &good, &rb, 1e-6, 1.0).unwrap_err();
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "cache", .. }),
        "{e}"
    );
    let e = rope_kv(&mut b, &good, &RopeKvBufs { cache: &big, ..rb }, -1.0, 1.0).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let mb = MergeBufs {
        part_o: &big,
        part_ml: &big,
        state: &big,
        o_lat: &tiny,
    };
    let e = attn_merge(&mut b, &good, &mb, 4).unwrap_err();
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "o_lat", .. }),
        "{e}"
    );
}

/// A position at or past the cache capacity writes no row and turns `o_lat` into NaN.
fn overflow_case<B: Accelerator>(b: &mut B) {
    let s = AttnShape {
        n_head: 4,
        d_nope: 32,
        kv_lora: 64,
        n_rope: 16,
        ctx: 40,
        cache: CacheType::F16,
    };
    let p = v2_lite_rope(s.n_rope);
    let st = upload(b, &step_state(40));
    let ones = upload(b, &f32_bytes(&vec![0.5; s.n_head * s.kv_lora.max(64) * 2]));
    let freq = upload(b, &freq_table(&p));
    let cache = poisoned(b, s.cache_bytes().unwrap());
    let q_pe = poisoned(b, s.n_head * s.n_rope * 4);
    let rb = RopeKvBufs {
        q: &ones,
        kv: &ones,
        kv_norm: &ones,
        rope_freq: &freq,
        state: &st,
        q_pe: &q_pe,
        cache: &cache,
    };
    rope_kv(b, &s, &rb, 1e-6, 1.0).expect("rope_kv");
    assert!(
        download(b, &cache).iter().all(|&x| x == 0xFF),
        "{}",
        b.name()
    );
    let part_o = poisoned(b, part_o_bytes(&s, 2).unwrap());
    let part_ml = poisoned(b, part_ml_bytes(&s, 2).unwrap());
    let o_lat = upload(b, &vec![0u8; s.n_head * s.kv_lora * 4]);
    let fb = FlashBufs {
        q_abs: &ones,
        q_pe: &q_pe,
        cache: &cache,
        state: &st,
        part_o: &part_o,
        part_ml: &part_ml,
        temperature: None,
        ahead: [None, None],
    };
    flash_latent(b, &s, &fb, 2, 0.1).expect("flash_latent");
    let mb = MergeBufs {
        part_o: &part_o,
        part_ml: &part_ml,
        state: &st,
        o_lat: &o_lat,
    };
    attn_merge(b, &s, &mb, 2).expect("attn_merge");
    let out = download_f32(b, &o_lat, s.n_head * s.kv_lora);
    assert!(out.iter().all(|v| v.is_nan()), "{}", b.name());
}

#[test]
fn position_past_capacity_is_visible() {
    on_every_backend!(overflow_case);
}

/// Memory traffic of `flash_latent` at depth 4096, V2-Lite shapes, from ptx-sim's counters:
/// every cache row must be read exactly once; the query is re-read once per segment.
#[cfg(feature = "sim")]
#[test]
fn flash_latent_traffic_at_depth_4096() {
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
    let mut rng = support::rng("flash_latent traffic");
    let module = ingot_kernels::backend::sim::module().expect("parse PTX");
    for max_segments in [1u32, 16, 82] {
        let cache = random_f16_bytes(&mut rng, s.ctx * s.row());
        let q_abs = f32_bytes(&rand_nonzero(&mut rng, s.n_head * s.kv_lora, -1.0, 1.0));
        let q_pe = f32_bytes(&rand_nonzero(&mut rng, s.n_head * s.n_rope, -1.0, 1.0));
        let inputs = (&q_abs[..], &q_pe[..], &cache[..]);
        let st = flash_on_sim(module, &FLASH_LATENT, &s, pos, max_segments, inputs, 0.1147);
        let split = split_at(pos, max_segments);
        let reads = FlashReads::new(&s, pos, max_segments, &FLASH_LATENT);
        assert_eq!(
            st.global_bytes_read,
            reads.expected(),
            "each cache row once, the query once per segment, the position once per thread"
        );
        eprintln!(
            "flash_latent depth 4096, max_segments {max_segments}: {} segments over {} tiles; read {} B \
             vs {} B must-read = {:.3} (cache rows alone: {:.3}); {:.2} sectors per global request (loads and stores); \
             {} warp instr, {} shared bank conflicts",
            split.count,
            split.tiles,
            st.global_bytes_read,
            reads.must(),
            st.global_bytes_read as f64 / reads.must() as f64,
            reads.cache_ratio(st.global_bytes_read),
            st.sectors_read as f64 / st.global_requests as f64,
            st.warp_instructions,
            st.shared_bank_conflicts,
        );
    }
}
