//! ingot-quant
