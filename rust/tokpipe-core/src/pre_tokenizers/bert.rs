//! HF's `BertPreTokenizer`: split on whitespace (dropped), then isolate every punctuation
//! character (ASCII punctuation, and HF's Unicode punctuation class) as a piece of its own.

use crate::normalizers::bert_tables::PUNCTUATION;
use crate::util::in_ranges;

#[inline]
fn is_punctuation(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_punctuation()
    } else {
        in_ranges(PUNCTUATION, c as u32)
    }
}

/// [`split`] behind a `dyn` callback.
pub fn split_dyn<'a>(text: &'a str, emit: &mut dyn FnMut(&'a str)) {
    split(text, &mut |p| emit(p))
}

/// Calls `emit` with each piece of `text`, in order; whitespace is not part of any piece.
pub fn split<'a>(text: &'a str, emit: &mut impl FnMut(&'a str)) {
    let bytes = text.as_bytes();
    let mut start = 0; // start of the current word
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let (c, len) = if b < 0x80 {
            (b as char, 1)
        } else {
            let c = text[i..].chars().next().expect("i is on a char boundary");
            (c, c.len_utf8())
        };
        if c.is_whitespace() {
            if start < i {
                emit(&text[start..i]);
            }
            start = i + len;
        } else if is_punctuation(c) {
            if start < i {
                emit(&text[start..i]);
            }
            emit(&text[i..i + len]);
            start = i + len;
        }
        i += len;
    }
    if start < bytes.len() {
        emit(&text[start..]);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn whitespace_goes_punctuation_stays_alone() {
        let mut got = Vec::new();
        super::split("  Hey,  you--there! 中文「x」\u{3000}end", &mut |p| {
            got.push(p)
        });
        assert_eq!(
            got,
            ["Hey", ",", "you", "-", "-", "there", "!", "中文", "「", "x", "」", "end"]
        );
    }
}
