//! Materializes a case's buffers: host bytes from [`crate::inputs`], then device buffers.

use ingot_abi::step::StepState;
use ingot_kernels::Accelerator;

use crate::cases::{BufSpec, Case, Contents, RoutingList, Shape};
use crate::device::{Buf, Device};
use crate::error::{BenchError, Result};
use crate::inputs;

/// Seed of buffer `index` of `case`: a hash of the case id, so every tensor gets its own data
/// and a run is reproducible.
pub fn seed(case: &Case, index: usize) -> u64 {
    ingot_abi::hash::Fnv1a::new()
        .bytes(case.id().as_bytes())
        .bytes(&(index as u64).to_le_bytes())
        .finish()
}

/// Host bytes of one buffer.
pub fn host_bytes(spec: &BufSpec, seed: u64) -> Result<Vec<u8>> {
    match spec.contents {
        Contents::Weights { ty, rows, cols } => inputs::quantized_weights(ty, rows, cols, seed),
        Contents::ActQ8_1 { n } => inputs::q8_1_activation(n, seed),
        Contents::F32 { n, std } => inputs::f32_values(n, std, seed),
        Contents::F16 { n, std } => inputs::f16_values(n, std, seed),
        Contents::LatentQ8_0 { rows, width } => {
            inputs::latent_q8_0_rows(rows, width, inputs::ACTIVATION_STD, seed)
        }
        Contents::StepState { token, pos } => Ok(bytemuck::bytes_of(&StepState {
            token,
            pos,
            ..StepState::default()
        })
        .to_vec()),
        Contents::Selection { n_expert, n_used } => {
            inputs::expert_selection(n_expert, n_used, seed)
        }
        Contents::RopeFreq { pairs } => inputs::rope_freq(pairs),
        Contents::SoftmaxStats { pairs } => inputs::softmax_stats(pairs, seed),
        Contents::Selections {
            ntok,
            n_expert,
            n_used,
        } => inputs::chunk_selections(ntok, n_expert, n_used),
        Contents::Routing {
            ntok,
            n_expert,
            n_used,
            list,
        } => {
            let r = inputs::chunk_routing(ntok, n_expert, n_used)?;
            Ok(inputs::u32_bytes(&match list {
                RoutingList::ExpertStart => r.expert_start,
                RoutingList::PairToken => r.pair_token,
                RoutingList::PairOf => r.pair_of,
                RoutingList::PairSelf => (0..r.pair_token.len() as u32).collect(),
            }))
        }
        Contents::HeadPairs { ntok, n_head, list } => {
            inputs::head_pairs(ntok, n_head, list == RoutingList::ExpertStart)
        }
        Contents::Output { bytes } => {
            if bytes == 0 || bytes > inputs::MAX_ELEMENTS {
                return Err(BenchError::Shape {
                    case: spec.param.into(),
                    reason: format!("output of {bytes} bytes"),
                });
            }
            Ok(vec![0u8; bytes])
        }
        // The entries are addresses: `upload` writes them.
        Contents::ExpertTable { n_expert, .. } => Ok(vec![0u8; n_expert * 8]),
    }
}

/// Host bytes of every buffer of `case` at `shape`, in launch order.
pub fn host_buffers(case: &Case, shape: Shape) -> Result<Vec<Vec<u8>>> {
    (case.buffers)(shape)
        .iter()
        .enumerate()
        .map(|(i, spec)| host_bytes(spec, seed(case, i)))
        .collect()
}

/// Allocates one device buffer per host buffer of `specs` and uploads it; then writes each
/// [`Contents::ExpertTable`] from the address of the buffer it names.
pub fn upload(dev: &mut Device, specs: &[BufSpec], host: &[Vec<u8>]) -> Result<Vec<Buf>> {
    let mut bufs = Vec::with_capacity(host.len());
    for data in host {
        let buf = dev.alloc(data.len())?;
        dev.upload(&buf, data)?;
        bufs.push(buf);
    }
    for (spec, table) in specs.iter().zip(&bufs) {
        if let Contents::ExpertTable { stacked, n_expert } = spec.contents {
            let base = bufs.get(stacked).ok_or_else(|| BenchError::Shape {
                case: spec.param.into(),
                reason: format!("expert table over buffer {stacked} of {}", bufs.len()),
            })?;
            let slab = (dev.buf_len(base) / n_expert.max(1)) as u64;
            let at = dev.address(base);
            let entries: Vec<u64> = (0..n_expert as u64)
                .map(|e| ingot_abi::launch::stacked_expert(at, slab, e))
                .collect();
            dev.upload(table, bytemuck::cast_slice(&entries))?;
        }
    }
    Ok(bufs)
}
