//! Host-only checks: the launch table matches the committed PTX, and the checked launchers turn
//! bad shapes and undersized buffers into typed errors without launching.

mod support;

use ingot_abi::launch::{QuantizeQ8_1Args, RmsnormArgs, QUANTIZE_Q8_1};
use ingot_kernels::{all_kernels, ops, KernelError, ParamKind, PTX};
use support::recorder::Recorder;

/// Parameter types of `.entry name(...)` in the PTX, in order.
fn ptx_params(name: &str) -> Option<Vec<String>> {
    let start = PTX.find(&format!(".entry {name}("))?;
    let body = &PTX[start..];
    let end = body.find(')')?;
    Some(
        body[..end]
            .lines()
            .skip(1)
            .filter_map(|l| l.trim().strip_prefix(".param "))
            .map(|l| l.split_whitespace().next().unwrap_or("").to_owned())
            .collect(),
    )
}

#[test]
fn every_table_kernel_is_in_the_ptx_with_matching_params() {
    for k in all_kernels() {
        let params = ptx_params(k.name).unwrap_or_else(|| panic!("{} missing from PTX", k.name));
        let want: Vec<&str> = k
            .params
            .iter()
            .map(|p| match p.kind {
                ParamKind::Ptr | ParamKind::U64 => ".u64",
                ParamKind::U32 => ".u32",
                ParamKind::I32 => ".s32",
                ParamKind::F32 => ".f32",
            })
            .collect();
        assert_eq!(params, want, "parameter types of {}", k.name);
    }
    let entries = PTX.matches(".visible .entry ").count();
    assert_eq!(
        entries,
        all_kernels().count(),
        "PTX entries vs launch table"
    );
}

#[test]
fn valid_shapes_launch_with_the_table_grid() {
    let mut r = Recorder::default();
    ops::gemv_q4k_q8_1(&mut r, &(37 * 8 * 144), &(64 * 36), &(37 * 4), 37, 2048).unwrap();
    ops::quantize_q8_1(&mut r, &(1184 * 4), &(37 * 36), 1184).unwrap();
    ops::rmsnorm_f32(
        &mut r,
        &(3 * 2048 * 4),
        &(2048 * 4),
        &(3 * 2048 * 4),
        3,
        2048,
        1e-6,
    )
    .unwrap();
    // 37 rows of 2048 Q4_K weights: 32 rows per block of 8 warps (4 passes of one row each).
    assert_eq!(
        r.launches[0],
        ("gemv_q4k_q8_1".into(), [2, 1, 1], [256, 1, 1])
    );
    assert_eq!(
        r.launches[1],
        ("quantize_q8_1".into(), [2, 1, 1], [256, 1, 1])
    );
    assert_eq!(
        r.launches[2],
        ("rmsnorm_f32".into(), [3, 1, 1], [256, 1, 1])
    );
    // 100 rows x 130 tokens of 2048 Q6_K weights: 2 row tiles x 3 token tiles of 64.
    ops::mmq::mmq(
        &mut r,
        ingot_abi::weight_types::GemvType::Q6K,
        (&(100 * 8 * 210), &(130 * 64 * 36), &(130 * 100 * 4)),
        100,
        2048,
        130,
    )
    .unwrap();
    assert_eq!(r.launches[3], ("mmq_q6k".into(), [6, 1, 1], [256, 1, 1]));
}

/// A typed launch passes its struct's fields in the descriptor's parameter order, each as its
/// parameter's kind.
#[test]
fn typed_arguments_reach_the_backend_in_parameter_order() {
    let mut r = Recorder::default();
    let (x, w, y) = (&(2 * 64 * 4), &(64 * 4), &(2 * 64 * 4));
    let args = RmsnormArgs {
        x,
        w,
        y,
        n: 64,
        eps: 0.5,
    };
    ops::launch(&mut r, &ingot_abi::launch::RMSNORM_F32, 2, args).unwrap();
    let kinds: Vec<ParamKind> = ingot_abi::launch::RMSNORM_F32
        .params
        .iter()
        .map(|p| p.kind)
        .collect();
    let got: Vec<ParamKind> = r.args[0].iter().map(|a| a.0).collect();
    assert_eq!(got, kinds);
    let values: Vec<u64> = r.args[0].iter().map(|a| a.1).collect();
    assert_eq!(values, [512, 256, 512, 64, u64::from(0.5f32.to_bits())]);
}

#[test]
fn bad_input_is_a_typed_error_and_launches_nothing() {
    let mut r = Recorder::default();
    let e = ops::gemv_q3k_q8_1(&mut r, &1_000_000, &10_000, &100, 4, 300).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let e = ops::gemv_q3k_q8_1(&mut r, &(4 * 110 - 1), &(8 * 36), &16, 4, 256).unwrap_err();
    assert!(
        matches!(
            e,
            KernelError::BufferTooSmall {
                param: "w",
                have: 439,
                need: 440,
                ..
            }
        ),
        "{e}"
    );
    let e = ops::mmq::mmq(
        &mut r,
        ingot_abi::weight_types::GemvType::Q4K,
        (&1_000_000, &100_000, &100_000),
        4,
        300,
        2,
    )
    .unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let e = ops::mmq::mmq(
        &mut r,
        ingot_abi::weight_types::GemvType::Q4K,
        (&(4 * 144), &(2 * 8 * 36), &(2 * 4 * 4 - 1)),
        4,
        256,
        2,
    )
    .unwrap_err();
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "y", .. }),
        "{e}"
    );
    let e = ops::quantize_q8_1(&mut r, &128, &36, 0).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let e = ops::quantize_q8_1(&mut r, &(1 << 20), &36, 64).unwrap_err();
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "y", .. }),
        "{e}"
    );
    let e = ops::rmsnorm_f32(&mut r, &64, &64, &64, 1, 16, f32::NAN).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    // rows·n·4 overflows usize: reported, not wrapped into a small size.
    let e = ops::rmsnorm_f32(&mut r, &64, &64, &64, usize::MAX / 2, 16, 1e-6).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    let args = QuantizeQ8_1Args {
        x: &128,
        y: &36,
        n: 32,
    };
    let e = ops::launch(&mut r, &QUANTIZE_Q8_1, 0, args).unwrap_err();
    assert!(matches!(e, KernelError::Shape { .. }), "{e}");
    assert!(
        r.launches.is_empty(),
        "nothing may launch: {:?}",
        r.launches
    );
}
