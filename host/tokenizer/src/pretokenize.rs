//! Pre-tokenizers: the regex splits llama.cpp applies before BPE (`llm_tokenizer_bpe`,
//! `unicode_regex_split`).
//!
//! llama.cpp runs a *sequence* of regexes. Each one is applied to every fragment produced by the
//! previous ones (the first to the whole text); inside a fragment, every match becomes a fragment
//! and so does every stretch of text between two matches. Fragment boundaries therefore only ever
//! get finer, and `$` means "end of the current fragment".
//!
//! Two quirks of llama.cpp's regex engine are reproduced:
//! * Before matching, llama.cpp replaces every non-ASCII whitespace code point by U+000B, so a
//!   character that is Unicode `White_Space` matches `\s` but never an explicit range in a bracket
//!   class. The classes below therefore exclude whitespace explicitly (U+3000 from the CJK
//!   punctuation range, `--\s` on the U+0800.. range).
//! * `\s+(?!\S)` (look-ahead, which the `regex` crate lacks) is emulated: a match of the final
//!   `\s+` alternative that is followed by a non-space character gives back its last character,
//!   exactly as backtracking would.

use std::ops::Range;

use regex::Regex;

/// The pre-tokenizers implemented, named after `tokenizer.ggml.pre`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PreTokenizerKind {
    /// `deepseek-llm` (DeepSeek LLM / V2 / V2-Lite): llama.cpp `LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_LLM`.
    DeepseekLlm,
    /// `deepseek-coder` (DeepSeek-Coder, Coder-V2, Coder-V2-Lite): llama.cpp
    /// `LLAMA_VOCAB_PRE_TYPE_DEEPSEEK_CODER`. Unlike `deepseek-llm`, letters and punctuation are
    /// Unicode categories and every digit is a piece of its own.
    DeepseekCoder,
    /// `deepseek-v3`: llama.cpp `LLAMA_VOCAB_PRE_TYPE_DEEPSEEK3_LLM`.
    DeepseekV3,
    /// `llama3` and the names llama.cpp maps to the same rules (`llama-v3`, `llama-bpe`, `falcon3`,
    /// `falcon-h1`, `pixtral`, `midm-2.0`, `lfm2`): llama.cpp `LLAMA_VOCAB_PRE_TYPE_LLAMA3`.
    Llama3,
    /// `glm4` and `chatglm-bpe` (GLM-4 / GLM-4.5 / GLM-4.7): llama.cpp
    /// `LLAMA_VOCAB_PRE_TYPE_CHATGLM4`. The split is llama3's (llama.cpp routes the identical regex
    /// to the same custom splitter), but BPE always runs and no BOS is added unless the file asks
    /// for it.
    Glm4,
    /// `kimi-k2` (Kimi-K2, Moonlight): llama.cpp `LLAMA_VOCAB_PRE_TYPE_KIMI_K2`, whose custom
    /// splitter (`unicode_regex_split_custom_kimi_k2`) is reproduced, not Moonshot's tiktoken
    /// pattern: a letter run takes upper and lower case alike (`getUserName` is one piece, where
    /// the tiktoken pattern splits it at each capital). Such files may carry no merges; BPE then
    /// leaves every character a token of its own, as in llama.cpp.
    KimiK2,
}

impl PreTokenizerKind {
    /// Maps a `tokenizer.ggml.pre` value to a pre-tokenizer, or `None` when it is not implemented.
    pub fn from_gguf_name(name: &str) -> Option<Self> {
        match name {
            "deepseek-llm" => Some(Self::DeepseekLlm),
            "deepseek-coder" => Some(Self::DeepseekCoder),
            "deepseek-v3" => Some(Self::DeepseekV3),
            "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral"
            | "midm-2.0" | "lfm2" => Some(Self::Llama3),
            "glm4" | "chatglm-bpe" => Some(Self::Glm4),
            "kimi-k2" => Some(Self::KimiK2),
            _ => None,
        }
    }

    /// llama.cpp's `ignore_merges`: a whole pre-token that is itself a vocabulary entry is emitted
    /// as that token without running BPE on it.
    pub(crate) fn ignores_merges(self) -> bool {
        matches!(self, Self::Llama3)
    }

    /// Whether BOS is added when `tokenizer.ggml.add_bos_token` is absent (llama.cpp's per-pre-type
    /// default).
    pub(crate) fn default_add_bos(self) -> bool {
        matches!(self, Self::Llama3)
    }

