//! cl100k's and o200k's pieces in windows of 64 bytes, found with bit masks instead of a branch
//! per piece.
//!
//! Why: the scalar scanners ([`super::scanners`]) decide each piece's branch from the class of
//! its first chars, and on English text the kinds of consecutive pieces (a word, a space and a
//! word, punctuation, a newline) follow no pattern a branch predictor learns, so most pieces
//! pay a mispredicted branch or two. Here the classes of 64 bytes are computed at once (SSE2
//! compares on x86-64, which every x86-64 CPU has; a table lookup a byte elsewhere), every piece
//! start of the window is derived from them with shifts, masks and carry-propagating adds, and
//! the pieces are cut between consecutive set bits. The scanners ran about twice as fast on
//! English (benches/RESULTS.md, "Ninth step"). gigatoken's scanners take the same approach
//! (masks of 64 bytes, "boundary algebra"); this one is written from the patterns.
//!
//! Exactness. A window starts at a piece start, and neither pattern looks behind, so the pieces
//! from there on depend only on the text from there on: bit 0 is treated as the start of a
//! text. In the chars a window classes, cl100k's pattern
//! `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`
//! starts a piece exactly at:
//! - a run of letters, or the char before it when that char is whitespace other than `\r\n`,
//!   or a lone "other" char (punctuation, symbols, controls) that is not preceded by a space and
//!   does not start a contraction; after a contraction (`'s`, `'ll`, ...), at its end;
//! - a run of digits, and every third digit of it;
//! - a run of "other" chars (its trailing `\r\n` belong to it), or the space before it;
//! - a run of whitespace (after the newlines an "other" run took), the char after its last
//!   `\r`/`\n` when whitespace follows it, and its last char when that is not `\r`/`\n`.
//!
//! o200k's pattern differs in three places: a word also ends where an upper-case letter follows
//! a lower-case one; a contraction ends the word before it instead of standing alone; and a
//! punctuation run takes `/` as well as newlines after it.
//!
//! A window classes ASCII and non-ASCII letters (each byte of such a char is marked a letter,
//! which changes no rule above); it ends at any other char. A start near the end of the window
//! depends on chars past it (a run's end, a contraction's letters, whether a whitespace run
//! holds a newline), so only the pieces that end at a start known for certain are given out:
//! one at least four bytes before the end, and before the whitespace run that reaches there.
//! The next window starts at that start. Where windows stop early, the scalar scanner takes
//! over for a stretch, as it does for the last 63 bytes of a text ([`windowed`]). The tests
//! compare the result with fancy-regex on random texts of hundreds of bytes, mostly ASCII, and
//! on the shared corpora.

use super::scanners::{contraction_fold, piece};

/// Bytes a window looks at.
pub(super) const WINDOW: usize = 64;

/// The class masks of one window: bit `k` is the byte at the window's start plus `k`. As
/// [`masks`] gives them, ASCII bytes only; [`with_letters`] then adds the non-ASCII letters and
/// clears every class bit from the first char the window cannot class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Masks {
    /// Bytes before the first char the window cannot class (64 when there is none).
    pub(super) known: u32,
    /// Non-ASCII bytes (never cleared: read only by `with_letters`).
    pub(super) high: u64,
    /// Non-ASCII bytes that start a char (`11xxxxxx`; read only by `with_letters`).
    pub(super) lead: u64,
    pub(super) letter: u64,
    pub(super) digit: u64,
    /// `\s` in ASCII: space, `\t`, `\n`, `\v`, `\f`, `\r`.
    pub(super) space: u64,
    /// `\r` and `\n`.
    pub(super) newline: u64,
    /// The space char itself.
    pub(super) blank: u64,
    pub(super) apostrophe: u64,
    /// o200k's lower-case class (`a`..=`z` in ASCII): its words split where an upper-case
    /// letter follows one of these.
    pub(super) lower: u64,
    /// `/` (o200k's punctuation pieces take the `/` and newlines after them).
    pub(super) slash: u64,
}

