//! The plan of a speculative verify step: `m` consecutive positions of the decode plan in one
//! node list, each position a *column* with its own copy of every activation and its own step
//! state, all columns on the decode plan's weights and latent caches.
//!
//! ```text
//! for each node k of the decode plan:        (node-major: node k of every column, then node k+1)
//!     for each column i in 0..m:             node k on column i's activations and step state i
//! step state i = { token: t_i, pos: p + i }  (written by the host; the argmax node of column i
//!                                             writes its next_token)
//! ```
//!
//! Why the columns' bits are the decode plan's, step by step: every node reads only its own
//! column's activations and step state, the weights, and the latent caches; the only thing a
//! column reads that another writes is a cache row, and column `i` reads rows `0..=p + i` of a
//! layer, whose rows `p..p + i` columns `0..i` write with an earlier node of that layer (the
//! decode plan writes a layer's row before it attends over it). A node runs the same kernel on
//! the same bytes as in the decode step of position `p + i` after positions `p..p + i` were
//! decoded, so its output is that step's, bit for bit (`graph/tests/sim_verify.rs` checks it in
//! ptx-sim against decode steps). Node-major order is what lets a kernel with a multi-column
//! variant replace a node's `m` copies by one launch that streams the weights once: the fused
//! lm_head and argmax (`gemv_argmax_colsM_*`, Q6_K and Q8_0 heads) and the chained merge and
//! `attn_output` (`attn_merge_v_b_o_colsM_*`, Q4_K); every other node still runs once per
//! column, so the plan costs `m` decode steps' launches less those nodes' repeated weight
//! streams.
//!
//! Not planned: a decode plan with an expert cache (the host rewrites its slot tables from one
//! step's routing between steps; a verify reads `m` routings at once).

use crate::buffer::{BufId, BufferDecl, BufferKind};
use crate::error::PlanError;
use crate::node::{BufRef, Node, NodeArg};
use crate::plan::Plan;

/// Columns a verify plan holds at most: the positions of
/// [`ingot_model::speculative::MAX_DRAFT`] drafts and the token before them.
pub const MAX_VERIFY_COLUMNS: usize = ingot_model::speculative::MAX_DRAFT + 1;

/// Bytes each column's copy of a buffer is aligned to (the widest vector load a kernel makes is
/// 16 bytes; 256 keeps every copy on its own cache lines).
pub const COLUMN_ALIGN: u64 = 256;

/// The verify plan of `columns` positions and where each column's copy of a buffer lives.
#[derive(Clone, Debug)]
pub struct VerifyPlan {
    /// `residual`, `logits` and `step` name column 0's copies; column `i`'s copy of a widened
    /// buffer starts its [`VerifyPlan::strides`] entry bytes after column `i - 1`'s.
    pub plan: Plan,
    pub columns: usize,
    /// Per buffer: bytes between consecutive columns' copies, 0 for a buffer every column
    /// shares (weights, constants, the latent caches).
    pub strides: Vec<u64>,
    /// The decode plan's `act.norm` (each column's final hidden state, f32), if it has one.
    pub norm: Option<BufId>,
    /// Indices of the decode plan's nodes that run as one multi-column launch (the others run
    /// once per column).
    pub fused: Vec<usize>,
}

impl VerifyPlan {
    /// Column `column`'s copy of buffer `buf`, at its start.
    pub fn at(&self, buf: BufId, column: usize) -> BufRef {
        BufRef {
            buf,
            offset: self.strides[buf.0 as usize] * column as u64,
        }
    }
}

