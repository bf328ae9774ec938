//! The Unigram encoder: the most likely segmentation of a text into pieces (Viterbi over every
//! piece that matches at every position), as sentencepiece's `EncodeOptimized` and HF's
//! `encode_optimized` compute it.
//!
//! The two peers agree on the algorithm and differ in details that change ids on real text,
//! so a model carries the [`Semantics`] of the file it came from:
//! - **sentencepiece** (`.model`, the rules of sentencepiece 0.2.3): only NORMAL, USER_DEFINED
//!   and UNUSED pieces are matched (an UNUSED piece never wins); a USER_DEFINED piece of `n`
//!   bytes scores `0.1 * (n - 1)`, above any log probability, so it wins over any split of it;
//!   the unknown score is `min(NORMAL scores) - 10`. Path scores are `f32` sums, and whenever
//!   the score at the current position passes ±100,000 every pending score is rebased to it.
//! - **HF** (`tokenizer.json`): every piece is matched (its user-defined symbols are added
//!   tokens instead), the unknown score is `min(all scores) - 10`, and sums are `f64`.
//!
//! Near-ties are common in long texts, so this arithmetic decides ids: `f32` sums without the
//! rebasing give other ids than sentencepiece on the long shared books (a `u`+`ta` against
//! `ut`+`a` decided by the rounding of a score in the tens of thousands), `f64` sums on a web
//! document with a model trained here; with both rules every document agrees.
//!
//! Then both fuse runs of unknown pieces into one `<unk>` id, or with `byte_fallback` spell
//! them as `<0xNN>` byte pieces.
//!
//! (Over 500 lines: 174 of them are its unit tests, which check the Viterbi against brute force;
//! the rest is the model's loading checks and one Viterbi with its two score semantics.)

use super::trie::{DoubleArray, NONE};
use crate::error::{Error, Result};
use crate::models::base::Model;
use crate::models::pieces::{
    byte_piece_ids, index_spm_pieces, Piece, PieceKind, Semantics, SpmExtras,
};
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::cell::RefCell;

/// sentencepiece's `kUnkPenalty` (HF's `K_UNK_PENALTY`).
const UNK_PENALTY: f32 = 10.0;

/// sentencepiece's `kScoreResetThreshold`: past this magnitude path scores are rebased.
const SCORE_RESET: f32 = 100_000.0;

/// sentencepiece's `GetUserDefinedScore`: `0.1 * (length - 1)`, computed in `f64` and kept as
/// the `f32` it is returned as.
pub(crate) fn user_defined_score(length: usize) -> f32 {
    (0.1 * (length as f64 - 1.0)) as f32
}

/// A path score: `f32` for sentencepiece, `f64` for HF.
pub(crate) trait PathScore:
    Copy + PartialOrd + std::ops::Add<Output = Self> + std::ops::SubAssign
{
    const ZERO: Self;
    const NEG_INFINITY: Self;
    /// sentencepiece rebases scores past ±[`SCORE_RESET`]; HF never does.
    fn needs_reset(self) -> bool;
    /// The score of piece `id`: `stored` (kept in the trie) for `f32`, from `table` for `f64`.
    fn piece_score(stored: f32, id: u32, table: &[Self]) -> Self;
}

impl PathScore for f32 {
    const ZERO: Self = 0.0;
    const NEG_INFINITY: Self = f32::NEG_INFINITY;
    #[inline(always)]
    fn needs_reset(self) -> bool {
        !(-SCORE_RESET..=SCORE_RESET).contains(&self)
    }
    #[inline(always)]
    fn piece_score(stored: f32, _id: u32, _table: &[Self]) -> Self {
        stored
    }
}

impl PathScore for f64 {
    const ZERO: Self = 0.0;
    const NEG_INFINITY: Self = f64::NEG_INFINITY;
    #[inline(always)]
    fn needs_reset(self) -> bool {
        false
    }
    #[inline(always)]
    fn piece_score(_stored: f32, id: u32, table: &[Self]) -> Self {
        table[id as usize]
    }
}