/// The masks of `w`, one table lookup a byte: the reference for [`masks`] (and its portable
/// version).
#[cfg(any(test, not(target_arch = "x86_64")))]
pub(super) fn masks_by_table(w: &[u8; WINDOW]) -> Masks {
    use super::scanners::{ASCII, L, N, NL, WS};
    let mut m = Masks {
        known: WINDOW as u32,
        high: 0,
        lead: 0,
        letter: 0,
        digit: 0,
        space: 0,
        newline: 0,
        blank: 0,
        apostrophe: 0,
        lower: 0,
        slash: 0,
    };
    for (k, &x) in w.iter().enumerate() {
        let bit = 1u64 << k;
        if x >= 0x80 {
            m.high |= bit;
            m.lead |= bit * (x >= 0xC0) as u64;
            continue;
        }
        let c = ASCII[x as usize];
        m.letter |= bit * (c & L != 0) as u64;
        m.digit |= bit * (c & N != 0) as u64;
        m.space |= bit * (c & WS != 0) as u64;
        m.newline |= bit * (c & NL != 0) as u64;
        m.blank |= bit * (x == b' ') as u64;
        m.apostrophe |= bit * (x == b'\'') as u64;
        m.lower |= bit * x.is_ascii_lowercase() as u64;
        m.slash |= bit * (x == b'/') as u64;
    }
    m
}

