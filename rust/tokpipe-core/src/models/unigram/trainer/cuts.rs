//! Pre-segmentation cuts for the Unigram trainer ([`super::UnigramTrainer::feed_cut`]): places in
//! a raw sentence where a word segmenter (jieba for Chinese, `pre_segment` in Python) put a
//! boundary between two Han characters. The trainer's words are cut there too, so no piece is
//! learned across a cut. The text is not changed: a cut splits a counted word in two as a
//! space would, but without a `▁`, so the trained model encodes raw text as any model does,
//! with no segmenter.
//!
//! Normalization moves byte offsets (NFKC, escaped spaces, the dummy prefix), so a cut travels
//! as a Han ordinal: "before the k-th Han character of the line". The rules map a Han character
//! to one Han character, except rare compatibility characters (`㍻` becomes `平成`). A line whose
//! normalized form holds a different number of Han characters keeps no cuts. A cut only ever
//! constrains training, so dropping one is safe. A cut is kept only where both neighbours are
//! Han characters, in the raw and in the normalized line.

use crate::models::pre_segment::is_han;
use aho_corasick::AhoCorasick;

/// The cuts of `line` (which starts at byte `offset` of the text `cuts` index into) that fall
/// between two Han characters, as Han ordinals, into `ordinals`; returns the line's number of
/// Han characters. Cuts elsewhere (or not on a character boundary) are dropped.
pub(crate) fn han_ordinals(
    line: &str,
    offset: usize,
    cuts: &[usize],
    ordinals: &mut Vec<usize>,
) -> usize {
    ordinals.clear();
    let (mut han, mut prev_han, mut next) = (0, false, 0);
    for (i, c) in line.char_indices() {
        let at = offset + i;
        while next < cuts.len() && cuts[next] < at {
            next += 1;
        }
        let here = is_han(c);
        if next < cuts.len() && cuts[next] == at {
            if prev_han && here {
                ordinals.push(han);
            }
            next += 1;
        }
        han += usize::from(here);
        prev_han = here;
    }
    han
}

/// The byte offsets in the normalized `sentence` of the cuts at Han `ordinals` (ascending),
/// into `positions`; none when `sentence` does not hold `han_total` Han characters, as the raw
/// line did.
pub(crate) fn positions(
    sentence: &str,
    ordinals: &[usize],
    han_total: usize,
    positions: &mut Vec<usize>,
) {
    positions.clear();
    if ordinals.is_empty() || sentence.chars().filter(|&c| is_han(c)).count() != han_total {
        return;
    }
    let (mut han, mut prev_han, mut next) = (0, false, 0);
    for (i, c) in sentence.char_indices() {
        if next == ordinals.len() {
            break;
        }
        let here = is_han(c);
        if here && han == ordinals[next] {
            if prev_han {
                positions.push(i);
            }
            next += 1;
        }
        han += usize::from(here);
        prev_han = here;
    }
}

/// `sentence` with every match of `meta` replaced by `boundary`, the cut `positions` moved with
/// the text around them (a cut inside a match is dropped: the match is one boundary).
pub(crate) fn replace_moving(
    meta: &AhoCorasick,
    sentence: &str,
    boundary: &str,
    positions: &mut Vec<usize>,
) -> String {
    // Copies `sentence[last..end]`, moving the cuts up to `end` with it.
    fn copy(
        sentence: &str,
        (last, end): (usize, usize),
        cuts: &[usize],
        next: &mut usize,
        out: &mut String,
        moved: &mut Vec<usize>,
    ) {
        while *next < cuts.len() && cuts[*next] <= end {
            moved.push(out.len() + cuts[*next] - last);
            *next += 1;
        }
        out.push_str(&sentence[last..end]);
    }
    let mut out = String::with_capacity(sentence.len());
    let mut moved = Vec::with_capacity(positions.len());
    let (mut last, mut next) = (0, 0);
    for m in meta.find_iter(sentence) {
        copy(
            sentence,
            (last, m.start()),
            positions,
            &mut next,
            &mut out,
            &mut moved,
        );
        while next < positions.len() && positions[next] < m.end() {
            next += 1;
        }
        out.push_str(boundary);
        last = m.end();
    }
    copy(
        sentence,
        (last, sentence.len()),
        positions,
        &mut next,
        &mut out,
        &mut moved,
    );
    *positions = moved;
    out
}

/// Cuts each word `for_each_word` finds in `sentence` further at `positions` (ascending byte
/// offsets into `sentence`), and calls `f` on every part.
pub(crate) fn for_each_cut_word(
    sentence: &str,
    split_by_whitespace: bool,
    positions: &[usize],
    mut f: impl FnMut(&str),
) {
    let mut next = 0;
    super::words::for_each_word(sentence, split_by_whitespace, |word| {
        // Words are slices of `sentence`: where one starts is the distance between pointers.
        let start = word.as_ptr() as usize - sentence.as_ptr() as usize;
        let end = start + word.len();
        let mut from = start;
        while next < positions.len() && positions[next] < end {
            let at = positions[next];
            next += 1;
            if at > from {
                f(&sentence[from..at]);
                from = at;
            }
        }
        f(&sentence[from..end]);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use aho_corasick::MatchKind;

    fn cut_words(sentence: &str, positions: &[usize]) -> Vec<String> {
        let mut words = Vec::new();
        for_each_cut_word(sentence, true, positions, |w| words.push(w.to_string()));
        words
    }

    #[test]
    fn only_cuts_between_two_han_characters_survive() {
        let line = "用GPT模型生成文本";
        // Byte offsets: 用=0, G=3, P=4, T=5, 模=6, 型=9, 生=12, 成=15, 文=18, 本=21.
        let mut ordinals = Vec::new();
        let total = han_ordinals(line, 100, &[103, 106, 109, 112, 118, 119], &mut ordinals);
        assert_eq!(total, 7);
        // 103 (用|G) and 106 (T|模) touch Latin, 119 is inside 文: dropped.
        assert_eq!(ordinals, vec![2, 3, 5]);
    }

    #[test]
    fn cuts_follow_the_text_through_normalization() {
        let mut ordinals = Vec::new();
        let total = han_ordinals("今天 天气", 0, &[3, 10], &mut ordinals);
        assert_eq!((total, ordinals.clone()), (4, vec![1, 3]));
        // Normalized: a dummy prefix and an escaped space moved every offset.
        let normalized = "▁今天▁天气";
        let mut at = Vec::new();
        positions(normalized, &ordinals, total, &mut at);
        assert_eq!(at, vec![6, 15]);
        assert_eq!(cut_words(normalized, &at), vec!["▁今", "天", "▁天", "气"]);
        // A rule that made more Han characters (㍻ → 平成) leaves the line without cuts.
        positions("▁平成天▁天气", &ordinals, total, &mut at);
        assert!(at.is_empty());
    }

    #[test]
    fn meta_pieces_move_cuts_and_swallow_those_inside() {
        let meta = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(["<s>", "中国"])
            .unwrap();
        // Cuts: 我|爱 (3), 中|国 (inside the symbol 中国, 9), 国|人 (12).
        let sentence = "我爱中国人<s>好人";
        let mut at = vec![3, 9, 12, 18];
        let out = replace_moving(&meta, sentence, "\t", &mut at);
        assert_eq!(out, "我爱\t人\t好人");
        assert_eq!(at, vec![3, 7, 11]);
        assert_eq!(&out[7..], "人\t好人");
        assert_eq!(&out[11..], "好人");
    }
}
