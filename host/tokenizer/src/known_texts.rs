//! Token texts llama.cpp recognises by name (`llama_vocab::impl::load`, "auto-detect special tokens
//! by text").
//!
//! llama.cpp retypes a vocabulary entry with one of these texts as a control token, whatever the
//! GGUF says (so e.g. DeepSeek's FIM tokens, stored as user-defined, are only matched in text with
//! `parse_special`), and treats the end-of-turn and FIM padding/repo/separator ones as
//! end-of-generation.

/// End-of-turn texts (`special_eot_id` detection); end generation.
const END_OF_TURN: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "<\u{FF5C}end\u{2581}of\u{2581}sentence\u{FF5C}>",
    "<end_of_utterance>",
];

/// Further end-of-generation texts (`special_eog_ids`, EOM, FIM pad/repo/separator).
const OTHER_END_OF_GENERATION: &[&str] = &[
    "<|return|>",
    "<|call|>",
    "<|eom_id|>",
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<PAD>",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
    "<|file_sep|>",
];

/// Fill-in-the-middle prefix/suffix/middle texts; control tokens that do not end generation.
const FIM_CONTROL: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<\u{FF5C}fim\u{2581}begin\u{FF5C}>",
    "<PRE>",
    "\u{2581}<PRE>",
    "<|code_prefix|>",
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<\u{FF5C}fim\u{2581}hole\u{FF5C}>",
    "<SUF>",
    "\u{2581}<SUF>",
    "<|code_suffix|>",
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<\u{FF5C}fim\u{2581}end\u{FF5C}>",
    "<MID>",
    "\u{2581}<MID>",
    "<|code_middle|>",
];

/// Texts whose token ends generation.
pub(crate) fn end_of_generation() -> impl Iterator<Item = &'static str> {
    END_OF_TURN.iter().chain(OTHER_END_OF_GENERATION).copied()
}

/// Texts whose token llama.cpp forces to the control type.
pub(crate) fn forced_control() -> impl Iterator<Item = &'static str> {
    end_of_generation().chain(FIM_CONTROL.iter().copied())
}
