//! `cargo xtask peer`: llama.cpp's CUDA `llama-bench`, built here and packed into
//! `dist/peer-bundle.tar.xz` for `scripts/device-bench.sh peer` (ingot and llama.cpp on the same
//! card in the same call) and for the device check's load step.
//!
//! Everything it fetches or builds lives under `.tools/peer/` (git-ignored), in this order, each
//! step skipped when its result is already there:
//! 1. cmake and ninja from PyPI (`pip install --target .tools/peer/pytools`, pinned);
//! 2. the llama-cpp-python sdist ([`LLAMA_CPP_PYTHON`]), whose `vendor/llama.cpp` is the source
//!    the CPU comparisons use, unpacked under `src/`;
//! 3. NVIDIA's compiler, runtime and headers from PyPI wheels ([`CUDA_WHEELS`], CUDA 13.0, the
//!    version of the lent H200's 580 driver) unzipped into `cuda/`: a toolkit tree
//!    `cuda/nvidia/cu13` with nvcc, cicc, ptxas, libcudart_static.a and the cuBLAS headers (the
//!    cuBLAS libraries themselves are deleted: nothing links them);
//! 4. cmake configure into `build-sm<archs>/`, then the `ggml-cuda` target;
//! 5. from the symbols `libggml-cuda.a` leaves undefined (`nm -u`, never a hand-written list), two
//!    generated C files built with gcc: a cuBLAS stand-in archive whose every function prints
//!    "cuBLAS was called (<name>)" and aborts, and a link-time `libcuda.so.1` whose every
//!    function returns CUDA_ERROR_NO_DEVICE;
//! 6. the `llama-bench` target, statically linked against ggml, cudart, libstdc++ and the
//!    stand-in; its dynamic dependencies must be in [`SYSTEM_LIBS`];
//! 7. the bundle: `bin/llama-bench` (stripped), `rehearse/libcuda.so.1` (the link stub, put on the
//!    library path only where the system has no `libcuda.so.1`, so a machine without a driver
//!    can load llama-bench and be told "no GPU found"), `BUILD` (what was built, how) and
//!    `MANIFEST`; then the carry check against the device bundle.
//!
//! A second run whose inputs (pins, architectures, flags) match `dist/peer-bundle.inputs` only
//! checks the bundle and prints its size.

use crate::paths::{tools_dir, workspace_root};
use anyhow::{bail, ensure, Context, Result};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// The PyPI source package whose `vendor/llama.cpp` is built (the same source the CPU
/// comparisons in docs/perf.md use).
pub const LLAMA_CPP_PYTHON: &str = "llama-cpp-python==0.3.36";

/// NVIDIA's wheels, all CUDA 13.0 (the lent H200 runs driver 580, CUDA 13.0; a 13.0 runtime needs
/// nothing newer). nvcc, fatbinary, nvlink, ptxas | cicc, libdevice | the crt headers | cudart
/// (headers, libcudart_static.a) | CCCL (cub/thrust/libcu++ headers) | cuBLAS (headers only).
pub const CUDA_WHEELS: [&str; 6] = [
    "nvidia-cuda-nvcc==13.0.88",
    "nvidia-nvvm==13.0.88",
    "nvidia-cuda-crt==13.0.88",
    "nvidia-cuda-runtime==13.0.96",
    "nvidia-cuda-cccl==13.0.85",
    "nvidia-cublas==13.0.2.14",
];

/// The build tools, from PyPI (Debian's cmake may be absent or too old for the `90a` arch name).
pub const BUILD_TOOLS: [&str; 2] = ["cmake==4.4.5", "ninja==1.13.2"];

/// Libraries the bundled llama-bench may load from the GPU machine: glibc's and the driver's.
/// Everything else (libstdc++, libgcc, cudart, ggml) is linked statically.
pub const SYSTEM_LIBS: [&str; 7] = [
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "ld-linux-x86-64.so.2",
    "libcuda.so.1",
];

/// Where the bundle goes (carried to the GPU machine as an ignored path).
pub const BUNDLE: &str = "dist/peer-bundle.tar.xz";
/// Beside it: the inputs it was built from, one per line; equal inputs mean nothing to do.
const INPUTS: &str = "dist/peer-bundle.inputs";

/// What one device call may carry in all (the tool's hard limit), in bytes.
const CALL_LIMIT: u64 = 64 << 20;
/// The device bundle's size assumed when `dist/device-bundle.tar.xz` is absent: the reserve of
/// scripts/device-lib.sh (`BUNDLE_RESERVE_MIB`).
const DEVICE_BUNDLE_RESERVE: u64 = 12 << 20;

/// CUDA_ERROR_NO_DEVICE: what every function of the link-time libcuda stub returns.
const CUDA_ERROR_NO_DEVICE: u32 = 100;

