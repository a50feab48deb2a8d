//! Launching a plan's nodes on the GPU: their arguments, one graph capture, or one by one paced
//! for debugging and timing; a failing launch named by its node.

use std::ops::Range;

use ingot_abi::launch::KernelDesc;
use ingot_cuda::{
    Arg, DeviceBuffer, Event, Gpu, Graph, LaunchOptions, LaunchShape, MappedBuffer, Module,
};

use crate::error::{ExecError, NodeFailure};
use crate::node::{Node, NodeArg};
use crate::plan::Plan;

/// How [`Loaded::run_nodes`] paces the nodes.
#[derive(Clone, Copy)]
pub(super) enum Pace<'e> {
    /// A synchronisation after each node (eager mode): a fault is pinned to its node.
    Sync,
    /// `marks[i]` recorded just before node `i` and `marks[n]` after the last node, with no
    /// synchronisation: the GPU time of node `i` is `marks[i]..marks[i + 1]`.
    Marks(&'e [Event]),
}

/// Where a plan's buffer is, as a launch argument sees it.
#[derive(Clone, Copy)]
pub(super) enum Place<'a> {
    Dev(&'a DeviceBuffer),
    /// A host-mapped buffer's device address.
    Mapped(u64),
}

/// The launch arguments of node `n`, in PTX parameter order, its buffers where `place` says
/// (a host-mapped buffer by its device address).
pub(super) fn node_args<'a>(n: &Node, place: &dyn Fn(usize) -> Place<'a>) -> Vec<Arg<'a>> {
    n.args
        .iter()
        .map(|a| match *a {
            NodeArg::Buf(r) => match place(r.buf.0 as usize) {
                Place::Mapped(addr) => Arg::U64(addr + r.offset),
                Place::Dev(b) => Arg::BufAt(b, r.offset),
            },
            NodeArg::U32(v) => Arg::U32(v),
            NodeArg::I32(v) => Arg::I32(v),
            NodeArg::F32(v) => Arg::F32(v),
            NodeArg::U64(v) => Arg::U64(v),
        })
        .collect()
}

/// How node `n` is launched: `after_kernel` as [`LaunchOptions::after_kernel`], and its
/// [`Node::l2_streaming`] weight where that is in VRAM (a host-mapped buffer gets no window).
fn launch_options<'a>(
    n: &Node,
    place: &dyn Fn(usize) -> Place<'a>,
    after_kernel: bool,
) -> LaunchOptions<'a> {
    let l2_streaming = n.l2_streaming.and_then(|w| match place(w.0 as usize) {
        Place::Dev(b) => Some(b),
        Place::Mapped(_) => None,
    });
    LaunchOptions {
        after_kernel,
        l2_streaming,
    }
}

/// Captures nodes `range` of `plan` into one graph (uploaded), their buffers where `place`
/// says.
pub(super) fn capture_nodes<'a>(
    gpu: &Gpu,
    module: &mut Module,
    plan: &Plan,
    range: Range<usize>,
    shapes: &[LaunchShape],
    place: &dyn Fn(usize) -> Place<'a>,
) -> Result<Graph, ExecError> {
    gpu.begin_capture()?;
    let first = range.start;
    let captured = range.into_iter().try_for_each(|i| {
        let (n, args) = (&plan.nodes[i], node_args(&plan.nodes[i], place));
        // Only kernels are captured, so every node but the first follows a kernel: on a module
        // whose kernels wait on their predecessor it is a programmatic edge (PDL).
        let opts = launch_options(n, place, i != first);
        gpu.launch_node(module, &n.kernel, shapes[i], &args, opts)
    });
    // The capture must end whatever happened, or the stream stays in capture mode.
    let graph = gpu.end_capture();
    captured?;
    let graph = graph?;
    graph.upload()?;
    Ok(graph)
}

/// Launches nodes `range` of `plan` one by one, paced as `pace` says (`marks` indexed by node);
/// a failure names its node ([`node_error`]).
pub(super) fn launch_nodes<'a>(
    gpu: &Gpu,
    module: &mut Module,
    plan: &Plan,
    range: Range<usize>,
    shapes: &[LaunchShape],
    place: &dyn Fn(usize) -> Place<'a>,
    pace: Pace<'_>,
) -> Result<(), ExecError> {
    for i in range {
        let (n, shape) = (&plan.nodes[i], shapes[i]);
        let args = node_args(n, place);
        let opts = launch_options(n, place, false);
        let done = match pace {
            Pace::Sync => gpu
                .launch_node(module, &n.kernel, shape, &args, opts)
                .and_then(|()| gpu.synchronize()),
            Pace::Marks(marks) => gpu
                .record(&marks[i])
                .and_then(|()| gpu.launch_node(module, &n.kernel, shape, &args, opts)),
        };
        if let Err(source) = done {
            return Err(node_error(plan, i, shape, source));
        }
    }
    Ok(())
}

