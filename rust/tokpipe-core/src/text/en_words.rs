//! English word and sentence splitting modelled on what datatrove uses for English:
//! spaCy 3's `spacy.blank("en")` tokenizer (prefix, suffix and infix rules, special cases,
//! URLs) and its rule-based `sentencizer`. We cannot call spaCy from Rust, so this is a port
//! of its algorithm with its rules simplified where they matter little (the set of "icon"
//! characters is Unicode's So category); its special cases and URL pattern are spaCy's own,
//! generated into `en_special.rs`. Tokens are never copied: each comes as a slice of the text with its kind, which
//! is all the quality kernels need (word counts and lengths, n-grams, sentence counts).
//!
//! (Over 500 lines: one port, spaCy's tokenizer, whose character classes, prefix, suffix and infix
//! rules, special-case matching and sentencizer all decide the same token boundaries; 21 lines are
//! tests.)

use super::chars::is_punct;
use super::en_special::{
    ALPHA, ALPHA_LOWER, ALPHA_UPPER, CURRENCY, HYPHENS, ICONS, SPECIAL_CASES, UNITS, URL_PATTERN,
};
use super::lines::is_py_space;
use crate::util::in_ranges;
use rustc_hash::FxHashMap;
use std::sync::OnceLock;

/// What the sentencizer needs to know about a token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A single character from the sentencizer's `punct_chars` (`.`, `!`, `?`, `。` ...).
    Terminal,
    /// Only punctuation characters (Unicode P*), spaCy's `is_punct`.
    Punct,
    /// Anything else.
    Word,
    /// A whitespace token (spaCy keeps runs of whitespace other than one space as tokens).
    Space,
}

/// One special case: the kind and the length of each token it becomes, and the lengths of the
/// tokens spaCy's special-case matcher looks for (empty when it does not).
#[derive(Clone, Copy)]
struct Case {
    kinds: &'static str,
    lengths: &'static [u8],
    pattern: &'static [u8],
}

/// The most tokens in a matcher pattern (the generator's cases have at most 11).
const MAX_PATTERN: usize = 16;

/// spaCy's special cases, with a filter in front of the hash map: almost every chunk is not
/// a special case, and (first byte, last byte, length) rules most of them out without
/// hashing the chunk.
struct Specials {
    map: FxHashMap<&'static str, Case>,
    /// Bit `min(len, 31)` of entry `filter_slot(s)` is set when some case could match `s`.
    lengths: Vec<u32>,
}

fn filter_slot(s: &str) -> usize {
    let b = s.as_bytes();
    (usize::from(b[0] & 0x3f) << 6) | usize::from(b[b.len() - 1] & 0x3f)
}

impl Specials {
    #[inline]
    fn get(&self, s: &str) -> Option<Case> {
        if s.is_empty() || self.lengths[filter_slot(s)] & (1 << s.len().min(31)) == 0 {
            return None;
        }
        self.map.get(s).copied()
    }

    #[inline]
    fn contains_key(&self, s: &str) -> bool {
        self.get(s).is_some()
    }
}

fn specials() -> &'static Specials {
    static SPECIALS: OnceLock<Specials> = OnceLock::new();
    SPECIALS.get_or_init(|| {
        let mut lengths = vec![0u32; 1 << 12];
        for (text, ..) in SPECIAL_CASES {
            lengths[filter_slot(text)] |= 1 << text.len().min(31);
        }
        Specials {
            map: SPECIAL_CASES
                .iter()
                .map(|&(text, kinds, lengths, pattern)| {
                    (
                        text,
                        Case {
                            kinds,
                            lengths,
                            pattern,
                        },
                    )
                })
                .collect(),
            lengths,
        }
    })
}

