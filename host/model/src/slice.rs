//! `ingot slice`: a deepseek2 GGUF file with a subset (or a permutation) of its routed experts.
//!
//! Every MoE layer keeps the same number of experts (`expert_count` is one key), listed in the
//! order they get in the new file: expert `keep[l][i]` of layer `l` becomes expert `i`. Sliced
//! together, along the expert dimension (the outermost one, so each expert's slab is contiguous):
//! every per-expert tensor (`ffn_{gate,up,down,gate_up}_exps.*`, whatever its suffix: weights,
//! biases, scales), the router (`ffn_gate_inp.*`, one row per expert) and the selection bias
//! (`exp_probs_b.*`), in every MoE block, NextN/MTP blocks included. Anything else is copied byte
//! for byte, except that a tensor of a MoE block that the deepseek2 layout does not name
//! ([`crate::tensors`]) and that has a dimension equal to the old expert count is an error: it may
//! be a per-expert tensor that would be left with the old count.
//!
//! Invariants: the input is never written (same file refused, output written to a temporary file
//! and renamed by [`ingot_gguf::GgufWriter`]); a tensor is read and written one expert slab at a
//! time from the memory map, never whole; every check runs before the first byte is written, so bad
//! input writes nothing; keeping all experts in order reproduces a canonical input byte for byte.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use ingot_gguf::{
    Gguf, GgufError, GgufFile, GgufWriter, MetaValue, OutputFile, OutputPolicy, TensorInfo,
};
use thiserror::Error;

use crate::config::ModelConfig;
use crate::error::ModelError;
use crate::tensors::expected_names;

/// Why a file could not be sliced. Nothing was written.
#[derive(Debug, Error)]
pub enum SliceError {
    #[error(transparent)]
    Gguf(#[from] GgufError),
    #[error("{0}")]
    Model(#[from] ModelError),
    #[error("keep list: {0}")]
    Keep(String),
    #[error("tensor {name}: {reason}")]
    Tensor { name: String, reason: String },
}

type Result<T> = std::result::Result<T, SliceError>;

/// Tensors of a MoE block indexed by expert along their outermost dimension, by the name's stem
/// (the part after `blk.N.` up to the next dot).
const PER_EXPERT: [&str; 6] = [
    "ffn_gate_exps",
    "ffn_up_exps",
    "ffn_down_exps",
    "ffn_gate_up_exps",
    "ffn_gate_inp",
    "exp_probs_b",
];

/// The experts each MoE layer keeps, in their new order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeepList {
    layers: BTreeMap<usize, Vec<usize>>,
}

impl KeepList {
    /// Parses a JSON object from layer index to the list of expert ids to keep, e.g.
    /// `{"1": [0, 2, 5], "2": [1, 3, 4]}`.
    pub fn from_json(text: &str) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| SliceError::Keep(format!("not valid JSON: {e}")))?;
        let object = value.as_object().ok_or_else(|| {
            SliceError::Keep(
                "expected a JSON object from layer index to expert ids, e.g. {\"1\": [0, 2, 5]}"
                    .into(),
            )
        })?;
        let mut layers = BTreeMap::new();
        for (key, ids) in object {
            let layer: usize = key
                .parse()
                .map_err(|_| SliceError::Keep(format!("key {key:?} is not a layer index")))?;
            let ids = ids
                .as_array()
                .ok_or_else(|| {
                    SliceError::Keep(format!("layer {layer}: expected a list of expert ids"))
                })?
                .iter()
                .map(|id| {
                    id.as_u64().map(|v| v as usize).ok_or_else(|| {
                        SliceError::Keep(format!("layer {layer}: {id} is not an expert id"))
                    })
                })
                .collect::<Result<Vec<usize>>>()?;
            if layers.insert(layer, ids).is_some() {
                return Err(SliceError::Keep(format!("layer {layer} is named twice")));
            }
        }
        Ok(KeepList { layers })
    }

    /// Every MoE layer in `0..block_count` keeping all `n_expert` experts in order (the identity
    /// slice).
    pub fn all(config: &ModelConfig) -> Self {
        let layers = (0..config.block_count())
            .filter(|&il| config.is_moe_layer(il))
            .map(|il| (il, (0..config.n_expert).collect()))
            .collect();
        KeepList { layers }
    }

    /// The list of layer `il`.
    pub fn layer(&self, il: usize) -> Option<&[usize]> {
        self.layers.get(&il).map(Vec::as_slice)
    }

    /// Checks the list against the model: exactly the MoE layers named (NextN/MTP blocks included),
    /// the same number of experts in each, ids in range and distinct, at least `expert_used_count`,
    /// and with expert groups, each run of `kept / groups` consecutive ids taken from one group.
    /// Returns the kept count.
    fn check(&self, c: &ModelConfig) -> Result<usize> {
        let moe: Vec<usize> = (0..c.block_count())
            .filter(|&il| c.is_moe_layer(il))
            .collect();
        if let Some(&il) = self.layers.keys().find(|il| !moe.contains(il)) {
            return Err(SliceError::Keep(format!(
                "layer {il} is not a MoE layer of this model (MoE layers: {})",
                ranges(&moe)
            )));
        }
        if let Some(&il) = moe.iter().find(|il| !self.layers.contains_key(il)) {
            return Err(SliceError::Keep(format!(
                "MoE layer {il} is not named; every MoE layer must be ({})",
                ranges(&moe)
            )));
        }
        let kept = self.layers.values().next().map_or(0, Vec::len);
        for (&il, ids) in &self.layers {
            if ids.len() != kept {
                return Err(SliceError::Keep(format!(
                    "layer {il} keeps {} experts but another keeps {kept}: every layer must keep the same \
                     number (expert_count is one key)",
                    ids.len()
                )));
            }
            let mut seen = vec![false; c.n_expert];
            for &id in ids {
                if id >= c.n_expert {
                    return Err(SliceError::Keep(format!(
                        "layer {il} names expert {id}, but the model has {} (ids 0..{})",
                        c.n_expert, c.n_expert
                    )));
                }
                if std::mem::replace(&mut seen[id], true) {
                    return Err(SliceError::Keep(format!(
                        "layer {il} names expert {id} twice"
                    )));
                }
            }
        }
        if kept < c.n_expert_used.max(1) {
            return Err(SliceError::Keep(format!(
                "{kept} experts kept per layer, fewer than the {} each token uses (expert_used_count)",
                c.n_expert_used
            )));
        }
        if c.n_expert_group > 1 {
            let groups = c.n_expert_group;
            let old_size = c.n_expert / groups;
            if !kept.is_multiple_of(groups) {
                return Err(SliceError::Keep(format!(
                    "{kept} experts kept per layer do not split into the model's {groups} expert groups"
                )));
            }
            for (&il, ids) in &self.layers {
                for run in ids.chunks(kept / groups) {
                    if run.iter().any(|&id| id / old_size != run[0] / old_size) {
                        return Err(SliceError::Keep(format!(
                            "layer {il}: new group {:?} mixes experts of different groups (groups of \
                             {old_size}); each run of {} ids must come from one group",
                            run,
                            kept / groups
                        )));
                    }
                }
            }
        }
        Ok(kept)
    }
}

