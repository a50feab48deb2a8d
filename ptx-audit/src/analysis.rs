//! PTX-level metrics of each kernel: instruction counts, loops and which of them are hot,
//! guards and traps in loops, calls, local and shared memory.

use ptx_front::{BlockId, Cfg, Function, InstrKind, LoopForest, PtxModule};

/// Why a conditional branch inside a loop counts as a guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuardKind {
    /// One side reaches a `trap` through unconditional control flow only (a rustc bounds or
    /// overflow check compiled with `panic = "immediate-abort"`), or the branch is a `@p trap`.
    Trap,
    /// An in-loop conditional that is neither a back edge nor a loop exit (an `if` in the body).
    Branch,
}

/// A guard: a conditional branch in a loop body other than the loop's own control.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// 1-based PTX source line of the branch.
    pub line: usize,
    pub kind: GuardKind,
}

/// Metrics of one natural loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopMetrics {
    /// First label of the header block (`$L__BB0_2`).
    pub header: String,
    /// 1-based PTX line of the header's first instruction (or label).
    pub line: usize,
    /// Nesting depth, 1 for an outermost loop.
    pub depth: usize,
    pub innermost: bool,
    /// An `ingot:hot` marker sits in this loop (and in no loop nested inside it).
    pub marked: bool,
    /// Innermost or marked (see the crate docs).
    pub hot: bool,
    /// PTX instructions in the body, nested loops included.
    pub ptx_insts: usize,
    pub guards: Vec<Guard>,
    /// Distinct `trap` instructions in the body or one unconditional step out of it.
    pub traps: usize,
    pub calls: usize,
    /// `ld.local` / `st.local` in the body.
    pub local_accesses: usize,
}

/// PTX metrics of one kernel (`.entry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelPtx {
    pub name: String,
    /// 1-based PTX line of the `.entry` header.
    pub line: usize,
    /// All PTX instructions of the kernel.
    pub ptx_insts: usize,
    /// Every natural loop, in PTX order of the loop headers.
    pub loops: Vec<LoopMetrics>,
    pub calls: usize,
    pub traps: usize,
    /// Bytes of `.local` declarations (the `__local_depot` stack frame included).
    pub local_decl_bytes: u64,
    pub local_accesses: usize,
    /// Static `.shared` bytes declared in the kernel or named by it at module scope.
    pub shared_bytes: u64,
    /// The kernel names an unsized (`.extern`, launch-sized) `.shared` array.
    pub dynamic_shared: bool,
    /// Things the analysis could not model, e.g. a marker outside any loop.
    pub notes: Vec<String>,
}

impl KernelPtx {
    pub fn hot_loops(&self) -> impl Iterator<Item = &LoopMetrics> {
        self.loops.iter().filter(|l| l.hot)
    }

    /// PTX instructions summed over the hot loops.
    pub fn hot_ptx_insts(&self) -> usize {
        self.hot_loops().map(|l| l.ptx_insts).sum()
    }

    pub fn hot_guards(&self) -> usize {
        self.hot_loops().map(|l| l.guards.len()).sum()
    }

    pub fn hot_traps(&self) -> usize {
        self.hot_loops().map(|l| l.traps).sum()
    }
}

/// Analyses every `.entry` of the module, in PTX order.
pub fn analyze_module(module: &PtxModule) -> Vec<KernelPtx> {
    module
        .kernels()
        .map(|kernel| analyze_kernel(module, kernel))
        .collect()
}