/// The best path ending at a byte position (sentencepiece's `BestPathNode`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BestPath<S> {
    score: S,
    /// Where the path's last piece starts; [`NONE`] while no path ends here.
    start: u32,
    id: u32,
}

/// Best paths by byte position, for each arithmetic.
#[derive(Default)]
struct Scratch {
    best32: Vec<BestPath<f32>>,
    best64: Vec<BestPath<f64>>,
}

thread_local! {
    /// Reused across calls: a document's best paths (12 or 16 bytes per byte of text), so
    /// encoding allocates nothing per call once warm.
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

#[derive(Clone, Debug)]
pub struct UnigramModel {
    pieces: Vec<Piece>,
    /// Text -> id for every piece (for sentencepiece a reserved piece, CONTROL, UNKNOWN or
    /// BYTE, shadows a NORMAL one of the same text, as its `PieceToId` does).
    vocab: FxHashMap<Box<str>, u32>,
    unk_id: u32,
    byte_fallback: bool,
    /// The `<0xNN>` piece of each byte, or [`NONE`].
    byte_ids: Box<[u32; 256]>,
    semantics: Semantics,
    trie: DoubleArray,
    /// What the Viterbi adds for each matchable piece, by id: `f32` for sentencepiece (a
    /// USER_DEFINED piece's bonus included), `f64` for HF; the other vector is empty.
    scores32: Vec<f32>,
    scores64: Vec<f64>,
    /// The score of an unknown character.
    unk_score32: f32,
    unk_score64: f64,
    /// The longest piece, in bytes.
    max_piece_bytes: usize,
    /// What a `.model` held beyond the pieces, for writing it back unchanged.
    pub(crate) spm_extras: Option<std::sync::Arc<SpmExtras>>,
    /// This model's key in the per-thread word cache ([`super::word_cache`]); the model never
    /// changes after it is built, so its clones share it.
    pub(super) cache_id: u32,
}

impl UnigramModel {
    /// A model from pieces in id order.
    ///
    /// With [`Semantics::SentencePiece`] the checks of sentencepiece's loader apply: no empty
    /// piece, none of 8000 bytes or more, none holding a NUL (but an UNUSED `"\0"`, which is
    /// left out), no score that is NaN or infinite, no piece given twice, one UNKNOWN piece
    /// (none is allowed with `byte_fallback`), BYTE pieces only with `byte_fallback` and then
    /// all 256. With [`Semantics::HuggingFace`], `unk_id` names the unknown piece and a piece
    /// given twice keeps its last id, as HF does.
    pub fn new(
        pieces: Vec<Piece>,
        unk_id: Option<u32>,
        byte_fallback: bool,
        semantics: Semantics,
        source: &str,
    ) -> Result<Self> {
        let bad = |msg: String| Error::format(source, msg);
        if pieces.is_empty() {
            return Err(bad("the vocabulary is empty".into()));
        }
        if pieces.len() >= NONE as usize {
            return Err(bad("too many pieces".into()));
        }
        let mut vocab: FxHashMap<Box<str>, u32> = FxHashMap::default();
        let mut byte_ids = Box::new([NONE; 256]);
        let unk_id = match semantics {
            Semantics::SentencePiece => {
                let index = index_spm_pieces(&pieces, byte_fallback, source)?;
                (vocab, byte_ids) = (index.vocab, index.byte_ids);
                let unk = index.unk;
                if unk_id.is_some_and(|given| given != unk) {
                    return Err(bad(format!(
                        "unk_id {} is not the UNKNOWN piece {unk}",
                        unk_id.unwrap_or_default()
                    )));
                }
                unk
            }
            Semantics::HuggingFace => {
                for (id, p) in pieces.iter().enumerate() {
                    vocab.insert(p.text.as_str().into(), id as u32);
                }
                if byte_fallback {
                    byte_ids = byte_piece_ids(NONE, |piece| vocab.get(piece).copied());
                }
                let unk = unk_id
                    .ok_or_else(|| bad("a Unigram model without unk_id is not supported".into()))?;
                if unk as usize >= pieces.len() {
                    return Err(bad(format!(
                        "unk_id {unk} is past the vocabulary ({} pieces)",
                        pieces.len()
                    )));
                }
                unk
            }
        };

        let mut min_score = f32::MAX;
        for p in pieces.iter().filter(|p| p.kind == PieceKind::Normal) {
            min_score = min_score.min(p.score as f32);
        }
        let mut scores32 = Vec::new();
        let mut scores64 = Vec::new();
        let mut keys: Vec<(&[u8], u32)> = Vec::with_capacity(pieces.len());
        let mut unk_score64 = 0.0;
        match semantics {
            Semantics::SentencePiece => {
                scores32 = vec![0.0f32; pieces.len()];
                for (id, p) in pieces.iter().enumerate() {
                    let score = match p.kind {
                        PieceKind::Normal => p.score as f32,
                        PieceKind::UserDefined => user_defined_score(p.text.len()),
                        // An UNUSED piece is in sentencepiece's trie but skipped: a prefix
                        // path without a piece is the same.
                        _ => continue,
                    };
                    scores32[id] = score;
                    keys.push((p.text.as_bytes(), id as u32));
                }
            }
            Semantics::HuggingFace => {
                scores64 = pieces.iter().map(|p| p.score).collect();
                let min = scores64.iter().copied().fold(f64::INFINITY, f64::min);
                unk_score64 = min - f64::from(UNK_PENALTY);
                for (id, p) in pieces.iter().enumerate() {
                    keys.push((p.text.as_bytes(), id as u32));
                }
            }
        }
        let keys_max = keys.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
        let mut trie = DoubleArray::build(keys);
        if semantics == Semantics::SentencePiece {
            trie.set_scores(|id| scores32[id as usize]);
        }
        Ok(UnigramModel {
            pieces,
            vocab,
            unk_id,
            byte_fallback,
            byte_ids,
            semantics,
            trie,
            scores32,
            scores64,
            unk_score32: min_score - UNK_PENALTY,
            unk_score64,
            max_piece_bytes: keys_max,
            spm_extras: None,
            cache_id: crate::models::base::new_cache_id(),
        })
    }

    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// The unknown piece's id (none in a byte-fallback sentencepiece model without one).
    pub fn unk_id(&self) -> Option<u32> {
        (self.unk_id != NONE).then_some(self.unk_id)
    }

    /// The unknown id, or [`NONE`].
    pub(crate) fn unk_or_none(&self) -> u32 {
        self.unk_id
    }

    pub fn byte_fallback(&self) -> bool {
        self.byte_fallback
    }

    pub fn semantics(&self) -> Semantics {
        self.semantics
    }

    pub fn len(&self) -> usize {
        self.pieces.len()
    }

    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }

    pub fn piece(&self, id: u32) -> Option<&Piece> {
        self.pieces.get(id as usize)
    }

    pub fn piece_kind(&self, id: u32) -> Option<PieceKind> {
        self.piece(id).map(|p| p.kind)
    }

    pub(crate) fn trie(&self) -> &DoubleArray {
        &self.trie
    }

    /// The score of an unknown character's node: the lowest piece score less the penalty,
    /// computed once at load in the model's precision (f32 for sentencepiece, f64 for HF).
    pub(crate) fn unk_score(&self) -> f32 {
        match self.semantics {
            Semantics::SentencePiece => self.unk_score32,
            Semantics::HuggingFace => self.unk_score64 as f32,
        }
    }

    /// The ids of `text`, appended to `out`: the best segmentation, unknown runs fused or
    /// spelled in bytes.
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let Scratch { best32, best64 } = &mut *scratch;
            match self.semantics {
                Semantics::SentencePiece => {
                    self.viterbi(text.as_bytes(), &self.scores32, self.unk_score32, best32);
                    self.backtrack(text.as_bytes(), best32, out);
                }
                Semantics::HuggingFace => {
                    self.viterbi(text.as_bytes(), &self.scores64, self.unk_score64, best64);
                    self.backtrack(text.as_bytes(), best64, out);
                }
            }
            // A huge document does not leave a huge buffer behind on this thread.
            let keep = crate::util::KEEP_SCRATCH_BYTES;
            if std::mem::size_of_val(best32.as_slice()) > keep {
                *best32 = Vec::new();
            }
            if std::mem::size_of_val(best64.as_slice()) > keep {
                *best64 = Vec::new();
            }
        })
    }

    /// Appends the ids of the best path, read from its end and reversed at the end; a run of
    /// unknown pieces becomes one unknown id or its bytes (spelled backwards here, so the
    /// reversal puts them in order), as [`UnigramModel::emit`] does going forwards.
    fn backtrack<S: Copy>(&self, text: &[u8], best: &[BestPath<S>], out: &mut Vec<u32>) {
        let mark = out.len();
        // End of the run of unknown pieces being read, if one is.
        let mut unk_to: Option<usize> = None;
        let mut end = best.len() - 1;
        while end > 0 {
            let node = best[end];
            if node.id == self.unk_id {
                unk_to.get_or_insert(end);
            } else {
                if let Some(to) = unk_to.take() {
                    self.push_unknown_reversed(&text[end..to], out);
                }
                out.push(node.id);
            }
            end = node.start as usize;
        }
        if let Some(to) = unk_to {
            self.push_unknown_reversed(&text[..to], out);
        }
        out[mark..].reverse();
    }

    fn push_unknown_reversed(&self, bytes: &[u8], out: &mut Vec<u32>) {
        if self.byte_fallback && bytes.iter().all(|&b| self.byte_ids[b as usize] != NONE) {
            out.extend(bytes.iter().rev().map(|&b| self.byte_ids[b as usize]));
        } else {
            out.push(self.unk_id);
        }
    }

    /// Appends the ids of pieces given as (start, id) in text order: unknown runs become one
    /// unknown id or their bytes.
    pub(crate) fn emit(
        &self,
        text: &[u8],
        spans: impl Iterator<Item = (usize, u32)>,
        out: &mut Vec<u32>,
    ) {
        let mut unk_from: Option<usize> = None;
        for (start, id) in spans {
            if id == self.unk_id {
                unk_from.get_or_insert(start);
                continue;
            }
            if let Some(from) = unk_from.take() {
                self.push_unknown(&text[from..start], out);
            }
            out.push(id);
        }
        if let Some(from) = unk_from {
            self.push_unknown(&text[from..], out);
        }
    }

    fn push_unknown(&self, bytes: &[u8], out: &mut Vec<u32>) {
        if self.byte_fallback && bytes.iter().all(|&b| self.byte_ids[b as usize] != NONE) {
            out.extend(bytes.iter().map(|&b| self.byte_ids[b as usize]));
        } else {
            out.push(self.unk_id);
        }
    }

    /// Fills `best[pos]` with the best path ending at each byte position (sentencepiece's
    /// `EncodeOptimized`; HF's `encode_optimized` is the same without the rebasing).
    #[inline(never)]
    fn viterbi<S: PathScore>(
        &self,
        text: &[u8],
        scores: &[S],
        unk_score: S,
        best: &mut Vec<BestPath<S>>,
    ) {
        let n = text.len();
        best.clear();
        // Unreached positions score -inf: any path beats them, which is sentencepiece's test
        // `starts_at == -1 || candidate > best` in one comparison (scores are finite), and a
        // rebase leaves them at -inf.
        best.resize(
            n + 1,
            BestPath {
                score: S::NEG_INFINITY,
                start: NONE,
                id: 0,
            },
        );
        best[0].score = S::ZERO;
        let trie = &self.trie;
        // A piece starting before `start` ends at most this far past it: what a rebase of the
        // pending scores must cover (sentencepiece tracks the furthest end reached instead).
        let reach = self.max_piece_bytes.max(4);
        let mut start = 0usize;
        while start < n {
            let mut till_here = best[start].score;
            if till_here.needs_reset() {
                let offset = till_here;
                for node in &mut best[start..=(start + reach).min(n)] {
                    node.score -= offset;
                }
                till_here = S::ZERO;
            }
            let mblen = crate::normalizers::sentencepiece::utf8_len(text[start]).min(n - start);
            let (mut state, mut base) = trie.root();
            let mut has_single = false;
            let mut pos = start;
            while pos < n {
                let Some((s, bs, ends_piece)) = trie.step(state, base, text[pos]) else {
                    break;
                };
                (state, base) = (s, bs);
                pos += 1;
                if !ends_piece {
                    continue;
                }
                let (id, stored) = trie.piece(state);
                let candidate = S::piece_score(stored, id, scores) + till_here;
                let target = &mut best[pos];
                if candidate > target.score {
                    *target = BestPath {
                        score: candidate,
                        start: start as u32,
                        id,
                    };
                }
                has_single |= pos - start == mblen;
            }
            if !has_single {
                let candidate = unk_score + till_here;
                let target = &mut best[start + mblen];
                if candidate > target.score {
                    target.score = candidate;
                    target.start = start as u32;
                    target.id = self.unk_id;
                }
            }
            start += mblen;
        }
    }
}

