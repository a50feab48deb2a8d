//! The decode plan as a table, and a prediction of a card's decode speed from the simulator's
//! counts. Everything here is a **prediction**, never a measurement, except [`measured`]: the
//! GPU's node times put beside the prediction by `ingot plan --measure`.
//!
//! The model, term by term, with its limits: docs/prediction-model.md. In short, each node of the
//! plan built from the header alone runs in ptx-sim on zeroed weights at the real shapes
//! ([`sample`], [`counts`]), giving unique, re-read and DRAM bytes, warp instructions, and the
//! audit's registers and shared memory ([`resources`]); a node takes `max(DRAM, L2, issue) +
//! tail + launch` ([`model::node_time`], docs/prediction-model.md#time-of-one-node); the step is
//! the sum of its nodes and never less than its DRAM bytes at the efficient bandwidth. Published
//! card figures are in [`card`]; the unpublished constants in [`model::DEFAULT_CONSTANTS`], each
//! with its origin, all to be fitted when a GPU is lent.

pub mod card;
pub mod chain;
pub mod counts;
pub mod flash;
pub mod footprint;
pub mod handoff;
pub mod measured;
pub mod measurement;
pub mod model;
pub mod resources;
pub mod routing_overlap;
pub mod sample;
pub mod speculative;
pub mod table;
pub mod tickets;

pub use card::{card_named, card_names, Card, CARDS};
pub use measurement::{Family, Measurement};
pub use model::{constants_for, Constants, NodeTime, DEFAULT_CONSTANTS};
pub use speculative::{plan_and_predict_speculative, SpecOptions, SpecPrediction};
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
