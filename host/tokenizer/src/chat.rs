//! DeepSeek-V2 chat prompt format (the `tokenizer_config.json` jinja template of
//! DeepSeek-V2(-Lite)-Chat; llama.cpp's built-in `LLM_CHAT_TEMPLATE_DEEPSEEK_2`).

/// DeepSeek-V2's end-of-sentence token text, which closes every assistant turn.
pub const DEEPSEEK2_EOS_TEXT: &str = "<\u{FF5C}end\u{2581}of\u{2581}sentence\u{FF5C}>";

/// DeepSeek-V2's beginning-of-sentence token text.
pub const DEEPSEEK2_BOS_TEXT: &str = "<\u{FF5C}begin\u{2581}of\u{2581}sentence\u{FF5C}>";

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    System,
    User,
    Assistant,
}

/// Renders a conversation as DeepSeek-V2 expects it: `{bos}` then, per message, system: `content +
/// "\n\n"`; user: `"User: " + content + "\n\n"`; assistant: `"Assistant: " + content +
/// "<｜end▁of▁sentence｜>"`; then `"Assistant:"` (no trailing space) when `add_generation_prompt`.
/// `system`, when given, comes first, before `turns`.
///
/// `bos` is the BOS token *text* (the jinja template writes it). Encode the result with
/// `parse_special = true` so that the BOS/EOS texts become their tokens, and pass `bos = ""` if the
/// encoder adds BOS itself (`add_special = true` with `add_bos`), otherwise the prompt starts with
/// two BOS tokens.
pub fn apply_chat_template_deepseek2(
    bos: &str,
    system: Option<&str>,
    turns: &[(Role, &str)],
    add_generation_prompt: bool,
) -> String {
    let mut out = String::from(bos);
    let messages = system
        .map(|s| (Role::System, s))
        .into_iter()
        .chain(turns.iter().copied());
    for (role, content) in messages {
        match role {
            Role::System => {
                out.push_str(content);
                out.push_str("\n\n");
            }
            Role::User => {
                out.push_str("User: ");
                out.push_str(content);
                out.push_str("\n\n");
            }
            Role::Assistant => {
                out.push_str("Assistant: ");
                out.push_str(content);
                out.push_str(DEEPSEEK2_EOS_TEXT);
            }
        }
    }
    if add_generation_prompt {
        out.push_str("Assistant:");
    }
    out
}