const USAGE: &str = "usage: cargo xtask peer [--arch 90a[,86]] [--jobs N]
  builds llama.cpp's CUDA llama-bench (flash attention, static, cuBLAS stand-in) into
  dist/peer-bundle.tar.xz; --arch: the GPU architectures (default 90a, the H200; 86 for a 3090)";

/// The directories of one build, all under `.tools/peer`.
struct Layout {
    root: PathBuf,
    archs: Vec<String>,
}

impl Layout {
    fn pytools(&self) -> PathBuf {
        self.root.join("pytools")
    }
    fn cmake(&self) -> PathBuf {
        self.pytools().join("cmake/data/bin/cmake")
    }
    fn ninja(&self) -> PathBuf {
        self.pytools().join("bin/ninja")
    }
    fn source(&self) -> PathBuf {
        let (name, version) = LLAMA_CPP_PYTHON
            .split_once("==")
            .unwrap_or((LLAMA_CPP_PYTHON, ""));
        self.root
            .join("src")
            .join(format!("{}-{version}", name.replace('-', "_")))
            .join("vendor/llama.cpp")
    }
    fn toolkit(&self) -> PathBuf {
        self.root.join("cuda/nvidia/cu13")
    }
    fn standin(&self) -> PathBuf {
        self.root.join("standin")
    }
    fn build(&self) -> PathBuf {
        let tag: Vec<String> = self.archs.iter().map(|a| format!("sm{a}")).collect();
        self.root.join(format!("build-{}", tag.join("-")))
    }
}

