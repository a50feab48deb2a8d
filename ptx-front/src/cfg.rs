//! Control-flow graph of one function's flat instruction stream.
//!
//! The graph is built from what each instruction does to control flow ([`Flow`]), so the audit's
//! [`Function`] and the simulator's lowered instructions share one construction. Blocks start at
//! the first instruction, at every label, at every branch target, and after every terminator (a
//! branch, `ret`/`exit`, `trap`). A guarded terminator (`@p bra`, `@p ret`, ...) also falls through
//! to the next block. `trap` has no successor: it aborts the launch, so its lanes neither continue
//! nor reach the function's exit. A block *exits* when control can leave the function from it
//! (`ret`/`exit`, a branch past the last instruction, or falling off the end); the exit is not a
//! block.

use std::collections::HashMap;
use std::ops::Range;

use crate::module::{Function, InstrKind, Stmt};

/// Index of a block in [`Cfg::blocks`]; block 0 is the entry.
pub type BlockId = usize;

/// What one instruction does to control flow. `guarded` means it has a predicate, so lanes whose
/// predicate is false continue with the next instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flow {
    /// Continues with the next instruction (calls included: they return).
    Next,
    /// Jumps to the instructions at these indices (one for `bra`, the table for `brx.idx`); an
    /// index at or past the end with no label there leaves the function.
    Branch { targets: Vec<usize>, guarded: bool },
    /// `ret` / `exit`.
    Exit { guarded: bool },
    /// `trap`.
    Trap { guarded: bool },
}

impl Flow {
    fn is_terminator(&self) -> bool {
        !matches!(self, Flow::Next)
    }
}

/// A straight-line run of instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicBlock {
    /// Labels that name the block's first instruction.
    pub labels: Vec<String>,
    /// Instruction indices; may be empty for a trailing label.
    pub instrs: Range<usize>,
    /// Successors without duplicates; a conditional branch lists its targets first, then the
    /// fall-through block.
    pub succs: Vec<BlockId>,
    pub preds: Vec<BlockId>,
    /// Control can leave the function from this block.
    pub exits: bool,
}

/// The control-flow graph of a function.
#[derive(Debug, Clone)]
pub struct Cfg {
    pub blocks: Vec<BasicBlock>,
}

impl Cfg {
    /// The graph of an audited function. Branch targets were checked against the function's labels
    /// when the module was parsed, so every target resolves.
    pub fn build(function: &Function) -> Cfg {
        // A label names the position of the next instruction (the end, for a trailing label).
        let mut labels: Vec<(usize, String)> = Vec::new();
        let mut position = 0;
        for stmt in &function.stmts {
            match stmt {
                Stmt::Label(label) => labels.push((position, label.clone())),
                Stmt::Instr(i) => position = i + 1,
            }
        }
        let by_label: HashMap<&str, usize> = labels.iter().map(|(p, l)| (l.as_str(), *p)).collect();
        let flow: Vec<Flow> = function
            .instrs
            .iter()
            .map(|instr| {
                let guarded = instr.predicate.is_some();
                match &instr.kind {
                    InstrKind::Branch { targets } => Flow::Branch {
                        targets: targets
                            .iter()
                            .filter_map(|t| by_label.get(t.as_str()).copied())
                            .collect(),
                        guarded,
                    },
                    InstrKind::Ret | InstrKind::Exit => Flow::Exit { guarded },
                    InstrKind::Trap => Flow::Trap { guarded },
                    InstrKind::Call | InstrKind::Other => Flow::Next,
                }
            })
            .collect();
        Cfg::from_flow(&flow, &labels)
    }

