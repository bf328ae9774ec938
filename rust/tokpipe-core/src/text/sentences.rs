//! Sentence-span deduplication, datatrove's `SentenceDedup` (C4's "discard all but one of any
//! three-sentence span occurring more than once"): a span of `n` consecutive sentences whose
//! normalised text was already seen earlier in the corpus is removed, all `n` sentences of it.
//!
//! **Sentences** are spaCy's sentencizer's, as datatrove splits them: for English the tokens of
//! `en_words` (a port of `spacy.blank("en")`'s tokenizer); for Chinese and Japanese
//! ([`Splitter::Cjk`]) one token per character except runs of ASCII letters and digits (what
//! jieba keeps whole), so `。！？` end a sentence with no space after them. A sentence ends at
//! its last token; the text between two sentences belongs to the later one, as in datatrove's
//! `SentenceDedupFilter`, which rebuilds a document from `text[previous end..end]` pieces.
//!
//! **Spans** are hashed as datatrove hashes them: each non-blank sentence normalised by
//! `simplify_text` (lowercase, digit runs to `0`, datatrove's `PUNCTUATION` to spaces,
//! whitespace collapsed, accents removed), `n` of them joined by a space; a span that
//! normalises to nothing is never a duplicate. The hash is xxh3-64, not datatrove's xxhash64:
//! only equality matters.
//!
//! **Keys** hold, per sentence, the hash of the span starting there (0: none) and the
//! sentence's length in bytes: 12 bytes a sentence. `decide` walks them in corpus order with a
//! set of the hashes seen (8 bytes a distinct span): a span whose hash is in it flags its `n`
//! sentences, overlapping spans merge, and the first occurrence is kept.
//!
//! **Short documents.** After removal a document is kept only when it has `min_doc_words`
//! words (spaCy's tokens less whitespace; for CJK, every character but whitespace, ASCII words
//! whole, which only approximates the jieba words datatrove counts) and `min_num_sentences` sentences, and is not
//! empty, datatrove's rule; a document with nothing removed is never dropped.
//!
//! (Over 500 lines: one stage's kernel, whose splitter, normalisation, keys, decision and
//! rebuild must agree on the same sentence boundaries; 71 lines are tests.)

use super::chars::is_punct;
use super::en_words::{for_each_token, is_sentence_punct, word_count, Kind};
use super::keys::is_python_whitespace;
use super::{par_binary_rows, StrColumn};
use rayon::prelude::*;
use rustc_hash::FxHashSet;
use unicode_general_category::{get_general_category, GeneralCategory};
use unicode_normalization::UnicodeNormalization;
use xxhash_rust::xxh3::xxh3_64;

/// Bytes per sentence in a document's key: the hash of the span starting at the sentence
/// (u64, 0 for none) and the sentence's length in bytes (u32), little-endian.
pub const SENTENCE_KEY_BYTES: usize = 12;

const ROWS_PER_TASK: usize = 32;

/// How a document is cut into sentences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Splitter {
    /// datatrove's English: spaCy's English tokens and sentencizer.
    English,
    /// Chinese and Japanese: one token per character, ASCII words whole.
    Cjk,
}

/// datatrove's `PUNCTUATION` (utils/text.py), the characters `simplify_text` makes spaces:
/// these marks and the control characters other than tab and newline.
const DATATROVE_PUNCT: &str =
    "!/—”:％１〈&(、━\\【#%「」，】；+^]~“《„';’{|∶´[=-`*．（–？！：$～«〉,><》)?）。…@_.\"}►»";

fn is_datatrove_punct(c: char) -> bool {
    let u = c as u32;
    (u < 0x20 && u != 9 && u != 10) || (0x7f..0xa0).contains(&u) || DATATROVE_PUNCT.contains(c)
}

/// `[.,،٫⎖⎗⎘]`: the decimal separators of datatrove's `NUMBERS_PATTERN`.
fn is_decimal_separator(c: char) -> bool {
    matches!(c, '.' | ',' | '،' | '٫' | '⎖' | '⎗' | '⎘')
}

fn is_digit(c: char) -> bool {
    if c.is_ascii() {
        return c.is_ascii_digit();
    }
    get_general_category(c) == GeneralCategory::DecimalNumber
}

