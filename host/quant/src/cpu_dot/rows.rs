//! Whole-row dot products: many weight rows against one quantized activation vector, with the
//! block kernels chosen once for the running CPU. This is the CPU matrix-vector product's inner
//! loop; [`crate::vec_dot_q8_k`] / [`crate::vec_dot_q8_0`] remain the one-row scalar reference.

use core::mem::size_of;

use bytemuck::Pod;
use ingot_abi::blocks::{BlockQ8K, BlockQ8_0};
use ingot_gguf::GgmlType;

use super::prefetch::prefetch;
use crate::error::QuantError;
use crate::registry::{self, acts_as, ActBlock, CpuDot, VisitDot};

pub use super::isa::Isa;

/// Dot products of rows of one weight type with its CPU activation type (Q8_K for k-quants, IQ4_XS
/// and the IQ1/IQ2/IQ3 grid types, Q8_0 for Q4_0/Q5_0/Q8_0/IQ4_NL), on a fixed instruction set.
/// Each row's result is bit-identical to [`crate::vec_dot_q8_k`] / [`crate::vec_dot_q8_0`] on that
/// row, whatever the instruction set (Q6_K and the multi-activation Q3_K, like the mins of
/// Q2_K/Q4_K/Q5_K, take `Σq` per 16 activations from `bsums`, so activations must come from
/// [`crate::quantize_q8_k`] or be equally consistent).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowDot {
    ty: GgmlType,
    isa: Isa,
}

impl RowDot {
    /// The kernels for `ty` on the fastest instruction set of this CPU.
    pub fn new(ty: GgmlType) -> Result<Self, QuantError> {
        Self::with_isa(ty, Isa::detect())
    }

    /// The kernels for `ty` on `isa`; refused when `ty` has no CPU dot product or the CPU
    /// lacks `isa`.
    pub fn with_isa(ty: GgmlType, isa: Isa) -> Result<Self, QuantError> {
        if cpu_dot_type(ty).is_none() {
            return Err(QuantError::Unsupported {
                ty,
                op: "the CPU row dot product",
            });
        }
        if !isa.is_available() {
            return Err(QuantError::Unsupported {
                ty,
                op: match isa {
                    Isa::AvxVnni => "AVX-VNNI dot products (this CPU lacks AVX2, F16C or AVX-VNNI)",
                    Isa::Avx512 => "AVX-512 VNNI dot products (this CPU lacks AVX2, F16C, AVX-512 F/BW/VL or VNNI)",
                    _ => "AVX2 dot products (this CPU lacks AVX2 or F16C)",
                },
            });
        }
        Ok(RowDot { ty, isa })
    }

    /// The weight type.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// The instruction set the kernels run on.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The activation type the rows are dotted with: Q8_K ([`RowDot::q8_k`]) or Q8_0
    /// ([`RowDot::q8_0`]).
    pub fn act_type(&self) -> GgmlType {
        cpu_dot_type(self.ty).unwrap_or(GgmlType::Q8K)
    }

    /// `out[r] = row r · act` for `out.len()` consecutive rows in `rows`, each as many blocks as
    /// `act` (one Q8_K block per 256 weights).
    pub fn q8_k(&self, rows: &[u8], act: &[BlockQ8K], out: &mut [f32]) -> Result<(), QuantError> {
        self.check(GgmlType::Q8K, rows.len(), act.len(), out.len())?;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a RowDot on a SIMD instruction set exists only after `with_isa` saw AVX2 and
        // F16C.
        if self.isa != Isa::Scalar && unsafe { avx2_rows::q8_k(self.ty, rows, act, out) } {
            return Ok(());
        }
        self.scalar(rows, act, out)
    }

