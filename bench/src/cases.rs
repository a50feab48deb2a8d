//! The table of kernel benches at DeepSeek-V2-Lite's decode shapes and a 512-token prefill chunk
//! (shapes and types: docs/deepseek2-model.md#tensors, docs/deepseek2-model.md#quant-mixes).
//!
//! One [`Case`] is one kernel launch as the decoder makes it: which tensor it stands for, its
//! shape, the buffers it needs and a launch through the checked launcher of
//! [`ingot_kernels::ops`]. Adding a kernel is one entry in [`CASES`]; a gemv type is one line
//! per tensor through `gemv`. The cases with structured buffers live in submodules:
//! `attention` (fused q/kv_a gemv, rope, flash at two cache depths, merge, `attn_v_b` to q8_1),
//! `moe` (router norm and gemv, selection, gate/up, down), `head` (fused lm_head argmax) and
//! `prefill` (a 512-token chunk's `mmq`/`mmq_moe` products, flash attention and MoE glue).

mod attention;
mod head;
mod moe;
mod prefill;

use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::ExpertSelection;
use ingot_abi::step::StepState;
use ingot_gguf::GgmlType;
use ingot_kernels::ops::embed::EmbedType;
use ingot_kernels::ops::gemv::{GemvType, Grouping};
use ingot_kernels::{ops, KernelError};

use crate::device::{Buf, Device};

/// DeepSeek-V2-Lite dimensions used by the shapes below.
pub mod lite {
    /// Hidden size.
    pub const N_EMBD: usize = 2048;
    /// Query projection rows: 16 heads × (128 nope + 64 rope).
    pub const Q_ROWS: usize = 16 * 192;
    /// `attn_kv_a_mqa` rows: 512 latent + 64 rope.
    pub const KV_A_ROWS: usize = 512 + 64;
    /// Latent (kv_lora) width.
    pub const KV_LORA: usize = 512;
    /// Dense FFN width of layer 0.
    pub const FF_DENSE: usize = 10944;
    /// Shared-expert FFN width (2 shared experts × 1408).
    pub const FF_SHARED: usize = 2 * 1408;
    /// Vocabulary (lm_head rows).
    pub const VOCAB: usize = 102_400;
    /// Attention heads.
    pub const N_HEAD: usize = 16;
    /// Per-head query width: 128 nope + 64 rope.
    pub const D_QK: usize = 192;
    /// Per-head nope (non-rotary) width.
    pub const D_NOPE: usize = 128;
    /// Per-head value width.
    pub const D_V: usize = 128;
    /// Routed experts stacked in each MoE tensor (`expert_count`).
    pub const N_EXPERT: usize = 64;
    /// Routed experts per token (`expert_used_count`).
    pub const N_USED: usize = 6;
    /// Width of one routed expert (`expert_feed_forward_length`).
    pub const FF_EXPERT: usize = 1408;
    /// Rotary dims per head and of the shared rope key.
    pub const N_ROPE: usize = 64;
    /// f16 elements per latent cache row: 512 latent + 64 rope (1152 bytes).
    pub const CACHE_ROW: usize = KV_LORA + N_ROPE;
    /// SMs of the H200 the GPU benches run on; flash segments are sized from it as the
    /// decoder's plan does (one block per SM at most).
    pub const BENCH_SMS: usize = 132;
    /// RMS norm epsilon.
    pub const RMS_EPS: f32 = 1e-6;
}

/// Rows and row length of one launch. For a gemv a row is an output element; for
/// element-wise kernels `rows` is 1 and `cols` the vector length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shape {
    pub rows: usize,
    pub cols: usize,
}

