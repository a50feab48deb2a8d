//! Hostile input never panics: arbitrary bytes for every block type, non-finite floats for
//! every quantizer. (Results may be NaN or meaningless; the contract is "no panic, no hang".)
//! Tests run with overflow checks on, so an arithmetic overflow would fail here too.

use ingot_gguf::GgmlType;
use ingot_quant::{
    can_dequantize, can_quantize, can_vec_dot_q8_1, cpu_vec_dot_type, dequantize_row,
    quantize_q8_0, quantize_q8_1, quantize_q8_k, quantize_row, vec_dot_q8_0, vec_dot_q8_1,
    vec_dot_q8_k,
};

fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut s = seed | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 24) as u8
        })
        .collect()
}

#[test]
fn arbitrary_bytes_dequantize_and_dot_without_panic() {
    let act_x: Vec<f32> = (0..512).map(|i| (i as f32 * 0.37).sin()).collect();
    let (a1, ak, a0) = (
        quantize_q8_1(&act_x),
        quantize_q8_k(&act_x),
        quantize_q8_0(&act_x),
    );
    for ty in GgmlType::ALL {
        let (bs, ts) = (ty.block_size() as usize, ty.type_size() as usize);
        // Every ggml block size (1, 32, 64, 128, 256) divides 512.
        assert_eq!(512 % bs, 0, "{ty}");
        let data = bytes(ty.id().into(), 512 / bs * ts);
        let mut out = vec![0.0f32; 512];
        assert_eq!(
            dequantize_row(ty, &data, &mut out).is_ok(),
            can_dequantize(ty),
            "{ty}"
        );
        assert_eq!(
            vec_dot_q8_1(ty, &data, &a1).is_ok(),
            can_vec_dot_q8_1(ty),
            "{ty}"
        );
        let k = vec_dot_q8_k(ty, &data, &ak).is_ok();
        assert_eq!(k, cpu_vec_dot_type(ty) == Some(GgmlType::Q8K), "{ty}");
        let z = vec_dot_q8_0(ty, &data, &a0).is_ok();
        assert_eq!(z, cpu_vec_dot_type(ty) == Some(GgmlType::Q8_0), "{ty}");
    }
}

#[test]
fn non_finite_input_quantizes_without_panic() {
    let specials = [
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN_POSITIVE,
    ];
    for (k, &v) in specials.iter().enumerate() {
        // One special value among ordinary ones, and a block made only of it.
        let mut x: Vec<f32> = (0..512).map(|i| (i as f32 * 0.1).cos()).collect();
        x[k * 7] = v;
        x[256..].fill(v);
        for ty in GgmlType::ALL.into_iter().filter(|&t| can_quantize(t)) {
            let bs = ty.block_size() as usize;
            let mut q = vec![0u8; 512 / bs * ty.type_size() as usize];
            quantize_row(ty, &x, &mut q).unwrap();
        }
        let _ = (quantize_q8_1(&x), quantize_q8_k(&x), quantize_q8_0(&x));
    }
}
