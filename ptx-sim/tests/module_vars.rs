//! Module-scope `.global` / `.const` variables: initialised storage addressed through their
//! symbols.
mod common;
use common::*;
use ptx_sim::{Arg, FaultKind, Module, Sim, SimError};

/// The 16-byte table of the tests (distinct, non-zero, with the high bit set in some entries).
const TABLE: [u8; 16] = [
    3, 141, 59, 26, 53, 58, 97, 93, 238, 46, 226, 43, 83, 27, 95, 128,
];

fn table_decl() -> String {
    let vals: Vec<String> = TABLE.iter().map(|b| b.to_string()).collect();
    format!(
        ".global .align 1 .b8 table[16] = {{{}}};\n.const .align 4 .u32 ctab[4] = {{10, 0x14, 30, 40}};\n\
         .global .align 4 .f32 fv[2] = {{0f3FC00000, 0f40200000}};\n",
        vals.join(", ")
    )
}

fn run(src: &str, threads: u32, out_words: usize) -> Result<Vec<u32>, SimError> {
    run_io(src, "k", threads, &vec![0; out_words], out_words).map(|(o, _)| o)
}

#[test]
fn global_table_is_initialised_and_addressable() {
    // out[t] = table[t % 16] (ld.global through the symbol) + 1000 * table[(t + 1) % 16] (generic
    // ld after cvta.global), so both addressing paths are checked on every lane.
    let body = "
    mov.u64 %rd6, table;
    and.b32 %r5, %r1, 15;
    cvt.u64.u32 %rd7, %r5;
    add.s64 %rd8, %rd6, %rd7;
    ld.global.u8 %r10, [%rd8];
    add.u32 %r6, %r1, 1;
    and.b32 %r6, %r6, 15;
    cvt.u64.u32 %rd9, %r6;
    cvta.global.u64 %rd10, %rd6;
    add.s64 %rd10, %rd10, %rd9;
    ld.u8 %r7, [%rd10];
    mad.lo.u32 %r10, %r7, 1000, %r10;
    st.global.u32 [%rd4], %r10;";
    let out = run(&format!("{}{}", table_decl(), kernel(body)), 64, 64).unwrap();
    for (t, &got) in out.iter().enumerate() {
        let want = u32::from(TABLE[t % 16]) + 1000 * u32::from(TABLE[(t + 1) % 16]);
        assert_eq!(got, want, "thread {t}");
    }
}

/// Table loads count as module-variable bytes, apart from the buffer traffic: 64 lanes load one
/// table byte each (both addressing paths) and one input word, and store one word.
#[test]
fn table_loads_are_counted_apart_from_global_bytes() {
    let body = "
    ld.global.u32 %r9, [%rd3];
    mov.u64 %rd6, table;
    and.b32 %r5, %r1, 15;
    cvt.u64.u32 %rd7, %r5;
    cvta.global.u64 %rd10, %rd6;
    add.s64 %rd10, %rd10, %rd7;
    ld.u8 %r10, [%rd10];
    add.u32 %r10, %r10, %r9;
    st.global.u32 [%rd4], %r10;";
    let (out, stats) = run_io(
        &format!("{}{}", table_decl(), kernel(body)),
        "k",
        64,
        &[7; 64],
        64,
    )
    .unwrap();
    for (t, &got) in out.iter().enumerate() {
        assert_eq!(got, u32::from(TABLE[t % 16]) + 7, "thread {t}");
    }
    assert_eq!(stats.module_bytes_read, 64);
    assert_eq!(stats.module_requests, 2);
    assert_eq!(stats.global_bytes_read, 4 * 64);
    assert_eq!(stats.global_bytes_written, 4 * 64);
    // Two warps: one input load and one store each; the table loads are not global requests.
    assert_eq!(stats.global_requests, 4);
}

#[test]
fn const_and_float_tables() {
    // out[t] = ctab[t % 4] via ld.const (register address), ctab[2] via a symbol+offset address,
    // and the f32 table converted to integers: exact values, so equality is the right comparison.
    let body = "
    mov.u64 %rd6, ctab;
    and.b32 %r5, %r1, 3;
    mul.wide.u32 %rd7, %r5, 4;
    add.s64 %rd8, %rd6, %rd7;
    ld.const.u32 %r10, [%rd8];
    ld.const.u32 %r6, [ctab+8];
    mad.lo.u32 %r10, %r6, 1000, %r10;
    ld.global.f32 %f1, [fv];
    ld.global.f32 %f2, [fv+4];
    add.f32 %f3, %f1, %f2;
    cvt.rzi.u32.f32 %r7, %f3;
    mad.lo.u32 %r10, %r7, 1000000, %r10;
    st.global.u32 [%rd4], %r10;";
    let out = run(&format!("{}{}", table_decl(), kernel(body)), 32, 32).unwrap();
    let ctab = [10u32, 20, 30, 40];
    for (t, &got) in out.iter().enumerate() {
        // 1.5 + 2.5 = 4 exactly.
        assert_eq!(got, ctab[t % 4] + 30 * 1000 + 4 * 1_000_000, "thread {t}");
    }
}

