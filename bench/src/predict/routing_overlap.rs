//! How many distinct routed experts a verify of `m` neighbouring tokens reads per MoE layer:
//! under uniform, independent routing ([`expected_distinct_experts`]) or **measured** on a routing
//! trace of the real model (`ingot run --backend cpu --trace-routing`, docs/routing-trace.md).
//!
//! A speculative verify runs the last verified token and its `k` drafts, `m = k + 1` consecutive
//! positions of the model's own output, so the windows measured are `m` consecutive decode-phase
//! records of one session and turn (`pos` rising by one). Prompt tokens (prefill records) are
//! left out: a verify only ever holds generated text.

use ingot_model::trace::{Phase, Trace, TraceRecord};
use serde::Serialize;

/// Expected distinct experts a layer reads for `m` tokens that each pick `n_used` of `n_expert`
/// uniformly and independently: `n_expert · (1 − (1 − n_used / n_expert)^m)` (an expert is
/// missed by one token with probability `1 − n_used / n_expert`).
pub fn expected_distinct_experts(n_expert: usize, n_used: usize, m: usize) -> f64 {
    if n_expert == 0 {
        return 0.0;
    }
    let miss = 1.0 - n_used as f64 / n_expert as f64;
    n_expert as f64 * (1.0 - miss.powi(m as i32))
}

/// Where the verify's distinct experts per layer come from.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Routing {
    /// ASSUMED uniform and independent ([`expected_distinct_experts`]).
    Uniform,
    /// Measured on a routing trace ([`RoutingOverlap::from_trace`]).
    Measured(RoutingOverlap),
}

impl Routing {
    /// Mean distinct experts per MoE layer for `m` tokens of a model routing `n_used` of
    /// `n_expert`. A measured overlap holds every `m` the prediction asks for
    /// ([`RoutingOverlap::from_trace`] was given the largest).
    pub fn distinct(&self, n_expert: usize, n_used: usize, m: usize) -> f64 {
        match self {
            Routing::Uniform => expected_distinct_experts(n_expert, n_used, m),
            Routing::Measured(o) => o.distinct[m - 1],
        }
    }
}

/// Distinct experts per MoE layer over windows of consecutive generated tokens, measured.
#[derive(Clone, Debug, Serialize)]
pub struct RoutingOverlap {
    /// The trace's file, as given.
    pub trace: String,
    /// `general.name` of the model the trace was recorded on.
    pub model: String,
    /// Whether the trace's model fingerprint is the predicted model's (a trace of the real model
    /// applied to a header preset of the same shape is allowed, and said).
    pub same_model: bool,
    pub n_expert: usize,
    pub n_expert_used: usize,
    /// `distinct[m − 1]`: the mean over windows of `m` tokens and over MoE layers of the distinct
    /// experts the window's tokens chose together (`distinct[0]` is `n_expert_used`).
    pub distinct: Vec<f64>,
    /// `windows[m − 1]`: how many windows of `m` tokens were measured.
    pub windows: Vec<usize>,
    /// `uniform[m − 1]`: [`expected_distinct_experts`] for the same `m`, beside it.
    pub uniform: Vec<f64>,
}

/// Why a trace cannot give the verify's overlap.
#[derive(Debug, thiserror::Error)]
pub enum OverlapError {
    #[error(transparent)]
    Trace(#[from] ingot_model::trace::TraceError),
    #[error(transparent)]
    Config(#[from] ingot_model::ModelError),
    #[error(
        "routing trace {trace}: {what}, the model {want}: record the trace on the model being \
         predicted (`ingot run --backend cpu --trace-routing FILE`)"
    )]
    Shape {
        trace: String,
        what: String,
        want: String,
    },
    #[error(
        "routing trace {trace} holds no run of {m} consecutive generated tokens (it records \
         {decode}): record a longer generation (`ingot run -n N --trace-routing \
         FILE` records N − 1 of them; N ≥ {})",
        m + 1
    )]
    TooShort {
        trace: String,
        m: usize,
        decode: usize,
    },
}