/// datatrove's `simplify_text(text)` with its default `TextNormConfig`, appended to `out`.
pub fn simplify_text(text: &str, out: &mut String) {
    // str.lower() on the whole text: Rust's str::to_lowercase, like Python, lowercases a
    // final sigma in context.
    let lower = text.to_lowercase();
    // \p{Nd}+([.,،٫⎖⎗⎘]\p{Nd}+)? -> 0, then the punctuation -> space.
    let mut step = String::with_capacity(lower.len());
    let chars: Vec<char> = lower.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if is_digit(c) {
            while i < chars.len() && is_digit(chars[i]) {
                i += 1;
            }
            if i + 1 < chars.len() && is_decimal_separator(chars[i]) && is_digit(chars[i + 1]) {
                i += 1;
                while i < chars.len() && is_digit(chars[i]) {
                    i += 1;
                }
            }
            step.push('0');
            continue;
        }
        step.push(if is_datatrove_punct(c) { ' ' } else { c });
        i += 1;
    }
    // WHITESPACE_PATTERN.sub(" ", text.strip()), then NFD without the Mn marks, then strip.
    let mut collapsed = String::with_capacity(step.len());
    for (k, word) in step
        .split(is_python_whitespace)
        .filter(|w| !w.is_empty())
        .enumerate()
    {
        if k > 0 {
            collapsed.push(' ');
        }
        collapsed.push_str(word);
    }
    let start = out.len();
    out.extend(
        collapsed
            .nfd()
            .filter(|&c| get_general_category(c) != GeneralCategory::NonspacingMark),
    );
    let trimmed = out[start..].trim_matches(is_python_whitespace).to_string();
    out.truncate(start);
    out.push_str(&trimmed);
}

/// Characters jieba cuts as one block (its `re_han_default`): the CJK ideographs it knows and
/// ASCII letters, digits and `+#&._%-`.
fn is_jieba_block(c: char) -> bool {
    ('\u{4E00}'..='\u{9FD5}').contains(&c)
        || c.is_ascii_alphanumeric()
        || matches!(c, '+' | '#' | '&' | '.' | '_' | '%' | '-')
}

/// The kind of a token of punctuation-like characters: a lone sentence-ending mark ends a
/// sentence; a run of them (`...`) does not, as spaCy matches whole tokens.
fn kind_of(token: &str) -> Kind {
    let mut chars = token.chars();
    let first = chars.next().unwrap_or_default();
    if chars.next().is_none() && is_sentence_punct(first) {
        Kind::Terminal
    } else if token.chars().all(is_punct) {
        Kind::Punct
    } else {
        Kind::Word
    }
}

/// Tokens for Chinese and Japanese, as spaCy's Chinese tokenizer gets them from jieba: a
/// whitespace run (one space after a token is that token's), and within jieba's blocks
/// (`is_jieba_block`) each ideograph alone, ASCII words as jieba's `re_skip` takes them
/// (`[a-zA-Z0-9]+(\.\d+)?%?`: `3.5` whole, `v4.27.2` as `v4.27` `.` `2`), and each run of the
/// other block characters whole (`...`); every other character alone. Which ideographs form
/// a word (jieba's dictionary) does not matter to sentences, so each stands alone here.
fn for_each_cjk_token<'t>(text: &'t str, mut emit: impl FnMut(Kind, &'t str)) {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut after_token = false;
    while i < text.len() {
        let c = text[i..].chars().next().unwrap_or_default();
        let mut end = i + c.len_utf8();
        if is_python_whitespace(c) {
            for d in text[end..].chars() {
                if !is_python_whitespace(d) {
                    break;
                }
                end += d.len_utf8();
            }
            let from = if after_token && bytes[i] == b' ' {
                i + 1
            } else {
                i
            };
            if from < end {
                emit(Kind::Space, &text[from..end]);
            }
            after_token = false;
            i = end;
            continue;
        }
        after_token = true;
        if c.is_ascii_alphanumeric() {
            while end < bytes.len() && bytes[end].is_ascii_alphanumeric() {
                end += 1;
            }
            if bytes.get(end) == Some(&b'.') && bytes.get(end + 1).is_some_and(u8::is_ascii_digit) {
                end += 1;
                while end < bytes.len() && bytes[end].is_ascii_digit() {
                    end += 1;
                }
            }
            if bytes.get(end) == Some(&b'%') {
                end += 1;
            }
            emit(Kind::Word, &text[i..end]);
        } else if c.is_ascii() && is_jieba_block(c) {
            while end < bytes.len()
                && bytes[end].is_ascii()
                && !bytes[end].is_ascii_alphanumeric()
                && is_jieba_block(bytes[end] as char)
            {
                end += 1;
            }
            emit(kind_of(&text[i..end]), &text[i..end]);
        } else {
            emit(kind_of(&text[i..end]), &text[i..end]);
        }
        i = end;
    }
}