    fn rules(self) -> Vec<(&'static str, LookAhead)> {
        match self {
            Self::DeepseekLlm => vec![
                (r"[\r\n]", LookAhead::None),
                (DEEPSEEK_LLM_LETTERS, LookAhead::None),
                (DEEPSEEK_LLM_PUNCT, LookAhead::None),
                (r"\s+$", LookAhead::None),
                (DEEPSEEK_LLM_CJK, LookAhead::None),
                (r"\p{N}+", LookAhead::None),
            ],
            Self::DeepseekCoder => vec![
                (r"[\r\n]", LookAhead::None),
                (r"\s?\p{L}+", LookAhead::None),
                (r"\s?\p{P}+", LookAhead::None),
                (DEEPSEEK_LLM_CJK, LookAhead::None),
                (r"\p{N}", LookAhead::None),
            ],
            Self::DeepseekV3 => vec![
                (r"\p{N}{1,3}", LookAhead::None),
                (
                    r"[\u{4E00}-\u{9FA5}\u{3040}-\u{309F}\u{30A0}-\u{30FF}]+",
                    LookAhead::None,
                ),
                (DEEPSEEK_V3_WORDS, LookAhead::TrailingSpaceRun),
            ],
            Self::Llama3 | Self::Glm4 => vec![(LLAMA3_WORDS, LookAhead::TrailingSpaceRun)],
            Self::KimiK2 => vec![(KIMI_K2_WORDS, LookAhead::TrailingSpaceRun)],
        }
    }
}

/// `\s?` + DeepSeek's explicit cased-letter class (Latin, Greek, Cyrillic, Armenian, Georgian,
/// Cherokee, Glagolitic, Coptic, letterlike symbols, full-width Latin, Deseret, Osage, Old
/// Hungarian, Warang Citi, Adlam). Code points are those of llama.cpp's literal string; written as
/// escapes because several of them (U+1F7D, U+1FBE, U+1FD3, U+1FDB, U+2126, U+212A) are canonically
/// equivalent to other characters and would be changed by any editor or tool that normalizes text.
const DEEPSEEK_LLM_LETTERS: &str = concat!(
    r"\s?[A-Za-z\u{B5}\u{C0}-\u{D6}\u{D8}-\u{F6}\u{F8}-\u{1BA}\u{1BC}-\u{1BF}\u{1C4}-\u{293}\u{295}-\u{2AF}",
    r"\u{370}-\u{373}\u{376}\u{377}\u{37B}-\u{37D}\u{37F}\u{386}\u{388}-\u{38A}\u{38C}\u{38E}-\u{3A1}",
    r"\u{3A3}-\u{3F5}\u{3F7}-\u{481}\u{48A}-\u{52F}\u{531}-\u{556}\u{10A0}-\u{10C5}\u{13A0}-\u{13F5}",
    r"\u{13F8}-\u{13FD}\u{1C90}-\u{1CBA}\u{1CBD}-\u{1CBF}\u{1D00}-\u{1D2B}\u{1D6B}-\u{1D77}\u{1D79}-\u{1D9A}",
    r"\u{1E00}-\u{1F15}\u{1F18}-\u{1F1D}\u{1F20}-\u{1F45}\u{1F48}-\u{1F4D}\u{1F50}-\u{1F57}\u{1F59}\u{1F5B}",
    r"\u{1F5D}\u{1F5F}-\u{1F7D}\u{1F80}-\u{1FB4}\u{1FB6}-\u{1FBC}\u{1FBE}\u{1FC2}-\u{1FC4}\u{1FC6}-\u{1FCC}",
    r"\u{1FD0}-\u{1FD3}\u{1FD6}-\u{1FDB}\u{1FE0}-\u{1FEC}\u{1FF2}-\u{1FF4}\u{1FF6}-\u{1FFC}\u{2102}\u{2107}",
    r"\u{210A}-\u{2113}\u{2115}\u{2119}-\u{211D}\u{2124}\u{2126}\u{2128}\u{212A}-\u{212D}\u{212F}-\u{2134}",
    r"\u{2139}\u{213C}-\u{213F}\u{2145}-\u{2149}\u{214E}\u{2183}\u{2184}\u{2C00}-\u{2C7B}\u{2C7E}-\u{2CE4}",
    r"\u{2CEB}-\u{2CEE}\u{2CF2}\u{2CF3}\u{A640}-\u{A66D}\u{A680}-\u{A69B}\u{A722}-\u{A76F}\u{A771}-\u{A787}",
    r"\u{A78B}-\u{A78E}\u{AB70}-\u{ABBF}\u{FB00}-\u{FB06}\u{FB13}-\u{FB17}\u{FF21}-\u{FF3A}\u{FF41}-\u{FF5A}",
    r"\u{10400}-\u{1044F}\u{104B0}-\u{104D3}\u{104D8}-\u{104FB}\u{10C80}-\u{10CB2}\u{10CC0}-\u{10CF2}",
    r"\u{118A0}-\u{118DF}\u{1E900}-\u{1E943}]+",
);