/// What a bench buffer holds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Contents {
    /// `rows × cols` Gaussian weights quantized to `ty` by the reference quantizer.
    Weights {
        ty: GgmlType,
        rows: usize,
        cols: usize,
    },
    /// `n` Gaussian activations as q8_1 blocks.
    ActQ8_1 { n: usize },
    /// `n` Gaussian f32 values with standard deviation `std`.
    F32 { n: usize, std: f32 },
    /// `n` Gaussian f16 values with standard deviation `std` (the latent cache rows).
    F16 { n: usize, std: f32 },
    /// `rows` latent cache rows of `width` Gaussian values (standard deviation 1) in the q8_0
    /// row format (`CacheType::Q8_0`).
    LatentQ8_0 { rows: usize, width: usize },
    /// One `StepState` feeding `token` at position `pos` (read, and written by argmax).
    StepState { token: u32, pos: u32 },
    /// One `ExpertSelection` naming `n_used` distinct experts below `n_expert`, spread over
    /// the stacked tensor, with positive weights summing to 1.
    Selection { n_expert: usize, n_used: usize },
    /// `pairs` f64 rope frequencies `base^(-2i / (2·pairs))` (base 10000).
    RopeFreq { pairs: usize },
    /// `pairs` flash-attention partial `(m, l)` pairs: a Gaussian running maximum and a
    /// positive softmax denominator.
    SoftmaxStats { pairs: usize },
    /// `ntok` `ExpertSelection`s of a prefill chunk, `n_used` distinct experts below
    /// `n_expert` each (`crate::inputs::chunk_selections`).
    Selections {
        ntok: usize,
        n_expert: usize,
        n_used: usize,
    },
    /// One list of the expert-sorted routing of the same chunk's [`Contents::Selections`]
    /// (`crate::inputs::chunk_routing`: what `moe_pairs` writes), as u32 words.
    Routing {
        ntok: usize,
        n_expert: usize,
        n_used: usize,
        list: RoutingList,
    },
    /// One list of the constant pair list of the per-head products of a `ntok`-token chunk
    /// (heads as experts, pairs sorted by head): [`RoutingList::ExpertStart`] is
    /// `h·ntok` for `h ≤ n_head`; [`RoutingList::PairToken`] (also the `pair_row` list) holds
    /// `t·n_head + h` at pair `h·ntok + t`.
    HeadPairs {
        ntok: usize,
        n_head: usize,
        list: RoutingList,
    },
    /// `bytes` the kernel writes (uploaded as zeros).
    Output { bytes: usize },
    /// The identity expert table (`ingot_abi::launch::moe`) over the case's buffer `stacked`,
    /// `n_expert` equal slabs: written after the upload, from that buffer's device address
    /// ([`crate::setup::upload`]).
    ExpertTable { stacked: usize, n_expert: usize },
}

/// Which list of a routing a [`Contents::Routing`] / [`Contents::HeadPairs`] buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoutingList {
    /// `n_expert + 1` offsets into the sorted pairs.
    ExpertStart,
    /// The token (input row) of each sorted pair.
    PairToken,
    /// Where each choice `t·n_used + s` landed among the sorted pairs.
    PairOf,
    /// The identity `p` (`moe_pairs`' `pair_self`, the FFN products' `pair_row`).
    PairSelf,
}

/// One buffer of a launch, in the order the launch function takes them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BufSpec {
    /// The kernel parameter it fills.
    pub param: &'static str,
    pub contents: Contents,
    /// Bytes of it the kernel must read or write; `None`: all of it. (A MoE kernel reads only
    /// the selected experts of a stacked tensor.)
    pub moved: Option<usize>,
}

impl BufSpec {
    pub const fn new(param: &'static str, contents: Contents) -> BufSpec {
        BufSpec {
            param,
            contents,
            moved: None,
        }
    }

    /// Whether the kernel writes this buffer (else it reads it).
    pub fn is_output(&self) -> bool {
        matches!(self.contents, Contents::Output { .. })
    }

    /// Size in bytes, `None` if the shape is not representable (see [`crate::inputs`]).
    pub fn bytes(&self) -> Option<usize> {
        match self.contents {
            Contents::Weights { ty, rows, cols } => {
                crate::inputs::weight_bytes(ty, rows, cols).ok()
            }
            Contents::ActQ8_1 { n } => {
                (n.is_multiple_of(QK8_1)).then_some(n / QK8_1 * size_of::<BlockQ8_1>())
            }
            Contents::F32 { n, .. } => n.checked_mul(4),
            Contents::F16 { n, .. } => n.checked_mul(2),
            Contents::LatentQ8_0 { rows, width } => rows.checked_mul(
                ingot_abi::launch::CacheType::Q8_0.row_bytes(u32::try_from(width).ok()?) as usize,
            ),
            Contents::StepState { .. } => Some(size_of::<StepState>()),
            Contents::Selection { .. } => Some(size_of::<ExpertSelection>()),
            Contents::RopeFreq { pairs } => pairs.checked_mul(8),
            Contents::SoftmaxStats { pairs } => pairs.checked_mul(8),
            Contents::Selections { ntok, .. } => ntok.checked_mul(size_of::<ExpertSelection>()),
            Contents::Routing {
                ntok,
                n_expert,
                n_used,
                list,
            } => match list {
                RoutingList::ExpertStart => n_expert.checked_add(1)?.checked_mul(4),
                _ => ntok.checked_mul(n_used)?.checked_mul(4),
            },
            Contents::HeadPairs { ntok, n_head, list } => match list {
                RoutingList::ExpertStart => n_head.checked_add(1)?.checked_mul(4),
                _ => ntok.checked_mul(n_head)?.checked_mul(4),
            },
            Contents::Output { bytes } => Some(bytes),
            Contents::ExpertTable { n_expert, .. } => n_expert.checked_mul(8),
        }
    }