/// `a..=b` for consecutive layer indices, else the list.
fn ranges(layers: &[usize]) -> String {
    match (layers.first(), layers.last()) {
        (Some(a), Some(b)) if b - a + 1 == layers.len() => format!("{a}..={b}"),
        _ => format!("{layers:?}"),
    }
}

/// What [`slice()`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceReport {
    pub experts_before: usize,
    pub experts_after: usize,
    pub tensors_sliced: usize,
    pub tensors_copied: usize,
    pub bytes_written: u64,
}

/// One output tensor: its new shape and where each part of its data comes from in the input.
struct Plan<'a> {
    info: &'a TensorInfo,
    ne: Vec<u64>,
    /// Sliced along the expert dimension (else copied whole).
    sliced: bool,
    /// Byte ranges of the input tensor's data, in output order.
    parts: Vec<std::ops::Range<usize>>,
}

/// `blk.N.stem...` -> `(N, stem)`.
fn block_stem(name: &str) -> Option<(usize, &str)> {
    let rest = name.strip_prefix("blk.")?;
    let (il, rest) = rest.split_once('.')?;
    let stem = rest.split('.').next()?;
    Some((il.parse().ok()?, stem))
}

fn plan_tensor<'a>(
    info: &'a TensorInfo,
    c: &ModelConfig,
    known: &HashSet<String>,
    keep: &KeepList,
    kept: usize,
) -> Result<Plan<'a>> {
    let whole = Plan {
        info,
        ne: info.ne.clone(),
        sliced: false,
        parts: std::iter::once(0..info.nbytes as usize).collect(),
    };
    let Some((il, stem)) = block_stem(&info.name) else {
        return Ok(whole);
    };
    let tensor_error = |reason: String| SliceError::Tensor {
        name: info.name.clone(),
        reason,
    };
    if !PER_EXPERT.contains(&stem) {
        if !known.contains(&info.name)
            && c.is_moe_layer(il)
            && info.ne.contains(&(c.n_expert as u64))
        {
            return Err(tensor_error(format!(
                "shape {:?} has the expert count {} but this tensor is unknown to ingot slice, which \
                 would leave it with the old count",
                info.ne, c.n_expert
            )));
        }
        return Ok(whole);
    }
    let ids = keep.layer(il).ok_or_else(|| {
        tensor_error(format!(
            "a per-expert tensor in layer {il}, which is not a MoE layer"
        ))
    })?;
    let outer = *info.ne.last().unwrap_or(&0);
    if outer != c.n_expert as u64 || !info.nbytes.is_multiple_of(outer) {
        return Err(tensor_error(format!(
            "shape {:?} ({} bytes) is not {} experts along its outermost dimension",
            info.ne, info.nbytes, c.n_expert
        )));
    }
    let slab = (info.nbytes / outer) as usize;
    let mut ne = info.ne.clone();
    *ne.last_mut().expect("outer exists") = kept as u64;
    Ok(Plan {
        info,
        ne,
        sliced: true,
        parts: ids.iter().map(|&e| e * slab..(e + 1) * slab).collect(),
    })
}

