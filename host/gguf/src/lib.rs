//! ingot-gguf
