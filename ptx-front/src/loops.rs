//! Dominators and natural loops of a [`Cfg`].
//!
//! A back edge is an edge `latch → header` whose target dominates its source; the natural loop
//! of a header is the header plus every block that reaches one of its latches without passing
//! through the header. Back edges sharing a header form one loop. Loops nest by body
//! containment; an innermost loop contains no other loop.

use crate::cfg::{BlockId, Cfg};

/// Index of a loop in [`LoopForest::loops`].
pub type LoopId = usize;

/// One natural loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Loop {
    pub header: BlockId,
    /// Sources of the back edges into `header`.
    pub latches: Vec<BlockId>,
    /// Body blocks, header included, sorted ascending.
    pub blocks: Vec<BlockId>,
    /// The smallest loop strictly containing this one.
    pub parent: Option<LoopId>,
    pub children: Vec<LoopId>,
}

impl Loop {
    pub fn contains(&self, block: BlockId) -> bool {
        self.blocks.binary_search(&block).is_ok()
    }

    pub fn is_innermost(&self) -> bool {
        self.children.is_empty()
    }
}

/// All natural loops of a function plus its dominator tree.
#[derive(Debug, Clone)]
pub struct LoopForest {
    /// Ordered by header block (source order).
    pub loops: Vec<Loop>,
    /// Immediate dominator per block; `None` for the entry and for unreachable blocks.
    idom: Vec<Option<BlockId>>,
    reachable: Vec<bool>,
    /// Retreating edges whose target does not dominate their source: control flow that loops
    /// without forming a natural loop (irreducible), which this analysis does not model.
    pub irreducible_edges: Vec<(BlockId, BlockId)>,
}

impl LoopForest {
    pub fn find(cfg: &Cfg) -> LoopForest {
        let rpo = cfg.reverse_postorder();
        let n = cfg.blocks.len();
        let mut rpo_index = vec![usize::MAX; n];
        for (i, &b) in rpo.iter().enumerate() {
            rpo_index[b] = i;
        }
        let reachable: Vec<bool> = rpo_index.iter().map(|&i| i != usize::MAX).collect();
        let idom = dominators(cfg, &rpo, &rpo_index);
        let mut forest = LoopForest {
            loops: Vec::new(),
            idom,
            reachable,
            irreducible_edges: Vec::new(),
        };

        let mut latches_by_header: Vec<Vec<BlockId>> = vec![Vec::new(); n];
        for &block in &rpo {
            for &succ in &cfg.blocks[block].succs {
                if forest.dominates(succ, block) {
                    latches_by_header[succ].push(block);
                } else if rpo_index[succ] <= rpo_index[block] {
                    forest.irreducible_edges.push((block, succ));
                }
            }
        }
        for (header, latches) in latches_by_header.into_iter().enumerate() {
            if latches.is_empty() {
                continue;
            }
            let mut in_body = vec![false; n];
            in_body[header] = true;
            let mut stack: Vec<BlockId> = latches.clone();
            while let Some(b) = stack.pop() {
                if in_body[b] || !forest.reachable[b] {
                    continue;
                }
                in_body[b] = true;
                stack.extend(cfg.blocks[b].preds.iter().copied());
            }
            let blocks = (0..n).filter(|&b| in_body[b]).collect();
            forest.loops.push(Loop {
                header,
                latches,
                blocks,
                parent: None,
                children: Vec::new(),
            });
        }
        // Parent: the smallest other loop whose body holds this loop's header.
        for id in 0..forest.loops.len() {
            let header = forest.loops[id].header;
            let parent = (0..forest.loops.len())
                .filter(|&other| other != id && forest.loops[other].contains(header))
                .min_by_key(|&other| forest.loops[other].blocks.len());
            forest.loops[id].parent = parent;
            if let Some(p) = parent {
                forest.loops[p].children.push(id);
            }
        }
        forest
    }

    /// Whether `a` dominates `b` (every path from the entry to `b` passes through `a`).
    /// Unreachable blocks are dominated by nothing.
    pub fn dominates(&self, a: BlockId, b: BlockId) -> bool {
        if !self.reachable[a] || !self.reachable[b] {
            return false;
        }
        let mut cur = b;
        loop {
            if cur == a {
                return true;
            }
            match self.idom[cur] {
                Some(d) => cur = d,
                None => return false,
            }
        }
    }

    pub fn is_reachable(&self, block: BlockId) -> bool {
        self.reachable[block]
    }

