//! `attn_merge_v_b_*` (the merge and the grouped `attn_v_b` gemv with its q8_1 epilogue in one
//! launch) against the unfused kernels it replaces, for every weight type.
//!
//! The fused kernel merges each half of a head's latent with `attn_merge_q8_1`'s code and dots
//! it with `row_dot_lane` under the grouped gemv's thread mapping for a row of `kv_lora / 2`
//! weights, so each half's row sums must equal, bit for bit, the grouped f32 gemv run on that
//! half of every row against that half of `attn_merge_q8_1`'s output; and its output must be
//! `quantize_q8_1(half 0 + half 1)`, bit for bit. Inputs are random and non-zero (partials,
//! `(m, l)` pairs, valid weight blocks with random scales); the segment slots past this step's
//! count, the output, a guard block after it and the scratch are poisoned with NaN, so a read
//! of an unused segment or a row left unwritten shows.

mod quant_blocks;
mod support;

use ingot_abi::blocks::QK8_1;
use ingot_abi::launch::{merge_v_b_pairs, merge_v_b_rows, MERGE_V_B_MIN_ROWS};
use ingot_kernels::ops::attention::{
    attn_merge_q8_1, attn_merge_v_b, part_ml_bytes, part_o_bytes, AttnShape, MergeBufs, MergeVbBufs,
};
use ingot_kernels::ops::gemv::{gemv_grouped_q8_1, GemvType, Grouping};
use ingot_kernels::Accelerator;
use quant_blocks::random_blocks;
use rand::rngs::StdRng;
use support::attention::{merge_partials, step_state};
use support::gemv_type::ggml;
use support::{download, download_f32, f32_bytes, poisoned, upload};

/// One layer's merge inputs and `attn_v_b` weights.
struct Case {
    ty: GemvType,
    shape: AttnShape,
    d_v: usize,
    pos: usize,
    max_segments: usize,
}

/// Bytes `[k·half .. (k+1)·half)` of every `row`-byte row.
fn column_half(bytes: &[u8], row: usize, k: usize) -> Vec<u8> {
    let half = row / 2;
    bytes
        .chunks_exact(row)
        .flat_map(|r| r[k * half..][..half].iter().copied())
        .collect()
}

fn check<B: Accelerator>(b: &mut B, rng: &mut StdRng, c: &Case) {
    let (s, ty) = (&c.shape, c.ty);
    let rows = s.n_head * c.d_v;
    let half = s.kv_lora / 2;
    let row_bytes = s.kv_lora / ty.block_elems() * ty.block_bytes();
    let w = random_blocks(rng, ggml(ty), rows * s.kv_lora / ty.block_elems());
    let (o, ml) = merge_partials(rng, &c.shape, c.pos, c.max_segments);
    let part_o = upload(b, &o);
    let part_ml = upload(b, &f32_bytes(&ml));
    assert_eq!(Some(o.len()), part_o_bytes(s, c.max_segments));
    assert_eq!(Some(ml.len() * 4), part_ml_bytes(s, c.max_segments));
    let state = upload(b, &step_state(c.pos as u32));

    // The unfused path: the merged latent as q8_1, then each half's f32 gemv.
    let o_lat_q8 = poisoned(b, s.n_head * s.kv_lora / QK8_1 * 36);
    let mb = MergeBufs {
        part_o: &part_o,
        part_ml: &part_ml,
        state: &state,
        o_lat: &o_lat_q8,
    };
    attn_merge_q8_1(b, s, &mb, c.max_segments).expect("attn_merge_q8_1");
    let lat = download(b, &o_lat_q8);
    let halves: Vec<Vec<f32>> = (0..2)
        .map(|k| {
            let wk = upload(b, &column_half(&w, row_bytes, k));
            let xk = upload(b, &column_half(&lat, s.kv_lora / QK8_1 * 36, k));
            let yk = poisoned(b, rows * 4);
            let g = Grouping {
                rows_per_group: c.d_v,
                x_group_stride: half / QK8_1,
            };
            gemv_grouped_q8_1(b, ty, (&wk, &xk, &yk), rows, half, g).expect("grouped half");
            download_f32(b, &yk, rows)
        })
        .collect();

    // The fused launch, twice: the done counters must be back at 0 after the first.
    let pairs = merge_v_b_pairs(s.n_head as u32, c.d_v as u32) as usize;
    let wb = upload(b, &w);
    let scratch = poisoned(b, rows * 2 * 4);
    let pair_count = upload(b, &vec![0u8; pairs * 4]);
    let out = rows / QK8_1 * 36;
    let mut first = None;
    for launch in 0..2 {
        let y = poisoned(b, out + 36);
        let bufs = MergeVbBufs {
            part_o: &part_o,
            part_ml: &part_ml,
            state: &state,
            w: &wb,
            y: &y,
            scratch: &scratch,
            pair_count: &pair_count,
        };
        attn_merge_v_b(b, ty, s, c.d_v, &bufs, c.max_segments).expect("attn_merge_v_b");
        let name = ty.merge_v_b().name;
        let sums = download_f32(b, &scratch, rows * 2);
        let pr = merge_v_b_rows(s.n_head as u32, c.d_v as u32) as usize;
        for p in 0..pairs {
            for k in 0..2 {
                for r in 0..pr {
                    let (got, want) = (sums[(p * 2 + k) * pr + r], halves[k][p * pr + r]);
                    assert!(
                        got.to_bits() == want.to_bits(),
                        "{}: {name} {c:?} launch {launch}: row {} half {k}: {got} vs the \
                         grouped gemv's {want}",
                        b.name(),
                        p * pr + r
                    );
                }
            }
        }
        let total: Vec<f32> = (0..rows).map(|r| halves[0][r] + halves[1][r]).collect();
        let want: Vec<u8> = bytemuck::cast_slice(&ingot_quant::quantize_q8_1(&total)).to_vec();
        let got = download(b, &y);
        assert!(
            got[out..].iter().all(|&v| v == 0xFF),
            "{}: {name} {c:?}: wrote past the last block",
            b.name()
        );
        if let Some(i) = (0..out).find(|&i| got[i] != want[i]) {
            panic!(
                "{}: {name} {c:?} launch {launch}: byte {i} (block {}) {:#04x} vs \
                 quantize_q8_1(half 0 + half 1) {:#04x}",
                b.name(),
                i / 36,
                got[i],
                want[i]
            );
        }
        let counts = download(b, &pair_count);
        assert!(
            counts.iter().all(|&v| v == 0),
            "{}: {name} {c:?}: a pair's done counter was left non-zero",
            b.name()
        );
        match &first {
            None => first = Some(got),
            Some(f) => assert!(f == &got, "{}: {name}: the second launch differs", b.name()),
        }
    }
    eprintln!(
        "{}: {} H={} R={} d_v={} pos {} max_segments {}: halves and output bit-exact",
        b.name(),
        ty.merge_v_b().name,
        s.n_head,
        s.kv_lora,
        c.d_v,
        c.pos,
        c.max_segments
    );
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "(heads {}, kv_lora {}, d_v {}, pos {}, max_segments {})",
            self.shape.n_head, self.shape.kv_lora, self.d_v, self.pos, self.max_segments
        )
    }
}