pub fn run(args: &[&str]) -> Result<()> {
    let (archs, jobs) = parse_args(args)?;
    let layout = Layout {
        root: tools_dir().join("peer"),
        archs,
    };
    let root = workspace_root();
    let bundle = root.join(BUNDLE);
    let inputs = inputs_text(&layout);
    if bundle.is_file()
        && std::fs::read_to_string(root.join(INPUTS)).is_ok_and(|s| s == inputs)
        && layout.build().join("bin/llama-bench").is_file()
    {
        println!("peer: {BUNDLE} is up to date (inputs as in {INPUTS})");
        return report_size(&bundle);
    }
    for tool in ["gcc", "ar", "nm", "strip", "readelf"] {
        ensure!(
            Command::new(tool).arg("--version").output().is_ok(),
            "peer: `{tool}` is missing: install Debian's build-essential and binutils"
        );
    }
    let t0 = Instant::now();
    build_tools(&layout)?;
    source(&layout)?;
    toolkit(&layout)?;
    configure(&layout)?;
    let t_build = Instant::now();
    cmake_build(&layout, "ggml-cuda", jobs)?;
    let symbols = standins(&layout)?;
    cmake_build(&layout, "llama-bench", jobs)?;
    println!(
        "peer: built llama-bench in {:.0} s ({:.0} s since the start)",
        t_build.elapsed().as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
    pack(&layout, &symbols, &bundle)?;
    std::fs::write(root.join(INPUTS), inputs)?;
    report_size(&bundle)
}

fn parse_args(args: &[&str]) -> Result<(Vec<String>, usize)> {
    let mut archs = vec!["90a".to_string()];
    let mut jobs = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut it = args.iter();
    while let Some(&a) = it.next() {
        match a {
            "--arch" => archs = parse_archs(it.next().context(USAGE)?)?,
            "--jobs" => {
                jobs = it.next().context(USAGE)?.parse().context(USAGE)?;
                ensure!(jobs > 0, "{USAGE}");
            }
            _ => bail!("{USAGE}"),
        }
    }
    Ok((archs, jobs))
}

/// `90a,86` (with or without `sm_`) → `["90a", "86"]`: compute capability digits, optionally
/// with the architecture-specific `a`, no duplicates.
fn parse_archs(list: &str) -> Result<Vec<String>> {
    let mut out: Vec<String> = Vec::new();
    for a in list.split(',').map(str::trim) {
        let a = a.strip_prefix("sm_").unwrap_or(a);
        let digits = a.strip_suffix('a').unwrap_or(a);
        ensure!(
            digits.len() == 2 && digits.bytes().all(|b| b.is_ascii_digit()),
            "peer: `{a}` is not a GPU architecture such as 90a or 86"
        );
        ensure!(!out.iter().any(|o| o == a), "peer: `{a}` is given twice");
        out.push(a.to_string());
    }
    Ok(out)
}

/// CMAKE_CUDA_ARCHITECTURES: SASS only (`-real`), no PTX: the bundle runs on the named cards and
/// no JIT time hides in the first run.
fn cmake_archs(archs: &[String]) -> String {
    let real: Vec<String> = archs.iter().map(|a| format!("{a}-real")).collect();
    real.join(";")
}

/// The llama.cpp build options. Flash attention on with the f16 K/V kernels only (llama-bench's
/// default cache type; GGML_CUDA_FA_ALL_QUANTS off), CUDA graphs on (llama.cpp's default for its
/// own build), no NCCL, no OpenMP (ggml's own thread pool: one less shared library), nothing
/// built but what llama-bench needs; BUILD_SHARED_LIBS off and `-static-libstdc++
/// -static-libgcc` so one binary travels; cudart static; cuBLAS and libcuda point at the
/// generated stand-ins (step 5 of the module doc).
fn cmake_args(l: &Layout) -> Vec<String> {
    let t = l.toolkit();
    let s = l.standin();
    let cudart = t.join("lib/libcudart_static.a");
    let cublas = s.join("libcublas_standin.a");
    let p = |p: &Path| p.display().to_string();
    let mut v: Vec<String> = [
        "-G",
        "Ninja",
        "-DCMAKE_BUILD_TYPE=Release",
        "-DCMAKE_CUDA_RUNTIME_LIBRARY=Static",
        "-DGGML_CUDA=ON",
        "-DGGML_CUDA_FA=ON",
        "-DGGML_CUDA_FA_ALL_QUANTS=OFF",
        "-DGGML_CUDA_FA_QUANTS=f16-f16",
        "-DGGML_CUDA_GRAPHS=ON",
        "-DGGML_CUDA_NCCL=OFF",
        "-DGGML_NATIVE=OFF",
        "-DGGML_OPENMP=OFF",
        "-DGGML_CCACHE=OFF",
        "-DBUILD_SHARED_LIBS=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_SERVER=OFF",
        "-DLLAMA_BUILD_APP=OFF",
        "-DCMAKE_EXE_LINKER_FLAGS=-static-libstdc++ -static-libgcc",
    ]
    .map(String::from)
    .into();
    v.push(format!("-DCMAKE_MAKE_PROGRAM={}", p(&l.ninja())));
    v.push(format!("-DCMAKE_CUDA_COMPILER={}", p(&t.join("bin/nvcc"))));
    v.push(format!("-DCUDAToolkit_ROOT={}", p(&t)));
    v.push(format!(
        "-DCMAKE_CUDA_ARCHITECTURES={}",
        cmake_archs(&l.archs)
    ));
    // FindCUDAToolkit's cache variables: every CUDA::cudart* target is the static runtime.
    for var in [
        "CUDA_CUDART",
        "CUDA_cudart_LIBRARY",
        "CUDA_cudart_static_LIBRARY",
    ] {
        v.push(format!("-D{var}={}", p(&cudart)));
    }
    for var in ["CUDA_cublas_LIBRARY", "CUDA_cublasLt_LIBRARY"] {
        v.push(format!("-D{var}={}", p(&cublas)));
    }
    v.push(format!(
        "-DCUDA_cuda_driver_LIBRARY={}",
        p(&s.join("libcuda.so"))
    ));
    // llama-bench's `build_commit`: the sdist, not whatever repository encloses .tools/.
    v.push(format!("-DLLAMA_BUILD_COMMIT={LLAMA_CPP_PYTHON}"));
    v.push("-DLLAMA_BUILD_NUMBER=0".into());
    v
}

/// What the bundle depends on; a bundle built from other inputs is rebuilt.
fn inputs_text(l: &Layout) -> String {
    let mut s = format!("source {LLAMA_CPP_PYTHON}\n");
    for w in CUDA_WHEELS.iter().chain(&BUILD_TOOLS) {
        let _ = writeln!(s, "wheel {w}");
    }
    let _ = writeln!(s, "archs {}", cmake_archs(&l.archs));
    for a in cmake_args(l)
        .iter()
        .filter(|a| a.starts_with("-DGGML") || a.starts_with("-DCMAKE_EXE"))
    {
        let _ = writeln!(s, "flag {a}");
    }
    s
}

/// `pip install --target` the pinned cmake and ninja, unless their stamp lists exactly them.
fn build_tools(l: &Layout) -> Result<()> {
    let dir = l.pytools();
    let stamp = dir.join(".ingot-pins");
    let want = BUILD_TOOLS.join("\n");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == want) && l.cmake().is_file() {
        return Ok(());
    }
    println!(
        "peer: installing {} into {}",
        BUILD_TOOLS.join(", "),
        dir.display()
    );
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    pip(
        &[
            "install",
            "--no-deps",
            "--quiet",
            "--target",
            &dir.display().to_string(),
        ],
        &BUILD_TOOLS,
    )?;
    ensure!(
        l.cmake().is_file() && l.ninja().is_file(),
        "peer: pip installed cmake/ninja but {} or {} is missing",
        l.cmake().display(),
        l.ninja().display()
    );
    std::fs::write(&stamp, want)?;
    Ok(())
}