impl RoutingOverlap {
    /// Opens the trace at `path` and measures windows of `1..=max_m` tokens for the model whose
    /// header is `gguf` (its expert counts and MoE layers must match; a trace of another model
    /// of the same shape is allowed and marked, see [`RoutingOverlap::same_model`]).
    pub fn for_model(
        path: &std::path::Path,
        gguf: &ingot_gguf::Gguf,
        max_m: usize,
    ) -> Result<RoutingOverlap, OverlapError> {
        let config = ingot_model::ModelConfig::from_gguf(gguf)?;
        let trace = Trace::open(path)?;
        // The layers a trace of this model would record, as the trace's writer lists them.
        let moe_layers = ingot_model::trace::TraceHeader::new(gguf, &config)
            .moe_layers
            .len();
        let same_model = trace.check_model(gguf).is_ok();
        RoutingOverlap::from_trace(
            &trace,
            &path.display().to_string(),
            (config.n_expert, config.n_expert_used, moe_layers),
            same_model,
            max_m,
        )
    }

    /// Measures windows of `1..=max_m` consecutive decode records of `trace`, which must route
    /// `n_used` of `n_expert` experts in `moe_layers` layers as the predicted model does;
    /// `same_model` is the fingerprint check's verdict.
    pub fn from_trace(
        trace: &Trace,
        name: &str,
        (n_expert, n_used, moe_layers): (usize, usize, usize),
        same_model: bool,
        max_m: usize,
    ) -> Result<RoutingOverlap, OverlapError> {
        let h = &trace.header;
        if (h.n_expert, h.n_expert_used, h.moe_layers.len()) != (n_expert, n_used, moe_layers) {
            return Err(OverlapError::Shape {
                trace: name.into(),
                what: format!(
                    "{} of {} experts in {} MoE layers",
                    h.n_expert_used,
                    h.n_expert,
                    h.moe_layers.len()
                ),
                want: format!("{n_used} of {n_expert} in {moe_layers}"),
            });
        }
        let records: Vec<TraceRecord> = trace.records().collect::<Result<_, _>>()?;
        let (sums, windows) = windows_of(&records, moe_layers, n_used, max_m);
        if let Some(m) = (1..=max_m).find(|&m| windows[m - 1] == 0) {
            return Err(OverlapError::TooShort {
                trace: name.into(),
                m,
                decode: windows[0],
            });
        }
        let distinct = (0..max_m)
            .map(|i| sums[i] as f64 / (windows[i] * moe_layers.max(1)) as f64)
            .collect();
        Ok(RoutingOverlap {
            trace: name.into(),
            model: h.model.clone(),
            same_model,
            n_expert,
            n_expert_used: n_used,
            distinct,
            windows,
            uniform: (1..=max_m)
                .map(|m| expected_distinct_experts(n_expert, n_used, m))
                .collect(),
        })
    }
}

/// For each `m` in `1..=max_m`: the distinct experts summed over every window of `m` consecutive
/// generated tokens (decode records of one session and turn, `pos` rising by one) and its MoE
/// layers, and the number of windows.
fn windows_of(
    records: &[TraceRecord],
    layers: usize,
    n_used: usize,
    max_m: usize,
) -> (Vec<usize>, Vec<usize>) {
    let mut sums = vec![0usize; max_m];
    let mut windows = vec![0usize; max_m];
    for (start, first) in records.iter().enumerate() {
        if first.phase != Phase::Decode {
            continue;
        }
        let run = records[start..]
            .iter()
            .take(max_m)
            .enumerate()
            .take_while(|(i, r)| {
                r.phase == Phase::Decode
                    && (r.session, r.turn) == (first.session, first.turn)
                    && r.pos as usize == first.pos as usize + i
            })
            .count();
        for m in 1..=run {
            sums[m - 1] += distinct_in(&records[start..start + m], layers, n_used);
            windows[m - 1] += 1;
        }
    }
    (sums, windows)
}

