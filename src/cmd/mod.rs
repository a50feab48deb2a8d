pub mod bench;
pub mod cache;
pub mod demo;
pub mod draft;
pub mod experts;
pub mod gate;
pub mod inspect;
pub mod plan;
pub mod replay;
pub mod run;
pub mod serve;
pub mod slice;
pub mod synth;

/// An engine error with the flag that set the option at fault, where one did.
pub fn engine_error(e: ingot_engine::EngineError) -> anyhow::Error {
    use ingot_engine::EngineError as E;
    let flag = match &e {
        E::Budget(_) | E::BudgetBackend { .. } => "--vram-budget",
        E::CacheType { .. } => "--cache-type",
        E::MlaForm { .. } => "--mla-form",
        _ => return e.into(),
    };
    anyhow::Error::new(e).context(flag)
}
