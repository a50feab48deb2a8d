//! The one definition of what device code and host code must agree on: quantized block layouts
//! (`blocks`, with the IQ code books in `iq_grids`) and kernel parameter/launch shapes (`launch`),
//! and the one stable hash (`hash`). `no_std` so the nvptx device crate compiles the very same
//! structs.
#![no_std]

pub mod blocks;
pub mod hash;
pub mod iq_grids;
pub mod kernel_table;
pub mod launch;
pub mod step;
pub mod weight_types;
