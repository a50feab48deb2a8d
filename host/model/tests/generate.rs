//! The generation loop on the trained model and the CPU backend: greedy pieces are the hand-written
//! loop's tokens and text, a stop string cuts the text, drafts change nothing, and a warm start
//! past a cached prefix gives the cold start's text.

use ingot_gguf::GgufFile;
use ingot_model::generate::{Finish, GenerateOptions, Generator};
use ingot_model::speculative::Drafts;
use ingot_model::{CpuBackend, Decoder, MlaForm, Sampler, SamplerConfig};
use ingot_tokenizer::Tokenizer;

const CTX: usize = 256;

fn open() -> GgufFile {
    let path = ingot_testdata::golden_model("trained-rust-std");
    GgufFile::open(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn greedy(max_tokens: usize) -> GenerateOptions {
    GenerateOptions {
        sampler: SamplerConfig::greedy(),
        max_tokens: Some(max_tokens),
        ..GenerateOptions::default()
    }
}

/// Every piece's text, the tail, the tokens and why it ended.
fn collect(mut gen: Generator<'_, '_>) -> (String, Vec<u32>, Finish) {
    let (mut text, mut tokens) = (String::new(), Vec::new());
    while let Some(p) = gen.step().expect("step") {
        text += &p.text;
        tokens.push(p.token);
    }
    let (tail, finish) = gen.finish();
    (text + &tail, tokens, finish)
}

/// The loop as `ingot run` wrote it before the generator: prefill, sample, then decode and sample
/// per token.
fn by_hand(dec: &mut dyn Decoder, tok: &Tokenizer, prompt: &[u32], n: usize) -> (String, Vec<u32>) {
    let mut sampler = Sampler::new(SamplerConfig::greedy());
    let mut history = prompt.to_vec();
    let mut stream = tok.stream_decoder();
    let (mut text, mut tokens) = (String::new(), Vec::new());
    let last = dec.prefill_last(prompt, 0).expect("prefill");
    let mut next = sampler.sample(&last, &history);
    while tokens.len() < n {
        tokens.push(next);
        history.push(next);
        if tok.is_eog(next) {
            break;
        }
        text += &stream.push(next).unwrap_or_default();
        if tokens.len() == n {
            break;
        }
        let pos = prompt.len() + tokens.len() - 1;
        next = sampler.sample(dec.decode(next, pos).expect("decode"), &history);
    }
    (text + &stream.flush(), tokens)
}

#[test]
fn greedy_generation_is_the_hand_written_loop_and_stops_where_told() {
    let file = open();
    let tok = Tokenizer::from_gguf(file.header()).expect("tokenizer");
    let prompt = tok.encode("pub fn main() {", true, false);
    let mut cpu = CpuBackend::load(&file, CTX).expect("cpu");
    let want = by_hand(&mut cpu, &tok, &prompt, 40);
    cpu.reset();

    let gen = Generator::start(&mut cpu, &tok, CTX, &prompt, &[], greedy(40)).expect("start");
    let (text, tokens, finish) = collect(gen);
    assert_eq!((&text, &tokens), (&want.0, &want.1));
    assert_eq!(tokens.len(), 40, "{text:?}");
    assert_eq!(finish, Finish::Length);

    // The cache holds the prompt and every token but the last, which was never decoded.
    let mut gen = Generator::start(&mut cpu, &tok, CTX, &prompt, &[], greedy(40)).expect("start");
    while gen.step().expect("step").is_some() {}
    let cached: Vec<u32> = prompt.iter().chain(&tokens[..39]).copied().collect();
    assert_eq!(gen.cached(), &cached[..]);

    // A stop string from the middle of the text: everything before its first occurrence, and
    // `stop`.
    let mid = text.char_indices().nth(text.chars().count() / 2).unwrap().0;
    let stop: String = text[mid..].chars().take(3).collect();
    let cut = text.find(&stop).unwrap();
    let opts = GenerateOptions {
        stops: vec![stop.clone()],
        ..greedy(40)
    };
    let gen = Generator::start(&mut cpu, &tok, CTX, &prompt, &[], opts).expect("start");
    let (stopped, _, finish) = collect(gen);
    assert_eq!(stopped, text[..cut], "stop {stop:?}");
    assert_eq!(finish, Finish::Stop);
}

#[test]
fn drafts_and_a_warm_start_change_no_token() {
    let file = open();
    let tok = Tokenizer::from_gguf(file.header()).expect("tokenizer");
    let prompt = tok.encode("pub fn main() {", true, false);
    let mut cpu = CpuBackend::load(&file, CTX).expect("cpu");
    // The absorbed form's chunked prefill is one-token decoding bit for bit, so a reused prefix
    // changes no logit.
    cpu.set_mla_form(MlaForm::Absorbed);
    let gen = Generator::start(&mut cpu, &tok, CTX, &prompt, &[], greedy(32)).expect("start");
    let cold = collect(gen);

    let opts = GenerateOptions {
        draft: Some(Drafts::new(2)),
        ..greedy(32)
    };
    let mut gen = Generator::start(&mut cpu, &tok, CTX, &prompt, &[], opts).expect("start");
    let mut tokens = Vec::new();
    while let Some(p) = gen.step().expect("step") {
        tokens.push(p.token);
    }
    assert_eq!(tokens, cold.1);
    assert!(gen.draft_stats().expect("drafts").steps > 0);

    // The first generation's cache, then a prompt that extends it: only the new tokens are
    // prefilled.
    let mut gen = Generator::start(&mut cpu, &tok, CTX, &prompt, &[], greedy(8)).expect("start");
    while gen.step().expect("step").is_some() {}
    let cached = gen.cached().to_vec();
    let longer: Vec<u32> = cached.iter().chain(&prompt[1..]).copied().collect();
    let warm = Generator::start(&mut cpu, &tok, CTX, &longer, &cached, greedy(16)).expect("warm");
    assert_eq!(warm.reused(), cached.len());
    let warm = collect(warm);
    cpu.reset();
    let fresh = Generator::start(&mut cpu, &tok, CTX, &longer, &[], greedy(16)).expect("cold");
    assert_eq!(warm, collect(fresh));
}

/// `ignore_eos`: the whole budget, no end-of-generation token, and the plain run's tokens up to
/// where it ended (the choice differs only where the plain run chose an end-of-generation token).
#[test]
fn ignore_eos_runs_the_whole_budget_with_the_same_tokens_before_it() {
    let file = open();
    let tok = Tokenizer::from_gguf(file.header()).expect("tokenizer");
    let mut cpu = CpuBackend::load(&file, CTX).expect("cpu");
    for text in ["}\n", "pub fn main() {"] {
        let prompt = tok.encode(text, true, false);
        let gen = Generator::start(&mut cpu, &tok, CTX, &prompt, &[], greedy(96)).expect("start");
        let (_, plain, finish) = collect(gen);
        let opts = GenerateOptions {
            ignore_eos: true,
            ..greedy(96)
        };
        let gen = Generator::start(&mut cpu, &tok, CTX, &prompt, &[], opts).expect("start");
        let (_, ignored, ignored_finish) = collect(gen);
        assert_eq!(ignored.len(), 96, "{text:?}");
        assert_eq!(ignored_finish, Finish::Length);
        assert!(ignored.iter().all(|&t| !tok.is_eog(t)), "{text:?}");
        let same = if finish == Finish::Stop {
            plain.len() - 1
        } else {
            plain.len()
        };
        assert_eq!(ignored[..same], plain[..same], "{text:?}");
    }
    let opts = GenerateOptions {
        ignore_eos: true,
        draft: Some(Drafts::new(1)),
        ..greedy(8)
    };
    let prompt = tok.encode("fn", true, false);
    assert!(Generator::start(&mut cpu, &tok, CTX, &prompt, &[], opts).is_err());
}
