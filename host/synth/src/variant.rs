//! Family variants of an existing file: the same numbers in another arrangement (a merged
//! `ffn_gate_up_exps`, a dropped `output.weight`) or with keys added (Mistral Large 3's attention
//! temperature). Tests build them from the golden and synthetic models to check that every
//! backend reads each arrangement as llama.cpp does. Files are small, so tensors are held whole.

use std::path::Path;

use ingot_gguf::{GgmlType, GgufError, GgufFile, GgufWriter, MetaValue};

/// One tensor of a file being assembled: name, type, shape (`ne`, innermost first) and bytes.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub name: String,
    pub ty: GgmlType,
    pub ne: Vec<u64>,
    pub data: Vec<u8>,
}

/// Every tensor of `f`, in file order, with its bytes copied.
pub fn tensors_of(f: &GgufFile) -> Vec<Tensor> {
    f.header()
        .tensors
        .iter()
        .map(|t| Tensor {
            name: t.name.clone(),
            ty: t.ty,
            ne: t.ne.clone(),
            data: f.tensor_data(t).to_vec(),
        })
        .collect()
}

/// Writes `src`'s metadata (in its order, with `set` applied) and `tensors` to `path`.
pub fn write_variant(
    path: &Path,
    src: &GgufFile,
    set: &[(&str, MetaValue)],
    tensors: &[Tensor],
) -> Result<(), GgufError> {
    let mut w = GgufWriter::new(src.header().version);
    for (k, v) in &src.header().kv {
        w.set_kv(k, v.clone());
    }
    for (k, v) in set {
        w.set_kv(k, v.clone());
    }
    for t in tensors {
        w.add_tensor(&t.name, t.ty, &t.ne)?;
    }
    let mut data = w.begin(path)?;
    for t in tensors {
        data.write_tensor(&t.data)?;
    }
    data.finish()
}

/// Each layer's `ffn_gate_exps` and `ffn_up_exps` replaced by one `ffn_gate_up_exps`
/// `{ncols, 2·ff, n_expert}` holding, per expert, its gate rows then its up rows (llama.cpp's
/// merged layout), at the gate tensor's place. Both halves must share a type.
pub fn merge_gate_up(tensors: &[Tensor]) -> Result<Vec<Tensor>, String> {
    let mut merged = Vec::with_capacity(tensors.len());
    for t in tensors {
        if t.name.ends_with("ffn_up_exps.weight") {
            continue;
        }
        let Some(prefix) = t.name.strip_suffix("ffn_gate_exps.weight") else {
            merged.push(t.clone());
            continue;
        };
        let up_name = format!("{prefix}ffn_up_exps.weight");
        let up = tensors
            .iter()
            .find(|u| u.name == up_name)
            .ok_or_else(|| format!("{} has no {up_name}", t.name))?;
        if (up.ty, &up.ne) != (t.ty, &t.ne) || t.ne.len() != 3 || t.ne[2] == 0 {
            return Err(format!(
                "{} and {up_name} differ in type or shape, or are not stacked experts",
                t.name
            ));
        }
        let n_expert = t.ne[2] as usize;
        let slab = t.data.len() / n_expert;
        let data = (0..n_expert)
            .flat_map(|e| {
                let r = e * slab..(e + 1) * slab;
                t.data[r.clone()].iter().chain(&up.data[r]).copied()
            })
            .collect();
        merged.push(Tensor {
            name: format!("{prefix}ffn_gate_up_exps.weight"),
            ty: t.ty,
            ne: vec![t.ne[0], 2 * t.ne[1], t.ne[2]],
            data,
        });
    }
    Ok(merged)
}
