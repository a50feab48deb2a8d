//! Developer tasks: `cargo xtask test`, `cargo xtask kernels [--check]`, `cargo xtask tools`,
//! `cargo xtask audit`, `cargo xtask sass`, `cargo xtask cubins`, `cargo xtask peer`.

mod cubins;
mod gate;
mod kernels;
mod paths;
mod peer;
mod pool;
mod rehearse;
mod sass;
mod tools;

use anyhow::{bail, Result};

const USAGE: &str = "usage: cargo xtask <command>
  test             the whole gate CI runs: tools, the workspace's test build, then side by side
                   kernels --check, ptx-audit check, clippy, rustdoc, cargo test and
                   scripts/device-check.sh --rehearse
  kernels          rebuild kernels/ptx/ingot.ptx.xz from kernels/device (nightly, build-std);
                   the text is left at target/ptx/ingot.ptx
  kernels --check  rebuild into target/ and fail if the committed PTX differs
  tools            install rust-src (nightly), ptxas/cuobjdump/nvdisasm and the openai Python client under .tools/
  audit [ARGS]     ptx-audit ARGS (default: check) with the tools under .tools/ passed to it
  sass             ptxas -v for sm_86 and sm_90 on the committed PTX, SASS into target/sass/
  cubins [--arch sm_86,sm_90a] [--out DIR]
                   the committed PTX built offline for those architectures, into DIR (default
                   target/cubin); `INGOT_CUBINS=DIR cargo build` embeds them
  peer [--arch 90a[,86]] [--jobs N]
                   llama.cpp's CUDA llama-bench (from the llama-cpp-python 0.3.36 sdist, NVIDIA's
                   PyPI wheels) into dist/peer-bundle.tar.xz for scripts/device-bench.sh peer;
                   cached under .tools/peer (the first build is long: see docs/perf.md)";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        ["test"] => gate::run(),
        ["kernels"] => kernels::build(),
        ["kernels", "--check"] => kernels::check(),
        ["tools"] => tools::install(),
        ["sass"] => sass::report(),
        ["cubins", rest @ ..] => cubins::build(rest),
        ["audit", rest @ ..] => gate::audit(rest),
        ["peer", rest @ ..] => peer::run(rest),
        _ => bail!("{USAGE}"),
    }
}