    /// Bytes the kernel must move through this buffer.
    pub fn moved_bytes(&self) -> Option<usize> {
        self.moved.or_else(|| self.bytes())
    }
}

/// Launches a case's kernel on `bufs` (ordered as the case's [`BufSpec`]s) at `shape`.
pub type LaunchFn = fn(&mut Device, &[Buf], Shape) -> Result<(), KernelError>;

/// One kernel bench.
#[derive(Clone, Copy)]
pub struct Case {
    /// PTX symbol of the kernel.
    pub kernel: &'static str,
    /// The model tensor or step it stands for.
    pub tensor: &'static str,
    /// The real decode shape.
    pub shape: Shape,
    /// The buffers at a given shape (the simulator may run fewer rows than the real shape).
    pub buffers: fn(Shape) -> Vec<BufSpec>,
    pub launch: LaunchFn,
}

impl Case {
    /// `kernel/tensor`, the bench's id.
    pub fn id(&self) -> String {
        format!("{}/{}", self.kernel, self.tensor)
    }

    /// Whether the required bytes count reads a GPU serves from its L2 by design: the prefill
    /// products (`mmq_*`) read each weight tile once per token tile and each activation tile
    /// once per row tile. Their GB/s is then no DRAM figure, and a value above the copy
    /// bandwidth does not make the run invalid.
    pub fn counts_cache_rereads(&self) -> bool {
        self.kernel.starts_with("mmq_")
    }

    /// Bytes the kernel must read and write at `shape`: `(read, written)`.
    pub fn required_bytes(&self, shape: Shape) -> Option<(usize, usize)> {
        let (mut read, mut written) = (0usize, 0usize);
        for b in (self.buffers)(shape) {
            let m = b.moved_bytes()?;
            if b.is_output() {
                written = written.checked_add(m)?;
            } else {
                read = read.checked_add(m)?;
            }
        }
        Some((read, written))
    }

    /// Bytes of all buffers at `shape` (what one rotation set allocates).
    pub fn buffer_bytes(&self, shape: Shape) -> Option<usize> {
        (self.buffers)(shape)
            .iter()
            .try_fold(0usize, |acc, b| acc.checked_add(b.bytes()?))
    }
}

fn gemv_buffers(ty: GgmlType, s: Shape) -> Vec<BufSpec> {
    vec![
        BufSpec::new(
            "w",
            Contents::Weights {
                ty,
                rows: s.rows,
                cols: s.cols,
            },
        ),
        BufSpec::new("x", Contents::ActQ8_1 { n: s.cols }),
        BufSpec::new("y", Contents::Output { bytes: s.rows * 4 }),
    ]
}

/// A plain gemv kernel: its symbol, the buffers for its weight type and its checked launcher.
pub struct GemvKernel {
    pub kernel: &'static str,
    pub buffers: fn(Shape) -> Vec<BufSpec>,
    pub launch: LaunchFn,
}

/// Declares the [`GemvKernel`] of one weight type (`ops::gemv::GemvType` variant, whose
/// registry row names the kernel, and the matching `GgmlType` variant).
macro_rules! gemv_kernel {
    ($name:ident, $gemv:ident, $ggml:ident) => {
        pub const $name: GemvKernel = GemvKernel {
            kernel: GemvType::$gemv.plain().desc.name,
            buffers: |s| gemv_buffers(GgmlType::$ggml, s),
            launch: |d, b, s| {
                ops::gemv::gemv_q8_1(d, GemvType::$gemv, (&b[0], &b[1], &b[2]), s.rows, s.cols)
            },
        };
    };
}

