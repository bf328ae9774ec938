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

/// What opens a piece that [`Metaspace::for_each_piece`] is reading.
#[derive(Clone, Copy)]
enum Opens {
    /// Nothing: the text's first piece, with no replacement put in front.
    Nothing,
    /// A replacement for a space, or the prepended one.
    Rep,
    /// The replacement already in the text at this byte.
    InText(usize),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Metaspace {
    pub replacement: char,
    pub prepend_scheme: PrependScheme,
    pub split: bool,
}

impl Metaspace {
    /// Whether the replacement goes before `text` (which starts the input when `at_start`).
    fn prepends(&self, text: &str, at_start: bool) -> bool {
        !text.starts_with(' ')
            && !text.starts_with(self.replacement)
            && match self.prepend_scheme {
                PrependScheme::Always => true,
                PrependScheme::First => at_start,
                PrependScheme::Never => false,
            }
    }

    /// The text with spaces replaced and the replacement prepended; `at_start`: the text
    /// starts the input (for [`PrependScheme::First`]). Empty text stays empty.
    pub fn transform<'a>(&self, text: &'a str, at_start: bool) -> Cow<'a, str> {
        if text.is_empty() {
            return Cow::Borrowed(text);
        }
        let mut rep = [0u8; 4];
        let rep: &str = self.replacement.encode_utf8(&mut rep);
        let prepend = self.prepends(text, at_start);
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

    /// [`Metaspace::transform`] then [`Metaspace::split`] in one pass, with the same pieces:
    /// with `split`, a piece is a replacement and the text up to the next space or
    /// replacement, so it is cut straight from `text` (a replacement already there) or put
    /// together in a small buffer (a space), and the rewritten text is never built.
    pub fn for_each_piece(&self, text: &str, at_start: bool, emit: &mut dyn FnMut(&str)) {
        // A space as the replacement would make every space both kinds of cut.
        if !self.split || self.replacement == ' ' {
            let t = self.transform(text, at_start);
            self.split(&t, emit);
            return;
        }
        if text.is_empty() {
            return;
        }
        let mut rep = [0u8; 4];
        let rep: &str = self.replacement.encode_utf8(&mut rep);
        let prepend = self.prepends(text, at_start);
        let bytes = text.as_bytes();
        let first = rep.as_bytes()[0];
        let mut piece = String::new();
        // The current piece: `text[start..i]` after what opens it.
        let mut opens = if prepend { Opens::Rep } else { Opens::Nothing };
        let mut start = 0;
        let mut i = 0;
        let mut flush = |opens: Opens, start: usize, end: usize| match opens {
            Opens::Nothing if start < end => emit(&text[start..end]),
            Opens::Nothing => {}
            Opens::InText(at) => emit(&text[at..end]),
            Opens::Rep => {
                piece.clear();
                piece.push_str(rep);
                piece.push_str(&text[start..end]);
                emit(&piece);
            }
        };
        // A plain loop: in prose a cut comes every few bytes, too often for `memchr` calls.
        while i < bytes.len() {
            let b = bytes[i];
            if b == b' ' {
                flush(opens, start, i);
                opens = Opens::Rep;
                i += 1;
                start = i;
            } else if b == first && bytes[i..].starts_with(rep.as_bytes()) {
                flush(opens, start, i);
                opens = Opens::InText(i);
                i += rep.len();
                start = i;
            } else {
                i += 1;
            }
        }
        flush(opens, start, bytes.len());
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
    fn one_pass_pieces_equal_transform_then_split() {
        let alphabet = [
            ' ', ' ', ' ', '\t', '\n', '\r', '\u{a0}', '\u{301}', '▁', '_', 'a', 'é', 'ぁ', '日',
        ];
        let mut rng = crate::util::SplitMix64::new(11);
        let mut texts: Vec<String> = (0..3000)
            .map(|_| {
                let len = (rng.next_u64() % 16) as usize;
                (0..len)
                    .map(|_| alphabet[(rng.next_u64() % alphabet.len() as u64) as usize])
                    .collect()
            })
            .collect();
        for name in ["botchan.txt", "wagahaiwa_nekodearu.txt"] {
            let text = crate::util::shared_text(name);
            texts.extend(text.lines().take(500).map(str::to_string));
            texts.push(text);
        }
        for replacement in ['▁', '_', ' '] {
            for prepend_scheme in [
                PrependScheme::First,
                PrependScheme::Never,
                PrependScheme::Always,
            ] {
                for split in [true, false] {
                    let m = Metaspace {
                        replacement,
                        prepend_scheme,
                        split,
                    };
                    for text in &texts {
                        for at_start in [true, false] {
                            let mut got = Vec::new();
                            m.for_each_piece(text, at_start, &mut |p| got.push(p.to_string()));
                            assert_eq!(got, pieces(&m, text, at_start), "{m:?} {text:?}");
                        }
                    }
                }
            }
        }
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
