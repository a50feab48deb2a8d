//! `gemv2_norm_rope_kb_*` against `gemv2_norm_*` then `gemv2_rope_kb_*` (see the crate docs).

use crate::quant_blocks::random_blocks;
use crate::support::attention::{rand_nonzero, rope_inputs, step_state, v2_lite_rope};
use crate::support::gemv_type::ggml;
use crate::support::{self, download, f32_bytes, poisoned, upload};
use ingot_abi::launch::CHAIN_CTL_WORDS;
use ingot_abi::weight_types::CHAIN_ROPE_KB;
use ingot_kernels::ops::attention::{
    gemv2_norm_rope_kb_q8_1, gemv2_rope_kb_q8_1, AttnShape, CacheType, KbBufs, NormBufs, RopeKvBufs,
};
use ingot_kernels::ops::gemv::{gemv2_norm_q8_1, GemvType};
use ingot_kernels::Accelerator;
use rand::rngs::StdRng;
use rand::Rng;

/// The outputs of one path, poisoned before it runs.
struct Outs<T> {
    q_a: T,
    x: T,
    q: T,
    kv: T,
    q_pe: T,
    q8: T,
    cache: T,
    q_abs: T,
}

/// The chained launch of `(ty, kb)` at `s` with a `q_lora`-wide low-rank query against the
/// two launches, at two positions.
fn check<B: Accelerator>(
    b: &mut B,
    rng: &mut StdRng,
    (ty, kb): (GemvType, GemvType),
    (s, q_lora): (&AttnShape, usize),
    (ctl, norm_ctl): (&B::Buf, &B::Buf),
) {
    let p = v2_lite_rope(s.n_rope);
    let (eps, mscale) = (1e-6f32, p.rope_mscale());
    let ncols = 512;
    let blocks = |n: usize| n / ty.block_elems();
    let (n_q, n_kv) = (s.n_head * (s.d_nope + s.n_rope), s.row());
    let w_q_a = upload(b, &random_blocks(rng, ggml(ty), q_lora * blocks(ncols)));
    let w_kv = upload(b, &random_blocks(rng, ggml(ty), n_kv * blocks(ncols)));
    let w_q_b = upload(b, &random_blocks(rng, ggml(ty), n_q * blocks(q_lora)));
    let kb_rows = s.n_head * s.kv_lora;
    let w_kb = upload(
        b,
        &random_blocks(rng, ggml(kb), kb_rows * s.d_nope / kb.block_elems()),
    );
    let (x, kv_norm, rope_freq) = rope_inputs(b, rng, s, ncols);
    let norm_w = upload(b, &f32_bytes(&rand_nonzero(rng, q_lora, 0.5, 1.5)));
    let (count, norm_count) = (upload(b, &[0; 4]), upload(b, &[0; 4]));
    let cache_bytes = s.cache_bytes().unwrap();
    let outs = |b: &mut B| Outs {
        q_a: poisoned(b, q_lora * 4),
        x: poisoned(b, q_lora / 32 * 36),
        q: poisoned(b, n_q * 4),
        kv: poisoned(b, n_kv * 4),
        q_pe: poisoned(b, s.n_head * s.n_rope * 4),
        q8: poisoned(b, s.n_head * s.d_nope / 32 * 36),
        cache: poisoned(b, cache_bytes),
        q_abs: poisoned(b, kb_rows * 4),
    };
    let [f, r] = [outs(b), outs(b)];
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
        let [kf, kr] = [&f, &r].map(|o| KbBufs {
            w: &w_kb,
            q_abs: &o.q_abs,
            chain_ctl: ctl,
        });
        let n = NormBufs {
            w: (&w_q_a, &w_kv),
            x: &x,
            q_a: &f.q_a,
            nrows: (q_lora, n_kv),
            ncols,
            norm_w: &norm_w,
            count: &norm_count,
            ctl: norm_ctl,
        };
        let tail = (&f.q8, &count);
        let q_b = (&w_q_b, &f.x, q_lora);
        gemv2_norm_rope_kb_q8_1(b, (ty, kb), &n, q_b, s, &bf, tail, (eps, mscale), &kf)
            .expect("gemv2_norm_rope_kb");
        let who = format!(
            "{}: gemv2_norm_rope_kb {ty:?} {kb:?} {s:?} q_lora {q_lora} pos {pos}",
            b.name()
        );
        for (what, c) in [("rope", &count), ("norm", &norm_count)] {
            assert_eq!(
                download(b, c),
                [0; 4],
                "{who}: {what} done counter not reset"
            );
        }
        for words in [download(b, ctl), download(b, norm_ctl)] {
            assert!(
                words.iter().all(|&v| v == 0),
                "{who}: control words {words:?}"
            );
        }

        gemv2_norm_q8_1(
            b,
            ty,
            (&w_q_a, &w_kv),
            &x,
            (&r.q_a, &r.kv),
            (q_lora, n_kv),
            ncols,
            (&norm_w, &r.x, &norm_count),
            eps,
        )
        .expect("gemv2_norm");
        let tail = (&r.q8, &count);
        let w = (&w_q_b, None);
        gemv2_rope_kb_q8_1(
            b,
            (ty, kb),
            w,
            &r.x,
            q_lora,
            s,
            &br,
            tail,
            (eps, mscale),
            &kr,
        )
        .expect("gemv2_rope_kb");
        for (what, got, want) in [
            ("q_a", &f.q_a, &r.q_a),
            ("q_a's q8_1", &f.x, &r.x),
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
        let q_abs = download(b, &f.q_abs);
        assert!(
            q_abs.chunks_exact(4).all(|v| v != [0xFF; 4]),
            "{who}: a q_abs row left unwritten"
        );
    }
    eprintln!(
        "{}: gemv2_norm_rope_kb {ty:?} {kb:?} {s:?} q_lora {q_lora}: the bits of the two launches",
        b.name()
    );
}

