//! `moe_ffn_*` (the gate/up kernel with its router and the down kernel with its norm tail in
//! one chained launch) against the three launches it replaces, `moe_router_f32`, the plain
//! `moe_gate_up_*` and `moe_down_*`, each proven against its oracle elsewhere (`moe_route.rs`,
//! `moe_ffn/`): the logits, the selection, the SwiGLU activations, the residual stream and the
//! norm tail's outputs must be the same bits, for every registry `chain_ffn` row, on fresh random
//! inputs with every output poisoned.
//!
//! The down blocks wait for the routing and for every gate/up row block: in ptx-sim each launch
//! also runs under random schedules (the kernel tests' race check). The control words and
//! counters, zeroed once, serve every launch and must read 0 after each.
//!
//! The same for `moe_ffn_rope_kb_*` (the FFN and the next layer's projections in one launch)
//! against `moe_ffn_*` then `gemv2_rope_kb_*`, in the `rope_kb` module.

mod support;

#[path = "quant_blocks/mod.rs"]
mod quant_blocks;
// After `support`: it uses its macros.
#[path = "moe_ffn_chain/rope_kb.rs"]
mod rope_kb;

use ingot_abi::blocks::BlockQ8_1;
use ingot_abi::launch::{ExpertSelection, CHAIN_CTL_WORDS, ROUTE_CTL_WORDS};
use ingot_abi::weight_types::CHAIN_FFN;
use ingot_kernels::ops::gemv::GemvType;
use ingot_kernels::ops::moe::{
    expert_table, moe_down, moe_ffn, moe_gate_up_mixed, moe_router_f32, DownBufs, DownNorm,
    FfnShape, FusedRouterBufs, GateUpBufs, Gating, RouteParams,
};
use ingot_kernels::Accelerator;
use rand::rngs::StdRng;
use rand::Rng;
use support::gemv_type::ggml;
use support::{download, f32_bytes, poisoned, upload};

type Types = ((GemvType, GemvType), (GemvType, GemvType));

fn blocks(rng: &mut StdRng, t: GemvType, rows: usize, cols: usize) -> Vec<u8> {
    quant_blocks::random_blocks(rng, ggml(t), rows * cols / t.block_elems())
}

fn floats(rng: &mut StdRng, n: usize, lo: f32, hi: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(lo..hi)).collect()
}

/// The buffers every control word and counter lives in, zeroed once.
struct Ctl<T> {
    route: T,
    chain: T,
    router_count: T,
    norm_count: T,
}

/// An FFN's random inputs and weights on the device (router weights and input, the q8_1
/// activation, the routed slabs behind their expert tables, the shared experts, the residual and
/// the norm weights), drawn from `rng` in one fixed order.
struct FfnInputs<T> {
    router_w: T,
    router_x: T,
    x: T,
    /// The routed slabs the tables point into: kept alive as long as the tables.
    _slabs: [T; 3],
    gate: T,
    up: T,
    gate_sh: T,
    up_sh: T,
    down: T,
    down_sh: T,
    resid: T,
    norm_w: T,
}

