//! Unpacks the committed PTX (`ptx/ingot.ptx.xz`, written by `cargo xtask kernels`) into `OUT_DIR`,
//! where `src/lib.rs` embeds it with `include_str!`.

use std::io::Read;
use std::path::PathBuf;

fn main() {
    const PACKED: &str = "ptx/ingot.ptx.xz";
    println!("cargo:rerun-if-changed={PACKED}");
    let file = std::fs::File::open(PACKED).unwrap_or_else(|e| {
        panic!("kernels/{PACKED}: {e} (it is committed; `cargo xtask kernels` writes it)")
    });
    let mut text = String::new();
    xz2::read::XzDecoder::new(file)
        .read_to_string(&mut text)
        .unwrap_or_else(|e| {
            panic!("kernels/{PACKED} does not unpack: {e} (`cargo xtask kernels` rewrites it)")
        });
    let out =
        PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR")).join("ingot.ptx");
    std::fs::write(&out, text).unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