#[test]
fn variables_persist_across_launches_and_are_per_module() {
    let src = ptx(&format!(
        ".global .align 4 .u32 counter = 5;\n{}",
        kernel("mov.u64 %rd6, counter;\n atom.global.add.u32 %r10, [%rd6], 1;")
    ));
    let m = Module::parse(&src).unwrap();
    let mut sim = Sim::new();
    let p = sim.alloc(4).unwrap();
    let (addr, size) = sim.module_variable(&m, "counter").unwrap().unwrap();
    assert_eq!(size, 4);
    let read = |sim: &Sim| {
        let mut b = [0u8; 4];
        sim.read(addr, &mut b).unwrap();
        u32::from_le_bytes(b)
    };
    assert_eq!(read(&sim), 5);
    for launch in 1..=2u32 {
        sim.launch(&m, "k", cfg(1, 48), &[Arg::Ptr(p), Arg::Ptr(p)])
            .unwrap();
        assert_eq!(read(&sim), 5 + 48 * launch, "after launch {launch}");
    }
    // The same text parsed again is another module with its own, freshly initialised variable.
    let m2 = Module::parse(&src).unwrap();
    let (addr2, _) = sim.module_variable(&m2, "counter").unwrap().unwrap();
    assert_ne!(addr2, addr);
    assert_eq!(read(&sim), 5 + 96);
    assert_eq!(sim.module_variable(&m2, "nothing").unwrap(), None);
}

#[test]
fn access_past_a_table_faults() {
    let body = "
    mov.u64 %rd6, table;
    ld.global.u8 %r10, [%rd6+16];
    st.global.u32 [%rd4], %r10;";
    match run(&format!("{}{}", table_decl(), kernel(body)), 32, 32) {
        Err(SimError::Fault(f)) => assert_eq!(f.kind, FaultKind::OutOfBounds, "{f}"),
        other => panic!("expected an out-of-bounds fault, got {other:?}"),
    }
}

#[test]
fn malformed_or_huge_variables_are_errors() {
    let too_long = ".global .align 1 .b8 t[2] = {1, 2, 3};\n";
    match Module::parse(&ptx(&format!("{too_long}{}", kernel("")))) {
        Err(SimError::Parse { line, message }) => {
            assert_eq!(line, 5, "{message}");
            assert!(message.contains("`t`"), "{message}");
        }
        other => panic!("expected a parse error, got {:?}", other.err()),
    }
    // Larger than one 64 GiB slot: rejected at load.
    let huge = ".global .align 4 .b8 big[68719476737];\n";
    match Module::parse(&ptx(&format!("{huge}{}", kernel("")))) {
        Err(SimError::Parse { .. }) => {}
        other => panic!("expected a parse error, got {:?}", other.err()),
    }
    // Beyond the memory limit (4 GiB by default): a typed error at launch, not a huge host
    // allocation.
    let large = ".global .align 4 .b8 big[8589934592];\n";
    let m = Module::parse(&ptx(&format!("{large}{}", kernel("")))).unwrap();
    let mut sim = Sim::new();
    let p = sim.alloc(4).unwrap();
    match sim.launch(&m, "k", cfg(1, 32), &[Arg::Ptr(p), Arg::Ptr(p)]) {
        Err(SimError::OutOfMemory { requested, .. }) => assert_eq!(requested, 8 << 30),
        other => panic!("expected OutOfMemory, got {other:?}"),
    }
}

#[test]
fn symbol_address_initializer_loads_but_cannot_launch() {
    let src = ptx(&format!(
        ".global .align 8 .u64 fp = k;\n{}",
        kernel("ld.global.u64 %rd6, [fp];")
    ));
    let m = Module::parse(&src).unwrap_or_else(|e| panic!("{e}"));
    let mut sim = Sim::new();
    let p = sim.alloc(4).unwrap();
    match sim.launch(&m, "k", cfg(1, 32), &[Arg::Ptr(p), Arg::Ptr(p)]) {
        Err(SimError::Unsupported { text, .. }) => assert!(text.contains("[fp]"), "{text}"),
        other => panic!("expected Unsupported, got {other:?}"),
    }
}