/// `\s?[!-/:-~！-／：-～‘-‟　-。]+`; U+3000 (ideographic space) is left out of the class because
/// llama.cpp sees it as U+000B (see module docs).
const DEEPSEEK_LLM_PUNCT: &str =
    r"\s?[!-/:-~\u{FF01}-\u{FF0F}\u{FF1A}-\u{FF5E}\u{2018}-\u{201F}\u{3001}-\u{3002}]+";

/// `[一-龥ࠀ-一가-퟿]+` minus whitespace (U+0800..U+4E00 contains U+1680, U+2000..U+200A, U+2028, U+2029,
/// U+202F, U+205F and U+3000, which llama.cpp sees as U+000B).
const DEEPSEEK_LLM_CJK: &str = r"[[\u{4E00}-\u{9FA5}\u{800}-\u{4E00}\u{AC00}-\u{D7FF}]--\s]+";

/// llama.cpp's DEEPSEEK3_LLM third regex with the final `\s+(?!\S)|\s+` written as `\s+` (see
/// [`LookAhead`]).
const DEEPSEEK_V3_WORDS: &str = concat!(
    r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"##,
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+",
);

/// llama.cpp's adapted LLAMA3 regex with the final `\s+(?!\S)|\s+` written as `\s+` (see
/// [`LookAhead`]).
const LLAMA3_WORDS: &str = concat!(
    r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}",
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+",
);

/// llama.cpp's `unicode_cpt_is_han` ranges: CJK Unified Ideographs and Extensions A-F, and the two
/// compatibility blocks. (Not Unicode's Han script, which also holds radicals and ideographic
/// marks.)
macro_rules! han {
    () => {
        concat!(
            r"\u{4E00}-\u{9FFF}\u{3400}-\u{4DBF}\u{20000}-\u{2A6DF}\u{2A700}-\u{2B73F}\u{2B740}-\u{2B81F}",
            r"\u{2B820}-\u{2CEAF}\u{2CEB0}-\u{2EBEF}\u{F900}-\u{FAFF}\u{2F800}-\u{2FA1F}",
        )
    };
}

/// llama.cpp's kimi-k2 splitter as one regex, alternatives in its order: a Han run; an optional
/// leading character that is not a newline, letter or digit, then a run of non-Han letters with an
/// optional English contraction (case-insensitive); 1-3 digits; punctuation runs; newline runs;
/// `\s+(?!\S)|\s+` written as `\s+` (see [`LookAhead`]).
const KIMI_K2_WORDS: &str = concat!(
    "[",
    han!(),
    r"]+|[^\r\n\p{L}\p{N}]?[\p{L}--[",
    han!(),
    r"]]+(?:'[sStTmMdD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?",
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+",
);

/// How a rule's matches are post-processed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LookAhead {
    /// Matches are used as found.
    None,
    /// The pattern ends in `\s+` standing for `\s+(?!\S)|\s+`. A match made only of non-newline
    /// whitespace is the `\s+` alternative (every earlier alternative needs a non-space character
    /// or a newline); when it is longer than one character and a non-space character follows,
    /// `\s+(?!\S)` would have stopped one character short.
    TrailingSpaceRun,
}

#[derive(Debug, Clone)]
struct SplitRule {
    regex: Regex,
    look_ahead: LookAhead,
}

/// A compiled pre-tokenizer.
#[derive(Debug, Clone)]
pub struct PreTokenizer {
    kind: PreTokenizerKind,
    rules: Vec<SplitRule>,
}

impl PreTokenizer {
    /// Compiles the regex sequence of `kind`.
    pub fn new(kind: PreTokenizerKind) -> Self {
        let rules = kind
            .rules()
            .into_iter()
            .map(|(pattern, look_ahead)| SplitRule {
                // The patterns are constants of this module; the unit tests compile every one of
                // them.
                regex: Regex::new(pattern).expect("built-in pre-tokenizer regex is valid"),
                look_ahead,
            })
            .collect();
        PreTokenizer { kind, rules }
    }

    /// Which pre-tokenizer this is.
    pub fn kind(&self) -> PreTokenizerKind {
        self.kind
    }

