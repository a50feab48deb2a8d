//! Control-flow analysis done once per kernel at load: the immediate post-dominator of every branch, which is
//! where lanes that diverged at that branch reconverge (the classic SIMT reconvergence stack rule).
//!
//! `trap` ends a path for good: a lane that executes it faults the launch, so it never reaches the kernel
//! exit nor any later instruction. Post-dominance is therefore computed over the paths that can reach the
//! exit only: a trap has no successor, and a block from which the exit is unreachable keeps the full set
//! ("post-dominated by everything"), so it does not constrain the post-dominators of the blocks that branch
//! to it. Without this, a bounds or divide-by-zero check that branches to a trap block (what rustc emits
//! for `/` and slice indexing) would move the reconvergence point of every enclosing branch to the exit,
//! and a later `bar.sync` would see a diverged warp.

use crate::ir::{Inst, Op};

/// For each instruction index: the reconvergence instruction of the branch there (`u32::MAX` = kernel exit;
/// also the value for non-branches).
pub(crate) fn reconvergence_points(insts: &[Inst]) -> Vec<u32> {
    let n = insts.len();
    let mut out = vec![u32::MAX; n];
    if n == 0 {
        return out;
    }
    // Basic block leaders: entry, branch targets, and the instruction after any control transfer.
    let mut leader = vec![false; n + 1];
    leader[0] = true;
    for (i, inst) in insts.iter().enumerate() {
        match inst.op {
            Op::Bra { target, .. } => {
                if (target as usize) < n {
                    leader[target as usize] = true;
                }
                leader[i + 1] = true;
            }
            Op::Exit | Op::Trap => leader[i + 1] = true,
            _ => {}
        }
    }
    let starts: Vec<usize> = (0..n).filter(|&i| leader[i]).collect();
    let nb = starts.len();
    let exit = nb; // virtual exit node
    let block_of = |i: usize| starts.partition_point(|&s| s <= i) - 1;
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for (b, _) in starts.iter().enumerate() {
        let end = starts.get(b + 1).copied().unwrap_or(n) - 1;
        let last = &insts[end];
        let next = if end + 1 < n { block_of(end + 1) } else { exit };
        let guarded = last.guard.is_some();
        match last.op {
            Op::Bra { target, .. } => {
                let t = target as usize;
                succ[b].push(if t < n { block_of(t) } else { exit });
                if guarded {
                    succ[b].push(next);
                }
            }
            Op::Exit => {
                succ[b].push(exit);
                if guarded {
                    succ[b].push(next);
                }
            }
            // Trapping lanes never continue; the others (guard false) fall through.
            Op::Trap => {
                if guarded {
                    succ[b].push(next);
                }
            }
            _ => succ[b].push(next),
        }
    }
    // Post-dominator sets as bitsets over nb + 1 nodes, iterated from "everything" down to the greatest fixed
    // point. Blocks that cannot reach the exit (only trap, or loop forever) have no successor set to shrink
    // theirs, so they keep the full set, which is the identity of the intersection.
    let words = (nb + 1).div_ceil(64);
    let full = vec![u64::MAX; words];
    let mut pdom: Vec<Vec<u64>> = vec![full; nb + 1];
    pdom[exit] = vec![0; words];
    pdom[exit][exit / 64] |= 1 << (exit % 64);
    let mut changed = true;
    while changed {
        changed = false;
        for b in (0..nb).rev() {
            let mut set = vec![u64::MAX; words];
            for &s in &succ[b] {
                for (w, x) in set.iter_mut().zip(&pdom[s]) {
                    *w &= x;
                }
            }
            set[b / 64] |= 1 << (b % 64);
            if set != pdom[b] {
                pdom[b] = set;
                changed = true;
            }
        }
    }
    // Which blocks can reach the exit (the others keep the full post-dominator set).
    let mut reaches = vec![false; nb + 1];
    reaches[exit] = true;
    let mut changed = true;
    while changed {
        changed = false;
        for b in (0..nb).rev() {
            if !reaches[b] && succ[b].iter().any(|&s| reaches[s]) {
                reaches[b] = true;
                changed = true;
            }
        }
    }
    let count = |v: &Vec<u64>| v.iter().map(|w| w.count_ones()).sum::<u32>();
    for (b, _) in starts.iter().enumerate() {
        let end = starts.get(b + 1).copied().unwrap_or(n) - 1;
        // A branch from which the exit is unreachable never reconverges before the launch ends.
        if !matches!(insts[end].op, Op::Bra { .. }) || !reaches[b] {
            continue;
        }
        // Post-dominators form a chain; the immediate one is the strict post-dominator with the largest set.
        let mut best: Option<(usize, u32)> = None;
        for d in 0..=nb {
            if d != b && pdom[b][d / 64] & (1 << (d % 64)) != 0 {
                let c = count(&pdom[d]);
                if best.is_none_or(|(_, bc)| c > bc) {
                    best = Some((d, c));
                }
            }
        }
        out[end] = match best {
            Some((d, _)) if d < nb => starts[d] as u32,
            _ => u32::MAX,
        };
    }
    out
}
