//! `gemv2_norm_*` (a low-rank query's `attn_q_a` and `attn_kv_a_mqa` with `rmsnorm_q8_1` of the
//! first as a last-block-done tail) against the two launches it replaces, on every weight type:
//! `gemv2_q8_1` (checked against the CPU oracle in `gemv_types.rs`) then `rmsnorm_q8_1` on its
//! first output (checked against ggml's formulas in `rmsnorm_q8_1.rs`). Random valid weight
//! blocks, random non-zero activations and norm weights, poisoned outputs, and two launches in a
//! row on one done counter, which must be back at 0 after each.

mod quant_blocks;
mod support;

use ingot_kernels::ops::gemv::{gemv2_norm_q8_1, gemv2_q8_1, GemvType};
use ingot_kernels::ops::norm::rmsnorm_q8_1;
use ingot_kernels::Accelerator;
use quant_blocks::random_blocks;
use rand::rngs::StdRng;
use support::attention::rand_nonzero;
use support::gemv_type::ggml;
use support::{download, f32_bytes, poisoned, upload};

/// `(nrows0, nrows1, ncols)`: the first output normed (a multiple of 32).
fn check_case<B: Accelerator>(b: &mut B, rng: &mut StdRng, ty: GemvType, shape: [usize; 3]) {
    let [n0, n1, ncols] = shape;
    let nb = ncols / ty.block_elems();
    let eps = 1e-6f32;
    let count = upload(b, &[0; 4]);
    for launch in 0..2 {
        let w0 = upload(b, &random_blocks(rng, ggml(ty), n0 * nb));
        let w1 = upload(b, &random_blocks(rng, ggml(ty), n1 * nb));
        let xf = rand_nonzero(rng, ncols, -2.0, 2.0);
        let x = upload(b, bytemuck::cast_slice(&ingot_quant::quantize_q8_1(&xf)));
        let norm_w = upload(b, &f32_bytes(&rand_nonzero(rng, n0, 0.5, 1.5)));
        let q8_bytes = n0 / 32 * 36;
        // [fused, reference] outputs.
        let y0 = [poisoned(b, n0 * 4), poisoned(b, n0 * 4)];
        let y1 = [poisoned(b, n1 * 4), poisoned(b, n1 * 4)];
        let q8 = [poisoned(b, q8_bytes), poisoned(b, q8_bytes)];
        let tail = (&norm_w, &q8[0], &count);
        gemv2_norm_q8_1(
            b,
            ty,
            (&w0, &w1),
            &x,
            (&y0[0], &y1[0]),
            (n0, n1),
            ncols,
            tail,
            eps,
        )
        .expect("gemv2_norm");
        gemv2_q8_1(b, ty, (&w0, &w1), &x, (&y0[1], &y1[1]), (n0, n1), ncols).expect("gemv2");
        rmsnorm_q8_1(b, (&y0[1], &norm_w, &q8[1]), 1, n0, eps).expect("rmsnorm_q8_1");
        let who = format!("{}: gemv2_norm {ty:?} {shape:?} launch {launch}", b.name());
        assert_eq!(download(b, &count), [0; 4], "{who}: done counter not reset");
        for (what, bufs) in [("y0", &y0), ("y1", &y1), ("y0_q8", &q8)] {
            let [got, want] = [0, 1].map(|k| download(b, &bufs[k]));
            assert!(got == want, "{who}: {what} differs");
        }
        assert!(
            download(b, &q8[0])
                .chunks(36)
                .all(|q| q.iter().any(|&v| v != 0xFF)),
            "{who}: y0_q8 not written"
        );
    }
    eprintln!("{}: gemv2_norm {ty:?} {shape:?} ok", b.name());
}

fn all_types<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("gemv2_norm");
    for ty in GemvType::ALL {
        check_case(b, &mut rng, ty, [64, 48, 512]);
    }
    // GLM-4.7-Flash's attn_q_a (768 rows, 3 q8_1 blocks per tail thread) and attn_kv_a_mqa
    // (512 + 64 rows) over its 2,048 columns.
    check_case(b, &mut rng, GemvType::Q4K, [768, 576, 2048]);
}

#[test]
fn gemv2_norm_equals_gemv2_then_rmsnorm_q8_1() {
    on_every_backend!(all_types);
}
