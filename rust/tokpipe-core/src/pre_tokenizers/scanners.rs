//! Hand-written scanners for the three preset split patterns (GPT-2/r50k, cl100k, o200k).
//!
//! Why they exist: the presets need look-ahead and possessive quantifiers, so they run through
//! fancy-regex's backtracking VM, which is the slowest stage of encoding. Each pattern is a
//! leftmost-first alternation whose winning branch is decided by the class of the first one or
//! two characters, so a scanner can pick the branch directly and find where it ends with forward
//! runs over a character class: no regex, no allocation, no recursion at run time.
//!
//! How they stay exact:
//! - Every char maps to a bit set of the classes the patterns test (`\s`, `\p{L}`, `\p{N}`,
//!   `[\r\n]` and o200k's two case classes). ASCII goes through a 128-entry table; other chars
//!   through a table of the Basic Multilingual Plane built from `unicode-general-category`
//!   (the crate itself above it; Unicode 16.0, the same version as the regex-syntax 0.8
//!   tables fancy-regex uses; a test checks every code point against fancy-regex itself).
//! - Branches are tried in the pattern's order, and backtracking is simulated only where it
//!   changes the result: `\s+(?!\S)` gives back the last whitespace char, `\s*[\r\n]` backs off to
//!   the last newline of the run, o200k's `[U]*[W]+` backs off to the last char in both classes,
//!   and o200k's optional prefix is retried without the prefix before the next branch.
//! - A branch that fails has only scanned chars that the branch which then succeeds consumes (or
//!   a constant number of chars), so every byte is looked at a bounded number of times and the
//!   scanners are linear on any input.
//!
//! How they are fast: ASCII letter runs are skipped eight bytes at a time (SWAR), the commonest
//! o200k pieces (an ASCII word, lower case or capitalised, with or without a leading space) take
//! a shortcut, non-ASCII chars go through one out-of-line table lookup (`bmp_classes`), and
//! pieces are sliced without re-checking char boundaries. On English text they run at 400-700
//! MB/s per core, 10-40x fancy-regex on the same pattern; on Japanese and Chinese text the gap
//! is 3-20x. cl100k and o200k go further: text is cut 64 bytes at a time with bit masks where
//! it is ASCII (and letters) (`ascii_windows`), and these functions cut the rest, piece by
//! piece; that doubles their speed on English (600-800 MB/s).
//!
//! Unicode caveat: class membership comes from `unicode-general-category` 1.1 (Unicode 16.0),
//! while fancy-regex's classes come from regex-syntax (Unicode 16.0 in 0.8.x). If either crate
//! moves to a newer Unicode version, `scanners_class_table_matches_regex_for_every_char` fails
//! and names the code points that differ.
//!
//! The parity tests (`scanner_tests.rs`) compare every scanner with fancy-regex on the shared
//! corpora, on random strings over an alphabet of the awkward characters, on every code point in
//! context, and on adversarial megabyte inputs.
//!
//! (Over 500 lines: the class table and the run helpers (about 310 lines) are shared by the three
//! scanners (about 225); the tests are in `scanner_tests.rs`.)

use super::ascii_windows::windowed;
use unicode_general_category::{get_general_category, GeneralCategory as Gc};

/// `\s`: Unicode White_Space, as in the regex crate.
pub(super) const WS: u8 = 1 << 0;
/// `\p{L}`.
pub(super) const L: u8 = 1 << 1;
/// `\p{N}`.
pub(super) const N: u8 = 1 << 2;
/// `[\r\n]` (always together with `WS`).
pub(super) const NL: u8 = 1 << 3;
/// o200k's "upper" class `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
pub(super) const UP: u8 = 1 << 4;
/// o200k's "lower" class `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
pub(super) const LO: u8 = 1 << 5;
/// A char with none of these bits is in `[^\s\p{L}\p{N}]` ("other").
const WLN: u8 = WS | L | N;

