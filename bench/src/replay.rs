//! `ingot replay`: an expert cache replayed over a routing trace (docs/routing-trace.md), for
//! the design where routed experts that do not fit in VRAM live in host memory: a miss is read
//! over PCIe inside the step, and after the step the cache admits what missed.
//!
//! The model, per MoE layer (each layer has its own `capacity` slots):
//! - A step is one decoded token, or one prefill chunk: up to `ubatch` consecutive prefill tokens
//!   of the same session and turn, which needs the union of its tokens' experts once (a chunk runs
//!   as one batch).
//! - Hits are the step's experts resident before it; misses the rest, each read through once (its
//!   `expert_bytes`). Then every missed expert is admitted, evicting the policy's victim among the
//!   residents the step did not use; an expert the step used is never evicted for another of the
//!   same step, so a chunk whose union exceeds the capacity leaves the excess uncached. A capacity
//!   below `n_expert_used` would have to do that on every decoded token and is refused.
//! - Policies: LRU (least recently used), LFU (fewest uses, then LRU), EMA (lowest exponential
//!   moving average of use, decayed for every expert every step, resident or not, so an expert that
//!   stops being used loses its score at the same rate wherever it lives), and Belady's MIN (evict
//!   the resident used farthest in the future): the offline optimum of demand caching, the bound
//!   the others are judged by.
//! - The first `warmup` tokens warm the cache and are not counted; a trace with no token after them
//!   is an error, never a report of zero misses.
//!
//! The predicted speed is a bound from the link alone: read-through and admission bytes per decoded
//! token over the card's PCIe bandwidth times [`PCIE_EFFICIENCY`]; with `base_tok_s` (the
//! all-in-VRAM speed, measured or predicted), the two times add.

pub use ingot_model::expert_cache::Policy;
use ingot_model::expert_cache::{hit_rate, LayerCache};
use ingot_model::trace::{Phase, Trace, TraceError};
use thiserror::Error;

use crate::predict::Card;

/// Fraction of the link's per-direction bandwidth that reads of host-mapped memory and copy-engine
/// transfers reach. Unpublished: an assumption to fit when a GPU is lent.
pub const PCIE_EFFICIENCY: f64 = 0.80;

#[derive(Debug, Error)]
pub enum ReplayError {
    #[error(transparent)]
    Trace(#[from] TraceError),
    #[error("{0}")]
    Options(String),
}

#[derive(Debug, Clone, Copy)]
pub struct ReplayOptions {
    /// Slots per MoE layer.
    pub capacity: usize,
    pub policy: Policy,
    /// Tokens at the start of the trace not counted.
    pub warmup: usize,
    /// Most prefill tokens in one chunk.
    pub ubatch: usize,
}

/// Counts of one MoE layer over the measured steps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LayerStats {
    /// Block index of the layer.
    pub layer: usize,
    pub hits: u64,
    pub misses: u64,
    /// Experts admitted (copied into a slot after a miss).
    pub admissions: u64,
    pub miss_bytes: u64,
    pub admission_bytes: u64,
}

impl LayerStats {
    pub fn hit_rate(&self) -> f64 {
        hit_rate(self.hits, self.misses)
    }
}

/// Counts of one phase (decode tokens or prefill chunks) over the measured steps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PhaseStats {
    pub steps: u64,
    pub tokens: u64,
    pub miss_bytes: u64,
    pub admission_bytes: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReplayReport {
    pub policy: Policy,
    pub capacity: usize,
    pub n_expert: usize,
    pub tokens: usize,
    pub warmup: usize,
    pub layers: Vec<LayerStats>,
    pub decode: PhaseStats,
    pub prefill: PhaseStats,
}

impl ReplayReport {
    pub fn hit_rate(&self) -> f64 {
        let (h, m) = self
            .layers
            .iter()
            .fold((0, 0), |(h, m), l| (h + l.hits, m + l.misses));
        hit_rate(h, m)
    }

    /// Bytes over the link per measured decoded token: read-through misses plus admissions.
    pub fn decode_bytes_per_token(&self) -> (f64, f64) {
        let t = self.decode.tokens.max(1) as f64;
        (
            self.decode.miss_bytes as f64 / t,
            self.decode.admission_bytes as f64 / t,
        )
    }

    /// Seconds per decoded token the link needs on `card` (a lower bound on the step's added time).
    pub fn pcie_seconds_per_token(&self, card: &Card) -> f64 {
        let (miss, admit) = self.decode_bytes_per_token();
        (miss + admit) / (card.pcie_gbps * 1e9 * PCIE_EFFICIENCY)
    }

    /// Predicted decode tok/s on `card`: the link time added to `1 / base_tok_s`, or the link
    /// alone.
    pub fn predicted_tok_s(&self, card: &Card, base_tok_s: Option<f64>) -> f64 {
        let t = self.pcie_seconds_per_token(card) + base_tok_s.map_or(0.0, |b| 1.0 / b);
        if t > 0.0 {
            1.0 / t
        } else {
            f64::INFINITY
        }
    }
}

