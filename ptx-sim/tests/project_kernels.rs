//! The project's real kernels (kernels/ptx/ingot.ptx.xz, the committed PTX `cargo xtask kernels`
//! writes) load without unsupported instructions. The file is committed: its absence is a failure.
use ptx_sim::Module;

#[test]
fn ingot_ptx_loads_and_is_fully_supported() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../kernels/ptx/ingot.ptx.xz");
    let src = ptx_front::read_ptx(std::path::Path::new(path))
        .unwrap_or_else(|e| panic!("the committed PTX: {e}"));
    let m = Module::parse(&src).unwrap_or_else(|e| panic!("{e}"));
    let missing: Vec<String> = m
        .kernels()
        .iter()
        .flat_map(|k| {
            m.unsupported(k)
                .into_iter()
                .map(move |(l, t)| format!("{k}: line {l}: {t}"))
        })
        .collect();
    println!("kernels: {:?}", m.kernels());
    assert!(
        missing.is_empty(),
        "unsupported instructions:\n{}",
        missing.join("\n")
    );
}
