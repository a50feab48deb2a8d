//! Correctness gate: a device backend decoded beside the CPU oracle, step by step.
//!
//! Both decoders are fed the same tokens (the prompt, then the oracle's own greedy choices), so
//! they stay aligned even after a disagreement. Each step is judged by [`compare::judge_step`]:
//! same top-1 token or not, the largest logit difference, and whether a differing top-1 is a
//! near-tie (the oracle's top-2 margin is inside the band). When the simulator runs, the
//! residual stream after every layer is compared too, so a failing step names the first layer
//! whose hidden state left the band.

pub mod band;
mod cache;
pub mod compare;
mod run;

pub use band::Band;
pub use cache::{run_cache_gate, run_cache_gate_on, CacheReport};
pub use compare::{excuse_route_tie, judge_step, LayerDrift, StepReport, Verdict};
pub use run::{
    run_gate, run_gate_against, run_gate_files, GateBackend, GateError, GateOptions, GateReport,
    Reference,
};
