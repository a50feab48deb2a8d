//! ingot-model
