//! Where the first character of normalized text came from, as HF's alignments say.
//!
//! HF's `Metaspace` with `prepend_scheme: "first"` puts `▁` in front of a stretch of text only
//! when its normalized form starts at offset 0 of the input: a normalizer that drops leading
//! characters (`Strip`, a `Replace` of leading spaces) moves that start, and no `▁` is put.
//! HF knows the start from the alignments it keeps for every byte of normalized text; here the
//! same alignments (their start side) are carried through the steps that converted tokenizers
//! use, with HF's rules for each: a `Replace` gives its new characters the alignment of the
//! last byte it replaced, `Strip` keeps the alignments of what it keeps, `Prepend` gives the
//! prepended text the first character's, `Precompiled` goes through HF's `transform` with the
//! list of changes HF builds (including its quirk that dropping the very first character is
//! not recorded, so the next one inherits offset 0). The Unicode normal forms and BERT's
//! normalizer are followed character by character, which is exact unless characters compose
//! across each other; the sentencepiece normalizer never meets `Metaspace`.

use super::{precompiled, Normalizer};
use std::borrow::Cow;
use unicode_normalization::UnicodeNormalization;

impl Normalizer {
    /// The normalized text, and whether its first character comes from offset 0 of `text`
    /// (HF's `offsets_original().0 == 0` after normalization).
    pub fn normalize_from_start<'a>(&self, text: &'a str) -> (Cow<'a, str>, bool) {
        let align: Vec<usize> = text
            .char_indices()
            .flat_map(|(i, c)| std::iter::repeat_n(i, c.len_utf8()))
            .collect();
        let (normalized, align) = self.aligned(Cow::Borrowed(text), align);
        let from_start = align.first().is_none_or(|&a| a == 0);
        (normalized, from_start)
    }

    /// One step over `text` whose bytes start at `align` in the input.
    fn aligned<'a>(&self, text: Cow<'a, str>, align: Vec<usize>) -> (Cow<'a, str>, Vec<usize>) {
        match self {
            Normalizer::Sequence(steps) => {
                let (mut text, mut align) = (text, align);
                for step in steps.iter() {
                    (text, align) = step.aligned(text, align);
                }
                (text, align)
            }
            Normalizer::Replace(r) => {
                // The matches found once give both the text and its alignment (`r.apply`
                // replaces these same matches).
                let found = r.matches(&text);
                if found.is_empty() {
                    return (text, align);
                }
                let content = r.content();
                let mut out = String::with_capacity(text.len());
                let mut new_align = Vec::with_capacity(text.len());
                let mut last = 0;
                for (start, end) in found {
                    out.push_str(&text[last..start]);
                    out.push_str(content);
                    new_align.extend_from_slice(&align[last..start]);
                    let inherit = if end < 1 { 0 } else { align[end - 1] };
                    new_align.extend(std::iter::repeat_n(inherit, content.len()));
                    last = end;
                }
                out.push_str(&text[last..]);
                new_align.extend_from_slice(&align[last..]);
                (Cow::Owned(out), new_align)
            }
            Normalizer::Strip { left, right } => {
                let mut s: &str = &text;
                if *left {
                    s = s.trim_start();
                }
                if *right {
                    s = s.trim_end();
                }
                if s.len() == text.len() {
                    return (text, align);
                }
                let lead = text.len()
                    - text
                        .trim_start_matches(|c: char| *left && c.is_whitespace())
                        .len();
                let kept = align[lead..lead + s.len()].to_vec();
                (Cow::Owned(s.to_string()), kept)
            }
            Normalizer::Prepend(p) => {
                if text.is_empty() {
                    return (text, align);
                }
                let mut new_align = vec![align[0]; p.len()];
                new_align.extend_from_slice(&align);
                (Cow::Owned(format!("{p}{text}")), new_align)
            }
            Normalizer::Precompiled(map) => {
                let changes = precompiled::hf_changes(map, &text);
                match changes {
                    None => (text, align),
                    Some(dest) => transform(&text, &align, &dest),
                }
            }
            Normalizer::Nfc
            | Normalizer::Nfd
            | Normalizer::Nfkc
            | Normalizer::Nfkd
            | Normalizer::Bert(_) => {
                let out = self.normalize(&text);
                if matches!(out, Cow::Borrowed(_)) {
                    return (text, align);
                }
                let out = out.into_owned();
                // Character by character: each output character aligned to the input
                // character it comes from, when normalizing them one by one gives the same
                // text; otherwise output character k to input character k (or the last).
                let mut per_char = String::with_capacity(out.len());
                let mut per_align = Vec::with_capacity(out.len());
                for (i, c) in text.char_indices() {
                    let before = per_char.len();
                    match self {
                        Normalizer::Nfc => per_char.extend(std::iter::once(c).nfc()),
                        Normalizer::Nfd => per_char.extend(std::iter::once(c).nfd()),
                        Normalizer::Nfkc => per_char.extend(std::iter::once(c).nfkc()),
                        Normalizer::Nfkd => per_char.extend(std::iter::once(c).nfkd()),
                        _ => per_char.push_str(&self.normalize(&text[i..i + c.len_utf8()])),
                    }
                    per_align.extend(std::iter::repeat_n(align[i], per_char.len() - before));
                }
                if per_char == out {
                    return (Cow::Owned(out), per_align);
                }
                let starts: Vec<usize> = text.char_indices().map(|(i, _)| align[i]).collect();
                let mut new_align = Vec::with_capacity(out.len());
                for (k, c) in out.chars().enumerate() {
                    let a = starts.get(k).or(starts.last()).copied().unwrap_or(0);
                    new_align.extend(std::iter::repeat_n(a, c.len_utf8()));
                }
                (Cow::Owned(out), new_align)
            }
            Normalizer::SentencePiece(_) => {
                let out = self.normalize(&text).into_owned();
                let first = align.first().copied().unwrap_or(0);
                let n = out.len();
                (Cow::Owned(out), vec![first; n])
            }
        }
    }
}

/// HF's `NormalizedString::transform_range` over the whole text (`initial_offset` 0): each
/// `(char, change)` of `dest` replaces one character (`0`), is inserted (`1`), or replaces one
/// and removes `-change` more (`< 0`); a replacing character keeps the alignment of the one it
/// replaces, an inserted one takes that of the byte before.
fn transform(
    text: &str,
    align: &[usize],
    dest: &[(char, isize)],
) -> (Cow<'static, str>, Vec<usize>) {
    let mut old = text.chars();
    let mut offset = 0usize;
    let mut out = String::with_capacity(text.len());
    let mut new_align = Vec::with_capacity(text.len());
    for &(c, change) in dest {
        let a = if change > 0 {
            if offset < 1 {
                0
            } else {
                align.get(offset - 1).copied().unwrap_or(0)
            }
        } else {
            align.get(offset).copied().unwrap_or(0)
        };
        if change <= 0 {
            offset += old.next().map_or(0, char::len_utf8);
        }
        if change < 0 {
            for _ in 0..-change {
                offset += old.next().map_or(0, char::len_utf8);
            }
        }
        out.push(c);
        new_align.extend(std::iter::repeat_n(a, c.len_utf8()));
    }
    (Cow::Owned(out), new_align)
}
