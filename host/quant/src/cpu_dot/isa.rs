//! The instruction sets the CPU kernels run on, what the running CPU has, and which one the
//! backend uses (`INGOT_CPU_ISA` can lower it).

/// The instruction set a [`super::RowDot`] runs its block kernels on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust: the block functions of [`crate::cpu_dot`].
    Scalar,
    /// x86-64 AVX2 + F16C kernels for every type [`super::RowDot`] covers, bit-identical to
    /// [`Isa::Scalar`].
    Avx2,
    /// [`Isa::Avx2`] plus AVX-VNNI (`vpdpbusd` on 256-bit vectors: Intel since Alder Lake and
    /// Sapphire Rapids, AMD since Zen 5) for the multi-activation products of the legacy types,
    /// bit-identical too.
    AvxVnni,
    /// [`Isa::Avx2`] plus AVX-512 F/BW/VL and AVX-512 VNNI (Intel since Ice Lake server and
    /// Sapphire Rapids, AMD since Zen 4): sixteen-row kernels for the multi-activation products of
    /// Q4_K, Q5_K and the legacy types, bit-identical too.
    Avx512,
}

/// Names an instruction set for [`Isa::detect`] to use instead of the fastest: `scalar`, `avx2`,
/// `avx-vnni` or `avx512` (e.g. the AVX2 path on an AVX-512 machine, to compare with a build of
/// llama.cpp for AVX2 only).
pub const ISA_VAR: &str = "INGOT_CPU_ISA";

impl Isa {
    /// Every instruction set, slowest first.
    pub const ALL: [Isa; 4] = [Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Avx512];

    /// The name `INGOT_CPU_ISA` takes and the bench's witness line prints.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::AvxVnni => "avx-vnni",
            Isa::Avx512 => "avx512",
        }
    }

    /// The instruction set the CPU backend runs on: the one `INGOT_CPU_ISA` names when the CPU has
    /// it, else the fastest the CPU has (a name that is unknown or not available here is said
    /// once on stderr). Decided once per process.
    pub fn detect() -> Isa {
        static CHOSEN: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
        *CHOSEN.get_or_init(|| {
            let want = std::env::var(ISA_VAR).ok();
            let (isa, why) = Isa::choose(want.as_deref());
            if let Some(why) = why {
                eprintln!("{why}");
            }
            isa
        })
    }

    /// The instruction set for a request (unset or empty: the fastest), and why the request was
    /// not followed when it was not.
    pub fn choose(requested: Option<&str>) -> (Isa, Option<String>) {
        let fastest = Isa::fastest();
        let want = requested.unwrap_or("").trim().to_ascii_lowercase();
        if want.is_empty() {
            return (fastest, None);
        }
        match Isa::ALL.into_iter().find(|i| i.name() == want) {
            Some(isa) if isa.is_available() => (isa, None),
            Some(isa) => (
                fastest,
                Some(format!(
                    "{ISA_VAR}={want}: this CPU has no {}; using {}",
                    isa.name(),
                    fastest.name()
                )),
            ),
            None => {
                let names: Vec<&str> = Isa::ALL.iter().map(|i| i.name()).collect();
                let why = format!(
                    "{ISA_VAR}={want:?} is not one of {}; using {}",
                    names.join(", "),
                    fastest.name()
                );
                (fastest, Some(why))
            }
        }
    }

    /// The fastest instruction set of the running CPU.
    pub fn fastest() -> Isa {
        if Isa::Avx512.is_available() {
            Isa::Avx512
        } else if Isa::AvxVnni.is_available() {
            Isa::AvxVnni
        } else if Isa::Avx2.is_available() {
            Isa::Avx2
        } else {
            Isa::Scalar
        }
    }

    /// Whether the running CPU executes this instruction set.
    pub fn is_available(self) -> bool {
        match self {
            Isa::Scalar => true,
            Isa::Avx2 => avx2_available(),
            Isa::AvxVnni => avx2_available() && avx_vnni_available(),
            Isa::Avx512 => avx2_available() && avx512_vnni_available(),
        }
    }
}

#[cfg(target_arch = "x86_64")]
fn avx2_available() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c")
}

#[cfg(not(target_arch = "x86_64"))]
fn avx2_available() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn avx_vnni_available() -> bool {
    std::arch::is_x86_feature_detected!("avxvnni")
}

#[cfg(not(target_arch = "x86_64"))]
fn avx_vnni_available() -> bool {
    false
}

#[cfg(target_arch = "x86_64")]
fn avx512_vnni_available() -> bool {
    use std::arch::is_x86_feature_detected as has;
    has!("avx512f") && has!("avx512bw") && has!("avx512vl") && has!("avx512vnni")
}

#[cfg(not(target_arch = "x86_64"))]
fn avx512_vnni_available() -> bool {
    false
}