/// The same metadata type as `old`, holding `n`.
fn count_like(old: Option<&MetaValue>, n: usize) -> MetaValue {
    match old {
        Some(MetaValue::U64(_)) => MetaValue::U64(n as u64),
        Some(MetaValue::I32(_)) => MetaValue::I32(n as i32),
        Some(MetaValue::I64(_)) => MetaValue::I64(n as i64),
        _ => MetaValue::U32(n as u32),
    }
}

/// Writes `output`: `input` with the experts of `keep`. See the module documentation. `output` may
/// replace a regular file other than `input`; [`slice_to`] takes the caller's own [`OutputPolicy`].
pub fn slice(input: &Path, output: &Path, keep: &KeepList) -> Result<SliceReport> {
    let policy = OutputPolicy {
        force: true,
        inputs: &[input],
    };
    let out = OutputFile::create(output, &policy).map_err(GgufError::from)?;
    slice_to(input, out, keep)
}

/// [`slice()`] into an output file the caller created (and checked against its inputs, `input`
/// among them).
pub fn slice_to(input: &Path, output: OutputFile, keep: &KeepList) -> Result<SliceReport> {
    let file = GgufFile::open(input)?;
    let header: &Gguf = file.header();
    let c = ModelConfig::from_gguf(header)?;
    if c.n_expert == 0 {
        return Err(SliceError::Keep(
            "the model has no routed experts to slice".into(),
        ));
    }
    let kept = keep.check(&c)?;
    let known = expected_names(&c);
    let plans = header
        .tensors
        .iter()
        .map(|t| plan_tensor(t, &c, &known, keep, kept))
        .collect::<Result<Vec<_>>>()?;

    let mut writer = GgufWriter::new(header.version);
    for (key, value) in &header.kv {
        writer.set_kv(key, value.clone());
    }
    let count_key = "deepseek2.expert_count";
    writer.set_kv(count_key, count_like(header.get(count_key), kept));
    for p in &plans {
        writer.add_tensor(&p.info.name, p.info.ty, &p.ne)?;
    }
    // The new header must describe a model this crate (and so llama.cpp's loader rules) accepts.
    let mut check = header.clone();
    check.kv = writer.kv().to_vec();
    check.tensors = writer.tensor_infos()?;
    ModelConfig::from_gguf(&check)?;

    let mut data = writer.begin_output(output)?;
    let mut bytes_written = 0;
    for p in &plans {
        let src = file.tensor_data(p.info);
        data.write_tensor_parts(p.parts.iter().map(|r| &src[r.clone()]))?;
        bytes_written += p.parts.iter().map(|r| r.len() as u64).sum::<u64>();
    }
    data.finish()?;
    let tensors_sliced = plans.iter().filter(|p| p.sliced).count();
    Ok(SliceReport {
        experts_before: c.n_expert,
        experts_after: kept,
        tensors_sliced,
        tensors_copied: plans.len() - tensors_sliced,
        bytes_written,
    })
}
