//! Special-token partitioning (llama.cpp `tokenizer_st_partition`).
//!
//! Before pre-tokenization, text that spells a special token is cut out and emitted as that token,
//! so special tokens are never split by BPE. Control and unknown tokens are only recognised when
//! `parse_special` is set; user-defined tokens always are. Tokens are tried longest text first
//! (ties by id), each over all remaining text fragments, every occurrence left to right, exactly
//! like llama.cpp's loop.

use crate::vocab::TokenType;

/// A piece of input after partitioning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fragment<'t> {
    /// Ordinary text, to be pre-tokenized and BPE-encoded.
    Text(&'t str),
    /// A special token found in the text.
    Token(u32),
}

#[derive(Debug, Clone)]
struct SpecialToken {
    text: Box<str>,
    id: u32,
    /// User-defined tokens are matched even when `parse_special` is false.
    always: bool,
}

/// The special tokens of a vocabulary, in matching order.
#[derive(Debug, Clone, Default)]
pub(crate) struct SpecialTokens {
    tokens: Vec<SpecialToken>,
}

impl SpecialTokens {
    /// Collects control, user-defined and unknown tokens. Empty texts are skipped: they would match
    /// everywhere.
    pub(crate) fn new(tokens: &[&str], types: &[TokenType]) -> Self {
        let mut list: Vec<SpecialToken> = tokens
            .iter()
            .zip(types)
            .enumerate()
            .filter(|(_, (text, ty))| ty.is_plain_text() && !text.is_empty())
            .map(|(id, (text, ty))| SpecialToken {
                text: (*text).into(),
                id: id as u32,
                always: *ty == TokenType::UserDefined,
            })
            .collect();
        list.sort_by(|a, b| b.text.len().cmp(&a.text.len()).then(a.id.cmp(&b.id)));
        SpecialTokens { tokens: list }
    }

    /// Splits `text` into text fragments and special tokens. Empty text gives no fragments.
    pub(crate) fn partition<'t>(&self, text: &'t str, parse_special: bool) -> Vec<Fragment<'t>> {
        let mut fragments = if text.is_empty() {
            Vec::new()
        } else {
            vec![Fragment::Text(text)]
        };
        let mut next = Vec::new();
        for special in self.tokens.iter().filter(|s| parse_special || s.always) {
            let needle = &*special.text;
            if !fragments
                .iter()
                .any(|f| matches!(f, Fragment::Text(t) if t.contains(needle)))
            {
                continue;
            }
            next.clear();
            for fragment in &fragments {
                let Fragment::Text(mut rest) = *fragment else {
                    next.push(*fragment);
                    continue;
                };
                while let Some(at) = rest.find(needle) {
                    if at > 0 {
                        next.push(Fragment::Text(&rest[..at]));
                    }
                    next.push(Fragment::Token(special.id));
                    rest = &rest[at + needle.len()..];
                }
                if !rest.is_empty() {
                    next.push(Fragment::Text(rest));
                }
            }
            std::mem::swap(&mut fragments, &mut next);
        }
        fragments
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specials() -> SpecialTokens {
        // id 0 normal, 1 control "<s>", 2 control "<s><s>", 3 user-defined "<u>", 4 unused "<p>".
        let tokens = ["a", "<s>", "<s><s>", "<u>", "<p>"];
        let types = [
            TokenType::Normal,
            TokenType::Control,
            TokenType::Control,
            TokenType::UserDefined,
            TokenType::Unused,
        ];
        SpecialTokens::new(&tokens, &types)
    }

    #[test]
    fn longest_token_is_cut_first_and_text_around_kept() {
        let got = specials().partition("x<s><s><s>y<p>", true);
        assert_eq!(
            got,
            vec![
                Fragment::Text("x"),
                Fragment::Token(2),
                Fragment::Token(1),
                Fragment::Text("y<p>"),
            ]
        );
    }

    #[test]
    fn control_tokens_need_parse_special_but_user_defined_do_not() {
        let got = specials().partition("<s>a<u>", false);
        assert_eq!(got, vec![Fragment::Text("<s>a"), Fragment::Token(3)]);
    }
}