fn for_each_token_of<'t>(text: &'t str, splitter: Splitter, emit: impl FnMut(Kind, &'t str)) {
    match splitter {
        Splitter::English => for_each_token(text, emit),
        Splitter::Cjk => for_each_cjk_token(text, emit),
    }
}

/// The sentences of `text` as byte ranges, spaCy's `span_tokenize`: a sentence starts at a
/// token that is neither punctuation nor sentence-ending punctuation after a sentence-ending
/// punctuation token, and spans its tokens (the whitespace after its last one excluded).
/// Empty text has none.
pub fn sentence_spans(text: &str, splitter: Splitter, out: &mut Vec<(usize, usize)>) {
    out.clear();
    let base = text.as_ptr() as usize;
    let mut current: Option<(usize, usize)> = None;
    let mut seen_period = false;
    for_each_token_of(text, splitter, |kind, token| {
        let start = token.as_ptr() as usize - base;
        let end = start + token.len();
        match kind {
            Kind::Terminal => seen_period = true,
            Kind::Punct => {}
            Kind::Word | Kind::Space => {
                if seen_period {
                    if let Some(done) = current.take() {
                        out.push(done);
                    }
                    seen_period = false;
                }
            }
        }
        current = Some(match current {
            Some((s, _)) => (s, end),
            None => (start, end),
        });
    });
    if let Some(done) = current {
        out.push(done);
    }
}

/// Words for `min_doc_words`: datatrove's `word_tokenize` count (spaCy's tokens less the
/// whitespace) for English; for CJK the tokens of [`for_each_cjk_token`] that are not
/// whitespace.
pub fn words_of(text: &str, splitter: Splitter) -> usize {
    match splitter {
        Splitter::English => word_count(text),
        Splitter::Cjk => {
            let mut n = 0;
            for_each_cjk_token(text, |kind, _| n += usize::from(kind != Kind::Space));
            n
        }
    }
}

/// datatrove's `len(split_into_sentences(text))`: the sentences, at least one.
fn sentences_of(text: &str, splitter: Splitter, scratch: &mut Vec<(usize, usize)>) -> usize {
    sentence_spans(text, splitter, scratch);
    scratch.len().max(1)
}

fn span_hash(joined: &str) -> u64 {
    // 0 marks "no span": move the one hash that collides with it.
    xxh3_64(joined.as_bytes()).max(1)
}

/// One document's key: per sentence, the hash of the `n`-sentence span starting there and
/// the sentence's length (from the end of the previous sentence to its own end).
fn document_key(text: &str, n: usize, splitter: Splitter, data: &mut Vec<u8>) {
    let mut spans = Vec::new();
    sentence_spans(text, splitter, &mut spans);
    // datatrove hashes `sent_tokenize`'s sentences, which leave out the blank ones (only a
    // document's last sentence can be blank), and applies the span indexes to the sentences
    // of `span_tokenize`, which keep them.
    let mut normalised: Vec<String> = Vec::with_capacity(spans.len());
    for &(s, e) in &spans {
        let sentence = &text[s..e];
        if sentence.trim_matches(is_python_whitespace).is_empty() {
            continue;
        }
        let mut norm = String::new();
        simplify_text(sentence, &mut norm);
        normalised.push(norm);
    }
    let mut hashes = vec![0u64; spans.len()];
    if normalised.len() >= n {
        let mut joined = String::new();
        for start in 0..=normalised.len() - n {
            joined.clear();
            for (k, part) in normalised[start..start + n].iter().enumerate() {
                if k > 0 {
                    joined.push(' ');
                }
                joined.push_str(part);
            }
            if !joined.trim_matches(is_python_whitespace).is_empty() && start < hashes.len() {
                hashes[start] = span_hash(&joined);
            }
        }
    }
    let mut previous_end = 0;
    for (hash, &(_, end)) in hashes.iter().zip(&spans) {
        data.extend_from_slice(&hash.to_le_bytes());
        let len = u32::try_from(end - previous_end).unwrap_or(u32::MAX);
        data.extend_from_slice(&len.to_le_bytes());
        previous_end = end;
    }
}

