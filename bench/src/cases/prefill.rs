//! The prefill kernels of a V2-Lite layer at a 512-token chunk (the largest bucket of the
//! prefill plan, `graph::planner::prefill`): the quantized matrix-matrix products (`mmq_*`
//! dense, `mmq_moe_*` over the routed experts and over the heads as experts), the causal
//! flash attention of the chunk, and the MoE glue (`moe_pairs`, `moe_swiglu_q8_1`,
//! `moe_combine`).
//!
//! Required bytes of the products are their documented tile traffic (`ingot_abi::launch::mmq`,
//! the bound `kernels/tests/mmq.rs` and `mmq_moe.rs` assert), without the overheads those
//! bounds add on top: a tile of [`MMQ_ROWS`] rows × [`MMQ_TOKENS`] tokens (pairs) stages its
//! weights and its activations once, so a product must read each weight byte once per token
//! (pair) tile and each activation byte once per row tile. Not counted, so visible in
//! read/need: Q6_K's 4 realignment bytes per odd block and `mmq_moe`'s routing words (each
//! warp's scan of `expert_start`, and per row tile each pair's token index by 8 threads and its
//! output row by 32).
//!
//! The simulator runs the real shape when its buffers fit `sim::SIM_MAX_BUFFER_BYTES` and
//! fewer rows otherwise (the bench's reduced-rows mechanism; the required bytes are those of
//! the rows that ran): see each case for what its rows are.

use ingot_abi::launch::{flash_head_groups, FLASH_PREFILL_TOKENS, MMQ_ROWS, MMQ_TOKENS};
use ingot_abi::weight_types::GemvType;
use ingot_gguf::GgmlType;
use ingot_kernels::ops::attention::{self as attn, AttnShape, CacheType, PrefillBufs};
use ingot_kernels::ops::moe_prefill::{self, GateUp};
use ingot_kernels::{ops, KernelError};

use super::{lite, q8_1_bytes, step_state_at, BufSpec, Case, Contents, RoutingList, Shape};
use crate::device::{Buf, Device};
use crate::inputs::{chunk_routing, weight_bytes};

/// Tokens of the chunk.
pub const CHUNK: usize = 512;

/// Token (pair) tiles of `n` tokens (pairs).
fn token_tiles(n: usize) -> usize {
    n.div_ceil(MMQ_TOKENS as usize)
}

/// Row tiles of `rows` rows.
fn row_tiles(rows: usize) -> usize {
    rows.div_ceil(MMQ_ROWS as usize)
}

/// `weights` read `times` times (`None` if the shape is not representable).
fn times(weights: Option<usize>, times: usize) -> Option<usize> {
    weights.and_then(|w| w.checked_mul(times))
}

/// Buffers of a dense product over the chunk: `W` (`rows × cols` of `ty`), read once per token
/// tile (8 at 512 tokens); `x` (512 q8_1 rows of `cols`), read once per row tile; `y` (512 ×
/// `rows` f32, token-major).
fn mmq_buffers(ty: GgmlType, s: Shape) -> Vec<BufSpec> {
    let x_bytes = q8_1_bytes(CHUNK * s.cols);
    vec![
        BufSpec {
            param: "w",
            contents: Contents::Weights {
                ty,
                rows: s.rows,
                cols: s.cols,
            },
            moved: times(weight_bytes(ty, s.rows, s.cols).ok(), token_tiles(CHUNK)),
        },
        BufSpec {
            param: "x",
            contents: Contents::ActQ8_1 { n: CHUNK * s.cols },
            moved: x_bytes.checked_mul(row_tiles(s.rows)),
        },
        BufSpec::new(
            "y",
            Contents::Output {
                bytes: CHUNK * s.rows * 4,
            },
        ),
    ]
}

