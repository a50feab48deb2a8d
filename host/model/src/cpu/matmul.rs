//! Quantized matrix views and the matrix-vector product of the CPU backend.

use ingot_abi::blocks::{BlockQ8K, BlockQ8_0, BlockQ8_1};
use ingot_gguf::{GgmlType, GgufFile, TensorInfo};
use ingot_quant::cpu_dot::packed::{self, BlockQ4Kx8, ROWS_PER_GROUP};
use ingot_quant::cpu_dot::{Isa, RowDot};

use crate::dequant::dequantize_into;
use crate::error::{ModelError, Result};
use crate::math::dot_f32;

/// The activation format a weight type's dot product consumes (ggml-cpu `vec_dot_type`,
/// docs/quant-formats.md#cpu-dot-products).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ActKind {
    F32,
    Q8_0,
    Q8_1,
    Q8K,
}

/// How a matrix's rows are dotted with an activation.
#[derive(Debug, Clone, Copy)]
enum Kernel {
    /// F32/F16/BF16 rows against f32 activations.
    Float,
    /// Q4_1/Q5_1 rows against q8_1, through the one-row reference dot product.
    Q8_1,
    /// Types with whole-row kernels (q8_K or q8_0 activations), SIMD where the CPU has it.
    Rows(RowDot),
}

impl Kernel {
    /// By the weight type's `ingot_quant::registry` row: a CPU dot product where it has one,
    /// else the q8_1 oracle (Q4_1, Q5_1).
    fn of(ty: GgmlType, isa: Isa) -> Option<Kernel> {
        use GgmlType::*;
        Some(match ty {
            F32 | F16 | Bf16 => Kernel::Float,
            _ if ingot_quant::cpu_vec_dot_type(ty).is_some() => {
                Kernel::Rows(RowDot::with_isa(ty, isa).ok()?)
            }
            _ if ingot_quant::can_vec_dot_q8_1(ty) => Kernel::Q8_1,
            _ => return None,
        })
    }

    fn act_kind(self) -> ActKind {
        match self {
            Kernel::Float => ActKind::F32,
            Kernel::Q8_1 => ActKind::Q8_1,
            Kernel::Rows(d) if d.act_type() == GgmlType::Q8K => ActKind::Q8K,
            Kernel::Rows(_) => ActKind::Q8_0,
        }
    }
}

/// A row-major matrix of any supported weight type: `rows` rows of `cols` elements, viewed in
/// place (`row_bytes` bytes each), or packed eight rows at a time where the dot products gain
/// from it ([`packed`]; the packed copy lives with the file, see `GgufFile::derived_data`).
#[derive(Clone, Copy)]
pub(super) struct QMatrix<'f> {
    info: &'f TensorInfo,
    kernel: Kernel,
    rows: usize,
    cols: usize,
    row_bytes: usize,
    /// The rows in the file's layout, or the packed groups that cover them.
    data: &'f [u8],
    packed: Option<Packed>,
}

/// Where a view's rows sit in packed groups: `data` starts at a group boundary, and the view's
/// first row is row `skip` (`< 8`) of that group.
#[derive(Clone, Copy)]
struct Packed {
    skip: usize,
    group_bytes: usize,
}

impl<'f> QMatrix<'f> {
    /// The whole tensor as a matrix: `ne[0]` columns, all higher dimensions flattened into rows;
    /// its dot products run on `isa` (which the caller has checked the CPU supports).
    pub fn from_tensor(file: &'f GgufFile, name: &str, isa: Isa) -> Result<Self> {
        Self::map(file, name, isa, true)
    }

    /// [`QMatrix::from_tensor`] always in the file's layout: for a matrix only ever read row by
    /// row (the token embedding), which packing would copy for nothing.
    pub fn from_tensor_in_place(file: &'f GgufFile, name: &str, isa: Isa) -> Result<Self> {
        Self::map(file, name, isa, false)
    }

