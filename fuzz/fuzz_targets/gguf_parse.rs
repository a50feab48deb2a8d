//! Fuzz `parse_header`: any input must either be rejected with an error or yield a header whose
//! tensor views all lie inside the input; an accepted header must re-encode to a header that
//! parses back to the same encoding (writer and reader agree).

#![no_main]

use ingot_gguf::{parse_header, GgufWriter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(header) = parse_header(data) else {
        return;
    };
    let mut checksum = 0u8;
    for t in &header.tensors {
        let range = header
            .data_range(t)
            .expect("an accepted tensor's range fits usize");
        let view = &data[range];
        assert_eq!(view.len() as u64, t.nbytes);
        checksum ^= view.iter().fold(0, |a, b| a ^ b);
    }
    std::hint::black_box(checksum);

    // Headers the writer refuses (alignment above its limit) are valid for the reader; skip them.
    let Ok(writer) = GgufWriter::from_header(&header) else {
        return;
    };
    let Ok(encoded) = writer.header_bytes() else {
        return;
    };
    let mut file = encoded.clone();
    for t in &header.tensors {
        let padded = ingot_gguf::align_up(t.nbytes, header.alignment).unwrap();
        file.resize(file.len() + padded as usize, 0);
    }
    let reparsed = parse_header(&file).expect("the writer's output parses");
    let again = GgufWriter::from_header(&reparsed)
        .and_then(|w| w.header_bytes())
        .expect("a re-parsed header re-encodes");
    assert_eq!(encoded, again, "encode(parse(encode(h))) == encode(h)");
});
