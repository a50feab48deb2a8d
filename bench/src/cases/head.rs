//! The lm_head path with the argmax fused into the gemv: `gemv_argmax` folds every logit row
//! into an 8-byte accumulator, and its last block turns it into the next token; and the same on
//! the columns of a speculative verify (`gemv_argmax_colsM_q6k_q8_1`).

use ingot_gguf::GgmlType;
use ingot_kernels::ops;
use ingot_kernels::ops::gemv::GemvType;

use super::{gemv_buffers, lite, step_state, BufSpec, Case, Contents, Shape};

/// Bytes of the argmax accumulator (a packed value and index).
const ACC_BYTES: usize = 8;

/// The accumulator, allocated zeroed (the state the launch leaves behind): 8 bytes of
/// bookkeeping folded by atomics (one per thread block), not counted as required traffic, like
/// the step state.
fn folded_accumulator() -> BufSpec {
    BufSpec {
        moved: Some(0),
        ..BufSpec::new("acc", Contents::Output { bytes: ACC_BYTES })
    }
}

/// `output` (Q6_K, 102400 × 2048) with the argmax folded in; its last block advances the step
/// state.
pub const GEMV_ARGMAX_Q6K: Case = Case {
    kernel: "gemv_argmax_q6k_q8_1",
    tensor: "output",
    shape: Shape {
        rows: lite::VOCAB,
        cols: lite::N_EMBD,
    },
    buffers: |s| {
        let mut b = gemv_buffers(GgmlType::Q6K, s);
        b.push(folded_accumulator());
        b.push(step_state(0));
        // The done counter, 0 before and after the launch.
        b.push(BufSpec {
            moved: Some(0),
            ..BufSpec::new("count", Contents::Output { bytes: 4 })
        });
        b
    },
    launch: |d, b, s| {
        ops::head::gemv_argmax_q8_1(
            d,
            GemvType::Q6K,
            (&b[0], &b[1], &b[2]),
            (&b[3], &b[4], &b[5]),
            s.rows,
            s.cols,
        )
    },
};

/// Buffers of the fused head on `m` columns: the weights once, then `m` activation, logit, key
/// and state columns each laid end to end (strides of exactly one column).
fn head_cols_buffers(m: usize, s: Shape) -> Vec<BufSpec> {
    let mut b = gemv_buffers(GgmlType::Q6K, s);
    b[1] = BufSpec::new("x", Contents::ActQ8_1 { n: m * s.cols });
    b[2] = BufSpec::new(
        "y",
        Contents::Output {
            bytes: m * s.rows * 4,
        },
    );
    b.push(BufSpec {
        moved: Some(0),
        ..BufSpec::new(
            "acc",
            Contents::Output {
                bytes: m * ACC_BYTES,
            },
        )
    });
    // `m` zeroed step states (token 0 at position 0): bookkeeping, as `step_state`.
    b.push(BufSpec {
        moved: Some(0),
        ..BufSpec::new("state", Contents::Output { bytes: m * 16 })
    });
    b.push(BufSpec {
        moved: Some(0),
        ..BufSpec::new("count", Contents::Output { bytes: 4 })
    });
    b
}

/// `output` (Q6_K, 102400 × 2048) on the `m` columns of a speculative verify
/// (`gemv_argmax_colsM_q6k_q8_1`), `m` = 2, 3, 4.
macro_rules! head_cols_case {
    ($name:ident, $m:literal) => {
        pub const $name: Case = Case {
            kernel: match GemvType::Q6K.argmax_cols($m) {
                Some(k) => k.desc.name,
                None => panic!("Q6_K has a multi-column head"),
            },
            tensor: "output",
            shape: Shape {
                rows: lite::VOCAB,
                cols: lite::N_EMBD,
            },
            buffers: |s| head_cols_buffers($m, s),
            launch: |d, b, s| {
                let strides = ops::head::ColumnStrides {
                    x: s.cols / ingot_abi::blocks::QK8_1 * 36,
                    y: s.rows * 4,
                    acc: ACC_BYTES,
                    state: 16,
                };
                ops::head::gemv_argmax_cols_q8_1(
                    d,
                    GemvType::Q6K,
                    $m,
                    (&b[0], &b[1], &b[2]),
                    (&b[3], &b[4], &b[5]),
                    strides,
                    (s.rows, s.cols),
                )
            },
        };
    };
}

head_cols_case!(GEMV_ARGMAX_COLS2_Q6K, 2);
head_cols_case!(GEMV_ARGMAX_COLS3_Q6K, 3);
head_cols_case!(GEMV_ARGMAX_COLS4_Q6K, 4);