fn cases<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("merge_v_b");
    let case = |ty, n_head, kv_lora, d_v, pos: usize, max_segments| Case {
        ty,
        shape: AttnShape {
            n_head,
            d_nope: 128,
            kv_lora,
            n_rope: 64,
            ctx: pos + 2,
            cache: ingot_kernels::ops::attention::CacheType::F16,
        },
        d_v,
        pos,
        max_segments,
    };
    for ty in GemvType::ALL {
        // V2-Lite's shape over several segments.
        check(b, &mut rng, &case(ty, 16, 512, 128, 300, 4));
    }
    for ty in [GemvType::Q8_0, GemvType::Q6K] {
        // A head of one row block, one segment.
        check(b, &mut rng, &case(ty, 4, 512, 32, 17, 3));
    }
    // Three row blocks per head; GLM-4.7-Flash's shape (64-row blocks: 20 heads of 256 rows make
    // 160 blocks of them); a deep context over many segments; the first position.
    check(b, &mut rng, &case(GemvType::Q4K, 2, 512, 96, 40, 2));
    assert_eq!(merge_v_b_rows(20, 256), 64);
    check(b, &mut rng, &case(GemvType::Q4K, 20, 512, 256, 300, 4));
    check(b, &mut rng, &case(GemvType::Q4K, 16, 512, 128, 4096, 66));
    check(b, &mut rng, &case(GemvType::Q5_0, 16, 512, 128, 0, 8));
}

#[test]
fn merge_v_b_is_merge_then_grouped_gemv() {
    on_every_backend!(cases);
}

/// Shapes the kernel cannot split are typed errors, not launches.
#[test]
fn unsplittable_shapes_are_refused() {
    #[cfg(feature = "sim")]
    {
        let mut b = ingot_kernels::backend::sim::SimAccelerator::new().expect("ptx-sim backend");
        let one = poisoned(&mut b, 1 << 20);
        let bufs = MergeVbBufs {
            part_o: &one,
            part_ml: &one,
            state: &one,
            w: &one,
            y: &one,
            scratch: &one,
            pair_count: &one,
        };
        for (ty, kv_lora, d_v) in [
            // The kernel is built for kv_lora = 512.
            (GemvType::Q8_0, 256, 128),
            // Rows that are not whole MERGE_V_B_MIN_ROWS-row blocks.
            (GemvType::Q8_0, 512, MERGE_V_B_MIN_ROWS as usize * 3 / 2),
        ] {
            let s = AttnShape {
                n_head: 2,
                d_nope: 128,
                kv_lora,
                n_rope: 64,
                ctx: 8,
                cache: ingot_kernels::ops::attention::CacheType::F16,
            };
            let e = attn_merge_v_b(&mut b, ty, &s, d_v, &bufs, 2).unwrap_err();
            assert!(e.to_string().contains("do not split"), "{e}");
        }
    }
    #[cfg(not(feature = "sim"))]
    eprintln!("skipped: ingot-kernels built without feature `sim`");
}
