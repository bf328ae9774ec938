//! The Unigram encoder: the most likely segmentation of a text into pieces (Viterbi over every
//! piece that matches at every position), as sentencepiece's `EncodeOptimized` and HF's
//! `encode_optimized` compute it.
//!
//! The two peers agree on the algorithm and differ in details that change ids on real text,
//! so a model carries the [`Semantics`] of the file it came from:
//! - **sentencepiece** (`.model`): only NORMAL, USER_DEFINED and UNUSED pieces are matched (an
//!   UNUSED piece never wins); a USER_DEFINED piece scores `len * max_score - 0.1`, which makes
//!   it win over any split of it; the unknown score is `min(NORMAL scores) - 10`, in `f32`.
//! - **HF** (`tokenizer.json`): every piece is matched (its user-defined symbols are added
//!   tokens instead), the unknown score is `min(all scores) - 10`.
//!
//! Both sum path scores in `f64`. Near-ties are frequent on long texts (a path's score is in
//! the tens of thousands there), so the precision decides ids: sentencepiece 0.2 agrees with
//! `f64` sums on every shared document and disagrees with `f32` sums, or with `f64` sums
//! stored as `f32`, on a third of them.
//!
//! Then both fuse runs of unknown pieces into one `<unk>` id, or with `byte_fallback` spell
//! them as `<0xNN>` byte pieces.

use super::trie::{DoubleArray, NONE};
use crate::error::{Error, Result};
use crate::models::Model;
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::cell::RefCell;

/// sentencepiece's `kUnkPenalty` (HF's `K_UNK_PENALTY`).
const UNK_PENALTY: f32 = 10.0;

/// A piece's type in a sentencepiece model (`ModelProto.SentencePiece.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PieceKind {
    Normal,
    Unknown,
    /// `<s>`, `</s>`, ...: never produced from text.
    Control,
    /// Matched whole wherever it occurs in the text.
    UserDefined,
    /// `<0x00>` ... `<0xFF>`, for `byte_fallback`.
    Byte,
    /// Kept in the vocabulary, never produced.
    Unused,
}

impl PieceKind {
    /// From the `.model` enum number.
    pub fn from_spm(n: i32) -> Option<Self> {
        Some(match n {
            1 => PieceKind::Normal,
            2 => PieceKind::Unknown,
            3 => PieceKind::Control,
            4 => PieceKind::UserDefined,
            5 => PieceKind::Unused,
            6 => PieceKind::Byte,
            _ => return None,
        })
    }

    /// The `.model` enum number.
    pub fn spm_number(self) -> i32 {
        match self {
            PieceKind::Normal => 1,
            PieceKind::Unknown => 2,
            PieceKind::Control => 3,
            PieceKind::UserDefined => 4,
            PieceKind::Unused => 5,
            PieceKind::Byte => 6,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    pub text: String,
    /// Log probability (sentencepiece stores an `f32`).
    pub score: f64,
    pub kind: PieceKind,
}

impl Piece {
    pub fn new(text: impl Into<String>, score: f64, kind: PieceKind) -> Self {
        Piece {
            text: text.into(),
            score,
            kind,
        }
    }
}

/// Whose encoding rules a model follows (see the module notes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Semantics {
    SentencePiece,
    HuggingFace,
}

/// sentencepiece's spelling of byte `b` as a piece.
pub fn byte_piece(b: u8) -> String {
    format!("<0x{b:02X}>")
}

/// The byte a `<0xNN>` piece stands for.
pub fn piece_byte(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2
        || !hex
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c))
    {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// The best path ending at a byte position (sentencepiece's `BestPathNode`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct BestPath {
    score: f64,
    /// Where the path's last piece starts; [`NONE`] while no path ends here.
    start: u32,
    id: u32,
}

/// Best paths by byte position, and the (start, id) pieces of the best one.
type Scratch = (Vec<BestPath>, Vec<(u32, u32)>);

