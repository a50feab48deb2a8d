//! Quantized block layouts, bit-identical to ggml-common.h.