gemv_kernel!(GEMV_Q4_0, Q4_0, Q4_0);
gemv_kernel!(GEMV_Q4_1, Q4_1, Q4_1);
gemv_kernel!(GEMV_Q5_0, Q5_0, Q5_0);
gemv_kernel!(GEMV_IQ4_NL, Iq4Nl, Iq4Nl);
gemv_kernel!(GEMV_Q2K, Q2K, Q2K);
gemv_kernel!(GEMV_Q3K, Q3K, Q3K);
gemv_kernel!(GEMV_Q4K, Q4K, Q4K);
gemv_kernel!(GEMV_Q5K, Q5K, Q5K);
gemv_kernel!(GEMV_Q6K, Q6K, Q6K);
gemv_kernel!(GEMV_Q8_0, Q8_0, Q8_0);
gemv_kernel!(GEMV_IQ4_XS, Iq4Xs, Iq4Xs);
gemv_kernel!(GEMV_F32, F32, F32);
gemv_kernel!(GEMV_F16, F16, F16);
gemv_kernel!(GEMV_BF16, Bf16, Bf16);
gemv_kernel!(GEMV_IQ2_XXS, Iq2Xxs, Iq2Xxs);
gemv_kernel!(GEMV_IQ2_XS, Iq2Xs, Iq2Xs);
gemv_kernel!(GEMV_IQ2_S, Iq2S, Iq2S);
gemv_kernel!(GEMV_IQ3_XXS, Iq3Xxs, Iq3Xxs);
gemv_kernel!(GEMV_IQ3_S, Iq3S, Iq3S);
gemv_kernel!(GEMV_IQ1_S, Iq1S, Iq1S);
gemv_kernel!(GEMV_IQ1_M, Iq1M, Iq1M);

/// Buffers of the `m`-column Q4_K gemv ([`ops::gemv::gemv_cols_q4k`]): the weights once, `m`
/// activation columns and `m` output columns.
fn gemv_cols_buffers(m: usize, s: Shape) -> Vec<BufSpec> {
    let mut b = gemv_buffers(GgmlType::Q4K, s);
    b[1] = BufSpec::new("x", Contents::ActQ8_1 { n: m * s.cols });
    b[2] = BufSpec::new(
        "y",
        Contents::Output {
            bytes: m * s.rows * 4,
        },
    );
    b
}

/// The `m`-column Q4_K gemv (a speculative verify's shape), `m` = 2, 3, 4.
macro_rules! gemv_cols_kernel {
    ($name:ident, $m:literal) => {
        pub const $name: GemvKernel = GemvKernel {
            kernel: ingot_abi::launch::GEMV_COLS_Q4K[$m - 2].desc.name,
            buffers: |s| gemv_cols_buffers($m, s),
            launch: |d, b, s| {
                ops::gemv::gemv_cols_q4k(d, $m, (&b[0], &b[1], &b[2]), s.rows, s.cols)
            },
        };
    };
}

gemv_cols_kernel!(GEMV_COLS2_Q4K, 2);
gemv_cols_kernel!(GEMV_COLS3_Q4K, 3);
gemv_cols_kernel!(GEMV_COLS4_Q4K, 4);

/// A `y = W·x` bench of tensor `tensor`: `W` is `rows × cols`, `x` q8_1, `y` f32.
const fn gemv(k: &GemvKernel, tensor: &'static str, rows: usize, cols: usize) -> Case {
    Case {
        kernel: k.kernel,
        tensor,
        shape: Shape { rows, cols },
        buffers: k.buffers,
        launch: k.launch,
    }
}

/// MLA absorption (docs/decode-math.md#mla-attention step 7): `attn_k_b` is 16 heads × 512 rows of
/// 128 weights, head `h` reading the 128 `q_nope` values at float `192·h` of the query (stride 6
/// q8_1 blocks).
const K_B_GROUP: Grouping = Grouping {
    rows_per_group: lite::KV_LORA,
    x_group_stride: lite::D_QK / QK8_1,
};
/// `attn_v_b`: 16 heads × 128 rows of 512 weights, head `h` reading its 512 latent outputs.
const V_B_GROUP: Grouping = Grouping {
    rows_per_group: lite::D_V,
    x_group_stride: lite::KV_LORA / QK8_1,
};

