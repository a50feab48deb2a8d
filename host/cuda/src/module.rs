//! A module loaded by the driver with its logs kept (`cuModuleLoadDataEx`): PTX text, which the
//! driver JIT-compiles, or a cubin built offline for this device's architecture, which it only
//! loads.
//!
//! `cuModuleLoadData` reports a bad module only as `CUDA_ERROR_INVALID_PTX`; the driver's JIT
//! (the same ptxas as the offline one) writes the line and reason into an error log that only the
//! `Ex` variant hands back. The info log (verbose: registers, spills, shared memory per kernel)
//! and the JIT's own wall time come with it, so the first load on a new card says what it cost.

use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::result::DriverError;
use cudarc::driver::sys::{self, CUjit_option};
use cudarc::driver::CudaContext;

use crate::error::{Call, CudaError};
use crate::image::ModuleSource;

/// Bytes reserved for each JIT log; the verbose info log of the whole module (one line of
/// registers/spills per kernel, about 90 kernels) fits easily, longer logs are cut.
const LOG_BYTES: usize = 1 << 20;

/// What the driver reported for a module that loaded.
#[derive(Clone, Debug)]
pub struct JitReport {
    /// What was loaded.
    pub source: ModuleSource,
    /// The JIT's own wall time (`CU_JIT_WALL_TIME`), milliseconds; 0 for a cubin.
    pub jit_ms: f32,
    /// Host wall time of the whole `cuModuleLoadDataEx` call, milliseconds (includes the
    /// driver's compute cache lookup: a hit makes both figures small).
    pub load_ms: f64,
    /// The verbose info log (per kernel: registers, stack, spills), possibly empty.
    pub info_log: String,
    /// Why the PTX was JIT-compiled rather than a cubin loaded, when the loader says.
    pub note: Option<String>,
}

impl JitReport {
    /// One line for a user: "cubin sm_90a loaded in 84 ms" or "PTX JIT-compiled in 41.2 s (why)".
    pub fn summary(&self) -> String {
        let what = match &self.source {
            ModuleSource::Cubin(arch) => format!("cubin {arch} loaded in {:.0} ms", self.load_ms),
            ModuleSource::Ptx => format!(
                "PTX JIT-compiled in {:.1} s (the driver caches it for the next run)",
                self.load_ms / 1e3
            ),
        };
        match &self.note {
            Some(n) => format!("{what}: {n}"),
            None => what,
        }
    }
}

/// A loaded PTX module; kernels are looked up by name on first use and cached.
pub struct Module {
    raw: sys::CUmodule,
    functions: HashMap<String, sys::CUfunction>,
    /// Keeps the context alive until the module is unloaded.
    ctx: Arc<CudaContext>,
    report: JitReport,
    /// Every kernel executes `griddepcontrol.wait` before touching memory other kernels write
    /// (`ingot_kernels::grid_dep`), so it may be launched before its predecessor finishes.
    waits_on_predecessor: bool,
    /// Launches after a kernel start early ([`crate::LaunchOptions::after_kernel`]); only ever true
    /// when `waits_on_predecessor`.
    early_launch: bool,
}

// SAFETY: the handles are plain driver objects, usable from any thread once the context is
// bound; every use binds it first (launches go through `Gpu`, which does).
unsafe impl Send for Module {}

impl Module {
    /// JIT-compiles `ptx` in `ctx`, keeping the error and info logs.
    pub(crate) fn load(ctx: &Arc<CudaContext>, ptx: &str) -> Result<Self, CudaError> {
        if let Some(at) = ptx.bytes().position(|b| b == 0) {
            return Err(CudaError::PtxNul(at));
        }
        let src = CString::new(ptx).map_err(|e| CudaError::PtxNul(e.nul_position()))?;
        Self::load_image(ctx, src.as_bytes_with_nul(), ModuleSource::Ptx)
    }

    /// Loads `cubin`, an ELF image ptxas built for architecture `arch`, in `ctx`.
    pub(crate) fn load_cubin(
        ctx: &Arc<CudaContext>,
        cubin: &[u8],
        arch: &str,
    ) -> Result<Self, CudaError> {
        if !cubin.starts_with(b"\x7fELF") {
            return Err(CudaError::NotCubin(arch.to_string()));
        }
        Self::load_image(ctx, cubin, ModuleSource::Cubin(arch.to_string()))
    }

