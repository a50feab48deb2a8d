//! The bookkeeping every part of a plan shares: buffer declarations (each weight once by name,
//! zero-copy from the file; scratch activations declared once by name and shared by every layer;
//! the latent caches; host-computed constants; the expert cache's slot pools and tables), node
//! creation, and the constructors of node arguments. Sizes are in bytes; a node's `items` is
//! its kernel's work items (`KernelDesc::items_per_block` turns them into a grid).

use std::collections::HashMap;

use ingot_abi::blocks::BlockQ8_1;
use ingot_abi::launch::{Arg, Signature, EXPERT_TABLE_ENTRY_BYTES};
use ingot_gguf::{GgmlType, Gguf, TensorInfo};
use ingot_model::ModelConfig;

use super::kernels::Launch;
use super::PlanOptions;
use crate::buffer::{BufId, BufferDecl, BufferKind};
use crate::error::PlanError;
use crate::node::{BufRef, Node, NodeArg};
use crate::plan::Plan;

/// Scratch activations shared by all layers (each layer overwrites them in order).
pub(crate) struct Acts {
    pub residual: BufId,
    /// Normalized residual as f32 (the router's input) and as q8_1 blocks (every gemv's input).
    pub norm: BufId,
    pub norm_q8: BufId,
    pub step: BufId,
    pub logits: BufId,
}

pub(crate) struct Builder<'a> {
    pub c: &'a ModelConfig,
    gguf: &'a Gguf,
    pub opts: PlanOptions,
    buffers: Vec<BufferDecl>,
    by_name: HashMap<String, BufId>,
    pub(super) nodes: Vec<Node>,
    pub acts: Acts,
    pub host_embedding: bool,
    /// The embedding fetch's tail writes layer 0's `attn_norm` (`super::head::embedding`).
    pub first_norm_written: bool,
    pub device_argmax: bool,
    expert_layers: Vec<crate::plan::ExpertCacheLayer>,
    /// The chained MoE FFN planned last, while it is the last node: the next layer's
    /// projections may join its launch (`super::projections`).
    pub(super) last_ffn: Option<ChainedFfn>,
}

/// A `moe_ffn_*` node: its weights' (routed, shared) gate/up and down types, its arguments and
/// its index.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ChainedFfn {
    pub types: ((GgmlType, GgmlType), (GgmlType, GgmlType)),
    pub args: ingot_abi::launch::MoeFfnArgs<BufRef>,
    pub node: usize,
}

impl<'a> Builder<'a> {
    pub(super) fn new(
        c: &'a ModelConfig,
        gguf: &'a Gguf,
        opts: PlanOptions,
    ) -> Result<Self, PlanError> {
        if !c.n_embd.is_multiple_of(32) {
            return Err(PlanError::UnsupportedModel(format!(
                "n_embd = {} is not a multiple of 32 (q8_1 activation blocks)",
                c.n_embd
            )));
        }
        let mut b = Builder {
            c,
            gguf,
            opts,
            buffers: Vec::new(),
            by_name: HashMap::new(),
            nodes: Vec::new(),
            acts: Acts {
                residual: BufId(0),
                norm: BufId(0),
                norm_q8: BufId(0),
                step: BufId(0),
                logits: BufId(0),
            },
            host_embedding: false,
            first_norm_written: false,
            device_argmax: false,
            expert_layers: Vec::new(),
            last_ffn: None,
        };
        b.acts = Acts {
            residual: b.f32_act("act.residual", c.n_embd)?,
            norm: b.f32_act("act.norm", c.n_embd)?,
            norm_q8: b.q8_act("act.norm_q8", c.n_embd)?,
            step: b.declare(
                "step",
                BufferKind::StepState,
                std::mem::size_of::<ingot_abi::step::StepState>() as u64,
            ),
            logits: b.f32_act("act.logits", c.vocab)?,
        };
        Ok(b)
    }

    pub(super) fn finish(self) -> Plan {
        Plan {
            buffers: self.buffers,
            nodes: self.nodes,
            n_layer: self.c.n_layer,
            ctx: self.opts.ctx,
            vocab: self.c.vocab,
            n_embd: self.c.n_embd,
            residual: self.acts.residual,
            logits: self.acts.logits,
            step: self.acts.step,
            host_embedding: self.host_embedding,
            device_argmax: self.device_argmax,
            expert_cache: self
                .opts
                .expert_cache
                .map(|o| crate::plan::ExpertCachePlan {
                    slots: o.slots,
                    policy: o.policy,
                    n_expert: self.c.n_expert,
                    n_expert_used: self.c.n_expert_used,
                    route_bonus: o.route_bonus,
                    layers: self.expert_layers,
                }),
        }
    }