/// A failing node of a prefill plan says so in its label (its index and count are the chunk
/// plan's).
pub(super) fn in_prefill(mut e: ExecError, ntok: usize, pos: usize) -> ExecError {
    if let ExecError::Node(failure) = &mut e {
        let label = &mut failure.label;
        *label = format!("{label} (prefill plan of {ntok} tokens, chunk at pos {pos})");
    }
    e
}

/// [`ExecError::Node`] for node `i` of `plan`, with its arguments spelled out (buffers by name
/// and byte offset).
pub(super) fn node_error(
    plan: &Plan,
    i: usize,
    shape: LaunchShape,
    source: ingot_cuda::CudaError,
) -> ExecError {
    let n = &plan.nodes[i];
    let args = n
        .args
        .iter()
        .map(|a| match *a {
            NodeArg::Buf(r) => {
                let name = plan
                    .buffers
                    .get(r.buf.0 as usize)
                    .map_or("?", |b| b.name.as_str());
                format!("{name}+{}", r.offset)
            }
            NodeArg::U32(v) => format!("u32 {v}"),
            NodeArg::I32(v) => format!("i32 {v}"),
            NodeArg::F32(v) => format!("f32 {v}"),
            NodeArg::U64(v) => format!("u64 {v}"),
        })
        .collect::<Vec<_>>()
        .join(", ");
    ExecError::Node(Box::new(NodeFailure {
        node: i,
        nodes: plan.nodes.len(),
        label: n.label.clone(),
        kernel: n.kernel.clone(),
        layer: n.layer,
        grid: shape.grid,
        block: shape.block,
        shared_bytes: shape.shared_bytes,
        args,
        source,
    }))
}

/// The decode plan's buffer `i`.
pub(super) fn decode_place<'a>(
    bufs: &'a [DeviceBuffer],
    mapped: &[Option<MappedBuffer>],
    i: usize,
) -> Place<'a> {
    match &mapped[i] {
        Some(m) => Place::Mapped(m.device_address()),
        None => Place::Dev(&bufs[i]),
    }
}

/// Every node's launch geometry, in plan order.
pub(super) fn shapes_of(plan: &Plan, descs: &[&'static KernelDesc]) -> Vec<LaunchShape> {
    plan.nodes
        .iter()
        .zip(descs)
        .map(|(n, d)| LaunchShape {
            grid: d.grid(n.items),
            block: d.block,
            shared_bytes: d.shared_bytes,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::buffer::{BufId, BufferDecl, BufferKind};
    use crate::node::BufRef;

    /// The eager mode's report must name the node, its kernel, layer, geometry and every
    /// argument (buffers by name and offset), and keep the driver's error.
    #[test]
    fn a_failing_node_is_named_with_its_launch() {
        let buf = |name: &str| BufferDecl {
            name: name.into(),
            kind: BufferKind::Activation,
            bytes: 4096,
        };
        let node = |kernel: &str, layer| Node {
            kernel: kernel.into(),
            label: format!("blk.{layer} attn_q"),
            layer: Some(layer),
            items: 8,
            args: vec![
                NodeArg::Buf(BufRef {
                    buf: BufId(1),
                    offset: 256,
                }),
                NodeArg::U32(2048),
                NodeArg::F32(0.5),
            ],
            l2_streaming: None,
        };
        let plan = Plan {
            buffers: vec![buf("act.residual"), buf("blk.3.attn_q.weight")],
            nodes: vec![node("rmsnorm_q8_1", 3), node("gemv_q4k_q8_1", 3)],
            n_layer: 4,
            ctx: 16,
            vocab: 8,
            n_embd: 8,
            residual: BufId(0),
            logits: BufId(0),
            step: BufId(0),
            host_embedding: false,
            device_argmax: true,
            expert_cache: None,
        };
        let shape = LaunchShape {
            grid: [64, 1, 1],
            block: [128, 1, 1],
            shared_bytes: 512,
        };
        let e = node_error(&plan, 1, shape, ingot_cuda::CudaError::EmptyGraph);
        let msg = e.to_string();
        for part in [
            "first failing node 1 of 2",
            "blk.3 attn_q",
            "kernel gemv_q4k_q8_1",
            "layer 3",
            "grid [64, 1, 1]",
            "block [128, 1, 1]",
            "512 B shared",
            "blk.3.attn_q.weight+256, u32 2048, f32 0.5",
            "empty CUDA graph",
        ] {
            assert!(msg.contains(part), "`{part}` missing from: {msg}");
        }
    }
}
