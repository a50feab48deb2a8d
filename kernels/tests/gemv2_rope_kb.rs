//! `gemv2_rope_kb_*` (the attention's projections with the rope tail, and `attn_k_b`'s grouped
//! gemv, in one chained launch) against the two launches it replaces, for every registry
//! `chain_rope_kb` row: `gemv2_rope_*` (or, for a low-rank query, `gemv_rope_*`; both checked
//! against `gemv2` + `rope_kv_q8_1` in `gemv2_rope.rs`) then `gemv_grouped_*` on the
//! `q_nope_q8` the tail wrote (checked against the CPU oracle in `gemv_types.rs`).
//!
//! Each part runs its unfused kernel's code, so every output must be the unfused launches'
//! bits: `q`, `kv`, `q_pe`, the cache row and `q_abs` (whose blocks quantize `q_nope` into their
//! stage themselves: the bits of the `q_nope_q8` the unfused rope tail writes; the chained
//! launch leaves that buffer alone). Inputs are random and
//! non-zero (valid weight blocks with random scales, the activation, the norm weights); every
//! output is poisoned. The fused launch runs at two positions on the same control words and
//! done counter: they must be 0 again after each launch. The simulator backend race-checks
//! every launch under random schedules, so an `attn_k_b` block reading `q` before every row
//! block published its rows would show as a schedule-dependent result.
//!
//! The same for `gemv2_norm_rope_kb_*` (a low-rank query's three projection launches in one)
//! against `gemv2_norm_*` (checked against `gemv2` + `rmsnorm_q8_1` in `gemv2_norm.rs`) then
//! `gemv2_rope_kb_*` with `attn_q_b` alone on the norm's q8_1 (checked above), in the `norm`
//! module: `q_a` and the norm's q8_1 too, both control words' sets and both done counters back
//! at 0; an `attn_q_b` block reading the norm's q8_1 before the tail published it would show
//! under the random schedules.

mod quant_blocks;
mod support;
// After `support`: it uses its macros.
#[path = "gemv2_rope_kb/norm.rs"]
mod norm;

use ingot_abi::launch::CHAIN_CTL_WORDS;
use ingot_abi::weight_types::CHAIN_ROPE_KB;
use ingot_kernels::ops::attention::{
    gemv2_rope_kb_q8_1, gemv2_rope_q8_1, gemv_rope_q8_1, AttnShape, CacheType, KbBufs, RopeKvBufs,
};
use ingot_kernels::ops::gemv::{gemv_grouped_q8_1, GemvType, Grouping};
use ingot_kernels::Accelerator;
use quant_blocks::random_blocks;
use rand::rngs::StdRng;
use rand::Rng;
use support::attention::{rand_nonzero, rope_inputs, step_state, v2_lite_rope};
use support::gemv_type::ggml;
use support::{download, f32_bytes, poisoned, upload};

/// The outputs of one path, poisoned before it runs (`kv` holds the given rows for a low-rank
/// query, whose `kv` an earlier launch wrote).
struct Outs<T> {
    q: T,
    kv: T,
    q_pe: T,
    q8: T,
    cache: T,
    q_abs: T,
}

