//! Character classes by Unicode general category, as Python's `str` predicates and spaCy's
//! `is_punct` see them, with ASCII decided without a table lookup. The one place the text
//! kernels ask "is this a letter / a number / punctuation".

use unicode_general_category::{get_general_category, GeneralCategory as G};

/// Categories L*: letters.
#[inline]
pub fn is_letter_category(g: G) -> bool {
    matches!(
        g,
        G::UppercaseLetter
            | G::LowercaseLetter
            | G::TitlecaseLetter
            | G::ModifierLetter
            | G::OtherLetter
    )
}

/// Categories P*: punctuation.
#[inline]
pub fn is_punct_category(g: G) -> bool {
    matches!(
        g,
        G::ConnectorPunctuation
            | G::DashPunctuation
            | G::OpenPunctuation
            | G::ClosePunctuation
            | G::InitialPunctuation
            | G::FinalPunctuation
            | G::OtherPunctuation
    )
}

/// Python's `str.isalpha` for one character: L*.
#[inline]
pub fn is_py_alpha(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphabetic();
    }
    is_letter_category(get_general_category(c))
}

/// L* or N*: Python's `str.isalnum` for one character, up to the rare characters with a
/// numeric value but another category.
#[inline]
pub fn is_alnum(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_alphanumeric();
    }
    let g = get_general_category(c);
    is_letter_category(g) || matches!(g, G::DecimalNumber | G::LetterNumber | G::OtherNumber)
}

/// P*: punctuation, as spaCy's `is_punct` tests each character.
#[inline]
pub fn is_punct(c: char) -> bool {
    if c.is_ascii() {
        // The ASCII punctuation marks that are P* (the others, `$+<=>^`|~`, are S*).
        return c.is_ascii_punctuation()
            && !matches!(c, '$' | '+' | '<' | '=' | '>' | '^' | '`' | '|' | '~');
    }
    is_punct_category(get_general_category(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_agrees_with_the_tables() {
        for b in 0u8..128 {
            let c = b as char;
            let g = get_general_category(c);
            assert_eq!(is_punct(c), is_punct_category(g), "{c:?}");
            assert_eq!(is_py_alpha(c), is_letter_category(g), "{c:?}");
        }
    }
}
