//! `cargo xtask sass`: resource usage and SASS of the committed PTX for sm_86 and sm_90.

use crate::kernels::{committed_text, write_plain};
use crate::paths::{plain_ptx_path, workspace_root, CUOBJDUMP, PTXAS};
use anyhow::{bail, Context, Result};
use std::process::Command;

const ARCHS: [&str; 2] = ["sm_86", "sm_90"];

pub fn report() -> Result<()> {
    // ptxas takes a file: the committed PTX unpacked.
    let ptx = plain_ptx_path();
    write_plain(&ptx, &committed_text()?)?;
    let out = workspace_root().join("target").join("sass");
    std::fs::create_dir_all(&out)?;
    let (ptxas, cuobjdump) = (PTXAS.path(), CUOBJDUMP.path());
    for arch in ARCHS {
        let cubin = out.join(format!("ingot.{arch}.cubin"));
        let res = Command::new(&ptxas)
            .arg(format!("-arch={arch}"))
            .arg("-v")
            .arg(&ptx)
            .arg("-o")
            .arg(&cubin)
            .output()
            .with_context(|| format!("running {} (try `cargo xtask tools`)", ptxas.display()))?;
        print!("{}", String::from_utf8_lossy(&res.stderr));
        if !res.status.success() {
            bail!("ptxas -arch={arch} rejected {}", ptx.display());
        }
        let sass = Command::new(&cuobjdump)
            .arg("-sass")
            .arg(&cubin)
            .output()
            .with_context(|| format!("running {}", cuobjdump.display()))?;
        if !sass.status.success() {
            bail!("cuobjdump -sass {} failed", cubin.display());
        }
        let path = out.join(format!("ingot.{arch}.sass"));
        std::fs::write(&path, &sass.stdout)?;
        println!("SASS for {arch}: {}", path.display());
    }
    Ok(())
}
