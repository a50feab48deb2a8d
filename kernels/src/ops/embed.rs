//! Checked launches of the embedding kernels (`ingot_abi::launch` family `embed`).

use super::moe::{down_norm_args, DownNorm};
use super::{bytes, launch, need, shape, to_u32};
use crate::backend::Accelerator;
use crate::Result;
use ingot_abi::blocks::{
    BlockIq4Nl, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ5_0, BlockQ5_1, BlockQ6K, BlockQ8_0,
};
use ingot_abi::launch::{
    EmbedArgs, Kernel, EMBED_BF16, EMBED_F16, EMBED_F32, EMBED_IQ4_NL, EMBED_Q3K, EMBED_Q4K,
    EMBED_Q4_0, EMBED_Q5K, EMBED_Q5_0, EMBED_Q5_1, EMBED_Q6K, EMBED_Q8_0,
};
use ingot_abi::step::StepState;
use std::mem::size_of;

/// A `token_embd` type the embedding kernels decode.
#[allow(non_camel_case_types)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EmbedType {
    F32,
    F16,
    Bf16,
    Q4_0,
    Q5_0,
    Q5_1,
    Q8_0,
    Iq4Nl,
    Q3K,
    Q4K,
    Q5K,
    Q6K,
}

impl EmbedType {
    /// Every type, in declaration order.
    pub const ALL: [EmbedType; 12] = [
        EmbedType::F32,
        EmbedType::F16,
        EmbedType::Bf16,
        EmbedType::Q4_0,
        EmbedType::Q5_0,
        EmbedType::Q5_1,
        EmbedType::Q8_0,
        EmbedType::Iq4Nl,
        EmbedType::Q3K,
        EmbedType::Q4K,
        EmbedType::Q5K,
        EmbedType::Q6K,
    ];

    /// `(elements, bytes)` per block.
    pub const fn block(self) -> (usize, usize) {
        match self {
            EmbedType::F32 => (1, 4),
            EmbedType::F16 | EmbedType::Bf16 => (1, 2),
            EmbedType::Q4_0 => (32, size_of::<BlockQ4_0>()),
            EmbedType::Q5_0 => (32, size_of::<BlockQ5_0>()),
            EmbedType::Q5_1 => (32, size_of::<BlockQ5_1>()),
            EmbedType::Q8_0 => (32, size_of::<BlockQ8_0>()),
            EmbedType::Iq4Nl => (32, size_of::<BlockIq4Nl>()),
            EmbedType::Q3K => (256, size_of::<BlockQ3K>()),
            EmbedType::Q4K => (256, size_of::<BlockQ4K>()),
            EmbedType::Q5K => (256, size_of::<BlockQ5K>()),
            EmbedType::Q6K => (256, size_of::<BlockQ6K>()),
        }
    }

    /// The kernel decoding this type.
    pub const fn kernel(self) -> &'static Kernel<EmbedArgs> {
        match self {
            EmbedType::F32 => &EMBED_F32,
            EmbedType::F16 => &EMBED_F16,
            EmbedType::Bf16 => &EMBED_BF16,
            EmbedType::Q4_0 => &EMBED_Q4_0,
            EmbedType::Q5_0 => &EMBED_Q5_0,
            EmbedType::Q5_1 => &EMBED_Q5_1,
            EmbedType::Q8_0 => &EMBED_Q8_0,
            EmbedType::Iq4Nl => &EMBED_IQ4_NL,
            EmbedType::Q3K => &EMBED_Q3K,
            EmbedType::Q4K => &EMBED_Q4K,
            EmbedType::Q5K => &EMBED_Q5K,
            EmbedType::Q6K => &EMBED_Q6K,
        }
    }
}

/// `y = row StepState.token of table`, dequantized: `table` holds `n_vocab` rows of `n`
/// elements of type `ty` (`n` a positive multiple of the type's block size), `state` one
/// [`StepState`], `y` `n` floats. The token is read on the device; one outside `0..n_vocab`
/// yields a NaN row. With `norm`, the launch's last block also writes the row's norm
/// ([`DownNorm`]: `n` a multiple of 32), with the bits of `rmsnorm_q8_1`.
pub fn embed<B: Accelerator>(
    b: &mut B,
    ty: EmbedType,
    (table, state, y): (&B::Buf, &B::Buf, &B::Buf),
    (n, n_vocab): (usize, usize),
    norm: Option<&DownNorm<'_, B::Buf>>,
) -> Result<()> {
    let d = ty.kernel();
    let (qk, bb) = ty.block();
    if n == 0 || !n.is_multiple_of(qk) {
        return Err(shape(
            d,
            format!("n = {n} is not a positive multiple of the {ty:?} block size {qk}"),
        ));
    }
    if n_vocab == 0 {
        return Err(shape(d, "n_vocab = 0".into()));
    }
    let n32 = to_u32(d, "n", n)?;
    let vocab32 = to_u32(d, "n_vocab", n_vocab)?;
    need(b, d, "table", table, bytes(n_vocab, n / qk, bb))?;
    need(b, d, "state", state, Some(size_of::<StepState>()))?;
    need(b, d, "y", y, bytes(n, 4, 1))?;
    let (norm_w, norm_q8, norm_f32, count, norm, eps) = down_norm_args(b, d, n, norm, y)?;
    launch(
        b,
        d,
        n32,
        EmbedArgs {
            table,
            state,
            y,
            n: n32,
            n_vocab: vocab32,
            norm_w,
            norm_q8,
            norm_f32,
            count,
            norm,
            eps,
        },
    )
}
