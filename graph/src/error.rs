//! Error types: [`PlanError`] for building and checking a plan, [`ExecError`] for running it.

use ingot_abi::launch::ParamKind;

/// Why a decode plan cannot be built or does not fit the kernel table.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// The model configuration or tensor table was rejected.
    #[error(transparent)]
    Model(#[from] ingot_model::ModelError),
    /// A tensor the plan needs is absent from the file.
    #[error("tensor {name} is missing")]
    MissingTensor { name: String },
    /// A tensor's type has no kernel for the role it plays.
    #[error("tensor {name} has type {ty}, which the {role} kernels do not support (supported: {supported})")]
    UnsupportedType {
        name: String,
        ty: &'static str,
        role: &'static str,
        supported: String,
    },
    /// A tensor's shape does not fit the kernel that reads it.
    #[error("tensor {name}: {reason}")]
    UnsupportedShape { name: String, reason: String },
    /// A model dimension the kernels cannot handle.
    #[error("unsupported model shape: {0}")]
    UnsupportedModel(String),
    /// `--ctx` is not a usable cache size.
    #[error("context size {ctx}: {reason}")]
    Context { ctx: usize, reason: String },
    /// Nodes name kernels that the committed PTX does not export yet.
    #[error("the plan needs kernels that the PTX module does not have: {}", .0.join(", "))]
    MissingKernels(Vec<String>),
    /// A node's arguments do not match its kernel's parameter list.
    #[error(
        "node {node} ({label}): kernel {kernel} takes {expected} parameters, the node passes {got}"
    )]
    ArgCount {
        node: usize,
        label: String,
        kernel: String,
        expected: usize,
        got: usize,
    },
    /// A node's argument has the wrong kind.
    #[error("node {node} ({label}): argument {index} (`{param}`) of {kernel} must be {expected:?}, the node passes {got:?}")]
    ArgKind {
        node: usize,
        label: String,
        kernel: String,
        index: usize,
        param: &'static str,
        expected: ParamKind,
        got: ParamKind,
    },
    /// A node references a buffer range outside its buffer.
    #[error("node {node} ({label}): argument {index} points at byte {offset} of buffer `{buffer}` ({len} bytes)")]
    BufferRange {
        node: usize,
        label: String,
        index: usize,
        buffer: String,
        offset: u64,
        len: u64,
    },
    /// A byte size overflowed.
    #[error("size of {0} overflows")]
    Overflow(String),
}

/// Why running a plan failed.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error(transparent)]
    Plan(#[from] PlanError),
    /// The simulator rejected a launch or faulted; names the node.
    #[error("ptx-sim, node {node} ({label}): {source}")]
    Sim {
        node: usize,
        label: String,
        #[source]
        source: ptx_sim::SimError,
    },
    /// Simulator setup (parsing the PTX, allocating, copying).
    #[error("ptx-sim: {0}")]
    SimSetup(#[source] ptx_sim::SimError),
    /// A CUDA call failed.
    #[error("cuda: {0}")]
    Cuda(#[from] ingot_cuda::CudaError),
    /// A node failed in eager mode (launch or the synchronisation after it): the first
    /// failing node of the step, with its launch spelled out. Boxed: the report is large and
    /// every `Result<_, ExecError>` would otherwise carry its size.
    #[error(transparent)]
    Node(Box<NodeFailure>),
    /// A CUDA graph replay failed; `localised` is what the automatic eager re-run found.
    #[error("CUDA graph replay at pos {pos} failed: {source}\n{localised}")]
    Replay {
        pos: usize,
        #[source]
        source: Box<ExecError>,
        localised: String,
    },
    /// A replay failed earlier and its context was released; load the model again.
    #[error("the CUDA executor is unusable after a failed replay (see the first error); load the model again")]
    Faulted,
    /// The device has less free memory than the plan needs (the decode plan's buffers, the
    /// prefill plans' activations, the headroom).
    #[error("not enough GPU memory: the model needs {needed} bytes ({needed_gib:.2} GiB) of device memory ({prefill} bytes of them the batched prefill's activations), {free} bytes ({free_gib:.2} GiB) are free; lower --ctx (fewer cache rows and prefill buckets) or use a smaller model", needed_gib = *.needed as f64 / GIB, free_gib = *.free as f64 / GIB)]
    OutOfMemory {
        needed: u64,
        free: u64,
        prefill: u64,
    },
    /// The model file's bytes for a weight are not what the header promised.
    #[error("weight {name}: {reason}")]
    Weight { name: String, reason: String },
    /// The plan has host steps (see `Plan::host_embedding`, `Plan::device_argmax`) that this
    /// mode of execution cannot interleave.
    #[error("{0}")]
    NeedsHost(&'static str),
    /// The routed experts' cache (`--vram-budget`) cannot run as asked.
    #[error("expert cache: {0}")]
    ExpertCache(String),
    /// The batched prefill cannot run as planned.
    #[error("prefill: {0}")]
    Prefill(String),
    /// The host asked for a step the cache cannot hold.
    #[error(transparent)]
    Step(#[from] ingot_model::ModelError),
}

/// The first failing node of an eager step ([`ExecError::Node`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "first failing node {node} of {nodes}: {label} (kernel {kernel}, {}), grid {grid:?}, block {block:?}, \
     {shared_bytes} B shared, args [{args}]: {source}",
    match layer { Some(l) => format!("layer {l}"), None => "outside the layers".to_string() }
)]
pub struct NodeFailure {
    pub node: usize,
    pub nodes: usize,
    pub label: String,
    pub kernel: String,
    pub layer: Option<usize>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
    pub args: String,
    #[source]
    pub source: ingot_cuda::CudaError,
}

const GIB: f64 = (1u64 << 30) as f64;
