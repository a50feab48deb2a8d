//! ingot-tokenizer
