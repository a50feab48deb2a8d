//! Buffers of a plan: what each holds, its size, and where its initial bytes come from.

/// Index of a buffer in [`crate::Plan::buffers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u32);

/// Where a buffer's contents come from and how often they change.
#[derive(Clone, Debug, PartialEq)]
pub enum BufferKind {
    /// A tensor's bytes exactly as stored in the GGUF file (uploaded once, never written).
    Weight {
        tensor: String,
        ty: ingot_gguf::GgmlType,
        /// Kept in pinned host memory mapped into the device's address space (routed experts
        /// beyond the VRAM budget, read over the host link on a miss), not in VRAM.
        host_mapped: bool,
    },
    /// Bytes computed on the host at load from the file's tensors (e.g. the absorbed `attn_k_b`
    /// of a legacy-layout file), uploaded once, never written.
    Derived {
        from: String,
        ty: ingot_gguf::GgmlType,
        recipe: crate::recipe::Recipe,
    },
    /// Host-precomputed constants (e.g. the rope cos/sin table), uploaded once.
    Constant { data: Vec<u8> },
    /// Scratch written and read within one decode step; zeroed at allocation.
    Activation,
    /// Layer `layer`'s latent cache: one f16 row `[c | k_pe]` per position, `ctx` rows.
    KvCache { layer: usize },
    /// The single [`ingot_abi::step::StepState`].
    StepState,
    /// VRAM slots of one MoE layer's expert cache for one routed tensor: `slots` slabs, zeroed at
    /// allocation, filled by the executor as experts are admitted.
    ExpertSlots { layer: usize },
    /// The expert table the MoE kernels read one routed tensor through
    /// (`ingot_abi::launch::moe`): `n_expert` `u64` device addresses, entry `e` the start of
    /// expert `e`'s slab. Written by the executor at load as the identity table over `weight`
    /// ([`crate::Plan::expert_tables`]); with an expert cache (`pool`, the layer's VRAM slots,
    /// and `weight` host-mapped) rewritten between steps to name the slot an expert holds.
    ExpertTable {
        layer: usize,
        weight: BufId,
        pool: Option<BufId>,
        /// Bytes of one expert's slab.
        slab: u64,
    },
}

/// One buffer of the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct BufferDecl {
    /// Unique, human-readable name, e.g. `blk.3.attn_q.weight` or `act.residual`.
    pub name: String,
    pub kind: BufferKind,
    /// Size in bytes; positive.
    pub bytes: u64,
}

impl BufferDecl {
    /// Whether the executor must upload initial contents (as opposed to zeroing the buffer).
    pub fn is_initialized(&self) -> bool {
        matches!(
            self.kind,
            BufferKind::Weight { .. } | BufferKind::Derived { .. } | BufferKind::Constant { .. }
        )
    }

    /// Whether two plans of one executor (the decode step and a prefill chunk) use one
    /// allocation for buffers declared alike: what is never written, the latent caches and the
    /// step state. Activations are each plan's own.
    pub fn is_shareable(&self) -> bool {
        self.is_initialized() || self.must_be_shared()
    }

    /// Whether a second plan of the executor must use the first plan's allocation: the latent
    /// caches and the step state, which both plans read and write.
    pub fn must_be_shared(&self) -> bool {
        matches!(
            self.kind,
            BufferKind::KvCache { .. } | BufferKind::StepState
        )
    }
}
