//! PTX structure shared by PTX tools: the function list of a module, each function's flat
//! instruction stream, its control-flow graph and its natural loops.
//!
//! This module depends only on `ptx-syntax` (the parser) and on nothing audit-specific, so a PTX
//! simulator or any other tool can reuse it: [`PtxModule::parse`] → [`Function`] →
//! [`Cfg::build`] → [`LoopForest::find`].

mod cfg;
mod compat;
mod loops;
mod module;

pub use cfg::{BasicBlock, BlockId, Cfg};
pub use compat::normalize_red;
pub use loops::{Loop, LoopForest, LoopId};
pub use module::{
    Function, Instr, InstrKind, PredicateGuard, PtxModule, Stmt, VariableDecl, MAX_PTX_BYTES,
};
