//! `moe_ffn_rope_kb_*` (a MoE layer's FFN and the next layer's projections in one chained
//! launch) against the two launches it replaces: `moe_ffn_*` (checked against its three
//! launches above) then `gemv2_rope_kb_*` on the FFN's norm tail's q8_1 output (checked against
//! its two launches in `gemv2_rope_kb.rs`). Each part runs its unfused kernel's code, so every
//! output must be the two launches' bits: the FFN's logits, selection, activations, residual
//! stream and norm outputs, and the projections' `q`, `kv`, `q_pe`, cache row and `q_abs`; the
//! chained launch leaves `q_nope_q8` alone. Inputs are random and non-zero, every output is
//! poisoned, for every registry `chain_ffn_rope_kb` row at two positions on the same control
//! words and counters, which must read 0 after each launch. A projection row block reading the
//! norm's q8_1 before the tail published it would show under the simulator's random schedules.

use super::support::attention::{rope_inputs, step_state, v2_lite_rope};
use super::support::{download, poisoned, upload};
use super::{blocks, ffn_inputs, Ctl, Types};
use ingot_abi::launch::{ExpertSelection, CHAIN_CTL_WORDS, ROUTE_CTL_WORDS};
use ingot_abi::weight_types::{FfnRopeKbRow, CHAIN_FFN_ROPE_KB};
use ingot_kernels::ops::attention::{gemv2_rope_kb_q8_1, AttnShape, CacheType, KbBufs, RopeKvBufs};
use ingot_kernels::ops::moe::{
    moe_ffn, moe_ffn_rope_kb, DownBufs, DownNorm, FfnShape, FusedRouterBufs, GateUpBufs, Gating,
    NextProjections, RouteParams,
};
use ingot_kernels::Accelerator;
use rand::rngs::StdRng;
use rand::Rng;

/// Four heads of 64 + 16, a 64-wide latent: a few blocks per part.
const ATTN: AttnShape = AttnShape {
    n_head: 4,
    d_nope: 64,
    kv_lora: 64,
    n_rope: 16,
    ctx: 64,
    cache: CacheType::F16,
};

/// The projections' control words and counters beyond the FFN's ([`Ctl`]).
pub(super) struct ProjCtl<T> {
    kb: T,
    norm: T,
    rope_count: T,
}

/// One path's outputs: the FFN's six (as in `check_case`), then `q`, `kv`, `q_pe`,
/// `q_nope_q8`, the cache and `q_abs`.
type Outs<T> = [T; 12];