    /// `cuModuleLoadDataEx` of `image` (NUL-terminated PTX text, or a cubin).
    fn load_image(
        ctx: &Arc<CudaContext>,
        image: &[u8],
        what: ModuleSource,
    ) -> Result<Self, CudaError> {
        ctx.bind_to_thread().call("cuCtxSetCurrent")?;
        let mut info = vec![0u8; LOG_BYTES];
        let mut error = vec![0u8; LOG_BYTES];
        let mut options = [
            CUjit_option::CU_JIT_WALL_TIME,
            CUjit_option::CU_JIT_INFO_LOG_BUFFER,
            CUjit_option::CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER,
            CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            CUjit_option::CU_JIT_LOG_VERBOSE,
        ];
        // Option values travel in pointer-sized slots: sizes and flags as integers, the wall
        // time comes back as an f32 in the low 32 bits of its slot.
        let mut values: [*mut c_void; 6] = [
            std::ptr::null_mut(),
            info.as_mut_ptr().cast(),
            LOG_BYTES as *mut c_void,
            error.as_mut_ptr().cast(),
            LOG_BYTES as *mut c_void,
            std::ptr::without_provenance_mut(1),
        ];
        let mut raw: sys::CUmodule = std::ptr::null_mut();
        let started = Instant::now();
        // SAFETY: `image` is NUL-terminated PTX or a whole ELF cubin (the driver reads a cubin's
        // length from its headers); the option arrays have equal length and the log buffers hold
        // LOG_BYTES bytes each and outlive the call.
        let result = unsafe {
            sys::cuModuleLoadDataEx(
                &mut raw,
                image.as_ptr().cast(),
                options.len() as u32,
                options.as_mut_ptr(),
                values.as_mut_ptr(),
            )
        };
        let load_ms = started.elapsed().as_secs_f64() * 1e3;
        let info_log = log_text(&info);
        if let Err(source) = result.result() {
            return Err(CudaError::Jit {
                module: what,
                source,
                error_log: log_text(&error),
                info_log,
            });
        }
        // A cubin is not compiled: whatever the slot holds then is not a time.
        let jit_ms = match what {
            ModuleSource::Ptx => f32::from_bits(values[0] as usize as u32),
            ModuleSource::Cubin(_) => 0.0,
        };
        Ok(Module {
            raw,
            functions: HashMap::new(),
            ctx: ctx.clone(),
            report: JitReport {
                source: what,
                jit_ms,
                load_ms,
                info_log,
                note: None,
            },
            waits_on_predecessor: false,
            early_launch: false,
        })
    }

    /// This module with `note` in its report (why it is not what the caller preferred).
    pub fn with_note(mut self, note: String) -> Self {
        self.report.note = Some(note);
        self
    }

    /// Declares that every kernel of this module waits on its predecessor grid before touching
    /// memory other kernels write (the caller built it so: `ingot_kernels::grid_dep`), which lets
    /// [`crate::LaunchOptions::after_kernel`] start it early.
    /// Early launches start on.
    pub fn with_grid_dependencies(mut self) -> Self {
        self.waits_on_predecessor = true;
        self.early_launch = true;
        self
    }

    /// Whether [`Module::with_grid_dependencies`] was declared.
    pub fn waits_on_predecessor(&self) -> bool {
        self.waits_on_predecessor
    }

    /// Turns early launches on or off (launches already captured into a graph keep theirs);
    /// returns whether they are now on, which they never are for kernels that do not wait.
    pub fn set_early_launch(&mut self, on: bool) -> bool {
        self.early_launch = on && self.waits_on_predecessor;
        self.early_launch
    }

    /// Whether launches after a kernel start before it has finished.
    pub fn early_launch(&self) -> bool {
        self.early_launch
    }

    /// The JIT's figures and info log for this module.
    pub fn jit_report(&self) -> &JitReport {
        &self.report
    }

    /// Looks kernel `name` up now, so that a later launch (e.g. during graph capture) makes no
    /// module call.
    pub fn prepare(&mut self, name: &str) -> Result<(), CudaError> {
        self.function(name).map(|_| ())
    }

    pub(crate) fn function(&mut self, name: &str) -> Result<sys::CUfunction, CudaError> {
        if let Some(&f) = self.functions.get(name) {
            return Ok(f);
        }
        let unknown = |source| CudaError::UnknownKernel {
            name: name.to_owned(),
            source,
        };
        let c_name = CString::new(name)
            .map_err(|_| unknown(DriverError(sys::cudaError_enum::CUDA_ERROR_INVALID_VALUE)))?;
        self.ctx.bind_to_thread().call("cuCtxSetCurrent")?;
        let mut f: sys::CUfunction = std::ptr::null_mut();
        // SAFETY: `raw` is a loaded module of this context; `c_name` is NUL-terminated.
        unsafe { sys::cuModuleGetFunction(&mut f, self.raw, c_name.as_ptr()) }
            .result()
            .map_err(unknown)?;
        self.functions.insert(name.to_owned(), f);
        Ok(f)
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: `raw` was loaded in `ctx` and is unloaded once. An error cannot be reported
        // from drop; the module then stays until the context goes, which is harmless.
        let _ = self.ctx.bind_to_thread();
        let _ = unsafe { sys::cuModuleUnload(self.raw) };
    }
}

/// The text of a NUL-terminated log buffer, trimmed.
fn log_text(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::log_text;

    #[test]
    fn log_text_stops_at_the_first_nul() {
        assert_eq!(
            log_text(b"ptxas error : line 3\n\0garbage"),
            "ptxas error : line 3"
        );
        assert_eq!(log_text(b"\0\0"), "");
        assert_eq!(log_text(b"no terminator"), "no terminator");
    }
}
