//! One way to open a decoder, whatever the backend.
//!
//! The CLI's `run`, `bench` and `gate` (and any server) say what to open in an [`OpenOptions`] and
//! get a [`Decoder`] from [`OpenOptions::open`]; the graph executors are constructed here and
//! nowhere else ([`OpenOptions::open_sim`], [`OpenOptions::open_cuda`]), so plan options and device
//! sizing are decided once.
//!
//! Invariant: this crate holds no decoding logic of its own; it only chooses and constructs.

mod budget;

pub use budget::expert_slots;
pub use ingot_model::expert_cache::Policy;

use ingot_gguf::GgufFile;
use ingot_graph::exec::cuda::{CudaExecutor, CudaInfo};
use ingot_graph::exec::sim::SimExecutor;
use ingot_graph::{ExecError, ExpertCacheOptions, PlanOptions};
pub use ingot_model::CacheType;
pub use ingot_model::MlaForm;
use ingot_model::{CpuBackend, Decoder, ModelError, Oracle, DEFAULT_CTX};
use strum::{Display, EnumString, IntoStaticStr, VariantNames};

/// Which implementation decodes. Its name (`Display`, `FromStr`, [`BackendKind::name`]) is the
/// variant's in lower case; an unknown one parses to [`EngineError::UnknownBackend`].
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, Display, EnumString, IntoStaticStr, VariantNames,
)]
#[strum(
    serialize_all = "lowercase",
    parse_err_ty = EngineError,
    parse_err_fn = EngineError::unknown_backend
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum BackendKind {
    /// cuda when a usable GPU is present, else cpu.
    Auto,
    /// Weights stay quantized, activations quantized like llama.cpp's CPU backend, rows on all
    /// cores.
    Cpu,
    /// The f32/f64 reference every other backend is judged against (slow: weights dequantized to
    /// f32).
    Oracle,
    /// The CUDA graph's plan run in the PTX simulator.
    Sim,
    /// One CUDA graph per decode step on GPU 0.
    Cuda,
}

impl BackendKind {
    pub const ALL: [BackendKind; 5] = [Self::Auto, Self::Cpu, Self::Oracle, Self::Sim, Self::Cuda];

    /// The name on the command line (`cpu`, `sim`, ...).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// `Auto` becomes `Cuda` when GPU 0 opens, else `Cpu` with the reason; others are unchanged.
    pub fn resolve(self) -> (BackendKind, Option<String>) {
        if self != Self::Auto {
            return (self, None);
        }
        match ingot_cuda::Gpu::new(0) {
            Ok(_) => (Self::Cuda, None),
            Err(e) => (Self::Cpu, Some(e.to_string())),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// A VRAM budget the plan cannot meet (the message says what it needs).
    #[error("{0}")]
    Budget(String),
    /// A VRAM budget given to a backend without VRAM.
    #[error("a VRAM budget applies to the GPU plan (the sim and cuda backends), not to the {kind} backend")]
    BudgetBackend { kind: BackendKind },
    /// A narrower latent cache given to the oracle, which has only full precision.
    #[error(
        "the oracle keeps its cache in full precision; a {cache_type} cache applies to the cpu, sim \
         and cuda backends"
    )]
    CacheType { cache_type: CacheType },
    /// A prefill attention form other than `Auto` given to a backend other than cpu.
    #[error("only the cpu backend's prefill takes an attention form, not the {kind} backend's")]
    MlaForm { kind: BackendKind },
    #[error("unknown backend {0:?} ({names})", names = BackendKind::VARIANTS.join(", "))]
    UnknownBackend(String),
    #[error("{kind} backend: {source}")]
    Model {
        kind: BackendKind,
        #[source]
        source: ModelError,
    },
    #[error("{kind} backend: {source}")]
    Graph {
        kind: BackendKind,
        #[source]
        source: ExecError,
    },
}

impl EngineError {
    fn unknown_backend(name: &str) -> Self {
        EngineError::UnknownBackend(name.to_string())
    }
}

/// An opened decoder and what it is.
pub struct Engine<'f> {
    pub decoder: Box<dyn Decoder + 'f>,
    /// The backend that was opened (`Auto` already resolved).
    pub kind: BackendKind,
    /// One line on what was loaded (device, graph size, VRAM, upload time), for `-v` and benches.
    pub description: String,
}