/// Distinct experts the tokens `window` chose, summed over the `layers` MoE layers (each record's
/// routing is `layers · n_used` pairs, layer-major).
fn distinct_in(window: &[TraceRecord], layers: usize, n_used: usize) -> usize {
    (0..layers)
        .map(|l| {
            let mut seen: Vec<u32> = window
                .iter()
                .flat_map(|r| r.routing[l * n_used..(l + 1) * n_used].iter().map(|p| p.0))
                .collect();
            seen.sort_unstable();
            seen.dedup();
            seen.len()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One token reads its `n_used` experts; many tokens tend to all of them; two tokens of
    /// GLM-4.7-Flash's 4 of 64 read 4 + 4·60/64 = 7.75 on average (the second token's experts
    /// each miss the first's with probability 60/64). Checked against a direct simulation of
    /// uniform routing.
    #[test]
    fn distinct_experts_under_uniform_routing() {
        assert!((expected_distinct_experts(64, 4, 1) - 4.0).abs() < 1e-12);
        assert!((expected_distinct_experts(64, 4, 2) - 7.75).abs() < 1e-12);
        assert!((expected_distinct_experts(64, 4, 1000) - 64.0).abs() < 1e-9);
        assert_eq!(expected_distinct_experts(0, 0, 3), 0.0);
        // Monte Carlo: m tokens each draw 4 distinct of 64 (a partial Fisher-Yates shuffle).
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        for m in [2, 3, 4] {
            let trials = 20_000;
            let mut total = 0usize;
            for _ in 0..trials {
                let mut seen = [false; 64];
                for _ in 0..m {
                    let mut pool: Vec<usize> = (0..64).collect();
                    for i in 0..4 {
                        let j = i + next(64 - i);
                        pool.swap(i, j);
                        seen[pool[i]] = true;
                    }
                }
                total += seen.iter().filter(|&&s| s).count();
            }
            let mean = total as f64 / trials as f64;
            let want = expected_distinct_experts(64, 4, m);
            // The mean of 20,000 draws of a count with standard deviation < 2: within 0.05.
            assert!((mean - want).abs() < 0.05, "m {m}: {mean} vs {want}");
        }
    }

    /// A record of layer-major `experts` (2 layers × 2 used here).
    fn rec(pos: u32, phase: Phase, experts: [u32; 4]) -> TraceRecord {
        TraceRecord {
            session: 0,
            turn: 0,
            pos,
            token: 7,
            phase,
            routing: experts.iter().map(|&e| (e, 0.5)).collect(),
        }
    }

    /// Distinct experts are counted per layer (an expert id shared across layers is two
    /// experts), and repeats inside a window once.
    #[test]
    fn distinct_counts_each_layer_apart() {
        let a = rec(0, Phase::Decode, [0, 1, 0, 1]);
        let b = rec(1, Phase::Decode, [1, 2, 3, 0]);
        assert_eq!(distinct_in(std::slice::from_ref(&a), 2, 2), 4);
        // Layer 0: {0, 1, 2}; layer 1: {0, 1, 3}.
        assert_eq!(distinct_in(&[a.clone(), b.clone()], 2, 2), 6);
        assert_eq!(distinct_in(&[a.clone(), a], 2, 2), 4);
    }

    /// Windows hold consecutive generated tokens only: prompt (prefill) records, a gap in `pos`
    /// and a new session each end a run.
    #[test]
    fn windows_are_runs_of_consecutive_generated_tokens() {
        let mut records = vec![
            rec(0, Phase::Prefill, [0, 1, 0, 1]),
            rec(1, Phase::Decode, [0, 1, 0, 1]),
            rec(2, Phase::Decode, [2, 3, 0, 1]),
            rec(3, Phase::Decode, [0, 1, 2, 3]),
            // A gap: pos 5 follows pos 3.
            rec(5, Phase::Decode, [0, 1, 0, 1]),
            rec(6, Phase::Decode, [0, 1, 0, 1]),
        ];
        let mut other = rec(7, Phase::Decode, [2, 3, 2, 3]);
        other.session = 1;
        records.push(other);
        let (sums, windows) = windows_of(&records, 2, 2, 3);
        // m = 1: the six decode records, 4 experts each over the two layers.
        assert_eq!((sums[0], windows[0]), (24, 6));
        // m = 2: (1,2) 6, (2,3) 8, (5,6) 4; (3,5) and (6,7') are broken.
        assert_eq!((sums[1], windows[1]), (18, 3));
        // m = 3: (1,2,3) only: layer 0 {0,1,2,3}, layer 1 {0,1,2,3}.
        assert_eq!((sums[2], windows[2]), (8, 1));
    }
}
