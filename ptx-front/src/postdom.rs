//! Post-dominators of a [`Cfg`]: where the paths leaving a block meet again before the function
//! exit.
//!
//! Only paths that can reach the exit count. A block from which the exit is unreachable (it only
//! traps, or loops forever) keeps the full post-dominator set ("post-dominated by everything"), the
//! identity of the intersection, so it does not constrain the post-dominators of the blocks that
//! branch to it. For a SIMT machine this is what makes a bounds check that branches to a `trap`
//! block reconverge right after the check instead of at the kernel exit.

use crate::cfg::{BlockId, Cfg};

/// The immediate post-dominator of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostDom {
    Block(BlockId),
    /// The function exit (a virtual node after every exiting block).
    Exit,
}

/// Immediate post-dominators of every block.
#[derive(Debug, Clone)]
pub struct PostDominators {
    /// `None` for blocks from which the exit is unreachable.
    ipdom: Vec<Option<PostDom>>,
}

impl PostDominators {
    /// Post-dominator sets as bitsets over the blocks plus the exit, iterated from "everything"
    /// down to the greatest fixed point; they form a chain, so the immediate post-dominator is the
    /// strict one with the largest set.
    pub fn compute(cfg: &Cfg) -> PostDominators {
        let nb = cfg.blocks.len();
        let exit = nb;
        let succs = |b: usize| {
            let block = &cfg.blocks[b];
            block
                .succs
                .iter()
                .copied()
                .chain(block.exits.then_some(exit))
        };
        let words = (nb + 1).div_ceil(64);
        let mut pdom: Vec<Vec<u64>> = vec![vec![u64::MAX; words]; nb + 1];
        pdom[exit] = vec![0; words];
        pdom[exit][exit / 64] |= 1 << (exit % 64);
        let mut changed = true;
        while changed {
            changed = false;
            for b in (0..nb).rev() {
                let mut set = vec![u64::MAX; words];
                for s in succs(b) {
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
        let mut reaches = vec![false; nb + 1];
        reaches[exit] = true;
        let mut changed = true;
        while changed {
            changed = false;
            for b in (0..nb).rev() {
                if !reaches[b] && succs(b).any(|s| reaches[s]) {
                    reaches[b] = true;
                    changed = true;
                }
            }
        }
        let count = |v: &[u64]| v.iter().map(|w| w.count_ones()).sum::<u32>();
        let ipdom = (0..nb)
            .map(|b| {
                if !reaches[b] {
                    return None;
                }
                let mut best: Option<(usize, u32)> = None;
                for d in 0..=nb {
                    if d != b && pdom[b][d / 64] & (1 << (d % 64)) != 0 {
                        let c = count(&pdom[d]);
                        if best.is_none_or(|(_, bc)| c > bc) {
                            best = Some((d, c));
                        }
                    }
                }
                Some(match best {
                    Some((d, _)) if d < nb => PostDom::Block(d),
                    _ => PostDom::Exit,
                })
            })
            .collect();
        PostDominators { ipdom }
    }

    /// The immediate post-dominator of `block`; `None` when no path from it reaches the exit.
    pub fn immediate(&self, block: BlockId) -> Option<PostDom> {
        self.ipdom[block]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::Flow;

    fn branch(target: usize) -> Flow {
        Flow::Branch {
            targets: vec![target],
            guarded: true,
        }
    }

    #[test]
    fn diamond_meets_at_the_join() {
        // 0: @p bra 3; 1: next; 2: bra 3 (unguarded); 3: exit
        let flow = [
            branch(3),
            Flow::Next,
            Flow::Branch {
                targets: vec![3],
                guarded: false,
            },
            Flow::Exit { guarded: false },
        ];
        let cfg = Cfg::from_flow(&flow, &[]);
        let pd = PostDominators::compute(&cfg);
        assert_eq!(pd.immediate(0), Some(PostDom::Block(2)));
        assert_eq!(pd.immediate(2), Some(PostDom::Exit));
    }

    #[test]
    fn a_trap_side_does_not_move_the_meeting_point_to_the_exit() {
        // 0: @p bra 3 (to the trap); 1-2: the other side, jumping over the trap; 3: trap; 4-5:
        // exit. The side without the trap is the only way to the exit, so it post-dominates the
        // branch.
        let flow = [
            branch(3),
            Flow::Next,
            Flow::Branch {
                targets: vec![4],
                guarded: false,
            },
            Flow::Trap { guarded: false },
            Flow::Next,
            Flow::Exit { guarded: false },
        ];
        let cfg = Cfg::from_flow(&flow, &[]);
        let pd = PostDominators::compute(&cfg);
        let block_of = |i: usize| {
            cfg.blocks
                .iter()
                .position(|b| b.instrs.contains(&i))
                .unwrap()
        };
        assert_eq!(pd.immediate(block_of(0)), Some(PostDom::Block(block_of(1))));
        assert_eq!(pd.immediate(block_of(3)), None);
    }
}
