//! The generation loop `ingot run` and `ingot serve` share: prefill (past a prefix the cache
//! already holds), sample, decode token by token (or with MTP drafts), stop at an end-of-generation
//! token, a stop string or the token budget, and hand out text as it becomes safe to show.
//!
//! Pull-driven: each [`Generator::step`] chooses one token; a caller cancels by not calling it
//! again. The token it returns is decoded only by the next call, so a generation that ends never
//! decodes its last token (the budget and the cache rows the caller sees count on it).

use std::collections::VecDeque;

use ingot_tokenizer::{StreamDecoder, Tokenizer};

use crate::decoder::Decoder;
use crate::error::{ModelError, Result};
use crate::sampling::{Sampler, SamplerConfig};
use crate::speculative::{Drafts, SpecStats, Speculative};

/// What to generate, besides the prompt.
#[derive(Debug, Clone, Default)]
pub struct GenerateOptions {
    pub sampler: SamplerConfig,
    /// Most tokens to choose (an end-of-generation token counts); `None`: until the context is
    /// full.
    pub max_tokens: Option<usize>,
    /// Text that ends generation; neither it nor anything after it is handed out.
    pub stops: Vec<String>,
    /// MTP drafts (speculative decoding, [`Speculative`]); `None`: one token per decode.
    pub draft: Option<Drafts>,
    /// Never choose an end-of-generation token (their logits taken as −∞, as llama.cpp's
    /// `--ignore-eos` and llama-server's `ignore_eos` do): generation runs to the budget or a stop
    /// string. Not with drafts.
    pub ignore_eos: bool,
}

/// Why generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// An end-of-generation token or a stop string.
    Stop,
    /// The token budget: `max_tokens` or the context is full.
    Length,
}

impl Finish {
    /// `stop` or `length` (OpenAI's `finish_reason`).
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
        }
    }
}

/// One chosen token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Piece {
    pub token: u32,
    /// Text now safe to show; empty while the detokenizer waits for a UTF-8 sequence's rest or the
    /// stop scan holds back a possible start of a stop string.
    pub text: String,
    /// The token and position the decoder ran to choose this one; `None` for the first (the
    /// prefill's logits) and with drafts.
    pub decoded: Option<(u32, usize)>,
    /// Whether generation ended with this token ([`Generator::finish`] gives the rest of the text).
    pub last: bool,
}

enum Source<'a, 'f> {
    /// `next`: chosen, not yet decoded.
    Plain {
        dec: &'a mut (dyn Decoder + 'f),
        sampler: Box<Sampler>,
        next: u32,
    },
    /// Tokens the last verify step chose that are not handed out yet.
    Drafted {
        spec: Box<Speculative<'a, 'f, Sampler>>,
        queue: VecDeque<u32>,
    },
}

/// One generation over one decoder.
pub struct Generator<'a, 'f> {
    source: Source<'a, 'f>,
    tok: &'a Tokenizer,
    /// Tokens never chosen ([`GenerateOptions::ignore_eos`]: the end-of-generation tokens).
    banned: Vec<u32>,
    stream: StreamDecoder<'a>,
    scan: StopScan,
    prompt_len: usize,
    /// The prompt and the tokens handed out.
    tokens: Vec<u32>,
    /// Plain: tokens whose rows the cache holds, from position 0.
    rows: usize,
    reused: usize,
    budget: usize,
    generated: usize,
    ended: bool,
    finish: Finish,
}

