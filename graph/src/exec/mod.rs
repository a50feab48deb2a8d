//! Executors of a [`crate::Plan`]: [`cuda`] captures it into one CUDA graph, [`sim`] interprets
//! it in ptx-sim with per-node counters. Both implement [`ingot_model::Decoder`].

pub mod cuda;
pub mod expert_cache;
pub mod host_embedding;
pub mod sim;

use ingot_abi::launch::KernelDesc;
use ingot_gguf::GgufFile;
use ingot_model::{Decoder, Forward, ModelConfig, ModelError, Rows};

use crate::planner::mtp::{build_mtp_plan_for, MtpPlan};
use crate::planner::PlanOptions;

/// Executor failures surface through [`ingot_model::Decoder`] as a model error that carries
/// the executor's message.
pub(crate) fn to_model_error(e: crate::ExecError) -> ModelError {
    match e {
        crate::ExecError::Step(m) => m,
        other => ModelError::Unsupported(format!("decode step failed: {other}")),
    }
}

/// How a second plan of one executor (a prefill chunk) lies on the first's allocations (the
/// decode step): for each of `second`'s buffers, `Some(i)` when it is `first`'s buffer `i`
/// (same name, declared identically, and [`BufferDecl::is_shareable`]: weights, constants, the
/// latent caches and the step state), `None` when it gets its own allocation (its activations).
/// A buffer that [`BufferDecl::must_be_shared`] without such a twin is an error: the two plans
/// would write different caches. Both executors allocate by this.
///
/// [`BufferDecl::is_shareable`]: crate::BufferDecl::is_shareable
/// [`BufferDecl::must_be_shared`]: crate::BufferDecl::must_be_shared
pub fn shared_buffers(
    first: &crate::Plan,
    second: &crate::Plan,
) -> Result<Vec<Option<usize>>, crate::ExecError> {
    same_decls(first, second)
        .map(|(decl, same)| {
            let twin = same.filter(|_| decl.is_shareable());
            if twin.is_none() && decl.must_be_shared() {
                return Err(crate::ExecError::Prefill(format!(
                    "the prefill plan's {} is not declared as the decode plan's",
                    decl.name
                )));
            }
            Ok(twin)
        })
        .collect()
}

/// How a plan that keeps its own caches and step state (the NextN/MTP block's) lies on the
/// decode plan's allocations: `Some(i)` for a weight or constant declared exactly as `first`'s
/// buffer `i` (the embedding, the lm_head, the rope tables), `None` for everything else.
pub fn shared_initialized(first: &crate::Plan, second: &crate::Plan) -> Vec<Option<usize>> {
    same_decls(first, second)
        .map(|(decl, same)| same.filter(|_| decl.is_initialized()))
        .collect()
}

/// Each of `second`'s buffers with the index of `first`'s buffer of the same name and the same
/// declaration, if any.
fn same_decls<'p>(
    first: &'p crate::Plan,
    second: &'p crate::Plan,
) -> impl Iterator<Item = (&'p crate::BufferDecl, Option<usize>)> {
    let by_name: std::collections::HashMap<&str, usize> = first
        .buffers
        .iter()
        .enumerate()
        .map(|(i, b)| (b.name.as_str(), i))
        .collect();
    second.buffers.iter().map(move |decl| {
        let same = by_name
            .get(decl.name.as_str())
            .copied()
            .filter(|&i| first.buffers[i] == *decl);
        (decl, same)
    })
}

/// Bytes of `second`'s own allocations given its [`shared_buffers`] map `twins`.
pub fn own_bytes(second: &crate::Plan, twins: &[Option<usize>]) -> u64 {
    second
        .buffers
        .iter()
        .zip(twins)
        .filter(|(_, t)| t.is_none())
        .map(|(b, _)| b.bytes)
        .sum()
}

/// What the chunk driver [`prefill_in_chunks`] needs of an executor.
pub(crate) trait ChunkedPrefill {
    fn config(&self) -> &ingot_model::ModelConfig;
    /// Positions the cache holds, and how many hold rows.
    fn ctx_filled(&self) -> (usize, usize);
    /// Token counts of the prefill plans, ascending (empty without any).
    fn buckets(&self) -> Vec<usize>;
    /// Runs `tokens` at `pos..` on prefill plan `k`; with `head`, the logits of the last one.
    fn run_chunk(
        &mut self,
        k: usize,
        tokens: &[u32],
        pos: usize,
        head: bool,
    ) -> Result<(), crate::ExecError>;
    /// One decode step (its logits become the executor's).
    fn step(&mut self, token: u32, pos: usize) -> Result<(), crate::ExecError>;
}

