//! ingot's GPU kernels, compiled to PTX for sm_86 and newer (see `cargo xtask kernels`).
//!
//! Every kernel's name, parameter order and launch shape comes from `ingot_abi::launch`, and
//! every quant block layout from `ingot_abi::blocks`; this crate only holds the thread mapping
//! and the math. Kernels take raw pointers and scalars only. Pointer parameters must point to
//! 16-byte aligned device buffers of the sizes each kernel documents: the host launcher checks
//! shapes and sizes before launching, so the kernels themselves carry no bounds checks.
#![no_std]
#![feature(abi_ptx, stdarch_nvptx, asm_experimental_arch)]
#![allow(clippy::missing_safety_doc)]

mod embed;
mod gemv;
mod gemv_cols;
mod head_cols;
mod intrinsics;
mod last_block;
mod mmq;
mod moe_dot;
mod moe_down;
mod moe_gate_up;
mod moe_prefill;
mod norm_q8;
mod prefetch;
mod quantize;
mod rmsnorm;
mod router;
mod vecdot;
// Declared last and in this order, not sorted: rustc emits kernels sorted by name but the
// module-level asm (`.shared` declarations) in module order, and this order keeps those
// declarations where the committed PTX has them.
mod attention;
// (not sorted: see above)
mod argmax;
// (not sorted: see above)
mod chain;
// (not sorted: see above)
mod moe_ffn;
// (not sorted: see above)
mod moe_ffn_rope_kb;