impl Model for UnigramModel {
    fn kind(&self) -> &'static str {
        "Unigram"
    }
    fn encode_piece(&self, piece: &str, out: &mut Vec<u32>) {
        self.encode_into(piece, out)
    }
    fn id_bound(&self) -> usize {
        self.pieces.len()
    }
    fn id_to_token(&self, id: u32) -> Option<Cow<'_, str>> {
        self.pieces
            .get(id as usize)
            .map(|p| Cow::Borrowed(p.text.as_str()))
    }
    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.vocab.get(token).copied()
    }
    fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.pieces.get(id as usize).map(|p| p.text.as_bytes())
    }
    fn bytes_to_id(&self, bytes: &[u8]) -> Option<u32> {
        std::str::from_utf8(bytes)
            .ok()
            .and_then(|t| self.token_to_id(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::pieces::byte_piece;

    fn model(pieces: &[(&str, f64, PieceKind)], byte_fallback: bool) -> UnigramModel {
        let pieces = pieces
            .iter()
            .map(|&(t, s, k)| Piece::new(t, s, k))
            .collect();
        UnigramModel::new(
            pieces,
            None,
            byte_fallback,
            Semantics::SentencePiece,
            "test",
        )
        .unwrap()
    }

    /// Every segmentation of `text` into the model's pieces or single unknown characters, by
    /// exhaustive search: the reference for the Viterbi.
    fn brute_force(m: &UnigramModel, text: &str) -> (f64, Vec<u32>) {
        fn go(m: &UnigramModel, text: &str, at: usize) -> (f64, Vec<u32>) {
            if at == text.len() {
                return (0.0, vec![]);
            }
            let mut best: Option<(f64, Vec<u32>)> = None;
            let ch = text[at..].chars().next().unwrap().len_utf8();
            let mut single = false;
            for end in at + 1..=text.len() {
                if !text.is_char_boundary(end) {
                    continue;
                }
                let Some(id) = m.trie.get(&text.as_bytes()[at..end]) else {
                    continue;
                };
                single |= end - at == ch;
                let (s, mut ids) = go(m, text, end);
                let s = s + f64::from(m.scores32[id as usize]);
                if best.as_ref().is_none_or(|b| s > b.0) {
                    ids.insert(0, id);
                    best = Some((s, ids));
                }
            }
            if !single {
                let (s, mut ids) = go(m, text, at + ch);
                let s = s + f64::from(m.unk_score32);
                if best.as_ref().is_none_or(|b| s > b.0) {
                    ids.insert(0, m.unk_id);
                    best = Some((s, ids));
                }
            }
            best.unwrap()
        }
        go(m, text, 0)
    }

    #[test]
    fn viterbi_finds_the_best_segmentation() {
        let m = model(
            &[
                ("<unk>", 0.0, PieceKind::Unknown),
                ("a", -1.0, PieceKind::Normal),
                ("b", -1.5, PieceKind::Normal),
                ("ab", -2.1, PieceKind::Normal),
                ("abc", -4.6, PieceKind::Normal),
                ("c", -2.25, PieceKind::Normal),
                ("bc", -3.2, PieceKind::Normal),
                ("日本", -2.05, PieceKind::Normal),
                ("本", -1.3, PieceKind::Normal),
            ],
            false,
        );
        for text in [
            "abc",
            "abcabc",
            "aabbcc",
            "cab",
            "日本本日",
            "xab",
            "ab日日c",
        ] {
            let mut ids = Vec::new();
            m.encode_into(text, &mut ids);
            let (_, mut expected) = brute_force(&m, text);
            expected.dedup_by(|a, b| *a == 0 && *b == 0); // unknown runs fuse
            assert_eq!(ids, expected, "{text}");
        }
    }

    #[test]
    fn unknown_runs_fuse_or_fall_back_to_bytes() {
        let mut pieces = vec![
            ("<unk>", 0.0, PieceKind::Unknown),
            ("a", -1.0, PieceKind::Normal),
        ];
        let bytes: Vec<String> = (0..=255u8).map(byte_piece).collect();
        let m = model(&pieces, false);
        let mut ids = Vec::new();
        m.encode_into("xyaé", &mut ids);
        assert_eq!(ids, [0, 1, 0]);
        pieces.extend(bytes.iter().map(|b| (b.as_str(), 0.0, PieceKind::Byte)));
        let m = model(&pieces, true);
        ids.clear();
        m.encode_into("xaé", &mut ids);
        assert_eq!(ids, [2 + b'x' as u32, 1, 2 + 0xc3, 2 + 0xa9]);
    }

    #[test]
    fn user_defined_pieces_win_and_control_pieces_are_never_produced() {
        let m = model(
            &[
                ("<unk>", 0.0, PieceKind::Unknown),
                ("<s>", 0.0, PieceKind::Control),
                ("<", -1.0, PieceKind::Normal),
                ("s", -1.0, PieceKind::Normal),
                (">", -1.0, PieceKind::Normal),
                ("x", -1.0, PieceKind::Normal),
                ("xx", -50.0, PieceKind::UserDefined),
                ("y", -1.0, PieceKind::Unused),
            ],
            false,
        );
        let mut ids = Vec::new();
        // "xxx": "x" + "xx" and "xx" + "x" tie; the path found first (the earlier start of the
        // last piece) is kept, as in sentencepiece.
        m.encode_into("<s>xxxy", &mut ids);
        assert_eq!(ids, [2, 3, 4, 5, 6, 0]);
    }

    #[test]
    fn loader_checks_follow_sentencepiece() {
        let mk = |p: &[(&str, f64, PieceKind)], bf: bool| {
            UnigramModel::new(
                p.iter().map(|&(t, s, k)| Piece::new(t, s, k)).collect(),
                None,
                bf,
                Semantics::SentencePiece,
                "m.model",
            )
        };
        let unk = ("<unk>", 0.0, PieceKind::Unknown);
        assert!(mk(&[("a", 0.0, PieceKind::Normal)], false).is_err());
        assert!(mk(&[unk, unk], false).is_err());
        assert!(mk(
            &[
                unk,
                ("a", 0.0, PieceKind::Normal),
                ("a", 0.0, PieceKind::UserDefined)
            ],
            false
        )
        .is_err());
        assert!(mk(&[unk, ("", 0.0, PieceKind::Normal)], false).is_err());
        assert!(mk(&[unk, ("<0x41>", 0.0, PieceKind::Byte)], false).is_err());
        assert!(mk(&[unk, ("<0x41>", 0.0, PieceKind::Byte)], true).is_err()); // not all 256
        assert!(mk(&[unk, ("<0xZZ>", 0.0, PieceKind::Byte)], true).is_err());
        // A reserved and a normal piece may share their text.
        assert!(mk(
            &[
                unk,
                ("<s>", 0.0, PieceKind::Control),
                ("<s>", -1.0, PieceKind::Normal)
            ],
            false
        )
        .is_ok());
        let err = mk(&[unk, ("<0x41>", 0.0, PieceKind::Byte)], true)
            .unwrap_err()
            .to_string();
        assert!(err.contains("m.model") && err.contains("256"), "{err}");
    }
}