/// A dense product case: `kernel` for `ty` weights of `rows × cols` (the `tensor` of the
/// label) over the 512 tokens of the chunk. Bound: the weights once per token tile (8), `x` once
/// per row tile.
macro_rules! mmq_case {
    ($(#[$doc:meta])* $name:ident, $kernel:literal, $tensor:literal, $ty:ident, $rows:expr, $cols:expr) => {
        $(#[$doc])*
        pub const $name: Case = Case {
            kernel: $kernel,
            tensor: $tensor,
            shape: Shape {
                rows: $rows,
                cols: $cols,
            },
            buffers: |s| mmq_buffers(GgmlType::$ty, s),
            launch: |d, b, s| {
                ops::mmq::mmq(d, GemvType::$ty, (&b[0], &b[1], &b[2]), s.rows, s.cols, CHUNK)
            },
        };
    };
}

mmq_case!(
    /// `attn_output` (Q4_K, 2048 × 2048) over the chunk's attention outputs, whole (7.7 MB of
    /// buffers).
    MMQ_Q4K, "mmq_q4k", "attn_output@512tok", Q4K, lite::N_EMBD, lite::N_EMBD
);
mmq_case!(
    /// `ffn_down_shexp` (Q6_K, 2048 × 2816) over the chunk's shared-expert activations, whole
    /// (10.5 MB); the odd Q6_K blocks' 4 realignment bytes (about 1 %) are not in the bound.
    MMQ_Q6K, "mmq_q6k", "ffn_down_shexp@512tok", Q6K, lite::N_EMBD, lite::FF_SHARED
);
mmq_case!(
    /// `attn_output` as Q5_K (the Q5_K_M mixes' type).
    MMQ_Q5K, "mmq_q5k", "attn_output@512tok", Q5K, lite::N_EMBD, lite::N_EMBD
);
mmq_case!(
    /// `attn_output` as Q3_K (the Q3_K_M mix's type).
    MMQ_Q3K, "mmq_q3k", "attn_output@512tok", Q3K, lite::N_EMBD, lite::N_EMBD
);
mmq_case!(
    /// `ffn_down_shexp` as Q8_0 (the Q8_0 mix, and Q6_K's fallback for rows not a multiple of
    /// 256).
    MMQ_Q8_0, "mmq_q8_0", "ffn_down_shexp@512tok", Q8_0, lite::N_EMBD, lite::FF_SHARED
);
mmq_case!(
    /// `ffn_down_shexp` as Q5_0 (Q4_K's fallback for such rows).
    MMQ_Q5_0, "mmq_q5_0", "ffn_down_shexp@512tok", Q5_0, lite::N_EMBD, lite::FF_SHARED
);
mmq_case!(
    /// `ffn_down_shexp` as Q4_0 (the Q3_K_M mix's `attn_k_b` type).
    MMQ_Q4_0, "mmq_q4_0", "ffn_down_shexp@512tok", Q4_0, lite::N_EMBD, lite::FF_SHARED
);
mmq_case!(
    /// `ffn_down_shexp` as IQ4_NL (Q3_K's fallback for rows not a multiple of 256).
    MMQ_IQ4_NL, "mmq_iq4_nl", "ffn_down_shexp@512tok", Iq4Nl, lite::N_EMBD, lite::FF_SHARED
);

/// Pairs of the chunk's routing: 512 tokens × 6 experts.
const N_PAIRS: usize = CHUNK * lite::N_USED;

/// A list of the chunk's routing (`inputs::chunk_routing`), read once.
fn routing(param: &'static str, list: RoutingList) -> BufSpec {
    routing_of(param, CHUNK, list)
}

/// Buffers of `mmq_moe` over the routed experts of the chunk: `w` stacks the 64 experts of
/// `rows × cols` (`rows` per expert), `x` the chunk's 512 q8_1 rows, then `pair_token`,
/// `expert_start`, `pair_row` (the identity: pair-major output) and `y` (3072 pairs × `rows`).
/// Bound: each expert's weights once per tile of 64 of its pairs (an expert without pairs:
/// never), each pair's `x` row once per row tile, the three lists once.
fn moe_buffers(ty: GgmlType, s: Shape) -> Vec<BufSpec> {
    let pair_tiles = chunk_routing(CHUNK, lite::N_EXPERT, lite::N_USED)
        .ok()
        .map(|r| r.counts().into_iter().map(token_tiles).sum::<usize>());
    let x_row = q8_1_bytes(s.cols);
    vec![
        BufSpec {
            param: "w",
            contents: Contents::Weights {
                ty,
                rows: lite::N_EXPERT * s.rows,
                cols: s.cols,
            },
            moved: pair_tiles.and_then(|t| times(weight_bytes(ty, s.rows, s.cols).ok(), t)),
        },
        BufSpec {
            param: "x",
            contents: Contents::ActQ8_1 { n: CHUNK * s.cols },
            moved: Some(N_PAIRS * x_row * row_tiles(s.rows)),
        },
        routing("pair_token", RoutingList::PairToken),
        routing("expert_start", RoutingList::ExpertStart),
        routing("pair_row", RoutingList::PairSelf),
        BufSpec::new(
            "y",
            Contents::Output {
                bytes: N_PAIRS * s.rows * 4,
            },
        ),
    ]
}

fn moe_launch(d: &mut Device, ty: GemvType, b: &[Buf], s: Shape) -> Result<(), KernelError> {
    let bufs = (&b[0], &b[1], &b[2], &b[3], &b[4], &b[5]);
    ops::mmq::mmq_moe(d, ty, bufs, s.rows, s.cols, CHUNK, N_PAIRS, lite::N_EXPERT)
}

/// `ffn_gate_exps` (Q4_K, 64 experts × 1408 × 2048) over the chunk's 3072 (token, expert)
/// pairs: 512 tokens × 6 experts spread over the 64 (`inputs::chunk_selections`), sorted by
/// expert, `pair_row` the identity. The 104 MB stacked tensor is over the simulator's buffer
/// cap, so it runs fewer rows per expert (every expert, every pair); `rows` is per expert.
pub const MMQ_MOE_Q4K: Case = Case {
    kernel: "mmq_moe_q4k",
    tensor: "ffn_gate_exps@512tok",
    shape: Shape {
        rows: lite::FF_EXPERT,
        cols: lite::N_EMBD,
    },
    buffers: |s| moe_buffers(GgmlType::Q4K, s),
    launch: |d, b, s| moe_launch(d, GemvType::Q4K, b, s),
};

/// Pairs of the per-head products: 512 tokens × 16 heads.
const HEAD_PAIRS: usize = CHUNK * lite::N_HEAD;

/// A list of the per-head products' constant pair list, read once.
fn head_pairs(param: &'static str, list: RoutingList) -> BufSpec {
    BufSpec::new(
        param,
        Contents::HeadPairs {
            ntok: CHUNK,
            n_head: lite::N_HEAD,
            list,
        },
    )
}

/// `attn_k_b` (Q5_0, 16 heads × 512 rows × 128) as `mmq_moe_q5_0` with the heads as experts,
/// as the prefill plan runs it: `x` is the chunk's `q_nope` in q8_1, row `t·16 + h` (128
/// values each); pair `p = h·512 + t` reads and writes row `t·16 + h` (`pair_token` =
/// `pair_row`), so `y` (`q_abs`) comes out token-major. Its 16.8 MB output is over the
/// simulator's cap: it runs fewer rows per head (all 8192 pairs); `rows` is per head. Bound:
/// each head's weights once per tile of 64 of its 512 pairs (8), each pair's 144-byte `x` row
/// once per row tile, the three lists once.
pub const MMQ_MOE_Q5_0: Case = Case {
    kernel: "mmq_moe_q5_0",
    tensor: "attn_k_b@512tok",
    shape: Shape {
        rows: lite::KV_LORA,
        cols: lite::D_NOPE,
    },
    buffers: |s| {
        let x_row = q8_1_bytes(s.cols);
        let ty = GgmlType::Q5_0;
        vec![
            BufSpec {
                param: "w",
                contents: Contents::Weights {
                    ty,
                    rows: lite::N_HEAD * s.rows,
                    cols: s.cols,
                },
                moved: times(
                    weight_bytes(ty, s.rows, s.cols).ok(),
                    lite::N_HEAD * token_tiles(CHUNK),
                ),
            },
            BufSpec {
                param: "x",
                contents: Contents::ActQ8_1 {
                    n: HEAD_PAIRS * s.cols,
                },
                moved: Some(HEAD_PAIRS * x_row * row_tiles(s.rows)),
            },
            head_pairs("pair_token", RoutingList::PairToken),
            head_pairs("expert_start", RoutingList::ExpertStart),
            head_pairs("pair_row", RoutingList::PairToken),
            BufSpec::new(
                "y",
                Contents::Output {
                    bytes: HEAD_PAIRS * s.rows * 4,
                },
            ),
        ]
    },
    launch: |d, b, s| {
        let bufs = (&b[0], &b[1], &b[2], &b[3], &b[4], &b[5]);
        let (ntok, n_pairs) = (HEAD_PAIRS, HEAD_PAIRS);
        ops::mmq::mmq_moe(
            d,
            GemvType::Q5_0,
            bufs,
            s.rows,
            s.cols,
            ntok,
            n_pairs,
            lite::N_HEAD,
        )
    },
};

/// The attention shape of a chunk of `ntok` tokens at `pos0` (cache of `pos0 + ntok` rows).
fn prefill_shape(pos0: usize, ntok: usize) -> AttnShape {
    AttnShape {
        n_head: lite::N_HEAD,
        d_nope: lite::D_NOPE,
        kv_lora: lite::KV_LORA,
        n_rope: lite::N_ROPE,
        ctx: pos0 + ntok,
        cache: CacheType::F16,
    }
}

/// Cache rows a chunk of `ntok` tokens at `pos0` must stream: block `(group, k)` serves tokens
/// `2k, 2k + 1` and reads rows `0..=pos0 + its last token` once for both, per head group.
fn streamed_rows(pos0: usize, ntok: usize) -> usize {
    let pair = FLASH_PREFILL_TOKENS as usize;
    let per_group: usize = (0..ntok.div_ceil(pair))
        .map(|k| pos0 + (pair * k + pair - 1).min(ntok - 1) + 1)
        .sum();
    per_group * flash_head_groups(lite::N_HEAD as u32) as usize
}

/// Buffers of `flash_latent_prefill` for `s.rows` tokens at `POS0`: `q_abs`, `q_pe` (token
/// major), the f16 cache of `POS0 + s.rows` rows (the chunk's own rows written), the state at
/// `POS0`, `o_lat`. Bound: the streamed cache rows ([`streamed_rows`]) and the query once; the
/// state's `pos` (read once per thread) is not counted.
fn flash_buffers<const POS0: usize>(s: Shape) -> Vec<BufSpec> {
    let ntok = s.rows;
    let rows = ntok * lite::N_HEAD;
    let ctx = POS0 + ntok;
    let f32s = |param, n| BufSpec::new(param, Contents::F32 { n, std: 1.0 });
    vec![
        f32s("q_abs", rows * lite::KV_LORA),
        f32s("q_pe", rows * lite::N_ROPE),
        BufSpec {
            param: "cache",
            contents: Contents::F16 {
                n: ctx * s.cols,
                std: 1.0,
            },
            moved: Some(streamed_rows(POS0, ntok.max(1)) * s.cols * 2),
        },
        step_state_at(0, POS0),
        BufSpec::new(
            "o_lat",
            Contents::Output {
                bytes: rows * lite::KV_LORA * 4,
            },
        ),
    ]
}

fn flash_launch<const POS0: usize>(d: &mut Device, b: &[Buf], s: Shape) -> Result<(), KernelError> {
    let bufs = PrefillBufs {
        q_abs: &b[0],
        q_pe: &b[1],
        cache: &b[2],
        state: &b[3],
        o_lat: &b[4],
        temperature: None,
    };
    let kq_scale = 1.0 / ((lite::D_NOPE + lite::N_ROPE) as f32).sqrt();
    attn::flash_latent_prefill(d, &prefill_shape(POS0, s.rows), &bufs, s.rows, kq_scale)
}

/// `flash_latent_prefill` of a first chunk (positions 0..512), f16 cache, 16 heads (one head
/// group), kv_lora 512, rope 64. `rows` is the chunk's tokens; the 512-token query and output
/// (35 MB) are over the simulator's buffer cap, so it runs a shorter chunk at the same start
/// (224 tokens, a few seconds).
pub const FLASH_PREFILL_0: Case = Case {
    kernel: "flash_latent_prefill",
    tensor: "kv_cache@0+512tok",
    shape: Shape {
        rows: CHUNK,
        cols: lite::CACHE_ROW,
    },
    buffers: flash_buffers::<0>,
    launch: flash_launch::<0>,
};

/// `flash_latent_prefill` of a chunk at positions 3584..4096 (the decode benches' deepest
/// cache), as [`FLASH_PREFILL_0`]. The simulator runs 160 tokens at 3584 (the buffer cap; about
/// a minute, where the whole chunk's 3.4× as many streamed rows would take over 3).
pub const FLASH_PREFILL_3584: Case = Case {
    kernel: "flash_latent_prefill",
    tensor: "kv_cache@3584+512tok",
    shape: Shape {
        rows: CHUNK,
        cols: lite::CACHE_ROW,
    },
    buffers: flash_buffers::<3584>,
    launch: flash_launch::<3584>,
};

/// The chunk's `ExpertSelection`s: `ntok` tokens; only the `n_used` ids (`ids`) or weights
/// (`weights`) of each are required, 4 bytes a slot.
fn selections(ntok: usize) -> BufSpec {
    BufSpec {
        param: "sel",
        contents: Contents::Selections {
            ntok,
            n_expert: lite::N_EXPERT,
            n_used: lite::N_USED,
        },
        moved: Some(ntok * lite::N_USED * 4),
    }
}

/// A list of the routing of `ntok` tokens (as [`routing`], at the shape that runs).
fn routing_of(param: &'static str, ntok: usize, list: RoutingList) -> BufSpec {
    BufSpec::new(
        param,
        Contents::Routing {
            ntok,
            n_expert: lite::N_EXPERT,
            n_used: lite::N_USED,
            list,
        },
    )
}

/// `moe_pairs` of the chunk: `rows` tokens' selections (only their ids required) into the
/// expert-sorted lists; one block.
pub const MOE_PAIRS: Case = Case {
    kernel: "moe_pairs",
    tensor: "ffn_gate_inp_out@512tok",
    shape: Shape {
        rows: CHUNK,
        cols: lite::N_EXPERT,
    },
    buffers: |s| {
        let out = |param, bytes| BufSpec::new(param, Contents::Output { bytes });
        let n_pairs = s.rows * lite::N_USED;
        vec![
            selections(s.rows),
            out("expert_start", (s.cols + 1) * 4),
            out("pair_token", n_pairs * 4),
            out("pair_of", n_pairs * 4),
            out("pair_self", n_pairs * 4),
        ]
    },
    launch: |d, b, s| {
        let outs = (&b[1], &b[2], &b[3], &b[4]);
        moe_prefill::moe_pairs(d, &b[0], outs, s.rows, lite::N_USED, s.cols)
    },
};

/// `moe_swiglu_q8_1` between the routed gate/up and down products: `rows` pairs (3072 = 512
/// tokens × 6) of the 1408-wide separate gate and up outputs, read once, into q8_1. The 35 MB
/// of gate and up are over the simulator's cap: it runs fewer pairs.
pub const MOE_SWIGLU: Case = Case {
    kernel: "moe_swiglu_q8_1",
    tensor: "ffn_gate+up_exps@512tok",
    shape: Shape {
        rows: N_PAIRS,
        cols: lite::FF_EXPERT,
    },
    buffers: |s| {
        let f32s = |param, n| BufSpec::new(param, Contents::F32 { n, std: 1.0 });
        vec![
            f32s("gate", s.rows * s.cols),
            f32s("up", s.rows * s.cols),
            BufSpec::new(
                "act",
                Contents::Output {
                    bytes: q8_1_bytes(s.rows * s.cols),
                },
            ),
        ]
    },
    launch: |d, b, s| {
        let gate_up = GateUp::Separate {
            gate: &b[0],
            up: &b[1],
        };
        moe_prefill::moe_swiglu_q8_1(d, gate_up, &b[2], s.rows, s.cols)
    },
};

/// `moe_combine` of the chunk: `rows` tokens, each the weighted sum of its 6 routed experts'
/// down rows (found through `pair_of`) plus the shared experts' row and the residual. Bound:
/// the selections' weights, `pair_of`, `down`, `shared` and `resid` once. The 25 MB `down` is
/// over the simulator's cap: it runs fewer tokens.
pub const MOE_COMBINE: Case = Case {
    kernel: "moe_combine",
    tensor: "ffn_moe_out@512tok",
    shape: Shape {
        rows: CHUNK,
        cols: lite::N_EMBD,
    },
    buffers: |s| {
        let f32s = |param, n| BufSpec::new(param, Contents::F32 { n, std: 1.0 });
        let n = s.rows * s.cols;
        vec![
            selections(s.rows),
            routing_of("pair_of", s.rows, RoutingList::PairOf),
            f32s("down", n * lite::N_USED),
            f32s("shared", n),
            f32s("resid", n),
            BufSpec::new("y", Contents::Output { bytes: n * 4 }),
        ]
    },
    launch: |d, b, s| {
        let bufs = (&b[0], &b[1], &b[2], &b[3], &b[4], &b[5]);
        moe_prefill::moe_combine(d, bufs, s.cols, s.rows, lite::N_USED)
    },
};