    /// Splits `text` into pre-tokens (byte ranges into `text`, in order, covering it exactly).
    pub fn split_ranges(&self, text: &str) -> Vec<Range<usize>> {
        let mut fragments = Vec::new();
        if !text.is_empty() {
            fragments.push(0..text.len());
        }
        let mut next = Vec::with_capacity(fragments.len());
        for rule in &self.rules {
            next.clear();
            for fragment in &fragments {
                rule.split_fragment(text, fragment.clone(), &mut next);
            }
            std::mem::swap(&mut fragments, &mut next);
        }
        fragments
    }

    /// Splits `text` into pre-tokens (convenience wrapper over [`Self::split_ranges`]).
    pub fn split<'t>(&self, text: &'t str) -> Vec<&'t str> {
        self.split_ranges(text)
            .into_iter()
            .map(|r| &text[r])
            .collect()
    }
}

impl SplitRule {
    /// Appends the pieces of `text[fragment]` to `out`: every match and every non-empty gap between
    /// matches.
    fn split_fragment(&self, text: &str, fragment: Range<usize>, out: &mut Vec<Range<usize>>) {
        let base = fragment.start;
        // Matching on the fragment alone makes `$` mean "end of fragment", as in llama.cpp.
        let hay = &text[fragment];
        let mut pos = 0;
        let mut gap_start = 0;
        while pos < hay.len() {
            let Some(m) = self.regex.find_at(hay, pos) else {
                break;
            };
            let mut end = m.end();
            if self.look_ahead == LookAhead::TrailingSpaceRun {
                end = give_back_last_space(hay, m.start(), end);
            }
            if end == m.start() {
                // No rule matches the empty string; this guard only keeps the loop finite if one
                // ever did.
                pos = next_char_boundary(hay, m.start());
                continue;
            }
            if m.start() > gap_start {
                out.push(base + gap_start..base + m.start());
            }
            out.push(base + m.start()..base + end);
            pos = end;
            gap_start = end;
        }
        if gap_start < hay.len() {
            out.push(base + gap_start..base + hay.len());
        }
    }
}

/// Applies the `\s+(?!\S)` emulation to the match `hay[start..end]` (see
/// [`LookAhead::TrailingSpaceRun`]).
fn give_back_last_space(hay: &str, start: usize, end: usize) -> usize {
    let piece = &hay[start..end];
    let is_space_run = piece
        .chars()
        .all(|c| c.is_whitespace() && c != '\r' && c != '\n');
    let followed_by_text = hay[end..]
        .chars()
        .next()
        .is_some_and(|c| !c.is_whitespace());
    let mut chars = piece.char_indices();
    let more_than_one = chars.nth(1).is_some();
    if is_space_run && followed_by_text && more_than_one {
        let last = piece.char_indices().last().map_or(0, |(i, _)| i);
        start + last
    } else {
        end
    }
}

fn next_char_boundary(s: &str, i: usize) -> usize {
    s[i..].chars().next().map_or(s.len(), |c| i + c.len_utf8())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_compiles() {
        for kind in [
            PreTokenizerKind::DeepseekLlm,
            PreTokenizerKind::DeepseekCoder,
            PreTokenizerKind::DeepseekV3,
            PreTokenizerKind::Llama3,
            PreTokenizerKind::Glm4,
            PreTokenizerKind::KimiK2,
        ] {
            let pre = PreTokenizer::new(kind);
            assert!(!pre.rules.is_empty());
        }
    }

    #[test]
    fn canonical_singletons_are_in_the_letter_class() {
        // The letters most likely to be lost by normalization must still be split as letters.
        let pre = PreTokenizer::new(PreTokenizerKind::DeepseekLlm);
        for c in [
            '\u{1F7D}', '\u{1FBE}', '\u{1FD3}', '\u{1FDB}', '\u{2126}', '\u{212A}',
        ] {
            let text = format!("1{c}{c}2");
            assert_eq!(
                pre.split(&text),
                vec!["1", &text[1..text.len() - 1], "2"],
                "U+{:04X}",
                c as u32
            );
        }
    }

    #[test]
    fn space_run_gives_back_its_last_char_before_text() {
        assert_eq!(give_back_last_space("   x", 0, 3), 2);
        assert_eq!(give_back_last_space(" x", 0, 1), 1);
        assert_eq!(give_back_last_space("   ", 0, 3), 3);
        assert_eq!(give_back_last_space("  \n", 0, 3), 3);
        assert_eq!(give_back_last_space("\u{3000}\u{3000}x", 0, 6), 3);
    }
}
