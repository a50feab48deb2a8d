//! The checked launchers of the gemv, embedding, norm and head families turn bad shapes and
//! undersized buffers into typed errors before anything runs.

#![cfg(feature = "sim")]

use ingot_kernels::backend::sim::SimAccelerator;
use ingot_kernels::ops::gemv::{
    gemv2_q8_1, gemv_f32, gemv_grouped_q8_1, gemv_grouped_q8_1_out, gemv_q8_1, GemvType, Grouping,
};
use ingot_kernels::ops::head::argmax_step;
use ingot_kernels::ops::norm::{rmsnorm_q8_1, rmsnorm_q8_1_f32};
use ingot_kernels::{Accelerator, KernelError};

fn sim() -> SimAccelerator {
    SimAccelerator::new().expect("ptx-sim backend")
}

fn is_shape(e: KernelError) -> bool {
    matches!(e, KernelError::Shape { .. })
}

fn is_small(e: KernelError, which: &str) -> bool {
    matches!(e, KernelError::BufferTooSmall { param, .. } if param == which)
}

#[test]
fn gemv_rejects_bad_shapes_and_buffers() {
    let mut b = sim();
    let big = b.alloc(1 << 20).expect("alloc");
    let tiny = b.alloc(16).expect("alloc");
    let bufs = (&big, &big, &big);
    // Row lengths: Q4_K needs multiples of 256, the 32-element types multiples of 32.
    assert!(is_shape(
        gemv_q8_1(&mut b, GemvType::Q4K, bufs, 4, 300).unwrap_err()
    ));
    assert!(is_shape(
        gemv_q8_1(&mut b, GemvType::Q4K, bufs, 4, 32).unwrap_err()
    ));
    assert!(is_shape(
        gemv_q8_1(&mut b, GemvType::Q8_0, bufs, 4, 48).unwrap_err()
    ));
    assert!(is_shape(
        gemv_q8_1(&mut b, GemvType::Q5_0, bufs, 4, 0).unwrap_err()
    ));
    assert!(is_shape(
        gemv_q8_1(&mut b, GemvType::Q6K, bufs, 0, 256).unwrap_err()
    ));
    // Undersized weight, activation and output buffers.
    let e = gemv_q8_1(&mut b, GemvType::Q6K, (&tiny, &big, &big), 2, 256).unwrap_err();
    assert!(is_small(e, "w"));
    let e = gemv_q8_1(&mut b, GemvType::Q6K, (&big, &tiny, &big), 2, 256).unwrap_err();
    assert!(is_small(e, "x"));
    let e = gemv_q8_1(&mut b, GemvType::Q6K, (&big, &big, &tiny), 5, 256).unwrap_err();
    assert!(is_small(e, "y"));
    // Grouped: zero rows per group; an activation buffer missing the last group's slice
    // (16 groups × stride 6 blocks + 4 blocks = 94 blocks = 3384 bytes > 3000).
    let g0 = Grouping {
        rows_per_group: 0,
        x_group_stride: 6,
    };
    assert!(is_shape(
        gemv_grouped_q8_1(&mut b, GemvType::Q5_0, bufs, 8, 128, g0).unwrap_err()
    ));
    let x = b.alloc(3000).expect("alloc");
    let g = Grouping {
        rows_per_group: 512,
        x_group_stride: 6,
    };
    let e =
        gemv_grouped_q8_1(&mut b, GemvType::Q5_0, (&big, &x, &big), 16 * 512, 128, g).unwrap_err();
    assert!(is_small(e, "x"));
    // Two matrices: each is checked on its own.
    let e = gemv2_q8_1(
        &mut b,
        GemvType::Q4K,
        (&big, &tiny),
        &big,
        (&big, &big),
        (4, 4),
        256,
    )
    .unwrap_err();
    assert!(is_small(e, "w"));
    // q8_1 epilogue: rows a multiple of 32 (one output block per thread block), and `y`
    // sized in blocks (64 rows = 2 blocks = 72 bytes > 16).
    let g1 = Grouping {
        rows_per_group: 8,
        x_group_stride: 0,
    };
    assert!(is_shape(
        gemv_grouped_q8_1_out(&mut b, GemvType::Q8_0, bufs, 48, 64, g1).unwrap_err()
    ));
    let e =
        gemv_grouped_q8_1_out(&mut b, GemvType::Q8_0, (&big, &big, &tiny), 64, 64, g1).unwrap_err();
    assert!(is_small(e, "y"));
    let e =
        gemv_grouped_q8_1_out(&mut b, GemvType::Q8_0, (&big, &tiny, &big), 64, 64, g1).unwrap_err();
    assert!(is_small(e, "x"));
    // f32: a row length that is not a multiple of 4.
    assert!(is_shape(gemv_f32(&mut b, bufs, 4, 6).unwrap_err()));
}

#[test]
fn norm_and_argmax_reject_bad_shapes() {
    let mut b = sim();
    let big = b.alloc(1 << 16).expect("alloc");
    let tiny = b.alloc(8).expect("alloc");
    let bufs = (&big, &big, &big);
    assert!(is_shape(
        rmsnorm_q8_1(&mut b, bufs, 1, 48, 1e-6).unwrap_err()
    ));
    assert!(is_shape(
        rmsnorm_q8_1(&mut b, bufs, 1, 64, f32::NAN).unwrap_err()
    ));
    let e = rmsnorm_q8_1(&mut b, (&big, &big, &tiny), 1, 64, 1e-6).unwrap_err();
    assert!(is_small(e, "y"));
    // The f32 copy: checked like the q8_1 output (64 floats = 256 bytes > 8).
    let e = rmsnorm_q8_1_f32(&mut b, (&big, &big, &big, &tiny), 1, 64, 1e-6).unwrap_err();
    assert!(is_small(e, "y_f32"));
    assert!(is_shape(
        rmsnorm_q8_1_f32(&mut b, (&big, &big, &big, &big), 1, 48, 1e-6).unwrap_err()
    ));
    assert!(is_shape(argmax_step(&mut b, &big, &big, 0).unwrap_err()));
    assert!(is_small(
        argmax_step(&mut b, &big, &tiny, 4).unwrap_err(),
        "state"
    ));
    assert!(is_small(
        argmax_step(&mut b, &tiny, &big, 4).unwrap_err(),
        "logits"
    ));
}
