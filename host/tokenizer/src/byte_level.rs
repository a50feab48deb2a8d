//! GPT-2's reversible byte <-> unicode mapping.
//!
//! Byte-level BPE vocabularies store every token as a string of "visible" characters: byte `b` is
//! written as `char(b)` when `b` is printable Latin-1 (`!`..=`~`, `¡`..=`¬`, `®`..=`ÿ`) and as
//! `char(256 + k)` otherwise, where `k` counts the non-printable bytes in increasing order (so byte
//! 0 is `Ā` U+0100 and the space 0x20 is `Ġ` U+0120).

/// Bidirectional byte <-> char table.
#[derive(Debug, Clone)]
pub(crate) struct ByteLevel {
    byte_to_char: [char; 256],
    /// Inverse table indexed by code point; every mapped char is below [`MAPPED_LIMIT`].
    char_to_byte: [Option<u8>; MAPPED_LIMIT],
}

/// One past the largest code point the mapping produces (256 + 68 non-printable bytes).
const MAPPED_LIMIT: usize = 324;

/// Bytes that stand for themselves in the mapping.
fn is_printable(b: u8) -> bool {
    matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF)
}

impl ByteLevel {
    pub(crate) fn new() -> Self {
        let mut byte_to_char = ['\0'; 256];
        let mut char_to_byte = [None; MAPPED_LIMIT];
        let mut next_extra = 256u32;
        for b in 0..=255u8 {
            byte_to_char[b as usize] = if is_printable(b) {
                char::from(b)
            } else {
                let c = char::from_u32(next_extra).expect("256..324 are valid scalar values");
                next_extra += 1;
                c
            };
            char_to_byte[byte_to_char[b as usize] as usize] = Some(b);
        }
        ByteLevel {
            byte_to_char,
            char_to_byte,
        }
    }

    /// The visible character that stands for byte `b`.
    pub(crate) fn char_of(&self, b: u8) -> char {
        self.byte_to_char[b as usize]
    }

    /// The byte a visible character stands for, or `None` for characters outside the mapping.
    pub(crate) fn byte_of(&self, c: char) -> Option<u8> {
        self.char_to_byte.get(c as usize).copied().flatten()
    }

    /// Decodes a vocabulary string to the bytes it stands for. Characters outside the mapping
    /// (malformed vocab) are kept as their own UTF-8 so that nothing is lost silently.
    pub(crate) fn decode_into(&self, text: &str, out: &mut Vec<u8>) {
        for c in text.chars() {
            match self.byte_of(c) {
                Some(b) => out.push(b),
                None => {
                    let mut buf = [0u8; 4];
                    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mapping_is_a_bijection_with_known_anchors() {
        let bl = ByteLevel::new();
        // Anchors from the GPT-2 table: space -> 'Ġ' (U+0120), newline -> 'Ċ' (U+010A), byte 0 ->
        // 'Ā'.
        assert_eq!(bl.char_of(b' '), '\u{120}');
        assert_eq!(bl.char_of(b'\n'), '\u{10A}');
        assert_eq!(bl.char_of(0), '\u{100}');
        assert_eq!(bl.char_of(b'a'), 'a');
        assert_eq!(bl.char_of(0xAD), '\u{143}');
        for b in 0..=255u8 {
            assert_eq!(bl.byte_of(bl.char_of(b)), Some(b), "byte {b}");
        }
        assert_eq!(bl.byte_of('\u{144}'), None);
        assert_eq!(bl.byte_of(' '), None);
    }
}