thread_local! {
    /// Reused across calls: a document's best paths (16 bytes per byte of text) and its
    /// pieces, so encoding allocates nothing per call once warm.
    static SCRATCH: RefCell<Scratch> = const { RefCell::new((Vec::new(), Vec::new())) };
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
    /// What the Viterbi adds for each matchable piece, by id.
    viterbi_score: Vec<f64>,
    /// The score of an unknown character (an `f32` value for sentencepiece).
    unk_score: f64,
    /// sentencepiece's `min_score_` / `max_score_` over NORMAL pieces (`f32`).
    min_score: f32,
    max_score: f32,
    /// What a `.model` held beyond the pieces, for writing it back unchanged.
    pub(crate) spm_extras: Option<std::sync::Arc<SpmExtras>>,
}

/// The parts of a sentencepiece `ModelProto` that no component of the tokenizer represents,
/// as their serialized bytes (see `formats::sentencepiece`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpmExtras {
    pub trainer_spec: Vec<u8>,
    pub self_test_data: Option<Vec<u8>>,
    /// Top-level fields the format does not define (extensions), serialized.
    pub unknown: Vec<u8>,
    /// Per piece id, its fields beyond piece, score and type (extensions), serialized.
    pub piece_unknown: Vec<(u32, Vec<u8>)>,
    /// Whether each piece's score and type were present in the file (proto2 keeps the
    /// difference between "absent" and "default"), by id.
    pub piece_presence: Vec<(bool, bool)>,
}