fn ffn_inputs<B: Accelerator>(
    b: &mut B,
    rng: &mut StdRng,
    ((gr, gs), (dr, ds)): Types,
    (s, p): (&FfnShape, &RouteParams),
) -> FfnInputs<B::Buf> {
    let (n, e) = (s.n_embd, p.n_expert);
    let w = floats(rng, e * n, -0.05, 0.05);
    let rx = floats(rng, n, -1.0, 1.0);
    let x = ingot_quant::quantize_q8_1(&floats(rng, n, -1.0, 1.0));
    let up_slab = s.ff * n / gr.block_elems() * gr.block_bytes();
    let down_slab = n * s.ff / dr.block_elems() * dr.block_bytes();
    let (router_w, router_x) = (upload(b, &f32_bytes(&w)), upload(b, &f32_bytes(&rx)));
    let x = upload(b, bytemuck::cast_slice::<BlockQ8_1, u8>(&x));
    let gsl = upload(b, &blocks(rng, gr, e * s.ff, n));
    let usl = upload(b, &blocks(rng, gr, e * s.ff, n));
    let gate = expert_table(b, &gsl, e, up_slab).expect("gate table");
    let up = expert_table(b, &usl, e, up_slab).expect("up table");
    let gate_sh = upload(b, &blocks(rng, gs, s.ff_sh, n));
    let up_sh = upload(b, &blocks(rng, gs, s.ff_sh, n));
    let dsl = upload(b, &blocks(rng, dr, e * n, s.ff));
    let down = expert_table(b, &dsl, e, down_slab).expect("down table");
    let down_sh = upload(b, &blocks(rng, ds, n, s.ff_sh));
    let resid = upload(b, &f32_bytes(&floats(rng, n, -2.0, 2.0)));
    let norm_w = upload(b, &f32_bytes(&floats(rng, n, 0.5, 1.5)));
    FfnInputs {
        router_w,
        router_x,
        x,
        _slabs: [gsl, usl, dsl],
        gate,
        up,
        gate_sh,
        up_sh,
        down,
        down_sh,
        resid,
        norm_w,
    }
}

fn check_case<B: Accelerator>(
    b: &mut B,
    rng: &mut StdRng,
    ((gr, gs), (dr, ds)): Types,
    (s, p): (&FfnShape, &RouteParams),
    ctl: &Ctl<B::Buf>,
) {
    let (n, e) = (s.n_embd, p.n_expert);
    let i = ffn_inputs(b, rng, ((gr, gs), (dr, ds)), (s, p));
    let sel_bytes = std::mem::size_of::<ExpertSelection>();
    let act_bytes = s.act_bytes().expect("act bytes");
    // Each path's outputs, poisoned: logits, sel, act, y, norm q8, norm f32.
    let outs = |b: &mut B| {
        [
            poisoned(b, e * 4),
            poisoned(b, sel_bytes),
            poisoned(b, act_bytes),
            poisoned(b, n * 4),
            poisoned(b, n / 32 * 36),
            poisoned(b, n * 4),
        ]
    };
    let paths = [outs(b), outs(b)];
    for (k, o) in paths.iter().enumerate() {
        let gu = GateUpBufs {
            x: &i.x,
            sel: Some(&o[1]),
            gate: Some(&i.gate),
            up: Some(&i.up),
            merged: false,
            gate_sh: Some(&i.gate_sh),
            up_sh: Some(&i.up_sh),
            act: &o[2],
        };
        let down = DownBufs {
            act: &o[2],
            sel: Some(&o[1]),
            down: Some(&i.down),
            down_sh: Some(&i.down_sh),
            resid: &i.resid,
            y: &o[3],
            norm: Some(DownNorm {
                w: &i.norm_w,
                q8: &o[4],
                f32: &o[5],
                count: &ctl.norm_count,
                eps: 1e-6,
            }),
        };
        if k == 0 {
            let lw = (&i.router_w, &i.router_x, &o[0]);
            moe_router_f32(b, lw, None, &o[1], &ctl.router_count, n, p).expect("router");
            moe_gate_up_mixed(b, gr, gs, s, &gu).expect("gate/up");
            moe_down(b, dr, ds, s, &down).expect("down");
        } else {
            let router = FusedRouterBufs {
                w: &i.router_w,
                x: &i.router_x,
                logits: &o[0],
                bias: None,
                ctl: &ctl.route,
            };
            let types = ((gr, gs), (dr, ds));
            moe_ffn(b, types, s, &gu, (&router, p), &down, &ctl.chain).expect("moe_ffn");
        }
    }
    let name = GemvType::moe_ffn((gr, gs), (dr, ds))
        .expect("a chain_ffn row")
        .name;
    let what = format!("{}: {name} ({n} wide, {e} experts)", b.name());
    let parts = [
        "logits",
        "selection",
        "activations",
        "residual",
        "norm q8_1",
        "norm f32",
    ];
    for (i, part) in parts.iter().enumerate() {
        let [a, c] = [0, 1].map(|k| download(b, &paths[k][i]));
        if let Some(j) = (0..a.len()).find(|&j| a[j] != c[j]) {
            panic!(
                "{what}: {part} byte {j}: {:#04x} vs the launches' {:#04x}",
                c[j], a[j]
            );
        }
        assert!(
            c.chunks(4).any(|v| v != [0xFF; 4]),
            "{what}: {part} never written"
        );
    }
    for (word, buf) in [
        ("route_ctl", &ctl.route),
        ("chain_ctl", &ctl.chain),
        ("router count", &ctl.router_count),
        ("norm count", &ctl.norm_count),
    ] {
        let v = download(b, buf);
        assert!(v.iter().all(|&x| x == 0), "{what}: {word} left {v:?}");
    }
    eprintln!("{what}: the bits of the three launches");
}

