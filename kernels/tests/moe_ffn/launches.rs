//! The MoE FFN launchers' refusals (shapes, buffer sizes, expert counts) and the grids they
//! launch at V2-Lite's shapes.

use super::*;

/// Bad shapes and buffers are typed errors, before anything is launched.
#[test]
fn moe_ffn_rejects_bad_launches() {
    #[cfg(feature = "sim")]
    {
        use ingot_kernels::ops::moe::expert_table;
        let mut b = ingot_kernels::backend::sim::SimAccelerator::new().expect("sim");
        let big = poisoned(&mut b, 1 << 20);
        let small = poisoned(&mut b, 64);
        let good = FfnShape {
            n_embd: 256,
            n_expert: 4,
            n_used: 2,
            ff: 64,
            ff_sh: 64,
        };
        let gu = |b: &mut ingot_kernels::backend::sim::SimAccelerator,
                  s: &FfnShape,
                  t: GemvType,
                  act| {
            moe_gate_up(
                b,
                t,
                s,
                &GateUpBufs {
                    x: &big,
                    sel: (s.n_used > 0).then_some(&big),
                    gate: (s.n_used > 0).then_some(&big),
                    up: (s.n_used > 0).then_some(&big),
                    merged: false,
                    gate_sh: (s.ff_sh > 0).then_some(&big),
                    up_sh: (s.ff_sh > 0).then_some(&big),
                    act,
                },
            )
        };
        let shape_err = |r: ingot_kernels::Result<()>, what: &str| match r {
            Err(KernelError::Shape { .. }) => {}
            other => panic!("{what}: expected a shape error, got {other:?}"),
        };
        shape_err(
            gu(&mut b, &FfnShape { ff: 48, ..good }, GemvType::Q8_0, &big),
            "ff % 32",
        );
        shape_err(
            gu(
                &mut b,
                &FfnShape {
                    n_embd: 320,
                    ..good
                },
                GemvType::Q4K,
                &big,
            ),
            "n_embd % 256",
        );
        shape_err(
            gu(
                &mut b,
                &FfnShape {
                    n_used: MAX_EXPERTS_USED + 1,
                    ..good
                },
                GemvType::Q8_0,
                &big,
            ),
            "n_used > MAX_EXPERTS_USED",
        );
        shape_err(
            gu(
                &mut b,
                &FfnShape {
                    n_used: 0,
                    ff_sh: 0,
                    ..good
                },
                GemvType::Q8_0,
                &big,
            ),
            "empty FFN",
        );
        shape_err(
            gu(
                &mut b,
                &FfnShape {
                    n_expert: 0,
                    ..good
                },
                GemvType::Q8_0,
                &big,
            ),
            "no experts",
        );
        match gu(&mut b, &good, GemvType::Q8_0, &small) {
            Err(KernelError::BufferTooSmall { param: "act", .. }) => {}
            other => panic!("short act: {other:?}"),
        }
        // A shape with routed experts but no routed buffers.
        let r = moe_gate_up(
            &mut b,
            GemvType::Q8_0,
            &good,
            &GateUpBufs {
                x: &big,
                sel: None,
                gate: None,
                up: None,
                merged: false,
                gate_sh: Some(&big),
                up_sh: Some(&big),
                act: &big,
            },
        );
        shape_err(r, "missing routed buffers");
        // A merged gate/up tensor has no separate up tensor, and is twice an expert's rows.
        let merged = |b: &mut ingot_kernels::backend::sim::SimAccelerator, gate, up| {
            moe_gate_up(
                b,
                GemvType::Q8_0,
                &good,
                &GateUpBufs {
                    x: &big,
                    sel: Some(&big),
                    gate: Some(gate),
                    up,
                    merged: true,
                    gate_sh: Some(&big),
                    up_sh: Some(&big),
                    act: &big,
                },
            )
        };
        shape_err(merged(&mut b, &big, Some(&big)), "merged with an up buffer");
        // The routed weights are expert tables: 4 experts need 32 bytes of addresses.
        let short = poisoned(&mut b, 31);
        match merged(&mut b, &short, None) {
            Err(KernelError::BufferTooSmall { param: "gate", .. }) => {}
            other => panic!("expert table of 31 bytes: {other:?}"),
        }
        // The identity table needs the stacked tensor's n_expert slabs.
        match expert_table(&mut b, &short, 4, 8) {
            Err(KernelError::BufferTooSmall {
                param: "stacked", ..
            }) => {}
            other => panic!(
                "stacked tensor of 31 bytes for 4 slabs of 8: {:?}",
                other.map(|_| ())
            ),
        }
        // Down: no kernel for this routed/shared pair; ff not a multiple of the type's unit.
        let down = |b: &mut ingot_kernels::backend::sim::SimAccelerator,
                    s: &FfnShape,
                    r: GemvType,
                    sh: GemvType| {
            moe_down(
                b,
                r,
                sh,
                s,
                &DownBufs {
                    act: &big,
                    sel: Some(&big),
                    down: Some(&big),
                    down_sh: Some(&big),
                    resid: &big,
                    y: &big,
                    norm: None,
                },
            )
        };
        shape_err(
            down(&mut b, &good, GemvType::Q4K, GemvType::Q8_0),
            "unsupported pair",
        );
        shape_err(
            down(
                &mut b,
                &FfnShape { ff: 96, ..good },
                GemvType::Q8_0,
                GemvType::Q8_0,
            ),
            "ff % 64",
        );
        shape_err(
            down(&mut b, &good, GemvType::Q4K, GemvType::Q4K),
            "ff % 256",
        );
    }
}