/// Feeds `tokens` at `start_pos..` as prefill chunks ([`crate::prefill_chunks`] over the
/// executor's buckets; what no bucket fits, or everything without any, token by token on the
/// decode plan), leaving the last position's logits in the executor. Every position is checked
/// before anything runs: a refused prompt changes nothing.
pub(crate) fn prefill_in_chunks(
    exec: &mut impl ChunkedPrefill,
    tokens: &[u32],
    start_pos: usize,
) -> Result<(), crate::ExecError> {
    if tokens.is_empty() {
        return Err(ModelError::EmptyPrompt.into());
    }
    let (ctx, filled) = exec.ctx_filled();
    ingot_model::check_span(exec.config(), ctx, filled, tokens, start_pos)?;
    let buckets = exec.buckets();
    let chunks = crate::prefill_chunks(tokens.len(), start_pos, ctx, &buckets);
    let last = chunks.len() - 1;
    for (i, ch) in chunks.iter().enumerate() {
        let toks = &tokens[ch.start..ch.start + ch.n];
        let pos = start_pos + ch.start;
        match ch.bucket.and_then(|b| buckets.iter().position(|&x| x == b)) {
            Some(k) => exec.run_chunk(k, toks, pos, i == last)?,
            None => {
                for (j, &t) in toks.iter().enumerate() {
                    exec.step(t, pos + j)?;
                }
            }
        }
    }
    Ok(())
}

/// The NextN/MTP block's plan for an executor, checked against the committed PTX, or why the
/// model has none (no NextN block, a file stripped of its tensors, a shape or type the kernels do
/// not take): a decoder that cannot draft still decodes. Both executors load it by this.
pub(crate) fn mtp_plan_or_why(
    config: &ModelConfig,
    file: &GgufFile,
    opts: PlanOptions,
) -> Result<(MtpPlan, Vec<&'static KernelDesc>), String> {
    if config.n_nextn == 0 {
        return Err(
            "the model has no NextN/MTP block (nextn_predict_layers is 0), so it cannot draft"
                .into(),
        );
    }
    let mtp = build_mtp_plan_for(config, file.header(), opts)
        .map_err(|e| format!("the NextN/MTP block cannot be planned: {e}"))?;
    let descs = mtp
        .plan
        .check_committed()
        .map_err(|e| format!("the NextN/MTP block's plan: {e}"))?;
    Ok((mtp, descs))
}

/// The checks of [`Decoder::mtp_step`] both executors make before running the block of `plan`:
/// `pos` against the `filled` MTP rows and the context, the token, the hidden state's length.
pub(crate) fn check_mtp_step(
    config: &ModelConfig,
    plan: &crate::Plan,
    filled: usize,
    (hidden, token, pos): (&[f32], u32, usize),
) -> Result<(), ModelError> {
    ingot_model::check_step(config, plan.ctx, filled, token, pos)?;
    if hidden.len() != plan.n_embd {
        return Err(ModelError::Unsupported(format!(
            "MTP hidden state of {} values, expected n_embd = {}",
            hidden.len(),
            plan.n_embd
        )));
    }
    Ok(())
}

/// [`Decoder::forward_rows`] of an executor whose prefill plans norm only their last row: every
/// position's hidden state and logits from decode steps, one by one. With [`Rows::Last`] and a
/// batched prefill (`prefill`) the prompt then runs again as [`Decoder::prefill_last`]'s chunks,
/// whose logits and cache rows are returned and kept, so a drafted generation continues from the
/// plain one's state bit for bit; the hidden states (read only by the MTP block, which only
/// drafts) stay the decode steps'.
pub(crate) fn forward_rows_by_steps(
    dec: &mut impl Decoder,
    tokens: &[u32],
    start_pos: usize,
    rows: Rows,
    prefill: bool,
) -> Result<Forward, ModelError> {
    let mut out = ingot_model::forward_by_decode(dec, tokens, start_pos, rows)?;
    if rows == Rows::Last && prefill {
        out.logits = dec.prefill_last(tokens, start_pos)?;
    }
    Ok(out)
}