/// Class bits of the ASCII chars, so the common case is one load.
pub(super) static ASCII: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        t[i] = if b.is_ascii_uppercase() {
            L | UP
        } else if b.is_ascii_lowercase() {
            L | LO
        } else if b.is_ascii_digit() {
            N
        } else if b == b'\r' || b == b'\n' {
            WS | NL
        } else if matches!(b, b'\t' | 0x0b | 0x0c | b' ') {
            WS
        } else {
            0
        };
        i += 1;
    }
    t
};

/// Class bits of a non-ASCII char. White_Space outside ASCII is exactly Zs, Zl, Zp and U+0085
/// (checked exhaustively against the regex crate in the tests), so one category lookup suffices.
#[inline]
pub(super) fn class_of_non_ascii(c: char) -> u8 {
    // NEL is tested first so that every arm below is a constant and the match becomes a table.
    if c == '\u{85}' {
        return WS;
    }
    match get_general_category(c) {
        Gc::UppercaseLetter | Gc::TitlecaseLetter => L | UP,
        Gc::LowercaseLetter => L | LO,
        Gc::ModifierLetter | Gc::OtherLetter => L | UP | LO,
        // Marks are not `\p{L}`: they are "other" for `[^\s\p{L}\p{N}]` but in both o200k classes.
        Gc::NonspacingMark | Gc::SpacingMark | Gc::EnclosingMark => UP | LO,
        Gc::DecimalNumber | Gc::LetterNumber | Gc::OtherNumber => N,
        Gc::SpaceSeparator | Gc::LineSeparator | Gc::ParagraphSeparator => WS,
        _ => 0,
    }
}

/// [`class_of_non_ascii`] of every code point of the Basic Multilingual Plane, built on first
/// use (64 KiB). Why: the category lookup is two dependent table loads and a char check, and
/// on text in other scripts it was about a quarter of the scanners' time; the BMP holds the
/// letters of every script in the 24-language benchmark, and the lines of the table a text
/// touches (its scripts' blocks) stay in cache. Surrogates, which no `&str` holds, get 0.
fn bmp_classes() -> &'static [u8; 0x10000] {
    static TABLE: std::sync::OnceLock<Box<[u8; 0x10000]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Box::new([0u8; 0x10000]);
        for (cp, class) in table.iter_mut().enumerate() {
            *class = match char::from_u32(cp as u32) {
                Some(c) if !c.is_ascii() => class_of_non_ascii(c),
                _ => 0,
            };
        }
        table
    })
}

/// [`class_of_non_ascii`] of the code point `cp` of a char (one load for the BMP).
#[inline(always)]
pub(super) fn class_of_code(cp: u32) -> u8 {
    match bmp_classes().get(cp as usize) {
        Some(&class) => class,
        None => class_of_non_ascii(char::from_u32(cp).unwrap_or('\u{FFFD}')),
    }
}

/// Class bits of any char; exposed to the tests, which check it against fancy-regex.
#[cfg(test)]
fn class_of(c: char) -> u8 {
    if c.is_ascii() {
        ASCII[c as usize]
    } else {
        class_of_code(c as u32)
    }
}

/// The code point and byte length of the multi-byte char starting at `i`. `b` comes from a
/// `&str` and `i` is on a char boundary, so the sequence is complete and valid (a char).
#[inline(always)]
pub(super) fn decode_code(b: &[u8], i: usize) -> (u32, usize) {
    let x = b[i] as u32;
    let (cp, n) = if x < 0xE0 {
        (((x & 0x1F) << 6) | (b[i + 1] as u32 & 0x3F), 2)
    } else if x < 0xF0 {
        (
            ((x & 0x0F) << 12) | ((b[i + 1] as u32 & 0x3F) << 6) | (b[i + 2] as u32 & 0x3F),
            3,
        )
    } else {
        (
            ((x & 0x07) << 18)
                | ((b[i + 1] as u32 & 0x3F) << 12)
                | ((b[i + 2] as u32 & 0x3F) << 6)
                | (b[i + 3] as u32 & 0x3F),
            4,
        )
    };
    (cp, n)
}

/// Class bits and byte length of the multi-byte char at `i`. Kept out of line, so that the
/// ASCII loops stay small. (When it held the category match, inlining it made that match an
/// indirect jump in the callers' branches, which cost more than the call.)
#[inline(never)]
fn class_multi(b: &[u8], i: usize) -> (u8, usize) {
    let (cp, n) = decode_code(b, i);
    (class_of_code(cp), n)
}