/// A VRAM budget for the GPU plan: routed experts that do not fit live in host memory, cached in
/// VRAM slots by `policy`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VramBudget {
    pub bytes: u64,
    pub policy: Policy,
    /// Cache-aware routing bonus (see [`ExpertCacheOptions::route_bonus`]); 0: off.
    pub route_bonus: f32,
}

/// What to open and how. Default: `Auto` with a cache of [`DEFAULT_CTX`] positions, no progress
/// bar, no VRAM budget, an f16 latent cache, the cpu backend's own choice of prefill attention
/// form.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OpenOptions {
    /// Resolved by [`BackendKind::resolve`] when `Auto`.
    pub backend: BackendKind,
    /// Cache positions (prompt and generated tokens).
    pub ctx: usize,
    /// Draw an upload bar where the backend has one (cuda).
    pub progress: bool,
    /// The sim and cuda backends only.
    pub vram_budget: Option<VramBudget>,
    /// The latent cache's number format; the oracle takes only `F16`.
    pub cache_type: CacheType,
    /// The cpu backend's prefill attention form; other backends take only `Auto`.
    pub mla_form: MlaForm,
    /// The sim and cuda backends: the NextN/MTP head computes only the first `n` logits, all that
    /// drafts among the first `n` ids read (`--draft-vocab`); `None`: the whole vocabulary. The
    /// other backends compute every logit.
    pub mtp_head_rows: Option<usize>,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            backend: BackendKind::Auto,
            ctx: DEFAULT_CTX,
            progress: false,
            vram_budget: None,
            cache_type: CacheType::F16,
            mla_form: MlaForm::Auto,
            mtp_head_rows: None,
        }
    }
}

impl OpenOptions {
    /// `backend` with a cache of `ctx` positions, the rest default.
    pub fn new(backend: BackendKind, ctx: usize) -> Self {
        OpenOptions {
            backend,
            ctx,
            ..Self::default()
        }
    }

    /// Opens the decoder on `file`, after refusing an option the backend does not take.
    pub fn open<'f>(&self, file: &'f GgufFile) -> Result<Engine<'f>, EngineError> {
        let (kind, _) = self.backend.resolve();
        let (ctx, cache_type) = (self.ctx, self.cache_type);
        if self.mla_form != MlaForm::Auto && kind != BackendKind::Cpu {
            return Err(EngineError::MlaForm { kind });
        }
        if self.vram_budget.is_some() && matches!(kind, BackendKind::Cpu | BackendKind::Oracle) {
            return Err(EngineError::BudgetBackend { kind });
        }
        if cache_type != CacheType::F16 && kind == BackendKind::Oracle {
            return Err(EngineError::CacheType { cache_type });
        }
        let plan_opts = self.plan_options(file)?;
        let cache = plan_opts.expert_cache;
        let model = |source| EngineError::Model { kind, source };
        let (decoder, mut description): (Box<dyn Decoder + '_>, String) = match kind {
            BackendKind::Auto => unreachable!("resolve never returns Auto"),
            BackendKind::Cpu => {
                let mut cpu = CpuBackend::load(file, ctx).map_err(model)?;
                cpu.set_cache_type(cache_type);
                cpu.set_mla_form(self.mla_form);
                (
                    Box::new(cpu),
                    "cpu: quantized weights, all cores".to_string(),
                )
            }
            BackendKind::Oracle => (
                Box::new(Oracle::load(file, ctx).map_err(model)?),
                "oracle: weights dequantized to f32".to_string(),
            ),
            BackendKind::Sim => {
                let exec = load_sim(file, plan_opts)?;
                let mut description = format!("ptx-sim: {}", exec.plan().summary());
                if let Some(c) = cache {
                    description += &format!(
                        "; {} expert slots per MoE layer in VRAM ({}), the rest in host memory",
                        c.slots,
                        c.policy.name()
                    );
                }
                (Box::new(exec), description)
            }
            BackendKind::Cuda => {
                let (exec, info) = load_cuda(file, plan_opts, self.progress)?;
                (Box::new(exec), describe_cuda(&info))
            }
        };
        if cache_type != CacheType::F16 {
            description += &format!("; {cache_type} latent cache");
        }
        Ok(Engine {
            decoder,
            kind,
            description,
        })
    }

    /// The plan options for `ctx` positions within the VRAM budget: an expert cache when the plan
    /// does not fit in it (see [`expert_slots`]).
    pub fn plan_options(&self, file: &GgufFile) -> Result<PlanOptions, EngineError> {
        let expert_cache = match self.vram_budget {
            None => None,
            Some(b) => {
                expert_slots(file.header(), self.ctx, b.bytes)?.map(|slots| ExpertCacheOptions {
                    slots,
                    policy: b.policy,
                    route_bonus: b.route_bonus,
                })
            }
        };
        Ok(PlanOptions {
            expert_cache,
            cache_type: self.cache_type,
            mtp_head_rows: self.mtp_head_rows,
            ..PlanOptions::for_ctx(self.ctx)
        })
    }

    /// The decode plan in the PTX simulator, as the executor itself (for gates that drive it step
    /// by step); `backend`, `progress` and `mla_form` do not apply.
    pub fn open_sim(&self, file: &GgufFile) -> Result<SimExecutor, EngineError> {
        load_sim(file, self.plan_options(file)?)
    }

    /// The decode plan as one CUDA graph on GPU 0, as the executor itself; the attention split is
    /// sized to the device. `backend` and `mla_form` do not apply.
    pub fn open_cuda(&self, file: &GgufFile) -> Result<(CudaExecutor, CudaInfo), EngineError> {
        load_cuda(file, self.plan_options(file)?, self.progress)
    }
}

