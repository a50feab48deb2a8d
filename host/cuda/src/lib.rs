//! ingot-cuda