/// What a verify of `n` positions returns for `rows` ([`Rows::All`] or [`Rows::Argmax`]) from the
/// columns an executor read back: every position's hidden state, and its logits, or its argmax
/// (the device's where `argmax` holds it, else the host's on the logits).
pub(crate) fn verify_rows(
    n: usize,
    (hidden, logits, argmax): (Vec<f32>, Vec<f32>, Option<Vec<u32>>),
    rows: Rows,
    vocab: usize,
) -> Forward {
    let all = Forward {
        n,
        hidden,
        logits,
        argmax: Vec::new(),
    };
    match (rows, argmax) {
        (Rows::Argmax, Some(argmax)) => Forward {
            logits: Vec::new(),
            argmax,
            ..all
        },
        (Rows::Argmax, None) => all.into_argmax(vocab),
        _ => all,
    }
}

/// Rejects a greedy run of `n` steps from `pos` (already checked by
/// [`ingot_model::check_step`]) whose last position `pos + n - 1` falls outside the `ctx`
/// positions of the cache.
pub(crate) fn check_greedy_span(ctx: usize, pos: usize, n: usize) -> Result<(), ModelError> {
    match pos.checked_add(n) {
        Some(end) if end <= ctx => Ok(()),
        _ => Err(ModelError::PositionOutOfRange {
            pos: pos.saturating_add(n) - 1,
            max_ctx: ctx,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Weights, constants, caches and the step state declared alike are shared; activations,
    /// a weight declared differently and anything under another name are not; a cache
    /// without its twin is refused.
    #[test]
    fn buffers_are_shared_by_name_when_declared_alike() {
        use crate::{BufId, BufferDecl, BufferKind, Plan};
        let decl = |name: &str, kind: BufferKind, bytes| BufferDecl {
            name: name.into(),
            kind,
            bytes,
        };
        let w = |ty| BufferKind::Weight {
            tensor: "w".into(),
            ty,
            host_mapped: false,
        };
        let plan = |buffers| Plan {
            buffers,
            nodes: Vec::new(),
            n_layer: 1,
            ctx: 16,
            vocab: 8,
            n_embd: 8,
            residual: BufId(0),
            logits: BufId(0),
            step: BufId(0),
            host_embedding: false,
            device_argmax: false,
            expert_cache: None,
        };
        let q4 = ingot_gguf::GgmlType::Q4K;
        let decode = plan(vec![
            decl("step", BufferKind::StepState, 16),
            decl("kv.0", BufferKind::KvCache { layer: 0 }, 1024),
            decl("act.residual", BufferKind::Activation, 32),
            decl("w", w(q4), 256),
            decl("rope", BufferKind::Constant { data: vec![1] }, 1),
        ]);
        let prefill = plan(vec![
            decl("act.residual", BufferKind::Activation, 32),
            decl("w", w(q4), 256),
            decl("kv.0", BufferKind::KvCache { layer: 0 }, 1024),
            decl("rope", BufferKind::Constant { data: vec![2] }, 1),
            decl("pf.x", BufferKind::Activation, 512),
            decl("step", BufferKind::StepState, 16),
        ]);
        let twins = shared_buffers(&decode, &prefill).expect("shared");
        assert_eq!(twins, [None, Some(3), Some(1), None, None, Some(0)]);
        assert_eq!(own_bytes(&prefill, &twins), 32 + 1 + 512);
        // The MTP block's rule: only what is never written is shared; its cache and step state
        // are its own even when declared alike.
        assert_eq!(
            shared_initialized(&decode, &prefill),
            [None, Some(3), None, None, None, None]
        );
        let mut bad = prefill.clone();
        bad.buffers[2].bytes = 2048;
        match shared_buffers(&decode, &bad) {
            Err(crate::ExecError::Prefill(m)) => assert!(m.contains("kv.0"), "{m}"),
            other => panic!("a cache of another size must be refused: {other:?}"),
        }
    }

    #[test]
    fn greedy_span_must_end_inside_the_context() {
        assert!(check_greedy_span(8, 3, 0).is_ok());
        assert!(check_greedy_span(8, 3, 5).is_ok(), "positions 3..=7 fit 8");
        match check_greedy_span(8, 3, 6) {
            Err(ModelError::PositionOutOfRange { pos: 8, max_ctx: 8 }) => {}
            other => panic!("one step past the end: {other:?}"),
        }
        // A length that overflows `pos + n` is refused, not wrapped.
        match check_greedy_span(8, 3, usize::MAX) {
            Err(ModelError::PositionOutOfRange { max_ctx: 8, .. }) => {}
            other => panic!("overflowing length: {other:?}"),
        }
    }
}
