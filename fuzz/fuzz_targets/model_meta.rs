//! Fuzz the metadata *values* a model is configured from: start from a golden model's header (a
//! valid file, so mutations reach the checks past the parser) and overwrite the values of chosen
//! keys with integers, floats, strings and arrays driven by the input, then configure a model and a
//! tokenizer from it. Every outcome must be an error or a configuration; no panic, and memory
//! proportional to the header (run with libFuzzer's default `-rss_limit_mb=2048`: a 5 MB header
//! claiming 10^7 blocks exceeded it).
//!
//! Input format, repeated: one byte picking the key (index modulo the key count), one byte picking
//! the value's kind, then up to 8 bytes of payload.

#![no_main]

use std::sync::OnceLock;

use ingot_gguf::{Gguf, GgufFile, MetaArray, MetaType, MetaValue};
use ingot_model::ModelConfig;
use libfuzzer_sys::fuzz_target;

/// The seed header: the small quantized golden model (its tensor table is what the values are
/// checked against).
fn seed() -> &'static Gguf {
    static SEED: OnceLock<Gguf> = OnceLock::new();
    SEED.get_or_init(|| {
        let path = ingot_testdata::golden("tiny-mla-q4_k_m/model.gguf");
        GgufFile::open(&path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .header()
            .clone()
    })
}

/// Integers that sit on the edges the configuration reads: 0, 1, powers of two around usize and u32
/// limits.
const EDGES: [u64; 10] = [
    0,
    1,
    2,
    1_000_000,
    10_000_000,
    (1 << 31) - 1,
    1 << 31,
    u32::MAX as u64,
    1 << 32,
    u64::MAX,
];

fn value(kind: u8, payload: u64, old: &MetaValue) -> MetaValue {
    match kind % 10 {
        0 => MetaValue::U32(payload as u32),
        1 => MetaValue::U64(payload),
        2 => MetaValue::U32(EDGES[(payload % EDGES.len() as u64) as usize] as u32),
        3 => MetaValue::U64(EDGES[(payload % EDGES.len() as u64) as usize]),
        4 => MetaValue::I32(payload as i32),
        5 => MetaValue::F32(f32::from_bits(payload as u32)),
        6 => MetaValue::Bool(payload & 1 == 1),
        7 => MetaValue::String(format!("{payload}")),
        // An array of the old scalar's type (or u32) whose length and items come from the payload,
        // short enough that the mutation itself stays small.
        8 => {
            let len = (payload % 64) as usize;
            let items = (0..len)
                .map(|i| MetaValue::U32((payload >> (i % 32)) as u32))
                .collect();
            MetaValue::Array(MetaArray {
                elem: MetaType::U32,
                items,
            })
        }
        // The old value with its integer incremented or the array truncated: near-valid edits.
        _ => match old {
            MetaValue::U32(v) => MetaValue::U32(v.wrapping_add(payload as u32)),
            MetaValue::U64(v) => MetaValue::U64(v.wrapping_add(payload)),
            MetaValue::Array(a) => MetaValue::Array(MetaArray {
                elem: a.elem,
                items: a.items[..(payload as usize % (a.items.len() + 1))].to_vec(),
            }),
            other => other.clone(),
        },
    }
}

fuzz_target!(|data: &[u8]| {
    let mut header = seed().clone();
    let n_keys = header.kv.len();
    for chunk in data.chunks(10) {
        if chunk.len() < 2 {
            break;
        }
        let key = chunk[0] as usize % n_keys;
        let mut payload = [0u8; 8];
        payload[..chunk.len() - 2].copy_from_slice(&chunk[2..]);
        let payload = u64::from_le_bytes(payload);
        let new = value(chunk[1], payload, &header.kv[key].1);
        header.kv[key].1 = new;
    }
    if let Ok(config) = ModelConfig::from_gguf(&header) {
        // An accepted configuration is bounded by the file: every decoding layer has its tensors.
        assert!(config.block_count() <= 2 * header.tensors.len());
    }
    let _ = ingot_tokenizer::Tokenizer::from_gguf(&header);
});
