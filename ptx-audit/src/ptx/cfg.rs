//! Control-flow graph of one PTX function.
//!
//! Blocks start at the first instruction, at every label, and after every terminator (`bra`,
//! `brx.idx`, `ret`, `exit`, `trap`). A predicated terminator (`@p bra`, `@p ret`, ...) also
//! falls through to the next block. `trap` has no successor: it aborts the kernel.

use std::collections::HashMap;
use std::ops::Range;

use super::module::{Function, InstrKind, Stmt};

/// Index of a block in [`Cfg::blocks`]; block 0 is the entry.
pub type BlockId = usize;

/// A straight-line run of instructions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BasicBlock {
    /// Labels that name the block's first instruction.
    pub labels: Vec<String>,
    /// Indices into [`Function::instrs`]; may be empty for a trailing label.
    pub instrs: Range<usize>,
    /// Successors without duplicates; a conditional branch lists its target first, then the
    /// fall-through block.
    pub succs: Vec<BlockId>,
    pub preds: Vec<BlockId>,
}

/// The control-flow graph of a function.
#[derive(Debug, Clone)]
pub struct Cfg {
    pub blocks: Vec<BasicBlock>,
}

impl Cfg {
    /// Builds the graph. Branch targets were checked against the function's labels when the
    /// module was parsed, so every target resolves.
    pub fn build(function: &Function) -> Cfg {
        let mut blocks: Vec<BasicBlock> = Vec::new();
        let mut labels: Vec<String> = Vec::new();
        let mut start: Option<usize> = None;
        let mut end = 0;
        let close =
            |blocks: &mut Vec<BasicBlock>, labels: &mut Vec<String>, range: Range<usize>| {
                blocks.push(BasicBlock {
                    labels: std::mem::take(labels),
                    instrs: range,
                    succs: Vec::new(),
                    preds: Vec::new(),
                });
            };
        for stmt in &function.stmts {
            match stmt {
                Stmt::Label(label) => {
                    if let Some(s) = start.take() {
                        close(&mut blocks, &mut labels, s..end);
                    }
                    labels.push(label.clone());
                }
                Stmt::Instr(i) => {
                    let s = *start.get_or_insert(*i);
                    end = i + 1;
                    if function.instrs[*i].is_terminator() {
                        close(&mut blocks, &mut labels, s..end);
                        start = None;
                    }
                }
            }
        }
        match start {
            Some(s) => close(&mut blocks, &mut labels, s..end),
            None if !labels.is_empty() => close(&mut blocks, &mut labels, end..end),
            None => {}
        }

        let by_label: HashMap<String, BlockId> = blocks
            .iter()
            .enumerate()
            .flat_map(|(id, b)| b.labels.iter().map(move |l| (l.clone(), id)))
            .collect();
        let count = blocks.len();
        for (id, block) in blocks.iter_mut().enumerate() {
            let next = (id + 1 < count).then_some(id + 1);
            let mut succs = Vec::new();
            match block.instrs.clone().last().map(|i| &function.instrs[i]) {
                Some(last) if last.is_terminator() => {
                    if let InstrKind::Branch { targets } = &last.kind {
                        succs.extend(targets.iter().filter_map(|t| by_label.get(t)));
                    }
                    if last.may_fall_through() {
                        succs.extend(next);
                    }
                }
                _ => succs.extend(next),
            }
            let mut unique = Vec::with_capacity(succs.len());
            for s in succs {
                if !unique.contains(&s) {
                    unique.push(s);
                }
            }
            block.succs = unique;
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
    use crate::ptx::PtxModule;

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