/// The masks of `w` with SSE2: compares of 16 bytes at a time, gathered with `movemask`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(super) fn masks(w: &[u8; WINDOW]) -> Masks {
    use std::arch::x86_64::*;
    // SAFETY: SSE2 is part of x86-64; the four unaligned loads read the window's 64 bytes.
    unsafe {
        let splat = |x: u8| _mm_set1_epi8(x as i8);
        let mut bits = [0u64; 10];
        for q in 0..4 {
            let v = _mm_loadu_si128(w.as_ptr().add(16 * q) as *const __m128i);
            // Signed compares: a non-ASCII byte is negative, below every bound.
            let between = |lo: u8, hi: u8, x: __m128i| {
                _mm_and_si128(
                    _mm_cmpgt_epi8(x, splat(lo - 1)),
                    _mm_cmpgt_epi8(splat(hi + 1), x),
                )
            };
            // Folding in 0x20 maps 'A'..='Z' onto 'a'..='z' and no other byte into that range.
            let letter = between(b'a', b'z', _mm_or_si128(v, splat(0x20)));
            let digit = between(b'0', b'9', v);
            let blank = _mm_cmpeq_epi8(v, splat(b' '));
            let space = _mm_or_si128(blank, between(b'\t', b'\r', v));
            let newline = _mm_or_si128(
                _mm_cmpeq_epi8(v, splat(b'\n')),
                _mm_cmpeq_epi8(v, splat(b'\r')),
            );
            let apostrophe = _mm_cmpeq_epi8(v, splat(b'\''));
            let lower = between(b'a', b'z', v);
            let slash = _mm_cmpeq_epi8(v, splat(b'/'));
            // Each byte's bit 6 moved to its sign bit (a 16-bit shift: the low byte's bit 7
            // goes to the high byte's bit 0, which `movemask` does not read).
            let lead = _mm_and_si128(v, _mm_slli_epi16(v, 1));
            let shift = 16 * q;
            let all = [
                v, letter, digit, space, newline, blank, apostrophe, lower, slash, lead,
            ];
            for (slot, m) in bits.iter_mut().zip(all) {
                *slot |= ((_mm_movemask_epi8(m) as u32 & 0xFFFF) as u64) << shift;
            }
        }
        Masks {
            known: WINDOW as u32,
            high: bits[0],
            lead: bits[9],
            letter: bits[1],
            digit: bits[2],
            space: bits[3],
            newline: bits[4],
            blank: bits[5],
            apostrophe: bits[6],
            lower: bits[7],
            slash: bits[8],
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
#[inline(always)]
pub(super) fn masks(w: &[u8; WINDOW]) -> Masks {
    masks_by_table(w)
}

/// Adds the window's non-ASCII letters to `m` (every byte of such a char is a letter: the
/// rules then see one letter per byte, which splits no run differently), and clears every
/// mask from the first non-ASCII char that is not one, or is not whole in the window. Letters
/// the rules would get wrong are not taken: `ſ` (a contraction's `s` under case folding) and,
/// for o200k, letters in both of its case classes (`\p{Lm}`, `\p{Lo}`, whose runs the pattern
/// splits by backtracking).
#[inline(always)]
fn with_letters<const O200K: bool>(w: &[u8; WINDOW], mut m: Masks) -> Masks {
    use super::scanners::{class_of_code, decode_code, L, LO, UP};
    // One char at a time, found from its lead byte: the loop carries only the leads still to
    // look at, so one char's decode and class do not wait for the previous char's length.
    let mut leads = m.lead;
    let mut lower = 0;
    while leads != 0 {
        let k = leads.trailing_zeros() as usize;
        leads &= leads - 1;
        let n = match w[k] {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            _ => 4,
        };
        if k + n > WINDOW {
            m.known = k as u32;
            break;
        }
        let (cp, _) = decode_code(w, k);
        let class = class_of_code(cp);
        let one_case = (class & UP != 0) != (class & LO != 0);
        if class & L == 0 || cp == 0x17F || (O200K && !one_case) {
            m.known = k as u32;
            break;
        }
        lower |= (((1u64 << n) - 1) << k) & ((class & LO != 0) as u64).wrapping_neg();
    }
    // Every non-ASCII char before `known` is a letter (all its bytes are non-ASCII).
    m.letter |= m.high;
    m.lower |= lower;
    let keep = below(m.known);
    m.letter &= keep;
    m.digit &= keep;
    m.space &= keep;
    m.newline &= keep;
    m.blank &= keep;
    m.apostrophe &= keep;
    m.lower &= keep;
    m.slash &= keep;
    m
}

/// Bits `0..n` set (`n` up to 64).
#[inline(always)]
fn below(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// The bits of `run` from each bit of `starts` (bits of `run`) to the end of its run: the add
/// carries from a start through the rest of its run. A later start in the same run is left
/// out (the carry meets it), which the one caller that can have two puts back.
#[inline(always)]
fn runs_from(run: u64, starts: u64) -> u64 {
    (run.wrapping_add(starts) ^ run) & run
}

/// The piece starts of window `w` for cl100k, or for o200k when `O200K`, up to the last one
/// that is certain (bit 0 always: the window starts at a piece start).
#[inline(always)]
fn starts<const O200K: bool>(w: &[u8; WINDOW], m: &Masks) -> u64 {
    let prev = |x: u64| x << 1;
    let next = |x: u64| x >> 1;
    let other = below(m.known) & !(m.letter | m.digit | m.space);
    let tab = m.space & !m.newline;
    let letter_run = m.letter & !prev(m.letter);
    let digit_run = m.digit & !prev(m.digit);
    let other_run = other & !prev(other);
    let space_run = m.space & !prev(m.space);

    // The newlines after an "other" run belong to its piece (cl100k's `[\r\n]*+`). o200k's
    // `[\r\n/]*` takes slashes too: in a run of newlines and slashes, everything from the first
    // newline that follows an "other" char (a slash of the run included) is taken. With two
    // such newlines in one run the add's carry skips the second, which is put back.
    let taken_run = if O200K {
        m.newline | m.slash
    } else {
        m.newline
    };
    let taken_first = m.newline & prev(other);
    let taken = runs_from(taken_run, taken_first) | taken_first;
    let after_taken = prev(taken) & !taken & below(m.known);

    // ` ?[^\s\p{L}\p{N}]++`: a space before an "other" run starts the piece instead. (An
    // "other" char right after taken ones starts a piece too: o200k's taken `/` are "other".)
    let other_start = ((other_run & !taken) | (after_taken & other)) & !prev(m.blank);

    // Contractions: cl100k's stand alone, at an apostrophe that starts a piece; o200k's end the
    // word before them.
    let (mut two, mut three) = (0u64, 0u64);
    let mut quotes = m.apostrophe & if O200K { prev(m.letter) } else { other_start };
    // (o200k: an apostrophe right after a contraction follows no word: its piece starts there.)
    let mut contraction_end = u32::MAX;
    while quotes != 0 {
        let p = quotes.trailing_zeros();
        quotes &= quotes - 1;
        if O200K && p == contraction_end {
            continue;
        }
        // (Past the window it reads none: such a start lies where nothing is given out.)
        let length = contraction_fold(w, p as usize) as u32;
        match length {
            2 => two |= 1 << p,
            3 => three |= 1 << p,
            _ => continue,
        }
        contraction_end = p + length;
    }
    let contracted = two | three;
    let after_contraction = (two << 2) | (three << 3);
    // An o200k contraction's apostrophe and letters start nothing.
    let inside_contraction = contracted | prev(contracted) | (three << 2);

    // `[^\r\n\p{L}\p{N}]?+\p{L}++`: the char before a letter run prefixes it when it is
    // whitespace but a newline, or a lone "other" char that starts a piece.
    let prefix = next(letter_run) & (tab | (other_start & !contracted));
    let mut letters = (letter_run & !prev(prefix)) | prefix;
    if O200K {
        // `[U]*[W]+|[U]+[W]*`: a word ends where an upper-case letter follows a lower-case one.
        let upper = m.letter & !m.lower;
        letters |= upper & prev(m.lower);
    } else {
        letters = (letters & !prev(contracted)) | contracted | after_contraction;
    }

    // `\p{N}{1,3}+`: every third digit of a run.
    let three_digits = m.digit & prev(m.digit) & prev(prev(m.digit));
    let (mut digits, mut third) = (digit_run, digit_run);
    loop {
        third = (third << 3) & three_digits;
        if third == 0 {
            break;
        }
        digits |= third;
    }

    // `\s+(?!\S)` and `\s`: the last char of a run (but a newline, which `\s*[\r\n]` ends on).
    let last = tab & !next(m.space);
    // `\s*[\r\n]` ends after a run's last newline; the whitespace after it starts a piece.
    let after_newline = if m.newline == 0 {
        0
    } else {
        // Tab runs that reach the end of their whitespace run: filled backwards, on the
        // reversed masks, from the run's last char.
        let (r_tab, r_space) = (tab.reverse_bits(), m.space.reverse_bits());
        let r_ends = r_space & !(r_space << 1) & r_tab;
        runs_from(r_tab, r_ends).reverse_bits() & prev(m.newline)
    };
    let spaces = (space_run & !taken) | last | after_newline;

    let mut all = 1 | letters | digits | other_start | spaces | after_taken;
    if O200K {
        all = (all & !inside_contraction) | after_contraction;
    }

    // Certain up to four bytes before the end (a start reads at most two bytes past itself),
    // or, when that byte is whitespace, up to the start of its run (whose end is unknown).
    let mut limit = m.known.saturating_sub(4);
    if m.space >> limit & 1 != 0 {
        limit = 63 - (space_run & below(limit + 1)).leading_zeros();
    }
    all & below(limit + 1)
}

/// Splits `text` for cl100k or (`O200K`) o200k: ASCII a window at a time, the rest with
/// `piece_end` (the scalar scanner's "end of the piece starting at `i`").
///
/// A window that settles less than a quarter of itself (non-ASCII text, a long whitespace run)
/// is followed by a stretch of `piece_end`, 64 bytes after one such window and twice as long
/// after each further one in a row, up to 1 KiB: on text in other scripts, where windows
/// rarely get far, their masks then cost little (without the back-off, 24 languages of manual
/// pages were scanned about 5% slower than by `piece_end` alone).
#[inline(always)]
pub(super) fn windowed<'a, const O200K: bool>(
    text: &'a str,
    emit: &mut impl FnMut(&'a str),
    piece_end: impl Fn(&[u8], usize) -> usize,
) {
    let b = text.as_bytes();
    let mut i = 0;
    let mut misses = 0u32;
    while i < b.len() {
        // Where the scalar scanner stops this time: after a stretch, or at the text's end.
        let mut stop = b.len();
        if b.len() - i >= WINDOW {
            let start = i;
            i = window::<O200K>(text, i, emit);
            if i - start >= WINDOW / 4 {
                misses = 0;
                continue;
            }
            stop = stop.min(start + (WINDOW << misses));
            misses = (misses + 1).min(4);
        }
        while i < stop {
            let end = piece_end(b, i);
            emit(piece(text, i, end));
            i = end;
        }
    }
}

/// Gives out the pieces of `text` from `i` (a piece start, with at least [`WINDOW`] bytes from
/// there) that one window settles, for cl100k or (`O200K`) o200k, and returns where the next
/// piece starts.
#[inline(always)]
fn window<'a, const O200K: bool>(text: &'a str, i: usize, emit: &mut impl FnMut(&'a str)) -> usize {
    let w: &[u8; WINDOW] = text.as_bytes()[i..i + WINDOW].try_into().unwrap();
    let m = with_letters::<O200K>(w, masks(w));
    let mut starts = starts::<O200K>(w, &m);
    let mut from = i;
    starts &= starts - 1;
    while starts != 0 {
        let to = i + starts.trailing_zeros() as usize;
        emit(piece(text, from, to));
        from = to;
        starts &= starts - 1;
    }
    from
}
