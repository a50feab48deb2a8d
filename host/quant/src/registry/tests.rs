//! The registry's invariants (module docs), each a check run on every row and once on a row
//! broken on purpose, to show the check catches it.

use super::*;
use crate::{dequantize_row, quantize_or_stand_in, quantize_q8_0, quantize_q8_k};
use bytemuck::{Pod, Zeroable};

/// Deterministic values of RMS about 1 (a sum of four uniforms, centred and scaled).
fn values(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut uniform = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32
    };
    (0..n)
        .map(|_| ((0..4).map(|_| uniform()).sum::<f32>() - 2.0) * 3f32.sqrt())
        .collect()
}

/// A row's geometry against ggml's: weights per block and bytes per block.
fn check_geometry(r: &CpuType) -> Result<(), String> {
    let ggml = (r.ty.block_size() as usize, r.ty.type_size() as usize);
    if (r.block_elems, r.block_bytes) != ggml {
        return Err(format!(
            "{}: row says {} weights in {} bytes, ggml {ggml:?}",
            r.ty, r.block_elems, r.block_bytes
        ));
    }
    Ok(())
}

/// A block type's impl against its row's type.
fn check_block<B: CpuBlock<QK>, const QK: usize>() -> Result<(), String> {
    check_geometry(&CpuType {
        ty: B::TYPE,
        block_elems: QK,
        block_bytes: size_of::<B>(),
        quantize: B::QUANTIZE.is_some(),
        dot_act: None,
        q8_1_dot: false,
    })
}

/// rms(dequantize(quantize(x)) − x) / rms(x) for the blocks of `B` (`None`: no quantizer).
fn round_trip_error<B: CpuBlock<QK>, const QK: usize>() -> Option<f64> {
    let quantize = B::QUANTIZE?;
    let x = values(B::TYPE.id().into(), 8 * QK);
    let (mut err, mut sig) = (0.0f64, 0.0f64);
    for xb in x.chunks_exact(QK) {
        let xb: &[f32; QK] = xb.try_into().ok()?;
        let mut y = [0.0f32; QK];
        quantize(xb).dequantize(&mut y);
        for (a, b) in xb.iter().zip(&y) {
            err += f64::from(a - b).powi(2);
            sig += f64::from(*a).powi(2);
        }
    }
    Some((err / sig).sqrt())
}

/// `B::dot` against the f64 dot of the dequantized blocks, over a few blocks of `B` (from the
/// quantizer, or stand-ins) and activations from the crate's activation quantizers.
fn check_dot<B: CpuDot<QK, Act = A>, A: ActBlock, const QK: usize>(
    ty: GgmlType,
) -> Result<(), String> {
    let n = 4 * QK;
    let (x, w) = (values(1 + u64::from(ty.id()), n), values(99, n));
    let mut bytes = vec![0u8; 4 * size_of::<B>()];
    quantize_or_stand_in(ty, &w, &mut bytes).map_err(|e| e.to_string())?;
    let blocks: Vec<B> = bytes
        .chunks_exact(size_of::<B>())
        .map(bytemuck::pod_read_unaligned)
        .collect();
    let (q8k, q8_0) = (quantize_q8_k(&x), quantize_q8_0(&x));
    let acts: &[A] = acts_as(&q8k[..])
        .or(acts_as(&q8_0[..]))
        .ok_or("activation type")?;
    let mut xd = vec![0.0f32; n];
    dequantize_row(A::TYPE, bytemuck::cast_slice(acts), &mut xd).map_err(|e| e.to_string())?;
    for (i, (b, a)) in blocks.iter().zip(acts).enumerate() {
        let mut wd = [0.0f32; QK];
        b.dequantize(&mut wd);
        let products = wd.iter().zip(&xd[i * QK..]).map(|(w, x)| f64::from(w * x));
        let (want, scale) = products.fold((0.0, 0.0), |(s, m), p| (s + p, m + p.abs()));
        let got = f64::from(b.dot(a));
        // f32 rounding of the scale products and of the dequantized weights: a few ulps of the
        // largest terms; a wrong formula misses by a sizeable fraction of `scale`.
        if (got - want).abs() > 1e-4 * scale + 1e-6 {
            return Err(format!("{ty} block {i}: dot {got}, dequantized {want}"));
        }
    }
    Ok(())
}

