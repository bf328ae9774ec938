//! Keys for exact deduplication: a 128-bit BLAKE2b digest of each document's normalised text.
//!
//! The normalisation is Python's `" ".join(text.lower().split())`, character for character,
//! so keys equal `hashlib.blake2b(that.encode(), digest_size=16)`: lowercase by Unicode's full
//! mappings, then every run of whitespace made one space and the ends dropped. Python's
//! whitespace is Unicode's White_Space plus the four separators U+001C..U+001F.

use super::StrColumn;
use blake2::digest::{Update, VariableOutput};
use blake2::Blake2bVar;
use rayon::prelude::*;

pub const KEY_BYTES: usize = 16;

/// Rows per parallel task: enough to hide rayon's per-task cost on short documents.
const ROWS_PER_TASK: usize = 256;

pub(crate) fn is_python_whitespace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// The normalised form of one text (see the module docs), into `out` (cleared first).
pub fn normalise_into(text: &str, lowercase: bool, collapse_whitespace: bool, out: &mut String) {
    out.clear();
    // One pass, character by character, into the reused buffer. Lowercasing is per character
    // but for Σ, whose lower case depends on its place in a word (final ς), the rule Python's
    // `str.lower` and Rust's `str::to_lowercase` follow: text with a Σ takes the slow path.
    if !(lowercase && text.contains('Σ')) {
        let mut pending_space = false;
        for c in text.chars() {
            if collapse_whitespace && is_python_whitespace(c) {
                pending_space = !out.is_empty();
                continue;
            }
            if pending_space {
                out.push(' ');
                pending_space = false;
            }
            if !lowercase {
                out.push(c);
            } else if c.is_ascii() {
                out.push(c.to_ascii_lowercase());
            } else {
                out.extend(c.to_lowercase());
            }
        }
        return;
    }
    let lowered;
    let text = if lowercase {
        lowered = text.to_lowercase();
        lowered.as_str()
    } else {
        text
    };
    if !collapse_whitespace {
        out.push_str(text);
        return;
    }
    for word in text.split(is_python_whitespace).filter(|w| !w.is_empty()) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(word);
    }
}

/// One key per row, in row order, computed in parallel.
pub fn exact_keys(
    column: &StrColumn<'_>,
    lowercase: bool,
    collapse_whitespace: bool,
) -> Vec<[u8; KEY_BYTES]> {
    let mut keys = vec![[0u8; KEY_BYTES]; column.len()];
    keys.par_chunks_mut(ROWS_PER_TASK)
        .enumerate()
        .for_each(|(chunk, out)| {
            let mut scratch = String::new();
            for (j, key) in out.iter_mut().enumerate() {
                normalise_into(
                    column.get(chunk * ROWS_PER_TASK + j),
                    lowercase,
                    collapse_whitespace,
                    &mut scratch,
                );
                let mut hasher =
                    Blake2bVar::new(KEY_BYTES).expect("16 is a valid BLAKE2b output size");
                hasher.update(scratch.as_bytes());
                hasher
                    .finalize_variable(key)
                    .expect("the key has the hasher's output size");
            }
        });
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::text::Offsets;

    fn column<'a>(offsets: &'a [i32], data: &'a [u8]) -> StrColumn<'a> {
        StrColumn::new(Offsets::I32(offsets), data).unwrap()
    }

    #[test]
    fn normalisation_is_pythons_lower_split_join() {
        let mut out = String::new();
        normalise_into("  Hello\u{3000}WORLD\u{1c}x\n\n ΣΑΣ ", true, true, &mut out);
        // Python: " ".join("  Hello\u3000WORLD\x1cx\n\n ΣΑΣ ".lower().split()) == "hello world x σας"
        assert_eq!(out, "hello world x σας");
        normalise_into("A  b", false, false, &mut out);
        assert_eq!(out, "A  b");
    }

    #[test]
    fn keys_follow_the_text_not_the_layout() {
        let data = b"a bA  Bab";
        let keys = exact_keys(&column(&[0, 3, 7, 9, 9], data), true, true);
        assert_eq!(keys.len(), 4);
        assert_eq!(keys[0], keys[1]); // "a b" and "A  B"
        assert_ne!(keys[0], keys[2]); // "ab"
        assert_ne!(keys[2], keys[3]); // "" (a null row reads as empty)
                                      // BLAKE2b-128 of the empty string, as hashlib.blake2b(b"", digest_size=16) gives it.
        assert_eq!(
            keys[3]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>(),
            "cae66941d9efbd404e4d88758ea67670"
        );
    }

    #[test]
    fn bad_offsets_are_refused() {
        assert!(StrColumn::new(Offsets::I32(&[0, 5]), b"abc").is_err());
        assert!(StrColumn::new(Offsets::I64(&[2, 1]), b"abc").is_err());
        assert!(StrColumn::new(Offsets::I32(&[]), b"").is_err());
    }
}