    /// The tensor `name` as a matrix, packed when `may_pack` and its products gain from it.
    fn map(file: &'f GgufFile, name: &str, isa: Isa, may_pack: bool) -> Result<Self> {
        let info = crate::tensors::tensor_info(file, name)?;
        let kernel = Kernel::of(info.ty, isa).ok_or_else(|| ModelError::TensorType {
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
        let mut m = QMatrix {
            info,
            kernel,
            rows,
            cols,
            row_bytes,
            data,
            packed: None,
        };
        if let Kernel::Rows(dot) = kernel {
            if may_pack && packed::packs(info.ty, dot.isa()) && rows.is_multiple_of(ROWS_PER_GROUP)
            {
                m.pack(file)?;
            }
        }
        Ok(m)
    }

    /// Points `data` at the file's packed copy of the whole tensor (built on first use).
    fn pack(&mut self, file: &'f GgufFile) -> Result<()> {
        let rows = self.rows;
        let words = |bytes: &[u8]| -> std::result::Result<Vec<u64>, ingot_quant::QuantError> {
            let n = packed::packed_blocks(bytes.len(), rows)?;
            let mut words = vec![0u64; (n * size_of::<BlockQ4Kx8>()).div_ceil(8)];
            let out =
                &mut bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..n * size_of::<BlockQ4Kx8>()];
            packed::pack_q4k_into(bytes, rows, bytemuck::cast_slice_mut(out))?;
            Ok(words)
        };
        let data = file
            .derived_data(self.info, packed::Q4K_X8_LAYOUT, words)
            .map_err(|e| self.quant_error(e))?;
        if let Some(data) = data {
            self.data = &data[..self.rows / ROWS_PER_GROUP * self.group_bytes()];
            self.packed = Some(Packed {
                skip: 0,
                group_bytes: self.group_bytes(),
            });
        }
        Ok(())
    }

    /// Whether the rows are packed (tests check that the packed path ran).
    #[cfg(test)]
    pub fn is_packed(&self) -> bool {
        self.packed.is_some()
    }

    /// Bytes of eight packed rows.
    fn group_bytes(&self) -> usize {
        self.row_bytes / size_of::<ingot_abi::blocks::BlockQ4K>() * size_of::<BlockQ4Kx8>()
    }

    pub fn rows(&self) -> usize {
        self.rows
    }

    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The activation format this matrix's products consume.
    pub fn act_kind(&self) -> ActKind {
        self.kernel.act_kind()
    }

    /// Slab `i` of `n` equal slabs along the rows (one expert of a stacked tensor, one head of
    /// `attn_k_b`).
    pub fn slab(&self, i: usize, n: usize) -> Self {
        let rows = self.rows / n;
        self.row_range(i * rows, rows)
    }

    /// Rows `start..start + count`.
    pub fn row_range(&self, start: usize, count: usize) -> Self {
        if let Some(p) = self.packed {
            let (first, end) = (p.skip + start, p.skip + start + count);
            let groups = first / ROWS_PER_GROUP..end.div_ceil(ROWS_PER_GROUP);
            return QMatrix {
                rows: count,
                data: &self.data[groups.start * p.group_bytes..groups.end * p.group_bytes],
                packed: Some(Packed {
                    skip: first % ROWS_PER_GROUP,
                    ..p
                }),
                ..*self
            };
        }
        QMatrix {
            rows: count,
            data: &self.data[start * self.row_bytes..(start + count) * self.row_bytes],
            ..*self
        }
    }

    pub fn dequantize_row(&self, r: usize, out: &mut [f32]) -> Result<()> {
        let out = &mut out[..self.cols];
        if let Some(p) = self.packed {
            let (g, lane) = ((p.skip + r) / ROWS_PER_GROUP, (p.skip + r) % ROWS_PER_GROUP);
            let group = self.groups(g * p.group_bytes..(g + 1) * p.group_bytes)?;
            packed::dequantize_row(group, lane, out);
            return Ok(());
        }
        let row = &self.data[r * self.row_bytes..(r + 1) * self.row_bytes];
        dequantize_into(self.info, row, out)
    }

    /// Packed groups in `range` of `data`.
    fn groups(&self, range: std::ops::Range<usize>) -> Result<&'f [BlockQ4Kx8]> {
        bytemuck::try_cast_slice(&self.data[range]).map_err(|e| self.quant_error(e))
    }

    /// `out[t·n + i] = W[first + i]·acts[t]` on the packed rows, `n = out.len() / acts.len()`:
    /// straight into `out` when the rows are whole groups, else through whole groups' results.
    fn dot_packed(
        &self,
        p: Packed,
        dot: RowDot,
        first: usize,
        acts: &[&[BlockQ8K]],
        out: &mut [f32],
    ) -> Result<()> {
        let n = out.len() / acts.len().max(1);
        let start = p.skip + first;
        let groups = start / ROWS_PER_GROUP..(start + n).div_ceil(ROWS_PER_GROUP);
        let packed = self.groups(groups.start * p.group_bytes..groups.end * p.group_bytes)?;
        if start.is_multiple_of(ROWS_PER_GROUP) && n.is_multiple_of(ROWS_PER_GROUP) {
            return dot
                .q8_k_x8(packed, acts, out)
                .map_err(|e| self.quant_error(e));
        }
        let m = groups.len() * ROWS_PER_GROUP;
        let mut all = vec![0.0; m * acts.len()];
        dot.q8_k_x8(packed, acts, &mut all)
            .map_err(|e| self.quant_error(e))?;
        let skip = start - groups.start * ROWS_PER_GROUP;
        for (o, a) in out.chunks_exact_mut(n).zip(all.chunks_exact(m)) {
            o.copy_from_slice(&a[skip..skip + n]);
        }
        Ok(())
    }

    /// `out = W·x` on the calling thread.
    pub fn matvec_serial(&self, x: &mut Activation, out: &mut [f32]) -> Result<()> {
        x.prepare(self)?;
        self.dot_rows(0, x, &mut out[..self.rows])
    }

