//! From sentences to the trainer's words, and from words to the alphabet the pieces are made of.
//!
//! Counting (per sentence, in parallel): the encoder's sentencepiece normalizer
//! ([`SentencePieceNormalizer`]: the rule's charsmap, surrounding and repeated spaces removed,
//! spaces escaped to `▁`, a `▁` put in front), meta pieces (`<unk>`, `<s>`, user-defined and
//! control symbols, ...) found in the normalized text replaced by a tab, which sentencepiece
//! treats as an unbreakable boundary, then the sentence cut into words, each starting at a
//! `▁`. Distinct words are counted; the corpus itself is not kept.
//!
//! Training (once): the characters needed to cover `character_coverage` of the corpus become
//! the alphabet, numbered by frequency; every other character becomes the unknown character,
//! which no piece may hold. [`Alphabet::is_valid_piece`] is sentencepiece's rule for which
//! strings may be pieces (length, where `▁` may stand, one Unicode script per piece, digits).

use super::cuts;
use crate::models::piece_counter::PieceCounter;
use crate::normalizers::SentencePieceNormalizer;
use aho_corasick::{AhoCorasick, MatchKind};
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use unicode_script::{Script, UnicodeScript};

/// sentencepiece's escaped space (the normalizer's `SPACE_SYMBOL`, as a `char`).
pub(crate) const WHITESPACE: char = '\u{2581}';
/// sentencepiece reserves U+2585 for unknown characters: a sentence holding it is skipped.
pub(crate) const RESERVED_UNKNOWN: char = '\u{2585}';
/// What meta pieces in the text are replaced with; never part of a piece.
const BOUNDARY: char = '\t';
const BOUNDARY_STR: &str = "\t";

/// Which sentences were used, and why others were not (nothing is dropped silently).
#[derive(Debug, Default)]
pub(crate) struct SentenceStats {
    pub(crate) sentences: AtomicU64,
    pub(crate) too_long: AtomicU64,
    pub(crate) reserved_char: AtomicU64,
}

/// Cuts sentences into counted words.
#[derive(Debug)]
pub(crate) struct SentenceSplitter {
    /// What the trained tokenizer will normalize with.
    pub(crate) normalizer: SentencePieceNormalizer,
    pub(crate) split_by_whitespace: bool,
    /// Longer sentences (in bytes, before any change) are skipped, as sentencepiece does.
    pub(crate) max_sentence_length: usize,
    /// Finds meta pieces, longest first; `None` when there are none.
    pub(crate) meta: Option<AhoCorasick>,
}

