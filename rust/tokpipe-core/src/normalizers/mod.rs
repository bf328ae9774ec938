//! Text normalizers applied before pre-tokenization (HF's `normalizer` field): the Unicode
//! normal forms, BERT's normalizer ([`bert`]), sentencepiece's normalizer ([`sentencepiece`],
//! over its precompiled charsmap, [`precompiled`]; the charsmaps of its built-in rules by name,
//! [`spm_rules`]), and the HF steps that `tokenizer.json`
//! files converted from sentencepiece use (`Precompiled`, `Replace`, `Strip`, `Prepend`,
//! `Sequence`). Text that a step leaves alone is passed through without a copy.

pub mod bert;
pub(crate) mod bert_tables;
mod hf_alignment;
pub mod precompiled;
pub mod replace;
pub mod sentencepiece;
pub mod spm_rules;

pub use bert::BertNormalizer;
pub use precompiled::CharsMap;
pub use replace::Replace;
pub use sentencepiece::SentencePieceNormalizer;
use std::borrow::Cow;
use std::sync::Arc;
use unicode_normalization::{
    is_nfc_quick, is_nfd_quick, is_nfkc_quick, is_nfkd_quick, IsNormalized, UnicodeNormalization,
};

/// One normalizer; cheap to clone (tables and rule sets are shared).
#[derive(Clone, Debug)]
pub enum Normalizer {
    Nfc,
    Nfd,
    Nfkc,
    Nfkd,
    Bert(BertNormalizer),
    /// sentencepiece's whole normalizer: charsmap, whitespace rules, `▁` (from a `.model`).
    SentencePiece(Arc<SentencePieceNormalizer>),
    /// HF's `Precompiled`: the charsmap as HF applies it (grapheme by grapheme, shortest rule).
    Precompiled(Arc<CharsMap>),
    /// HF's `Replace`: every match of a literal or a regex replaced.
    Replace(Arc<Replace>),
    /// HF's `Strip`: Unicode whitespace removed from the left and/or right end.
    Strip {
        left: bool,
        right: bool,
    },
    /// HF's `Prepend`: a string put before non-empty text.
    Prepend(Arc<str>),
    /// HF's `Sequence`: each step in turn.
    Sequence(Arc<[Normalizer]>),
}

impl Normalizer {
    /// The HF `tokenizer.json` type name of a Unicode normal form (`"NFC"`, ...).
    pub fn from_hf_type(name: &str) -> Option<Self> {
        match name {
            "NFC" => Some(Normalizer::Nfc),
            "NFD" => Some(Normalizer::Nfd),
            "NFKC" => Some(Normalizer::Nfkc),
            "NFKD" => Some(Normalizer::Nfkd),
            _ => None,
        }
    }

    pub fn hf_type(&self) -> &'static str {
        match self {
            Normalizer::Bert(_) => "BertNormalizer",
            Normalizer::Nfc => "NFC",
            Normalizer::Nfd => "NFD",
            Normalizer::Nfkc => "NFKC",
            Normalizer::Nfkd => "NFKD",
            // Written as HF's steps by the tokenizer.json writer.
            Normalizer::SentencePiece(_) => "SentencePiece",
            Normalizer::Precompiled(_) => "Precompiled",
            Normalizer::Replace(_) => "Replace",
            Normalizer::Strip { .. } => "Strip",
            Normalizer::Prepend(_) => "Prepend",
            Normalizer::Sequence(_) => "Sequence",
        }
    }

    pub fn normalize<'a>(&self, text: &'a str) -> Cow<'a, str> {
        // The quick check answers "yes" for almost all real text (ASCII always), so the common
        // case costs one scan and no allocation.
        let quick = match self {
            Normalizer::Nfc => is_nfc_quick(text.chars()),
            Normalizer::Nfd => is_nfd_quick(text.chars()),
            Normalizer::Nfkc => is_nfkc_quick(text.chars()),
            Normalizer::Nfkd => is_nfkd_quick(text.chars()),
            Normalizer::Bert(bert) => return bert.normalize(text),
            Normalizer::SentencePiece(spm) => return Cow::Owned(spm.normalize(text)),
            Normalizer::Precompiled(map) => return precompiled::hf_normalize(map, text),
            Normalizer::Replace(r) => return r.apply(text),
            Normalizer::Strip { left, right } => {
                let mut s = text;
                if *left {
                    s = s.trim_start();
                }
                if *right {
                    s = s.trim_end();
                }
                return if s.len() == text.len() {
                    Cow::Borrowed(text)
                } else {
                    Cow::Owned(s.to_string())
                };
            }
            Normalizer::Prepend(p) => {
                return if text.is_empty() {
                    Cow::Borrowed(text)
                } else {
                    Cow::Owned(format!("{p}{text}"))
                }
            }
            Normalizer::Sequence(steps) => {
                let mut current = Cow::Borrowed(text);
                for step in steps.iter() {
                    if let Cow::Owned(changed) = step.normalize(&current) {
                        current = Cow::Owned(changed);
                    }
                }
                return current;
            }
        };
        if quick == IsNormalized::Yes {
            return Cow::Borrowed(text);
        }
        Cow::Owned(match self {
            Normalizer::Nfc => text.nfc().collect(),
            Normalizer::Nfd => text.nfd().collect(),
            Normalizer::Nfkc => text.nfkc().collect(),
            Normalizer::Nfkd => text.nfkd().collect(),
            _ => unreachable!("returned above"),
        })
    }
}
