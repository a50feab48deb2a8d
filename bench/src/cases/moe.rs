//! The MoE FFN of a V2-Lite layer: router norm and gemv, expert selection, the fused
//! gate/up kernel and the fused down kernel (docs/decode-math.md#moe-ffn).
//!
//! The routed tensors are stacked `[N_EXPERT][rows][cols]` and allocated whole (a GPU bench
//! must not find them in L2), but a step reads only the `N_USED` selected experts: their rows
//! and the shared experts' are the required bytes.

use ingot_abi::launch::ExpertSelection;
use ingot_gguf::GgmlType;
use ingot_kernels::ops::gemv::GemvType;
use ingot_kernels::ops::moe::{DownBufs, FfnShape, GateUpBufs, Gating, RouteParams};
use ingot_kernels::{ops, KernelError};

use super::{lite, norm_inputs, q8_1_bytes, BufSpec, Case, Contents, Shape};
use crate::device::{Buf, Device};

/// Bytes of `values` activations as q8_1 blocks, rounded up to whole blocks (the reduced-rows probe
/// asks for shapes whose widths are not multiples of 32). The router's selection
/// (`ExpertSelection`, 128 bytes): `N_USED` ids and weights are what the kernels use.
fn selection() -> BufSpec {
    BufSpec {
        param: "sel",
        contents: Contents::Selection {
            n_expert: lite::N_EXPERT,
            n_used: lite::N_USED,
        },
        moved: Some(lite::N_USED * 8),
    }
}

/// A stacked routed tensor of `N_EXPERT` experts of `rows × cols` weights of which the
/// selected `N_USED` are read (through [`table`]).
fn routed(param: &'static str, ty: GgmlType, rows: usize, cols: usize) -> BufSpec {
    BufSpec {
        param,
        contents: Contents::Weights {
            ty,
            rows: lite::N_EXPERT * rows,
            cols,
        },
        moved: crate::inputs::weight_bytes(ty, lite::N_USED * rows, cols).ok(),
    }
}

/// The identity expert table over the case's buffer `stacked` (a [`routed`] tensor): the
/// kernel reads the `N_USED` selected entries.
fn table(param: &'static str, stacked: usize) -> BufSpec {
    BufSpec {
        param,
        contents: Contents::ExpertTable {
            stacked,
            n_expert: lite::N_EXPERT,
        },
        moved: Some(lite::N_USED * 8),
    }
}

fn weights(param: &'static str, ty: GgmlType, rows: usize, cols: usize) -> BufSpec {
    BufSpec::new(param, Contents::Weights { ty, rows, cols })
}

/// The FFN shape of a gate/up case: `rows` is one routed expert's width (`ff`), `cols` the
/// model width; the shared experts keep their real width.
fn gate_up_shape(s: Shape) -> FfnShape {
    FfnShape {
        n_embd: s.cols,
        n_expert: lite::N_EXPERT,
        n_used: lite::N_USED,
        ff: s.rows,
        ff_sh: lite::FF_SHARED,
    }
}

/// Buffers of `moe_gate_up` with gate and up weights (routed and shared) of type `ty`.
fn gate_up_buffers(ty: GgmlType, s: Shape) -> Vec<BufSpec> {
    vec![
        BufSpec::new("x", Contents::ActQ8_1 { n: s.cols }),
        selection(),
        routed("gate_exps", ty, s.rows, s.cols),
        routed("up_exps", ty, s.rows, s.cols),
        weights("gate_sh", ty, lite::FF_SHARED, s.cols),
        weights("up_sh", ty, lite::FF_SHARED, s.cols),
        BufSpec::new(
            "act",
            Contents::Output {
                bytes: q8_1_bytes(lite::N_USED * s.rows) + q8_1_bytes(lite::FF_SHARED),
            },
        ),
        table("gate", 2),
        table("up", 3),
    ]
}

fn gate_up_launch(d: &mut Device, ty: GemvType, b: &[Buf], s: Shape) -> Result<(), KernelError> {
    let bufs = GateUpBufs {
        x: &b[0],
        sel: Some(&b[1]),
        gate: Some(&b[7]),
        up: Some(&b[8]),
        merged: false,
        gate_sh: Some(&b[4]),
        up_sh: Some(&b[5]),
        act: &b[6],
    };
    ops::moe::moe_gate_up(d, ty, &gate_up_shape(s), &bufs)
}

/// The FFN shape of a down case: `rows` is the model width (outputs), `cols` one routed
/// expert's width; the shared experts keep their real width.
fn down_shape(s: Shape) -> FfnShape {
    FfnShape {
        n_embd: s.rows,
        n_expert: lite::N_EXPERT,
        n_used: lite::N_USED,
        ff: s.cols,
        ff_sh: lite::FF_SHARED,
    }
}

/// Buffers of `moe_down` with routed weights of type `routed_ty`, shared of `shared_ty`.
fn down_buffers(routed_ty: GgmlType, shared_ty: GgmlType, s: Shape) -> Vec<BufSpec> {
    vec![
        BufSpec::new(
            "act",
            Contents::ActQ8_1 {
                n: lite::N_USED * s.cols + lite::FF_SHARED,
            },
        ),
        selection(),
        routed("down_exps", routed_ty, s.rows, s.cols),
        weights("down_sh", shared_ty, s.rows, lite::FF_SHARED),
        BufSpec::new(
            "resid",
            Contents::F32 {
                n: s.rows,
                std: 1.0,
            },
        ),
        BufSpec::new("y", Contents::Output { bytes: s.rows * 4 }),
        table("down", 2),
    ]
}