fn check<B: Accelerator>(b: &mut B) {
    let mut rng = support::rng("moe_ffn_chain");
    let ctl = Ctl {
        route: upload(b, &[0u8; ROUTE_CTL_WORDS as usize * 4]),
        chain: upload(b, &[0u8; CHAIN_CTL_WORDS as usize * 4]),
        router_count: upload(b, &[0u8; 4]),
        norm_count: upload(b, &[0u8; 4]),
    };
    let softmax = |n_expert, n_used| RouteParams {
        gating: Gating::Softmax,
        n_expert,
        n_used,
        n_group: 1,
        n_group_used: 1,
        normalize: false,
        scale: 1.0,
    };
    let small = softmax(16, 3);
    let shape = |n_embd, p: &RouteParams, ff, ff_sh| FfnShape {
        n_embd,
        n_expert: p.n_expert,
        n_used: p.n_used,
        ff,
        ff_sh,
    };
    // Every row on a shape every type takes, twice (the words must be 0 again in between).
    for &types in CHAIN_FFN {
        for _ in 0..2 {
            check_case(
                b,
                &mut rng,
                types,
                (&shape(256, &small, 256, 256), &small),
                &ctl,
            );
        }
    }
    // V2-Lite's routing and expert widths (64 experts, 6 used, ff 1408, two shared experts) at
    // a narrower model width.
    let v2 = softmax(64, 6);
    let lite = (
        (GemvType::Q4K, GemvType::Q4K),
        (GemvType::Q5_0, GemvType::Q4K),
    );
    check_case(b, &mut rng, lite, (&shape(256, &v2, 1408, 2816), &v2), &ctl);
}

#[test]
fn chained_ffn_gives_the_bits_of_the_three_launches() {
    on_every_backend!(check);
}

fn check_next<B: Accelerator>(b: &mut B) {
    rope_kb::check_rows(b, &mut support::rng("moe_ffn_rope_kb"));
}

#[test]
fn ffn_with_the_next_projections_gives_the_bits_of_the_two_launches() {
    on_every_backend!(check_next);
}

/// The norm signal's publication under many schedules, every launch included: the default
/// race check runs the chained launches (over its size limit) in order only.
#[test]
fn the_projections_read_the_published_norm_under_many_schedules() {
    #[cfg(feature = "sim")]
    {
        let mut b = ingot_kernels::backend::sim::SimAccelerator::new().expect("ptx-sim backend");
        b.sim_mut().set_race_check(8);
        b.sim_mut().set_race_check_limit(u64::MAX);
        rope_kb::check_rows(&mut b, &mut support::rng("moe_ffn_rope_kb_schedules"));
        let c = b.sim_mut().race_check_counts();
        eprintln!("{c:?}");
    }
    #[cfg(not(feature = "sim"))]
    eprintln!("skipped: ingot-kernels built without feature `sim`");
}
