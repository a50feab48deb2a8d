//! The deepseek2 decode step as data, and the two executors that run it.
//!
//! A [`Plan`] lists every buffer one decode step touches (weights in their GGUF types, taken
//! zero-copy from the memory map; activations; the latent KV cache of every layer; the
//! device-resident [`StepState`](ingot_abi::step::StepState); host-precomputed constants such
//! as the rope table) and every kernel launch in order, each with its arguments as buffer
//! references and scalars. It is built from a [`ModelConfig`](ingot_model::ModelConfig) and the
//! file's tensor table alone, so it can be inspected (node counts, bytes) without the weights.
//!
//! Nothing that changes from token to token is a launch argument: kernels read the token and
//! position from the `StepState` buffer and the last kernel writes the next token into it. The
//! same node list is therefore captured once into a CUDA graph and replayed per token
//! ([`exec::cuda`]), or interpreted node by node in the PTX simulator with per-node counters
//! ([`exec::sim`]).

pub mod buffer;
pub mod error;
pub mod exec;
pub mod node;
pub mod plan;
pub mod planner;
pub mod recipe;
pub mod weights;

pub use buffer::{BufId, BufferDecl, BufferKind};
pub use error::{ExecError, NodeFailure, PlanError};
pub use node::{BufRef, Node, NodeArg};
pub use plan::{ExpertCacheLayer, ExpertCachePlan, Plan, PlanSummary, RouteBias};
pub use planner::mtp::{build_mtp_plan_for, MtpPlan};
pub use planner::prefill::{
    build_prefill_plan, build_prefill_plan_for, prefill_chunks, Chunk, PrefillPlan, PREFILL_BUCKETS,
};
pub use planner::verify::{build_verify_plan, VerifyPlan, MAX_VERIFY_COLUMNS};
pub use planner::{build_plan, ExpertCacheOptions, PlanOptions};
