//! Pre-tokenization: cutting text into the pieces that the model then encodes one by one.
//!
//! [`bert`] is HF's BertPreTokenizer (whitespace and punctuation), for WordPiece;
//! [`metaspace`] is HF's Metaspace (sentencepiece-converted tokenizers). A sentencepiece model
//! is encoded whole ([`PreTokenizer::Whole`]): its normalizer already wrote the spaces as `▁`.
//!
//! The three OpenAI patterns are presets. Each preset has a hand-written scanner
//! ([`scanners`]) that gives exactly the pieces the published regex gives (tested against
//! fancy-regex on real text) at several times the speed; any other pattern runs through
//! fancy-regex, which supports the look-arounds and possessive quantifiers these patterns use.

mod ascii_windows;
pub mod bert;
pub mod byte_level;
pub mod metaspace;
pub mod scanners;

use crate::error::{shown, Error, Result};
pub use metaspace::{Metaspace, PrependScheme};
use std::sync::Arc;

/// GPT-2 / r50k / p50k split pattern, as tiktoken publishes it. HF's ByteLevel pre-tokenizer uses
/// an older spelling (`\s+(?!\S)|\s+` without `\s++$`) that splits every string the same way.
pub const GPT2_PATTERN: &str =
    r"'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s";

/// cl100k_base split pattern.
pub const CL100K_PATTERN: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

/// o200k_base split pattern.
pub const O200K_PATTERN: &str = concat!(
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
    "|",
    r"\p{N}{1,3}",
    "|",
    r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
    "|",
    r"\s*[\r\n]+",
    "|",
    r"\s+(?!\S)",
    "|",
    r"\s+",
);

/// cl100k as HF `tokenizers` must be given it. HF's regex engine (Oniguruma) reads `{1,3}+`
/// as "the interval, repeated" rather than possessive, which would glue any number of digits
/// into one piece; the plain `{1,3}` means the same as tiktoken's possessive form here, as
/// nothing in its branch follows it.
pub const CL100K_PATTERN_HF: &str = r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s";

/// The HF ByteLevel pre-tokenizer's own spelling of the GPT-2 pattern; recognised on load.
pub const HF_BYTE_LEVEL_PATTERN: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Preset {
    Gpt2,
    Cl100k,
    O200k,
}

impl Preset {
    pub fn name(self) -> &'static str {
        match self {
            Preset::Gpt2 => "gpt2",
            Preset::Cl100k => "cl100k",
            Preset::O200k => "o200k",
        }
    }

    pub fn pattern(self) -> &'static str {
        match self {
            Preset::Gpt2 => GPT2_PATTERN,
            Preset::Cl100k => CL100K_PATTERN,
            Preset::O200k => O200K_PATTERN,
        }
    }

    /// Accepts the preset names and the tiktoken encoding names that use each pattern.
    pub fn from_name(name: &str) -> Option<Preset> {
        match name {
            "gpt2" | "r50k" | "r50k_base" | "p50k" | "p50k_base" | "p50k_edit" => {
                Some(Preset::Gpt2)
            }
            "cl100k" | "cl100k_base" => Some(Preset::Cl100k),
            "o200k" | "o200k_base" | "o200k_harmony" => Some(Preset::O200k),
            _ => None,
        }
    }

    /// The pattern as written into an HF `tokenizer.json` (see [`CL100K_PATTERN_HF`]).
    pub fn hf_pattern(self) -> &'static str {
        match self {
            Preset::Cl100k => CL100K_PATTERN_HF,
            other => other.pattern(),
        }
    }

    /// Recognises a preset from its regex text, so a tokenizer.json that spells out the cl100k
    /// pattern still gets the fast scanner.
    pub fn from_pattern(pattern: &str) -> Option<Preset> {
        [Preset::Gpt2, Preset::Cl100k, Preset::O200k]
            .into_iter()
            .find(|p| p.pattern() == pattern)
            .or_else(|| (pattern == HF_BYTE_LEVEL_PATTERN).then_some(Preset::Gpt2))
            .or_else(|| (pattern == CL100K_PATTERN_HF).then_some(Preset::Cl100k))
    }
}

/// Splits text into pieces. Cheap to clone (the compiled regex is shared).
#[derive(Clone, Debug)]
pub enum PreTokenizer {
    Preset(Preset),
    Regex {
        pattern: String,
        regex: std::sync::Arc<fancy_regex::Regex>,
    },
    /// HF's BertPreTokenizer: whitespace removed, punctuation isolated.
    Bert,
    /// No split: the text is one piece (a sentencepiece model; HF's `null`).
    Whole,
    /// HF's Metaspace. It rewrites the text, so it runs through [`PreTokenizer::for_each_piece`].
    Metaspace(Metaspace),
    /// HF's `Split` with behavior `Isolated`: each match and each stretch between matches is a
    /// piece.
    SplitIsolated {
        pattern: String,
        regex: Arc<fancy_regex::Regex>,
    },
    /// HF's `Sequence`: each step applied to every piece of the one before.
    Sequence(Arc<[PreTokenizer]>),
}

impl PreTokenizer {
    /// A preset name (`gpt2`, `cl100k`, `o200k`, or a tiktoken encoding name), `bert`, or a
    /// regex.
    pub fn new(name_or_pattern: &str) -> Result<Self> {
        if name_or_pattern == "bert" {
            return Ok(PreTokenizer::Bert);
        }
        if let Some(preset) =
            Preset::from_name(name_or_pattern).or_else(|| Preset::from_pattern(name_or_pattern))
        {
            return Ok(PreTokenizer::Preset(preset));
        }
        Self::regex(name_or_pattern)
    }

