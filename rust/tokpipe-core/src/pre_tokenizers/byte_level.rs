//! GPT-2's byte-to-character map, used by every byte-level file format (encoder.json,
//! vocab.bpe, HF tokenizer.json) so that arbitrary bytes can be written as printable text.
//! Printable Latin-1 bytes stand for themselves; the other 68 bytes are shifted to U+0100 and up.

use std::sync::OnceLock;

struct Tables {
    byte_to_char: [char; 256],
    char_to_byte: rustc_hash::FxHashMap<char, u8>,
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
        let mut byte_to_char = ['\0'; 256];
        let mut shifted = 0u32;
        for b in 0..=255u8 {
            byte_to_char[b as usize] = if printable(b) {
                b as char
            } else {
                shifted += 1;
                char::from_u32(255 + shifted).expect("U+0100..U+0143 are chars")
            };
        }
        let char_to_byte = byte_to_char
            .iter()
            .enumerate()
            .map(|(b, &c)| (c, b as u8))
            .collect();
        Tables {
            byte_to_char,
            char_to_byte,
        }
    })
}

/// The printable character standing for `byte`.
pub fn byte_char(byte: u8) -> char {
    tables().byte_to_char[byte as usize]
}

/// Writes bytes as byte-level text (`" the"` becomes `"Ġthe"`).
pub fn encode(bytes: &[u8]) -> String {
    bytes.iter().map(|&b| byte_char(b)).collect()
}

/// Reads byte-level text back to bytes; `None` if a character is outside the map.
pub fn decode(text: &str) -> Option<Vec<u8>> {
    let t = tables();
    text.chars()
        .map(|c| t.char_to_byte.get(&c).copied())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(super::decode(&super::encode(&all)).unwrap(), all);
        assert_eq!(super::encode(b" the"), "\u{120}the");
        assert_eq!(super::encode(b"\n"), "\u{10a}");
    }
}
