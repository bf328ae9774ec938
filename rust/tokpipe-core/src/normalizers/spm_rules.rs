//! sentencepiece's built-in normalization rules by name (`normalization_rule_name`): the
//! precompiled charsmap each one puts in a model's `NormalizerSpec`, byte for byte what
//! sentencepiece writes, so a model trained here carries the blob sentencepiece's would.
//!
//! The blobs are read off the installed sentencepiece by `scripts/gen_spm_charsmaps.py` and
//! stored zstd-compressed in `spm_charsmaps/`; a test regenerates them and compares.

use crate::error::{Error, Result};
use crate::normalizers::{CharsMap, SentencePieceNormalizer};

/// The rule names, sentencepiece's default first.
pub const RULE_NAMES: [&str; 5] = ["nmt_nfkc", "nfkc", "nmt_nfkc_cf", "nfkc_cf", "identity"];

/// sentencepiece's `normalization_rule_name` default.
pub const DEFAULT_RULE: &str = "nmt_nfkc";

const NMT_NFKC: &[u8] = include_bytes!("spm_charsmaps/nmt_nfkc.bin.zst");
const NFKC: &[u8] = include_bytes!("spm_charsmaps/nfkc.bin.zst");
const NMT_NFKC_CF: &[u8] = include_bytes!("spm_charsmaps/nmt_nfkc_cf.bin.zst");
const NFKC_CF: &[u8] = include_bytes!("spm_charsmaps/nfkc_cf.bin.zst");

/// The precompiled charsmap of rule `name` (empty for `identity`, which maps nothing).
pub fn precompiled_charsmap(name: &str) -> Result<Vec<u8>> {
    let compressed = match name {
        "nmt_nfkc" => NMT_NFKC,
        "nfkc" => NFKC,
        "nmt_nfkc_cf" => NMT_NFKC_CF,
        "nfkc_cf" => NFKC_CF,
        "identity" => return Ok(Vec::new()),
        other => {
            return Err(Error::InvalidArgument(format!(
                "unknown normalization rule {other:?}: use one of {}",
                RULE_NAMES.join(", ")
            )))
        }
    };
    Ok(zstd::decode_all(compressed).expect("the embedded charsmaps are valid zstd frames"))
}

/// The normalizer sentencepiece's trainer normalizes with under rule `name` and these
/// whitespace options: the one a `.model` whose `NormalizerSpec` holds the rule's name and
/// charsmap and these flags loads into, without user-defined symbols (sentencepiece's trainer
/// normalizes those with the rest of the text).
pub fn trainer_normalizer(
    name: &str,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
) -> Result<SentencePieceNormalizer> {
    let blob = precompiled_charsmap(name)?;
    let charsmap = (!blob.is_empty()).then(|| {
        CharsMap::from_bytes(&blob).expect("the embedded charsmaps parse (see the tests)")
    });
    Ok(SentencePieceNormalizer::new(
        name,
        charsmap,
        add_dummy_prefix,
        remove_extra_whitespaces,
        true,
        false,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_has_a_charsmap_that_parses() {
        for name in RULE_NAMES {
            let blob = precompiled_charsmap(name).unwrap();
            assert_eq!(blob.is_empty(), name == "identity", "{name}");
            if !blob.is_empty() {
                CharsMap::from_bytes(&blob).unwrap_or_else(|e| panic!("{name}: {e}"));
            }
        }
        let err = precompiled_charsmap("nfc").unwrap_err().to_string();
        assert!(err.contains("nmt_nfkc, nfkc"), "{err}");
    }
}