/// V2-Lite's MoE layer launches one gate/up block per 32 SwiGLU rows (6·1408 + 2816 rows =
/// 352 blocks of 8 warps) and one down warp per output row (2048 rows = 512 blocks of 4 warps),
/// with the kernel of the weight types.
#[test]
fn moe_ffn_launch_grids() {
    let mut r = Recorder::default();
    let s = FfnShape {
        n_embd: 2048,
        n_expert: 64,
        n_used: 6,
        ff: 1408,
        ff_sh: 2816,
    };
    // The routed weights are expert tables: 64 addresses.
    let table = 64 * 8;
    let q4k_sh = 2816 * 8 * 144;
    let act = s.act_bytes().expect("act");
    assert_eq!(act, 352 * 36);
    moe_gate_up(
        &mut r,
        GemvType::Q4K,
        &s,
        &GateUpBufs {
            x: &(64 * 36),
            sel: Some(&size_of::<ExpertSelection>()),
            gate: Some(&table),
            up: Some(&table),
            merged: false,
            gate_sh: Some(&q4k_sh),
            up_sh: Some(&q4k_sh),
            act: &act,
        },
    )
    .expect("gate/up");
    moe_down(
        &mut r,
        GemvType::Q5_0,
        GemvType::Q4K,
        &s,
        &DownBufs {
            act: &act,
            sel: Some(&size_of::<ExpertSelection>()),
            down: Some(&table),
            down_sh: Some(&(2048 * 11 * 144)),
            resid: &(2048 * 4),
            y: &(2048 * 4),
            norm: None,
        },
    )
    .expect("down");
    assert_eq!(
        r.launches,
        [
            ("moe_gate_up_q4k".to_owned(), [352, 1, 1], [256, 1, 1]),
            ("moe_down_q5_0_q4k".to_owned(), [256, 1, 1], [256, 1, 1]),
        ]
    );
    // One byte short of the down expert table is refused.
    let e = moe_down(
        &mut r,
        GemvType::Q5_0,
        GemvType::Q4K,
        &s,
        &DownBufs {
            act: &act,
            sel: Some(&size_of::<ExpertSelection>()),
            down: Some(&(table - 1)),
            down_sh: Some(&(2048 * 11 * 144)),
            resid: &(2048 * 4),
            y: &(2048 * 4),
            norm: None,
        },
    )
    .expect_err("short down table accepted");
    assert!(
        matches!(e, KernelError::BufferTooSmall { param: "down", .. }),
        "{e}"
    );
    // Each down block stages the whole `act` in shared memory: 8 slots of 2048 and 2048 shared
    // (V3, Kimi-K2: 576 q8_1 blocks) fill the stage; a ninth slot is refused before launching.
    let wide = |n_used| FfnShape {
        n_embd: 2048,
        n_expert: 64,
        n_used,
        ff: 2048,
        ff_sh: 2048,
    };
    let down_at = |r: &mut Recorder, s: &FfnShape| {
        let act = s.act_bytes().expect("act");
        moe_down(
            r,
            GemvType::Q4K,
            GemvType::Q4K,
            s,
            &DownBufs {
                act: &act,
                sel: Some(&size_of::<ExpertSelection>()),
                down: Some(&table),
                down_sh: Some(&(2048 * 8 * 144)),
                resid: &(2048 * 4),
                y: &(2048 * 4),
                norm: None,
            },
        )
    };
    let before = r.launches.len();
    down_at(&mut r, &wide(8)).expect("8 slots of 2048 fit the stage");
    let e = down_at(&mut r, &wide(9)).expect_err("9 slots of 2048 overflow the stage");
    assert!(
        matches!(&e, KernelError::Shape { reason, .. } if reason.contains("640 q8_1 blocks")),
        "{e}"
    );
    assert_eq!(r.launches.len(), before + 1, "the refused launch ran");
}
