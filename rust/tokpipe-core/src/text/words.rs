//! The pipeline's one word unit for statistics in any script ("script-aware words"), shared by
//! the `text_stats` and `blocklist` kernels so that "per word" means the same in both:
//!
//! - the text is cut into tokens at whitespace (Python's `str.isspace`);
//! - inside a token, every CJK character ([`is_cjk`]: a letter or number in the Han,
//!   Hiragana or Katakana blocks) is one word by itself and cuts the token, since Chinese and
//!   Japanese put no spaces between words; the CJK full stops `。！？｡` ([`is_cjk_terminal`])
//!   cut it too, without being words;
//! - every other piece of a token is one word when it holds at least one letter or number
//!   (Unicode categories L* and N*), so `-`, `#` or `...` standing alone are not words.
//!
//! So `"don't stop."` is 2 words, `"我是猫。"` 3, `"GPT-4は強い"` 4 (`GPT-4`, `は`, `強`, `い`).
//! English spaCy words (`en_words`) would be closer to a linguist's count but exist for English
//! only; this unit is the same in every language and cheap to check from Python.
//!
//! The language rules (Gopher, FineWeb) pick their words with [`Splitter`]: spaCy's for English,
//! as datatrove splits English, and this unit for Chinese and Japanese, which are written
//! without spaces. A dictionary segmenter (jieba) would give longer Chinese words, but its
//! output depends on its dictionary, it needs one per language and it is slow; the rules read
//! counts, lengths, n-gram repeats and stop words, which work on characters with thresholds set
//! for them (see the stages' language defaults).

use super::chars::is_alnum;
use super::lines::is_py_space;

/// Whether `c` lies in one of the CJK blocks whose letters count as one word each: 々〆〇 and
/// 〻 (U+3005..U+3007, U+303B), Hiragana and Katakana (U+3040..U+30FF), Katakana Phonetic
/// Extensions (U+31F0..U+31FF), CJK Unified Ideographs and Extension A (U+3400..U+4DBF,
/// U+4E00..U+9FFF), CJK Compatibility Ideographs (U+F900..U+FAFF), halfwidth Katakana
/// (U+FF66..U+FF9F) and planes 2 and 3 (U+20000..U+3FFFF, the other ideograph extensions).
#[inline]
fn in_cjk_blocks(c: char) -> bool {
    matches!(c as u32,
        0x3005..=0x3007 | 0x303B | 0x3040..=0x30FF | 0x31F0..=0x31FF | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0xFF66..=0xFF9F | 0x20000..=0x3FFFF)
}

/// A CJK character: a letter or number (see [`is_alnum`]) in the CJK blocks (so the kana
/// middle dot `・` and unassigned code points are not).
#[inline]
pub fn is_cjk(c: char) -> bool {
    (c as u32) >= 0x3005 && in_cjk_blocks(c) && is_alnum(c)
}

/// The CJK full stops that end a sentence and cut a token: `。` `！` `？` `｡`.
#[inline]
pub fn is_cjk_terminal(c: char) -> bool {
    matches!(c, '。' | '！' | '？' | '｡')
}

/// Walks the script-aware words of a text one character at a time; [`WordScanner::feed`]
/// tells, for each character, whether a word ended just before it or with it.
#[derive(Default)]
pub struct WordScanner {
    in_piece: bool,
    piece_has_alnum: bool,
}

impl WordScanner {
    /// Feeds the next character; returns how many words were completed (0, 1 or 2: a piece
    /// that a CJK character ends, and the CJK character itself).
    #[inline]
    pub fn feed(&mut self, c: char) -> u32 {
        if is_py_space(c) || is_cjk_terminal(c) {
            self.end_piece()
        } else if is_cjk(c) {
            self.end_piece() + 1
        } else {
            self.in_piece = true;
            if !self.piece_has_alnum && is_alnum(c) {
                self.piece_has_alnum = true;
            }
            0
        }
    }

    /// [`WordScanner::feed`] for an ASCII byte (no CJK, no table lookups).
    #[inline]
    pub fn feed_ascii(&mut self, b: u8) -> u32 {
        // Python's ASCII whitespace: \t \n \v \f \r, \x1c..\x1f and the space.
        if matches!(b, b'\t'..=b'\r' | 0x1c..=b' ') {
            self.end_piece()
        } else {
            self.in_piece = true;
            self.piece_has_alnum |= b.is_ascii_alphanumeric();
            0
        }
    }

    /// Ends the current piece (at whitespace, a cut or the text's end): 1 when it was a word.
    #[inline]
    pub fn end_piece(&mut self) -> u32 {
        let word = u32::from(self.in_piece && self.piece_has_alnum);
        self.in_piece = false;
        self.piece_has_alnum = false;
        word
    }
}

/// Calls `emit` with each script-aware word of `text`, in order (the words [`word_count`]
/// counts).
pub fn for_each_word<'t>(text: &'t str, mut emit: impl FnMut(&'t str)) {
    // The current piece: where it starts, and whether it has a letter or number yet.
    let mut piece: Option<(usize, bool)> = None;
    let mut end_piece = |piece: &mut Option<(usize, bool)>, at: usize| {
        if let Some((start, true)) = piece.take() {
            emit(&text[start..at]);
        }
    };
    for (i, c) in text.char_indices() {
        if is_py_space(c) || is_cjk_terminal(c) {
            end_piece(&mut piece, i);
        } else if is_cjk(c) {
            end_piece(&mut piece, i);
            piece = Some((i, true));
            end_piece(&mut piece, i + c.len_utf8());
        } else {
            let (_, alnum) = piece.get_or_insert((i, false));
            *alnum |= is_alnum(c);
        }
    }
    end_piece(&mut piece, text.len());
}

