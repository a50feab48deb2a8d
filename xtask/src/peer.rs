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
//!    cuBLAS libraries themselves are not unpacked: nothing links them);
//! 4. cmake configure into `build-sm<archs>/`, then the `ggml-cuda` target;
//! 5. from the symbols `libggml-cuda.a` leaves undefined (`nm -u`, never a hand-written list), two
//!    generated C files built with gcc: a cuBLAS stand-in archive whose every function prints
//!    `"cuBLAS was called (<name>)"` and aborts, and a link-time `libcuda.so.1` whose every
//!    function returns CUDA_ERROR_NO_DEVICE;
//! 6. the `llama-bench` target, statically linked against ggml, cudart, libstdc++ and the
//!    stand-in; its dynamic dependencies must be in `SYSTEM_LIBS`;
//! 7. the bundle: `bin/llama-bench` (stripped), `rehearse/libcuda.so.1` (the link stub, put on the
//!    library path only where the system has no `libcuda.so.1`, so a machine without a driver
//!    can load llama-bench and be told "no GPU found"), `BUILD` (what was built, how) and
//!    `MANIFEST`; then the carry check against the device bundle.
//!
//! A second run whose inputs (pins, architectures, flags) match `dist/peer-bundle.inputs` only
//! prints the bundle's size and how it travels. `nice -n 10` is advised on a shared machine: the
//! first build is about 140 nvcc compiles.

mod bundle;

use crate::paths::{tools_dir, workspace_root};
use anyhow::{bail, ensure, Context, Result};
use bundle::{build_standins, pack, report_size, standins};
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

/// Where the bundle goes (carried to the GPU machine as an ignored path).
pub const BUNDLE: &str = "dist/peer-bundle.tar.xz";
/// Beside it: the inputs it was built from, one per line; equal inputs mean nothing to do.
const INPUTS: &str = "dist/peer-bundle.inputs";

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
    // The bundle is the product: with its inputs file beside it (copied from another clone, too)
    // nothing is rebuilt.
    if bundle.is_file() && std::fs::read_to_string(root.join(INPUTS)).is_ok_and(|s| s == inputs) {
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
        // its headers are compiled against. Each file keeps the wheel's timestamp (as unzip
        // does), so unpacking the same wheels again leaves every header older than the objects
        // built from it and ninja rebuilds nothing.
        python(
            "import os, sys, time, zipfile\nz = zipfile.ZipFile(sys.argv[1])\n\
             for i in z.infolist():\n    if '/libcublas' in i.filename or '/libnvblas' in i.filename:\n        continue\n\
             \x20   path = z.extract(i, sys.argv[2])\n    t = time.mktime(i.date_time + (0, 0, -1))\n    os.utime(path, (t, t))\n",
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

    /// scripts/peer-table.py (run on the GPU machine) on two rounds of reports: medians, the
    /// ratio, and the cuBLAS note in llama.cpp's column of a prefill row it could not run.
    #[test]
    fn peer_table_prints_medians_and_ratios() {
        let dir = std::env::temp_dir().join(format!("ingot-peer-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let llama = |ts: f64| {
            format!(
                r#"[{{"n_prompt":0,"n_gen":64,"n_depth":0,"avg_ts":{ts},"backends":"CUDA"}},
                    {{"n_prompt":0,"n_gen":64,"n_depth":4096,"avg_ts":300.0,"backends":"CUDA"}}]"#
            )
        };
        let ingot = r#"{"witness":"gpu: H200","backend":"CUDA","type_k":"f16","results":[
            {"n_prompt":0,"n_gen":64,"n_depth":0,"avg_ts":500.0},
            {"n_prompt":0,"n_gen":64,"n_depth":4096,"avg_ts":450.0},
            {"n_prompt":512,"n_gen":0,"n_depth":0,"avg_ts":3000.0}]}"#;
        for (name, text) in [
            ("llama.cpp-r1.json", llama(400.0)),
            ("llama.cpp-r2.json", llama(410.0)),
            ("ingot-r1.json", ingot.to_string()),
            ("ingot-r2.json", ingot.to_string()),
            (
                "llama.cpp-pp512.note",
                "needs cuBLAS: cuBLAS was called (cublasSgemm_v2)".into(),
            ),
        ] {
            std::fs::write(dir.join(name), text).unwrap();
        }
        let out = Command::new("python3")
            .arg(workspace_root().join("scripts/peer-table.py"))
            .arg(&dir)
            .arg(dir.join("out.json"))
            .output()
            .expect("python3");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("| tg64 | 405.0 (400.0-410.0) | 500.0 (500.0-500.0) | 1.23x |"),
            "{text}"
        );
        assert!(
            text.contains("| tg64 @ d4096 | 300.0 (300.0-300.0) | 450.0 (450.0-450.0) | 1.50x |"),
            "{text}"
        );
        assert!(text.contains("| pp512 | needs cuBLAS: cuBLAS was called (cublasSgemm_v2) | 3000.0 (3000.0-3000.0) | - |"), "{text}");
        let json = std::fs::read_to_string(dir.join("out.json")).unwrap();
        assert!(json.contains("\"ratio\": 1.5"), "{json}");
        std::fs::remove_dir_all(&dir).unwrap();
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