/// Four heads of 64 + 16, a 64-wide latent, a 256-wide low-rank query (one k-quant super-block
/// a row of `attn_q_b`): a few blocks per part, small enough for many random schedules.
const SMALL: (AttnShape, usize) = (
    AttnShape {
        n_head: 4,
        d_nope: 64,
        kv_lora: 64,
        n_rope: 16,
        ctx: 64,
        cache: CacheType::F16,
    },
    256,
);

fn control_words<B: Accelerator>(b: &mut B) -> [B::Buf; 2] {
    [(); 2].map(|_| upload(b, &[0u8; CHAIN_CTL_WORDS as usize * 4]))
}

fn cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("gemv2_norm_rope_kb");
    let [ctl, norm_ctl] = control_words(b);
    for &row in CHAIN_ROPE_KB {
        check(b, &mut rng, row, (&SMALL.0, SMALL.1), (&ctl, &norm_ctl));
    }
    // GLM-4.7-Flash: 20 heads of 192 + 64, a 512 + 64 latent, q_lora 768, q8_0 cache.
    let glm = AttnShape {
        n_head: 20,
        d_nope: 192,
        kv_lora: 512,
        n_rope: 64,
        ctx: 64,
        cache: CacheType::Q8_0,
    };
    let rows = (GemvType::Q4K, GemvType::Q5_0);
    check(b, &mut rng, rows, (&glm, 768), (&ctl, &norm_ctl));
}

#[test]
fn chained_launch_gives_the_bits_of_the_two_launches() {
    crate::on_every_backend!(cases);
}

/// The publication order under many schedules: 32 random schedules of every row's small case.
#[test]
fn the_waiting_blocks_read_published_rows_under_many_schedules() {
    #[cfg(feature = "sim")]
    {
        let mut b = ingot_kernels::backend::sim::SimAccelerator::new().expect("ptx-sim backend");
        b.sim_mut().set_race_check(32);
        let mut rng = support::rng("gemv2_norm_rope_kb_schedules");
        let [ctl, norm_ctl] = control_words(&mut b);
        for &row in CHAIN_ROPE_KB {
            check(
                &mut b,
                &mut rng,
                row,
                (&SMALL.0, SMALL.1),
                (&ctl, &norm_ctl),
            );
        }
    }
    #[cfg(not(feature = "sim"))]
    eprintln!("skipped: ingot-kernels built without feature `sim`");
}
