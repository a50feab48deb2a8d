//! ingot-kernels
