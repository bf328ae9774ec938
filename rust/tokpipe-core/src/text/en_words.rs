//! English word and sentence splitting modelled on what datatrove uses for English:
//! spaCy 3's `spacy.blank("en")` tokenizer (prefix, suffix and infix rules, special cases,
//! URLs) and its rule-based `sentencizer`. We cannot call spaCy from Rust, so this is a port
//! of its algorithm with its rules simplified where they matter little (the set of "icon"
//! characters is Unicode's So category; URLs are tokens that look like `scheme://...` or
//! `www....`). Tokens are only classified, never materialised: the quality kernels need the
//! number of words and the number of sentences, nothing else.

use super::en_special::SPECIAL_CASES;
use super::lines::is_py_space;
use rustc_hash::FxHashMap;
use std::sync::OnceLock;
use unicode_general_category::{get_general_category, GeneralCategory as G};

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

fn specials() -> &'static FxHashMap<&'static str, &'static str> {
    static MAP: OnceLock<FxHashMap<&'static str, &'static str>> = OnceLock::new();
    MAP.get_or_init(|| SPECIAL_CASES.iter().copied().collect())
}

/// spaCy's Sentencizer.default_punct_chars.
fn is_sentence_punct(c: char) -> bool {
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

fn is_p(c: char) -> bool {
    matches!(
        get_general_category(c),
        G::ConnectorPunctuation
            | G::DashPunctuation
            | G::OpenPunctuation
            | G::ClosePunctuation
            | G::InitialPunctuation
            | G::FinalPunctuation
            | G::OtherPunctuation
    )
}

fn is_icon(c: char) -> bool {
    get_general_category(c) == G::OtherSymbol
}

fn kind_of(token: &str) -> Kind {
    let mut chars = token.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        if is_sentence_punct(c) {
            return Kind::Terminal;
        }
    }
    if !token.is_empty() && token.chars().all(is_p) {
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
    matches!(
        c,
        '$' | '£' | '€' | '¥' | '฿' | '﷼' | '\u{20A0}'..='\u{20BF}'
    )
}
fn is_hyphen(c: char) -> bool {
    matches!(c, '-' | '–' | '—' | '~')
}
/// Letters spaCy counts as lower case in its lookbehinds: lower-case letters and letters of
/// scripts without case.
fn is_lowerish(c: char) -> bool {
    c.is_lowercase() || (c.is_alphabetic() && !c.is_uppercase())
}

const UNITS: &[&str] = &[
    "km", "km²", "km³", "m", "m²", "m³", "dm", "dm²", "dm³", "cm", "cm²", "cm³", "mm", "mm²",
    "mm³", "ha", "µm", "nm", "yd", "in", "ft", "kg", "g", "mg", "µg", "t", "lb", "oz", "m/s",
    "km/h", "kmh", "mph", "hPa", "Pa", "mbar", "mb", "MB", "kb", "KB", "gb", "GB", "tb", "TB", "T",
    "G", "M", "K", "%",
];

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
    let before = |n: usize| s[..s.len() - n].chars().next_back();
    let digit_before = |n: usize| before(n).is_some_and(|c| c.is_ascii_digit());
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
    if last == '+' && digit_before(1) {
        best = best.max(1);
    }
    if is_currency(last) && digit_before(last.len_utf8()) {
        best = best.max(last.len_utf8());
    }
    for tail in ["US$", "C$", "A$"] {
        if s.ends_with(tail) && digit_before(tail.len()) {
            best = best.max(tail.len());
        }
    }
    for unit in UNITS {
        if s.ends_with(unit) && digit_before(unit.len()) {
            best = best.max(unit.len());
        }
    }
    if last == '.' {
        let mut rev = s[..s.len() - 1].chars().rev();
        let (b1, b2) = (rev.next(), rev.next());
        let split = match b1 {
            Some(c) if matches!(c, 'F' | 'f' | 'C' | 'c' | 'K' | 'k') && b2 == Some('°') => true,
            Some(c) if c.is_ascii_digit() || is_lowerish(c) => true,
            Some(c) if "%²-+…".contains(c) || is_list_punct(c) || is_quote(c) || c == '|' => {
                true
            }
            Some(c) if c.is_uppercase() => b2.is_some_and(|d| d.is_uppercase()),
            _ => false,
        };
        if split {
            best = best.max(1);
        }
    }
    best
}

fn looks_like_url(s: &str) -> bool {
    (s.contains("://") || s.starts_with("www.")) && s.len() > 4
}

