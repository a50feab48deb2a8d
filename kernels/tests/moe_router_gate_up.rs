//! `moe_gate_up_router_*` (the gate/up kernel with its router fused in) against the two
//! launches it replaces, `moe_router_f32` then `moe_gate_up_*`, each proven against its oracle in
//! `moe_route.rs` and `moe_ffn/`: the logits, the selection and the SwiGLU activations must be
//! the same bits, on fresh random inputs per launch with every output poisoned.
//!
//! The fused launch's blocks take tickets and its routed blocks wait for the router's: in
//! ptx-sim every launch also runs under random schedules (the kernel tests' race check), where
//! blocks start in a shuffled order, a few at a time, and warps are starved at random. One
//! control buffer, zeroed once, serves three launches per case back to back: it must read 0
//! after each, as the next launch (and a replayed graph) needs.

mod support;

#[path = "quant_blocks/mod.rs"]
mod quant_blocks;

use ingot_abi::blocks::BlockQ8_1;
use ingot_abi::launch::{ExpertSelection, GATE_UP_ROUTER_MAX_EXPERTS, ROUTE_CTL_WORDS};
use ingot_kernels::ops::gemv::GemvType;
use ingot_kernels::ops::moe::{
    expert_table, moe_gate_up_mixed, moe_router_f32, moe_router_gate_up, FfnShape, FusedRouterBufs,
    GateUpBufs, Gating, RouteParams,
};
use ingot_kernels::Accelerator;
use rand::rngs::StdRng;
use rand::Rng;
use support::gemv_type::ggml;
use support::{download, f32_bytes, poisoned, upload};

struct Case {
    name: &'static str,
    routed: GemvType,
    shared: GemvType,
    merged: bool,
    s: FfnShape,
    p: RouteParams,
    bias: bool,
}

fn cases() -> Vec<Case> {
    let softmax = |n_expert, n_used| RouteParams {
        gating: Gating::Softmax,
        n_expert,
        n_used,
        n_group: 1,
        n_group_used: 1,
        normalize: false,
        scale: 1.0,
    };
    let shape = |n_embd, p: &RouteParams, ff, ff_sh| FfnShape {
        n_embd,
        n_expert: p.n_expert,
        n_used: p.n_used,
        ff,
        ff_sh,
    };
    let v2 = softmax(64, 6);
    // V3's routing (grouped sigmoid, bias, renormalized, scaled) at the most experts fused.
    let grouped = RouteParams {
        gating: Gating::Sigmoid,
        n_group: 8,
        n_group_used: 4,
        normalize: true,
        scale: 2.5,
        ..softmax(64, 8)
    };
    let sigmoid = RouteParams {
        gating: Gating::Sigmoid,
        normalize: true,
        scale: 2.827,
        ..softmax(48, 4)
    };
    let odd = RouteParams {
        normalize: true,
        ..softmax(33, 3)
    };
    vec![
        // V2-Lite's routing (2 scores per lane, 32 router blocks), two blocks per expert.
        Case {
            name: "v2-lite q4k",
            routed: GemvType::Q4K,
            shared: GemvType::Q4K,
            merged: false,
            s: shape(256, &v2, 64, 64),
            p: v2,
            bias: false,
        },
        // Grouped sigmoid routing with a selection bias.
        Case {
            name: "groups q8_0",
            routed: GemvType::Q8_0,
            shared: GemvType::Q8_0,
            merged: false,
            s: shape(64, &grouped, 32, 64),
            p: grouped,
            bias: true,
        },
        // One merged gate/up tensor (GLM-4.7-Flash's layout).
        Case {
            name: "48 experts merged q4_0",
            routed: GemvType::Q4_0,
            shared: GemvType::Q4_0,
            merged: true,
            s: shape(64, &sigmoid, 32, 32),
            p: sigmoid,
            bias: true,
        },
        // An odd expert count (the last router block has one row), a mixed pair of types.
        Case {
            name: "33 experts iq2_xxs + q6k",
            routed: GemvType::Iq2Xxs,
            shared: GemvType::Q6K,
            merged: false,
            s: shape(256, &odd, 32, 32),
            p: odd,
            bias: false,
        },
    ]
}