impl SentenceSplitter {
    pub(crate) fn new(
        normalizer: SentencePieceNormalizer,
        split_by_whitespace: bool,
        max_sentence_length: usize,
        meta_pieces: &[&str],
    ) -> Self {
        let meta = (!meta_pieces.is_empty()).then(|| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostLongest)
                .build(meta_pieces)
                .expect("meta pieces are few and short")
        });
        SentenceSplitter {
            normalizer,
            split_by_whitespace,
            max_sentence_length,
            meta,
        }
    }

    /// Counts the words of every line of `text` (a line is a sentence, as sentencepiece reads
    /// its input files; a trailing newline is no part of it).
    pub(crate) fn count_text(&self, text: &str, counter: &mut PieceCounter, stats: &SentenceStats) {
        self.count_cut_text(text, &[], counter, stats);
    }

    /// [`SentenceSplitter::count_text`], the words also cut at `cuts`: ascending byte offsets
    /// into `text` where a pre-segmenter put a boundary, kept between two Han characters only
    /// (see [`super::cuts`]).
    pub(crate) fn count_cut_text(
        &self,
        text: &str,
        cuts: &[usize],
        counter: &mut PieceCounter,
        stats: &SentenceStats,
    ) {
        let mut buf = String::new();
        let (mut rest, mut line_start) = (cuts, 0);
        let (mut ordinals, mut positions) = (Vec::new(), Vec::new());
        for line in text.split_terminator('\n') {
            let start = line_start;
            line_start += line.len() + 1;
            let ends_here = rest.partition_point(|&c| c < start + line.len());
            let line_cuts;
            (line_cuts, rest) = rest.split_at(ends_here);
            if line.is_empty() {
                continue;
            }
            if line.len() > self.max_sentence_length {
                stats.too_long.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if line.contains(RESERVED_UNKNOWN) {
                stats.reserved_char.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            self.normalizer.normalize_into(line, &mut buf);
            if buf.is_empty() {
                continue;
            }
            stats.sentences.fetch_add(1, Ordering::Relaxed);
            positions.clear();
            if !line_cuts.is_empty() {
                let han = cuts::han_ordinals(line, start, line_cuts, &mut ordinals);
                cuts::positions(&buf, &ordinals, han, &mut positions);
            }
            let sentence = match &self.meta {
                Some(meta) if meta.is_match(buf.as_str()) => {
                    if positions.is_empty() {
                        let boundaries = vec![BOUNDARY_STR; meta.patterns_len()];
                        meta.replace_all(&buf, &boundaries)
                    } else {
                        cuts::replace_moving(meta, &buf, BOUNDARY_STR, &mut positions)
                    }
                }
                _ => std::mem::take(&mut buf),
            };
            cuts::for_each_cut_word(&sentence, self.split_by_whitespace, &positions, |word| {
                counter.add(word.as_bytes(), 1)
            });
            buf = sentence;
        }
    }
}

/// Calls `f` on each word of an escaped sentence: a new word starts at every `▁` (and at the
/// start), so `▁▁a` is `▁` and `▁a`. Without whitespace splitting the sentence is one word.
pub(crate) fn for_each_word(sentence: &str, split_by_whitespace: bool, mut f: impl FnMut(&str)) {
    if !split_by_whitespace {
        f(sentence);
        return;
    }
    let mut start = 0;
    for (at, _) in sentence.match_indices(WHITESPACE) {
        if at > start {
            f(&sentence[start..at]);
        }
        start = at;
    }
    if start < sentence.len() {
        f(&sentence[start..]);
    }
}

/// The characters of `char_counts` that pieces are made of: the most frequent ones, until
/// they cover `coverage` of all character occurrences, ties to the smaller code point. Tabs
/// count towards coverage but are never in the alphabet (they mark meta pieces).
pub(crate) fn required_chars(
    char_counts: &FxHashMap<char, u64>,
    coverage: f64,
) -> Vec<(char, u64)> {
    let mut sorted: Vec<(char, u64)> = char_counts
        .iter()
        .filter(|(&c, _)| c != '\0')
        .map(|(&c, &n)| (c, n))
        .collect();
    sorted.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let total: u64 = sorted.iter().map(|&(_, n)| n).sum();
    let mut covered = 0u64;
    let mut required = Vec::new();
    for (c, n) in sorted {
        if covered as f64 / total as f64 >= coverage {
            break;
        }
        covered += n;
        if c != BOUNDARY {
            required.push((c, n));
        }
    }
    required
}

/// What the piece rule needs to know of a character.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CharClass {
    Whitespace,
    Other {
        /// Hiragana and Katakana are Han here (Japanese pieces may mix them), `None` for
        /// Inherited (combining marks take the script before them).
        script: Option<Script>,
        /// ASCII and full-width decimal digits.
        digit: bool,
    },
}

fn classify(c: char) -> CharClass {
    if c == WHITESPACE {
        return CharClass::Whitespace;
    }
    let script = match c.script() {
        Script::Hiragana | Script::Katakana => Some(Script::Han),
        // The prolonged sound mark is Common in Unicode, Katakana for the purpose of pieces.
        _ if c == '\u{30fc}' => Some(Script::Han),
        Script::Inherited => None,
        // Unassigned characters: Common, as in sentencepiece's table.
        Script::Unknown => Some(Script::Common),
        s => Some(s),
    };
    let digit = c.is_ascii_digit() || ('\u{ff10}'..='\u{ff19}').contains(&c);
    CharClass::Other { script, digit }
}

