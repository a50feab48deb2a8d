//! Cubins built offline (`cargo xtask cubins`, ptxas for sm_86 and sm_90a) and embedded by a build
//! with `INGOT_CUBINS` set: loading one takes milliseconds where the driver's JIT takes tens of
//! seconds for the whole PTX. A device no cubin runs on, or a build without them, loads the PTX.
//!
//! Invariant: every embedded cubin was built from [`crate::PTX`] itself (`build.rs` checks the
//! manifest's SHA-256 of the PTX text), so the kernels a cubin runs are the ones ptx-sim proves.

use ingot_cuda::{CudaError, Gpu, Module};

#[path = "cubin_files.rs"]
#[allow(dead_code)]
mod files;

pub use files::runs_on;

/// One embedded cubin, xz-compressed.
pub struct Cubin {
    /// `sm_86`, `sm_90a`, ...
    pub arch: &'static str,
    xz: &'static [u8],
}

/// The cubins this build embedded (empty unless built with `INGOT_CUBINS`).
pub static CUBINS: &[Cubin] = include!(concat!(env!("OUT_DIR"), "/cubins.rs"));

impl Cubin {
    /// The cubin's ELF image.
    pub fn image(&self) -> std::io::Result<Vec<u8>> {
        use std::io::Read;
        let mut out = Vec::new();
        xz2::read::XzDecoder::new(self.xz).read_to_end(&mut out)?;
        Ok(out)
    }

    /// Bytes of the embedded, compressed cubin.
    pub fn packed_len(&self) -> usize {
        self.xz.len()
    }
}

/// Set (to anything but `0`), [`load_module`] JIT-compiles the PTX even where a cubin would run:
/// the device check's JIT step, and a way around a cubin the driver mishandles.
pub const NO_CUBIN: &str = "INGOT_NO_CUBIN";

/// Whether [`NO_CUBIN`] is set.
pub fn cubins_disabled() -> bool {
    std::env::var_os(NO_CUBIN).is_some_and(|v| !v.is_empty() && v != "0")
}

/// The embedded cubin for a device of compute capability `cc`: the one of exactly its
/// architecture when there is one (`sm_90a` on 9.0), else one that runs on it.
pub fn for_device(cc: (i32, i32)) -> Option<&'static Cubin> {
    pick(CUBINS, cc)
}