/// The sdist, downloaded with pip (the only llama-cpp-python file fetched is its source; pip
/// prepares its metadata with the build backend's own wheels) and unpacked with Python's tarfile.
fn source(l: &Layout) -> Result<()> {
    if l.source().join("CMakeLists.txt").is_file() {
        return Ok(());
    }
    let dl = l.root.join("dl");
    std::fs::create_dir_all(&dl)?;
    println!("peer: downloading the {LLAMA_CPP_PYTHON} sdist");
    pip(
        &[
            "download",
            "--no-deps",
            "--quiet",
            "--no-binary",
            "llama-cpp-python",
            "-d",
            &dl.display().to_string(),
        ],
        &[LLAMA_CPP_PYTHON],
    )?;
    let version = LLAMA_CPP_PYTHON.split("==").nth(1).unwrap_or("");
    let sdist = dl.join(format!("llama_cpp_python-{version}.tar.gz"));
    ensure!(
        sdist.is_file(),
        "peer: pip did not leave {}",
        sdist.display()
    );
    let dest = l.root.join("src");
    std::fs::create_dir_all(&dest)?;
    python(
        "import sys, tarfile\nwith tarfile.open(sys.argv[1]) as t:\n    t.extractall(sys.argv[2], filter='data')\n",
        &[&sdist, &dest],
    )?;
    ensure!(
        l.source().join("CMakeLists.txt").is_file(),
        "peer: {} has no vendor/llama.cpp/CMakeLists.txt",
        sdist.display()
    );
    Ok(())
}

/// The CUDA 13.0 toolkit tree from [`CUDA_WHEELS`]; complete when nvcc, cicc, the static runtime
/// and cublas_v2.h are there.
fn toolkit(l: &Layout) -> Result<()> {
    let t = l.toolkit();
    let needed = [
        "bin/nvcc",
        "bin/ptxas",
        "bin/fatbinary",
        "nvvm/bin/cicc",
        "lib/libcudart_static.a",
        "include/cuda_runtime.h",
        "include/crt/host_config.h",
        "include/cccl/cub/cub.cuh",
        "include/cublas_v2.h",
    ];
    let stamp = l.root.join("cuda/.ingot-pins");
    let want = CUDA_WHEELS.join("\n");
    if std::fs::read_to_string(&stamp).is_ok_and(|s| s == want)
        && needed.iter().all(|f| t.join(f).exists())
    {
        return Ok(());
    }
    let wheels = l.root.join("wheels");
    std::fs::create_dir_all(&wheels)?;
    println!("peer: downloading {}", CUDA_WHEELS.join(", "));
    pip(
        &[
            "download",
            "--no-deps",
            "--quiet",
            "-d",
            &wheels.display().to_string(),
        ],
        &CUDA_WHEELS,
    )?;
    let cuda = l.root.join("cuda");
    if cuda.exists() {
        std::fs::remove_dir_all(&cuda)?;
    }
    std::fs::create_dir_all(&cuda)?;
    for spec in CUDA_WHEELS {
        let (name, version) = spec.split_once("==").unwrap_or((spec, ""));
        let prefix = format!("{}-{version}-", name.replace('-', "_"));
        let wheel = std::fs::read_dir(&wheels)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".whl"))
            })
            .with_context(|| format!("peer: no {prefix}*.whl in {}", wheels.display()))?;
        // Python's zipfile, not `unzip`; the cuBLAS libraries (hundreds of MB) are skipped: only
        // its headers are compiled against.
        python(
            "import sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nz.extractall(sys.argv[2], [n for n in z.namelist() if not ('/libcublas' in n or '/libnvblas' in n)])\n",
            &[&wheel, &cuda],
        )?;
    }
    for dir in ["bin", "nvvm/bin"] {
        for e in std::fs::read_dir(t.join(dir))? {
            let path = e?.path();
            if path.is_file() {
                make_executable(&path)?;
            }
        }
    }
    // nvcc.profile adds `-L$(TOP)/lib64`; the wheels install `lib`.
    let lib64 = t.join("lib64");
    if !lib64.exists() {
        std::os::unix::fs::symlink("lib", &lib64)?;
    }
    for f in needed {
        ensure!(
            t.join(f).exists(),
            "peer: the CUDA wheels did not provide {}",
            t.join(f).display()
        );
    }
    std::fs::write(&stamp, want)?;
    Ok(())
}