/// spaCy's Sentencizer.default_punct_chars.
pub(crate) fn is_sentence_punct(c: char) -> bool {
    matches!(
        c,
        '!' | '.' | '?' | '։' | '؟' | '۔' | '܀' | '܁' | '܂' | '߹' | '।' | '॥' | '၊' | '။' | '።'
            | '፧' | '፨' | '᙮' | '᜵' | '᜶' | '᠃' | '᠉' | '᥄' | '᥅' | '᪨' | '᪩' | '᪪' | '᪫'
            | '᭚' | '᭛' | '᭞' | '᭟' | '᰻' | '᰼' | '᱾' | '᱿' | '‼' | '‽' | '⁇' | '⁈' | '⁉'
            | '⸮' | '⸼' | '꓿' | '꘎' | '꘏' | '꛳' | '꛷' | '꡶' | '꡷' | '꣎' | '꣏' | '꤯' | '꧈'
            | '꧉' | '꩝' | '꩞' | '꩟' | '꫰' | '꫱' | '꯫' | '﹒' | '﹖' | '﹗' | '！' | '．' | '？'
            | '｡' | '。'
            | '\u{10A56}' | '\u{10A57}' | '\u{11047}' | '\u{11048}' | '\u{110BE}'..='\u{110C1}'
            | '\u{11141}'..='\u{11143}' | '\u{111C5}' | '\u{111C6}' | '\u{111CD}' | '\u{111DE}'
            | '\u{111DF}' | '\u{11238}' | '\u{11239}' | '\u{1123B}' | '\u{1123C}' | '\u{112A9}'
            | '\u{1144B}' | '\u{1144C}' | '\u{115C2}' | '\u{115C3}' | '\u{115C9}'..='\u{115D7}'
            | '\u{11641}' | '\u{11642}' | '\u{1173C}'..='\u{1173E}' | '\u{11A42}' | '\u{11A43}'
            | '\u{11A9B}' | '\u{11A9C}' | '\u{11C41}' | '\u{11C42}' | '\u{16A6E}' | '\u{16A6F}'
            | '\u{16AF5}' | '\u{16B37}' | '\u{16B38}' | '\u{16B44}' | '\u{1BC9F}' | '\u{1DA88}'
    )
}

/// spaCy's ALPHA: letters of the scripts it knows, cased or not (CJK included).
fn is_alpha(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    in_ranges(ALPHA, c)
}

/// spaCy's ALPHA_LOWER: lower-case letters and the letters of scripts without case.
fn is_alpha_lower(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_lowercase();
    }
    in_ranges(ALPHA_LOWER, c)
}

/// spaCy's ALPHA_UPPER: upper-case letters and the letters of scripts without case.
fn is_alpha_upper(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_uppercase();
    }
    in_ranges(ALPHA_UPPER, c)
}

/// spaCy's "icon" characters (its list of So code points); ASCII has none.
fn is_icon(c: char) -> bool {
    !c.is_ascii() && in_ranges(ICONS, c)
}

fn kind_of(token: &str) -> Kind {
    let mut chars = token.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        if is_sentence_punct(c) {
            return Kind::Terminal;
        }
    }
    if !token.is_empty() && token.chars().all(is_punct) {
        Kind::Punct
    } else {
        Kind::Word
    }
}

// spaCy's LIST_PUNCT (one character each) and LIST_QUOTES.
fn is_list_punct(c: char) -> bool {
    matches!(
        c,
        '…' | ','
            | ':'
            | ';'
            | '!'
            | '?'
            | '¿'
            | '؟'
            | '¡'
            | '('
            | ')'
            | '['
            | ']'
            | '{'
            | '}'
            | '<'
            | '>'
            | '_'
            | '#'
            | '*'
            | '&'
            | '。'
            | '？'
            | '！'
            | '，'
            | '、'
            | '；'
            | '：'
            | '～'
            | '·'
            | '।'
            | '،'
            | '۔'
            | '؛'
            | '٪'
    )
}
fn is_quote(c: char) -> bool {
    matches!(
        c,
        '\'' | '"'
            | '”'
            | '“'
            | '`'
            | '‘'
            | '´'
            | '’'
            | '‚'
            | ','
            | '„'
            | '»'
            | '«'
            | '「'
            | '」'
            | '『'
            | '』'
            | '（'
            | '）'
            | '〔'
            | '〕'
            | '【'
            | '】'
            | '《'
            | '》'
            | '〈'
            | '〉'
            | '⟦'
            | '⟧'
    )
}
fn is_currency(c: char) -> bool {
    if c.is_ascii() {
        return c == '$';
    }
    let mut buf = [0u8; 4];
    CURRENCY.contains(&&*c.encode_utf8(&mut buf))
}

