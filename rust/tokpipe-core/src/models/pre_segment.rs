//! Pre-segmentation cuts, shared by the BPE and Unigram trainers (`feed_cut`): places in a text
//! where a word segmenter (jieba for Chinese, `pre_segment` in Python) put a boundary. A trainer
//! keeps a cut only between two Han characters, and learns no token across it. The text is
//! not changed and the trained model encodes without the segmenter (see
//! `python/tokpipe/presegment.py` for the design).

use crate::error::{Error, Result};
use unicode_script::{Script, UnicodeScript};

/// A text and where a pre-segmenter cut it: ascending byte offsets into `text`.
#[derive(Clone, Copy, Debug)]
pub struct CutText<'a> {
    pub text: &'a str,
    pub cuts: &'a [usize],
}

/// Cuts must be ascending; an offset that is not between two Han characters is ignored later.
pub(crate) fn check_cuts(texts: &[CutText<'_>]) -> Result<()> {
    match texts.iter().find(|t| !t.cuts.is_sorted()) {
        Some(bad) => Err(Error::InvalidArgument(format!(
            "pre-segmentation cuts must be ascending byte offsets, got {:?}",
            &bad.cuts[..bad.cuts.len().min(8)]
        ))),
        None => Ok(()),
    }
}

pub(crate) fn is_han(c: char) -> bool {
    c.script() == Script::Han
}

/// Whether byte `at` of `text` lies between two Han characters.
pub(crate) fn between_han(text: &str, at: usize) -> bool {
    text.is_char_boundary(at)
        && text[..at].chars().next_back().is_some_and(is_han)
        && text[at..].chars().next().is_some_and(is_han)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_offsets_between_two_han_characters_count() {
        let text = "用GPT模型。";
        assert!(!between_han(text, 0) && !between_han(text, 3) && !between_han(text, 6));
        assert!(between_han(text, 9));
        assert!(!between_han(text, 10) && !between_han(text, 12) && !between_han(text, 99));
        let bad = [CutText {
            text,
            cuts: &[9, 3],
        }];
        assert!(check_cuts(&bad).is_err());
        assert!(check_cuts(&[CutText {
            text,
            cuts: &[3, 9]
        }])
        .is_ok());
    }
}
