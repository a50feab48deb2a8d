//! Host-mapped memory, the copy stream and its fence on their own (the expert cache's machinery,
//! `graph/src/exec/expert_cache.rs`, without a model around it): bytes written by the host reach
//! VRAM through a copy-stream copy, bytes in VRAM reach host-mapped memory the same way, a copy
//! ordered `after` the decode stream sees that stream's earlier (asynchronous) copy, and a fence
//! reports done only once its copies have landed. GPU only: ptx-sim has host-mapped memory but no
//! streams (`moe_slots.rs` checks the kernels that read through slot tables there).

mod support;

use std::time::{Duration, Instant};

use ingot_cuda::{Fence, Gpu};
use rand::Rng;

/// Bytes per buffer: several copy-engine transfers' worth, not a multiple of 4 KiB.
const N: usize = (3 << 20) + 123;

/// Waits for `fence` by polling, as the expert cache does (never a blocking wait), for at most
/// 10 s: a copy of a few MiB takes well under a millisecond.
fn wait(fence: &Fence, what: &str) {
    let started = Instant::now();
    while !fence
        .is_done()
        .unwrap_or_else(|e| panic!("{what}: fence: {e}"))
    {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{what}: the fence was not done after 10 s"
        );
        std::thread::yield_now();
    }
}

fn random_bytes(rng: &mut impl Rng, n: usize) -> Vec<u8> {
    (0..n).map(|_| rng.random()).collect()
}

fn round_trip(gpu: &Gpu, rng: &mut impl Rng) {
    let copies = gpu.copy_stream().expect("copy stream");

    // Host-mapped -> VRAM on the copy stream.
    let host = random_bytes(rng, N);
    let mut mapped = gpu.alloc_mapped(N).expect("host-mapped buffer");
    mapped.bytes_mut().copy_from_slice(&host);
    let vram = gpu.alloc(N).expect("VRAM buffer");
    let vram_at = gpu.device_address(&vram);
    gpu.write_at(vram_at, &vec![0xA5; N]).expect("poison VRAM");
    copies
        .copy_at(vram_at, mapped.device_address(), N)
        .expect("copy");
    wait(&copies.fence().expect("fence"), "mapped -> VRAM");
    let mut got = vec![0u8; N];
    gpu.read_at(vram_at, &mut got).expect("read VRAM");
    assert!(got == host, "mapped -> VRAM: the bytes differ");

    // VRAM -> host-mapped on the copy stream: the host reads them in place after the fence.
    let other = random_bytes(rng, N);
    gpu.write_at(vram_at, &other).expect("write VRAM");
    mapped.bytes_mut().fill(0x5A);
    copies
        .copy_at(mapped.device_address(), vram_at, N)
        .expect("copy");
    wait(&copies.fence().expect("fence"), "VRAM -> mapped");
    assert!(
        mapped.bytes_mut() == &other[..],
        "VRAM -> mapped: the bytes differ"
    );

    // `after`: a copy-stream copy enqueued after the decode stream's asynchronous copy reads
    // what that copy wrote, though the host never waited for it.
    let second = gpu.alloc(N).expect("second VRAM buffer");
    let second_at = gpu.device_address(&second);
    let third = random_bytes(rng, N);
    gpu.write_at(second_at, &third)
        .expect("write the second buffer");
    gpu.copy_at(vram_at, second_at, N)
        .expect("decode-stream copy");
    copies.after(gpu).expect("order after the decode stream");
    copies
        .copy_at(mapped.device_address(), vram_at, N)
        .expect("copy");
    wait(&copies.fence().expect("fence"), "after");
    assert!(
        mapped.bytes_mut() == &third[..],
        "after: the copy stream read VRAM before the decode stream's copy had written it"
    );
    println!("mapped: {N} bytes each way and an ordered copy: identical");
}

#[test]
fn mapped_memory_and_the_copy_stream_round_trip() {
    let Some(acc) = support::gpu() else {
        return;
    };
    let mut rng = support::rng("mapped");
    round_trip(acc.gpu(), &mut rng);
}
