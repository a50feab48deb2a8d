//! `gemv2_rope_*` (the attention's two projections with `rope_kv_q8_1` as a last-block-done tail)
//! against the two launches it replaces, on every weight type: `gemv2_q8_1` (checked against the
//! CPU oracle in `gemv_types.rs`) then `rope_kv_q8_1` on its outputs (checked against the f64
//! reference of docs/decode-math.md in `attention.rs`). Random valid weight blocks, random non-zero
//! activations, poisoned outputs, and two launches in a row at different positions so the done
//! counter must have gone back to 0 after the first.

mod quant_blocks;
mod support;

use ingot_kernels::ops::attention::{
    gemv2_rope_q8_1, gemv_rope_q8_1, rope_kv_q8_1, AttnShape, CacheType, RopeKvBufs,
};
use ingot_kernels::ops::gemv::{gemv2_q8_1, gemv_q8_1, GemvType};
use ingot_kernels::Accelerator;
use quant_blocks::random_blocks;
use rand::rngs::StdRng;
use rand::Rng;
use support::attention::{rand_nonzero, rope_inputs, step_state, v2_lite_rope};
use support::gemv_type::ggml;
use support::{download, f32_bytes, poisoned, upload};

/// The fused launch at `pos` (twice: `pos` and `pos + 1`, one shared counter) against
/// `gemv2_q8_1` + `rope_kv_q8_1` on fresh buffers.
fn check_case<B: Accelerator>(b: &mut B, rng: &mut StdRng, ty: GemvType, s: &AttnShape) {
    let p = v2_lite_rope(s.n_rope);
    let (eps, mscale) = (1e-6f32, p.rope_mscale());
    let ncols = 512;
    let nb = ncols / ty.block_elems();
    let (n0, n1) = (s.n_head * (s.d_nope + s.n_rope), s.row());
    let w0 = upload(b, &random_blocks(rng, ggml(ty), n0 * nb));
    let w1 = upload(b, &random_blocks(rng, ggml(ty), n1 * nb));
    let (x, kv_norm, rope_freq) = rope_inputs(b, rng, s, ncols);
    let q8_bytes = s.n_head * s.d_nope / 32 * 36;
    let cache_bytes = s.cache_bytes().unwrap();
    let count = upload(b, &[0; 4]);
    // Both paths write into their own poisoned buffers; the cache accumulates both positions.
    let (q, kv, q_pe, q8, cache) = (
        poisoned(b, n0 * 4),
        poisoned(b, n1 * 4),
        poisoned(b, s.n_head * s.n_rope * 4),
        poisoned(b, q8_bytes),
        poisoned(b, cache_bytes),
    );
    let (rq, rkv, rq_pe, rq8, rcache) = (
        poisoned(b, n0 * 4),
        poisoned(b, n1 * 4),
        poisoned(b, s.n_head * s.n_rope * 4),
        poisoned(b, q8_bytes),
        poisoned(b, cache_bytes),
    );
    let pos0 = rng.random_range(0..s.ctx - 1);
    for pos in [pos0, pos0 + 1] {
        let state = upload(b, &step_state(pos as u32));
        let fused = RopeKvBufs {
            q: &q,
            kv: &kv,
            kv_norm: &kv_norm,
            rope_freq: &rope_freq,
            state: &state,
            q_pe: &q_pe,
            cache: &cache,
        };
        gemv2_rope_q8_1(
            b,
            ty,
            (&w0, &w1),
            &x,
            ncols,
            s,
            &fused,
            (&q8, &count),
            eps,
            mscale,
        )
        .expect("gemv2_rope");
        gemv2_q8_1(b, ty, (&w0, &w1), &x, (&rq, &rkv), (n0, n1), ncols).expect("gemv2");
        let reference = RopeKvBufs {
            q: &rq,
            kv: &rkv,
            q_pe: &rq_pe,
            cache: &rcache,
            ..fused
        };
        rope_kv_q8_1(b, s, &reference, &rq8, eps, mscale).expect("rope_kv_q8_1");

        let who = format!("{}: gemv2_rope {ty:?} {s:?} pos {pos}", b.name());
        assert_eq!(download(b, &count), [0; 4], "{who}: done counter not reset");
        // Same device code for the rows, the rotation and the quantization: same bits.
        for (what, got, want) in [
            ("q", &q, &rq),
            ("kv", &kv, &rkv),
            ("q_pe", &q_pe, &rq_pe),
            ("q_nope_q8", &q8, &rq8),
        ] {
            assert!(
                download(b, got) == download(b, want),
                "{who}: {what} differs"
            );
        }
        // The tail runs on as many threads as rope_kv_q8_1's block (`GEMV_BLOCK_WARPS` warps =
        // `ROPE_KV_THREADS`), so the latent norm's Σc² is summed in the same order: the cache
        // row is the same bits too.
        let (got, want) = (download(b, &cache), download(b, &rcache));
        if let Some(i) = (0..got.len())
            .step_by(2)
            .find(|&i| got[i..i + 2] != want[i..i + 2])
        {
            let row_bytes = s.row_bytes().unwrap();
            let (row, byte) = (i / row_bytes, i % row_bytes);
            panic!("{who}: cache row {row} byte {byte} differs from rope_kv_q8_1's");
        }
    }
    eprintln!("{}: gemv2_rope {ty:?} {s:?} ok", b.name());
}

