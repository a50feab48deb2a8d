//! `ptx-front`: the PTX front end shared by the simulator (`ptx-sim`) and the audit (`ptx-audit`).
//!
//! - [`Source`]: the text prepared for `ptx-syntax` ([`normalize_red`] applied once, keeping every
//!   byte offset), parsed into its syntax tree or tokenized, errors located in the original text.
//! - [`statement`]: one instruction re-read from its tokens as opcode, modifiers and operands.
//! - [`PtxModule`]: a module reduced to what control-flow and resource analyses need (per function,
//!   labels and instructions with mnemonic, guard, branch targets and line; `.local`/`.shared`
//!   declarations; `ingot:hot` marker positions).
//! - [`Cfg`] from what each instruction does to control flow ([`Flow`]); [`PostDominators`] (where
//!   diverged paths meet again: the simulator's reconvergence points); [`LoopForest`] (dominators
//!   and natural loops: the audit's hot loops).
//!
//! - [`read_ptx`]: a PTX file's text, plain or `.xz` (the committed `kernels/ptx/ingot.ptx.xz`).
//! - [`entries`]: a module's text split into its header and its kernels by a scan, without parsing.
//!
//! Depends only on `ptx-syntax` (and `xz2` for compressed files); nothing here knows about
//! execution or budgets.

mod cfg;
pub mod entries;
mod error;
mod file;
mod lines;
mod loops;
mod module;
mod normalize;
mod postdom;
mod source;
pub mod statement;

pub use cfg::{BasicBlock, BlockId, Cfg, Flow};
pub use error::PtxError;
pub use file::{read_ptx, COMPRESSED_EXTENSION};
pub use lines::LineIndex;
pub use loops::{Loop, LoopForest, LoopId};
pub use module::{
    Function, Instr, InstrKind, PredicateGuard, PtxModule, Stmt, VariableDecl, HOT_MARKER,
    MAX_PTX_BYTES,
};
pub use normalize::normalize_red;
pub use postdom::{PostDom, PostDominators};
pub use source::Source;
