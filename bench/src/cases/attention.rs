//! Absorbed MLA attention of a V2-Lite layer (docs/decode-math.md#mla-attention): the fused
//! `attn_q` + `attn_kv_a_mqa` gemv, rope and cache write, split-K flash attention over the latent
//! cache at two depths, the merge of its segments, and the `attn_v_b` gemv feeding `attn_output`.
//!
//! For the cache-depth cases `Shape::rows` is the depth `pos + 1` (the cache holds exactly
//! that many rows and `StepState::pos` is `rows - 1`) and `Shape::cols` the cache row width.

use ingot_abi::launch::merge_v_b_pairs;
use ingot_gguf::GgmlType;
use ingot_kernels::ops::attention::{
    self as attn, AttnShape, CacheType, FlashBufs, MergeBufs, MergeOutStrides, MergeVbBufs,
    OutputBufs, RopeKvBufs,
};
use ingot_kernels::ops::gemv::GemvType;
use ingot_kernels::ops::moe::DownNorm;
use ingot_kernels::{ops, KernelError};

use super::{
    grouped_buffers, lite, q8_1_bytes, step_state_at, BufSpec, Case, Contents, Shape, V_B_GROUP,
};
use crate::device::{Buf, Device};

/// The attention shape with a cache of `depth` rows.
fn attn_shape(depth: usize) -> AttnShape {
    AttnShape {
        n_head: lite::N_HEAD,
        d_nope: lite::D_NOPE,
        kv_lora: lite::KV_LORA,
        n_rope: lite::N_ROPE,
        ctx: depth,
        cache: CacheType::F16,
    }
}

/// Segments a plan for a `depth`-row context uses on the bench GPU (`graph`'s
/// `PlanOptions::flash_split`).
fn max_segments(depth: usize) -> usize {
    ingot_graph::PlanOptions::for_device(depth, lite::BENCH_SMS as u32).flash_split(lite::N_HEAD)
}

/// Segments a step at the last row of a `depth`-row cache actually writes.
fn used_segments(depth: usize) -> usize {
    let pos = u32::try_from(depth.saturating_sub(1)).unwrap_or(u32::MAX);
    let max = u32::try_from(max_segments(depth)).unwrap_or(u32::MAX);
    attn::split_at(pos, max).count as usize
}

/// Logit scale `1/sqrt(d_nope + n_rope)`, without V2-Lite's YaRN factor `mscale²`
/// (docs/decode-math.md#logit-scale): a bench only needs scores of a realistic size.
fn kq_scale() -> f32 {
    1.0 / ((lite::D_NOPE + lite::N_ROPE) as f32).sqrt()
}

fn f32s(param: &'static str, n: usize) -> BufSpec {
    BufSpec::new(param, Contents::F32 { n, std: 1.0 })
}

/// Per-segment partials of the flash kernel for a `depth`-row cache: `(part_o, part_ml)`
/// allocated for `max_segments`, of which the used segments are moved.
fn partials(depth: usize, contents: bool) -> [BufSpec; 2] {
    let s = attn_shape(depth);
    let (max, used) = (max_segments(depth), used_segments(depth));
    let o = |n: usize| attn::part_o_bytes(&s, n).unwrap_or(usize::MAX);
    let ml = |n: usize| attn::part_ml_bytes(&s, n).unwrap_or(usize::MAX);
    let (o_contents, ml_contents) = if contents {
        (
            Contents::F16 {
                n: o(max) / 2,
                std: 1.0,
            },
            Contents::SoftmaxStats { pairs: ml(max) / 8 },
        )
    } else {
        (
            Contents::Output { bytes: o(max) },
            Contents::Output { bytes: ml(max) },
        )
    };
    [
        BufSpec {
            param: "part_o",
            contents: o_contents,
            moved: Some(o(used)),
        },
        BufSpec {
            param: "part_ml",
            contents: ml_contents,
            moved: Some(ml(used)),
        },
    ]
}

/// `q_abs`, `q_pe`, the cache filled with `rows` random f16 rows, the state at the last row,
/// and the partials.
fn flash_buffers(s: Shape) -> Vec<BufSpec> {
    flash_buffers_with(
        s,
        Contents::F16 {
            n: s.rows * s.cols,
            std: 1.0,
        },
    )
}