/// cmake configure (a no-op when nothing changed). The stand-ins must exist as files for the
/// configure: placeholders until [`standins`] writes the real ones.
fn configure(l: &Layout) -> Result<()> {
    let s = l.standin();
    std::fs::create_dir_all(&s)?;
    if !s.join("libcublas_standin.a").is_file() || !s.join("libcuda.so").is_file() {
        build_standins(l, &[], &[])?;
    }
    println!(
        "peer: configuring {} (archs {})",
        l.build().display(),
        cmake_archs(&l.archs)
    );
    let mut cmd = Command::new(l.cmake());
    cmd.arg("-S")
        .arg(l.source())
        .arg("-B")
        .arg(l.build())
        .args(cmake_args(l));
    // Git must not find the repository around .tools/ (llama.cpp asks git for its version).
    cmd.env("GIT_CEILING_DIRECTORIES", l.root.join("src"));
    let out = cmd.output().context("running cmake")?;
    if !out.status.success() {
        let log = String::from_utf8_lossy(&out.stdout) + String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        bail!(
            "peer: cmake configure failed:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(())
}

fn cmake_build(l: &Layout, target: &str, jobs: usize) -> Result<()> {
    println!(
        "peer: building {target} ({jobs} jobs; ggml-cuda is ~140 nvcc compiles, long on few cores)"
    );
    let t = Instant::now();
    let status = Command::new(l.cmake())
        .args(["--build"])
        .arg(l.build())
        .args(["--target", target, "-j", &jobs.to_string()])
        .env("GIT_CEILING_DIRECTORIES", l.root.join("src"))
        .status()
        .context("running cmake --build")?;
    ensure!(
        status.success(),
        "peer: building {target} failed ({status}); the build log is above"
    );
    println!("peer: {target} done in {:.0} s", t.elapsed().as_secs_f64());
    Ok(())
}

/// Writes and builds the stand-ins for the cuBLAS and driver symbols libggml-cuda.a references.
/// Returns the cuBLAS names.
fn standins(l: &Layout) -> Result<Vec<String>> {
    let lib = l.build().join("ggml/src/ggml-cuda/libggml-cuda.a");
    let out = Command::new("nm")
        .arg("-u")
        .arg(&lib)
        .output()
        .context("running nm")?;
    ensure!(out.status.success(), "peer: nm -u {} failed", lib.display());
    let undefined = undefined_symbols(&String::from_utf8_lossy(&out.stdout));
    let cublas = cublas_symbols(&undefined);
    let driver = driver_symbols(&undefined);
    ensure!(
        !cublas.is_empty(),
        "peer: {} references no cuBLAS function: has ggml-cuda changed?",
        lib.display()
    );
    println!(
        "peer: ggml-cuda references {} cuBLAS functions (stand-ins that abort) and {} driver functions",
        cublas.len(),
        driver.len()
    );
    build_standins(l, &cublas, &driver)?;
    Ok(cublas)
}

fn build_standins(l: &Layout, cublas: &[String], driver: &[String]) -> Result<()> {
    let s = l.standin();
    std::fs::create_dir_all(&s)?;
    let cublas_c = s.join("cublas_standin.c");
    let cuda_c = s.join("cuda_stub.c");
    write_if_changed(&cublas_c, &cublas_standin_c(cublas))?;
    write_if_changed(&cuda_c, &cuda_stub_c(driver))?;
    let obj = s.join("cublas_standin.o");
    let archive = s.join("libcublas_standin.a");
    run_tool(
        Command::new("gcc")
            .args(["-O2", "-fPIC", "-c"])
            .arg(&cublas_c)
            .arg("-o")
            .arg(&obj),
    )?;
    let _ = std::fs::remove_file(&archive);
    run_tool(Command::new("ar").arg("rcs").arg(&archive).arg(&obj))?;
    run_tool(
        Command::new("gcc")
            .args(["-O2", "-fPIC", "-shared", "-Wl,-soname,libcuda.so.1"])
            .arg(&cuda_c)
            .arg("-o")
            .arg(s.join("libcuda.so")),
    )?;
    Ok(())
}

/// Undefined symbols in `nm -u` output (archive member headers and blank lines skipped).
fn undefined_symbols(nm: &str) -> BTreeSet<String> {
    nm.lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace().rev();
            let name = it.next()?;
            (it.next()? == "U").then(|| name.split('@').next().unwrap_or(name).to_string())
        })
        .collect()
}

/// cuBLAS / cuBLASLt entry points: `cublas*`.
fn cublas_symbols(undefined: &BTreeSet<String>) -> Vec<String> {
    undefined
        .iter()
        .filter(|s| s.starts_with("cublas"))
        .cloned()
        .collect()
}

/// Driver API entry points: `cu` then an upper-case letter (`cuMemCreate`); the runtime's
/// `cuda*` and cuBLAS's `cublas*` are not.
fn driver_symbols(undefined: &BTreeSet<String>) -> Vec<String> {
    undefined
        .iter()
        .filter(|s| {
            s.strip_prefix("cu")
                .and_then(|r| r.chars().next())
                .is_some_and(|c| c.is_ascii_uppercase())
        })
        .cloned()
        .collect()
}