    /// Always the regex engine, even for a preset's pattern (the scanners' reference in tests).
    pub fn regex(pattern: &str) -> Result<Self> {
        let regex = fancy_regex::RegexBuilder::new(pattern)
            // Possessive patterns never need this much; a user pattern that backtracks badly on a
            // long line fails with a clear error instead of hanging.
            .backtrack_limit(10_000_000)
            .build()
            .map_err(|e| Error::Pattern(format!("{}: {e}", shown(pattern))))?;
        Ok(PreTokenizer::Regex {
            pattern: pattern.to_string(),
            regex: std::sync::Arc::new(regex),
        })
    }

    /// HF's `Split` (behavior `Isolated`) on a regex.
    pub fn split_isolated(pattern: &str) -> Result<Self> {
        let regex = fancy_regex::RegexBuilder::new(pattern)
            .backtrack_limit(10_000_000)
            .build()
            .map_err(|e| Error::Pattern(format!("{}: {e}", shown(pattern))))?;
        Ok(PreTokenizer::SplitIsolated {
            pattern: pattern.to_string(),
            regex: Arc::new(regex),
        })
    }

    pub fn pattern(&self) -> &str {
        match self {
            PreTokenizer::Preset(p) => p.pattern(),
            PreTokenizer::Regex { pattern, .. } | PreTokenizer::SplitIsolated { pattern, .. } => {
                pattern
            }
            PreTokenizer::Bert => "bert",
            PreTokenizer::Whole => "",
            PreTokenizer::Metaspace(_) => "metaspace",
            PreTokenizer::Sequence(_) => "sequence",
        }
    }

    pub fn preset(&self) -> Option<Preset> {
        match self {
            PreTokenizer::Preset(p) => Some(*p),
            _ => None,
        }
    }

    /// Whether a Metaspace step puts `▁` only before the first stretch of the input (so the
    /// tokenizer must tell whether a stretch's normalized text starts the input).
    pub fn prepends_first_only(&self) -> bool {
        match self {
            PreTokenizer::Metaspace(m) => m.prepend_scheme == PrependScheme::First,
            PreTokenizer::Sequence(steps) => steps.iter().any(PreTokenizer::prepends_first_only),
            _ => false,
        }
    }

    /// Calls `emit` with each piece of `text`, for every kind of pre-tokenizer, the ones that
    /// rewrite the text included; `at_start`: the text starts the input (Metaspace's `first`).
    pub fn for_each_piece(
        &self,
        text: &str,
        at_start: bool,
        emit: &mut dyn FnMut(&str),
    ) -> Result<()> {
        match self {
            PreTokenizer::Metaspace(m) => {
                m.for_each_piece(text, at_start, emit);
                Ok(())
            }
            // Converters wrap a lone Metaspace in a Sequence: no copies of its pieces.
            PreTokenizer::Sequence(steps) if steps.len() == 1 => {
                steps[0].for_each_piece(text, at_start, emit)
            }
            PreTokenizer::Sequence(steps) => {
                let mut pieces: Vec<String> = vec![text.to_string()];
                for step in steps.iter() {
                    let mut next = Vec::with_capacity(pieces.len());
                    for (i, p) in pieces.iter().enumerate() {
                        step.for_each_piece(p, at_start && i == 0, &mut |q| {
                            next.push(q.to_string())
                        })?;
                    }
                    pieces = next;
                }
                for p in &pieces {
                    emit(p);
                }
                Ok(())
            }
            _ => self.split(text, emit),
        }
    }
    /// Calls `emit` with each piece of `text`, in order; the pieces concatenate to `text`
    /// except where the pattern skips characters it cannot match (never for the presets).
    pub fn split<'a>(&self, text: &'a str, mut emit: impl FnMut(&'a str)) -> Result<()> {
        match self {
            PreTokenizer::Preset(Preset::Gpt2) => scanners::gpt2(text, &mut emit),
            PreTokenizer::Preset(Preset::Cl100k) => scanners::cl100k(text, &mut emit),
            PreTokenizer::Preset(Preset::O200k) => scanners::o200k(text, &mut emit),
            PreTokenizer::Regex { regex, pattern } => {
                for m in regex.find_iter(text) {
                    let m = m.map_err(|e| Error::Pattern(format!("{}: {e}", shown(pattern))))?;
                    emit(m.as_str());
                }
            }
            // Through `dyn`: one copy of the BERT splitter, not one per caller's closure, so
            // the byte-level presets' `split` stays as small (and as inlined) as before.
            PreTokenizer::Bert => bert::split_dyn(text, &mut emit),
            PreTokenizer::Whole => {
                if !text.is_empty() {
                    emit(text)
                }
            }
            PreTokenizer::SplitIsolated { regex, pattern } => {
                let mut last = 0;
                for m in regex.find_iter(text) {
                    let m = m.map_err(|e| Error::Pattern(format!("{}: {e}", shown(pattern))))?;
                    if m.start() > last {
                        emit(&text[last..m.start()]);
                    }
                    if m.end() > m.start() {
                        emit(m.as_str());
                    }
                    last = m.end();
                }
                if last < text.len() {
                    emit(&text[last..]);
                }
            }
            PreTokenizer::Metaspace(_) | PreTokenizer::Sequence(_) => {
                return Err(Error::InvalidArgument(
                    "this pre-tokenizer rewrites the text; its pieces come from for_each_piece"
                        .into(),
                ))
            }
        }
        Ok(())
    }

    /// The pieces as a vector; convenient for tests and the trainer's counting.
    pub fn pieces<'a>(&self, text: &'a str) -> Result<Vec<&'a str>> {
        let mut out = Vec::new();
        self.split(text, |p| out.push(p))?;
        Ok(out)
    }
}
