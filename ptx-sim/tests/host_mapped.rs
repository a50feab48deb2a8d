//! Host-mapped allocations: kernels read and write them as global memory, with the same values, and
//! their traffic is counted in `host_bytes_*` instead of the global (DRAM) counters, access by
//! access, also when one warp request touches both kinds.

use ptx_sim::{Arg, LaunchConfig, Module, Sim};

/// `out[i] = a[i] + b[i]` over 4-byte words, one thread per word; then every lane reads its word
/// again through a pointer chosen by lane parity (even lanes `a`, odd lanes `b`): one request of
/// both kinds.
const PTX: &str = "
.version 7.8
.target sm_86
.address_size 64

.visible .entry add(.param .u64 pa, .param .u64 pb, .param .u64 pout)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<12>;
    ld.param.u64 %rd1, [pa];
    ld.param.u64 %rd2, [pb];
    ld.param.u64 %rd3, [pout];
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd4, %r1, 4;
    add.s64 %rd5, %rd1, %rd4;
    add.s64 %rd6, %rd2, %rd4;
    add.s64 %rd7, %rd3, %rd4;
    ld.global.u32 %r2, [%rd5];
    ld.global.u32 %r3, [%rd6];
    add.s32 %r4, %r2, %r3;
    st.global.u32 [%rd7], %r4;
    and.b32 %r5, %r1, 1;
    setp.eq.u32 %p1, %r5, 0;
    selp.b64 %rd8, %rd5, %rd6, %p1;
    ld.global.u32 %r6, [%rd8];
    ret;
}
";

#[test]
fn host_mapped_traffic_is_counted_apart_from_global() {
    let m = Module::parse(PTX).unwrap();
    let mut sim = Sim::new();
    let n = 32usize;
    let a = sim.alloc(4 * n).unwrap();
    let b = sim.alloc_host_mapped(4 * n).unwrap();
    let out = sim.alloc_host_mapped(4 * n).unwrap();
    let words =
        |f: fn(u32) -> u32| -> Vec<u8> { (0..n as u32).flat_map(|i| f(i).to_le_bytes()).collect() };
    sim.write(a, &words(|i| 3 * i + 1)).unwrap();
    sim.write(b, &words(|i| 1000 + i)).unwrap();
    let cfg = LaunchConfig {
        grid: [1, 1, 1],
        block: [n as u32, 1, 1],
        shared_bytes: 0,
    };
    let stats = sim
        .launch(&m, "add", cfg, &[Arg::Ptr(a), Arg::Ptr(b), Arg::Ptr(out)])
        .unwrap();
    let mut got = vec![0u8; 4 * n];
    sim.read(out, &mut got).unwrap();
    assert_eq!(
        got,
        words(|i| 4 * i + 1001),
        "host-mapped memory holds the kernel's values"
    );
    // Reads: a (128 B, device), b (128 B, host), then the mixed request: 16 lanes from each.
    assert_eq!(stats.global_bytes_read, 128 + 64);
    assert_eq!(stats.host_bytes_read, 128 + 64);
    // Fetched: each host-mapped byte once per launch; the mixed request re-reads b's odd words.
    assert_eq!(stats.host_bytes_fetched, 128);
    let again = sim
        .launch(&m, "add", cfg, &[Arg::Ptr(a), Arg::Ptr(b), Arg::Ptr(out)])
        .unwrap();
    assert_eq!(again.host_bytes_fetched, 128, "a new launch fetches again");
    // Writes: out is host-mapped.
    assert_eq!(
        (stats.global_bytes_written, stats.host_bytes_written),
        (0, 128)
    );
    // Sectors count device accesses only: a's 4 sectors, and the 16 even lanes' words of a (4
    // sectors).
    assert_eq!(stats.sectors_read, 4 + 4);
}
