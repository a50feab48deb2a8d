//! The project's real kernels (kernels/ptx/ingot.ptx, written by the kernels crate) load without
//! unsupported instructions. Skipped when the file does not exist yet.
use ptx_sim::Module;

#[test]
fn ingot_ptx_loads_and_is_fully_supported() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../kernels/ptx/ingot.ptx");
    let Ok(src) = std::fs::read_to_string(path) else {
        eprintln!("{path} not present; skipping");
        return;
    };
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