impl<'a, 'f> Generator<'a, 'f> {
    /// Prefills `prompt` into `dec`, whose cache of `ctx` positions holds the rows of `cached`
    /// (from position 0), and chooses the first token. The longest common prefix of `cached` and
    /// `prompt`, less the prompt's last token (whose logits the first sample needs), is not decoded
    /// again: a decode at an earlier position rewinds the cache ([`Decoder::decode`]). With drafts
    /// the prompt is prefilled whole.
    pub fn start(
        dec: &'a mut (dyn Decoder + 'f),
        tok: &'a Tokenizer,
        ctx: usize,
        prompt: &[u32],
        cached: &[u32],
        opts: GenerateOptions,
    ) -> Result<Self> {
        check_prompt(prompt, ctx)?;
        let mut sampler = Sampler::new(opts.sampler);
        if opts.draft.is_some() && opts.ignore_eos {
            return Err(ModelError::Unsupported(
                "ignoring the end-of-generation token with MTP drafts".into(),
            ));
        }
        if let Some(drafts) = opts.draft {
            let spec = Speculative::start_with(dec, sampler, prompt, drafts, ctx)?;
            let queue = spec.fresh().iter().copied().collect();
            let source = Source::Drafted {
                spec: Box::new(spec),
                queue,
            };
            let banned = banned_tokens(tok, &opts);
            return Ok(Self::new(source, tok, ctx, prompt, 0, banned, opts));
        }
        let common = cached
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        let reused = common.min(prompt.len() - 1);
        let last = dec.prefill_last(&prompt[reused..], reused)?;
        let banned = banned_tokens(tok, &opts);
        let next = choose(&mut sampler, &last, prompt, &banned);
        let source = Source::Plain {
            dec,
            sampler: Box::new(sampler),
            next,
        };
        Ok(Self::new(source, tok, ctx, prompt, reused, banned, opts))
    }

    /// [`Generator::start`] from an empty cache, prefilling one token at a time and calling `each`
    /// with the decoder, the token and its position after each (a routing trace: the chunked
    /// prefill does not report routing). No drafts.
    pub fn start_stepwise<E: From<ModelError>>(
        dec: &'a mut (dyn Decoder + 'f),
        tok: &'a Tokenizer,
        ctx: usize,
        prompt: &[u32],
        opts: GenerateOptions,
        mut each: impl FnMut(&dyn Decoder, u32, usize) -> Result<(), E>,
    ) -> Result<Self, E> {
        check_prompt(prompt, ctx)?;
        if opts.draft.is_some() {
            return Err(ModelError::Unsupported(
                "drafts with a token-by-token prefill: a verify step decodes several tokens".into(),
            )
            .into());
        }
        let mut last = Vec::new();
        for (pos, &t) in prompt.iter().enumerate() {
            let logits = dec.decode(t, pos)?;
            if pos + 1 == prompt.len() {
                last = logits.to_vec();
            }
            each(&*dec, t, pos)?;
        }
        let mut sampler = Sampler::new(opts.sampler);
        let banned = banned_tokens(tok, &opts);
        let next = choose(&mut sampler, &last, prompt, &banned);
        let source = Source::Plain {
            dec,
            sampler: Box::new(sampler),
            next,
        };
        Ok(Self::new(source, tok, ctx, prompt, 0, banned, opts))
    }

    fn new(
        source: Source<'a, 'f>,
        tok: &'a Tokenizer,
        ctx: usize,
        prompt: &[u32],
        reused: usize,
        banned: Vec<u32>,
        opts: GenerateOptions,
    ) -> Self {
        let room = ctx - prompt.len();
        Generator {
            source,
            tok,
            banned,
            stream: tok.stream_decoder(),
            scan: StopScan::new(opts.stops),
            prompt_len: prompt.len(),
            tokens: prompt.to_vec(),
            rows: prompt.len(),
            reused,
            budget: opts.max_tokens.map_or(room, |m| m.min(room)),
            generated: 0,
            ended: false,
            finish: Finish::Length,
        }
    }

    /// Chooses the next token (decoding the one before it); `None` once generation has ended.
    pub fn step(&mut self) -> Result<Option<Piece>> {
        if self.ended || self.generated >= self.budget {
            self.ended = true;
            return Ok(None);
        }
        let mut decoded = None;
        let token = match &mut self.source {
            Source::Plain { dec, sampler, next } => {
                if self.generated > 0 {
                    let pos = self.prompt_len + self.generated - 1;
                    let logits = dec.decode(*next, pos)?;
                    self.rows += 1;
                    decoded = Some((*next, pos));
                    *next = choose(sampler, logits, &self.tokens, &self.banned);
                }
                *next
            }
            Source::Drafted { spec, queue } => {
                if queue.is_empty() {
                    queue.extend(spec.step(self.budget - self.generated)?);
                }
                queue.pop_front().expect("a verify step chooses a token")
            }
        };
        self.generated += 1;
        self.tokens.push(token);
        let mut text = String::new();
        if self.tok.is_eog(token) {
            self.finish = Finish::Stop;
            self.ended = true;
        } else if let Some(piece) = self.stream.push(token) {
            let stopped;
            (text, stopped) = self.scan.push(&piece);
            if stopped {
                self.finish = Finish::Stop;
                self.ended = true;
            }
        }
        if self.generated == self.budget {
            self.ended = true;
        }
        Ok(Some(Piece {
            token,
            text,
            decoded,
            last: self.ended,
        }))
    }

    /// The text still held back (the detokenizer's partial bytes, a possible start of a stop
    /// string), unless a stop string cut the text, and why generation ended. Meant for when
    /// [`Generator::step`] has ended it.
    pub fn finish(&mut self) -> (String, Finish) {
        let mut tail = String::new();
        if !self.scan.stopped() {
            let (text, stopped) = self.scan.push(&self.stream.flush());
            tail.push_str(&text);
            if stopped {
                self.finish = Finish::Stop;
            } else {
                tail.push_str(&self.scan.finish());
            }
        }
        (tail, self.finish)
    }

    /// Tokens chosen so far, the last one included.
    pub fn generated(&self) -> usize {
        self.generated
    }

    /// Prompt tokens whose rows were in the cache already, so not prefilled.
    pub fn reused(&self) -> usize {
        self.reused
    }

    /// The tokens whose rows the decoder's cache now holds, from position 0: the prompt and the
    /// tokens decoded since (the last token chosen is not).
    pub fn cached(&self) -> &[u32] {
        let rows = match &self.source {
            Source::Plain { .. } => self.rows,
            Source::Drafted { spec, .. } => spec.next_pos(),
        };
        &self.tokens[..rows.min(self.tokens.len())]
    }

    /// The decoder, after the step [`Piece::decoded`] names (for its routing); `None` with drafts.
    pub fn decoder(&self) -> Option<&(dyn Decoder + 'f)> {
        match &self.source {
            Source::Plain { dec, .. } => Some(&**dec),
            Source::Drafted { .. } => None,
        }
    }

    /// The drafts' counts; `None` without drafts.
    pub fn draft_stats(&self) -> Option<SpecStats> {
        match &self.source {
            Source::Plain { .. } => None,
            Source::Drafted { spec, .. } => Some(spec.stats()),
        }
    }
}

