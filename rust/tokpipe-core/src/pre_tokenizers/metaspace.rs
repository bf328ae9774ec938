//! HF's `Metaspace` pre-tokenizer (sentencepiece-converted tokenizers): spaces become the
//! replacement character (`▁`), one is put in front of the text as `prepend_scheme` says, and
//! with `split` the text is cut before every replacement character (HF's `MergedWithNext`:
//! `"▁Hey▁▁you"` gives `"▁Hey"`, `"▁"`, `"▁you"`).

use std::borrow::Cow;

/// When the replacement is put in front of a text that does not start with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrependScheme {
    /// Only before the first stretch of the input (not after an added token).
    First,
    Never,
    /// Before every stretch between added tokens.
    Always,
}

impl PrependScheme {
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "first" => Some(PrependScheme::First),
            "never" => Some(PrependScheme::Never),
            "always" => Some(PrependScheme::Always),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            PrependScheme::First => "first",
            PrependScheme::Never => "never",
            PrependScheme::Always => "always",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metaspace {
    pub replacement: char,
    pub prepend_scheme: PrependScheme,
    pub split: bool,
}

impl Metaspace {
    /// The text with spaces replaced and the replacement prepended; `at_start`: the text
    /// starts the input (for [`PrependScheme::First`]). Empty text stays empty.
    pub fn transform<'a>(&self, text: &'a str, at_start: bool) -> Cow<'a, str> {
        if text.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut rep = [0u8; 4];
        let rep: &str = self.replacement.encode_utf8(&mut rep);
        let prepend = !text.starts_with(' ')
            && !text.starts_with(self.replacement)
            && match self.prepend_scheme {
                PrependScheme::Always => true,
                PrependScheme::First => at_start,
                PrependScheme::Never => false,
            };
        if !prepend && !text.contains(' ') {
            return Cow::Borrowed(text);
        }
        let mut out = String::with_capacity(text.len() + text.len() / 4 + 4);
        if prepend {
            out.push_str(rep);
        }
        // A plain loop, not a `memchr` call per space: in prose a space comes every few bytes.
        let mut last = 0;
        for (i, _) in text.bytes().enumerate().filter(|&(_, b)| b == b' ') {
            out.push_str(&text[last..i]);
            out.push_str(rep);
            last = i + 1;
        }
        out.push_str(&text[last..]);
        Cow::Owned(out)
    }

    /// Calls `emit` with each piece of already transformed text: cut before every replacement
    /// character when `split`, else the whole text.
    pub fn split<'a>(&self, text: &'a str, emit: &mut dyn FnMut(&'a str)) {
        if !self.split {
            if !text.is_empty() {
                emit(text);
            }
            return;
        }
        let mut rep = [0u8; 4];
        let rep = self.replacement.encode_utf8(&mut rep).as_bytes();
        let mut start = 0;
        // `memmem` looks for the whole replacement at once, where `match_indices` stops at
        // every occurrence of its last byte (`▁`'s is a continuation byte common in most
        // scripts).
        for i in memchr::memmem::find_iter(text.as_bytes(), rep) {
            if i > start {
                emit(&text[start..i]);
            }
            start = i;
        }
        if start < text.len() {
            emit(&text[start..]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(m: &Metaspace, text: &str, at_start: bool) -> Vec<String> {
        let t = m.transform(text, at_start);
        let mut out = Vec::new();
        m.split(&t, &mut |p| out.push(p.to_string()));
        out
    }

    #[test]
    fn hf_examples() {
        let m = Metaspace {
            replacement: '▁',
            prepend_scheme: PrependScheme::Always,
            split: true,
        };
        assert_eq!(pieces(&m, "Hey friend!", true), ["▁Hey", "▁friend!"]);
        assert_eq!(
            pieces(&m, "Hey   friend!", true),
            ["▁Hey", "▁", "▁", "▁friend!"]
        );
        assert_eq!(pieces(&m, " Hey", false), ["▁Hey"]);
        assert_eq!(pieces(&m, "", true), Vec::<String>::new());
        // `ぁ` ends in `▁`'s last byte (0x81): only the whole character cuts.
        assert_eq!(pieces(&m, "ぁ▁ぁ ぁ", true), ["▁ぁ", "▁ぁ", "▁ぁ"]);
        let first = Metaspace {
            prepend_scheme: PrependScheme::First,
            split: false,
            ..m.clone()
        };
        assert_eq!(pieces(&first, "a b", true), ["▁a▁b"]);
        assert_eq!(pieces(&first, "a b", false), ["a▁b"]);
    }
}