/// Buffers of a grouped gemv: `x` holds every group's slice (`ceil(rows / rows_per_group)`
/// groups of `x_group_stride` blocks, the last one `cols / 32` blocks long).
fn grouped_buffers(ty: GgmlType, g: Grouping, s: Shape) -> Vec<BufSpec> {
    let groups = s.rows.div_ceil(g.rows_per_group).max(1);
    let x_blocks = (groups - 1) * g.x_group_stride + s.cols / QK8_1;
    let mut b = gemv_buffers(ty, s);
    b[1] = BufSpec::new(
        "x",
        Contents::ActQ8_1 {
            n: x_blocks * QK8_1,
        },
    );
    b
}

/// The StepState buffer feeding token `token` at position `pos`. Its 16 bytes of bookkeeping
/// (read, and written by argmax) are not counted as required traffic.
/// Bytes of the q8_1 blocks holding `values` activations (padded to whole 32-value blocks).
fn q8_1_bytes(values: usize) -> usize {
    values.div_ceil(QK8_1) * size_of::<BlockQ8_1>()
}

/// The residual row and the norm weights every rmsnorm case reads.
fn norm_inputs(s: Shape) -> [BufSpec; 2] {
    [
        BufSpec::new(
            "x",
            Contents::F32 {
                n: s.rows * s.cols,
                std: 1.0,
            },
        ),
        BufSpec::new(
            "w",
            Contents::F32 {
                n: s.cols,
                std: 0.1,
            },
        ),
    ]
}

fn step_state_at(token: usize, pos: usize) -> BufSpec {
    BufSpec {
        param: "state",
        contents: Contents::StepState {
            token: u32::try_from(token).unwrap_or(u32::MAX),
            pos: u32::try_from(pos).unwrap_or(u32::MAX),
        },
        moved: Some(0),
    }
}

/// The StepState buffer of the embedding and argmax kernels, feeding `token` at position 0.
fn step_state(token: usize) -> BufSpec {
    step_state_at(token, 0)
}