    /// Innermost loops in header order.
    pub fn innermost(&self) -> impl Iterator<Item = LoopId> + '_ {
        (0..self.loops.len()).filter(|&l| self.loops[l].is_innermost())
    }

    /// The smallest loop whose body contains `block`.
    pub fn innermost_containing(&self, block: BlockId) -> Option<LoopId> {
        (0..self.loops.len())
            .filter(|&l| self.loops[l].contains(block))
            .min_by_key(|&l| self.loops[l].blocks.len())
    }
}

/// Immediate dominators by the iterative algorithm of Cooper, Harvey and Kennedy
/// ("A Simple, Fast Dominance Algorithm"), over blocks reachable from block 0.
fn dominators(cfg: &Cfg, rpo: &[BlockId], rpo_index: &[usize]) -> Vec<Option<BlockId>> {
    let n = cfg.blocks.len();
    let mut idom: Vec<Option<BlockId>> = vec![None; n];
    let Some(&entry) = rpo.first() else {
        return idom;
    };
    idom[entry] = Some(entry);
    let mut changed = true;
    while changed {
        changed = false;
        for &b in rpo.iter().skip(1) {
            let mut new_idom: Option<BlockId> = None;
            for &p in &cfg.blocks[b].preds {
                if idom[p].is_none() {
                    continue;
                }
                new_idom = Some(match new_idom {
                    None => p,
                    Some(cur) => intersect(&idom, rpo_index, p, cur),
                });
            }
            if new_idom.is_some() && idom[b] != new_idom {
                idom[b] = new_idom;
                changed = true;
            }
        }
    }
    idom[entry] = None;
    idom
}

fn intersect(idom: &[Option<BlockId>], rpo_index: &[usize], a: BlockId, b: BlockId) -> BlockId {
    let (mut x, mut y) = (a, b);
    while x != y {
        while rpo_index[x] > rpo_index[y] {
            x = idom[x].expect("processed blocks have an idom");
        }
        while rpo_index[y] > rpo_index[x] {
            y = idom[y].expect("processed blocks have an idom");
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PtxModule;

    fn forest_of(body: &str) -> (Cfg, LoopForest) {
        let src = format!(
            ".version 7.8\n.target sm_86\n.address_size 64\n.visible .entry k()\n{{\n.reg .pred %p<4>;\n.reg .b32 %r<4>;\n{body}\n}}\n"
        );
        let module = PtxModule::parse(&src).unwrap();
        let cfg = Cfg::build(&module.functions[0]);
        let forest = LoopForest::find(&cfg);
        (cfg, forest)
    }

    #[test]
    fn nested_loops_and_innermost() {
        // Block 0: entry; 1: outer header; 2: inner header/latch; 3: outer latch; 4: exit.
        let (_, f) = forest_of(
            "mov.u32 %r1, 0;\n$OUTER:\nmov.u32 %r2, 0;\n$INNER:\nadd.s32 %r2, %r2, 1;\n@%p1 bra $INNER;\nadd.s32 %r1, %r1, 1;\n@%p2 bra $OUTER;\nret;\n",
        );
        assert_eq!(f.loops.len(), 2);
        let outer = f.loops.iter().position(|l| l.header == 1).unwrap();
        let inner = f.loops.iter().position(|l| l.header == 2).unwrap();
        assert_eq!(f.loops[outer].blocks, vec![1, 2, 3]);
        assert_eq!(f.loops[inner].blocks, vec![2]);
        assert_eq!(f.loops[inner].parent, Some(outer));
        assert_eq!(f.innermost().collect::<Vec<_>>(), vec![inner]);
        assert_eq!(f.innermost_containing(3), Some(outer));
        assert_eq!(f.innermost_containing(4), None);
        assert!(f.dominates(1, 3) && !f.dominates(3, 1));
        assert!(f.irreducible_edges.is_empty());
    }

    #[test]
    fn two_latches_make_one_loop() {
        let (_, f) = forest_of(
            "$H:\nadd.s32 %r1, %r1, 1;\n@%p1 bra $SKIP;\n@%p2 bra $H;\n$SKIP:\n@%p3 bra $H;\nret;\n",
        );
        assert_eq!(f.loops.len(), 1);
        assert_eq!(f.loops[0].latches.len(), 2);
        assert_eq!(f.loops[0].blocks, vec![0, 1, 2]);
    }

    #[test]
    fn irreducible_cycle_is_reported_not_a_loop() {
        // Two entries into the cycle A <-> B: neither header dominates the other.
        let (_, f) = forest_of(
            "@%p1 bra $B;\n$A:\nadd.s32 %r1, %r1, 1;\n@%p2 bra $EXIT;\n$B:\nadd.s32 %r1, %r1, 2;\nbra.uni $A;\n$EXIT:\nret;\n",
        );
        assert!(f.loops.is_empty());
        assert_eq!(f.irreducible_edges.len(), 1);
    }
}
