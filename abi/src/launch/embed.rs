//! Embedding fetch: the step's token row of `token_embd`, dequantized to f32.

use super::{signature, Kernel, KernelDesc};

/// Threads per block of the embedding kernels.
pub const EMBED_THREADS: u32 = 256;
/// Elements each embedding thread writes (a block covers `EMBED_THREADS · EMBED_PER_THREAD`):
/// one, so a row of `n` elements runs as `n / 256` blocks on as many SMs (8 for V2-Lite's 2048)
/// rather than one block's eight dependent rounds on one SM.
pub const EMBED_PER_THREAD: u32 = 1;

signature! {
    /// The arguments of every embedding kernel.
    EmbedArgs { table: ptr, state: ptr, y: ptr, n: u32, n_vocab: u32 }
}

macro_rules! embed {
    ($desc:ident, $name:literal, $ty:literal) => {
        #[doc = concat!("`", $name, "(table, state: *const StepState, y: *mut f32, n: u32, ",
            "n_vocab: u32)`: `y = dequantize(table row StepState.token)`, ", $ty, " rows of `n` ",
            "elements (a whole number of blocks); a token `≥ n_vocab` writes NaNs and reads ",
            "nothing. An item is one output element.")]
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
