//! Quantized matrix views and the matrix-vector product of the CPU backend.

use ingot_abi::blocks::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use ingot_gguf::{GgmlType, GgufFile, TensorInfo};
use rayon::prelude::*;

use crate::dequant::dequantize_into;
use crate::error::{ModelError, Result};
use crate::math::dot_f32;

/// Multiply-accumulates below which a product runs on the calling thread: rayon's fork/join costs a few
/// microseconds, more than a product this small takes.
const PARALLEL_MIN_WORK: usize = 1 << 15;

/// The activation format a weight type's dot product consumes (ggml-cpu `vec_dot_type`, spec §3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ActKind {
    F32,
    Q8_0,
    Q8_1,
    Q8K,
}

impl ActKind {
    fn of(ty: GgmlType) -> Option<ActKind> {
        use GgmlType::*;
        Some(match ty {
            F32 | F16 | Bf16 => ActKind::F32,
            Q4_0 | Q5_0 | Q8_0 | Iq4Nl => ActKind::Q8_0,
            Q4_1 | Q5_1 => ActKind::Q8_1,
            Q2K | Q3K | Q4K | Q5K | Q6K | Iq4Xs => ActKind::Q8K,
            _ => return None,
        })
    }
}

/// A row-major matrix of any supported weight type, viewed in place: `rows` rows of `cols` elements,
/// `row_bytes` bytes each.
#[derive(Clone, Copy)]
pub(super) struct QMatrix<'f> {
    info: &'f TensorInfo,
    kind: ActKind,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    data: &'f [u8],
}

impl<'f> QMatrix<'f> {
    /// The whole tensor as a matrix: `ne[0]` columns, all higher dimensions flattened into rows.
    pub fn from_tensor(file: &'f GgufFile, name: &str) -> Result<Self> {
        let info = file
            .header()
            .tensor(name)
            .ok_or_else(|| ModelError::MissingTensor {
                name: name.to_owned(),
            })?;
        let kind = ActKind::of(info.ty).ok_or_else(|| ModelError::TensorType {
            name: name.to_owned(),
            ty: info.ty.name().to_owned(),
            reason: "no CPU dot product for this type".into(),
        })?;
        let cols = info.ne4()[0] as usize;
        let rows = (info.n_elements() / info.ne4()[0].max(1)) as usize;
        let row_bytes = info.row_bytes() as usize;
        let data = file.tensor_data(info);
        if row_bytes == 0 || data.len() != rows * row_bytes {
            return Err(ModelError::TensorType {
                name: name.to_owned(),
                ty: info.ty.name().to_owned(),
                reason: format!(
                    "{} data bytes do not hold {rows} rows of {row_bytes} bytes",
                    data.len()
                ),
            });
        }
        Ok(QMatrix {
            info,
            kind,
            rows,
            cols,
            row_bytes,
            data,
        })
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Slab `i` of `n` equal slabs along the rows (one expert of a stacked tensor, one head of `attn_k_b`).
    pub fn slab(&self, i: usize, n: usize) -> Self {
        let rows = self.rows / n;
        self.row_range(i * rows, rows)
    }

    /// Rows `start..start + count`.
    pub fn row_range(&self, start: usize, count: usize) -> Self {
        QMatrix {
            rows: count,
            data: &self.data[start * self.row_bytes..(start + count) * self.row_bytes],
            ..*self
        }
    }

    fn row(&self, r: usize) -> &'f [u8] {
        &self.data[r * self.row_bytes..(r + 1) * self.row_bytes]
    }

    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) -> Result<()> {
        dequantize_into(self.info, self.row(r), &mut out[..self.cols])
    }

    /// `out = W·x`, rows split across rayon's pool when the product is large enough.
    pub fn matvec(&self, x: &mut Activation, out: &mut [f32]) -> Result<()> {
        if self.rows * self.cols < PARALLEL_MIN_WORK {
            return self.matvec_serial(x, out);
        }
        x.prepare(self.kind, self)?;
        let x = &*x;
        let chunk = (PARALLEL_MIN_WORK / 4 / self.cols).max(1);
        out[..self.rows]
            .par_chunks_mut(chunk)
            .enumerate()
            .try_for_each(|(ci, o)| self.dot_rows(ci * chunk, x, o))
    }

    /// `out = W·x` on the calling thread.
    pub fn matvec_serial(&self, x: &mut Activation, out: &mut [f32]) -> Result<()> {
        x.prepare(self.kind, self)?;
        self.dot_rows(0, x, &mut out[..self.rows])
    }

    fn dot_rows(&self, first: usize, x: &Activation, out: &mut [f32]) -> Result<()> {
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.dot(self.row(first + i), x)?;
        }
        Ok(())
    }

    fn dot(&self, row: &[u8], x: &Activation) -> Result<f32> {
        let ty = self.info.ty;
        let r = match self.kind {
            ActKind::F32 => return Ok(dot_float_row(ty, row, &x.values[..x.len])),
            ActKind::Q8_0 => ingot_quant::vec_dot_q8_0(ty, row, &x.q8_0),
            ActKind::Q8_1 => ingot_quant::vec_dot_q8_1(ty, row, &x.q8_1),
            ActKind::Q8K => ingot_quant::vec_dot_q8_k(ty, row, &x.q8k),
        };
        r.map_err(|e| self.quant_error(e))
    }

    fn quant_error(&self, e: impl std::fmt::Display) -> ModelError {
        ModelError::Quant {
            name: self.info.name.clone(),
            reason: e.to_string(),
        }
    }
}