fn down_launch(
    d: &mut Device,
    (routed, shared): (GemvType, GemvType),
    b: &[Buf],
    s: Shape,
) -> Result<(), KernelError> {
    let bufs = DownBufs {
        act: &b[0],
        sel: Some(&b[1]),
        down: Some(&b[6]),
        down_sh: Some(&b[3]),
        resid: &b[4],
        y: &b[5],
        norm: None,
    };
    ops::moe::moe_down(d, routed, shared, &down_shape(s), &bufs)
}

/// V2-Lite routing: softmax over 64 experts, top 6, no groups, no renormalization, scale 1.
const ROUTE: RouteParams = RouteParams {
    gating: Gating::Softmax,
    n_expert: lite::N_EXPERT,
    n_used: lite::N_USED,
    n_group: 1,
    n_group_used: 1,
    normalize: false,
    scale: 1.0,
};

/// `ffn_norm` with the f32 copy the router reads.
pub const RMSNORM_Q8_1_F32: Case = Case {
    kernel: "rmsnorm_q8_1_f32",
    tensor: "ffn_norm",
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
            BufSpec::new(
                "y_f32",
                Contents::Output {
                    bytes: s.rows * s.cols * 4,
                },
            ),
        ]
    },
    launch: |d, b, s| {
        let bufs = (&b[0], &b[1], &b[2], &b[3]);
        ops::norm::rmsnorm_q8_1_f32(d, bufs, s.rows, s.cols, lite::RMS_EPS)
    },
};

/// The router `ffn_gate_inp` (f32, 64 × 2048).
pub const ROUTER_GEMV: Case = Case {
    kernel: "gemv_f32",
    tensor: "ffn_gate_inp",
    shape: Shape {
        rows: lite::N_EXPERT,
        cols: lite::N_EMBD,
    },
    buffers: |s| {
        vec![
            BufSpec::new(
                "w",
                Contents::F32 {
                    n: s.rows * s.cols,
                    std: crate::inputs::WEIGHT_STD,
                },
            ),
            BufSpec::new(
                "x",
                Contents::F32 {
                    n: s.cols,
                    std: crate::inputs::ACTIVATION_STD,
                },
            ),
            BufSpec::new("y", Contents::Output { bytes: s.rows * 4 }),
        ]
    },
    launch: |d, b, s| ops::gemv::gemv_f32(d, (&b[0], &b[1], &b[2]), s.rows, s.cols),
};

/// Top-6 of 64 router logits.
pub const ROUTE_CASE: Case = Case {
    kernel: "moe_route",
    tensor: "ffn_gate_inp_out",
    shape: Shape {
        rows: 1,
        cols: lite::N_EXPERT,
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
            BufSpec {
                param: "sel",
                contents: Contents::Output {
                    bytes: size_of::<ExpertSelection>(),
                },
                moved: Some(lite::N_USED * 8),
            },
        ]
    },
    launch: |d, b, s| {
        let p = RouteParams {
            n_expert: s.cols,
            ..ROUTE
        };
        ops::moe::moe_route(d, &b[0], None, &b[1], &p)
    },
};

/// Gate/up of the 6 selected experts and the shared ones, Q4_K (Q4_K_M).
pub const GATE_UP_Q4K: Case = Case {
    kernel: "moe_gate_up_q4k",
    tensor: "ffn_gate_up_exps+shexp",
    shape: Shape {
        rows: lite::FF_EXPERT,
        cols: lite::N_EMBD,
    },
    buffers: |s| gate_up_buffers(GgmlType::Q4K, s),
    launch: |d, b, s| gate_up_launch(d, GemvType::Q4K, b, s),
};

/// Gate/up, Q3_K (Q3_K_M).
pub const GATE_UP_Q3K: Case = Case {
    kernel: "moe_gate_up_q3k",
    tensor: "ffn_gate_up_exps+shexp",
    shape: Shape {
        rows: lite::FF_EXPERT,
        cols: lite::N_EMBD,
    },
    buffers: |s| gate_up_buffers(GgmlType::Q3K, s),
    launch: |d, b, s| gate_up_launch(d, GemvType::Q3K, b, s),
};

/// Down of the selected experts (Q5_0: rows of 1408 are not whole k-quant blocks) plus the
/// shared ones (Q4_K), added to the residual: Q4_K_M's common layers.
pub const DOWN_Q5_0_Q4K: Case = Case {
    kernel: "moe_down_q5_0_q4k",
    tensor: "ffn_down_exps+shexp",
    shape: Shape {
        rows: lite::N_EMBD,
        cols: lite::FF_EXPERT,
    },
    buffers: |s| down_buffers(GgmlType::Q5_0, GgmlType::Q4K, s),
    launch: |d, b, s| down_launch(d, (GemvType::Q5_0, GemvType::Q4K), b, s),
};

/// Down, Q8_0 routed + Q6_K shared: Q4_K_M's more-bits layers.
pub const DOWN_Q8_0_Q6K: Case = Case {
    kernel: "moe_down_q8_0_q6k",
    tensor: "ffn_down_exps+shexp",
    shape: Shape {
        rows: lite::N_EMBD,
        cols: lite::FF_EXPERT,
    },
    buffers: |s| down_buffers(GgmlType::Q8_0, GgmlType::Q6K, s),
    launch: |d, b, s| down_launch(d, (GemvType::Q8_0, GemvType::Q6K), b, s),
};