fn blocks(rng: &mut StdRng, t: GemvType, rows: usize, cols: usize) -> Vec<u8> {
    quant_blocks::random_blocks(rng, ggml(t), rows * cols / t.block_elems())
}

fn floats(rng: &mut StdRng, n: usize, m: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-m..m)).collect()
}

/// One case's `launches` launch pairs.
fn check_case<B: Accelerator>(
    b: &mut B,
    rng: &mut StdRng,
    c: &Case,
    ctl: &B::Buf,
    launches: usize,
) {
    let (s, n) = (&c.s, c.p.n_expert);
    let rows = if c.merged { 2 * s.ff } else { s.ff };
    let slab = rows * s.n_embd / c.routed.block_elems() * c.routed.block_bytes();
    let count = upload(b, &[0u8; 4]);
    for launch in 0..launches {
        let w = floats(rng, n * s.n_embd, 0.05);
        let rx = floats(rng, s.n_embd, 1.0);
        let bias = c.bias.then(|| floats(rng, n, 0.5));
        let x = ingot_quant::quantize_q8_1(&floats(rng, s.n_embd, 1.0));
        let gate = blocks(rng, c.routed, n * rows, s.n_embd);
        let up = blocks(rng, c.routed, n * rows, s.n_embd);
        let (gate_sh, up_sh) = (
            blocks(rng, c.shared, s.ff_sh, s.n_embd),
            blocks(rng, c.shared, s.ff_sh, s.n_embd),
        );
        let (wb, rxb) = (upload(b, &f32_bytes(&w)), upload(b, &f32_bytes(&rx)));
        let bb = bias.as_ref().map(|v| upload(b, &f32_bytes(v)));
        let xb = upload(b, bytemuck::cast_slice::<BlockQ8_1, u8>(&x));
        let (gs, us) = (upload(b, &gate), upload(b, &up));
        let gt = expert_table(b, &gs, n, slab).expect("gate table");
        let ut = expert_table(b, &us, n, slab).expect("up table");
        let (gsh, ush) = (upload(b, &gate_sh), upload(b, &up_sh));
        let act_bytes = s.act_bytes().expect("act bytes");
        let sel_bytes = std::mem::size_of::<ExpertSelection>();
        // [unfused, fused] outputs, all poisoned.
        let logits = [poisoned(b, n * 4), poisoned(b, n * 4)];
        let sel = [poisoned(b, sel_bytes), poisoned(b, sel_bytes)];
        let act = [poisoned(b, act_bytes), poisoned(b, act_bytes)];
        let bufs = |k: usize| GateUpBufs {
            x: &xb,
            sel: Some(&sel[k]),
            gate: Some(&gt),
            up: (!c.merged).then_some(&ut),
            merged: c.merged,
            gate_sh: Some(&gsh),
            up_sh: Some(&ush),
            act: &act[k],
        };
        let lw = (&wb, &rxb, &logits[0]);
        moe_router_f32(b, lw, bb.as_ref(), &sel[0], &count, s.n_embd, &c.p).expect("router");
        moe_gate_up_mixed(b, c.routed, c.shared, s, &bufs(0)).expect("gate/up");
        let router = FusedRouterBufs {
            w: &wb,
            x: &rxb,
            logits: &logits[1],
            bias: bb.as_ref(),
            ctl,
        };
        let types = (c.routed, c.shared);
        moe_router_gate_up(b, types, s, &bufs(1), &router, &c.p).expect("fused launch");

        let what = format!("{}: {} launch {launch}", b.name(), c.name);
        let [l0, l1] = [0, 1].map(|k| download(b, &logits[k]));
        assert_eq!(l0, l1, "{what}: router logits differ");
        let [s0, s1] = [0, 1].map(|k| download(b, &sel[k]));
        assert_eq!(s0, s1, "{what}: selections differ");
        let got: ExpertSelection = bytemuck::pod_read_unaligned(&s1);
        assert!(
            got.ids[..c.p.n_used].iter().all(|&e| (e as usize) < n),
            "{what}: selection {:?} not written",
            got.ids
        );
        let [a0, a1] = [0, 1].map(|k| download(b, &act[k]));
        assert!(
            a1.chunks(36).all(|q| q.iter().any(|&v| v != 0xFF)),
            "{what}: an activation block was not written"
        );
        assert_eq!(a0, a1, "{what}: SwiGLU activations differ");
        assert_eq!(
            download(b, ctl),
            vec![0u8; ROUTE_CTL_WORDS as usize * 4],
            "{what}: control words not back to 0"
        );
    }
    eprintln!(
        "{}: {} ({:?}, {:?}): {} experts, {} used, ff {} + {}: {launches} fused launches equal \
         the two-launch bits",
        b.name(),
        c.name,
        c.routed,
        c.shared,
        n,
        c.p.n_used,
        s.ff,
        s.ff_sh
    );
}