/// Runs the per-block checks on a visited row.
struct Checks(GgmlType);

impl Visit for Checks {
    type Out = Result<(), String>;
    fn block<B: CpuBlock<QK>, const QK: usize>(self) -> Self::Out {
        if B::TYPE != self.0 {
            return Err(format!("{} visits the row of {}", self.0, B::TYPE));
        }
        check_block::<B, QK>()?;
        if let Some(e) = round_trip_error::<B, QK>() {
            // The coarsest row, IQ1_M (1.75 bits per weight), errs by 0.55 on these values, Q2_K
            // by 0.29, the 4-bit rows by about 0.08; a layout or scale bug costs 1 or more.
            if e.is_nan() || e >= 0.75 {
                return Err(format!("{}: round trip error {e}", self.0));
            }
        }
        Ok(())
    }
    fn float(self, _: FloatCodec) -> Self::Out {
        Ok(())
    }
}

struct DotCheck(GgmlType);

impl VisitDot for DotCheck {
    type Out = Result<(), String>;
    fn dot<B: CpuDot<QK, Act = A>, A: ActBlock, const QK: usize>(self) -> Self::Out {
        check_dot::<B, A, QK>(self.0)
    }
}

#[test]
fn rows_match_ggml_geometry() {
    for r in CPU_TYPES {
        check_geometry(r).unwrap();
        assert_eq!(cpu_type(r.ty), Some(r), "{}: one row per type", r.ty);
    }
    let ty = GgmlType::ALL.into_iter().filter(|&t| cpu_type(t).is_some());
    assert_eq!(ty.count(), CPU_TYPES.len());
}

#[test]
fn quantizers_round_trip() {
    for r in CPU_TYPES {
        visit(r.ty, Checks(r.ty)).unwrap().unwrap();
        let has_quantizer = visit(r.ty, HasQuantizer).unwrap();
        assert_eq!(has_quantizer, r.quantize, "{}", r.ty);
    }
}

struct HasQuantizer;

impl Visit for HasQuantizer {
    type Out = bool;
    fn block<B: CpuBlock<QK>, const QK: usize>(self) -> bool {
        B::QUANTIZE.is_some()
    }
    fn float(self, _: FloatCodec) -> bool {
        true
    }
}

#[test]
fn dots_match_dequantized_blocks() {
    for r in CPU_TYPES {
        let checked = visit_dot(r.ty, DotCheck(r.ty));
        assert_eq!(checked.is_some(), r.dot_act.is_some(), "{}", r.ty);
        checked.unwrap_or(Ok(())).unwrap();
    }
}

/// Q4_0 blocks filed under another type, dotted as IQ4_NL (same layout, other levels).
#[derive(Clone, Copy, Pod, Zeroable)]
#[repr(transparent)]
struct Misfiled(BlockQ4_0);

impl CpuBlock<32> for Misfiled {
    const TYPE: GgmlType = GgmlType::Q4_1;
    const QUANTIZE: Option<fn(&[f32; 32]) -> Self> = Some(|x| Misfiled(crate::q4_0::quantize(x)));
    fn dequantize(&self, y: &mut [f32; 32]) {
        crate::q4_0::dequantize(&self.0, y)
    }
}

impl CpuDot<32> for Misfiled {
    type Act = BlockQ8_0;
    fn dot(&self, y: &BlockQ8_0) -> f32 {
        crate::cpu_dot::iq4_nl(bytemuck::cast_ref(&self.0), y)
    }
}

#[test]
fn checks_catch_a_broken_row() {
    // Q4_0's 18-byte blocks under Q4_1 (20 bytes).
    assert!(check_block::<Misfiled, 32>().is_err());
    assert!(check_block::<BlockQ4_0, 32>().is_ok());
    // Q4_0 weights with IQ4_NL's dot (bytes of the Q4_0 row, so the quantizer is Q4_0's).
    assert!(check_dot::<Misfiled, BlockQ8_0, 32>(GgmlType::Q4_0).is_err());
    assert!(check_dot::<BlockQ4_0, BlockQ8_0, 32>(GgmlType::Q4_0).is_ok());
    let mut bad = *cpu_type(GgmlType::Q8_0).unwrap();
    bad.block_bytes += 2;
    assert!(check_geometry(&bad).is_err());
}
