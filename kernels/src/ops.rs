//! Checked launches: each function validates the shape and every buffer size against what the
//! kernel reads and writes, then launches its kernel's typed arguments ([`launch`]) with the grid
//! from its [`KernelDesc`]. The kernels themselves carry no bounds checks,
//! so these checks are what keeps a bad shape from reading or writing out of bounds.

use crate::backend::{Accelerator, KArg};
use crate::{KernelError, Result};
use ingot_abi::blocks::{BlockQ8_1, QK8_1};
use ingot_abi::launch::{
    Arg, Kernel, KernelDesc, QuantizeQ8_1Args, RmsnormArgs, Signature, QUANTIZE_Q8_1, RMSNORM_F32,
};
use std::mem::size_of;

pub mod attention;
pub mod embed;
pub mod gemv;
pub mod head;
pub mod mmq;
pub mod moe;
pub mod moe_prefill;
pub mod norm;

/// Launches `k` over `items` work items. `args` is `k`'s signature's struct, so the arguments
/// match its parameter list in count, order and kind by construction.
pub fn launch<B: Accelerator, S: Signature>(
    b: &mut B,
    k: &Kernel<S>,
    items: u32,
    args: S::Args<&B::Buf>,
) -> Result<()> {
    if items == 0 {
        return Err(shape(k, "zero work items".into()));
    }
    let mut list = Vec::with_capacity(k.params.len());
    S::each(&args, &mut |a| {
        list.push(match a {
            Arg::Ptr(p) => KArg::Buf(p),
            Arg::U32(v) => KArg::U32(v),
            Arg::I32(v) => KArg::I32(v),
            Arg::F32(v) => KArg::F32(v),
            Arg::U64(v) => KArg::U64(v),
        })
    });
    b.launch(k.name, k.grid(items), k.block, k.shared_bytes, &list)
}

fn shape(desc: &KernelDesc, reason: String) -> KernelError {
    KernelError::Shape {
        kernel: desc.name,
        reason,
    }
}

/// `Some(a·b·c)` unless it overflows.
fn bytes(a: usize, b: usize, c: usize) -> Option<usize> {
    a.checked_mul(b)?.checked_mul(c)
}

/// `Some(bytes)` of `rows` rows of `n` values each stored as q8_1 blocks (`n` a multiple of
/// [`QK8_1`], checked by the caller), unless it overflows.
fn q8_1_bytes(rows: usize, n: usize) -> Option<usize> {
    bytes(rows, n / QK8_1, size_of::<BlockQ8_1>())
}

fn need<B: Accelerator>(
    b: &B,
    desc: &KernelDesc,
    param: &'static str,
    buf: &B::Buf,
    need: Option<usize>,
) -> Result<()> {
    let need = need.ok_or_else(|| shape(desc, format!("size of `{param}` overflows usize")))?;
    let have = b.buf_len(buf);
    if have < need {
        return Err(KernelError::BufferTooSmall {
            kernel: desc.name,
            param,
            have,
            need,
        });
    }
    Ok(())
}

fn to_u32(desc: &KernelDesc, what: &str, v: usize) -> Result<u32> {
    u32::try_from(v).map_err(|_| shape(desc, format!("{what} = {v} exceeds u32")))
}

/// Quantizes `n` floats of `x` into `n/32` q8_1 blocks in `y` (CUDA variant: `s = Σx`).
/// `n` must be a positive multiple of 32.
pub fn quantize_q8_1<B: Accelerator>(b: &mut B, x: &B::Buf, y: &B::Buf, n: usize) -> Result<()> {
    let d = &QUANTIZE_Q8_1;
    if n == 0 || !n.is_multiple_of(QK8_1) {
        return Err(shape(
            d,
            format!("n = {n} is not a positive multiple of {QK8_1}"),
        ));
    }
    let n32 = to_u32(d, "n", n)?;
    need(b, d, "x", x, bytes(n, 4, 1))?;
    need(b, d, "y", y, q8_1_bytes(1, n))?;
    launch(b, d, n32, QuantizeQ8_1Args { x, y, n: n32 })
}

/// `y[r] = x[r]·w / sqrt(mean(x[r]²) + eps)` for `rows` rows of `n` floats; `n` a positive
/// multiple of 4. `y` may be `x` (each thread reads its chunk before writing it).
pub fn rmsnorm_f32<B: Accelerator>(
    b: &mut B,
    x: &B::Buf,
    w: &B::Buf,
    y: &B::Buf,
    rows: usize,
    n: usize,
    eps: f32,
) -> Result<()> {
    let d = &RMSNORM_F32;
    let (n32, rows32) = norm::check_rmsnorm(b, d, (x, w), rows, n, 4, eps)?;
    need(b, d, "y", y, bytes(rows, n, 4))?;
    launch(
        b,
        d,
        rows32,
        RmsnormArgs {
            x,
            w,
            y,
            n: n32,
            eps,
        },
    )
}

/// `y = W·x`: `W` is `nrows` rows of `ncols/256` Q4_K blocks, `x` `ncols/32` q8_1 blocks,
/// `y` `nrows` floats. `ncols` must be a positive multiple of 256.
pub fn gemv_q4k_q8_1<B: Accelerator>(
    b: &mut B,
    w: &B::Buf,
    x: &B::Buf,
    y: &B::Buf,
    nrows: usize,
    ncols: usize,
) -> Result<()> {
    gemv::gemv_q8_1(b, gemv::GemvType::Q4K, (w, x, y), nrows, ncols)
}

/// As [`gemv_q4k_q8_1`] with Q3_K weights.
pub fn gemv_q3k_q8_1<B: Accelerator>(
    b: &mut B,
    w: &B::Buf,
    x: &B::Buf,
    y: &B::Buf,
    nrows: usize,
    ncols: usize,
) -> Result<()> {
    gemv::gemv_q8_1(b, gemv::GemvType::Q3K, (w, x, y), nrows, ncols)
}