/// Calls `emit` with each Unicode word of `text`: the words of UAX #29's word boundaries (the
/// segments holding a letter or number), each CJK character ([`is_cjk`]) cut out as a word of
/// its own. UAX #29 already leaves every Han character and hiragana alone but keeps runs of
/// katakana (and letters glued to them) together; cutting them makes "per word" mean per
/// character in Chinese and Japanese, as in the script-aware unit.
pub fn for_each_unicode_word<'t>(text: &'t str, mut emit: impl FnMut(&'t str)) {
    use unicode_segmentation::UnicodeSegmentation;
    let mut emit_piece = |piece: &'t str| {
        if piece.chars().any(is_alnum) {
            emit(piece);
        }
    };
    for word in text.unicode_words() {
        let mut start = 0;
        for (i, c) in word.char_indices() {
            if is_cjk(c) {
                emit_piece(&word[start..i]);
                start = i + c.len_utf8();
                emit_piece(&word[i..start]);
            }
        }
        emit_piece(&word[start..]);
    }
}

/// How a language's text is cut into words for the language rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Splitter {
    /// spaCy's English tokenizer ([`en_words`](super::en_words)), as datatrove splits English.
    English,
    /// The script-aware unit of this module, for Chinese and Japanese.
    ScriptAware,
    /// Unicode words ([`for_each_unicode_word`]), for measures across languages such as a
    /// tokenizer's tokens per word.
    Unicode,
}

impl Splitter {
    /// The splitter for an ISO 639-1 code, if there is one.
    pub fn for_language(code: &str) -> Option<Splitter> {
        match code {
            "en" => Some(Splitter::English),
            "zh" | "ja" => Some(Splitter::ScriptAware),
            _ => None,
        }
    }

    /// The splitter of a language code (see [`Splitter::for_language`]), or `"unicode"` for
    /// [`Splitter::Unicode`], which no language rule uses.
    pub fn named(name: &str) -> Option<Splitter> {
        match name {
            "unicode" => Some(Splitter::Unicode),
            _ => Splitter::for_language(name),
        }
    }

    /// Calls `emit` with each word of `text`, in order.
    #[inline]
    pub fn for_each_word<'t>(self, text: &'t str, emit: impl FnMut(&'t str)) {
        match self {
            Splitter::English => super::en_words::for_each_word(text, emit),
            Splitter::ScriptAware => for_each_word(text, emit),
            Splitter::Unicode => for_each_unicode_word(text, emit),
        }
    }
}

/// The number of words of each row of `column` where `selected` is non-zero (every row when
/// `None`), 0 elsewhere; rows in parallel.
pub fn word_count_column(
    splitter: Splitter,
    column: &super::StrColumn,
    selected: Option<&[u8]>,
) -> Vec<u64> {
    use rayon::prelude::*;
    (0..column.len())
        .into_par_iter()
        .with_min_len(64)
        .map(|i| {
            let mut n = 0u64;
            if selected.is_none_or(|s| s[i] != 0) {
                splitter.for_each_word(column.get(i), |_| n += 1);
            }
            n
        })
        .collect()
}

/// The number of script-aware words in `text`.
pub fn word_count(text: &str) -> u64 {
    let mut scanner = WordScanner::default();
    let mut n = 0u64;
    for c in text.chars() {
        n += u64::from(if c.is_ascii() {
            scanner.feed_ascii(c as u8)
        } else {
            scanner.feed(c)
        });
    }
    n + u64::from(scanner.end_piece())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_words_in_any_script() {
        assert_eq!(word_count("don't stop."), 2);
        assert_eq!(word_count("我是猫。"), 3);
        assert_eq!(word_count("GPT-4は強い"), 4);
        assert_eq!(word_count(" - # ... "), 0);
        assert_eq!(word_count("a・b 3.14"), 2);
        assert_eq!(word_count("abc。def"), 2);
        assert_eq!(word_count(""), 0);
    }

    #[test]
    fn words_are_the_counted_ones() {
        for text in [
            "don't stop.",
            "我是猫。",
            "GPT-4は強い",
            " - # ... ",
            "a・b 3.14",
            "abc。def",
            "使用Transformer模型，v2 版本。",
        ] {
            let mut words = Vec::new();
            for_each_word(text, |w| words.push(w));
            assert_eq!(words.len() as u64, word_count(text), "{text}");
        }
        let mut words = Vec::new();
        for_each_word("GPT-4は強い。使用Transformer模型，v2", |w| {
            words.push(w)
        });
        assert_eq!(
            words,
            [
                "GPT-4",
                "は",
                "強",
                "い",
                "使",
                "用",
                "Transformer",
                "模",
                "型",
                "，v2"
            ]
        );
    }

    #[test]
    fn unicode_words_cut_cjk_characters() {
        let words = |text| {
            let mut words = Vec::new();
            for_each_unicode_word(text, |w| words.push(w));
            words
        };
        // UAX #29 keeps "don't" and "3.14" whole and drops punctuation; katakana runs are cut
        // into characters like Han and hiragana.
        assert_eq!(words("Don't stop, 3.14!"), ["Don't", "stop", "3.14"]);
        assert_eq!(words("GPT-4は強い"), ["GPT", "4", "は", "強", "い"]);
        assert_eq!(
            words("コーヒー。我是猫"),
            ["コ", "ー", "ヒ", "ー", "我", "是", "猫"]
        );
        assert_eq!(Splitter::named("unicode"), Some(Splitter::Unicode));
        assert_eq!(Splitter::named("en"), Some(Splitter::English));
        assert_eq!(Splitter::for_language("unicode"), None);
    }
}