/// Builds the verify plan of `columns` positions (2 to [`MAX_VERIFY_COLUMNS`]) from the decode
/// plan `decode`. The step state becomes an activation (`verify.steps`, one
/// [`ingot_abi::step::StepState`] per column) that the host writes before each verify, so the
/// decode plan's own step state is untouched by it.
pub fn build_verify_plan(decode: &Plan, columns: usize) -> Result<VerifyPlan, PlanError> {
    if !(2..=MAX_VERIFY_COLUMNS).contains(&columns) {
        return Err(PlanError::UnsupportedModel(format!(
            "a verify step of {columns} positions: the verify plan takes 2 to \
             {MAX_VERIFY_COLUMNS} (1 to {} drafts and the token before them)",
            ingot_model::speculative::MAX_DRAFT
        )));
    }
    if decode.expert_cache.is_some() {
        return Err(PlanError::UnsupportedModel(
            "a batched verify with an expert cache: the cache's slot tables follow one step's \
             routing, a verify reads several (drafts are verified one position at a time)"
                .into(),
        ));
    }
    let mut strides = Vec::with_capacity(decode.buffers.len());
    let mut buffers = Vec::with_capacity(decode.buffers.len());
    for b in &decode.buffers {
        let (decl, stride) = widen(b, columns)?;
        buffers.push(decl);
        strides.push(stride);
    }
    let mut nodes = Vec::with_capacity(decode.nodes.len() * columns);
    let mut fused = Vec::new();
    for (k, n) in decode.nodes.iter().enumerate() {
        let one_launch = head_on_columns(n, columns, &strides)
            .or_else(|| merge_out_on_columns(n, columns, &strides));
        if let Some(node) = one_launch {
            nodes.push(node);
            fused.push(k);
            continue;
        }
        for i in 0..columns {
            let mut node = on_column(n, i, &strides);
            if i + 1 < columns {
                // The next column reads the same weights: only the last copy streams them past.
                node.l2_streaming = None;
            }
            nodes.push(node);
        }
    }
    let norm = decode
        .buffers
        .iter()
        .position(|b| b.name == "act.norm")
        .map(|i| BufId(i as u32));
    Ok(VerifyPlan {
        plan: Plan {
            buffers,
            nodes,
            n_layer: decode.n_layer,
            ctx: decode.ctx,
            vocab: decode.vocab,
            n_embd: decode.n_embd,
            residual: decode.residual,
            logits: decode.logits,
            step: decode.step,
            host_embedding: decode.host_embedding,
            device_argmax: decode.device_argmax,
            expert_cache: None,
        },
        columns,
        strides,
        norm,
        fused,
    })
}

/// The verify plans of 2 to [`MAX_VERIFY_COLUMNS`] positions of `decode` (index `m - 2`), or why
/// it has none (an expert cache, no final hidden state to hand the drafter): what both executors
/// load beside the decode plan.
pub fn verify_plans(decode: &Plan) -> Result<Vec<VerifyPlan>, String> {
    (2..=MAX_VERIFY_COLUMNS)
        .map(|m| match build_verify_plan(decode, m) {
            Ok(v) if v.norm.is_none() => Err("the decode plan keeps no final hidden state".into()),
            Ok(v) => Ok(v),
            Err(e) => Err(e.to_string()),
        })
        .collect()
}

/// The fused lm_head and argmax node `n` (`gemv_argmax_*`) as one launch over `columns` columns
/// (`gemv_argmax_colsM_*`, each column's bits the one-column kernel's, the weights streamed
/// once), where the type has that kernel and the columns fit its activation stage; `None`
/// otherwise (the node is then copied per column).
fn head_on_columns(n: &Node, columns: usize, strides: &[u64]) -> Option<Node> {
    use ingot_abi::launch::GEMV_STAGE_BLOCKS;
    use ingot_abi::weight_types::GemvType;
    let ty =
        (GemvType::ALL.iter()).find(|ty| ty.argmax().is_some_and(|k| k.desc.name == n.kernel))?;
    let k = ty.argmax_cols(columns)?;
    if !super::kernels::available(k.desc.name) {
        return None;
    }
    // `gemv_argmax_*`'s parameters (`GemvArgmaxArgs`).
    let [w, x, y, ncols, nrows, acc, state, count] = n.args[..] else {
        return None;
    };
    let NodeArg::U32(width) = ncols else {
        return None;
    };
    if columns as u64 * u64::from(width / 32) > u64::from(GEMV_STAGE_BLOCKS) {
        return None;
    }
    let stride = |a| column_stride(a, strides);
    Some(Node {
        kernel: k.desc.name.to_owned(),
        label: format!("{} [{columns} positions]", n.label),
        args: vec![
            w,
            x,
            y,
            acc,
            state,
            count,
            ncols,
            nrows,
            stride(x)?,
            stride(y)?,
            stride(acc)?,
            stride(state)?,
        ],
        ..n.clone()
    })
}