/// Every kernel bench, in decode order (V2-Lite Q4_K_M types,
/// docs/deepseek2-model.md#quant-mixes).
pub const CASES: &[Case] = &[
    Case {
        kernel: "embed_q4k",
        tensor: "token_embd",
        shape: Shape {
            rows: lite::VOCAB,
            cols: lite::N_EMBD,
        },
        buffers: |s| {
            let mut table = BufSpec::new(
                "table",
                Contents::Weights {
                    ty: GgmlType::Q4K,
                    rows: s.rows,
                    cols: s.cols,
                },
            );
            // One row of the table is read: the token's.
            table.moved = crate::inputs::weight_bytes(GgmlType::Q4K, 1, s.cols).ok();
            vec![
                table,
                step_state(s.rows / 2),
                BufSpec::new("y", Contents::Output { bytes: s.cols * 4 }),
            ]
        },
        launch: |d, b, s| {
            ops::embed::embed(
                d,
                EmbedType::Q4K,
                (&b[0], &b[1], &b[2]),
                (s.cols, s.rows),
                None,
            )
        },
    },
    Case {
        kernel: "rmsnorm_q8_1",
        tensor: "attn_norm",
        shape: Shape {
            rows: 1,
            cols: lite::N_EMBD,
        },
        buffers: |s| {
            let [x, w] = norm_inputs(s);
            vec![
                x,
                w,
                BufSpec::new(
                    "y",
                    Contents::Output {
                        bytes: q8_1_bytes(s.rows * s.cols),
                    },
                ),
            ]
        },
        launch: |d, b, s| {
            ops::norm::rmsnorm_q8_1(d, (&b[0], &b[1], &b[2]), s.rows, s.cols, lite::RMS_EPS)
        },
    },
    Case {
        kernel: "rmsnorm_f32",
        tensor: "attn_norm",
        shape: Shape {
            rows: 1,
            cols: lite::N_EMBD,
        },
        buffers: |s| {
            let [x, w] = norm_inputs(s);
            vec![
                x,
                w,
                BufSpec::new(
                    "y",
                    Contents::Output {
                        bytes: s.rows * s.cols * 4,
                    },
                ),
            ]
        },
        launch: |d, b, s| ops::rmsnorm_f32(d, &b[0], &b[1], &b[2], s.rows, s.cols, lite::RMS_EPS),
    },
    Case {
        kernel: "quantize_q8_1",
        tensor: "attn_norm_out",
        shape: Shape {
            rows: 1,
            cols: lite::N_EMBD,
        },
        buffers: |s| {
            vec![
                BufSpec::new(
                    "x",
                    Contents::F32 {
                        n: s.cols,
                        std: 1.0,
                    },
                ),
                BufSpec::new(
                    "y",
                    Contents::Output {
                        bytes: q8_1_bytes(s.cols),
                    },
                ),
            ]
        },
        launch: |d, b, s| ops::quantize_q8_1(d, &b[0], &b[1], s.cols),
    },
    gemv(&GEMV_Q4K, "attn_q", lite::Q_ROWS, lite::N_EMBD),
    gemv(&GEMV_Q4K, "attn_kv_a_mqa", lite::KV_A_ROWS, lite::N_EMBD),
    attention::GEMV2_Q4K,
    attention::ROPE_KV_Q8_1,
    attention::GEMV2_ROPE_Q4K,
    Case {
        kernel: "gemv_grouped_q5_0_q8_1",
        tensor: "attn_k_b",
        shape: Shape {
            rows: lite::N_HEAD * lite::KV_LORA,
            cols: lite::D_NOPE,
        },
        buffers: |s| grouped_buffers(GgmlType::Q5_0, K_B_GROUP, s),
        launch: |d, b, s| {
            let bufs = (&b[0], &b[1], &b[2]);
            ops::gemv::gemv_grouped_q8_1(d, GemvType::Q5_0, bufs, s.rows, s.cols, K_B_GROUP)
        },
    },
    attention::FLASH_MMA_1024,
    attention::FLASH_MMA_4096,
    attention::FLASH_1024,
    attention::FLASH_4096,
    attention::FLASH_MMA_Q8_0_4096,
    attention::MERGE_Q8_1,
    Case {
        kernel: "gemv_grouped_q4k_q8_1",
        tensor: "attn_v_b",
        shape: Shape {
            rows: lite::N_HEAD * lite::D_V,
            cols: lite::KV_LORA,
        },
        buffers: |s| grouped_buffers(GgmlType::Q4K, V_B_GROUP, s),
        launch: |d, b, s| {
            let bufs = (&b[0], &b[1], &b[2]);
            ops::gemv::gemv_grouped_q8_1(d, GemvType::Q4K, bufs, s.rows, s.cols, V_B_GROUP)
        },
    },
    attention::V_B_Q8_1_OUT,
    attention::MERGE_V_B_Q4K,
    gemv(&GEMV_Q4K, "attn_output", lite::N_EMBD, lite::N_EMBD),
    // The same matrix against 2, 3, 4 activation columns in one weight stream (issue 41's
    // verify): instructions per column against the plain gemv's.
    gemv(&GEMV_COLS2_Q4K, "attn_output", lite::N_EMBD, lite::N_EMBD),
    gemv(&GEMV_COLS3_Q4K, "attn_output", lite::N_EMBD, lite::N_EMBD),
    gemv(&GEMV_COLS4_Q4K, "attn_output", lite::N_EMBD, lite::N_EMBD),
    // The same matrix in the other weight types of the llama.cpp mixes.
    gemv(&GEMV_Q5K, "attn_output", lite::N_EMBD, lite::N_EMBD),
    gemv(&GEMV_Q5_0, "attn_output", lite::N_EMBD, lite::N_EMBD),
    gemv(&GEMV_Q4_0, "attn_output", lite::N_EMBD, lite::N_EMBD),
    gemv(&GEMV_IQ4_NL, "attn_output", lite::N_EMBD, lite::N_EMBD),
    gemv(&GEMV_Q4K, "ffn_gate(dense)", lite::FF_DENSE, lite::N_EMBD),
    gemv(&GEMV_Q8_0, "ffn_down(dense)", lite::N_EMBD, lite::FF_DENSE),
    moe::RMSNORM_Q8_1_F32,
    moe::ROUTER_GEMV,
    moe::ROUTE_CASE,
    moe::GATE_UP_Q4K,
    moe::GATE_UP_Q3K,
    moe::DOWN_Q5_0_Q4K,
    moe::DOWN_Q8_0_Q6K,
    gemv(&GEMV_Q4K, "ffn_gate_shexp", lite::FF_SHARED, lite::N_EMBD),
    gemv(&GEMV_Q6K, "ffn_down_shexp", lite::N_EMBD, lite::FF_SHARED),
    gemv(&GEMV_Q3K, "attn_q", lite::Q_ROWS, lite::N_EMBD),
    gemv(&GEMV_Q3K, "ffn_gate_shexp", lite::FF_SHARED, lite::N_EMBD),
    gemv(&GEMV_Q6K, "output", lite::VOCAB, lite::N_EMBD),
    // The q2_k and iq4_xs mixes' attn_q, and Q4_1 (GLM-4.7-Flash files) at the same shape.
    gemv(&GEMV_Q2K, "attn_q", lite::Q_ROWS, lite::N_EMBD),
    gemv(&GEMV_IQ4_XS, "attn_q", lite::Q_ROWS, lite::N_EMBD),
    gemv(&GEMV_Q4_1, "attn_output", lite::N_EMBD, lite::N_EMBD),
    // Float projections (F32/F16/BF16 files) at the same shape.
    gemv(&GEMV_F32, "attn_output", lite::N_EMBD, lite::N_EMBD),
    gemv(&GEMV_F16, "attn_output", lite::N_EMBD, lite::N_EMBD),
    gemv(&GEMV_BF16, "attn_output", lite::N_EMBD, lite::N_EMBD),
    // The grid types (unsloth's dynamic V3/R1 files) at the attn_q shape.
    gemv(&GEMV_IQ2_XXS, "attn_q", lite::Q_ROWS, lite::N_EMBD),
    gemv(&GEMV_IQ2_XS, "attn_q", lite::Q_ROWS, lite::N_EMBD),
    gemv(&GEMV_IQ2_S, "attn_q", lite::Q_ROWS, lite::N_EMBD),
    gemv(&GEMV_IQ3_XXS, "attn_q", lite::Q_ROWS, lite::N_EMBD),
    gemv(&GEMV_IQ3_S, "attn_q", lite::Q_ROWS, lite::N_EMBD),
    gemv(&GEMV_IQ1_S, "attn_q", lite::Q_ROWS, lite::N_EMBD),
    gemv(&GEMV_IQ1_M, "attn_q", lite::Q_ROWS, lite::N_EMBD),
    Case {
        kernel: "argmax_step",
        tensor: "logits",
        shape: Shape {
            rows: 1,
            cols: lite::VOCAB,
        },
        buffers: |s| {
            vec![
                BufSpec::new(
                    "logits",
                    Contents::F32 {
                        n: s.cols,
                        std: 1.0,
                    },
                ),
                step_state(0),
            ]
        },
        launch: |d, b, s| ops::head::argmax_step(d, &b[0], &b[1], s.cols),
    },
    head::GEMV_ARGMAX_Q6K,
    head::GEMV_ARGMAX_COLS2_Q6K,
    head::GEMV_ARGMAX_COLS3_Q6K,
    head::GEMV_ARGMAX_COLS4_Q6K,
    attention::MERGE_V_B_O_Q4K,
    attention::MERGE_V_B_O_COLS2_Q4K,
    attention::MERGE_V_B_O_COLS3_Q4K,
    attention::MERGE_V_B_O_COLS4_Q4K,
    // A 512-token prefill chunk of a layer, in plan order.
    prefill::MMQ_MOE_Q5_0,
    prefill::FLASH_PREFILL_0,
    prefill::FLASH_PREFILL_3584,
    prefill::MMQ_Q4K,
    prefill::MOE_PAIRS,
    prefill::MMQ_MOE_Q4K,
    prefill::MOE_SWIGLU,
    prefill::MMQ_Q6K,
    prefill::MOE_COMBINE,
    // The other weight types' dense products, at the same tensors' shapes.
    prefill::MMQ_Q5K,
    prefill::MMQ_Q3K,
    prefill::MMQ_Q8_0,
    prefill::MMQ_Q5_0,
    prefill::MMQ_Q4_0,
    prefill::MMQ_IQ4_NL,
];

/// Every distinct weight type [`CASES`] quantizes (for the input checks).
pub fn weight_types() -> Vec<GgmlType> {
    let mut types = Vec::new();
    for c in CASES {
        for b in (c.buffers)(Shape {
            rows: 1,
            cols: c.shape.cols,
        }) {
            if let Contents::Weights { ty, .. } = b.contents {
                if !types.contains(&ty) {
                    types.push(ty);
                }
            }
        }
    }
    types
}