/// One step of the replay: its phase, tokens, first token's index, and per layer the distinct
/// experts used.
struct Step {
    phase: Phase,
    first_token: usize,
    tokens: usize,
    experts: Vec<Vec<u32>>,
}

fn steps(trace: &Trace, ubatch: usize) -> Result<Vec<Step>, ReplayError> {
    let (l, k) = (trace.header.moe_layers.len(), trace.header.n_expert_used);
    let mut out: Vec<Step> = Vec::new();
    let mut chunk_key = None;
    for (i, rec) in trace.records().enumerate() {
        let rec = rec?;
        let key = (rec.session, rec.turn);
        let extend = rec.phase == Phase::Prefill
            && chunk_key == Some(key)
            && out
                .last()
                .is_some_and(|s| s.phase == Phase::Prefill && s.tokens < ubatch);
        if !extend {
            out.push(Step {
                phase: rec.phase,
                first_token: i,
                tokens: 0,
                experts: vec![Vec::with_capacity(k); l],
            });
        }
        chunk_key = (rec.phase == Phase::Prefill).then_some(key);
        let step = out.last_mut().expect("pushed above");
        step.tokens += 1;
        for (layer, pairs) in step.experts.iter_mut().zip(rec.routing.chunks(k)) {
            for &(e, _) in pairs {
                if !layer.contains(&e) {
                    layer.push(e);
                }
            }
        }
    }
    Ok(out)
}

/// Replays `trace` through per-layer caches of `opts.capacity` slots. See the module documentation.
pub fn replay(trace: &Trace, opts: &ReplayOptions) -> Result<ReplayReport, ReplayError> {
    let h = &trace.header;
    if opts.capacity < h.n_expert_used {
        return Err(ReplayError::Options(format!(
            "--cache {} is below the {} experts every token uses (n_expert_used): the cache would evict an \
             expert chosen in the same step",
            opts.capacity, h.n_expert_used
        )));
    }
    if opts.capacity > h.n_expert {
        return Err(ReplayError::Options(format!(
            "--cache {} is above the model's {} experts per layer",
            opts.capacity, h.n_expert
        )));
    }
    if let Policy::Ema(d) = opts.policy {
        if !(d > 0.0 && d < 1.0) {
            return Err(ReplayError::Options(format!(
                "EMA decay {d} is not in (0, 1)"
            )));
        }
    }
    if opts.ubatch == 0 {
        return Err(ReplayError::Options("--ubatch must be at least 1".into()));
    }
    if trace.len() <= opts.warmup {
        return Err(ReplayError::Options(format!(
            "the trace has {} tokens, not more than the warm-up of {}: nothing would be measured (lower \
             --warmup or record a longer trace)",
            trace.len(),
            opts.warmup
        )));
    }
    let steps = steps(trace, opts.ubatch)?;
    let mut caches: Vec<LayerCache> = (0..h.moe_layers.len())
        .map(|_| LayerCache::new(h.n_expert))
        .collect();
    if opts.policy == Policy::Belady {
        for (s, step) in steps.iter().enumerate() {
            for (cache, used) in caches.iter_mut().zip(&step.experts) {
                for &e in used {
                    cache.will_use(e, s as u64);
                }
            }
        }
    }
    let mut layers: Vec<LayerStats> = h
        .moe_layers
        .iter()
        .map(|&layer| LayerStats {
            layer,
            ..LayerStats::default()
        })
        .collect();
    let (mut decode, mut prefill) = (PhaseStats::default(), PhaseStats::default());
    for (s, step) in steps.iter().enumerate() {
        let measured = step.first_token >= opts.warmup;
        let phase = match step.phase {
            Phase::Decode => &mut decode,
            Phase::Prefill => &mut prefill,
        };
        if measured {
            phase.steps += 1;
            phase.tokens += step.tokens as u64;
        }
        for (li, (cache, used)) in caches.iter_mut().zip(&step.experts).enumerate() {
            let out = cache.step(used, s as u64, opts.policy, opts.capacity);
            let (hits, misses, admissions) = (out.hits, out.misses, out.admitted.len() as u64);
            if measured {
                let bytes = h.expert_bytes[li];
                let l = &mut layers[li];
                l.hits += hits;
                l.misses += misses;
                l.admissions += admissions;
                l.miss_bytes += misses * bytes;
                l.admission_bytes += admissions * bytes;
                phase.miss_bytes += misses * bytes;
                phase.admission_bytes += admissions * bytes;
            }
        }
    }
    Ok(ReplayReport {
        policy: opts.policy,
        capacity: opts.capacity,
        n_expert: h.n_expert,
        tokens: trace.len(),
        warmup: opts.warmup,
        layers,
        decode,
        prefill,
    })
}