/// The chained merge and `attn_output` node `n` (`attn_merge_v_b_o_*`) as one launch over
/// `columns` columns (`attn_merge_v_b_o_colsM_*`: each column's bits the one-column launch's,
/// `attn_output`'s rows streamed once), where the type has that kernel and the columns fit its
/// stage; `None` otherwise (the node is then copied per column). The launch's control words and
/// norm-tail counter are column 0's.
fn merge_out_on_columns(n: &Node, columns: usize, strides: &[u64]) -> Option<Node> {
    use ingot_abi::launch::{merge_v_b_o_cols_fit, merge_v_b_o_cols_items};
    use ingot_abi::weight_types::GemvType;
    let ty = (GemvType::ALL.iter()).find(|ty| ty.merge_v_b_o().name == n.kernel)?;
    let k = ty.merge_v_b_o_cols(columns)?;
    if !super::kernels::available(k.desc.name) {
        return None;
    }
    // `attn_merge_v_b_o_*`'s parameters (`MergeVbOArgs`).
    let [part_o, part_ml, state, _w, y, scratch, pair_count, n_head, d_v, _ctx, _segs, _w_o, resid, out, nrows, _norm_w, norm_q8, norm_f32, _count, norm, _eps, _ctl] =
        n.args[..]
    else {
        return None;
    };
    let (NodeArg::U32(heads), NodeArg::U32(dv), NodeArg::U32(rows)) = (n_head, d_v, nrows) else {
        return None;
    };
    let m = u32::try_from(columns).ok()?;
    if !merge_v_b_o_cols_fit(m, heads.checked_mul(dv)?) {
        return None;
    }
    let stride = |a| column_stride(a, strides);
    let mut args = n.args.clone();
    for a in [part_o, part_ml, state, y, scratch, pair_count, resid, out] {
        args.push(stride(a)?);
    }
    // Without a norm tail its buffers are stand-ins the kernel never reads.
    let tail = norm != NodeArg::U32(ingot_abi::launch::DOWN_NORM_NONE);
    for a in [norm_q8, norm_f32] {
        args.push(if tail { stride(a)? } else { NodeArg::U32(0) });
    }
    Some(Node {
        kernel: k.desc.name.to_owned(),
        label: format!("{} [{columns} positions]", n.label),
        items: merge_v_b_o_cols_items(m, heads, dv, rows),
        args,
        // Each column's merge reads `attn_v_b` again: no longer a stream read once.
        l2_streaming: None,
        ..n.clone()
    })
}

/// The column stride of buffer argument `a` as a `u32` launch argument; `None` for a buffer the
/// columns share (stride 0), a stride past `u32`, or a scalar.
fn column_stride(a: NodeArg, strides: &[u64]) -> Option<NodeArg> {
    match a {
        NodeArg::Buf(r) => u32::try_from(strides[r.buf.0 as usize])
            .ok()
            .filter(|&s| s > 0)
            .map(NodeArg::U32),
        _ => None,
    }
}

/// Buffer `b` as the verify plan declares it, with its column stride: activations and the step
/// state one aligned copy per column, everything else as declared (and shared by the columns).
fn widen(b: &BufferDecl, columns: usize) -> Result<(BufferDecl, u64), PlanError> {
    let name = match b.kind {
        BufferKind::Activation => b.name.clone(),
        BufferKind::StepState => "verify.steps".to_owned(),
        _ => return Ok((b.clone(), 0)),
    };
    let overflow = || PlanError::Overflow(format!("{} x {columns} columns", b.name));
    let stride = b
        .bytes
        .checked_next_multiple_of(COLUMN_ALIGN)
        .ok_or_else(overflow)?;
    let bytes = stride.checked_mul(columns as u64).ok_or_else(overflow)?;
    let decl = BufferDecl {
        name,
        kind: BufferKind::Activation,
        bytes,
    };
    Ok((decl, stride))
}

