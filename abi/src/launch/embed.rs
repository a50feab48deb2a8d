//! Embedding fetch: the step's token row of `token_embd`, dequantized to f32.

use super::{signature, Kernel, KernelDesc};

/// Threads per block of the embedding kernels.
pub const EMBED_THREADS: u32 = 256;
/// Elements each embedding thread writes (a block covers `EMBED_THREADS · EMBED_PER_THREAD`):
/// one, so a row of `n` elements runs as `n / 256` blocks on as many SMs (8 for V2-Lite's 2048)
/// rather than one block's eight dependent rounds on one SM.
pub const EMBED_PER_THREAD: u32 = 1;
/// The norm tail reduces in `rmsnorm_q8_1`'s order only with its block size.
const _: () = assert!(EMBED_THREADS == super::RMSNORM_Q8_1_THREADS);

signature! {
    /// The arguments of every embedding kernel: the row, then the norm tail's (as
    /// `moe_down_*`'s, [`super::DownArgs`]).
    EmbedArgs {
        table: ptr,
        state: ptr,
        y: ptr,
        n: u32,
        n_vocab: u32,
        norm_w: ptr,
        norm_q8: ptr,
        norm_f32: ptr,
        count: ptr,
        norm: u32,
        eps: f32,
    }
}

macro_rules! embed {
    ($desc:ident, $name:literal, $ty:literal) => {
        #[doc = concat!("`", $name, "(table, state: *const StepState, y: *mut f32, n: u32, ",
            "n_vocab: u32, norm_w, norm_q8, norm_f32, count, norm, eps)`: `y = dequantize(table ",
            "row StepState.token)`, ", $ty, " rows of `n` elements (a whole number of blocks); a ",
            "token `≥ n_vocab` writes NaNs and reads nothing. An item is one output element.\n\n",
            "Norm tail: with `norm` [`super::DOWN_NORM_Q8_1_F32`] (`n` a multiple of 32) the ",
            "block that finishes last also writes the first layer's `attn_norm` of the row, ",
            "`norm_q8 = q8_1(y·(1/sqrt(mean(y²) + eps))·norm_w)` with the bits of ",
            "[`super::RMSNORM_Q8_1`] (the same 256-thread order), and the normalized floats to ",
            "`norm_f32`, so that norm needs no launch of its own. `count` is a done counter (see ",
            "[`super::KernelDesc`]): 0 before and after every launch. With ",
            "[`super::DOWN_NORM_NONE`] there is no tail.")]
        pub const $desc: Kernel<EmbedArgs> =
            Kernel::new($name, [EMBED_THREADS, 1, 1], EMBED_THREADS * EMBED_PER_THREAD, 0);
    };
}

embed!(EMBED_F32, "embed_f32", "F32");
embed!(EMBED_F16, "embed_f16", "F16");
embed!(EMBED_BF16, "embed_bf16", "BF16");
embed!(EMBED_Q4_0, "embed_q4_0", "Q4_0");
embed!(EMBED_Q5_0, "embed_q5_0", "Q5_0");
embed!(EMBED_Q5_1, "embed_q5_1", "Q5_1");
embed!(EMBED_Q8_0, "embed_q8_0", "Q8_0");
embed!(EMBED_IQ4_NL, "embed_iq4_nl", "IQ4_NL");
embed!(EMBED_Q3K, "embed_q3k", "Q3_K");
embed!(EMBED_Q4K, "embed_q4k", "Q4_K");
embed!(EMBED_Q5K, "embed_q5k", "Q5_K");
embed!(EMBED_Q6K, "embed_q6k", "Q6_K");

/// The kernels of this family.
pub const ALL: &[KernelDesc] = &[
    EMBED_F32.desc,
    EMBED_F16.desc,
    EMBED_BF16.desc,
    EMBED_Q4_0.desc,
    EMBED_Q5_0.desc,
    EMBED_Q5_1.desc,
    EMBED_Q8_0.desc,
    EMBED_IQ4_NL.desc,
    EMBED_Q3K.desc,
    EMBED_Q4K.desc,
    EMBED_Q5K.desc,
    EMBED_Q6K.desc,
];
