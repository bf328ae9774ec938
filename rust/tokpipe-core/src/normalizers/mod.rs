//! Text normalizers applied before pre-tokenization (HF's `normalizer` field): the Unicode
//! normal forms and BERT's normalizer ([`bert`]). Text that is already normalized is passed
//! through without a copy.

pub mod bert;
pub(crate) mod bert_tables;

pub use bert::BertNormalizer;
use std::borrow::Cow;
use unicode_normalization::{
    is_nfc_quick, is_nfd_quick, is_nfkc_quick, is_nfkd_quick, IsNormalized, UnicodeNormalization,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Normalizer {
    Nfc,
    Nfd,
    Nfkc,
    Nfkd,
    Bert(BertNormalizer),
}

impl Normalizer {
    /// The HF `tokenizer.json` type name (`"NFC"`, ...).
    pub fn from_hf_type(name: &str) -> Option<Self> {
        match name {
            "NFC" => Some(Normalizer::Nfc),
            "NFD" => Some(Normalizer::Nfd),
            "NFKC" => Some(Normalizer::Nfkc),
            "NFKD" => Some(Normalizer::Nfkd),
            _ => None,
        }
    }

    pub fn hf_type(self) -> &'static str {
        match self {
            Normalizer::Bert(_) => "BertNormalizer",
            Normalizer::Nfc => "NFC",
            Normalizer::Nfd => "NFD",
            Normalizer::Nfkc => "NFKC",
            Normalizer::Nfkd => "NFKD",
        }
    }

    pub fn normalize<'a>(self, text: &'a str) -> Cow<'a, str> {
        // The quick check answers "yes" for almost all real text (ASCII always), so the common
        // case costs one scan and no allocation.
        let quick = match self {
            Normalizer::Nfc => is_nfc_quick(text.chars()),
            Normalizer::Nfd => is_nfd_quick(text.chars()),
            Normalizer::Nfkc => is_nfkc_quick(text.chars()),
            Normalizer::Nfkd => is_nfkd_quick(text.chars()),
            Normalizer::Bert(bert) => return bert.normalize(text),
        };
        if quick == IsNormalized::Yes {
            return Cow::Borrowed(text);
        }
        Cow::Owned(match self {
            Normalizer::Nfc => text.nfc().collect(),
            Normalizer::Nfd => text.nfd().collect(),
            Normalizer::Nfkc => text.nfkc().collect(),
            Normalizer::Nfkd => text.nfkd().collect(),
            Normalizer::Bert(_) => unreachable!("returned above"),
        })
    }
}