/// Analyses one function (normally a kernel).
pub fn analyze_kernel(module: &PtxModule, function: &Function) -> KernelPtx {
    let cfg = Cfg::build(function);
    let forest = LoopForest::find(&cfg);
    let mut notes = Vec::new();
    if !forest.irreducible_edges.is_empty() {
        notes.push(format!(
            "{} irreducible back edge(s): those cycles are not analysed as loops",
            forest.irreducible_edges.len()
        ));
    }

    let block_of_instr = |instr: usize| {
        cfg.blocks
            .iter()
            .position(|b| b.instrs.contains(&instr))
            .unwrap_or(0)
    };
    let mut marked = vec![false; forest.loops.len()];
    for &marker in &function.hot_markers {
        match forest.innermost_containing(block_of_instr(marker)) {
            Some(l) => marked[l] = true,
            None => notes.push(format!(
                "ingot:hot marker before line {} is not inside a loop",
                function.instrs[marker].line
            )),
        }
    }

    let traps_after: Vec<Option<usize>> = (0..cfg.blocks.len())
        .map(|b| trap_reached(function, &cfg, b))
        .collect();
    let loops = forest
        .loops
        .iter()
        .enumerate()
        .map(|(id, lp)| {
            let mut depth = 1;
            let mut parent = lp.parent;
            while let Some(p) = parent {
                depth += 1;
                parent = forest.loops[p].parent;
            }
            let header = &cfg.blocks[lp.header];
            let instrs = || {
                lp.blocks
                    .iter()
                    .flat_map(|&b| cfg.blocks[b].instrs.clone())
                    .map(|i| &function.instrs[i])
            };
            let mut traps: Vec<usize> = Vec::new();
            for &b in &lp.blocks {
                let block = &cfg.blocks[b];
                traps.extend(
                    block
                        .instrs
                        .clone()
                        .filter(|&i| function.instrs[i].kind == InstrKind::Trap),
                );
                for &s in block.succs.iter().filter(|&&s| !lp.contains(s)) {
                    traps.extend(traps_after[s]);
                }
            }
            traps.sort_unstable();
            traps.dedup();
            let guards = lp
                .blocks
                .iter()
                .filter_map(|&b| classify_branch(function, &cfg, &forest, &traps_after, b))
                .collect();
            LoopMetrics {
                header: header.labels.first().cloned().unwrap_or_default(),
                line: header
                    .instrs
                    .clone()
                    .next()
                    .map_or(function.line, |i| function.instrs[i].line),
                depth,
                innermost: lp.is_innermost(),
                marked: marked[id],
                hot: lp.is_innermost() || marked[id],
                ptx_insts: instrs().count(),
                guards,
                traps: traps.len(),
                calls: instrs().filter(|i| i.kind == InstrKind::Call).count(),
                local_accesses: instrs().filter(|i| i.is_local_access()).count(),
            }
        })
        .collect();

    let (shared_bytes, dynamic_shared) = function.shared_usage(module);
    KernelPtx {
        name: function.name.clone(),
        line: function.line,
        ptx_insts: function.instrs.len(),
        loops,
        calls: count(function, |k| *k == InstrKind::Call),
        traps: count(function, |k| *k == InstrKind::Trap),
        local_decl_bytes: function.local_decl_bytes,
        local_accesses: function
            .instrs
            .iter()
            .filter(|i| i.is_local_access())
            .count(),
        shared_bytes,
        dynamic_shared,
        notes,
    }
}

fn count(function: &Function, pred: impl Fn(&InstrKind) -> bool) -> usize {
    function.instrs.iter().filter(|i| pred(&i.kind)).count()
}

/// The `trap` that block `start` inevitably reaches through blocks with a single successor,
/// if any (the rustc panic block behind a bounds check: `bra.uni $L; ... $L: trap; exit;`).
fn trap_reached(function: &Function, cfg: &Cfg, start: BlockId) -> Option<usize> {
    let mut seen = vec![false; cfg.blocks.len()];
    let mut block = start;
    loop {
        if std::mem::replace(&mut seen[block], true) {
            return None;
        }
        let b = &cfg.blocks[block];
        let trap = b.instrs.clone().find(|&i| {
            let instr = &function.instrs[i];
            instr.kind == InstrKind::Trap && instr.predicate.is_none()
        });
        if trap.is_some() {
            return trap;
        }
        match b.succs.as_slice() {
            [next] => block = *next,
            _ => return None,
        }
    }
}

