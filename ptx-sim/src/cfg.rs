//! Reconvergence points, computed once per kernel at load: the immediate post-dominator of every
//! branch, which is where lanes that diverged at that branch reconverge (the classic SIMT
//! reconvergence stack rule).
//!
//! `trap` ends a path for good: a lane that executes it faults the launch, so it never reaches the
//! kernel exit nor any later instruction. Post-dominance is therefore computed over the paths that
//! can reach the exit only (`ptx_front::PostDominators`). Without this, a bounds or divide-by-zero
//! check that branches to a trap block (what rustc emits for `/` and slice indexing) would move the
//! reconvergence point of every enclosing branch to the exit, and a later `bar.sync` would see a
//! diverged warp.

use ptx_front::{Cfg, Flow, PostDom, PostDominators};

use crate::ir::{Inst, Op};

/// For each instruction index: the reconvergence instruction of the branch there (`u32::MAX` =
/// kernel exit; also the value for non-branches, and for branches from which the exit is
/// unreachable: they never reconverge before the launch ends).
pub(crate) fn reconvergence_points(insts: &[Inst]) -> Vec<u32> {
    let flow: Vec<Flow> = insts.iter().map(flow).collect();
    let cfg = Cfg::from_flow(&flow, &[]);
    let pdom = PostDominators::compute(&cfg);
    let mut out = vec![u32::MAX; insts.len()];
    for (b, block) in cfg.blocks.iter().enumerate() {
        let Some(last) = block.instrs.clone().last() else {
            continue;
        };
        if let (Op::Bra { .. }, Some(PostDom::Block(d))) = (&insts[last].op, pdom.immediate(b)) {
            out[last] = cfg.blocks[d].instrs.start as u32;
        }
    }
    out
}

fn flow(inst: &Inst) -> Flow {
    let guarded = inst.guard.is_some();
    match inst.op {
        Op::Bra { target, .. } => Flow::Branch {
            targets: vec![target as usize],
            guarded,
        },
        Op::Exit => Flow::Exit { guarded },
        Op::Trap => Flow::Trap { guarded },
        _ => Flow::Next,
    }
}
