//! One way to open a decoder, whatever the backend.
//!
//! The CLI's `run`, `bench` and `gate` (and any server) name a backend with [`BackendKind`] and
//! get a [`Decoder`] from [`open`]; the graph executors are constructed here and nowhere else
//! ([`open_sim`], [`open_cuda`]), so plan options and device sizing are decided once.
//!
//! Invariant: this crate holds no decoding logic of its own; it only chooses and constructs.

mod budget;

use std::fmt;
use std::str::FromStr;

pub use budget::expert_slots;
pub use ingot_model::expert_cache::Policy;

use ingot_gguf::GgufFile;
use ingot_graph::exec::cuda::{CudaExecutor, CudaInfo};
use ingot_graph::exec::sim::SimExecutor;
use ingot_graph::{ExecError, ExpertCacheOptions, PlanOptions};
pub use ingot_model::CacheType;
pub use ingot_model::MlaForm;
use ingot_model::{CpuBackend, Decoder, ModelError, Oracle};

/// Which implementation decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum BackendKind {
    /// cuda when a usable GPU is present, else cpu.
    Auto,
    /// Weights stay quantized, activations quantized like llama.cpp's CPU backend, rows on all cores.
    Cpu,
    /// The f32/f64 reference every other backend is judged against (slow: weights dequantized to f32).
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
        match self {
            Self::Auto => "auto",
            Self::Cpu => "cpu",
            Self::Oracle => "oracle",
            Self::Sim => "sim",
            Self::Cuda => "cuda",
        }
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

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for BackendKind {
    type Err = EngineError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| EngineError::UnknownBackend(s.to_string()))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// `--vram-budget` cannot be met, or was given to a backend without VRAM.
    #[error("{0}")]
    Budget(String),
    /// `--cache-type` given to a backend that has no such cache.
    #[error("{0}")]
    CacheType(String),
    /// `--mla-form` given to a backend other than cpu.
    #[error("{0}")]
    MlaForm(String),
    #[error("unknown backend {0:?} (auto, cpu, oracle, sim, cuda)")]
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

/// An opened decoder and what it is.
pub struct Engine<'f> {
    pub decoder: Box<dyn Decoder + 'f>,
    /// The backend that was opened (`Auto` already resolved).
    pub kind: BackendKind,
    /// One line on what was loaded (device, graph size, VRAM, upload time), for `-v` and benches.
    pub description: String,
}

/// A VRAM budget for the GPU plan: routed experts that do not fit live in host memory, cached in
/// VRAM slots by `policy` (issue 18).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VramBudget {
    pub bytes: u64,
    pub policy: Policy,
    /// Cache-aware routing bonus (see [`ExpertCacheOptions::route_bonus`]); 0: off.
    pub route_bonus: f32,
}

/// Opens `kind` on `file` with a cache of `ctx` positions. `Auto` is resolved first;
/// `progress` draws an upload bar where a backend has one.
pub fn open(
    file: &GgufFile,
    kind: BackendKind,
    ctx: usize,
    progress: bool,
) -> Result<Engine<'_>, EngineError> {
    open_with_budget(
        file,
        kind,
        ctx,
        progress,
        None,
        CacheType::F16,
        MlaForm::Auto,
    )
}

/// [`open`] with an optional [`VramBudget`] (the sim and cuda backends only) and the latent
/// cache's number format (`--cache-type`; the oracle keeps full precision only) and the cpu backend's
/// prefill attention form (`--mla-form`; other backends take only `Auto`).
pub fn open_with_budget(
    file: &GgufFile,
    kind: BackendKind,
    ctx: usize,
    progress: bool,
    budget: Option<VramBudget>,
    cache_type: CacheType,
    mla_form: MlaForm,
) -> Result<Engine<'_>, EngineError> {
    let (kind, _) = kind.resolve();
    if mla_form != MlaForm::Auto && kind != BackendKind::Cpu {
        return Err(EngineError::MlaForm(format!(
            "--mla-form applies to the cpu backend's prefill, not to the {kind} backend"
        )));
    }
    if budget.is_some() && matches!(kind, BackendKind::Cpu | BackendKind::Oracle) {
        return Err(EngineError::Budget(format!(
            "--vram-budget applies to the GPU plan (--backend sim or cuda), not to the {kind} backend"
        )));
    }
    if cache_type != CacheType::F16 && kind == BackendKind::Oracle {
        return Err(EngineError::CacheType(format!(
            "the oracle keeps its cache in full precision; --cache-type {cache_type} applies to \
             the cpu, sim and cuda backends"
        )));
    }
    let plan_opts = plan_options(file, ctx, budget, cache_type)?;
    let cache = plan_opts.expert_cache;
    let model = |source| EngineError::Model { kind, source };
    let (decoder, mut description): (Box<dyn Decoder + '_>, String) = match kind {
        BackendKind::Auto => unreachable!("resolve never returns Auto"),
        BackendKind::Cpu => {
            let mut cpu = CpuBackend::load(file, ctx).map_err(model)?;
            cpu.set_cache_type(cache_type);
            cpu.set_mla_form(mla_form);
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
            let exec = open_sim_with(file, plan_opts)?;
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
            let (exec, info) = open_cuda_with(file, plan_opts, progress)?;
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

/// The plan options for `ctx` positions within `budget`: an expert cache when the plan does not
/// fit in it (see [`expert_slots`]).
pub fn plan_options(
    file: &GgufFile,
    ctx: usize,
    budget: Option<VramBudget>,
    cache_type: CacheType,
) -> Result<PlanOptions, EngineError> {
    let expert_cache = match budget {
        None => None,
        Some(b) => expert_slots(file.header(), ctx, b.bytes)?.map(|slots| ExpertCacheOptions {
            slots,
            policy: b.policy,
            route_bonus: b.route_bonus,
        }),
    };
    Ok(PlanOptions {
        expert_cache,
        cache_type,
        ..PlanOptions::for_ctx(ctx)
    })
}

/// The decode plan for `ctx` positions in the PTX simulator.
pub fn open_sim(file: &GgufFile, ctx: usize) -> Result<SimExecutor, EngineError> {
    open_sim_with(file, PlanOptions::for_ctx(ctx))
}

/// [`open_sim`] with explicit plan options (e.g. from [`plan_options`]).
pub fn open_sim_with(file: &GgufFile, opts: PlanOptions) -> Result<SimExecutor, EngineError> {
    SimExecutor::load(file, opts).map_err(|source| EngineError::Graph {
        kind: BackendKind::Sim,
        source,
    })
}

/// The decode plan for `ctx` positions as one CUDA graph on GPU 0 (the attention split is
/// sized to the device by the executor).
pub fn open_cuda(
    file: &GgufFile,
    ctx: usize,
    progress: bool,
) -> Result<(CudaExecutor, CudaInfo), EngineError> {
    open_cuda_with(file, PlanOptions::for_ctx(ctx), progress)
}

/// [`open_cuda`] with explicit plan options (e.g. from [`plan_options`]); the attention split
/// is still sized to the device.
pub fn open_cuda_with(
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
    format!(
        "cuda: {}; kernels: {}; one graph of {} nodes (at most {} per layer{}); {:.1} MiB of VRAM \
         for weights, cache and activations, uploaded in {:.2} s; {prefill}",
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