/// Node `n` of the decode plan on column `column`: each buffer argument moved to that column's
/// copy (offsets within a copy unchanged).
fn on_column(n: &Node, column: usize, strides: &[u64]) -> Node {
    let args = n
        .args
        .iter()
        .map(|a| match *a {
            NodeArg::Buf(r) => NodeArg::Buf(BufRef {
                buf: r.buf,
                offset: r.offset + strides[r.buf.0 as usize] * column as u64,
            }),
            other => other,
        })
        .collect();
    Node {
        label: format!("{} [position +{column}]", n.label),
        args,
        ..n.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decl(name: &str, kind: BufferKind, bytes: u64) -> BufferDecl {
        BufferDecl {
            name: name.into(),
            kind,
            bytes,
        }
    }

    fn plan() -> Plan {
        let at = |b: u32, offset| {
            NodeArg::Buf(BufRef {
                buf: BufId(b),
                offset,
            })
        };
        let node = |kernel: &str, args| Node {
            kernel: kernel.into(),
            label: kernel.into(),
            layer: Some(0),
            items: 1,
            args,
            l2_streaming: None,
        };
        Plan {
            buffers: vec![
                decl("step", BufferKind::StepState, 16),
                decl("kv.0", BufferKind::KvCache { layer: 0 }, 1024),
                decl("act.residual", BufferKind::Activation, 300),
                decl("rope", BufferKind::Constant { data: vec![0; 8] }, 8),
            ],
            nodes: vec![
                node("a", vec![at(0, 0), at(1, 64), at(2, 40), NodeArg::U32(7)]),
                node("b", vec![at(3, 4), at(2, 0)]),
            ],
            n_layer: 1,
            ctx: 16,
            vocab: 8,
            n_embd: 8,
            residual: BufId(2),
            logits: BufId(2),
            step: BufId(0),
            host_embedding: false,
            device_argmax: false,
            expert_cache: None,
        }
    }

    /// Activations and the step state get one aligned copy per column; the caches and constants
    /// stay one; nodes run node-major, each copy's buffer arguments moved to its column and its
    /// scalars unchanged.
    #[test]
    fn columns_get_their_own_activations_and_share_the_rest() {
        let v = build_verify_plan(&plan(), 3).expect("plan");
        assert_eq!(v.strides, [256, 0, 512, 0]);
        let bytes: Vec<u64> = v.plan.buffers.iter().map(|b| b.bytes).collect();
        assert_eq!(bytes, [768, 1024, 1536, 8]);
        assert_eq!(v.plan.buffers[0].name, "verify.steps");
        assert_eq!(v.plan.buffers[0].kind, BufferKind::Activation);
        let kernels: Vec<&str> = v.plan.nodes.iter().map(|n| n.kernel.as_str()).collect();
        assert_eq!(kernels, ["a", "a", "a", "b", "b", "b"]);
        let off = |n: usize, a: usize| match v.plan.nodes[n].args[a] {
            NodeArg::Buf(r) => r.offset,
            ref other => panic!("{other:?}"),
        };
        assert_eq!([off(2, 0), off(2, 1), off(2, 2)], [512, 64, 1064]);
        assert_eq!(v.plan.nodes[2].args[3], NodeArg::U32(7));
        assert_eq!([off(4, 0), off(4, 1)], [4, 512]);
        assert_eq!(v.at(BufId(2), 2).offset, 1024);
    }

    /// One column, more than `MAX_VERIFY_COLUMNS`, and a plan with an expert cache are refused
    /// with the reason.
    #[test]
    fn what_it_cannot_verify_is_refused() {
        for m in [0, 1, MAX_VERIFY_COLUMNS + 1] {
            match build_verify_plan(&plan(), m) {
                Err(PlanError::UnsupportedModel(msg)) => assert!(msg.contains("2 to"), "{msg}"),
                other => panic!("{m} columns: {other:?}"),
            }
        }
        let mut cached = plan();
        cached.expert_cache = Some(crate::ExpertCachePlan {
            slots: 1,
            policy: ingot_model::expert_cache::Policy::Lru,
            n_expert: 2,
            n_expert_used: 1,
            route_bonus: 0.0,
            layers: Vec::new(),
        });
        match build_verify_plan(&cached, 2) {
            Err(PlanError::UnsupportedModel(msg)) => assert!(msg.contains("expert cache"), "{msg}"),
            other => panic!("expert cache: {other:?}"),
        }
    }
}
