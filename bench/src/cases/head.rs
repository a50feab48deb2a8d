//! The lm_head path with the argmax fused into the gemv: `gemv_argmax` folds every logit row
//! into an 8-byte accumulator, `argmax_finish` turns it into the next token.

use ingot_gguf::GgmlType;
use ingot_kernels::ops;
use ingot_kernels::ops::gemv::GemvType;

use super::{gemv_buffers, lite, step_state, BufSpec, Case, Contents, Shape};

/// Bytes of the argmax accumulator (a packed value and index).
const ACC_BYTES: usize = 8;

/// The accumulator, allocated zeroed (the empty state `argmax_finish` leaves behind), read
/// and reset by `argmax_finish`.
fn accumulator() -> BufSpec {
    BufSpec::new("acc", Contents::Output { bytes: ACC_BYTES })
}

/// The accumulator as the gemv sees it: 8 bytes of bookkeeping folded by atomics (one per
/// thread block), not counted as required traffic, like the step state.
fn folded_accumulator() -> BufSpec {
    BufSpec {
        moved: Some(0),
        ..accumulator()
    }
}

/// `output` (Q6_K, 102400 × 2048) with the argmax folded in.
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
        b
    },
    launch: |d, b, s| {
        ops::head::gemv_argmax_q8_1(
            d,
            GemvType::Q6K,
            (&b[0], &b[1], &b[2]),
            &b[3],
            s.rows,
            s.cols,
        )
    },
};

/// The next token from the accumulator; the step state advances.
pub const ARGMAX_FINISH: Case = Case {
    kernel: "argmax_finish",
    tensor: "logits",
    shape: Shape { rows: 1, cols: 1 },
    buffers: |_| vec![accumulator(), step_state(0)],
    launch: |d, b, _| ops::head::argmax_finish(d, &b[0], &b[1]),
};