fn check_row<B: Accelerator>(
    b: &mut B,
    rng: &mut StdRng,
    (gate_up, down, (ty, kb)): FfnRopeKbRow,
    (s, p): (&FfnShape, &RouteParams),
    (ctl, pc): (&Ctl<B::Buf>, &ProjCtl<B::Buf>),
) {
    let ((gr, gs), (dr, ds)): Types = (gate_up, down);
    let (n, e, a) = (s.n_embd, p.n_expert, &ATTN);
    // The FFN's inputs and weights.
    let i = ffn_inputs(b, rng, ((gr, gs), (dr, ds)), (s, p));
    // The projections' weights and inputs (their activation is the FFN's norm q8_1).
    let rope = v2_lite_rope(a.n_rope);
    let (eps, mscale) = (1e-6f32, rope.rope_mscale());
    let (n0, n1) = (a.n_head * (a.d_nope + a.n_rope), a.row());
    let w0 = upload(b, &blocks(rng, ty, n0, n));
    let w1 = upload(b, &blocks(rng, ty, n1, n));
    let kb_rows = a.n_head * a.kv_lora;
    let w_kb = upload(b, &blocks(rng, kb, kb_rows, a.d_nope));
    let (_, kv_norm, rope_freq) = rope_inputs(b, rng, a, n);
    let q8_bytes = a.n_head * a.d_nope / 32 * 36;
    let outs = |b: &mut B| -> Outs<B::Buf> {
        [
            poisoned(b, e * 4),
            poisoned(b, std::mem::size_of::<ExpertSelection>()),
            poisoned(b, s.act_bytes().expect("act bytes")),
            poisoned(b, n * 4),
            poisoned(b, n / 32 * 36),
            poisoned(b, n * 4),
            poisoned(b, n0 * 4),
            poisoned(b, n1 * 4),
            poisoned(b, a.n_head * a.n_rope * 4),
            poisoned(b, q8_bytes),
            poisoned(b, a.cache_bytes().expect("cache bytes")),
            poisoned(b, kb_rows * 4),
        ]
    };
    let paths = [outs(b), outs(b)];
    let pos0 = rng.random_range(0..a.ctx - 1);
    let name = ingot_kernels::ops::gemv::GemvType::moe_ffn_rope_kb(gate_up, down, (ty, kb))
        .expect("a chain_ffn_rope_kb row")
        .name;
    for pos in [pos0, pos0 + 1] {
        let state = upload(b, &step_state(pos as u32));
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
            let dn = DownBufs {
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
            let router = FusedRouterBufs {
                w: &i.router_w,
                x: &i.router_x,
                logits: &o[0],
                bias: None,
                ctl: &ctl.route,
            };
            let bufs = RopeKvBufs {
                q: &o[6],
                kv: &o[7],
                kv_norm: &kv_norm,
                rope_freq: &rope_freq,
                state: &state,
                q_pe: &o[8],
                cache: &o[10],
            };
            let kbb = KbBufs {
                w: &w_kb,
                q_abs: &o[11],
                chain_ctl: &pc.kb,
            };
            let tail = (&o[9], &pc.rope_count);
            let types = (gate_up, down);
            if k == 0 {
                moe_ffn(b, types, s, &gu, (&router, p), &dn, &ctl.chain).expect("moe_ffn");
                let w = (&w0, Some(&w1));
                let sc = (eps, mscale);
                gemv2_rope_kb_q8_1(b, (ty, kb), w, &o[4], n, a, &bufs, tail, sc, &kbb)
                    .expect("gemv2_rope_kb");
            } else {
                let next = NextProjections {
                    types: (ty, kb),
                    w: (&w0, Some(&w1)),
                    shape: a,
                    bufs: &bufs,
                    tail,
                    scales: (eps, mscale),
                    kb: &kbb,
                    norm_ctl: &pc.norm,
                };
                moe_ffn_rope_kb(b, types, s, &gu, (&router, p), &dn, &ctl.chain, &next)
                    .expect("moe_ffn_rope_kb");
            }
        }
        let what = format!("{}: {name} pos {pos}", b.name());
        let parts = [
            "logits",
            "selection",
            "activations",
            "residual",
            "norm q8_1",
            "norm f32",
            "q",
            "kv",
            "q_pe",
            "q_nope_q8",
            "cache",
            "q_abs",
        ];
        for (i, part) in parts.iter().enumerate() {
            if *part == "q_nope_q8" {
                let c = download(b, &paths[1][i]);
                assert!(c.iter().all(|&v| v == 0xFF), "{what}: q_nope_q8 written");
                continue;
            }
            let [want, got] = [0, 1].map(|k| download(b, &paths[k][i]));
            if let Some(j) = (0..want.len()).find(|&j| want[j] != got[j]) {
                panic!(
                    "{what}: {part} byte {j}: {:#04x} vs the two launches' {:#04x}",
                    got[j], want[j]
                );
            }
            assert!(
                got.chunks(4).any(|v| v != [0xFF; 4]),
                "{what}: {part} never written"
            );
        }
        for (word, buf) in [
            ("route_ctl", &ctl.route),
            ("chain_ctl", &ctl.chain),
            ("norm count", &ctl.norm_count),
            ("kb_ctl", &pc.kb),
            ("norm_ctl", &pc.norm),
            ("rope count", &pc.rope_count),
        ] {
            let v = download(b, buf);
            assert!(v.iter().all(|&x| x == 0), "{what}: {word} left {v:?}");
        }
    }
    eprintln!("{}: {name}: the bits of the two launches", b.name());
}

/// Every `chain_ffn_rope_kb` row on a model 256 wide (16 experts, 3 used, [`ATTN`]'s heads).
pub(super) fn check_rows<B: Accelerator>(b: &mut B, rng: &mut StdRng) {
    let ctl = Ctl {
        route: upload(b, &[0u8; ROUTE_CTL_WORDS as usize * 4]),
        chain: upload(b, &[0u8; CHAIN_CTL_WORDS as usize * 4]),
        router_count: upload(b, &[0u8; 4]),
        norm_count: upload(b, &[0u8; 4]),
    };
    let pc = ProjCtl {
        kb: upload(b, &[0u8; CHAIN_CTL_WORDS as usize * 4]),
        norm: upload(b, &[0u8; CHAIN_CTL_WORDS as usize * 4]),
        rope_count: upload(b, &[0u8; 4]),
    };
    let p = RouteParams {
        gating: Gating::Softmax,
        n_expert: 16,
        n_used: 3,
        n_group: 1,
        n_group_used: 1,
        normalize: false,
        scale: 1.0,
    };
    let s = FfnShape {
        n_embd: 256,
        n_expert: p.n_expert,
        n_used: p.n_used,
        ff: 256,
        ff_sh: 256,
    };
    for &row in CHAIN_FFN_ROPE_KB {
        check_row(b, rng, row, (&s, &p), (&ctl, &pc));
    }
}