/// Which strings may be pieces (sentencepiece's trainer options of the same names).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PieceRules {
    pub(crate) max_piece_length: usize,
    pub(crate) split_by_whitespace: bool,
    pub(crate) split_by_unicode_script: bool,
    pub(crate) split_by_number: bool,
    pub(crate) split_digits: bool,
}

/// The characters pieces are made of, numbered `0..len()` by falling frequency; id `len()` is
/// the unknown character.
#[derive(Debug)]
pub(crate) struct Alphabet {
    chars: Vec<char>,
    classes: Vec<CharClass>,
    ids: FxHashMap<char, u32>,
}

impl Alphabet {
    /// `required` in order (see [`required_chars`]).
    pub(crate) fn new(required: &[(char, u64)]) -> Self {
        let chars: Vec<char> = required.iter().map(|&(c, _)| c).collect();
        let classes = chars.iter().map(|&c| classify(c)).collect();
        let ids = chars
            .iter()
            .enumerate()
            .map(|(i, &c)| (c, i as u32))
            .collect();
        Alphabet {
            chars,
            classes,
            ids,
        }
    }

    /// Characters in the alphabet (the unknown character not counted).
    pub(crate) fn len(&self) -> usize {
        self.chars.len()
    }

    /// The id of `c`, or the unknown character's.
    #[inline]
    pub(crate) fn id(&self, c: char) -> u32 {
        self.ids.get(&c).copied().unwrap_or(self.chars.len() as u32)
    }

    pub(crate) fn char(&self, id: u32) -> char {
        self.chars[id as usize]
    }

    /// The piece spelled by character ids (none of them the unknown character).
    pub(crate) fn spell(&self, piece: &[u32]) -> String {
        piece.iter().map(|&c| self.char(c)).collect()
    }

    /// sentencepiece's rule: 1 to `max_piece_length` characters, no unknown character, `▁`
    /// only first (when splitting by whitespace; else anywhere but last), one script per piece
    /// (digits are a script of their own unless `split_by_number` is off), and with
    /// `split_digits` a digit only alone.
    pub(crate) fn is_valid_piece(&self, piece: &[u32], rules: &PieceRules) -> bool {
        if piece.is_empty() || piece.len() > rules.max_piece_length {
            return false;
        }
        let last = piece.len() - 1;
        let mut prev: Option<Script> = None;
        for (pos, &c) in piece.iter().enumerate() {
            let Some(&class) = self.classes.get(c as usize) else {
                return false; // the unknown character
            };
            match class {
                CharClass::Whitespace => {
                    let misplaced = if rules.split_by_whitespace {
                        pos > 0
                    } else {
                        pos > 0 && pos == last
                    };
                    if misplaced {
                        return false;
                    }
                }
                CharClass::Other { script, digit } => {
                    let mut script = script.or(prev);
                    if digit && !rules.split_by_number {
                        script = None;
                    }
                    if digit && rules.split_digits && piece.len() > 1 {
                        return false;
                    }
                    if rules.split_by_unicode_script {
                        if let (Some(s), Some(p)) = (script, prev) {
                            if s != p {
                                return false;
                            }
                        }
                    }
                    prev = script;
                }
            }
        }
        true
    }
}

/// The distinct words as character ids, back to back, with their counts.
#[derive(Debug, Default)]
pub(crate) struct Words {
    pub(crate) chars: Vec<u32>,
    /// Word `w` is `chars[starts[w]..starts[w + 1]]`.
    pub(crate) starts: Vec<u32>,
    pub(crate) counts: Vec<u64>,
}

impl Words {
    pub(crate) fn len(&self) -> usize {
        self.counts.len()
    }

    #[inline]
    pub(crate) fn word(&self, w: usize) -> &[u32] {
        &self.chars[self.starts[w] as usize..self.starts[w + 1] as usize]
    }

