//! The decode plan as a table, and a prediction of a card's decode speed from the simulator's
//! counts. Everything here is a **prediction**, never a measurement, except [`measured`]: the
//! GPU's node times put beside the prediction by `ingot plan --measure`.
//!
//! # Counts
//! The plan is built from the model's header alone (`ingot_graph::build_plan_for`); each node
//! runs in ptx-sim on zeroed weights at the real shapes, at most `max_blocks` blocks per node,
//! scaled to the whole grid ([`sample`], [`counts`]). Per node:
//! - *unique bytes*: the smaller of the sectors the simulator saw read (32 B each) and the
//!   node's footprint: the buffers its arguments point to that the launch read from (ptx-sim's
//!   `Sim::was_read`; an output it only writes is not read), whole, except the routed experts'
//!   tensors (`*_exps`, `n_expert_used / n_expert` of them) and the latent cache (rows
//!   `0..=depth` for the attention kernels, none for the rope, which only writes a row);
//! - *re-read bytes*: sectors read beyond the unique bytes (activation vectors read by every
//!   warp, a query read per segment);
//! - *DRAM bytes*: unique bytes plus the sectors written;
//! - registers per thread and static shared memory from the audit ([`resources`]).
//!
//! # Time of one node ([`model::node_time`])
//! `max(DRAM, L2, issue) + tail + launch`, with, for a grid of `B` blocks on a card of `S` SMs:
//! - DRAM = DRAM bytes / (bandwidth · `dram_efficiency` · min(B, S)/S);
//! - L2 (re-reads) = re-read bytes / (`reread_bytes_per_sm_clock` · min(B, S) · clock);
//! - issue = ⌈B/S⌉ · (warp instructions / B) / (schedulers · clock · e), where
//!   e = min(1, resident warps per scheduler / `warps_to_hide_latency`) and the resident warps
//!   are min(⌈B/S⌉, blocks per SM) · warps per block; blocks per SM is the tightest of the
//!   card's block, warp, register (256-register granules per warp) and shared-memory limits;
//! - tail = a last-block-done tail's warp instructions (what the block that ran it executed
//!   beyond the mean of the launch's other blocks; kernels with a `count` parameter always run
//!   their last block alone in the simulator so this can be told) issued by that one block's
//!   warps with the same latency rule, after the rest (serial: no other block is left);
//!   these instructions are taken out of the issue term;
//! - launch = `launch_in_graph_s` per node (a replayed CUDA graph); on a card with early launch
//!   (sm_90), `early_launch_hidden` of it is hidden behind the predecessor for every node after
//!   the first;
//! - on such a card, the DRAM term less what the node's weight prefetch before its wait streamed
//!   while its predecessor ran ([`model::prefetch_before_wait`]: the prefetched lines the
//!   simulator counted, bounded by the window, the predecessor's idle DRAM time, the first wave
//!   and the L2, times `weight_prefetch_overlap`).
//!
//! The step is the sum of its nodes (a graph runs them one after the other), and never less
//! than its DRAM bytes at the efficient bandwidth; tok/s = 1 / step.
//! Published card figures are in [`card`]; the unpublished constants in
//! [`model::DEFAULT_CONSTANTS`], each with its origin, all to be fitted when a GPU is lent.
//!
//! # Limits
//! No overlap between nodes beyond the two early-launch terms above (both assumptions until a
//! card measures them); no caching of weights in L2 across steps (V2-Lite's 1.6 GB dwarfs every
//! L2); every re-read is served at one cache bandwidth whether they hit L1 or L2; instruction
//! latency is one constant, not per instruction class (a prefetched line read from L2 instead of
//! DRAM shortens no issue or latency term); tensor-core and shared-memory throughput are not
//! modelled separately.

pub mod card;
pub mod counts;
pub mod measured;
pub mod model;
pub mod resources;
pub mod sample;
pub mod speculative;
pub mod table;

pub use card::{card_named, card_names, Card, CARDS};
pub use measured::{Family, Measurement};
pub use model::{constants_for, Constants, NodeTime, DEFAULT_CONSTANTS};
pub use speculative::{plan_and_predict_speculative, SpecPrediction};
pub use table::{plan_table, NodeRow, PlanTable, Prediction, TableOptions};

/// Why a plan could not be counted or predicted.
#[derive(Debug, thiserror::Error)]
pub enum PredictError {
    #[error(transparent)]
    Plan(#[from] ingot_graph::PlanError),
    #[error(transparent)]
    Config(#[from] ingot_model::ModelError),
    #[error("ptx-sim: {0}")]
    SimSetup(#[from] ptx_sim::SimError),
    #[error("simulating node `{label}`: {source}")]
    Sim {
        label: String,
        #[source]
        source: ptx_sim::SimError,
    },
    #[error("reading the audit's kernel resources: {0}")]
    Audit(String),
    #[error("depth {depth} does not fit a cache of {ctx} positions: pass --ctx above the depth")]
    Depth { depth: usize, ctx: usize },
    #[error("--max-blocks must be at least 2 (got {0})")]
    MaxBlocks(u64),
    #[error("measured times do not fit the table: {0}")]
    Measured(String),
    #[error("{0}")]
    Speculative(String),
}
