//! Every kernel the device crate exports, by family: the launch families of [`crate::launch`] and
//! the per-type kernels of the registry ([`crate::weight_types`](mod@crate::weight_types)). It sits
//! above both, so that listing them makes neither name the other (the registry builds its
//! descriptors from the launch constructors; the launch families know nothing of the registry).

use crate::launch::{self, KernelDesc};

/// Every kernel the device crate exports, by family.
pub const KERNELS: &[&[KernelDesc]] = &[
    launch::basic::ALL,
    launch::moe::ALL,
    launch::attention::ALL,
    launch::gemv::ALL,
    launch::embed::ALL,
    launch::norm::ALL,
    launch::head::ALL,
    launch::attn_out::ALL,
    launch::moe_prefill::ALL,
    crate::weight_types::KERNELS,
];

/// Iterates every kernel descriptor of every family.
pub fn all_kernels() -> impl Iterator<Item = &'static KernelDesc> {
    KERNELS.iter().flat_map(|family| family.iter())
}
