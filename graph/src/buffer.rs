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
    },
    /// Bytes computed on the host at load from the file's tensors (e.g. the absorbed `attn_k_b`
    /// of a legacy-layout file), uploaded once, never written.
    Derived {
        from: String,
        ty: ingot_gguf::GgmlType,
        recipe: crate::weights::Recipe,
    },
    /// Host-precomputed constants (e.g. the rope cos/sin table), uploaded once.
    Constant { data: Vec<u8> },
    /// Scratch written and read within one decode step; zeroed at allocation.
    Activation,
    /// Layer `layer`'s latent cache: one f16 row `[c | k_pe]` per position, `ctx` rows.
    KvCache { layer: usize },
    /// The single [`ingot_abi::step::StepState`].
    StepState,
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
}