/// The cuBLAS stand-in: one function per name, each printing which was called and aborting. It
/// is called with cuBLAS's arguments and ignores them; it never returns, so its C signature does
/// not matter to the caller.
fn cublas_standin_c(names: &[String]) -> String {
    let mut s = String::from(
        "/* Generated by `cargo xtask peer` from the cuBLAS symbols libggml-cuda.a references.\n   \
         The peer bundle carries no cuBLAS: a call means this run needs it, and must not be\n   \
         measured with this bundle. */\n#include <stdio.h>\n#include <stdlib.h>\n\n\
         const char ingot_peer_cublas_standin[] = \"ingot peer cuBLAS stand-in\";\n\n\
         static void ingot_peer_no_cublas(const char *name) {\n    \
         fprintf(stderr, \"cuBLAS was called (%s): the peer bundle has no cuBLAS; this llama.cpp \
         run needs it, so it cannot be measured with the bundle\\n\", name);\n    \
         fflush(stderr);\n    abort();\n}\n\n",
    );
    for n in names {
        let _ = writeln!(
            s,
            "int {n}(void) {{ ingot_peer_no_cublas(\"{n}\"); return 1; }}"
        );
    }
    s
}

/// The link-time libcuda.so.1: the driver functions ggml-cuda links plus those cudart looks up
/// when it opens the driver, each returning CUDA_ERROR_NO_DEVICE. On a machine with a GPU the
/// real libcuda.so.1 is found first and this file is never loaded.
fn cuda_stub_c(names: &[String]) -> String {
    let mut all: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    all.extend([
        "cuInit",
        "cuDriverGetVersion",
        "cuGetProcAddress",
        "cuGetProcAddress_v2",
        "cuGetExportTable",
    ]);
    let mut s = format!(
        "/* Generated by `cargo xtask peer`: a libcuda.so.1 to link against and to load where no\n   \
         driver is installed. Every function returns CUDA_ERROR_NO_DEVICE ({CUDA_ERROR_NO_DEVICE}). */\n\n"
    );
    for n in all {
        let _ = writeln!(s, "int {n}(void) {{ return {CUDA_ERROR_NO_DEVICE}; }}");
    }
    s
}

/// The names in `needed` (DT_NEEDED entries) that are not in [`SYSTEM_LIBS`].
fn foreign_libs(needed: &[String]) -> Vec<String> {
    needed
        .iter()
        .filter(|n| !SYSTEM_LIBS.contains(&n.as_str()))
        .cloned()
        .collect()
}

/// DT_NEEDED entries in `readelf -d` output: `(NEEDED) Shared library: [libc.so.6]`.
fn needed_libs(readelf: &str) -> Vec<String> {
    readelf
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .filter_map(|l| Some(l.split_once('[')?.1.split_once(']')?.0.to_string()))
        .collect()
}

fn pack(l: &Layout, cublas: &[String], bundle: &Path) -> Result<()> {
    let exe = l.build().join("bin/llama-bench");
    let nm = Command::new("nm")
        .arg(&exe)
        .output()
        .context("running nm")?;
    ensure!(
        String::from_utf8_lossy(&nm.stdout).contains("ingot_peer_cublas_standin"),
        "peer: {} does not contain the cuBLAS stand-in: it linked another cuBLAS",
        exe.display()
    );
    let elf = Command::new("readelf")
        .arg("-d")
        .arg(&exe)
        .output()
        .context("running readelf")?;
    let needed = needed_libs(&String::from_utf8_lossy(&elf.stdout));
    let foreign = foreign_libs(&needed);
    ensure!(
        foreign.is_empty(),
        "peer: llama-bench needs {} beyond glibc and the driver; the GPU machine may lack them",
        foreign.join(", ")
    );
    let stage = l.root.join("stage");
    if stage.exists() {
        std::fs::remove_dir_all(&stage)?;
    }
    std::fs::create_dir_all(stage.join("bin"))?;
    std::fs::create_dir_all(stage.join("rehearse"))?;
    std::fs::copy(&exe, stage.join("bin/llama-bench"))?;
    run_tool(Command::new("strip").arg(stage.join("bin/llama-bench")))?;
    std::fs::copy(
        l.standin().join("libcuda.so"),
        stage.join("rehearse/libcuda.so.1"),
    )?;
    let mut build = format!(
        "llama.cpp llama-bench from the {LLAMA_CPP_PYTHON} sdist (vendor/llama.cpp), built by `cargo xtask peer`\n\
         CUDA architectures: {}\nneeds: {}\n",
        cmake_archs(&l.archs),
        needed.join(" ")
    );
    for w in CUDA_WHEELS.iter().chain(&BUILD_TOOLS) {
        let _ = writeln!(build, "wheel: {w}");
    }
    for a in cmake_args(l).iter().filter(|a| !a.contains('/')) {
        let _ = writeln!(build, "cmake: {a}");
    }
    let _ = writeln!(
        build,
        "cuBLAS stand-ins (abort when called): {}",
        cublas.join(" ")
    );
    std::fs::write(stage.join("BUILD"), build)?;
    let mut manifest = String::new();
    for f in ["bin/llama-bench", "rehearse/libcuda.so.1", "BUILD"] {
        let _ = writeln!(manifest, "{} {f}", std::fs::metadata(stage.join(f))?.len());
    }
    std::fs::write(stage.join("MANIFEST"), manifest)?;
    std::fs::create_dir_all(bundle.parent().context("bundle path")?)?;
    println!("peer: packing {}", bundle.display());
    python(
        "import os, sys, tarfile\nstage, out = sys.argv[1], sys.argv[2]\nwith tarfile.open(out + '.tmp', 'w:xz', preset=9) as tar:\n    for name in sorted(os.listdir(stage)):\n        tar.add(os.path.join(stage, name), arcname=name)\nos.replace(out + '.tmp', out)\n",
        &[&stage, bundle],
    )?;
    Ok(())
}

