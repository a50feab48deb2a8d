//! The decoder's thread: it owns the one decoder, takes jobs from the bounded queue in order, and streams each
//! job's text back as [`Event`]s. A job whose receiver is gone (the client left) stops at the next token.
//!
//! Between jobs it keeps the tokens whose rows are in the KV cache: the next prompt's longest common prefix with
//! them is not decoded again ([`Decoder::decode`] at an earlier position rewinds the cache), except its last token,
//! whose logits the first sample needs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use ingot_model::{Decoder, Sampler};
use ingot_tokenizer::Tokenizer;
use tokio::sync::mpsc::{Receiver, UnboundedSender};

use crate::api::Generation;
use crate::metrics::Metrics;

/// One request for the decoder.
pub struct Job {
    pub prompt: Vec<u32>,
    pub generation: Generation,
    pub events: UnboundedSender<Event>,
}

/// Why generation ended, in OpenAI's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// An end-of-generation token or a stop string.
    Stop,
    /// `max_tokens` or the context is full.
    Length,
}

impl Finish {
    pub fn as_str(self) -> &'static str {
        match self {
            Finish::Stop => "stop",
            Finish::Length => "length",
        }
    }
}

/// What a job sends back, in order: `Text`* then one `Done` or `Error`.
#[derive(Debug)]
pub enum Event {
    Text(String),
    Done {
        finish: Finish,
        prompt_tokens: usize,
        completion_tokens: usize,
    },
    Error(String),
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

    /// Adds generated text; returns the text now safe to send, and whether a stop string was reached (the
    /// stop string itself and anything after it are never sent).
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
        // The longest suffix of the text that is a proper prefix of some stop string stays back. Only
        // prefixes no longer than the unsent text can match, so a long stop string costs no more than that
        // text per token (16 stop strings of 60 KB made every token scan ~10^6 candidate prefixes).
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

/// Runs jobs until every sender of the queue is gone.
pub fn run(
    mut decoder: Box<dyn Decoder + '_>,
    tok: Arc<Tokenizer>,
    ctx: usize,
    mut queue: Receiver<Job>,
    metrics: Arc<Metrics>,
    log: bool,
    prompt_cache: bool,
) {
    // Tokens whose rows the cache holds, at positions 0..cached.len().
    let mut cached: Vec<u32> = Vec::new();
    while let Some(job) = queue.blocking_recv() {
        if !prompt_cache {
            // Every request from an empty cache (`ServeOptions::prompt_cache`).
            cached.clear();
        }
        metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
        if job.events.is_closed() {
            metrics.cancelled.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        metrics.busy.store(1, Ordering::Relaxed);
        let outcome = generate(&mut *decoder, &tok, ctx, &job, &mut cached, &metrics);
        metrics.busy.store(0, Ordering::Relaxed);
        match outcome {
            Ok(report) => {
                if report.cancelled {
                    metrics.cancelled.fetch_add(1, Ordering::Relaxed);
                }
                if log {
                    eprintln!(
                        "request: prompt {} tokens ({} from the cache), {} generated, {:.1} tok/s{}",
                        job.prompt.len(),
                        report.reused,
                        report.generated,
                        report.tokens_per_s,
                        if report.cancelled { ", cancelled (client gone)" } else { "" }
                    );
                }
            }
            Err(e) => {
                // The cache may be half written: forget it.
                decoder.reset();
                cached.clear();
                if log {
                    eprintln!("request failed: {e}");
                }
                let _ = job.events.send(Event::Error(e.to_string()));
            }
        }
    }
}

struct Report {
    reused: usize,
    generated: usize,
    tokens_per_s: f64,
    cancelled: bool,
}

/// One job, as `ingot run` decodes: prefill, sample from the last logits, then decode and sample per token.
fn generate(
    dec: &mut dyn Decoder,
    tok: &Tokenizer,
    ctx: usize,
    job: &Job,
    cached: &mut Vec<u32>,
    metrics: &Metrics,
) -> Result<Report, ingot_model::ModelError> {
    let prompt = &job.prompt;
    let common = cached
        .iter()
        .zip(prompt)
        .take_while(|(a, b)| a == b)
        .count();
    let reused = common.min(prompt.len() - 1);
    cached.truncate(reused);
    let last = dec.prefill_last(&prompt[reused..], reused)?;
    cached.extend_from_slice(&prompt[reused..]);
    metrics.add_prompt(prompt.len(), reused);

    let mut sampler = Sampler::new(job.generation.sampler);
    let mut history = prompt.clone();
    let mut stream = tok.stream_decoder();
    let mut scan = StopScan::new(job.generation.stops.clone());
    let mut next = sampler.sample(&last, &history);

    let room = ctx - prompt.len();
    let budget = job.generation.max_tokens.map_or(room, |m| m.min(room));
    let t0 = Instant::now();
    let mut generated = 0;
    let mut finish = Finish::Length;
    let mut cancelled = false;
    let send = |text: String| text.is_empty() || job.events.send(Event::Text(text)).is_ok();
    while generated < budget {
        generated += 1;
        history.push(next);
        metrics.add_generated(1);
        if tok.is_eog(next) {
            finish = Finish::Stop;
            break;
        }
        if let Some(piece) = stream.push(next) {
            let (text, stopped) = scan.push(&piece);
            if !send(text) {
                cancelled = true;
                break;
            }
            if stopped {
                finish = Finish::Stop;
                break;
            }
        }
        if generated == budget {
            break;
        }
        if job.events.is_closed() {
            cancelled = true;
            break;
        }
        let pos = prompt.len() + generated - 1;
        let logits = dec.decode(next, pos)?;
        cached.push(next);
        next = sampler.sample(logits, &history);
    }
    if !cancelled {
        // The detokenizer's partial bytes and the held-back text, unless a stop string cut the text.
        let mut tail = String::new();
        if !scan.stopped() {
            let (text, stopped) = scan.push(&stream.flush());
            tail.push_str(&text);
            if stopped {
                finish = Finish::Stop;
            } else {
                tail.push_str(&scan.finish());
            }
        }
        let _ = send(tail);
        let _ = job.events.send(Event::Done {
            finish,
            prompt_tokens: prompt.len(),
            completion_tokens: generated,
        });
    }
    let secs = t0.elapsed().as_secs_f64();
    let decoded = generated.saturating_sub(1);
    let tokens_per_s = if decoded > 0 && secs > 0.0 {
        decoded as f64 / secs
    } else {
        0.0
    };
    metrics.add_decode(decoded, secs);
    Ok(Report {
        reused,
        generated,
        tokens_per_s,
        cancelled,
    })
}

#[cfg(test)]
mod tests {
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
