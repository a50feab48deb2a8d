//! The feed-forward blocks of the CPU backend: SwiGLU FFNs, alone (dense lead layers) or as the
//! chosen experts plus shared experts of a MoE layer. All gate and up projections of a layer run as
//! one parallel batch, then all down projections as another.

use super::batch::{self, Product};
use super::weights::{DenseFfn, Ffn, MoeFfn};
use super::Scratch;
use crate::config::ModelConfig;
use crate::error::Result;
use crate::math::swiglu_in_place;
use crate::routing::Router;

/// Largest number of SwiGLU FFNs one layer runs (the chosen experts plus the shared one).
pub(super) fn max_ffns(c: &ModelConfig) -> usize {
    c.n_expert_used.max(1) + 1
}

/// Length of the concatenated gate/up outputs of a layer's FFNs, for the largest layer.
pub(super) fn gate_up_len(c: &ModelConfig) -> usize {
    let moe = 2 * (c.n_expert_used * c.ff_expert + c.ff_shared());
    moe.max(2 * c.ff_dense)
}

/// Widest FFN hidden layer.
pub(super) fn max_ff(c: &ModelConfig) -> usize {
    c.ff_dense.max(c.ff_shared()).max(c.ff_expert)
}

/// Adds the FFN of `ffn` on the normed residual already loaded in `s.act_embd` to `s.x`.
pub(super) fn ffn<'f>(
    c: &ModelConfig,
    ffn: &Ffn<'f>,
    router: &mut Router,
    s: &mut Scratch<'f>,
) -> Result<()> {
    match ffn {
        Ffn::Dense(f) => {
            swiglu_ffns(std::slice::from_ref(&**f), s)?;
            add(&mut s.x, &s.down[..c.n_embd]);
        }
        Ffn::Moe(m) => moe(c, m, router, s)?,
    }
    Ok(())
}

fn moe<'f>(
    c: &ModelConfig,
    m: &MoeFfn<'f>,
    router: &mut Router,
    s: &mut Scratch<'f>,
) -> Result<()> {
    batch::matvec(&m.router, &mut s.act_embd, &mut s.router_logits)?;
    router.route(&s.router_logits, m.bias.as_deref(), &mut s.chosen);
    s.ffns.clear();
    for &(e, _) in &s.chosen {
        let (gate, up) = m.gate_up_exps.expert(e, c.n_expert);
        s.ffns.push(DenseFfn {
            gate,
            up,
            down: m.down_exps.slab(e, c.n_expert),
        });
    }
    if let Some(shared) = &m.shared {
        s.ffns.push(*shared);
    }
    let ffns = std::mem::take(&mut s.ffns);
    let result = swiglu_ffns(&ffns, s);
    s.ffns = ffns;
    result?;
    // Σ_i w_i·down_i over the chosen experts in routing order, then the shared experts unweighted.
    let n = c.n_embd;
    s.moe_acc.fill(0.0);
    for (i, &(_, w)) in s.chosen.iter().enumerate() {
        s.moe_acc
            .iter_mut()
            .zip(&s.down[i * n..(i + 1) * n])
            .for_each(|(a, v)| *a += w * v);
    }
    if m.shared.is_some() {
        let i = s.chosen.len();
        add(&mut s.moe_acc, &s.down[i * n..(i + 1) * n]);
    }
    add(&mut s.x, &s.moe_acc);
    Ok(())
}

/// `down_i = W_down_i·(silu(W_gate_i·h) ⊙ W_up_i·h)` for every FFN, with `h` in `s.act_embd`;
/// output `i` lands in `s.down[i·n_embd..]`.
fn swiglu_ffns<'f>(ffns: &[DenseFfn<'f>], s: &mut Scratch<'f>) -> Result<()> {
    s.products.clear();
    for f in ffns {
        s.products.push(Product {
            m: f.gate,
            input: 0,
        });
        s.products.push(Product { m: f.up, input: 0 });
    }
    batch::run(
        &s.products,
        std::slice::from_mut(&mut s.act_embd),
        &mut s.gate_up,
    )?;
    let mut offset = 0;
    s.products.clear();
    for (i, f) in ffns.iter().enumerate() {
        let ff = f.gate.rows();
        let (gate, up) = s.gate_up[offset..offset + 2 * ff].split_at_mut(ff);
        swiglu_in_place(gate, up);
        s.act_ff[i].load(gate);
        offset += 2 * ff;
        s.products.push(Product {
            m: f.down,
            input: i,
        });
    }
    batch::run(&s.products, &mut s.act_ff, &mut s.down)
}

pub(super) fn add(x: &mut [f32], y: &[f32]) {
    x.iter_mut().zip(y).for_each(|(a, b)| *a += b);
}