/// How the peer bundle travels: with the device bundle and the tree in one call, or alone.
#[derive(Debug, PartialEq)]
enum Carry {
    WithDeviceBundle { total: u64 },
    OwnCall { total: u64 },
    TooLarge { total: u64 },
}

fn carry_plan(tree: u64, device_bundle: u64, peer: u64) -> Carry {
    if tree + device_bundle + peer <= CALL_LIMIT {
        Carry::WithDeviceBundle {
            total: tree + device_bundle + peer,
        }
    } else if tree + peer <= CALL_LIMIT {
        Carry::OwnCall { total: tree + peer }
    } else {
        Carry::TooLarge { total: tree + peer }
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

fn report_size(bundle: &Path) -> Result<()> {
    let peer = std::fs::metadata(bundle)?.len();
    let tree = tree_bytes()?;
    let device = workspace_root().join("dist/device-bundle.tar.xz");
    let (device_bytes, device_label) = match std::fs::metadata(&device) {
        Ok(m) => (m.len(), "device bundle"),
        Err(_) => (
            DEVICE_BUNDLE_RESERVE,
            "device bundle reserve (not built here)",
        ),
    };
    println!("peer: {BUNDLE}: {peer} bytes ({:.1} MiB)", mib(peer));
    let plan = carry_plan(tree, device_bytes, peer);
    println!(
        "peer: carry: tree {:.1} MiB + {device_label} {:.1} MiB + peer bundle {:.1} MiB",
        mib(tree),
        mib(device_bytes),
        mib(peer)
    );
    match plan {
        Carry::WithDeviceBundle { total } => println!(
            "peer: {:.1} MiB of the {} MiB a call carries: both bundles travel in one call \
             (carry dist/device-bundle.tar.xz and {BUNDLE}; run scripts/device-bench.sh peer)",
            mib(total),
            CALL_LIMIT >> 20
        ),
        Carry::OwnCall { total } => println!(
            "peer: with the device bundle it exceeds the {} MiB a call carries; alone {:.1} MiB: \
             it travels in its own call (the load check), and scripts/device-bench.sh peer cannot run",
            CALL_LIMIT >> 20,
            mib(total)
        ),
        Carry::TooLarge { total } => bail!(
            "peer: the tree and the peer bundle alone are {:.1} MiB, over the {} MiB a call carries",
            mib(total),
            CALL_LIMIT >> 20
        ),
    }
    Ok(())
}

/// Bytes of the working tree a device call carries (tracked and untracked-not-ignored files),
/// as scripts/device-lib.sh's `carried_tree_bytes` counts them.
fn tree_bytes() -> Result<u64> {
    let root = workspace_root();
    let out = Command::new("git")
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .current_dir(&root)
        .output()
        .context("running git ls-files")?;
    ensure!(out.status.success(), "peer: git ls-files failed");
    Ok(out
        .stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .filter_map(|p| std::fs::metadata(root.join(String::from_utf8_lossy(p).as_ref())).ok())
        .map(|m| m.len())
        .sum())
}

fn pip(args: &[&str], specs: &[&str]) -> Result<()> {
    let status = Command::new("python3")
        .args(["-m", "pip"])
        .args(args)
        .args(specs)
        .status()
        .context("running `python3 -m pip` (Python 3 with pip is needed)")?;
    ensure!(
        status.success(),
        "peer: pip {} {} failed ({status}): is PyPI reachable?",
        args[0],
        specs.join(" ")
    );
    Ok(())
}

fn python(script: &str, args: &[&Path]) -> Result<()> {
    let status = Command::new("python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .status()
        .context("running python3")?;
    ensure!(status.success(), "peer: a Python step failed ({status})");
    Ok(())
}

fn run_tool(cmd: &mut Command) -> Result<()> {
    let shown = format!("{cmd:?}");
    let status = cmd.status().with_context(|| format!("running {shown}"))?;
    ensure!(status.success(), "peer: {shown} failed ({status})");
    Ok(())
}

fn write_if_changed(path: &Path, text: &str) -> Result<()> {
    if std::fs::read_to_string(path).is_ok_and(|s| s == text) {
        return Ok(());
    }
    std::fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn make_executable(path: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let mut perm = std::fs::metadata(path)?.permissions();
    perm.set_mode(perm.mode() | 0o755);
    std::fs::set_permissions(path, perm)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archs_parse_and_map_to_real_sass_only() {
        assert_eq!(parse_archs("90a").unwrap(), ["90a"]);
        assert_eq!(parse_archs("sm_90a, 86").unwrap(), ["90a", "86"]);
        assert_eq!(
            cmake_archs(&parse_archs("90a,86").unwrap()),
            "90a-real;86-real"
        );
        for bad in ["", "9", "sm90", "90b", "90a,90a", "x86"] {
            assert!(parse_archs(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn args_default_to_the_h200() {
        let (archs, jobs) = parse_args(&[]).unwrap();
        assert_eq!(archs, ["90a"]);
        assert!(jobs > 0);
        assert_eq!(
            parse_args(&["--arch", "90a,86", "--jobs", "3"]).unwrap(),
            (vec!["90a".into(), "86".into()], 3)
        );
        assert!(parse_args(&["--jobs", "0"]).is_err());
        assert!(parse_args(&["--arch"]).is_err());
        assert!(parse_args(&["build"]).is_err());
    }

    #[test]
    fn nm_output_splits_into_cublas_and_driver_symbols() {
        let nm = "\nggml-cuda.cu.o:\n                 U cublasCreate_v2\n                 U cublasGemmEx\n\
                  U cudaMalloc\n                 U cuMemCreate\n                 U cuGetErrorString\n\
                  U memcpy@GLIBC_2.14\n\nmmq.cu.o:\n                 U cublasGemmEx\n                 U cudaLaunchKernel\n\
                  0000000000000000 T ggml_cuda_op_mul_mat_q\n";
        let u = undefined_symbols(nm);
        assert!(u.contains("memcpy") && !u.contains("ggml_cuda_op_mul_mat_q"));
        assert_eq!(cublas_symbols(&u), ["cublasCreate_v2", "cublasGemmEx"]);
        assert_eq!(driver_symbols(&u), ["cuGetErrorString", "cuMemCreate"]);
    }

    #[test]
    fn standins_name_every_symbol() {
        let c = cublas_standin_c(&["cublasGemmEx".into()]);
        assert!(c.contains(
            "int cublasGemmEx(void) { ingot_peer_no_cublas(\"cublasGemmEx\"); return 1; }"
        ));
        assert!(c.contains("cuBLAS was called (%s): the peer bundle has no cuBLAS"));
        assert!(c.contains("abort();"));
        let d = cuda_stub_c(&["cuMemCreate".into(), "cuInit".into()]);
        assert!(d.contains("int cuMemCreate(void) { return 100; }"));
        assert_eq!(
            d.matches("int cuInit(void)").count(),
            1,
            "no duplicate definition"
        );
        assert!(d.contains("int cuGetProcAddress_v2(void)"));
    }

    #[test]
    fn only_glibc_and_the_driver_may_be_loaded() {
        let readelf = " 0x0000000000000001 (NEEDED)             Shared library: [libcuda.so.1]\n \
                       0x0000000000000001 (NEEDED)             Shared library: [libm.so.6]\n \
                       0x0000000000000001 (NEEDED)             Shared library: [libstdc++.so.6]\n \
                       0x000000000000000c (INIT)               0x2000\n";
        let needed = needed_libs(readelf);
        assert_eq!(needed, ["libcuda.so.1", "libm.so.6", "libstdc++.so.6"]);
        assert_eq!(foreign_libs(&needed), ["libstdc++.so.6"]);
        assert!(foreign_libs(&needed[..2]).is_empty());
    }

    #[test]
    fn carry_plan_prefers_one_call_with_both_bundles() {
        let m = 1u64 << 20;
        assert_eq!(
            carry_plan(28 * m, 12 * m, 20 * m),
            Carry::WithDeviceBundle { total: 60 * m }
        );
        assert_eq!(
            carry_plan(28 * m, 12 * m, 30 * m),
            Carry::OwnCall { total: 58 * m }
        );
        assert_eq!(
            carry_plan(28 * m, 12 * m, 40 * m),
            Carry::TooLarge { total: 68 * m }
        );
    }

    #[test]
    fn inputs_name_the_pins_and_the_archs() {
        let l = Layout {
            root: PathBuf::from("/x/.tools/peer"),
            archs: vec!["90a".into()],
        };
        let s = inputs_text(&l);
        assert!(s.contains("source llama-cpp-python==0.3.36\n"));
        assert!(s.contains("wheel nvidia-cuda-nvcc==13.0.88\n"));
        assert!(s.contains("archs 90a-real\n"));
        assert!(s.contains("flag -DGGML_CUDA_FA=ON\n"));
        assert!(
            !s.contains("/x/"),
            "no machine paths: the inputs compare across clones"
        );
        assert_eq!(l.build(), PathBuf::from("/x/.tools/peer/build-sm90a"));
        assert!(l
            .source()
            .ends_with("src/llama_cpp_python-0.3.36/vendor/llama.cpp"));
    }
}
