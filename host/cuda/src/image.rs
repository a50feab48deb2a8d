//! What a module image is: the PTX text the driver compiles or a cubin built offline. Named by the
//! loader (`module.rs`) and by its errors (`error.rs`), so it sits below both.

/// What a module was loaded from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModuleSource {
    /// PTX text, JIT-compiled by the driver (or taken from its compute cache).
    Ptx,
    /// A cubin built offline for this architecture (e.g. `sm_90a`): no compilation at load.
    Cubin(String),
}

impl ModuleSource {
    /// "PTX JIT" or "cubin sm_90a".
    pub fn describe(&self) -> String {
        match self {
            ModuleSource::Ptx => "PTX JIT".to_string(),
            ModuleSource::Cubin(arch) => format!("cubin {arch}"),
        }
    }
}
