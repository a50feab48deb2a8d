//! How offline-built cubins are named and checked against the PTX they were built from. Shared
//! by `cargo xtask cubins` (which writes them), `kernels/build.rs` (which embeds them) and
//! `ingot_kernels::cubin` (which picks one for a device), each of which includes this file.
//!
//! A cubin folder holds `ingot.<arch>.cubin.xz` for each architecture built and [`MANIFEST`], the
//! lower-case hex SHA-256 of the PTX text they were all built from and the [`FORMAT`] they were
//! built in, so a cubin can never be embedded beside a PTX it does not match, nor a Hopper cubin
//! without its kernels' waits be launched early.

/// Architectures `cargo xtask cubins` builds by default: the RTX 3090 / A6000 and Hopper.
pub const DEFAULT_ARCHS: [&str; 2] = ["sm_86", "sm_90a"];

/// How the cubins were built: those for sm_90 and later from `grid_dep::for_sm90` of the PTX (every
/// kernel waits on its predecessor, so it may be launched early), the others from the PTX itself.
pub const FORMAT: &str = "grid-dep-1";

/// Whether an architecture's cubin is built from the PTX rewritten for programmatic dependent
/// launch.
pub fn waits_on_predecessor(arch: &str) -> bool {
    parse_arch(arch).is_some_and(|(major, _, _)| major >= 9)
}

/// The manifest's text for cubins built from PTX of SHA-256 `ptx_sha256`.
pub fn manifest_text(ptx_sha256: &str) -> String {
    format!("{ptx_sha256} {FORMAT}\n")
}

/// The manifest's file name in a cubin folder.
pub const MANIFEST: &str = "ptx.sha256";

/// The file name of `arch`'s cubin in a cubin folder.
pub fn file_name(arch: &str) -> String {
    format!("ingot.{arch}.cubin.xz")
}

/// The architecture a cubin file name holds (`ingot.sm_90a.cubin.xz` -> `sm_90a`).
pub fn arch_of(file_name: &str) -> Option<&str> {
    let arch = file_name
        .strip_prefix("ingot.")?
        .strip_suffix(".cubin.xz")?;
    parse_arch(arch).map(|_| arch)
}

/// `(major, minor, arch_specific)` of an architecture name: `sm_86` -> (8, 6, false), `sm_90a` ->
/// (9, 0, true).
pub fn parse_arch(arch: &str) -> Option<(i32, i32, bool)> {
    let digits = arch.strip_prefix("sm_")?;
    let (digits, specific) = match digits.strip_suffix('a') {
        Some(d) => (d, true),
        None => (digits, false),
    };
    if digits.len() < 2 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (major, minor) = digits.split_at(digits.len() - 1);
    Some((major.parse().ok()?, minor.parse().ok()?, specific))
}

/// Whether a cubin for `arch` runs on a device of compute capability `cc`: SASS runs on its own
/// major revision at the same or a later minor one (sm_86 on 8.6 and 8.9), an arch-specific
/// cubin (`sm_90a`) only on exactly its own.
pub fn runs_on(arch: &str, cc: (i32, i32)) -> bool {
    match parse_arch(arch) {
        Some((major, minor, true)) => cc == (major, minor),
        Some((major, minor, false)) => cc.0 == major && cc.1 >= minor,
        None => false,
    }
}

/// Checks a manifest's text against the SHA-256 (lower-case hex) of the PTX being embedded.
pub fn check_manifest(manifest: &str, ptx_sha256: &str) -> Result<(), String> {
    let recorded = manifest.trim();
    if manifest == manifest_text(ptx_sha256) {
        Ok(())
    } else {
        Err(format!(
            "the cubins were built from PTX {recorded:?}, the committed PTX is {ptx_sha256} \
             (format {FORMAT}): rebuild them with `cargo xtask cubins`"
        ))
    }
}