/// [`flash_buffers`] over a q8_0 cache.
fn flash_buffers_q8_0(s: Shape) -> Vec<BufSpec> {
    flash_buffers_with(
        s,
        Contents::LatentQ8_0 {
            rows: s.rows,
            width: s.cols,
        },
    )
}

fn flash_buffers_with(s: Shape, cache: Contents) -> Vec<BufSpec> {
    let [part_o, part_ml] = partials(s.rows, false);
    vec![
        f32s("q_abs", lite::N_HEAD * lite::KV_LORA),
        f32s("q_pe", lite::N_HEAD * lite::N_ROPE),
        BufSpec::new("cache", cache),
        step_state_at(0, s.rows.saturating_sub(1)),
        part_o,
        part_ml,
    ]
}

fn flash_bufs(b: &[Buf]) -> FlashBufs<'_, Buf> {
    FlashBufs {
        q_abs: &b[0],
        q_pe: &b[1],
        cache: &b[2],
        state: &b[3],
        part_o: &b[4],
        part_ml: &b[5],
        temperature: None,
        ahead: [None, None],
    }
}

fn flash_launch(d: &mut Device, b: &[Buf], s: Shape, mma: bool) -> Result<(), KernelError> {
    flash_launch_with(d, b, attn_shape(s.rows), mma)
}

fn flash_launch_q8_0(d: &mut Device, b: &[Buf], s: Shape) -> Result<(), KernelError> {
    let shape = AttnShape {
        cache: CacheType::Q8_0,
        ..attn_shape(s.rows)
    };
    flash_launch_with(d, b, shape, true)
}

fn flash_launch_with(
    d: &mut Device,
    b: &[Buf],
    shape: AttnShape,
    mma: bool,
) -> Result<(), KernelError> {
    let f = if mma {
        attn::flash_latent_mma::<Device>
    } else {
        attn::flash_latent::<Device>
    };
    f(
        d,
        &shape,
        &flash_bufs(b),
        max_segments(shape.ctx),
        kq_scale(),
    )
}

const fn flash(kernel: &'static str, tensor: &'static str, depth: usize, mma: bool) -> Case {
    Case {
        kernel,
        tensor,
        shape: Shape {
            rows: depth,
            cols: lite::CACHE_ROW,
        },
        buffers: flash_buffers,
        launch: if mma {
            |d, b, s| flash_launch(d, b, s, true)
        } else {
            |d, b, s| flash_launch(d, b, s, false)
        },
    }
}

pub const FLASH_MMA_1024: Case = flash("flash_latent_mma", "kv_cache@1024", 1024, true);
pub const FLASH_MMA_4096: Case = flash("flash_latent_mma", "kv_cache@4096", 4096, true);
pub const FLASH_1024: Case = flash("flash_latent", "kv_cache@1024", 1024, false);
pub const FLASH_4096: Case = flash("flash_latent", "kv_cache@4096", 4096, false);
/// `flash_latent_mma_q8_0` at depth 4096: the q8_0 cache's 624-byte rows.
pub const FLASH_MMA_Q8_0_4096: Case = Case {
    kernel: "flash_latent_mma_q8_0",
    tensor: "kv_cache_q8_0@4096",
    shape: Shape {
        rows: 4096,
        cols: lite::CACHE_ROW,
    },
    buffers: flash_buffers_q8_0,
    launch: flash_launch_q8_0,
};

/// Merge of the segments a step at depth 4096 wrote, into q8_1 for `attn_v_b`.
pub const MERGE_Q8_1: Case = Case {
    kernel: "attn_merge_q8_1",
    tensor: "kv_cache@4096",
    shape: Shape {
        rows: 4096,
        cols: lite::CACHE_ROW,
    },
    buffers: |s| {
        let [part_o, part_ml] = partials(s.rows, true);
        vec![
            part_o,
            part_ml,
            step_state_at(0, s.rows.saturating_sub(1)),
            BufSpec::new(
                "o_lat",
                Contents::Output {
                    bytes: q8_1_bytes(lite::N_HEAD * lite::KV_LORA),
                },
            ),
        ]
    },
    launch: |d, b, s| {
        let bufs = MergeBufs {
            part_o: &b[0],
            part_ml: &b[1],
            state: &b[2],
            o_lat: &b[3],
        };
        attn::attn_merge_q8_1(d, &attn_shape(s.rows), &bufs, max_segments(s.rows))
    },
};