/// Every row's sentence keys ([`SENTENCE_KEY_BYTES`] per sentence), as (data, offsets); rows
/// in parallel.
pub fn sentence_keys(
    column: &StrColumn<'_>,
    n: usize,
    splitter: Splitter,
) -> crate::Result<(Vec<u8>, Vec<i64>)> {
    if n == 0 {
        return Err(crate::Error::InvalidArgument(
            "sentence_dedup: n_sentences must be at least 1".into(),
        ));
    }
    Ok(par_binary_rows(column.len(), ROWS_PER_TASK, |row, data| {
        document_key(column.get(row), n, splitter, data)
    }))
}

#[derive(Debug, Default)]
pub struct SentenceVerdict {
    /// One flag per sentence of the corpus, in order: 1 removes the sentence.
    pub drop: Vec<u8>,
    /// One flag per document: some sentence of it is removed.
    pub touched: Vec<u8>,
    pub sentences: u64,
    /// Spans found earlier in the corpus (overlapping ones counted each).
    pub spans_removed: u64,
    pub sentences_removed: u64,
    /// UTF-8 bytes of the removed sentences, each with the text before it back to the
    /// previous sentence's end.
    pub bytes_removed: u64,
}

/// Which sentences to remove, given every document's sentence keys in corpus order
/// (`sentences[d]` is document d's sentence count, `keys` all keys concatenated): a span whose
/// hash was seen earlier (in this document or an earlier one) removes its `n` sentences.
pub fn sentence_decide(keys: &[u8], sentences: &[u32], n: usize) -> crate::Result<SentenceVerdict> {
    let total: usize = sentences.iter().map(|&c| c as usize).sum();
    if keys.len() != total * SENTENCE_KEY_BYTES {
        return Err(crate::Error::InvalidArgument(format!(
            "sentence keys: {} bytes for {total} sentences",
            keys.len()
        )));
    }
    let mut seen: FxHashSet<u64> = FxHashSet::default();
    let mut verdict = SentenceVerdict {
        drop: vec![0; total],
        touched: vec![0; sentences.len()],
        sentences: total as u64,
        ..Default::default()
    };
    let mut base = 0usize;
    for (doc, &count) in sentences.iter().enumerate() {
        let count = count as usize;
        let mut drop_until = 0usize;
        for i in 0..count {
            let key = &keys[(base + i) * SENTENCE_KEY_BYTES..(base + i + 1) * SENTENCE_KEY_BYTES];
            let hash = u64::from_le_bytes(key[..8].try_into().expect("8 bytes"));
            let len = u32::from_le_bytes(key[8..].try_into().expect("4 bytes"));
            if hash != 0 && !seen.insert(hash) {
                verdict.spans_removed += 1;
                drop_until = i + n;
            }
            if i < drop_until {
                verdict.drop[base + i] = 1;
                verdict.sentences_removed += 1;
                verdict.bytes_removed += u64::from(len);
                verdict.touched[doc] = 1;
            }
        }
        base += count;
    }
    Ok(verdict)
}

/// `text` without its flagged sentences, as datatrove's `SentenceDedupFilter` rebuilds it:
/// each kept sentence with the text before it back to the previous sentence's end, joined,
/// the start stripped of whitespace (and the text after the last sentence gone). A text with
/// no flag set comes back whole. Flags that do not match the sentences are an error.
pub fn remove_sentences(
    text: &str,
    flags: &[u8],
    splitter: Splitter,
    out: &mut String,
) -> crate::Result<()> {
    let mut spans = Vec::new();
    sentence_spans(text, splitter, &mut spans);
    if spans.len() != flags.len() {
        return Err(crate::Error::InvalidArgument(format!(
            "sentence flags ({}) do not match the document's {} sentences",
            flags.len(),
            spans.len()
        )));
    }
    if flags.iter().all(|&f| f == 0) {
        out.push_str(text);
        return Ok(());
    }
    let start = out.len();
    let mut previous_end = 0;
    for (&(_, end), &flag) in spans.iter().zip(flags) {
        if flag == 0 {
            let piece = &text[previous_end..end];
            if out.len() == start {
                out.push_str(piece.trim_start_matches(is_python_whitespace));
            } else {
                out.push_str(piece);
            }
        }
        previous_end = end;
    }
    Ok(())
}

/// A chunk of rows after [`filter_sentences`]: their texts back to back, lengths, keep flags.
type FilteredRows = (String, Vec<usize>, Vec<u8>);