    fn declare(&mut self, name: &str, kind: BufferKind, bytes: u64) -> BufId {
        let id = BufId(self.buffers.len() as u32);
        self.buffers.push(BufferDecl {
            name: name.to_owned(),
            kind,
            bytes,
        });
        self.by_name.insert(name.to_owned(), id);
        id
    }

    /// The name of buffer `id`.
    pub fn buffer_name(&self, id: BufId) -> String {
        self.buffers[id.0 as usize].name.clone()
    }

    /// The size of buffer `id`, bytes.
    pub fn buffer_bytes(&self, id: BufId) -> u64 {
        self.buffers[id.0 as usize].bytes
    }

    /// The buffer declared under `name`, if any.
    pub fn existing(&self, name: &str) -> Option<BufId> {
        self.by_name.get(name).copied()
    }

    /// A scratch buffer of `bytes` bytes, declared once by name and shared by every layer.
    pub fn act(&mut self, name: &str, bytes: u64) -> Result<BufId, PlanError> {
        if let Some(&id) = self.by_name.get(name) {
            return Ok(id);
        }
        if bytes == 0 {
            return Err(PlanError::UnsupportedModel(format!(
                "{name} would be empty"
            )));
        }
        Ok(self.declare(name, BufferKind::Activation, bytes))
    }

    /// `n` f32 scratch values.
    pub fn f32_act(&mut self, name: &str, n: usize) -> Result<BufId, PlanError> {
        let bytes = (n as u64)
            .checked_mul(4)
            .ok_or_else(|| PlanError::Overflow(name.into()))?;
        self.act(name, bytes)
    }

    /// `n` f16 scratch values.
    pub fn f16_act(&mut self, name: &str, n: usize) -> Result<BufId, PlanError> {
        let bytes = (n as u64)
            .checked_mul(2)
            .ok_or_else(|| PlanError::Overflow(name.into()))?;
        self.act(name, bytes)
    }

    /// `n` values (a multiple of 32) as q8_1 blocks.
    pub fn q8_act(&mut self, name: &str, n: usize) -> Result<BufId, PlanError> {
        if !n.is_multiple_of(32) {
            return Err(PlanError::UnsupportedModel(format!(
                "{name}: {n} values do not split into q8_1 blocks of 32"
            )));
        }
        self.act(name, (n / 32 * size_of::<BlockQ8_1>()) as u64)
    }

    /// A host-computed constant buffer.
    pub fn constant(&mut self, name: &str, data: Vec<u8>) -> BufId {
        let bytes = data.len() as u64;
        self.declare(name, BufferKind::Constant { data }, bytes)
    }

    /// Layer `il`'s latent cache: `ctx` rows of `kv_lora + d_rope` values in the format of
    /// `PlanOptions::cache_type`.
    pub fn kv_cache(&mut self, il: usize) -> Result<BufId, PlanError> {
        let overflow = || PlanError::Overflow(format!("kv cache of layer {il}"));
        let width = u32::try_from(self.c.cache_row()).map_err(|_| overflow())?;
        let row_bytes = self.opts.cache_type.row_bytes(width);
        let bytes = (self.opts.ctx as u64)
            .checked_mul(u64::from(row_bytes))
            .ok_or_else(overflow)?;
        Ok(self.declare(
            &format!("kv.{il}"),
            BufferKind::KvCache { layer: il },
            bytes,
        ))
    }