/// The rope's buffers after `q` and `kv` (`kv_norm, rope_freq, state, q_pe, q_nope_q8, cache`),
/// for a cache of `ctx` rows written at its last row.
fn rope_buffers(ctx: usize) -> [BufSpec; 6] {
    let out = |param, bytes| BufSpec::new(param, Contents::Output { bytes });
    [
        BufSpec::new(
            "kv_norm",
            Contents::F32 {
                n: lite::KV_LORA,
                std: 0.1,
            },
        ),
        BufSpec::new(
            "rope_freq",
            Contents::RopeFreq {
                pairs: lite::N_ROPE / 2,
            },
        ),
        step_state_at(0, ctx.saturating_sub(1)),
        out("q_pe", lite::N_HEAD * lite::N_ROPE * 4),
        out("q_nope_q8", q8_1_bytes(lite::N_HEAD * lite::D_NOPE)),
        // The whole cache is allocated; the kernel writes row `pos` only.
        BufSpec {
            param: "cache",
            contents: Contents::Output {
                bytes: ctx * lite::CACHE_ROW * 2,
            },
            moved: Some(lite::CACHE_ROW * 2),
        },
    ]
}

/// The [`RopeKvBufs`] of a launch whose `q` and `kv` are `b[q]`, `b[kv]` and whose
/// [`rope_buffers`] start at `b[first]`.
fn rope_kv_bufs(b: &[Buf], (q, kv): (usize, usize), first: usize) -> RopeKvBufs<'_, Buf> {
    RopeKvBufs {
        q: &b[q],
        kv: &b[kv],
        kv_norm: &b[first],
        rope_freq: &b[first + 1],
        state: &b[first + 2],
        q_pe: &b[first + 3],
        cache: &b[first + 5],
    }
}

/// Rope of the query and the new key, cache row `pos` written and the query nope parts
/// quantized for `attn_k_b`, at depth 4096 (the cost does not depend on the depth).
pub const ROPE_KV_Q8_1: Case = Case {
    kernel: "rope_kv_q8_1",
    tensor: "kv_cache@4096",
    shape: Shape {
        rows: 4096,
        cols: lite::CACHE_ROW,
    },
    buffers: |s| {
        let mut b = vec![
            f32s("q", lite::N_HEAD * lite::D_QK),
            f32s("kv", lite::CACHE_ROW),
        ];
        b.extend(rope_buffers(s.rows));
        b
    },
    launch: |d, b, s| {
        let bufs = rope_kv_bufs(b, (0, 1), 2);
        attn::rope_kv_q8_1(d, &attn_shape(s.rows), &bufs, &b[6], lite::RMS_EPS, 1.0)
    },
};

/// Rows of `attn_kv_a_mqa` in a fused launch of `rows` rows in all: the real 576 of 3648,
/// and the same proportion (at least one row each) when the simulator runs fewer.
fn kv_a_rows(rows: usize) -> usize {
    (rows * lite::KV_A_ROWS / (lite::Q_ROWS + lite::KV_A_ROWS))
        .clamp(1, rows.saturating_sub(1).max(1))
}