/// Each row without its flagged sentences (`flags(i)`, one byte per sentence), as (data,
/// offsets), and per row whether it is kept: datatrove's rule, a changed document needs
/// `min_doc_words` words and `min_num_sentences` sentences (0 turns a check off) and must not
/// be empty. Rows in parallel.
pub fn filter_sentences<'f>(
    column: &StrColumn<'_>,
    flags: impl Fn(usize) -> &'f [u8] + Sync,
    splitter: Splitter,
    min_doc_words: usize,
    min_num_sentences: usize,
) -> crate::Result<(Vec<u8>, Vec<i64>, Vec<u8>)> {
    let rows: Vec<usize> = (0..column.len()).collect();
    let parts: Vec<crate::Result<FilteredRows>> = rows
        .par_chunks(ROWS_PER_TASK)
        .map(|rows| {
            let mut text = String::new();
            let mut lens = Vec::with_capacity(rows.len());
            let mut keep = Vec::with_capacity(rows.len());
            let mut scratch = Vec::new();
            for &row in rows {
                let original = column.get(row);
                let before = text.len();
                remove_sentences(original, flags(row), splitter, &mut text)
                    .map_err(|e| crate::Error::InvalidArgument(format!("row {row}: {e}")))?;
                let filtered = &text[before..];
                let kept = filtered == original
                    || (!filtered.is_empty()
                        && (min_doc_words == 0 || words_of(filtered, splitter) >= min_doc_words)
                        && (min_num_sentences == 0
                            || sentences_of(filtered, splitter, &mut scratch)
                                >= min_num_sentences));
                keep.push(u8::from(kept));
                lens.push(text.len() - before);
            }
            Ok((text, lens, keep))
        })
        .collect();
    let mut data = Vec::new();
    let mut offsets = Vec::with_capacity(column.len() + 1);
    offsets.push(0i64);
    let mut keep = Vec::with_capacity(column.len());
    for part in parts {
        let (text, lens, k) = part?;
        data.extend_from_slice(text.as_bytes());
        for len in lens {
            offsets.push(offsets.last().copied().unwrap_or(0) + len as i64);
        }
        keep.extend(k);
    }
    Ok((data, offsets, keep))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str, splitter: Splitter) -> Vec<&str> {
        let mut out = Vec::new();
        sentence_spans(text, splitter, &mut out);
        out.iter().map(|&(s, e)| &text[s..e]).collect()
    }

    #[test]
    fn simplify_text_like_datatrove() {
        let mut s = String::new();
        simplify_text("  Héllo,  WORLD! 3.14 and 2,5\tcafé ", &mut s);
        assert_eq!(s, "hello world 0 and 0 cafe");
    }

    #[test]
    fn sentences_with_and_without_spaces() {
        assert_eq!(
            spans(
                "Hello there. Ask Mr. Smith!  \"Yes.\" Done",
                Splitter::English
            ),
            ["Hello there.", "Ask Mr. Smith!", " \"Yes.\"", "Done"]
        );
        assert_eq!(
            spans("你好。我是学生！「本当？」はい", Splitter::Cjk),
            ["你好。", "我是学生！「", "本当？」", "はい"]
        );
        assert!(spans("", Splitter::Cjk).is_empty());
    }

    #[test]
    fn rebuild_keeps_the_text_before_each_kept_sentence() {
        let text = "  One here. Two here.  Three here. Four here. ";
        let mut out = String::new();
        remove_sentences(text, &[1, 0, 1, 0], Splitter::English, &mut out).unwrap();
        // The start is stripped and the space after the last sentence goes, as in datatrove.
        assert_eq!(out, "Two here. Four here.");
        out.clear();
        remove_sentences(text, &[0, 0, 0, 0], Splitter::English, &mut out).unwrap();
        assert_eq!(out, text);
        assert!(remove_sentences(text, &[0, 1], Splitter::English, &mut out).is_err());
    }

    #[test]
    fn overlapping_spans_merge_and_first_is_kept() {
        let key = |h: u64| [h.to_le_bytes().as_slice(), &2u32.to_le_bytes()].concat();
        // Doc 0: spans 7, 8. Doc 1: 7 at 0 (dup), 9, 8 at 2 (dup): sentences 0..2 and 2..4.
        let keys = [
            key(7),
            key(8),
            key(0),
            key(0),
            key(7),
            key(9),
            key(8),
            key(0),
            key(0),
        ]
        .concat();
        let v = sentence_decide(&keys, &[4, 5], 2).unwrap();
        assert_eq!(v.drop, [0, 0, 0, 0, 1, 1, 1, 1, 0]);
        assert_eq!(v.touched, [0, 1]);
        assert_eq!(
            (v.spans_removed, v.sentences_removed, v.bytes_removed),
            (2, 4, 8)
        );
    }
}
