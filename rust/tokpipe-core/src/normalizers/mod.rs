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

/// `text` less the Unicode whitespace at the ends Strip names.
fn strip(text: &str, left: bool, right: bool) -> &str {
    let mut s = text;
    if left {
        s = s.trim_start();
    }
    if right {
        s = s.trim_end();
    }
    s
}

impl Normalizer {
    /// [`Normalizer::normalize`] of text a previous step may have written: Strip cuts
    /// borrowed text as a slice and owned text in place, so a Sequence copies the text only
    /// where a step rewrites it.
    fn normalize_cow<'a>(&self, text: Cow<'a, str>) -> Cow<'a, str> {
        match (self, text) {
            (_, Cow::Borrowed(text)) => self.normalize(text),
            (Normalizer::Strip { left, right }, Cow::Owned(mut owned)) => {
                let kept = strip(&owned, *left, *right);
                let (from, to) = (kept.as_ptr() as usize - owned.as_ptr() as usize, kept.len());
                owned.truncate(from + to);
                owned.drain(..from);
                Cow::Owned(owned)
            }
            (_, Cow::Owned(owned)) => match self.normalize(&owned) {
                Cow::Owned(changed) => Cow::Owned(changed),
                Cow::Borrowed(kept) if kept.len() == owned.len() => Cow::Owned(owned),
                // A step that answers with a slice of its input (Strip inside a Sequence).
                Cow::Borrowed(kept) => Cow::Owned(kept.to_string()),
            },
        }
    }

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
            // What Strip keeps is a slice of its input: no copy.
            Normalizer::Strip { left, right } => return Cow::Borrowed(strip(text, *left, *right)),
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
                    current = step.normalize_cow(current);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// T5's normalizers (Strip and a Replace after a step that rewrites the text, and Strip
    /// first): a Sequence gives what its steps give one after the other, each on its own copy.
    #[test]
    fn a_sequence_with_strip_equals_its_steps_in_turn() {
        let replace = |pattern: &str, content: &str| {
            let pattern = replace::ReplacePattern::Regex(pattern.to_string());
            Normalizer::Replace(Arc::new(Replace::new(pattern, content).unwrap()))
        };
        let strips = [(true, true), (false, true), (true, false)]
            .map(|(left, right)| Normalizer::Strip { left, right });
        let mut sequences = Vec::new();
        for strip in &strips {
            sequences.push(vec![Normalizer::Nfkc, strip.clone(), replace(" {2,}", "▁")]);
            sequences.push(vec![replace("a", "  "), strip.clone(), Normalizer::Nfc]);
            sequences.push(vec![strip.clone(), Normalizer::Prepend("▁".into())]);
            sequences.push(vec![Normalizer::Prepend(" ".into()), strip.clone()]);
        }
        let alphabet = [
            ' ', ' ', '\t', '\n', '\r', '\u{a0}', '\u{3000}', '\u{301}', 'a', 'e', 'ﬁ', '▁',
        ];
        let mut rng = crate::util::SplitMix64::new(3);
        let mut texts: Vec<String> = (0..2000)
            .map(|_| {
                let len = (rng.next_u64() % 12) as usize;
                (0..len)
                    .map(|_| alphabet[(rng.next_u64() % alphabet.len() as u64) as usize])
                    .collect()
            })
            .collect();
        let text = crate::util::shared_text("tinyshakespeare.txt");
        texts.extend(text.split("\n\n").take(300).map(|p| format!(" {p}  \n")));
        for steps in sequences {
            let sequence = Normalizer::Sequence(steps.clone().into());
            for text in &texts {
                let mut expected = text.clone();
                for step in &steps {
                    expected = step.normalize(&expected).into_owned();
                }
                assert_eq!(sequence.normalize(text), expected, "{steps:?} {text:?}");
            }
        }
    }
}