fn prefix_len(s: &str) -> usize {
    let mut it = s.chars();
    let Some(c) = it.next() else { return 0 };
    if s.starts_with("US$") {
        return 3;
    }
    if s.starts_with("C$") || s.starts_with("A$") {
        return 2;
    }
    if c == '+' {
        return if it.next().is_some_and(|d| d.is_ascii_digit()) {
            0
        } else {
            1
        };
    }
    if c == '.' {
        let dots = s.bytes().take_while(|&b| b == b'.').count();
        return if dots >= 2 { dots } else { 0 };
    }
    if matches!(c, '§' | '%' | '=' | '—' | '–')
        || is_list_punct(c)
        || is_quote(c)
        || is_currency(c)
        || is_icon(c)
    {
        return c.len_utf8();
    }
    0
}

/// The longest suffix any of spaCy's suffix rules matches (its regex search finds the
/// leftmost match anchored at the end, that is the longest).
fn suffix_len(s: &str) -> usize {
    let Some(last) = s.chars().next_back() else {
        return 0;
    };
    let mut best = 0usize;
    if is_list_punct(last) || is_quote(last) || is_icon(last) || last == '—' || last == '–' {
        best = last.len_utf8();
    }
    if s.ends_with("……") {
        best = best.max("……".len());
    }
    let dots = s.bytes().rev().take_while(|&b| b == b'.').count();
    if dots >= 2 {
        best = best.max(dots);
    }
    for tail in ["'s", "'S", "’s", "’S"] {
        if s.ends_with(tail) {
            best = best.max(tail.len());
        }
    }
    // The suffixes that split only after a digit ("3+", "5$", "10US$", "10km") contain no
    // ASCII digit, so the candidate is what follows the last digit: one lookup instead of a
    // comparison per unit.
    if let Some(p) = s.bytes().rposition(|b| b.is_ascii_digit()) {
        let tail = &s[p + 1..];
        if tail == "+" || CURRENCY.contains(&tail) || UNITS.contains(&tail) {
            best = best.max(tail.len());
        }
    }
    if last == '.' {
        let mut rev = s[..s.len() - 1].chars().rev();
        let (b1, b2) = (rev.next(), rev.next());
        let split = match b1 {
            Some(c) if matches!(c, 'F' | 'f' | 'C' | 'c' | 'K' | 'k') && b2 == Some('°') => true,
            Some(c) if c.is_ascii_digit() || is_alpha_lower(c) => true,
            Some(c) if "%²-+…".contains(c) || is_list_punct(c) || is_quote(c) || c == '|' => {
                true
            }
            Some(c) if is_alpha_upper(c) => b2.is_some_and(is_alpha_upper),
            _ => false,
        };
        if split {
            best = best.max(1);
        }
    }
    best
}

/// spaCy's `url_match`. Every URL it matches has a dot followed by two lower-case letters
/// (the top-level domain) or three dots (an IP address), so other strings skip the regex.
fn is_url(s: &str) -> bool {
    static URL: OnceLock<fancy_regex::Regex> = OnceLock::new();
    let bytes = s.as_bytes();
    let dots = memchr::memchr_iter(b'.', bytes);
    let tld = |i: usize| {
        let mut after = s[i + 1..].chars();
        after.next().is_some_and(is_alpha_lower) && after.next().is_some_and(is_alpha_lower)
    };
    let mut count = 0;
    let plausible = dots.into_iter().any(|i| {
        count += 1;
        count >= 3 || tld(i)
    });
    plausible
        && URL
            .get_or_init(|| {
                fancy_regex::Regex::new(URL_PATTERN).expect("spaCy's URL pattern compiles")
            })
            .is_match(s)
            // A string too hard for the backtracker is not treated as a URL.
            .unwrap_or(false)
}