    /// The graph of `flow` (one entry per instruction) with `labels` as `(instruction index, name)`
    /// in source order; a label at index `flow.len()` makes an empty trailing block.
    pub fn from_flow(flow: &[Flow], labels: &[(usize, String)]) -> Cfg {
        let n = flow.len();
        let mut leader = vec![false; n];
        if n > 0 {
            leader[0] = true;
        }
        for (i, f) in flow.iter().enumerate() {
            if let Flow::Branch { targets, .. } = f {
                for &t in targets.iter().filter(|&&t| t < n) {
                    leader[t] = true;
                }
            }
            if f.is_terminator() && i + 1 < n {
                leader[i + 1] = true;
            }
        }
        for &(p, _) in labels.iter().filter(|(p, _)| *p < n) {
            leader[p] = true;
        }
        let trailing = labels.iter().any(|(p, _)| *p >= n);
        let starts: Vec<usize> = (0..n)
            .filter(|&i| leader[i])
            .chain(trailing.then_some(n))
            .collect();
        let block_at = |i: usize| starts.binary_search(&i).ok();
        let count = starts.len();
        let mut blocks: Vec<BasicBlock> = (0..count)
            .map(|b| BasicBlock {
                labels: Vec::new(),
                instrs: starts[b]..starts.get(b + 1).copied().unwrap_or(n),
                succs: Vec::new(),
                preds: Vec::new(),
                exits: false,
            })
            .collect();
        for (p, label) in labels {
            if let Some(b) = block_at((*p).min(n)) {
                blocks[b].labels.push(label.clone());
            }
        }
        for (id, block) in blocks.iter_mut().enumerate() {
            let next = (id + 1 < count).then_some(id + 1);
            let mut succs = Vec::new();
            let mut exits = false;
            let last = block.instrs.clone().last().map(|i| &flow[i]);
            let falls_through = match last {
                Some(Flow::Branch { guarded, .. })
                | Some(Flow::Exit { guarded })
                | Some(Flow::Trap { guarded }) => *guarded,
                Some(Flow::Next) | None => true,
            };
            match last {
                Some(Flow::Branch { targets, .. }) => {
                    for &t in targets {
                        match block_at(t) {
                            Some(b) => succs.push(b),
                            None => exits = true,
                        }
                    }
                }
                Some(Flow::Exit { .. }) => exits = true,
                _ => {}
            }
            if falls_through {
                match next {
                    Some(b) => succs.push(b),
                    None => exits = true,
                }
            }
            let mut unique = Vec::with_capacity(succs.len());
            for s in succs {
                if !unique.contains(&s) {
                    unique.push(s);
                }
            }
            block.succs = unique;
            block.exits = exits;
        }
        for id in 0..count {
            for s in blocks[id].succs.clone() {
                blocks[s].preds.push(id);
            }
        }
        Cfg { blocks }
    }

    /// Blocks reachable from the entry, in reverse postorder (iterative DFS, so deep graphs do
    /// not overflow the stack).
    pub fn reverse_postorder(&self) -> Vec<BlockId> {
        let mut order = Vec::with_capacity(self.blocks.len());
        if self.blocks.is_empty() {
            return order;
        }
        let mut visited = vec![false; self.blocks.len()];
        let mut stack: Vec<(BlockId, usize)> = vec![(0, 0)];
        visited[0] = true;
        while let Some((block, next_succ)) = stack.last_mut() {
            let block = *block;
            if let Some(&s) = self.blocks[block].succs.get(*next_succ) {
                *next_succ += 1;
                if !visited[s] {
                    visited[s] = true;
                    stack.push((s, 0));
                }
            } else {
                order.push(block);
                stack.pop();
            }
        }
        order.reverse();
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PtxModule;

    fn cfg_of(body: &str) -> (Function, Cfg) {
        let src = format!(
            ".version 7.8\n.target sm_86\n.address_size 64\n.visible .entry k()\n{{\n.reg .pred %p<4>;\n.reg .b32 %r<4>;\n{body}\n}}\n"
        );
        let module = PtxModule::parse(&src).unwrap();
        let f = module.functions.into_iter().next().unwrap();
        let cfg = Cfg::build(&f);
        (f, cfg)
    }

    #[test]
    fn splits_at_labels_and_after_terminators() {
        let (_, cfg) = cfg_of(
            "mov.u32 %r1, 0;\n@%p1 bra $A;\nadd.s32 %r1, %r1, 1;\n$A:\nadd.s32 %r1, %r1, 2;\n@%p2 trap;\nret;\n$B:\n",
        );
        let shape: Vec<(Range<usize>, Vec<BlockId>)> = cfg
            .blocks
            .iter()
            .map(|b| (b.instrs.clone(), b.succs.clone()))
            .collect();
        assert_eq!(
            shape,
            vec![
                (0..2, vec![2, 1]), // @p bra $A: target first, then fall-through
                (2..3, vec![2]),    // falls into $A
                (3..5, vec![3]),    // @p trap falls through when not taken
                (5..6, vec![]),     // ret
                (6..6, vec![]),     // trailing label $B
            ]
        );
        assert_eq!(cfg.blocks[2].preds, vec![0, 1]);
    }

    #[test]
    fn unconditional_trap_and_branch_have_no_fall_through() {
        let (_, cfg) = cfg_of("bra.uni $A;\n$A:\ntrap; exit;\n");
        assert_eq!(cfg.blocks[0].succs, vec![1]);
        assert_eq!(cfg.blocks[1].succs, Vec::<BlockId>::new());
        // `exit` after `trap` is its own unreachable block.
        assert_eq!(cfg.reverse_postorder(), vec![0, 1]);
    }
}