/// A prompt has a token and leaves a position to generate into.
/// The tokens `opts` never lets the sampler choose: the end-of-generation ones with `ignore_eos`.
fn banned_tokens(tok: &Tokenizer, opts: &GenerateOptions) -> Vec<u32> {
    if !opts.ignore_eos {
        return Vec::new();
    }
    (0..tok.n_vocab() as u32)
        .filter(|&t| tok.is_eog(t))
        .collect()
}

/// `sampler`'s choice from `logits`, the `banned` tokens' logits taken as −∞.
fn choose(sampler: &mut Sampler, logits: &[f32], history: &[u32], banned: &[u32]) -> u32 {
    if banned.is_empty() {
        return sampler.sample(logits, history);
    }
    let mut masked = logits.to_vec();
    for &t in banned {
        if let Some(l) = masked.get_mut(t as usize) {
            *l = f32::NEG_INFINITY;
        }
    }
    sampler.sample(&masked, history)
}

fn check_prompt(prompt: &[u32], ctx: usize) -> Result<()> {
    if prompt.is_empty() {
        return Err(ModelError::EmptyPrompt);
    }
    if prompt.len() >= ctx {
        return Err(ModelError::PositionOutOfRange {
            pos: prompt.len(),
            max_ctx: ctx,
        });
    }
    Ok(())
}

/// Holds back text that may be the start of a stop string, and cuts at the first stop string.
#[derive(Debug, Default)]
pub struct StopScan {
    stops: Vec<String>,
    text: String,
    emitted: usize,
    stopped: bool,
}

impl StopScan {
    pub fn new(stops: Vec<String>) -> Self {
        StopScan {
            stops,
            ..Self::default()
        }
    }