/// Emits the kinds of the infix-split pieces of `s` (no special case, no URL).
fn infixes<'t>(s: &'t str, emit: &mut impl FnMut(Kind, &'t str)) {
    let mut start = 0usize; // byte offset of the current piece
    let mut pos = 0usize;
    let mut prev: Option<char> = None;
    let mut piece = |from: usize, to: usize| {
        if to > from {
            emit(kind_of(&s[from..to]), &s[from..to]);
        }
    };
    while let Some(c) = s[pos..].chars().next() {
        let next = s[pos + c.len_utf8()..].chars().next();
        let mut len = 0usize; // bytes of the infix starting at `pos`, 0 for none
        if c == '.' {
            let run = s[pos..].bytes().take_while(|&b| b == b'.').count();
            if run >= 2 {
                len = run;
            } else if prev.is_some_and(|p| is_alpha_lower(p) || is_quote(p))
                && next.is_some_and(|q| is_alpha_upper(q) || is_quote(q))
            {
                len = 1;
            }
        } else if c == '…' || is_icon(c) {
            len = c.len_utf8();
        } else if (matches!(c, '+' | '-' | '*' | '^')
            && prev.is_some_and(|p| p.is_ascii_digit())
            && next.is_some_and(|q| q.is_ascii_digit() || q == '-'))
            || (c == ',' && prev.is_some_and(is_alpha) && next.is_some_and(is_alpha))
        {
            len = 1;
        } else if matches!(c, '-' | '–' | '—' | '~')
            && prev.is_some_and(|p| is_alpha(p) || p.is_ascii_digit())
        {
            // The first of spaCy's hyphens (in its order) that a letter follows.
            let rest = &s[pos..];
            if let Some(h) = HYPHENS.iter().find(|h| {
                rest.starts_with(**h) && rest[h.len()..].chars().next().is_some_and(is_alpha)
            }) {
                len = h.len();
            }
        } else if matches!(c, ':' | '<' | '>' | '=' | '/')
            && prev.is_some_and(|p| is_alpha(p) || p.is_ascii_digit())
            && next.is_some_and(is_alpha)
        {
            len = 1;
        }
        if len > 0 {
            piece(start, pos);
            piece(pos, pos + len);
            start = pos + len;
            prev = s[..start].chars().next_back();
            pos = start;
        } else {
            prev = Some(c);
            pos += c.len_utf8();
        }
    }
    piece(start, s.len());
}

fn emit_special<'t>(s: &'t str, case: Case, emit: &mut impl FnMut(Kind, &'t str)) {
    let mut at = 0usize;
    for (k, &len) in case.kinds.bytes().zip(case.lengths) {
        let kind = match k {
            b'T' => Kind::Terminal,
            b'P' => Kind::Punct,
            _ => Kind::Word,
        };
        emit(kind, &s[at..at + usize::from(len)]);
        at += usize::from(len);
    }
}

fn emit_affix<'t>(s: &'t str, emit: &mut impl FnMut(Kind, &'t str)) {
    emit(kind_of(s), s);
}

/// Emits the kinds of the tokens of one whitespace-free chunk, as spaCy's `_split_affixes`
/// then `_attach_tokens` would make them.
fn chunk<'t>(s: &'t str, tokens: &mut Vec<(Kind, &'t str)>, emit: &mut impl FnMut(Kind, &'t str)) {
    let sp = specials();
    if let Some(case) = sp.get(s) {
        return emit_special(s, case, emit);
    }
    // Most chunks are plain words: ASCII letters and digits have no prefix, suffix or infix
    // rule, except a unit after a digit ("10km"), which the general path splits.
    if s.bytes().all(|b| b.is_ascii_alphanumeric())
        && !(s.as_bytes()[s.len() - 1].is_ascii_alphabetic()
            && s.bytes().any(|b| b.is_ascii_digit()))
    {
        return emit(Kind::Word, s);
    }
    tokens.clear();
    split_affixes(s, &mut |k, t| tokens.push((k, t)));
    match_special_spans(s, tokens, emit);
}