    /// `out[i] = W[first + i]·x` for a prepared `x` (see [`Activation::prepare`]); `first +
    /// out.len()` must not exceed the rows.
    pub fn dot_rows(&self, first: usize, x: &Activation, out: &mut [f32]) -> Result<()> {
        if let (Some(p), Kernel::Rows(dot)) = (self.packed, self.kernel) {
            return self.dot_packed(p, dot, first, &[&x.q8k], out);
        }
        let rows = &self.data[first * self.row_bytes..(first + out.len()) * self.row_bytes];
        match self.kernel {
            Kernel::Rows(dot) => match dot.act_type() {
                GgmlType::Q8K => dot.q8_k(rows, &x.q8k, out),
                _ => dot.q8_0(rows, &x.q8_0, out),
            }
            .map_err(|e| self.quant_error(e)),
            Kernel::Float => {
                let ty = self.info.ty;
                for (o, row) in out.iter_mut().zip(rows.chunks_exact(self.row_bytes)) {
                    *o = dot_float_row(ty, row, &x.values[..x.len]);
                }
                Ok(())
            }
            Kernel::Q8_1 => {
                for (o, row) in out.iter_mut().zip(rows.chunks_exact(self.row_bytes)) {
                    *o = ingot_quant::vec_dot_q8_1(self.info.ty, row, &x.q8_1)
                        .map_err(|e| self.quant_error(e))?;
                }
                Ok(())
            }
        }
    }

    /// `out[i·n + r] = W[first + r]·xs[i]` for `n = out.len() / xs.len()` rows and every prepared
    /// input in `xs` (token-major): [`QMatrix::dot_rows`] for several inputs, with the same bits,
    /// sharing the weight unpacking across inputs where the dot product can (on AVX2: the k-quants
    /// Q2_K…Q6_K with q8_K inputs; Q4_0, Q5_0, Q8_0 and IQ4_NL with q8_0 inputs).
    pub fn dot_rows_multi(&self, first: usize, xs: &[&Activation], out: &mut [f32]) -> Result<()> {
        if xs.is_empty() {
            return Ok(());
        }
        let n = out.len() / xs.len();
        if let (Some(p), Kernel::Rows(dot)) = (self.packed, self.kernel) {
            let acts: Vec<&[BlockQ8K]> = xs.iter().map(|x| x.q8k.as_slice()).collect();
            return self.dot_packed(p, dot, first, &acts, out);
        }
        if let Kernel::Rows(dot) = self.kernel {
            let rows = &self.data[first * self.row_bytes..(first + n) * self.row_bytes];
            return match dot.act_type() {
                GgmlType::Q8K => {
                    let acts: Vec<&[BlockQ8K]> = xs.iter().map(|x| x.q8k.as_slice()).collect();
                    dot.q8_k_multi(rows, &acts, out)
                }
                _ => {
                    let acts: Vec<&[BlockQ8_0]> = xs.iter().map(|x| x.q8_0.as_slice()).collect();
                    dot.q8_0_multi(rows, &acts, out)
                }
            }
            .map_err(|e| self.quant_error(e));
        }
        for (x, o) in xs.iter().zip(out.chunks_exact_mut(n)) {
            self.dot_rows(first, x, o)?;
        }
        Ok(())
    }

    fn quant_error(&self, e: impl std::fmt::Display) -> ModelError {
        ModelError::Quant {
            name: self.info.name.clone(),
            reason: e.to_string(),
        }
    }

    pub fn name(&self) -> &str {
        &self.info.name
    }
}

/// Dot product of a float-typed row with f32 activations.
fn dot_float_row(ty: GgmlType, row: &[u8], x: &[f32]) -> f32 {
    match ty {
        GgmlType::F32 => match bytemuck::try_cast_slice::<u8, f32>(row) {
            Ok(w) => dot_f32(w, x),
            // Tensor data is 32-byte aligned in GGUF; an unaligned view only arises from a
            // malformed offset.
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

    /// Makes the form `kind` that `m` consumes available, quantizing if needed; refuses an input
    /// whose length is not `m`'s row width.
    pub fn prepare(&mut self, m: &QMatrix<'_>) -> Result<()> {
        if self.len != m.cols {
            return Err(ModelError::Quant {
                name: m.info.name.clone(),
                reason: format!("input has {} elements, rows have {}", self.len, m.cols),
            });
        }
        // `len == cols` and weight rows are whole blocks, so the input splits into whole activation
        // blocks.
        let x = &self.values[..self.len];
        let slot = match m.act_kind() {
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

/// Quantizes `x` (a whole number of `N`-element blocks) block by block into `out`, reusing its
/// allocation.
fn fill_blocks<B, const N: usize>(x: &[f32], out: &mut Vec<B>, quantize: impl Fn(&[f32; N]) -> B) {
    out.clear();
    out.extend(
        x.chunks_exact(N)
            .map(|c| quantize(c.try_into().expect("chunks_exact yields N elements"))),
    );
}