fn all_types<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("gemv2_rope");
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
        ctx: 128,
        cache: CacheType::F16,
    };
    for ty in GemvType::ALL {
        check_case(b, &mut rng, ty, &small);
    }
    check_case(b, &mut rng, GemvType::Q4K, &lite);
    // The tail's q8_0 cache-row writer (the same code as rope_kv_q8_1's, on coherent loads).
    let q8 = AttnShape {
        cache: CacheType::Q8_0,
        ..lite
    };
    check_case(b, &mut rng, GemvType::Q4K, &q8);
}

#[test]
fn gemv2_rope_equals_gemv2_then_rope_kv() {
    on_every_backend!(all_types);
}

/// A low-rank query's `attn_q_b` with the rope as its tail (`gemv_rope_q8_1`: no second matrix,
/// `kv` written by an earlier launch) against the plain gemv then `rope_kv_q8_1`, at
/// GLM-4.7-Flash's head shape (20 heads of 192 + 64, a 512 + 64 latent) and a small one.
fn low_rank<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("gemv_rope");
    let glm = AttnShape {
        n_head: 20,
        d_nope: 192,
        kv_lora: 512,
        n_rope: 64,
        ctx: 64,
        cache: CacheType::F16,
    };
    let small = AttnShape {
        n_head: 4,
        d_nope: 32,
        kv_lora: 64,
        n_rope: 16,
        ctx: 64,
        cache: CacheType::Q8_0,
    };
    for (ty, s) in [
        (GemvType::Q4K, &glm),
        (GemvType::Q6K, &small),
        (GemvType::Q8_0, &small),
    ] {
        check_low_rank(b, &mut rng, ty, s);
    }
}

fn check_low_rank<B: Accelerator>(b: &mut B, rng: &mut StdRng, ty: GemvType, s: &AttnShape) {
    let p = v2_lite_rope(s.n_rope);
    let (eps, mscale) = (1e-6f32, p.rope_mscale());
    let ncols = 768;
    let n0 = s.n_head * (s.d_nope + s.n_rope);
    let w = upload(
        b,
        &random_blocks(rng, ggml(ty), n0 * ncols / ty.block_elems()),
    );
    let (x, kv_norm, rope_freq) = rope_inputs(b, rng, s, ncols);
    let kv_rows = rand_nonzero(rng, s.row(), -2.0, 2.0);
    let q8_bytes = s.n_head * s.d_nope / 32 * 36;
    let cache_bytes = s.cache_bytes().unwrap();
    let count = upload(b, &[0; 4]);
    let pos = rng.random_range(0..s.ctx);
    let state = upload(b, &step_state(pos as u32));
    // [fused, reference]: each its own poisoned outputs and its own copy of kv.
    let outs: Vec<_> = (0..2)
        .map(|_| {
            (
                poisoned(b, n0 * 4),
                upload(b, &f32_bytes(&kv_rows)),
                poisoned(b, s.n_head * s.n_rope * 4),
                poisoned(b, q8_bytes),
                poisoned(b, cache_bytes),
            )
        })
        .collect();
    let bufs = |k: usize| RopeKvBufs {
        q: &outs[k].0,
        kv: &outs[k].1,
        kv_norm: &kv_norm,
        rope_freq: &rope_freq,
        state: &state,
        q_pe: &outs[k].2,
        cache: &outs[k].4,
    };
    let tail = (&outs[0].3, &count);
    gemv_rope_q8_1(b, ty, &w, &x, ncols, s, &bufs(0), tail, eps, mscale).expect("gemv_rope");
    gemv_q8_1(b, ty, (&w, &x, &outs[1].0), n0, ncols).expect("gemv");
    rope_kv_q8_1(b, s, &bufs(1), &outs[1].3, eps, mscale).expect("rope_kv_q8_1");
    let who = format!("{}: gemv_rope {ty:?} {s:?} pos {pos}", b.name());
    assert_eq!(download(b, &count), [0; 4], "{who}: done counter not reset");
    let names = ["q", "kv", "q_pe", "q_nope_q8", "cache"];
    let [f, r] = [0, 1].map(|k| {
        let o = &outs[k];
        [&o.0, &o.1, &o.2, &o.3, &o.4].map(|buf| download(b, buf))
    });
    for (i, what) in names.iter().enumerate() {
        assert!(f[i] == r[i], "{who}: {what} differs");
    }
    assert!(
        f[3].chunks(36).all(|q| q.iter().any(|&v| v != 0xFF)),
        "{who}: q_nope_q8 not written"
    );
    eprintln!("{}: gemv_rope {ty:?} {s:?} ok", b.name());
}

#[test]
fn gemv_rope_equals_gemv_then_rope_kv() {
    on_every_backend!(low_rank);
}