/// `attn_q` and `attn_kv_a_mqa` (Q4_K) in one launch over the normed hidden state.
pub const GEMV2_Q4K: Case = Case {
    kernel: "gemv2_q4k_q8_1",
    tensor: "attn_q+attn_kv_a_mqa",
    shape: Shape {
        rows: lite::Q_ROWS + lite::KV_A_ROWS,
        cols: lite::N_EMBD,
    },
    buffers: |s| {
        let r1 = kv_a_rows(s.rows);
        let r0 = s.rows - r1;
        let w = |param, rows| q4k_weights(param, rows, s.cols);
        vec![
            w("w0", r0),
            w("w1", r1),
            BufSpec::new("x", Contents::ActQ8_1 { n: s.cols }),
            BufSpec::new("y0", Contents::Output { bytes: r0 * 4 }),
            BufSpec::new("y1", Contents::Output { bytes: r1 * 4 }),
        ]
    },
    launch: |d, b, s| {
        let r1 = kv_a_rows(s.rows);
        let rows = (s.rows - r1, r1);
        ops::gemv::gemv2_q8_1(
            d,
            GemvType::Q4K,
            (&b[0], &b[1]),
            &b[2],
            (&b[3], &b[4]),
            rows,
            s.cols,
        )
    },
};

/// A Q4_K weight matrix of `rows` x `cols` for parameter `param`.
fn q4k_weights(param: &'static str, rows: usize, cols: usize) -> BufSpec {
    BufSpec::new(
        param,
        Contents::Weights {
            ty: GgmlType::Q4K,
            rows,
            cols,
        },
    )
}

/// Cache rows of [`GEMV2_ROPE_Q4K`]: the rope writes one row, at the last position.
const GEMV2_ROPE_CTX: usize = 64;

/// `attn_q` and `attn_kv_a_mqa` (Q4_K) with the rope as the last block's tail
/// (`gemv2_rope_q4k_q8_1`): [`GEMV2_Q4K`] and [`ROPE_KV_Q8_1`] in one launch. The tail needs the
/// real head layout, so the simulator runs it at full size (well under its buffer cap).
pub const GEMV2_ROPE_Q4K: Case = Case {
    kernel: "gemv2_rope_q4k_q8_1",
    tensor: "attn_q+attn_kv_a_mqa+rope_kv",
    shape: Shape {
        rows: lite::Q_ROWS + lite::KV_A_ROWS,
        cols: lite::N_EMBD,
    },
    buffers: |s| {
        let w = |param, rows| q4k_weights(param, rows, s.cols);
        let out = |param, bytes| BufSpec::new(param, Contents::Output { bytes });
        let mut b = vec![
            w("w0", lite::Q_ROWS),
            w("w1", lite::KV_A_ROWS),
            BufSpec::new("x", Contents::ActQ8_1 { n: s.cols }),
            out("q", lite::Q_ROWS * 4),
            out("kv", lite::KV_A_ROWS * 4),
        ];
        b.extend(rope_buffers(GEMV2_ROPE_CTX));
        // The done counter, 0 before and after the launch.
        b.push(out("count", 4));
        b
    },
    launch: |d, b, s| {
        let bufs = rope_kv_bufs(b, (3, 4), 5);
        attn::gemv2_rope_q8_1(
            d,
            GemvType::Q4K,
            (&b[0], &b[1]),
            &b[2],
            s.cols,
            &attn_shape(GEMV2_ROPE_CTX),
            &bufs,
            (&b[9], &b[11]),
            lite::RMS_EPS,
            1.0,
        )
    },
};

/// `attn_v_b` (Q4_K) writing q8_1 straight for `attn_output`.
pub const V_B_Q8_1_OUT: Case = Case {
    kernel: "gemv_grouped_q4k_q8_1_out",
    tensor: "attn_v_b",
    shape: Shape {
        rows: lite::N_HEAD * lite::D_V,
        cols: lite::KV_LORA,
    },
    buffers: |s| {
        let mut b = grouped_buffers(GgmlType::Q4K, V_B_GROUP, s);
        b[2] = BufSpec::new(
            "y",
            Contents::Output {
                bytes: q8_1_bytes(s.rows),
            },
        );
        b
    },
    launch: |d, b, s| {
        let bufs = (&b[0], &b[1], &b[2]);
        ops::gemv::gemv_grouped_q8_1_out(d, GemvType::Q4K, bufs, s.rows, s.cols, V_B_GROUP)
    },
};