fn load_sim(file: &GgufFile, opts: PlanOptions) -> Result<SimExecutor, EngineError> {
    SimExecutor::load(file, opts).map_err(|source| EngineError::Graph {
        kind: BackendKind::Sim,
        source,
    })
}

fn load_cuda(
    file: &GgufFile,
    opts: PlanOptions,
    progress: bool,
) -> Result<(CudaExecutor, CudaInfo), EngineError> {
    CudaExecutor::load(file, opts, progress).map_err(|source| EngineError::Graph {
        kind: BackendKind::Cuda,
        source,
    })
}

fn describe_cuda(info: &CudaInfo) -> String {
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let prefill = match &info.prefill {
        Ok(buckets) => format!(
            "prefill in chunks of {} tokens ({:.1} MiB of their activations)",
            buckets
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join("/"),
            mib(info.prefill_bytes)
        ),
        Err(why) => format!("prefill replays the graph once per prompt token ({why})"),
    };
    let draft = match &info.draft {
        Ok(bytes) => format!(
            "--draft mtp: the NextN/MTP block ({:.1} MiB of VRAM from its first draft)",
            mib(*bytes)
        ),
        Err(why) => format!("no --draft mtp: {why}"),
    };
    let l2 = match info.l2_window_max {
        0 => "no L2 streaming window".to_string(),
        n => format!(
            "attn_output read evict-first (L2 windows up to {:.1} MiB)",
            mib(n as u64)
        ),
    };
    format!(
        "cuda: {}; kernels: {}; one graph of {} nodes (at most {} per layer{}); {:.1} MiB of VRAM \
         for weights, cache and activations, uploaded in {:.2} s; {l2}; {prefill}; {draft}",
        info.device,
        info.jit.summary(),
        info.nodes,
        info.nodes_per_layer,
        if info.early_launch {
            ", each started before its predecessor ends: programmatic dependent launch"
        } else {
            ""
        },
        mib(info.device_bytes),
        info.upload_s
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for k in BackendKind::ALL {
            assert_eq!(k.name().parse::<BackendKind>().unwrap(), k);
        }
        let err = "gpu".parse::<BackendKind>().unwrap_err().to_string();
        assert!(err.contains("\"gpu\"") && err.contains("cuda"), "{err}");
    }

    #[test]
    fn explicit_kinds_resolve_to_themselves() {
        for k in [
            BackendKind::Cpu,
            BackendKind::Oracle,
            BackendKind::Sim,
            BackendKind::Cuda,
        ] {
            assert_eq!(k.resolve(), (k, None));
        }
    }

    #[test]
    fn auto_resolves_to_a_concrete_backend_with_a_reason_for_cpu() {
        match BackendKind::Auto.resolve() {
            (BackendKind::Cuda, None) => {}
            (BackendKind::Cpu, Some(why)) => assert!(!why.is_empty()),
            other => panic!("auto resolved to {other:?}"),
        }
    }
}