/// spaCy's `_split_affixes` then `_attach_tokens` for a chunk that is not a special case.
fn split_affixes<'t>(s: &'t str, emit: &mut impl FnMut(Kind, &'t str)) {
    let sp = specials();
    // Prefixes are emitted as they are cut; suffixes are cut from the end, so they wait.
    let mut suffixes: Vec<&'t str> = Vec::new();
    let mut string = s;
    let mut last = usize::MAX;
    while !string.is_empty() && string.len() != last {
        if sp.contains_key(string) {
            break;
        }
        last = string.len();
        let pre = prefix_len(string);
        if pre > 0 {
            let minus = &string[pre..];
            if !minus.is_empty() && sp.contains_key(minus) {
                emit_affix(&string[..pre], emit);
                string = minus;
                break;
            }
        }
        let suf = suffix_len(&string[pre..]);
        if suf > 0 {
            let minus = &string[..string.len() - suf];
            if !minus.is_empty() && sp.contains_key(minus) {
                suffixes.push(&string[string.len() - suf..]);
                string = minus;
                break;
            }
        }
        if pre > 0 && suf > 0 && pre + suf <= string.len() {
            emit_affix(&string[..pre], emit);
            suffixes.push(&string[string.len() - suf..]);
            string = &string[pre..string.len() - suf];
        } else if pre > 0 {
            emit_affix(&string[..pre], emit);
            string = &string[pre..];
        } else if suf > 0 {
            suffixes.push(&string[string.len() - suf..]);
            string = &string[..string.len() - suf];
        }
    }
    if !string.is_empty() {
        if let Some(case) = sp.get(string) {
            emit_special(string, case, emit);
        } else if is_url(string) {
            emit(Kind::Word, string);
        } else {
            infixes(string, emit);
        }
    }
    for p in suffixes.iter().rev() {
        emit_affix(p, emit);
    }
}

/// spaCy's `_apply_special_cases` within one chunk: runs of the chunk's tokens that are the
/// tokens a special case's text splits into become that case's tokens ("ware-a." splits into
/// "ware" "-" "a" "." and "a" "." becomes "a."). Longer runs win, then later ones, as spaCy's
/// `_filter_special_spans` picks them. Runs across whitespace never match: spaCy looks the
/// run's text up with its whitespace, which no case has.
fn match_special_spans<'t>(
    s: &'t str,
    tokens: &[(Kind, &'t str)],
    emit: &mut impl FnMut(Kind, &'t str),
) {
    if tokens.len() < 2 {
        // One token is the whole chunk, which is no special case (it was looked up first).
        return tokens.iter().for_each(|&(k, t)| emit(k, t));
    }
    let sp = specials();
    let offset = |t: &str| t.as_ptr() as usize - s.as_ptr() as usize;
    let mut spans: Vec<(usize, usize, Case)> = Vec::new();
    for i in 0..tokens.len() {
        let start = offset(tokens[i].1);
        for j in i + 1..=tokens.len().min(i + MAX_PATTERN) {
            let end = offset(tokens[j - 1].1) + tokens[j - 1].1.len();
            let Some(case) = sp.get(&s[start..end]) else {
                continue;
            };
            if case.pattern.len() == j - i
                && case
                    .pattern
                    .iter()
                    .zip(&tokens[i..j])
                    .all(|(&len, t)| usize::from(len) == t.1.len())
            {
                spans.push((i, j, case));
            }
        }
    }
    if spans.is_empty() {
        return tokens.iter().for_each(|&(k, t)| emit(k, t));
    }
    // Longest first, then latest start; a span is taken when neither its first nor its last
    // token is in a span taken before.
    spans.sort_by_key(|&(i, j, _)| (j - i, i));
    let mut taken = vec![false; tokens.len()];
    let mut chosen: Vec<(usize, usize, Case)> = Vec::new();
    for &(i, j, case) in spans.iter().rev() {
        if !taken[i] && !taken[j - 1] {
            chosen.push((i, j, case));
        }
        taken[i..j].iter_mut().for_each(|t| *t = true);
    }
    chosen.sort_by_key(|&(i, ..)| i);
    let mut next = chosen.iter().peekable();
    let mut i = 0;
    while i < tokens.len() {
        while next.peek().is_some_and(|&&(start, ..)| start < i) {
            next.next();
        }
        match next.peek() {
            Some(&&(start, end, case)) if start == i => {
                let from = offset(tokens[start].1);
                let to = offset(tokens[end - 1].1) + tokens[end - 1].1.len();
                emit_special(&s[from..to], case, emit);
                i = end;
            }
            _ => {
                emit(tokens[i].0, tokens[i].1);
                i += 1;
            }
        }
    }
}

/// Bytes of `s`'s leading whitespace (`str.isspace`); ASCII is decided per byte.
#[inline]
fn space_prefix_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            if !is_py_space(b as char) {
                return i;
            }
            i += 1;
        } else {
            let c = s[i..].chars().next().unwrap_or_default();
            if !is_py_space(c) {
                return i;
            }
            i += c.len_utf8();
        }
    }
    i
}

