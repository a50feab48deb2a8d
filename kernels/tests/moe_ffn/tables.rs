//! The two ways the MoE kernels' expert tables address the experts in these tests.

use super::support::upload;
use ingot_kernels::ops::moe::expert_table;
use ingot_kernels::Accelerator;

/// How a launch's expert tables address the experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tables {
    /// The identity table over one stacked tensor (all experts in VRAM).
    Identity,
    /// The selected experts in a separate pool in reverse order, their stacked places 0xFF.
    Scattered,
}

/// A routed tensor as the kernels read it: its expert table and the memory the table names.
pub struct Experts<Buf> {
    pub table: Buf,
    _memory: Vec<Buf>,
}

/// `data` (`n_expert` slabs, `ids` the selected experts) uploaded and addressed as `tables` says.
pub fn experts<B: Accelerator>(
    b: &mut B,
    data: &[u8],
    n_expert: usize,
    ids: &[usize],
    tables: Tables,
) -> Experts<B::Buf> {
    let slab = data.len() / n_expert;
    if tables == Tables::Identity {
        let stacked = upload(b, data);
        let table = expert_table(b, &stacked, n_expert, slab).expect("expert table");
        return Experts {
            table,
            _memory: vec![stacked],
        };
    }
    let mut rest = data.to_vec();
    let mut pool = Vec::with_capacity(ids.len() * slab);
    for &e in ids.iter().rev() {
        pool.extend_from_slice(&data[e * slab..][..slab]);
        rest[e * slab..][..slab].fill(0xFF);
    }
    let (stacked, pool) = (upload(b, &rest), upload(b, &pool));
    let (at, pool_at) = (b.address(&stacked), b.address(&pool));
    let mut entries: Vec<u64> = (0..n_expert).map(|e| at + (e * slab) as u64).collect();
    for (i, &e) in ids.iter().rev().enumerate() {
        entries[e] = pool_at + (i * slab) as u64;
    }
    Experts {
        table: upload(b, bytemuck::cast_slice(&entries)),
        _memory: vec![stacked, pool],
    }
}