/// Class bits and byte length of the char at `i` (`i < b.len()`, on a char boundary).
#[inline(always)]
fn class_at(b: &[u8], i: usize) -> (u8, usize) {
    let x = b[i];
    if x < 0x80 {
        (ASCII[x as usize], 1)
    } else {
        class_multi(b, i)
    }
}

/// Class bits of the char at `i`, or 0 with length 0 at the end of the text (the end is in no
/// class, which is what every "next char must be X" test needs).
#[inline(always)]
fn class_at_or_end(b: &[u8], i: usize) -> (u8, usize) {
    if i < b.len() {
        class_at(b, i)
    } else {
        (0, 0)
    }
}

/// End of the longest run starting at `i` of chars for which `keep(class)` holds. The ASCII
/// bytes stay in a tight loop; a possessive/greedy quantifier over a class is exactly this.
#[inline(always)]
fn run(b: &[u8], mut i: usize, keep: impl Fn(u8) -> bool) -> usize {
    while i < b.len() {
        let x = b[i];
        if x < 0x80 {
            if !keep(ASCII[x as usize]) {
                break;
            }
            i += 1;
        } else {
            let (c, n) = class_multi(b, i);
            if !keep(c) {
                break;
            }
            i += n;
        }
    }
    i
}

/// Skips ASCII letters eight bytes at a time (SWAR): word lengths are unpredictable, so a
/// byte loop pays a branch miss per word; counting the letters of a whole word with one
/// `trailing_zeros` avoids most of them. Stops at the first byte that is not an ASCII letter
/// (lowercase only if `lower`), which the caller's general loop then looks at.
#[inline(always)]
fn ascii_letters(b: &[u8], mut i: usize, lower: bool) -> usize {
    const HI: u64 = 0x8080_8080_8080_8080;
    const ONES: u64 = 0x0101_0101_0101_0101;
    while let Some(chunk) = b.get(i..i + 8) {
        let x = u64::from_le_bytes(chunk.try_into().unwrap());
        // Fold case unless only lowercase counts; clear the top bits so the adds cannot carry.
        let y = if lower {
            x & !HI
        } else {
            (x | (0x20 * ONES)) & !HI
        };
        let ge_a = y + (0x80 - 0x61) * ONES; // top bit set where y >= 'a'
        let gt_z = y + (0x80 - 0x7B) * ONES; // top bit set where y > 'z'
        let letter = ge_a & !gt_z & !x & HI;
        let stop = !letter & HI;
        if stop != 0 {
            return i + (stop.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i
}

/// `\p{L}++`: the SWAR skip for the ASCII part, then the general loop for the rest.
#[inline(always)]
fn letters(b: &[u8], i: usize) -> usize {
    run(b, ascii_letters(b, i, false), |c| c & L != 0)
}

/// o200k's `[W]+` / `[W]*` run; in ASCII only lowercase letters are `[W]`.
#[inline(always)]
fn lowers(b: &[u8], i: usize) -> usize {
    run(b, ascii_letters(b, i, true), |c| c & LO != 0)
}

/// `[^\s\p{L}\p{N}]++`: punctuation, symbols, controls and marks.
#[inline(always)]
fn others(b: &[u8], i: usize) -> usize {
    run(b, i, |c| c & WLN == 0)
}

/// End of a run of the given ASCII bytes: `[\r\n]*` and `[\r\n/]*` are byte sets.
#[inline(always)]
fn byte_run(b: &[u8], mut i: usize, slash: bool) -> usize {
    while i < b.len() && (b[i] == b'\r' || b[i] == b'\n' || (slash && b[i] == b'/')) {
        i += 1;
    }
    i
}

/// `\p{N}{1,3}` from a position known to hold a number char of length `n`.
#[inline(always)]
fn up_to_3_numbers(b: &[u8], i: usize, n: usize) -> usize {
    let mut e = i + n;
    for _ in 0..2 {
        let (c, m) = class_at_or_end(b, e);
        if c & N == 0 {
            break;
        }
        e += m;
    }
    e
}

/// What the whitespace branches need to know about the run of `\s` starting at `i`.
struct WsRun {
    /// End of the run.
    end: usize,
    /// Start of the run's last char: where `\s+(?!\S)` stops when the run is followed by `\S`.
    last: usize,
    /// End of the run's last `\r`/`\n`, or 0 if none: where `\s*[\r\n]` (and `\s*[\r\n]+`) stop.
    nl_end: usize,
}

/// One pass over a whitespace run collects everything the three whitespace branches decide on,
/// so trying them in order costs no rescans.
#[inline(always)]
fn ws_run(b: &[u8], i: usize) -> WsRun {
    let (mut q, mut last, mut nl_end) = (i, i, 0);
    while q < b.len() {
        let (c, n) = class_at(b, q);
        if c & WS == 0 {
            break;
        }
        if c & NL != 0 {
            nl_end = q + 1;
        }
        last = q;
        q += n;
    }
    WsRun {
        end: q,
        last,
        nl_end,
    }
}

/// Byte length of `'(?:[sdmt]|ll|ve|re)` at `i` (GPT-2: ASCII, case-sensitive), 0 if none.
#[inline(always)]
fn contraction_exact(b: &[u8], i: usize) -> usize {
    match b.get(i + 1) {
        Some(b's' | b'd' | b'm' | b't') => 2,
        Some(b'l') if b.get(i + 2) == Some(&b'l') => 3,
        Some(b'v' | b'r') if b.get(i + 2) == Some(&b'e') => 3,
        _ => 0,
    }
}

/// Byte length of a case-insensitive contraction at `i`, 0 if none. cl100k's
/// `'(?i:[sdmt]|ll|ve|re)` and o200k's `(?i:'s|'t|'re|'ve|'m|'ll|'d)` are the same language.
/// The regex crate folds with Unicode simple case folding: of the letters involved only `s` has
/// a non-ASCII variant (U+017F LATIN SMALL LETTER LONG S); the tests check every code point.
#[inline(always)]
pub(super) fn contraction_fold(b: &[u8], i: usize) -> usize {
    if b.get(i) != Some(&b'\'') {
        return 0;
    }
    // `x | 0x20` folds ASCII letters, and for the letters compared below no other byte maps there.
    let lower = |k: usize| b.get(k).map_or(0, |&x| x | 0x20);
    match lower(i + 1) {
        b's' | b'd' | b'm' | b't' => 2,
        b'l' if lower(i + 2) == b'l' => 3,
        b'v' | b'r' if lower(i + 2) == b'e' => 3,
        // U+017F is C5 BF in UTF-8; `0xC5 | 0x20` is 0xE5.
        0xE5 if b[i + 1] == 0xC5 && b.get(i + 2) == Some(&0xBF) => 3,
        _ => 0,
    }
}

/// The piece `text[i..end]` without the two char-boundary checks of safe slicing, which cost
/// about 10% of the scan on English text.
#[inline(always)]
pub(super) fn piece(text: &str, i: usize, end: usize) -> &str {
    debug_assert!(
        i < end && end <= text.len() && text.is_char_boundary(i) && text.is_char_boundary(end)
    );
    // SAFETY: `i` and `end` are char boundaries within `text`: the scanners start at 0 and only
    // ever advance by whole UTF-8 sequences (the decoder's length or an ASCII byte), and every
    // run stops at `text.len()`. A window's starts (`ascii_windows`) are at most 60 bytes past
    // its start, with 64 bytes of text there, and fall on an ASCII byte or a letter's lead byte:
    // its masks hold whole chars only.
    unsafe { text.get_unchecked(i..end) }
}

/// End of the piece at `i` when it is a space and a word starting with an ASCII letter, the
/// commonest piece of English: for GPT-2 (` ?\p{L}++`) and cl100k
/// (`[^\r\n\p{L}\p{N}]?+\p{L}++`) it is the first branch that can match, so the piece goes
/// straight to the word's end. The scanner alone ran 5-35% faster on English in four
/// alternations (noisy host; benches/RESULTS.md, "Seventh step").
#[inline(always)]
fn space_and_word(b: &[u8], i: usize) -> Option<usize> {
    (b[i] == b' ' && b.get(i + 1).is_some_and(u8::is_ascii_alphabetic)).then(|| letters(b, i + 2))
}

/// Splits `text` as `GPT2_PATTERN` does:
/// `'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s`.
pub fn gpt2<'a>(text: &'a str, emit: &mut impl FnMut(&'a str)) {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let end = gpt2_piece(b, i);
        emit(piece(text, i, end));
        i = end;
    }
}

/// End of the piece starting at `i`. Branches in the pattern's order; a leading space joins the
/// run of the non-space class after it, else whitespace runs give back their last char.
#[inline(always)]
fn gpt2_piece(b: &[u8], i: usize) -> usize {
    let x = b[i];
    if let Some(end) = space_and_word(b, i) {
        return end;
    }
    if x == b'\'' {
        let k = contraction_exact(b, i);
        if k != 0 {
            return i + k;
        }
    }
    let (mut c, mut j) = class_at(b, i);
    j += i;
    if x == b' ' {
        // ` ?X++`: a space starts the piece of the non-space that follows it.
        let (c2, n2) = class_at_or_end(b, i + 1);
        if n2 != 0 && c2 & WS == 0 {
            c = c2;
            j = i + 1 + n2;
        }
    }
    if c & L != 0 {
        return letters(b, j);
    }
    if c & N != 0 {
        return run(b, j, |c| c & N != 0);
    }
    if c & WS == 0 {
        return others(b, j);
    }
    // `\s++$ | \s+(?!\S) | \s`
    let r = ws_run(b, i);
    if r.end == b.len() {
        r.end
    } else if r.last > i {
        r.last
    } else {
        r.end
    }
}

/// Splits `text` as `CL100K_PATTERN` does:
/// `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|`
/// `\s++$|\s*[\r\n]|\s+(?!\S)|\s`.
///
/// ASCII is cut 64 bytes at a time ([`super::ascii_windows`]); the rest, piece by piece by
/// [`cl100k_piece`].
pub fn cl100k<'a>(text: &'a str, emit: &mut impl FnMut(&'a str)) {
    windowed::<false>(text, emit, cl100k_piece);
}

/// End of the piece starting at `i`. Unlike GPT-2, any char but a newline, letter or digit can
/// prefix a word, digits come in threes, and newlines end whitespace and punctuation pieces.
#[inline(always)]
fn cl100k_piece(b: &[u8], i: usize) -> usize {
    let x = b[i];
    if let Some(end) = space_and_word(b, i) {
        return end;
    }
    if x == b'\'' {
        let k = contraction_fold(b, i);
        if k != 0 {
            return i + k;
        }
    }
    let (c, n) = class_at(b, i);
    if c & L != 0 {
        return letters(b, i + n);
    }
    if c & N != 0 {
        return up_to_3_numbers(b, i, n);
    }
    let (c2, n2) = class_at_or_end(b, i + n);
    // `[^\r\n\p{L}\p{N}]?+\p{L}++`: any char but a newline, letter or digit prefixes a word.
    if c & NL == 0 && c2 & L != 0 {
        return letters(b, i + n + n2);
    }
    // ` ?[^\s\p{L}\p{N}]++[\r\n]*+`
    if c & WS == 0 {
        return byte_run(b, others(b, i + n), false);
    }
    if x == b' ' && n2 != 0 && c2 & WLN == 0 {
        return byte_run(b, others(b, i + 1 + n2), false);
    }
    // `\s++$ | \s*[\r\n] | \s+(?!\S) | \s`
    let r = ws_run(b, i);
    if r.end == b.len() {
        r.end
    } else if r.nl_end != 0 {
        r.nl_end
    } else if r.last > i {
        r.last
    } else {
        r.end
    }
}

/// Splits `text` as `O200K_PATTERN` does (see there for the full pattern).
///
/// ASCII is cut 64 bytes at a time, as in [`cl100k`]; the rest, piece by piece by
/// [`o200k_piece`].
pub fn o200k<'a>(text: &'a str, emit: &mut impl FnMut(&'a str)) {
    windowed::<true>(text, emit, o200k_piece);
}

/// `[U]*[W]+` from `s` with the regex's backtracking: the greedy `[U]*` run gives chars back
/// until a `[W]` char follows, so the match ends after the `[W]` run that follows the `[U]` run,
/// or else right after the last char of the `[U]` run that is in both classes (the chars after
/// it are Lu/Lt, not `[W]`). `None` when neither exists.
#[inline(always)]
fn upper_then_lower(b: &[u8], s: usize) -> Option<usize> {
    let mut q = s;
    let mut last_both = None;
    while q < b.len() {
        let (c, n) = class_at(b, q);
        if c & UP == 0 {
            if c & LO != 0 {
                return Some(lowers(b, q + n));
            }
            break;
        }
        if c & LO != 0 {
            last_both = Some(q + n);
        }
        q += n;
    }
    last_both
}

/// The two o200k word branches, `P?[U]*[W]+C?` then `P?[U]+[W]*C?` (P the optional prefix
/// `[^\r\n\p{L}\p{N}]`, C the contraction), tried in the regex's order: branch 1 with and then
/// without the prefix, then branch 2 likewise. Without the prefix only differs when the first
/// char is a mark (a prefix char that is also in both case classes).
#[inline(always)]
fn o200k_word(b: &[u8], i: usize, c: u8, n: usize) -> Option<usize> {
    let prefix = c & (L | N | NL) == 0;
    let (c2, n2) = if prefix {
        class_at_or_end(b, i + n)
    } else {
        (0, 0)
    };
    if (c | c2) & (UP | LO) == 0 {
        // Neither the char nor the one after a prefix is in a case class: both branches fail.
        return None;
    }
    let mut end = None;
    if prefix {
        end = upper_then_lower(b, i + n);
    }
    if end.is_none() && c & (UP | LO) != 0 {
        end = upper_then_lower(b, i);
    }
    if end.is_none() && prefix && c2 & UP != 0 {
        end = Some(lowers(b, run(b, i + n + n2, |c| c & UP != 0)));
    }
    if end.is_none() && c & UP != 0 {
        end = Some(lowers(b, run(b, i + n, |c| c & UP != 0)));
    }
    end.map(|e| e + contraction_fold(b, e))
}

/// End of the piece starting at `i`. The word branches come first (with their case classes and
/// contraction suffix), so they are tried before digits, punctuation and whitespace.
#[inline(always)]
fn o200k_piece(b: &[u8], i: usize) -> usize {
    let x = b[i];
    // Fast path for the commonest pieces, an ASCII word in lower case or capitalised, with or
    // without a leading space. Same result as `o200k_word`: branch 1 (with the space as prefix)
    // takes at most one `[U]` char and then the `[W]` run.
    let j = i + (x == b' ') as usize;
    if let Some(&y) = b.get(j) {
        let k = if y.is_ascii_lowercase() {
            j + 1
        } else if y.is_ascii_uppercase() && b.get(j + 1).is_some_and(u8::is_ascii_lowercase) {
            j + 2
        } else {
            0
        };
        if k != 0 {
            let e = lowers(b, k);
            return e + contraction_fold(b, e);
        }
    }
    let (c, n) = class_at(b, i);
    if let Some(e) = o200k_word(b, i, c, n) {
        return e;
    }
    if c & N != 0 {
        return up_to_3_numbers(b, i, n);
    }
    // ` ?[^\s\p{L}\p{N}]+[\r\n/]*`
    if c & WS == 0 {
        return byte_run(b, others(b, i + n), true);
    }
    if x == b' ' {
        let (c2, n2) = class_at_or_end(b, i + 1);
        if n2 != 0 && c2 & WLN == 0 {
            return byte_run(b, others(b, i + 1 + n2), true);
        }
    }
    // `\s*[\r\n]+ | \s+(?!\S) | \s+`
    let r = ws_run(b, i);
    if r.nl_end != 0 {
        r.nl_end
    } else if r.end == b.len() || r.last == i {
        r.end
    } else {
        r.last
    }
}

#[cfg(test)]
#[path = "scanner_tests.rs"]
pub(crate) mod tests;