/// Bytes of `s` before its first whitespace character.
#[inline]
fn word_prefix_len(s: &str) -> usize {
    let bytes = s.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b < 0x80 {
            if is_py_space(b as char) {
                return i;
            }
            i += 1;
        } else {
            let c = s[i..].chars().next().unwrap_or_default();
            if is_py_space(c) {
                return i;
            }
            i += c.len_utf8();
        }
    }
    i
}

/// Calls `emit` with the kind and the text of every token spaCy's English tokenizer would
/// make of `text`, in order.
pub fn for_each_token<'t>(text: &'t str, mut emit: impl FnMut(Kind, &'t str)) {
    let mut tokens = Vec::new();
    let mut rest = text;
    let mut after_token = false;
    while !rest.is_empty() {
        let ws = space_prefix_len(rest);
        if ws > 0 {
            let mut run = &rest[..ws];
            if after_token && run.starts_with(' ') {
                run = &run[1..];
            }
            if !run.is_empty() {
                emit(Kind::Space, run);
            }
            rest = &rest[ws..];
            after_token = false;
            continue;
        }
        let end = word_prefix_len(rest);
        chunk(&rest[..end], &mut tokens, &mut emit);
        rest = &rest[end..];
        after_token = true;
    }
}

/// The number of words datatrove's `split_into_words(text, "en")` gives: spaCy's tokens less
/// the whitespace ones.
pub fn word_count(text: &str) -> usize {
    let mut n = 0;
    for_each_word(text, |_| n += 1);
    n
}

/// [`word_count`] of each row of `column` where `selected` is non-zero (every row when
/// `None`), 0 elsewhere; rows in parallel.
pub fn word_count_column(column: &super::StrColumn, selected: Option<&[u8]>) -> Vec<u64> {
    use rayon::prelude::*;
    (0..column.len())
        .into_par_iter()
        .with_min_len(64)
        .map(|i| {
            if selected.is_none_or(|s| s[i] != 0) {
                word_count(column.get(i)) as u64
            } else {
                0
            }
        })
        .collect()
}

/// Calls `emit` with each of datatrove's `split_into_words(text, "en")`: spaCy's tokens less
/// the whitespace ones.
pub fn for_each_word<'t>(text: &'t str, mut emit: impl FnMut(&'t str)) {
    for_each_token(text, |k, token| {
        if k != Kind::Space {
            emit(token)
        }
    });
}

/// The number of sentences datatrove's `split_into_sentences(text, "en")` gives: spaCy's
/// sentencizer starts a sentence at a token that is neither punctuation nor sentence-ending
/// punctuation and follows a sentence-ending punctuation token. At least one.
pub fn sentence_count(text: &str) -> usize {
    let mut n = 1;
    let mut seen_period = false;
    for_each_token(text, |k, _| match k {
        Kind::Terminal => seen_period = true,
        Kind::Punct => {}
        Kind::Word | Kind::Space => {
            if seen_period {
                n += 1;
                seen_period = false;
            }
        }
    });
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_like_spacy() {
        // Token lists checked by hand against spaCy's rules: "do" "n't", "Mr." kept, "e.g."
        // kept, "well" "-" "known", trailing "." split after a lower-case letter.
        assert_eq!(word_count("I don't know Mr. Smith."), 7);
        assert_eq!(word_count("a well-known fact, e.g. this"), 8);
        assert_eq!(word_count("  \n"), 0);
    }

    #[test]
    fn sentences_like_spacy() {
        assert_eq!(sentence_count("Hello there. How are you? Fine!"), 3);
        assert_eq!(sentence_count("Ask Mr. Smith about it."), 1);
        assert_eq!(sentence_count("Wait... what (really.) ok"), 2);
        assert_eq!(sentence_count("He said \"stop.\" Then left."), 2);
    }
}