fn check<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("moe_router_gate_up");
    let ctl = upload(b, &[0u8; ROUTE_CTL_WORDS as usize * 4]);
    for c in cases() {
        check_case(b, &mut rng, &c, &ctl, 3);
    }
}

#[test]
fn fused_router_gives_the_bits_of_the_two_launches() {
    on_every_backend!(check);
}

/// Every (routed, shared) pair of the registry: each type with itself and the `mixed_gate_up`
/// rows, so each `moe_gate_up_router_*` entry point the planner may pick is run once against
/// its plain twin after `moe_router_f32` (16 experts, 3 used, a 256-wide row every type takes).
fn check_every_pair<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("moe_router_gate_up every pair");
    let ctl = upload(b, &[0u8; ROUTE_CTL_WORDS as usize * 4]);
    let p = RouteParams {
        gating: Gating::Softmax,
        n_expert: 16,
        n_used: 3,
        n_group: 1,
        n_group_used: 1,
        normalize: true,
        scale: 1.0,
    };
    let s = FfnShape {
        n_embd: 256,
        n_expert: p.n_expert,
        n_used: p.n_used,
        ff: 32,
        ff_sh: 32,
    };
    let same = GemvType::ALL.iter().map(|&t| (t, t));
    for (routed, shared) in same.chain(GemvType::MIXED_GATE_UP.iter().copied()) {
        let c = Case {
            name: "every pair",
            routed,
            shared,
            merged: false,
            s,
            p,
            bias: false,
        };
        check_case(b, &mut rng, &c, &ctl, 1);
    }
}

#[test]
fn every_fused_kernel_gives_the_bits_of_the_two_launches() {
    on_every_backend!(check_every_pair);
}

/// More experts than the fused routing holds (V3's 256) are refused, not routed wrongly.
#[test]
fn too_many_experts_are_refused() {
    let mut b = ingot_kernels::backend::sim::SimAccelerator::new().expect("ptx-sim");
    let p = RouteParams {
        gating: Gating::Sigmoid,
        n_expert: GATE_UP_ROUTER_MAX_EXPERTS as usize + 1,
        n_used: 8,
        n_group: 1,
        n_group_used: 1,
        normalize: true,
        scale: 1.0,
    };
    let s = FfnShape {
        n_embd: 64,
        n_expert: p.n_expert,
        n_used: p.n_used,
        ff: 32,
        ff_sh: 32,
    };
    let any = upload(&mut b, &vec![0u8; 1 << 16]);
    let bufs = GateUpBufs {
        x: &any,
        sel: Some(&any),
        gate: Some(&any),
        up: Some(&any),
        merged: false,
        gate_sh: Some(&any),
        up_sh: Some(&any),
        act: &any,
    };
    let router = FusedRouterBufs {
        w: &any,
        x: &any,
        logits: &any,
        bias: None,
        ctl: &any,
    };
    let types = (GemvType::Q8_0, GemvType::Q8_0);
    let e = moe_router_gate_up(&mut b, types, &s, &bufs, &router, &p).expect_err("accepted");
    assert!(e.to_string().contains("at most"), "{e}");
}