fn pick(cubins: &'static [Cubin], cc: (i32, i32)) -> Option<&'static Cubin> {
    let exact = |c: &&Cubin| files::parse_arch(c.arch).is_some_and(|(m, n, _)| (m, n) == cc);
    cubins
        .iter()
        .find(|c| exact(c) && runs_on(c.arch, cc))
        .or_else(|| cubins.iter().find(|c| runs_on(c.arch, cc)))
}

/// Set (to anything but `0`), [`load_module`] declares no module as waiting on its predecessor, so
/// every kernel starts after the previous one has finished (their `griddepcontrol.wait` then
/// returns at once): the baseline programmatic dependent launch is measured against, and a way
/// around a driver that mishandles it.
pub const NO_PDL: &str = "INGOT_NO_PDL";

fn env_set(var: &str) -> bool {
    std::env::var_os(var).is_some_and(|v| !v.is_empty() && v != "0")
}

/// `module`, declared as waiting on its predecessor when its kernels were built so (`waits`) and
/// [`NO_PDL`] is not set.
fn with_waits(module: Module, waits: bool) -> Module {
    if waits && !env_set(NO_PDL) {
        module.with_grid_dependencies()
    } else {
        module
    }
}

/// Loads the kernels on `gpu`: its embedded cubin when there is one, else the PTX through the
/// driver's JIT. A cubin that fails to unpack or load falls back to the PTX; either way the
/// module's [`ingot_cuda::JitReport`] says what was loaded and, in `note`, why not a cubin. On
/// compute capability 9.0 and later the kernels are those of [`crate::grid_dep::for_sm90`] (the
/// Hopper cubins are built from them, `files::FORMAT`), which wait on their predecessor, and the
/// module says so ([`Module::waits_on_predecessor`]).
pub fn load_module(gpu: &Gpu) -> Result<Module, CudaError> {
    let cc = gpu.compute_capability()?;
    let arch = format!("sm_{}{}", cc.0, cc.1);
    let skip = cubins_disabled();
    let note = match for_device(cc) {
        Some(c) if skip => format!("{NO_CUBIN} is set: the {} cubin was not used", c.arch),
        Some(c) => match c.image() {
            Ok(image) => match gpu.load_cubin(&image, c.arch) {
                Ok(module) => return Ok(with_waits(module, files::waits_on_predecessor(c.arch))),
                Err(e) => format!(
                    "the {} cubin did not load ({e}); JIT-compiled the PTX",
                    c.arch
                ),
            },
            Err(e) => format!(
                "the {} cubin did not unpack ({e}); JIT-compiled the PTX",
                c.arch
            ),
        },
        None if CUBINS.is_empty() => {
            "this build has no cubins (build with INGOT_CUBINS, see `cargo xtask cubins`)".into()
        }
        None => {
            let have: Vec<&str> = CUBINS.iter().map(|c| c.arch).collect();
            format!(
                "no cubin for {arch} in this build (it has {})",
                have.join(", ")
            )
        }
    };
    if cc.0 >= 9 {
        match crate::grid_dep::for_sm90(crate::PTX) {
            Ok(text) => return Ok(with_waits(gpu.load_ptx(&text)?.with_note(note), true)),
            Err(e) => {
                let note = format!("{note}; {e}: the kernels start after their predecessor");
                return Ok(gpu.load_ptx(crate::PTX)?.with_note(note));
            }
        }
    }
    Ok(gpu.load_ptx(crate::PTX)?.with_note(note))
}

#[cfg(test)]
mod tests {
    use super::*;

    static TWO: [Cubin; 2] = [
        Cubin {
            arch: "sm_86",
            xz: &[],
        },
        Cubin {
            arch: "sm_90a",
            xz: &[],
        },
    ];

    #[test]
    fn a_device_gets_its_own_cubin_or_a_compatible_one_or_none() {
        let arch = |cc| pick(&TWO, cc).map(|c| c.arch);
        assert_eq!(arch((8, 6)), Some("sm_86"));
        assert_eq!(arch((8, 9)), Some("sm_86"), "sm_86 SASS runs on 8.9");
        assert_eq!(arch((9, 0)), Some("sm_90a"));
        assert_eq!(arch((8, 0)), None, "sm_86 SASS does not run on 8.0");
        assert_eq!(arch((10, 0)), None, "sm_90a is Hopper only");
        assert_eq!(arch((12, 0)), None);
    }

    #[test]
    fn arch_names_parse_and_bad_ones_do_not() {
        assert_eq!(files::parse_arch("sm_86"), Some((8, 6, false)));
        assert_eq!(files::parse_arch("sm_90a"), Some((9, 0, true)));
        assert_eq!(files::parse_arch("sm_120"), Some((12, 0, false)));
        for bad in ["sm_", "sm_9", "86", "sm_8x", "sm_90b", "compute_90"] {
            assert_eq!(files::parse_arch(bad), None, "{bad}");
        }
        assert_eq!(files::arch_of("ingot.sm_90a.cubin.xz"), Some("sm_90a"));
        assert_eq!(files::arch_of("ingot.sm_90a.cubin"), None);
        assert_eq!(files::arch_of("other.sm_86.cubin.xz"), None);
    }

    #[test]
    fn a_manifest_of_other_ptx_is_refused() {
        assert!(files::check_manifest(&files::manifest_text("abc"), "abc").is_ok());
        let e = files::check_manifest(&files::manifest_text("abc"), "abd").unwrap_err();
        assert!(e.contains("cargo xtask cubins"), "{e}");
        // A folder from before the Hopper cubins waited on their predecessor: its sm_90a cubin
        // must not be launched early, so it is not embedded at all.
        let e = files::check_manifest("abc\n", "abc").unwrap_err();
        assert!(e.contains(files::FORMAT), "{e}");
        assert!(files::waits_on_predecessor("sm_90a") && files::waits_on_predecessor("sm_100"));
        assert!(!files::waits_on_predecessor("sm_86") && !files::waits_on_predecessor("sm_89"));
    }

    /// Every cubin this build embeds unpacks to an ELF image naming every kernel of the PTX
    /// (ptxas keeps each `.entry` as a symbol). A build without cubins has nothing to check and
    /// says so.
    #[test]
    fn embedded_cubins_hold_every_kernel_of_the_ptx() {
        if CUBINS.is_empty() {
            eprintln!("no cubins in this build (INGOT_CUBINS unset): nothing to check");
            return;
        }
        let entries: Vec<&str> = crate::PTX
            .lines()
            .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
            .filter_map(|l| l.split('(').next())
            .collect();
        assert!(!entries.is_empty());
        for c in CUBINS {
            let image = c.image().expect("unpacks");
            assert!(image.starts_with(b"\x7fELF"), "{} is not ELF", c.arch);
            let strings: std::collections::HashSet<&[u8]> = image.split(|&b| b == 0).collect();
            for e in &entries {
                assert!(
                    strings.contains(e.as_bytes()),
                    "the {} cubin has no symbol {e}",
                    c.arch
                );
            }
        }
    }
}
