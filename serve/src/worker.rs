//! The decoder's thread: it owns the one decoder, takes jobs from the bounded queue in order, and
//! streams each job's text back as [`Event`]s. A job whose receiver is gone (the client left) stops
//! at the next token.
//!
//! Between jobs it keeps the tokens whose rows are in the KV cache: the next prompt's longest
//! common prefix with them is not decoded again ([`Decoder::decode`] at an earlier position rewinds
//! the cache), except its last token, whose logits the first sample needs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use ingot_model::speculative::{Drafts, SpecStats};
use ingot_model::{Decoder, GenerateOptions, Generator};
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

pub use ingot_model::Finish;

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

/// Runs jobs until every sender of the queue is gone.
pub fn run(
    mut decoder: Box<dyn Decoder + '_>,
    tok: Arc<Tokenizer>,
    ctx: usize,
    mut queue: Receiver<Job>,
    metrics: Arc<Metrics>,
    log: bool,
    prompt_cache: bool,
    draft: Option<Drafts>,
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
        let outcome = generate(&mut *decoder, &tok, ctx, &job, &mut cached, &metrics, draft);
        metrics.busy.store(0, Ordering::Relaxed);
        match outcome {
            Ok(report) => {
                if report.cancelled {
                    metrics.cancelled.fetch_add(1, Ordering::Relaxed);
                }
                if log {
                    let drafts = report.drafts.map_or(String::new(), |s| {
                        format!(", {} of {} drafts accepted", s.accepted, s.drafted)
                    });
                    eprintln!(
                        "request: prompt {} tokens ({} from the cache), {} generated, {:.1} tok/s{drafts}{}",
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
    /// The drafts' counts when the job decoded with drafts.
    drafts: Option<SpecStats>,
}

/// One job, as `ingot run` decodes ([`Generator`]), past the prefix `cached` holds; `cached` is
/// left holding the tokens whose rows the cache then has. With `draft` drafts per step (not for
/// a job with `ignore_eos`, which the drafter cannot honour) the prompt is prefilled whole.
fn generate(
    dec: &mut dyn Decoder,
    tok: &Tokenizer,
    ctx: usize,
    job: &Job,
    cached: &mut Vec<u32>,
    metrics: &Metrics,
    draft: Option<Drafts>,
) -> Result<Report, ingot_model::ModelError> {
    let prompt = &job.prompt;
    let opts = GenerateOptions {
        sampler: job.generation.sampler,
        max_tokens: job.generation.max_tokens,
        stops: job.generation.stops.clone(),
        draft: draft.filter(|_| !job.generation.ignore_eos),
        ignore_eos: job.generation.ignore_eos,
    };
    let mut gen = Generator::start(dec, tok, ctx, prompt, cached, opts)?;
    let reused = gen.reused();
    metrics.add_prompt(prompt.len(), reused);
    let t0 = Instant::now();
    let mut cancelled = false;
    let send = |text: String| text.is_empty() || job.events.send(Event::Text(text)).is_ok();
    while let Some(piece) = gen.step()? {
        metrics.add_generated(1);
        if !send(piece.text) {
            cancelled = true;
            break;
        }
        if piece.last {
            break;
        }
        if job.events.is_closed() {
            cancelled = true;
            break;
        }
    }
    let generated = gen.generated();
    let drafts = gen.draft_stats();
    if let Some(s) = &drafts {
        metrics.add_drafts(s.drafted, s.accepted);
    }
    if !cancelled {
        let (tail, finish) = gen.finish();
        let _ = send(tail);
        let _ = job.events.send(Event::Done {
            finish,
            prompt_tokens: prompt.len(),
            completion_tokens: generated,
        });
    }
    *cached = gen.cached().to_vec();
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
        drafts,
    })
}