/// The merge's buffers in the order the merge cases declare them: `part_o`, `part_ml`, `state`,
/// `w`, `y`, `scratch`, `pair_count`.
fn merge_bufs(b: &[Buf]) -> MergeVbBufs<'_, Buf> {
    MergeVbBufs {
        part_o: &b[0],
        part_ml: &b[1],
        state: &b[2],
        w: &b[3],
        y: &b[4],
        scratch: &b[5],
        pair_count: &b[6],
    }
}

/// The merge of a depth-4096 step and `attn_v_b` (Q4_K) in one launch
/// (`attn_merge_v_b_q4k`): [`MERGE_Q8_1`] and [`V_B_Q8_1_OUT`] as the plan runs them now.
pub const MERGE_V_B_Q4K: Case = Case {
    kernel: "attn_merge_v_b_q4k",
    tensor: "kv_cache@4096+attn_v_b",
    shape: Shape {
        rows: 4096,
        cols: lite::CACHE_ROW,
    },
    buffers: |s| {
        let rows = lite::N_HEAD * lite::D_V;
        let out = |param, bytes| BufSpec::new(param, Contents::Output { bytes });
        let [part_o, part_ml] = partials(s.rows, true);
        vec![
            part_o,
            part_ml,
            step_state_at(0, s.rows.saturating_sub(1)),
            q4k_weights("w", rows, lite::KV_LORA),
            out("y", q8_1_bytes(rows)),
            out("scratch", rows * 2 * 4),
            // The pairs' done counters, 0 before and after the launch.
            out(
                "pair_count",
                merge_v_b_pairs(lite::N_HEAD as u32, lite::D_V as u32) as usize * 4,
            ),
        ]
    },
    launch: |d, b, s| {
        let bufs = merge_bufs(b);
        attn::attn_merge_v_b(
            d,
            GemvType::Q4K,
            &attn_shape(s.rows),
            lite::D_V,
            &bufs,
            max_segments(s.rows),
        )
    },
};

/// Cache depth of the `attn_merge_v_b_o` cases: one row, the depth-0 step the speculative
/// prediction prices.
const MERGE_OUT_DEPTH: usize = 1;

/// `(part_o, part_ml)` bytes of one column at [`MERGE_OUT_DEPTH`].
fn merge_out_partial_bytes() -> (usize, usize) {
    let s = attn_shape(MERGE_OUT_DEPTH);
    let max = max_segments(MERGE_OUT_DEPTH);
    let at = |b: Option<usize>| b.unwrap_or(usize::MAX);
    (
        at(attn::part_o_bytes(&s, max)),
        at(attn::part_ml_bytes(&s, max)),
    )
}

/// Buffers of `attn_merge_v_b_o_q4k` on `m` columns (1: the one-column launch): the weights
/// once, every per-position buffer `m` copies end to end (strides of exactly one column), each
/// column's step state zeroed (token 0 at position 0, bookkeeping as `step_state`).
fn merge_out_buffers(m: usize) -> Vec<BufSpec> {
    let rows = lite::N_HEAD * lite::D_V;
    let out = |param, bytes| BufSpec::new(param, Contents::Output { bytes });
    let bookkeeping = |param, bytes| BufSpec {
        moved: Some(0),
        ..out(param, bytes)
    };
    let [part_o, part_ml] = partials(MERGE_OUT_DEPTH, true);
    let (o, ml) = merge_out_partial_bytes();
    let pairs = merge_v_b_pairs(lite::N_HEAD as u32, lite::D_V as u32) as usize;
    vec![
        BufSpec {
            contents: Contents::F16 {
                n: m * o / 2,
                std: 1.0,
            },
            moved: part_o.moved.map(|b| m * b),
            ..part_o
        },
        BufSpec {
            contents: Contents::SoftmaxStats { pairs: m * ml / 8 },
            moved: part_ml.moved.map(|b| m * b),
            ..part_ml
        },
        bookkeeping("state", m * 16),
        q4k_weights("w", rows, lite::KV_LORA),
        out("y", m * q8_1_bytes(rows)),
        out("scratch", m * rows * 2 * 4),
        // The pairs' done counters, 0 before and after the launch.
        bookkeeping("pair_count", m * pairs * 4),
        q4k_weights("w_o", lite::N_EMBD, rows),
        BufSpec::new(
            "resid",
            Contents::F32 {
                n: m * lite::N_EMBD,
                std: 1.0,
            },
        ),
        out("out", m * lite::N_EMBD * 4),
        BufSpec::new(
            "norm_w",
            Contents::F32 {
                n: lite::N_EMBD,
                std: 1.0,
            },
        ),
        out("norm_q8", m * q8_1_bytes(lite::N_EMBD)),
        out("norm_f32", m * lite::N_EMBD * 4),
        // The tail's done counter and the chain's control words, 0 before and after.
        bookkeeping("count", 4),
        bookkeeping("chain_ctl", 16),
    ]
}