/// Emits the kinds of the infix-split pieces of `s` (no special case, no URL).
fn infixes(s: &str, emit: &mut impl FnMut(Kind)) {
    let chars: Vec<(usize, char)> = s.char_indices().collect();
    let n = chars.len();
    let mut start = 0usize; // byte offset of the current piece
    let mut i = 0usize;
    let piece = |from: usize, to: usize, emit: &mut dyn FnMut(Kind)| {
        if to > from {
            emit(kind_of(&s[from..to]));
        }
    };
    while i < n {
        let (pos, c) = chars[i];
        let prev = if i > 0 { Some(chars[i - 1].1) } else { None };
        let next = chars.get(i + 1).map(|&(_, c)| c);
        let mut len_chars = 0usize;
        if c == '.' {
            let run = chars[i..].iter().take_while(|&&(_, c)| c == '.').count();
            if run >= 2 {
                len_chars = run;
            } else if prev.is_some_and(|p| is_lowerish(p) || is_quote(p))
                && next.is_some_and(|q| q.is_uppercase() || is_quote(q))
            {
                len_chars = 1;
            }
        } else if c == '…' || is_icon(c) {
            len_chars = 1;
        } else if matches!(c, '+' | '-' | '*' | '^')
            && prev.is_some_and(|p| p.is_ascii_digit())
            && next.is_some_and(|q| q.is_ascii_digit() || q == '-')
        {
            len_chars = 1;
        } else if c == ','
            && prev.is_some_and(char::is_alphabetic)
            && next.is_some_and(char::is_alphabetic)
        {
            len_chars = 1;
        } else if is_hyphen(c) && prev.is_some_and(|p| p.is_alphabetic() || p.is_ascii_digit()) {
            let run = chars[i..]
                .iter()
                .take_while(|&&(_, c)| is_hyphen(c))
                .count()
                .min(3);
            if chars.get(i + run).is_some_and(|&(_, q)| q.is_alphabetic()) {
                len_chars = run;
            }
        } else if matches!(c, ':' | '<' | '>' | '=' | '/')
            && prev.is_some_and(|p| p.is_alphabetic() || p.is_ascii_digit())
            && next.is_some_and(char::is_alphabetic)
        {
            len_chars = 1;
        }
        if len_chars > 0 {
            let end = chars.get(i + len_chars).map_or(s.len(), |&(p, _)| p);
            piece(start, pos, emit);
            piece(pos, end, emit);
            start = end;
            i += len_chars;
        } else {
            i += 1;
        }
    }
    piece(start, s.len(), emit);
}

fn emit_special(kinds: &str, emit: &mut impl FnMut(Kind)) {
    for k in kinds.bytes() {
        emit(match k {
            b'T' => Kind::Terminal,
            b'P' => Kind::Punct,
            _ => Kind::Word,
        });
    }
}

/// Emits the kinds of the tokens of one whitespace-free chunk, as spaCy's `_split_affixes`
/// then `_attach_tokens` would make them.
fn chunk(s: &str, emit: &mut impl FnMut(Kind)) {
    let sp = specials();
    if let Some(kinds) = sp.get(s) {
        return emit_special(kinds, emit);
    }
    let mut prefixes: Vec<&str> = Vec::new();
    let mut suffixes: Vec<&str> = Vec::new();
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
                prefixes.push(&string[..pre]);
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
            prefixes.push(&string[..pre]);
            suffixes.push(&string[string.len() - suf..]);
            string = &string[pre..string.len() - suf];
        } else if pre > 0 {
            prefixes.push(&string[..pre]);
            string = &string[pre..];
        } else if suf > 0 {
            suffixes.push(&string[string.len() - suf..]);
            string = &string[..string.len() - suf];
        }
    }
    for p in &prefixes {
        emit(kind_of(p));
    }
    if !string.is_empty() {
        if let Some(kinds) = sp.get(string) {
            emit_special(kinds, emit);
        } else if looks_like_url(string) {
            emit(Kind::Word);
        } else {
            infixes(string, emit);
        }
    }
    for p in suffixes.iter().rev() {
        emit(kind_of(p));
    }
}

/// Calls `emit` with the kind of every token spaCy's English tokenizer would make of `text`.
pub fn for_each_token(text: &str, mut emit: impl FnMut(Kind)) {
    let mut rest = text;
    let mut after_token = false;
    while !rest.is_empty() {
        let ws = rest.find(|c: char| !is_py_space(c)).unwrap_or(rest.len());
        if ws > 0 {
            let mut run = &rest[..ws];
            if after_token && run.starts_with(' ') {
                run = &run[1..];
            }
            if !run.is_empty() {
                emit(Kind::Space);
            }
            rest = &rest[ws..];
            after_token = false;
            continue;
        }
        let end = rest.find(is_py_space).unwrap_or(rest.len());
        chunk(&rest[..end], &mut emit);
        rest = &rest[end..];
        after_token = true;
    }
}

/// The number of words datatrove's `split_into_words(text, "en")` gives: spaCy's tokens less
/// the whitespace ones.
pub fn word_count(text: &str) -> usize {
    let mut n = 0;
    for_each_token(text, |k| n += usize::from(k != Kind::Space));
    n
}

/// The number of sentences datatrove's `split_into_sentences(text, "en")` gives: spaCy's
/// sentencizer starts a sentence at a token that is neither punctuation nor sentence-ending
/// punctuation and follows a sentence-ending punctuation token. At least one.
pub fn sentence_count(text: &str) -> usize {
    let mut n = 1;
    let mut seen_period = false;
    for_each_token(text, |k| match k {
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