impl UnigramModel {
    /// A model from pieces in id order.
    ///
    /// With [`Semantics::SentencePiece`] the checks of sentencepiece's loader apply: no empty
    /// piece, no piece given twice, exactly one UNKNOWN piece, BYTE pieces only with
    /// `byte_fallback` and then all 256. With [`Semantics::HuggingFace`], `unk_id` names the
    /// unknown piece and a piece given twice keeps its last id, as HF does.
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
                let mut unk = None;
                let mut reserved: FxHashMap<&str, u32> = FxHashMap::default();
                for (id, p) in pieces.iter().enumerate() {
                    let id = id as u32;
                    if p.text.is_empty() {
                        return Err(bad(format!("piece {id} is empty")));
                    }
                    let normal = matches!(
                        p.kind,
                        PieceKind::Normal | PieceKind::UserDefined | PieceKind::Unused
                    );
                    let clash = if normal {
                        vocab.insert(p.text.as_str().into(), id).is_some()
                    } else {
                        reserved.insert(&p.text, id).is_some()
                    };
                    if clash {
                        return Err(bad(format!("piece {:?} is defined twice", p.text)));
                    }
                    match p.kind {
                        PieceKind::Unknown if unk.is_some() => {
                            return Err(bad("more than one UNKNOWN piece".into()))
                        }
                        PieceKind::Unknown => unk = Some(id),
                        PieceKind::Byte => {
                            if !byte_fallback {
                                return Err(bad(format!(
                                    "byte piece {:?} found although byte_fallback is false",
                                    p.text
                                )));
                            }
                            let b = piece_byte(&p.text).ok_or_else(|| {
                                bad(format!("byte piece {:?} is not <0x00>..<0xFF>", p.text))
                            })?;
                            byte_ids[b as usize] = id;
                        }
                        _ => {}
                    }
                }
                if byte_fallback && byte_ids.contains(&NONE) {
                    return Err(bad(
                        "byte_fallback is true but not all 256 byte pieces are defined".into(),
                    ));
                }
                for (text, id) in reserved {
                    vocab.insert(text.into(), id);
                }
                let unk = unk.ok_or_else(|| bad("no UNKNOWN piece (<unk>) is defined".into()))?;
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
                    for b in 0..=255u8 {
                        if let Some(&id) = vocab.get(byte_piece(b).as_str()) {
                            byte_ids[b as usize] = id;
                        }
                    }
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
        let mut max_score = f32::MIN_POSITIVE; // sentencepiece starts from FLT_MIN, sic
        for p in pieces.iter().filter(|p| p.kind == PieceKind::Normal) {
            min_score = min_score.min(p.score as f32);
            max_score = max_score.max(p.score as f32);
        }
        let mut viterbi_score = vec![0.0f64; pieces.len()];
        let mut keys: Vec<(&[u8], u32)> = Vec::with_capacity(pieces.len());
        let unk_score = match semantics {
            Semantics::SentencePiece => {
                for (id, p) in pieces.iter().enumerate() {
                    match p.kind {
                        PieceKind::Normal => {
                            viterbi_score[id] = f64::from(p.score as f32);
                            keys.push((p.text.as_bytes(), id as u32));
                        }
                        PieceKind::UserDefined => {
                            // `length * max_score_ - 0.1`: a float product, then a double.
                            viterbi_score[id] = f64::from(p.text.len() as f32 * max_score) - 0.1;
                            keys.push((p.text.as_bytes(), id as u32));
                        }
                        // In the trie but skipped: a prefix path without a piece is the same.
                        _ => {}
                    }
                }
                f64::from(min_score - UNK_PENALTY)
            }
            Semantics::HuggingFace => {
                let mut min = f64::INFINITY;
                for (id, p) in pieces.iter().enumerate() {
                    viterbi_score[id] = p.score;
                    min = min.min(p.score);
                    keys.push((p.text.as_bytes(), id as u32));
                }
                min - f64::from(UNK_PENALTY)
            }
        };
        let trie = DoubleArray::build(keys);
        Ok(UnigramModel {
            pieces,
            vocab,
            unk_id,
            byte_fallback,
            byte_ids,
            semantics,
            trie,
            viterbi_score,
            unk_score,
            min_score,
            max_score,
            spm_extras: None,
        })
    }

    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    pub fn unk_id(&self) -> u32 {
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

    pub(crate) fn max_score(&self) -> f32 {
        self.max_score
    }

    pub(crate) fn min_score(&self) -> f32 {
        self.min_score
    }

    /// The ids of `text`, appended to `out`: the best segmentation, unknown runs fused or
    /// spelled in bytes.
    pub fn encode_into(&self, text: &str, out: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        SCRATCH.with(|scratch| {
            let mut scratch = scratch.borrow_mut();
            let (best, path) = &mut *scratch;
            self.viterbi(text.as_bytes(), best);
            path.clear();
            let mut end = text.len();
            while end > 0 {
                let node = best[end];
                path.push((node.start, node.id));
                end = node.start as usize;
            }
            let spans = path.iter().rev().map(|&(start, id)| (start as usize, id));
            self.emit(text.as_bytes(), spans, out);
        })
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

    /// Fills `best[pos]` with the best path ending at each byte position.
    #[inline(never)]
    fn viterbi(&self, text: &[u8], best: &mut Vec<BestPath>) {
        let n = text.len();
        best.clear();
        best.resize(
            n + 1,
            BestPath {
                score: 0.0,
                start: NONE,
                id: 0,
            },
        );
        let trie = &self.trie;
        let scores = &self.viterbi_score[..];
        let mut start = 0usize;
        while start < n {
            let till_here = best[start].score;
            let mblen = crate::normalizers::sentencepiece::utf8_len(text[start]).min(n - start);
            let mut has_single = false;
            let mut state = 0u32;
            let mut pos = start;
            while pos < n {
                state = trie.child(state, text[pos]);
                if state == NONE {
                    break;
                }
                pos += 1;
                let id = trie.id(state);
                if id == NONE {
                    continue;
                }
                let candidate = scores[id as usize] + till_here;
                let target = &mut best[pos];
                if target.start == NONE || candidate > target.score {
                    target.score = candidate;
                    target.start = start as u32;
                    target.id = id;
                }
                has_single |= pos - start == mblen;
            }
            if !has_single {
                let candidate = self.unk_score + till_here;
                let target = &mut best[start + mblen];
                if target.start == NONE || candidate > target.score {
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
                let s = s + m.viterbi_score[id as usize];
                if best.as_ref().is_none_or(|b| s > b.0) {
                    ids.insert(0, id);
                    best = Some((s, ids));
                }
            }
            if !single {
                let (s, mut ids) = go(m, text, at + ch);
                let s = s + m.unk_score;
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

    #[test]
    fn byte_pieces_parse_only_in_their_exact_spelling() {
        assert_eq!(piece_byte("<0x0A>"), Some(10));
        assert_eq!(piece_byte("<0xff>"), None);
        assert_eq!(piece_byte("<0x100>"), None);
        assert_eq!(piece_byte("0x0A"), None);
        for b in 0..=255u8 {
            assert_eq!(piece_byte(&byte_piece(b)), Some(b));
        }
    }
}