    /// `out[t·n + r] = row r · acts[t]` for `n = out.len() / acts.len()` consecutive rows in `rows`
    /// and every activation in `acts` (token-major): [`RowDot::q8_k`] for several inputs, with the
    /// same bits. The k-quants Q2_K…Q6_K on AVX2 unpack each weight block once for several inputs;
    /// other types run the rows once per input (from cache, when the caller keeps `rows` small).
    pub fn q8_k_multi(
        &self,
        rows: &[u8],
        acts: &[&[BlockQ8K]],
        out: &mut [f32],
    ) -> Result<(), QuantError> {
        let Some(n) = self.check_multi(GgmlType::Q8K, rows.len(), acts, out.len())? else {
            return Ok(());
        };
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a RowDot on a SIMD instruction set exists only after `with_isa` saw AVX2 and
        // F16C.
        if self.isa == Isa::Avx512
            && unsafe { avx2_rows::q8_k_multi_avx512(self.ty, rows, acts, out) }
        {
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: an `Isa::AvxVnni` RowDot exists only after `with_isa` saw AVX2, F16C and
        // AVX-VNNI.
        if self.isa == Isa::AvxVnni
            && unsafe { avx2_rows::q8_k_multi_vnni(self.ty, rows, acts, out) }
        {
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        if self.isa != Isa::Scalar && unsafe { avx2_rows::q8_k_multi(self.ty, rows, acts, out) } {
            return Ok(());
        }
        for (a, o) in acts.iter().zip(out.chunks_exact_mut(n)) {
            self.q8_k(rows, a, o)?;
        }
        Ok(())
    }

    /// `out[r] = row r · act` for `out.len()` consecutive rows in `rows`, each as many blocks as
    /// `act` (one Q8_0 block per 32 weights).
    pub fn q8_0(&self, rows: &[u8], act: &[BlockQ8_0], out: &mut [f32]) -> Result<(), QuantError> {
        self.check(GgmlType::Q8_0, rows.len(), act.len(), out.len())?;
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a RowDot on a SIMD instruction set exists only after `with_isa` saw AVX2 and
        // F16C.
        if self.isa != Isa::Scalar && unsafe { avx2_rows::q8_0(self.ty, rows, act, out) } {
            return Ok(());
        }
        self.scalar(rows, act, out)
    }

    /// `out[t·n + r] = row r · acts[t]` for `n = out.len() / acts.len()` consecutive rows in `rows`
    /// and every activation in `acts` (token-major): [`RowDot::q8_0`] for several inputs, with the
    /// same bits. On AVX2 every Q8_0-activation type unpacks each weight block once for several
    /// inputs; unaligned rows and the scalar instruction set run the rows once per input.
    pub fn q8_0_multi(
        &self,
        rows: &[u8],
        acts: &[&[BlockQ8_0]],
        out: &mut [f32],
    ) -> Result<(), QuantError> {
        let Some(n) = self.check_multi(GgmlType::Q8_0, rows.len(), acts, out.len())? else {
            return Ok(());
        };
        #[cfg(target_arch = "x86_64")]
        // SAFETY: an `Isa::Avx512` RowDot exists only after `with_isa` saw AVX2, F16C and AVX-512
        // F/BW/VL/VNNI.
        if self.isa == Isa::Avx512
            && unsafe { avx2_rows::q8_0_multi_avx512(self.ty, rows, acts, out) }
        {
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: an `Isa::AvxVnni` RowDot exists only after `with_isa` saw AVX2, F16C and
        // AVX-VNNI.
        if self.isa == Isa::AvxVnni
            && unsafe { avx2_rows::q8_0_multi_vnni(self.ty, rows, acts, out) }
        {
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: as above.
        if self.isa != Isa::Scalar && unsafe { avx2_rows::q8_0_multi(self.ty, rows, acts, out) } {
            return Ok(());
        }
        for (a, o) in acts.iter().zip(out.chunks_exact_mut(n)) {
            self.q8_0(rows, a, o)?;
        }
        Ok(())
    }

    /// The scalar row loop of the type's registry row ([`each_row`] over its `CpuDot::dot`), for
    /// instruction sets or types without a SIMD kernel; lengths checked by the caller.
    fn scalar<A: ActBlock>(
        &self,
        rows: &[u8],
        act: &[A],
        out: &mut [f32],
    ) -> Result<(), QuantError> {
        match registry::visit_dot(self.ty, EachRow { rows, act, out }) {
            Some(true) => Ok(()),
            _ => Err(QuantError::Unsupported {
                ty: self.ty,
                op: "the CPU row dot product",
            }),
        }
    }

    /// The checks of the multi-activation products: every activation against `rows_len` bytes of
    /// `n` rows, and `out_len` exactly `n` per activation. Returns `n`, or `None` for no
    /// activations (nothing to write).
    fn check_multi<A>(
        &self,
        act_ty: GgmlType,
        rows_len: usize,
        acts: &[&[A]],
        out_len: usize,
    ) -> Result<Option<usize>, QuantError> {
        if acts.is_empty() {
            return Ok(None);
        }
        let n = out_len / acts.len();
        for a in acts {
            self.check(act_ty, rows_len, a.len(), n)?;
        }
        if out_len != n * acts.len() {
            return Err(QuantError::ByteLength {
                ty: self.ty,
                elements: out_len,
                expected: n * acts.len(),
                actual: out_len,
            });
        }
        Ok(Some(n))
    }

    /// Checks the activation type and that `rows_len` bytes are exactly `out_len` rows of
    /// `act_len` blocks (every supported weight block spans exactly one activation block).
    fn check(
        &self,
        act_ty: GgmlType,
        rows_len: usize,
        act_len: usize,
        out_len: usize,
    ) -> Result<(), QuantError> {
        if cpu_dot_type(self.ty) != Some(act_ty) {
            return Err(QuantError::Unsupported {
                ty: self.ty,
                op: if act_ty == GgmlType::Q8K {
                    "the q8_K row dot product"
                } else {
                    "the q8_0 row dot product"
                },
            });
        }
        let (bs, ts) = (self.ty.block_size() as usize, self.ty.type_size() as usize);
        let expected = act_len.checked_mul(ts).and_then(|b| b.checked_mul(out_len));
        if expected != Some(rows_len) {
            return Err(QuantError::ByteLength {
                ty: self.ty,
                elements: act_len.saturating_mul(bs).saturating_mul(out_len),
                expected: expected.unwrap_or(usize::MAX),
                actual: rows_len,
            });
        }
        Ok(())
    }
}

/// The CPU activation type of the weight types [`RowDot`] covers.
fn cpu_dot_type(ty: GgmlType) -> Option<GgmlType> {
    crate::cpu_vec_dot_type(ty)
}

/// [`each_row`] on a row of the registry; false if the row dots with another activation type
/// than `X` (which `check` excludes).
struct EachRow<'a, X> {
    rows: &'a [u8],
    act: &'a [X],
    out: &'a mut [f32],
}

impl<X: ActBlock> VisitDot for EachRow<'_, X> {
    type Out = bool;
    fn dot<B: CpuDot<QK, Act = A>, A: ActBlock, const QK: usize>(self) -> bool {
        let Some(act) = acts_as::<X, A>(self.act) else {
            return false;
        };
        each_row::<B, A>(self.rows, act, self.out, B::dot);
        true
    }
}

/// `out[r] = Σ_i f(block i of row r, act[i])`, adding block results to 0.0 in order, as
/// [`crate::vec_dot_q8_k`] does. `data` holds `out.len()` rows of `act.len()` blocks of `B`
/// (checked by the caller); rows not aligned for `B` are read block by block.
#[inline(always)]
fn each_row<B: Pod, A>(data: &[u8], act: &[A], out: &mut [f32], f: impl Fn(&B, &A) -> f32) {
    each_row_with(data, act, out, |row, act| fold_blocks(row, act, &f), &f)
}

/// Rows ahead of the one being dotted whose bytes are requested: a row of 2048 Q4_K weights is
/// 1152 bytes, and a decode step's products are short runs of rows that the hardware prefetcher
/// picks up late, so the dot stalls on memory it could have overlapped.
const PREFETCH_ROWS: usize = 2;

/// [`each_row`] with a whole-row kernel `row` for aligned data, which must return exactly what
/// folding `block` over the row does.
#[inline(always)]
fn each_row_with<B: Pod, A>(
    data: &[u8],
    act: &[A],
    out: &mut [f32],
    row: impl Fn(&[B], &[A]) -> f32,
    block: impl Fn(&B, &A) -> f32,
) {
    if act.is_empty() {
        out.fill(0.0);
        return;
    }
    match bytemuck::try_cast_slice::<u8, B>(data) {
        Ok(blocks) => {
            let rows = blocks.chunks_exact(act.len());
            for (i, (o, r)) in out.iter_mut().zip(rows.clone()).enumerate() {
                if let Some(ahead) = rows.clone().nth(i + PREFETCH_ROWS) {
                    prefetch(bytemuck::cast_slice(ahead));
                }
                *o = row(r, act);
            }
        }
        Err(_) => {
            for (o, r) in out
                .iter_mut()
                .zip(data.chunks_exact(act.len() * size_of::<B>()))
            {
                *o = r
                    .chunks_exact(size_of::<B>())
                    .zip(act)
                    .fold(0.0f32, |s, (c, y)| {
                        s + block(&bytemuck::pod_read_unaligned::<B>(c), y)
                    });
            }
        }
    }
}

/// `Σ_i f(row[i], act[i])` added to 0.0 in order.
#[inline(always)]
fn fold_blocks<B, A>(row: &[B], act: &[A], f: impl Fn(&B, &A) -> f32) -> f32 {
    row.iter().zip(act).fold(0.0f32, |s, (x, y)| s + f(x, y))
}

/// The AVX2 instantiations of [`each_row`]: one `#[target_feature]` function per activation
/// type, so the block kernels inline into the row loop. Each returns whether `ty` has an AVX2
/// kernel (and so whether `out` was written).
#[cfg(target_arch = "x86_64")]
mod avx2_rows {
    use super::*;
    use crate::cpu_dot::avx2;
    use crate::cpu_dot::avx2::interleaved::Interleaved;
    use crate::cpu_dot::avx2::{avx512, interleaved, interleaved_k, krows, tiles, vnni};
    use ingot_abi::blocks::{
        BlockIq1M, BlockIq1S, BlockIq2S, BlockIq2Xs, BlockIq2Xxs, BlockIq3S, BlockIq3Xxs,
        BlockIq4Nl, BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ5_0,
        BlockQ6K,
    };

    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn q8_k(ty: GgmlType, rows: &[u8], act: &[BlockQ8K], out: &mut [f32]) -> bool {
        match ty {
            GgmlType::Q2K => each_row::<BlockQ2K, _>(rows, act, out, |x, y| avx2::q2_k(x, y)),
            GgmlType::Q3K => each_row::<BlockQ3K, _>(rows, act, out, |x, y| avx2::q3_k(x, y)),
            GgmlType::Q4K => each_row_with::<BlockQ4K, _>(
                rows,
                act,
                out,
                |r, a| krows::q4_k_row(r, a),
                |x, y| avx2::q4_k(x, y),
            ),
            GgmlType::Q5K => each_row_with::<BlockQ5K, _>(
                rows,
                act,
                out,
                |r, a| krows::q5_k_row(r, a),
                |x, y| avx2::q5_k(x, y),
            ),
            GgmlType::Q6K => each_row_with::<BlockQ6K, _>(
                rows,
                act,
                out,
                |r, a| krows::q6_k_row(r, a),
                |x, y| avx2::q6_k(x, y),
            ),
            GgmlType::Iq4Xs => each_row::<BlockIq4Xs, _>(rows, act, out, |x, y| avx2::iq4_xs(x, y)),
            GgmlType::Iq2Xxs => {
                each_row::<BlockIq2Xxs, _>(rows, act, out, |x, y| avx2::iq2_xxs(x, y))
            }
            GgmlType::Iq2Xs => each_row::<BlockIq2Xs, _>(rows, act, out, |x, y| avx2::iq2_xs(x, y)),
            GgmlType::Iq2S => each_row::<BlockIq2S, _>(rows, act, out, |x, y| avx2::iq2_s(x, y)),
            GgmlType::Iq3Xxs => {
                each_row::<BlockIq3Xxs, _>(rows, act, out, |x, y| avx2::iq3_xxs(x, y))
            }
            GgmlType::Iq3S => each_row::<BlockIq3S, _>(rows, act, out, |x, y| avx2::iq3_s(x, y)),
            GgmlType::Iq1S => each_row::<BlockIq1S, _>(rows, act, out, |x, y| avx2::iq1_s(x, y)),
            GgmlType::Iq1M => each_row::<BlockIq1M, _>(rows, act, out, |x, y| avx2::iq1_m(x, y)),
            _ => return false,
        }
        true
    }

    /// [`super::RowDot::q8_k_multi`] for Q2_K, Q3_K, Q4_K, Q5_K and Q6_K: Q4_K and Q5_K in groups
    /// of eight rows interleaved across vector lanes ([`interleaved_k`]), the rows left over and
    /// the other types through kernels that share each block's unpacking among several activations.
    /// False (nothing written) for other types, unaligned rows, and Q4_K/Q5_K below their
    /// `MIN_ACTS`, which the one-activation row kernels serve faster.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn q8_k_multi(
        ty: GgmlType,
        rows: &[u8],
        acts: &[&[BlockQ8K]],
        out: &mut [f32],
    ) -> bool {
        match ty {
            GgmlType::Q2K => multi_rows::<BlockQ2K, _>(
                rows,
                acts,
                out,
                |r, ys| fold_multi(r, ys, |x, y| avx2::q2_k_multi(x, y)),
                |r, y| fold_blocks(r, y, |x, y| avx2::q2_k(x, y)),
            ),
            GgmlType::Q3K => multi_rows::<BlockQ3K, _>(
                rows,
                acts,
                out,
                |r, ys| fold_multi(r, ys, |x, y| avx2::q3_k_multi(x, y)),
                |r, y| fold_blocks(r, y, |x, y| avx2::q3_k(x, y)),
            ),
            GgmlType::Q4K => grouped::<tiles::Q4K>(
                rows,
                acts,
                out,
                interleaved_k::Q4K::MIN_ACTS,
                interleaved::rows::<interleaved_k::Q4K>,
            ),
            GgmlType::Q5K => grouped::<tiles::Q5K>(
                rows,
                acts,
                out,
                interleaved_k::Q5K::MIN_ACTS,
                interleaved::rows::<interleaved_k::Q5K>,
            ),
            GgmlType::Q6K => tiled::<tiles::Q6K>(rows, acts, out),
            _ => false,
        }
    }

    /// [`super::RowDot::q8_0_multi`] for Q4_0, Q5_0, Q8_0 and IQ4_NL: groups of eight rows
    /// interleaved across vector lanes ([`interleaved`]), the rows left over through the
    /// register-blocked kernels ([`tiles`]); Q8_0 and IQ4_NL below their
    /// [`interleaved::Interleaved::MIN_ACTS`] through the row kernels that unpack each block once
    /// for [`avx2::MULTI`] activations. Unaligned rows (and other types) return false.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn q8_0_multi(
        ty: GgmlType,
        rows: &[u8],
        acts: &[&[BlockQ8_0]],
        out: &mut [f32],
    ) -> bool {
        match ty {
            GgmlType::Q4_0 => grouped::<tiles::Q4_0>(
                rows,
                acts,
                out,
                interleaved::Q4_0::MIN_ACTS,
                interleaved::rows::<interleaved::Q4_0>,
            ),
            GgmlType::Q5_0 => grouped::<tiles::Q5_0>(
                rows,
                acts,
                out,
                interleaved::Q5_0::MIN_ACTS,
                interleaved::rows::<interleaved::Q5_0>,
            ),
            GgmlType::Q8_0 => {
                grouped::<tiles::Q8_0>(
                    rows,
                    acts,
                    out,
                    interleaved::Q8_0::MIN_ACTS,
                    interleaved::rows::<interleaved::Q8_0>,
                ) || multi_rows::<BlockQ8_0, _>(
                    rows,
                    acts,
                    out,
                    |r, ys| avx2::q8_0_row_multi(r, ys),
                    |r, y| avx2::q8_0_row(r, y),
                )
            }
            GgmlType::Iq4Nl => {
                grouped::<tiles::Iq4Nl>(
                    rows,
                    acts,
                    out,
                    interleaved::Iq4Nl::MIN_ACTS,
                    interleaved::rows::<interleaved::Iq4Nl>,
                ) || multi_rows::<BlockIq4Nl, _>(
                    rows,
                    acts,
                    out,
                    |r, ys| avx2::iq4_nl_row_multi(r, ys),
                    |r, y| avx2::iq4_nl_row(r, y),
                )
            }
            _ => false,
        }
    }