/// Classifies the terminator of `block` if it is a conditional branch: loop control (back edge
/// or exit, `None`) or a guard.
fn classify_branch(
    function: &Function,
    cfg: &Cfg,
    forest: &LoopForest,
    traps_after: &[Option<usize>],
    block: BlockId,
) -> Option<Guard> {
    let b = &cfg.blocks[block];
    let last = &function.instrs[b.instrs.clone().last()?];
    let conditional = match &last.kind {
        InstrKind::Branch { targets } => last.predicate.is_some() || targets.len() > 1,
        InstrKind::Trap => last.predicate.is_some(),
        // A predicated `ret`/`exit` leaves the loop (and the kernel): loop control.
        _ => false,
    };
    if !conditional {
        return None;
    }
    let guard = |kind| {
        Some(Guard {
            line: last.line,
            kind,
        })
    };
    if last.kind == InstrKind::Trap || b.succs.iter().any(|&s| traps_after[s].is_some()) {
        return guard(GuardKind::Trap);
    }
    let innermost = forest.innermost_containing(block).map(|l| &forest.loops[l]);
    let leaves_or_loops_back = b
        .succs
        .iter()
        .any(|&s| forest.dominates(s, block) || innermost.is_some_and(|lp| !lp.contains(s)));
    if leaves_or_loops_back {
        None
    } else {
        guard(GuardKind::Branch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(body: &str) -> KernelPtx {
        let src = format!(
            ".version 7.8\n.target sm_86\n.address_size 64\n.visible .entry k()\n{{\n.reg .pred %p<8>;\n.reg .b32 %r<8>;\n{body}\n}}\n"
        );
        let module = PtxModule::parse(&src).unwrap();
        analyze_module(&module).remove(0)
    }

    #[test]
    fn bounds_check_out_of_the_loop_is_a_trap_guard() {
        // The shape rustc emits for `s[k]` in a loop: a conditional branch over an
        // unconditional jump to the panic block.
        let k = kernel(
            "$H:\nsetp.lt.u32 %p1, %r1, %r2;\n@%p1 bra $OK;\nbra.uni $PANIC;\n$OK:\nadd.s32 %r1, %r1, 1;\n@%p2 bra $H;\nret;\n$PANIC:\ntrap; exit;\n",
        );
        assert_eq!(k.loops.len(), 1);
        let lp = &k.loops[0];
        assert!(lp.hot && lp.innermost && !lp.marked);
        assert_eq!(
            lp.guards,
            vec![Guard {
                line: 10,
                kind: GuardKind::Trap
            }]
        );
        assert_eq!(lp.traps, 1);
        assert_eq!(lp.ptx_insts, 4);
        assert_eq!((k.hot_guards(), k.hot_traps(), k.traps), (1, 1, 1));
    }

    #[test]
    fn loop_control_is_not_a_guard_but_an_if_in_the_body_is() {
        let k = kernel(
            "$H:\nadd.s32 %r1, %r1, 1;\n@%p1 bra $SKIP;\nadd.s32 %r3, %r3, 1;\n$SKIP:\n@%p2 bra $EXIT;\n@%p3 bra $H;\n$EXIT:\nret;\n",
        );
        let lp = &k.loops[0];
        assert_eq!(
            lp.guards,
            vec![Guard {
                line: 10,
                kind: GuardKind::Branch
            }]
        );
        assert_eq!(lp.traps, 0);
    }

    #[test]
    fn predicated_trap_in_loop_is_a_trap_guard() {
        let k = kernel("$H:\n@%p1 trap;\nadd.s32 %r1, %r1, 1;\n@%p2 bra $H;\nret;\n");
        assert_eq!(k.hot_guards(), 1);
        assert_eq!(k.hot_traps(), 1);
    }

    #[test]
    fn marker_makes_an_outer_loop_hot() {
        let k = kernel(
            "$OUTER:\n// ingot:hot\nmov.u32 %r2, 0;\n$INNER:\nadd.s32 %r2, %r2, 1;\n@%p1 bra $INNER;\n@%p2 bra $OUTER;\nret;\n",
        );
        assert_eq!(k.loops.len(), 2);
        let outer = k.loops.iter().find(|l| l.header == "$OUTER").unwrap();
        let inner = k.loops.iter().find(|l| l.header == "$INNER").unwrap();
        assert!(outer.marked && outer.hot && !outer.innermost && outer.depth == 1);
        assert!(inner.hot && !inner.marked && inner.depth == 2);
        // The outer loop's inner back edge and exit are loop control, not guards.
        assert_eq!(k.hot_guards(), 0);
        assert_eq!(k.hot_ptx_insts(), outer.ptx_insts + inner.ptx_insts);
        assert_eq!((outer.ptx_insts, inner.ptx_insts), (4, 2));
    }

    #[test]
    fn marker_outside_loops_is_noted() {
        let k = kernel("// ingot:hot\nmov.u32 %r1, 0;\nret;\n");
        assert!(k.loops.is_empty());
        assert_eq!(k.notes.len(), 1, "{:?}", k.notes);
    }
}