    /// Adds generated text; returns the text now safe to send, and whether a stop string was
    /// reached (the stop string itself and anything after it are never sent).
    pub fn push(&mut self, piece: &str) -> (String, bool) {
        if self.stopped {
            return (String::new(), true);
        }
        self.text.push_str(piece);
        let tail = &self.text[self.emitted..];
        if let Some(at) = self
            .stops
            .iter()
            .filter_map(|s| tail.find(s.as_str()))
            .min()
        {
            let out = tail[..at].to_string();
            self.emitted = self.text.len();
            self.stopped = true;
            return (out, true);
        }
        // The longest suffix of the text that is a proper prefix of some stop string stays back.
        // Only prefixes no longer than the unsent text can match, so a long stop string costs no
        // more than that text per token (16 stop strings of 60 KB made every token scan ~10^6
        // candidate prefixes).
        let hold = self
            .stops
            .iter()
            .map(|s| {
                (1..s.len().min(tail.len() + 1))
                    .rev()
                    .filter(|&k| s.is_char_boundary(k))
                    .find(|&k| tail.ends_with(&s[..k]))
                    .unwrap_or(0)
            })
            .max()
            .unwrap_or(0);
        let safe = self.text.len() - hold;
        let out = self.text[self.emitted..safe].to_string();
        self.emitted = safe;
        (out, false)
    }

    /// Whether a stop string was reached.
    pub fn stopped(&self) -> bool {
        self.stopped
    }

    /// The held-back text, when generation ends without a stop string.
    pub fn finish(&mut self) -> String {
        let out = self.text[self.emitted..].to_string();
        self.emitted = self.text.len();
        out
    }
}

#[cfg(test)]
mod tests {
    /// A banned token is never chosen, even as the argmax; without bans the choice is the
    /// sampler's.
    #[test]
    fn banned_tokens_are_never_chosen() {
        use crate::{Sampler, SamplerConfig};
        let logits = [0.1, 5.0, 1.0, -2.0];
        let mut greedy = Sampler::new(SamplerConfig::greedy());
        assert_eq!(super::choose(&mut greedy, &logits, &[], &[]), 1);
        assert_eq!(super::choose(&mut greedy, &logits, &[], &[1]), 2);
        assert_eq!(super::choose(&mut greedy, &logits, &[], &[1, 2, 9]), 0);
        let mut warm = Sampler::new(SamplerConfig {
            temperature: 2.0,
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            seed: 7,
            ..SamplerConfig::default()
        });
        for _ in 0..200 {
            assert_ne!(super::choose(&mut warm, &logits, &[], &[1]), 1);
        }
    }

    use super::StopScan;

    fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
        let mut scan = StopScan::new(stops.iter().map(|s| s.to_string()).collect());
        let mut out = String::new();
        for p in pieces {
            let (text, stopped) = scan.push(p);
            out.push_str(&text);
            if stopped {
                return (out, true);
            }
        }
        out.push_str(&scan.finish());
        (out, false)
    }

    #[test]
    fn no_stops_passes_text_through() {
        assert_eq!(run(&[], &["ab", "c"]), ("abc".into(), false));
    }

    #[test]
    fn cuts_at_a_stop_split_across_pieces() {
        assert_eq!(run(&["END"], &["abE", "N", "Dxyz"]), ("ab".into(), true));
    }

    #[test]
    fn releases_a_false_start() {
        let mut scan = StopScan::new(vec!["END".into()]);
        assert_eq!(scan.push("abEN"), ("ab".into(), false));
        assert_eq!(scan.push("x"), ("ENx".into(), false));
    }

    #[test]
    fn a_long_stop_string_still_holds_back_its_start_and_cuts_at_its_end() {
        let long = format!("<{}>", "x".repeat(60_000));
        let (head, rest) = long.split_at(30_000);
        let mut scan = StopScan::new(vec![long.clone(); 16]);
        assert_eq!(scan.push("text "), ("text ".into(), false));
        // A start of the stop string is held back however long it is, and sent once it diverges.
        assert_eq!(scan.push(head), (String::new(), false));
        assert_eq!(scan.push("y"), (format!("{head}y"), false));
        assert_eq!(run(&[&long], &["a", head, rest, "b"]), ("a".into(), true));
    }

    #[test]
    fn earliest_stop_wins_and_multibyte_is_safe() {
        assert_eq!(run(&["é!", "b"], &["aé", "!b"]), ("a".into(), true));
        assert_eq!(run(&["éé"], &["xé", "y"]), ("xéy".into(), false));
    }
}
