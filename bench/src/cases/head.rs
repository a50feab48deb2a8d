//! The lm_head path with the argmax fused into the gemv: `gemv_argmax` folds every logit row
//! into an 8-byte accumulator, and its last block turns it into the next token.

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