    /// The register-blocked product of `K` ([`tiles::rows`]): `out[t·n + r] = row r · acts[t]`,
    /// bit-identical to [`each_row`] per activation. False (nothing written) for rows not aligned
    /// for `K::Block`, and for a single activation, which the one-activation row kernels serve
    /// faster.
    #[inline(always)]
    fn tiled<K: tiles::Tile>(rows: &[u8], acts: &[&[K::Act]], out: &mut [f32]) -> bool {
        if acts.len() < 2 {
            return false;
        }
        let Ok(blocks) = bytemuck::try_cast_slice::<u8, K::Block>(rows) else {
            return false;
        };
        let n = out.len() / acts.len();
        // SAFETY: called only from `#[target_feature(enable = "avx2,f16c")]` functions, which
        // run after `with_isa` saw AVX2 and F16C; `check_multi` gave `acts` (not empty) equal
        // lengths and `blocks` `n` rows of them.
        unsafe { tiles::rows::<K>(blocks, acts, out, n, 0) };
        true
    }

    /// A group kernel of [`grouped`]: writes a group's rows, returns how many.
    type GroupRows<K> =
        unsafe fn(&[<K as tiles::Tile>::Block], &[&[<K as tiles::Tile>::Act]], &mut [f32]) -> usize;

    /// [`tiled`] with most rows in groups through `interleaved` (eight rows of
    /// [`interleaved::rows`] or [`vnni::rows`], sixteen of [`avx512::rows`], which return how many
    /// rows they wrote), `K` taking the rows left over; the same bits. False (nothing written) for
    /// fewer than `min_acts` activations (and at least two).
    #[inline(always)]
    fn grouped<K: tiles::Tile>(
        rows: &[u8],
        acts: &[&[K::Act]],
        out: &mut [f32],
        min_acts: usize,
        interleaved: GroupRows<K>,
    ) -> bool {
        if acts.len() < min_acts.max(2) {
            return false;
        }
        let Ok(blocks) = bytemuck::try_cast_slice::<u8, K::Block>(rows) else {
            return false;
        };
        let n = out.len() / acts.len();
        let nb = acts[0].len();
        if nb == 0 {
            out.fill(0.0);
            return true;
        }
        // SAFETY: as in `tiled`; the callers pass the interleaved kernels of an instruction set
        // they checked.
        let done = unsafe { interleaved(blocks, acts, out) };
        // SAFETY: as in `tiled`; `done` whole rows of `nb` blocks lie before the rest.
        unsafe { tiles::rows::<K>(&blocks[done * nb..], acts, out, n, done) };
        true
    }