    /// Occurrences of all words.
    pub(crate) fn total(&self) -> u64 {
        self.counts.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// sentencepiece's `identity` rule: whitespace handling only, U+0020 the only space.
    fn identity(add_dummy_prefix: bool, remove_extra_whitespaces: bool) -> SentencePieceNormalizer {
        SentencePieceNormalizer::new(
            "identity",
            None,
            add_dummy_prefix,
            remove_extra_whitespaces,
            true,
            false,
        )
    }

    fn words_of(splitter: &SentenceSplitter, text: &str) -> Vec<(String, u64)> {
        let mut counter = PieceCounter::default();
        splitter.count_text(text, &mut counter, &SentenceStats::default());
        let mut out: Vec<(String, u64)> = counter
            .iter()
            .map(|(w, n)| (String::from_utf8(w.to_vec()).unwrap(), n))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn words_start_at_escaped_spaces() {
        let s = SentenceSplitter::new(identity(true, true), true, 4192, &["<s>", "<unk>"]);
        let got = words_of(&s, "  hello  world \nhello<s>there\n\n   \n");
        let want = [("▁hello", 1), ("▁hello\tthere", 1), ("▁world", 1)];
        let want: Vec<(String, u64)> = want.iter().map(|&(w, n)| (w.into(), n)).collect();
        assert_eq!(got, want);
        let keep = SentenceSplitter::new(identity(true, false), true, 4192, &[]);
        let got = words_of(&keep, " a  b");
        let want: Vec<(String, u64)> = [("▁", 2), ("▁a", 1), ("▁b", 1)]
            .iter()
            .map(|&(w, n)| (w.into(), n))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn long_and_reserved_sentences_are_counted_not_used() {
        let s = SentenceSplitter::new(identity(true, true), true, 10, &[]);
        let stats = SentenceStats::default();
        let mut counter = PieceCounter::default();
        s.count_text(
            "short\nthis one is too long\nhas \u{2585}\n",
            &mut counter,
            &stats,
        );
        assert_eq!(stats.sentences.load(Ordering::Relaxed), 1);
        assert_eq!(stats.too_long.load(Ordering::Relaxed), 1);
        assert_eq!(stats.reserved_char.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn coverage_keeps_the_most_frequent_characters() {
        let counts: FxHashMap<char, u64> = [('a', 50), ('b', 30), ('\t', 15), ('c', 4), ('d', 1)]
            .into_iter()
            .collect();
        let got: Vec<char> = required_chars(&counts, 0.95).iter().map(|p| p.0).collect();
        assert_eq!(got, vec!['a', 'b']); // the tab covers, but is never required
        let got: Vec<char> = required_chars(&counts, 1.0).iter().map(|p| p.0).collect();
        assert_eq!(got, vec!['a', 'b', 'c', 'd']);
    }

    #[test]
    fn piece_rule() {
        let chars = "▁abcあア漢1２,\u{301}";
        let alphabet = Alphabet::new(&chars.chars().map(|c| (c, 1)).collect::<Vec<_>>());
        let rules = PieceRules {
            max_piece_length: 4,
            split_by_whitespace: true,
            split_by_unicode_script: true,
            split_by_number: true,
            split_digits: false,
        };
        let ids = |s: &str| s.chars().map(|c| alphabet.id(c)).collect::<Vec<u32>>();
        let valid = |s: &str, r: &PieceRules| alphabet.is_valid_piece(&ids(s), r);
        for ok in ["▁abc", "ab", "あア漢", "▁漢", "a\u{301}", "11", "1２", ","] {
            assert!(valid(ok, &rules), "{ok}");
        }
        for bad in ["a▁", "abcab", "a,", "a1", "漢a", "", "a\u{2585}"] {
            assert!(!valid(bad, &rules), "{bad}");
        }
        let no_script = PieceRules {
            split_by_unicode_script: false,
            ..rules
        };
        assert!(valid("a,", &no_script));
        let numbers_join = PieceRules {
            split_by_number: false,
            ..rules
        };
        assert!(valid("a1", &numbers_join));
        let digits = PieceRules {
            split_digits: true,
            ..rules
        };
        assert!(!valid("11", &digits));
        assert!(valid("1", &digits));
        let no_ws_split = PieceRules {
            split_by_whitespace: false,
            ..rules
        };
        assert!(valid("a▁b", &no_ws_split));
        assert!(!valid("ab▁", &no_ws_split));
    }
}
