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

mod attention;
mod argmax;
mod embed;
mod gemv;
mod moe_dot;
mod moe_down;
mod moe_gate_up;
mod moe_ptx;
mod norm_q8;
mod ptx;
mod quantize;
mod rmsnorm;
mod router;
mod vecdot;