/// Dot product of a float-typed row with f32 activations.
fn dot_float_row(ty: GgmlType, row: &[u8], x: &[f32]) -> f32 {
    match ty {
        GgmlType::F32 => match bytemuck::try_cast_slice::<u8, f32>(row) {
            Ok(w) => dot_f32(w, x),
            // Tensor data is 32-byte aligned in GGUF; an unaligned view only arises from a malformed offset.
            Err(_) => row
                .chunks_exact(4)
                .zip(x)
                .map(|(b, &v)| f32::from_le_bytes([b[0], b[1], b[2], b[3]]) * v)
                .sum(),
        },
        GgmlType::F16 => row
            .chunks_exact(2)
            .zip(x)
            .map(|(b, &v)| half::f16::from_le_bytes([b[0], b[1]]).to_f32() * v)
            .sum(),
        _ => row
            .chunks_exact(2)
            .zip(x)
            .map(|(b, &v)| half::bf16::from_le_bytes([b[0], b[1]]).to_f32() * v)
            .sum(),
    }
}

/// One input vector and its quantized forms, each computed at most once per [`Activation::load`].
pub(super) struct Activation {
    len: usize,
    values: Vec<f32>,
    q8_0: Vec<BlockQ8_0>,
    q8_1: Vec<BlockQ8_1>,
    q8k: Vec<BlockQ8K>,
    /// Which of q8_0, q8_1, q8k match `values[..len]`.
    ready: [bool; 3],
}

impl Activation {
    /// Room for inputs of up to `capacity` elements.
    pub fn new(capacity: usize) -> Self {
        Activation {
            len: capacity,
            values: vec![0.0; capacity],
            q8_0: Vec::with_capacity(capacity / 32),
            q8_1: Vec::with_capacity(capacity / 32),
            q8k: Vec::with_capacity(capacity / 256),
            ready: [false; 3],
        }
    }

    /// Replaces the input with `x` (at most the capacity).
    pub fn load(&mut self, x: &[f32]) {
        self.len = x.len();
        self.values[..x.len()].copy_from_slice(x);
        self.ready = [false; 3];
    }

    /// The whole-capacity input for writing in place; call [`Activation::mark_loaded`] afterwards.
    pub fn f32_mut(&mut self) -> &mut [f32] {
        self.len = self.values.len();
        &mut self.values
    }

    /// Invalidates the quantized forms after the values were written through [`Activation::f32_mut`].
    pub fn mark_loaded(&mut self) {
        self.ready = [false; 3];
    }

    /// Makes the form `kind` available, quantizing if needed.
    fn prepare(&mut self, kind: ActKind, m: &QMatrix<'_>) -> Result<()> {
        if self.len != m.cols {
            return Err(ModelError::Quant {
                name: m.info.name.clone(),
                reason: format!("input has {} elements, rows have {}", self.len, m.cols),
            });
        }
        // `len == cols` and weight rows are whole blocks, so the input splits into whole activation blocks.
        let x = &self.values[..self.len];
        let slot = match kind {
            ActKind::F32 => return Ok(()),
            ActKind::Q8_0 if !self.ready[0] => {
                fill_blocks(x, &mut self.q8_0, ingot_quant::q8_0::quantize);
                0
            }
            ActKind::Q8_1 if !self.ready[1] => {
                fill_blocks(x, &mut self.q8_1, ingot_quant::q8_1::quantize_block);
                1
            }
            ActKind::Q8K if !self.ready[2] => {
                fill_blocks(x, &mut self.q8k, ingot_quant::q8_k::quantize_block);
                2
            }
            _ => return Ok(()),
        };
        self.ready[slot] = true;
        Ok(())
    }
}

/// Quantizes `x` (a whole number of `N`-element blocks) block by block into `out`, reusing its allocation.
fn fill_blocks<B, const N: usize>(x: &[f32], out: &mut Vec<B>, quantize: impl Fn(&[f32; N]) -> B) {
    out.clear();
    out.extend(
        x.chunks_exact(N)
            .map(|c| quantize(c.try_into().expect("chunks_exact yields N elements"))),
    );
}