    /// [`q8_k_multi`] with the AVX-512 sixteen-row kernels ([`avx512`]) for Q4_K and Q5_K from two
    /// activations on; otherwise false.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) fn q8_k_multi_avx512(
        ty: GgmlType,
        rows: &[u8],
        acts: &[&[BlockQ8K]],
        out: &mut [f32],
    ) -> bool {
        match ty {
            GgmlType::Q4K => grouped::<tiles::Q4K>(rows, acts, out, 2, avx512::rows::<avx512::Q4K>),
            GgmlType::Q5K => grouped::<tiles::Q5K>(rows, acts, out, 2, avx512::rows::<avx512::Q5K>),
            _ => false,
        }
    }

    /// [`q8_0_multi`] with the AVX-512 sixteen-row kernels ([`avx512`]) for Q4_0, Q5_0, Q8_0 and
    /// IQ4_NL from two activations on; otherwise false.
    #[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) fn q8_0_multi_avx512(
        ty: GgmlType,
        rows: &[u8],
        acts: &[&[BlockQ8_0]],
        out: &mut [f32],
    ) -> bool {
        match ty {
            GgmlType::Q4_0 => {
                grouped::<tiles::Q4_0>(rows, acts, out, 2, avx512::rows::<avx512::Q4_0>)
            }
            GgmlType::Q5_0 => {
                grouped::<tiles::Q5_0>(rows, acts, out, 2, avx512::rows::<avx512::Q5_0>)
            }
            GgmlType::Q8_0 => {
                grouped::<tiles::Q8_0>(rows, acts, out, 2, avx512::rows::<avx512::Q8_0>)
            }
            GgmlType::Iq4Nl => {
                grouped::<tiles::Iq4Nl>(rows, acts, out, 2, avx512::rows::<avx512::Iq4Nl>)
            }
            _ => false,
        }
    }

    /// [`q8_k_multi`] with the AVX-VNNI interleaved kernels ([`vnni`]) for Q4_K and Q5_K from two
    /// activations on; otherwise false.
    #[target_feature(enable = "avx2,f16c,avxvnni")]
    pub(super) fn q8_k_multi_vnni(
        ty: GgmlType,
        rows: &[u8],
        acts: &[&[BlockQ8K]],
        out: &mut [f32],
    ) -> bool {
        match ty {
            GgmlType::Q4K => grouped::<tiles::Q4K>(
                rows,
                acts,
                out,
                vnni::Q4K::MIN_ACTS,
                vnni::rows::<vnni::Q4K>,
            ),
            GgmlType::Q5K => grouped::<tiles::Q5K>(
                rows,
                acts,
                out,
                vnni::Q5K::MIN_ACTS,
                vnni::rows::<vnni::Q5K>,
            ),
            _ => false,
        }
    }

    /// [`q8_0_multi`] with the AVX-VNNI interleaved kernels ([`vnni`]) for Q4_0, Q5_0, Q8_0 and
    /// IQ4_NL from two activations on; otherwise false.
    #[target_feature(enable = "avx2,f16c,avxvnni")]
    pub(super) fn q8_0_multi_vnni(
        ty: GgmlType,
        rows: &[u8],
        acts: &[&[BlockQ8_0]],
        out: &mut [f32],
    ) -> bool {
        match ty {
            GgmlType::Q4_0 => grouped::<tiles::Q4_0>(
                rows,
                acts,
                out,
                vnni::Q4_0::MIN_ACTS,
                vnni::rows::<vnni::Q4_0>,
            ),
            GgmlType::Q5_0 => grouped::<tiles::Q5_0>(
                rows,
                acts,
                out,
                vnni::Q5_0::MIN_ACTS,
                vnni::rows::<vnni::Q5_0>,
            ),
            GgmlType::Q8_0 => grouped::<tiles::Q8_0>(
                rows,
                acts,
                out,
                vnni::Q8_0::MIN_ACTS,
                vnni::rows::<vnni::Q8_0>,
            ),
            GgmlType::Iq4Nl => grouped::<tiles::Iq4Nl>(
                rows,
                acts,
                out,
                vnni::Iq4Nl::MIN_ACTS,
                vnni::rows::<vnni::Iq4Nl>,
            ),
            _ => false,
        }
    }

    /// A row against [`avx2::MULTI`] activations through a block kernel `multi` that takes one
    /// block of each: each activation's block results added to 0.0 in block order, as
    /// [`fold_blocks`] adds them.
    #[inline(always)]
    fn fold_multi<B, A>(
        row: &[B],
        acts: [&[A]; avx2::MULTI],
        multi: impl Fn(&B, [&A; avx2::MULTI]) -> [f32; avx2::MULTI],
    ) -> [f32; avx2::MULTI] {
        let mut sums = [0.0f32; avx2::MULTI];
        for (b, x) in row.iter().enumerate() {
            let v = multi(x, core::array::from_fn(|i| &acts[i][b]));
            for (s, v) in sums.iter_mut().zip(v) {
                *s += v;
            }
        }
        sums
    }

    /// Per row, [`avx2::MULTI`] activations at a time through the row kernel `multi`, the rest
    /// through `single`, both of which must give [`each_row`]'s sums. False (nothing written) for
    /// rows not aligned for `B`.
    #[inline(always)]
    fn multi_rows<B: Pod, A>(
        rows: &[u8],
        acts: &[&[A]],
        out: &mut [f32],
        multi: impl Fn(&[B], [&[A]; avx2::MULTI]) -> [f32; avx2::MULTI],
        single: impl Fn(&[B], &[A]) -> f32,
    ) -> bool {
        let Ok(blocks) = bytemuck::try_cast_slice::<u8, B>(rows) else {
            return false;
        };
        let nb = acts[0].len();
        let n = out.len() / acts.len();
        if nb == 0 {
            out.fill(0.0);
            return true;
        }
        for (r, row) in blocks.chunks_exact(nb).enumerate() {
            let mut t = 0;
            while t + avx2::MULTI <= acts.len() {
                let sums = multi(row, core::array::from_fn(|i| acts[t + i]));
                for (i, s) in sums.into_iter().enumerate() {
                    out[(t + i) * n + r] = s;
                }
                t += avx2::MULTI;
            }
            for (i, a) in acts.iter().enumerate().skip(t) {
                out[i * n + r] = single(row, a);
            }
        }
        true
    }

    #[target_feature(enable = "avx2,f16c")]
    pub(super) fn q8_0(ty: GgmlType, rows: &[u8], act: &[BlockQ8_0], out: &mut [f32]) -> bool {
        match ty {
            GgmlType::Q4_0 => each_row_with::<BlockQ4_0, _>(
                rows,
                act,
                out,
                |r, a| avx2::q4_0_row(r, a),
                |x, y| avx2::q4_0(x, y),
            ),
            GgmlType::Iq4Nl => each_row_with::<BlockIq4Nl, _>(
                rows,
                act,
                out,
                |r, a| avx2::iq4_nl_row(r, a),
                |x, y| avx2::iq4_nl(x, y),
            ),
            GgmlType::Q5_0 => each_row_with::<BlockQ5_0, _>(
                rows,
                act,
                out,
                |r, a| avx2::q5_0_row(r, a),
                |x, y| avx2::q5_0(x, y),
            ),
            GgmlType::Q8_0 => each_row_with::<BlockQ8_0, _>(
                rows,
                act,
                out,
                |r, a| avx2::q8_0_row(r, a),
                |x, y| avx2::q8_0(x, y),
            ),
            _ => return false,
        }
        true
    }
}
