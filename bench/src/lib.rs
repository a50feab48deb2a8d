//! Kernel microbenchmarks for ingot's decode kernels at DeepSeek-V2-Lite's shapes.
//!
//! * [`cases`]: the table of benches (one entry per kernel launch the decoder makes).
//! * [`inputs`]: Gaussian weights through the reference quantizers, random activations, and
//!   [`inputs::Variety`], the proof that they are not degenerate.
//! * [`gpu`]: CUDA-event timing with L2-evicting buffer rotation and a copy-bandwidth reference.
//! * [`sim`]: without a GPU, the PTX simulator's counters for the same cases (no time).
//! * [`predict`]: the decode plan as a table of simulator counts, and a model of a card's
//!   decode time from them (predictions, never measurements).
//! * [`decode`]: the end-to-end decode bench behind `ingot bench` (tokens/s at cache depths).
//! * [`speculative`]: `ingot bench --draft mtp`: greedy generation with and without MTP drafts.
//! * [`witness`]: the first line of every bench report (GPU state via NVML, or the CPU).
//!
//! `cargo bench -p ingot-bench` runs `benches/kernels.rs`, which picks the GPU or the simulator.

pub mod cases;
pub mod decode;
pub mod device;
mod error;
pub mod gpu;
pub mod inputs;
pub mod predict;
pub mod replay;
pub mod report;
pub mod sass;
pub mod setup;
pub mod sim;
pub mod speculative;
pub mod witness;

pub use error::{BenchError, Result};