    /// The tensor's header entry.
    pub fn tensor(&self, name: &str) -> Result<&'a TensorInfo, PlanError> {
        self.gguf
            .tensor(name)
            .ok_or_else(|| PlanError::MissingTensor { name: name.into() })
    }

    /// The tensor as a weight buffer (declared once, bytes taken from the file as they are),
    /// after checking that its type is one of `allowed` for `role`.
    pub fn weight(
        &mut self,
        name: &str,
        role: &'static str,
        allowed: &dyn Fn(GgmlType) -> bool,
    ) -> Result<(BufId, &'a TensorInfo), PlanError> {
        let info = self.tensor(name)?;
        if !allowed(info.ty) {
            let supported: Vec<&str> = GgmlType::ALL
                .iter()
                .filter(|t| allowed(**t))
                .map(|t| t.name())
                .collect();
            return Err(PlanError::UnsupportedType {
                name: name.into(),
                ty: info.ty.name(),
                role,
                supported: supported.join(", "),
            });
        }
        if let Some(&id) = self.by_name.get(name) {
            return Ok((id, info));
        }
        let id = self.declare(
            name,
            BufferKind::Weight {
                tensor: name.into(),
                ty: info.ty,
                host_mapped: false,
            },
            info.nbytes,
        );
        Ok((id, info))
    }

    /// The expert table (returned) through which layer `il`'s MoE kernels read the routed
    /// expert tensor `weight` (`n_expert` slabs of equal size). With `slots` (the layer's expert
    /// cache), the tensor moves to host-mapped memory and gains a pool of that many VRAM slabs
    /// the table can name instead.
    pub fn expert_table(
        &mut self,
        il: usize,
        weight: BufId,
        slots: Option<usize>,
        n_expert: usize,
    ) -> Result<BufId, PlanError> {
        let decl = &mut self.buffers[weight.0 as usize];
        let name = decl.name.clone();
        if let (Some(_), BufferKind::Weight { host_mapped, .. }) = (slots, &mut decl.kind) {
            *host_mapped = true;
        }
        let bytes = decl.bytes;
        if n_expert == 0 || !bytes.is_multiple_of(n_expert as u64) {
            return Err(PlanError::UnsupportedShape {
                name,
                reason: format!("{bytes} bytes do not split into {n_expert} expert slabs"),
            });
        }
        let slab = bytes / n_expert as u64;
        let pool = match slots {
            None => None,
            Some(slots) => {
                let pool_bytes = slab
                    .checked_mul(slots as u64)
                    .ok_or_else(|| PlanError::Overflow(format!("slots of {name}")))?;
                Some(self.declare(
                    &format!("slots.{name}"),
                    BufferKind::ExpertSlots { layer: il },
                    pool_bytes,
                ))
            }
        };
        Ok(self.declare(
            &format!("table.{name}"),
            BufferKind::ExpertTable {
                layer: il,
                weight,
                pool,
                slab,
            },
            EXPERT_TABLE_ENTRY_BYTES * n_expert as u64,
        ))
    }

    /// Records layer `il`'s expert cache: its own selection buffer and its slot tables.
    pub fn expert_layer(
        &mut self,
        il: usize,
        selection: BufId,
        tables: Vec<BufId>,
        route_bias: Option<crate::plan::RouteBias>,
    ) {
        self.expert_layers.push(crate::plan::ExpertCacheLayer {
            layer: il,
            selection,
            tables,
            route_bias,
        });
    }

    /// A weight derived on the host at load time (legacy-layout `attn_k_b`/`attn_v_b`).
    pub fn derived(
        &mut self,
        name: &str,
        from: &str,
        ty: GgmlType,
        recipe: crate::recipe::Recipe,
        bytes: u64,
    ) -> BufId {
        self.declare(
            name,
            BufferKind::Derived {
                from: from.into(),
                ty,
                recipe,
            },
            bytes,
        )
    }

    /// Appends a launch of `kernel` over `items` work items with `args`, its signature's
    /// struct: the node's arguments are the struct's fields in parameter order.
    pub fn node<S: Signature>(
        &mut self,
        kernel: Launch<S>,
        label: String,
        layer: Option<usize>,
        items: usize,
        args: S::Args<BufRef>,
    ) -> Result<(), PlanError> {
        let items = u32::try_from(items)
            .ok()
            .filter(|&n| n > 0)
            .ok_or_else(|| PlanError::UnsupportedModel(format!("{label}: {items} work items")))?;
        let mut list = Vec::with_capacity(S::PARAMS.len());
        S::each(&args, &mut |a| {
            list.push(match a {
                Arg::Ptr(r) => NodeArg::Buf(r),
                Arg::U32(v) => NodeArg::U32(v),
                Arg::I32(v) => NodeArg::I32(v),
                Arg::F32(v) => NodeArg::F32(v),
                Arg::U64(v) => NodeArg::U64(v),
            })
        });
        self.nodes.push(Node {
            kernel: kernel.name,
            label,
            layer,
            items,
            args: list,
            l2_streaming: None,
        });
        Ok(())
    }

    /// Marks weight `w`, an argument of the node appended last, as read once in L2
    /// ([`Node::l2_streaming`]).
    pub(crate) fn stream_in_l2(&mut self, w: BufId) {
        let n = self.nodes.last_mut().expect("a node was appended");
        debug_assert!(n
            .args
            .iter()
            .any(|a| matches!(a, NodeArg::Buf(r) if r.buf == w)));
        n.l2_streaming = Some(w);
    }
}

/// A buffer argument at offset 0.
pub(crate) fn buf(id: BufId) -> BufRef {
    BufRef { buf: id, offset: 0 }
}

/// A buffer argument `offset` bytes in.
pub(crate) fn buf_at(id: BufId, offset: u64) -> BufRef {
    BufRef { buf: id, offset }
}

/// A `u32` argument from a dimension; model dimensions are bounded far below `u32::MAX` by
/// `ModelConfig`'s key checks.
pub(crate) fn u32a(v: usize) -> u32 {
    v as u32
}