/// The chained launch of `(ty, kb)` at `s` (a low-rank query without a second matrix when
/// `low_rank`) against the two launches, at two positions.
fn check<B: Accelerator>(
    b: &mut B,
    rng: &mut StdRng,
    (ty, kb): (GemvType, GemvType),
    s: &AttnShape,
    low_rank: bool,
    ctl: &B::Buf,
) {
    let p = v2_lite_rope(s.n_rope);
    let (eps, mscale) = (1e-6f32, p.rope_mscale());
    let ncols = 512;
    let nb = ncols / ty.block_elems();
    let (n0, n1) = (s.n_head * (s.d_nope + s.n_rope), s.row());
    let w0 = upload(b, &random_blocks(rng, ggml(ty), n0 * nb));
    let w1 = upload(b, &random_blocks(rng, ggml(ty), n1 * nb));
    let kb_rows = s.n_head * s.kv_lora;
    let w_kb = upload(
        b,
        &random_blocks(rng, ggml(kb), kb_rows * s.d_nope / kb.block_elems()),
    );
    let (x, kv_norm, rope_freq) = rope_inputs(b, rng, s, ncols);
    let kv_rows = f32_bytes(&rand_nonzero(rng, n1, -2.0, 2.0));
    let count = upload(b, &[0; 4]);
    let q8_bytes = s.n_head * s.d_nope / 32 * 36;
    let cache_bytes = s.cache_bytes().unwrap();
    let outs = |b: &mut B| Outs {
        q: poisoned(b, n0 * 4),
        kv: if low_rank {
            upload(b, &kv_rows)
        } else {
            poisoned(b, n1 * 4)
        },
        q_pe: poisoned(b, s.n_head * s.n_rope * 4),
        q8: poisoned(b, q8_bytes),
        cache: poisoned(b, cache_bytes),
        q_abs: poisoned(b, kb_rows * 4),
    };
    let [f, r] = [outs(b), outs(b)];
    let w1 = (!low_rank).then_some(&w1);
    let pos0 = rng.random_range(0..s.ctx - 1);
    for pos in [pos0, pos0 + 1] {
        let state = upload(b, &step_state(pos as u32));
        let [bf, br] = [&f, &r].map(|o| RopeKvBufs {
            q: &o.q,
            kv: &o.kv,
            kv_norm: &kv_norm,
            rope_freq: &rope_freq,
            state: &state,
            q_pe: &o.q_pe,
            cache: &o.cache,
        });
        let k = KbBufs {
            w: &w_kb,
            q_abs: &f.q_abs,
            chain_ctl: ctl,
        };
        let tail = (&f.q8, &count);
        let w = (&w0, w1);
        gemv2_rope_kb_q8_1(b, (ty, kb), w, &x, ncols, s, &bf, tail, (eps, mscale), &k)
            .expect("gemv2_rope_kb");
        let who = format!("{}: gemv2_rope_kb {ty:?} {kb:?} {s:?} pos {pos}", b.name());
        assert_eq!(download(b, &count), [0; 4], "{who}: done counter not reset");
        let words = download(b, ctl);
        assert!(
            words.iter().all(|&v| v == 0),
            "{who}: control words {words:?}"
        );

        let tail = (&r.q8, &count);
        match w1 {
            Some(w1) => gemv2_rope_q8_1(b, ty, (&w0, w1), &x, ncols, s, &br, tail, eps, mscale),
            None => gemv_rope_q8_1(b, ty, &w0, &x, ncols, s, &br, tail, eps, mscale),
        }
        .expect("gemv2_rope");
        let g = Grouping {
            rows_per_group: s.kv_lora,
            x_group_stride: s.d_nope / 32,
        };
        gemv_grouped_q8_1(b, kb, (&w_kb, &r.q8, &r.q_abs), kb_rows, s.d_nope, g).expect("attn_k_b");
        for (what, got, want) in [
            ("q", &f.q, &r.q),
            ("kv", &f.kv, &r.kv),
            ("q_pe", &f.q_pe, &r.q_pe),
            ("cache", &f.cache, &r.cache),
            ("q_abs", &f.q_abs, &r.q_abs),
        ] {
            let (g, w) = (download(b, got), download(b, want));
            if let Some(i) = (0..w.len()).find(|&i| g[i] != w[i]) {
                panic!(
                    "{who}: {what} byte {i}: {:#04x} vs the two launches' {:#04x}",
                    g[i], w[i]
                );
            }
        }
        assert!(
            download(b, &f.q8).iter().all(|&v| v == 0xFF),
            "{who}: q_nope_q8 written"
        );
        let q_abs = download(b, &f.q_abs);
        assert!(
            q_abs.chunks_exact(4).all(|v| v != [0xFF; 4]),
            "{who}: a q_abs row left unwritten"
        );
    }
    eprintln!(
        "{}: gemv2_rope_kb {ty:?} {kb:?} {s:?}: the bits of the two launches",
        b.name()
    );
}

/// Four heads of 64 + 16, a 64-wide latent: a few blocks per part, small enough for many
/// random schedules.
const SMALL: AttnShape = AttnShape {
    n_head: 4,
    d_nope: 64,
    kv_lora: 64,
    n_rope: 16,
    ctx: 64,
    cache: CacheType::F16,
};

fn cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("gemv2_rope_kb");
    let ctl = upload(b, &[0u8; CHAIN_CTL_WORDS as usize * 4]);
    let small = SMALL;
    let lite = AttnShape {
        n_head: 16,
        d_nope: 128,
        kv_lora: 512,
        n_rope: 64,
        ctx: 128,
        cache: CacheType::F16,
    };
    // GLM-4.7-Flash's heads: 20 of 192 + 64 (a low-rank query, `attn_q_b` alone), q8_0 cache.
    let glm = AttnShape {
        n_head: 20,
        d_nope: 192,
        ctx: 64,
        cache: CacheType::Q8_0,
        ..lite
    };
    for &row in CHAIN_ROPE_KB {
        check(b, &mut rng, row, &small, false, &ctl);
    }
    let (q4k, q5_0) = (GemvType::Q4K, GemvType::Q5_0);
    check(b, &mut rng, (q4k, q5_0), &lite, false, &ctl);
    check(b, &mut rng, (q4k, q5_0), &glm, true, &ctl);
}

#[test]
fn chained_launch_gives_the_bits_of_the_two_launches() {
    on_every_backend!(cases);
}

/// The publication order under many schedules: 32 random schedules of every row's small case
/// (the default 2 per launch let an `attn_k_b` block read `q` early in a tried mutation that
/// counted a row block done before its rows were stored; 16 caught it).
#[test]
fn the_waiting_blocks_read_published_rows_under_many_schedules() {
    #[cfg(feature = "sim")]
    {
        let mut b = ingot_kernels::backend::sim::SimAccelerator::new().expect("ptx-sim backend");
        b.sim_mut().set_race_check(32);
        let mut rng = support::rng("gemv2_rope_kb_schedules");
        let ctl = upload(&mut b, &[0u8; CHAIN_CTL_WORDS as usize * 4]);
        for &row in CHAIN_ROPE_KB {
            check(&mut b, &mut rng, row, &SMALL, false, &ctl);
        }
    }
    #[cfg(not(feature = "sim"))]
    eprintln!("skipped: ingot-kernels built without feature `sim`");
}