/// [`merge_out_buffers`]`(m)` launched: `attn_merge_v_b_o_q4k` for one column, else
/// `attn_merge_v_b_o_colsM_q4k`.
fn merge_out_launch(d: &mut Device, b: &[Buf], m: usize) -> Result<(), KernelError> {
    let merge = merge_bufs(b);
    let norm = Some(DownNorm {
        w: &b[10],
        q8: &b[11],
        f32: &b[12],
        count: &b[13],
        eps: lite::RMS_EPS,
    });
    let o = OutputBufs {
        w_o: &b[7],
        resid: &b[8],
        out: &b[9],
        norm,
        chain_ctl: &b[14],
    };
    let s = attn_shape(MERGE_OUT_DEPTH);
    let shape = (&s, lite::D_V, max_segments(MERGE_OUT_DEPTH));
    if m == 1 {
        return attn::attn_merge_v_b_o(d, GemvType::Q4K, shape, &merge, lite::N_EMBD, &o);
    }
    let rows = lite::N_HEAD * lite::D_V;
    let (part_o, part_ml) = merge_out_partial_bytes();
    let pairs = merge_v_b_pairs(lite::N_HEAD as u32, lite::D_V as u32) as usize;
    let strides = MergeOutStrides {
        part_o,
        part_ml,
        state: 16,
        y: q8_1_bytes(rows),
        scratch: rows * 2 * 4,
        pair_count: pairs * 4,
        resid: lite::N_EMBD * 4,
        out: lite::N_EMBD * 4,
        norm_q8: q8_1_bytes(lite::N_EMBD),
        norm_f32: lite::N_EMBD * 4,
    };
    attn::attn_merge_v_b_o_cols(
        d,
        GemvType::Q4K,
        m,
        shape,
        &merge,
        lite::N_EMBD,
        &o,
        strides,
    )
}

/// `attn_merge_v_b_o_*` cases: the merge at depth 1, `attn_v_b` and `attn_output` (Q4_K) with
/// its residual add and norm tail, on `$m` columns (1: the one-column launch the decode plan
/// runs).
macro_rules! merge_out_case {
    ($(#[$doc:meta])* $name:ident, $kernel:literal, $m:literal) => {
        $(#[$doc])*
        pub const $name: Case = Case {
            kernel: $kernel,
            tensor: "attn_v_b+attn_output",
            shape: Shape {
                rows: MERGE_OUT_DEPTH,
                cols: lite::CACHE_ROW,
            },
            buffers: |_| merge_out_buffers($m),
            launch: |d, b, _| merge_out_launch(d, b, $m),
        };
    };
}

merge_out_case!(
    /// The chained merge and `attn_output` of one position.
    MERGE_V_B_O_Q4K,
    "attn_merge_v_b_o_q4k",
    1
);
merge_out_case!(
    /// [`MERGE_V_B_O_Q4K`] on a verify's 2 positions.
    MERGE_V_B_O_COLS2_Q4K,
    "attn_merge_v_b_o_cols2_q4k",
    2
);
merge_out_case!(
    /// [`MERGE_V_B_O_Q4K`] on a verify's 3 positions.
    MERGE_V_B_O_COLS3_Q4K,
    "attn_merge_v_b_o_cols3_q4k",
    3
);
merge_out_case!(
    /// [`MERGE_V_B_O_Q4K`] on a verify's 4 positions.
    MERGE_V_B_O_COLS4_Q4K,
    "attn_merge_v_b_o_cols4_q4k",
    4
);
