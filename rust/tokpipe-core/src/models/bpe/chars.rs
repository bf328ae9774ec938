//! Character-level BPE: sentencepiece's BPE models (`.model` with `model_type: BPE`) and HF's
//! `BPE` over characters (the `tokenizer.json` of Llama-1/2 and Mistral: `byte_fallback`,
//! `fuse_unk`, merges over `▁`-words). The text is cut into characters rather than bytes, a
//! character the vocabulary lacks becomes `<0xNN>` byte tokens or the unknown token, and the
//! merges run as for byte-level BPE, through the same loops.
//!
//! The two peers differ, so a model carries the [`Semantics`] of the file it came from:
//! - **sentencepiece** (`bpe_model.cc` and the processor around it, sentencepiece 0.2): the
//!   normalized text is split into characters, a user-defined piece matched whole at each
//!   position first (longest first) and never merged; then the adjacent pair whose
//!   concatenation is a piece (NORMAL, USER_DEFINED or UNUSED) with the highest score is
//!   merged, the leftmost of equal scores first, until none is left. A final symbol that is an
//!   UNUSED piece is split back the way it was last proposed, recursively. A symbol that is no
//!   such piece is unknown (a character that only a CONTROL piece spells included: those never
//!   come from text, as sentencepiece 0.2.3 does it); an unknown symbol becomes its bytes'
//!   `<0xNN>` pieces with `byte_fallback`, and runs of unknown symbols become one unknown id
//!   otherwise.
//! - **HF** (`tokenizers`' `BPE::merge_word`): every character that is a vocabulary entry is
//!   its token, another becomes its `<0xNN>` tokens when `byte_fallback` finds them all, else
//!   the unknown token (runs fused with `fuse_unk`; dropped without `unk_token`); then the
//!   listed merges apply by rank, the leftmost of equal ranks first. `ignore_merges` returns a
//!   piece that is itself a token whole.
//!
//! The two merge rules are one table over symbol ids ([`MergeRule::Scores`]: every split of
//! every piece into two pieces, the rank of the piece's score as priority; [`MergeRule::Listed`]
//! for HF), so byte-level BPE's merge loops run both unchanged.
//!
//! (Over 500 lines: 130 of them are its unit tests; the rest is building the model for either
//! semantics (about 300 lines) and encoding (about 340: the word-by-word walk and the exact port of
//! sentencepiece with its re-splitting), which share `CharLevel`'s tables.)

// Design note: why a mode of `BpeModel` and not a model folder of its own. Everything after the
// text is cut into symbols is byte-level BPE's: an id-pair table, the lowest-priority-leftmost
// loop on the stack for short words and the heap for long ones, and the whole-word lookup of
// "atomic" tokens that makes most words one hash probe. A separate model would copy all of it.
// What differs is the alphabet (characters, unknown ones spelled in bytes or fused into
// `<unk>`, user-defined pieces frozen), and that lives here, behind one branch at the top of
// `encode_piece` that byte-level models never take.
//
// Speed: sentencepiece merges over the whole normalized text (it has no pre-tokenizer), and HF
// Llama files do the same (no pre-tokenizer, or a Metaspace that does not split). When no merge
// can join a symbol that ends in something else than `▁` to one that starts with `▁`, no merge
// ever crosses the place where a run of `▁` starts (the first merge that did would be such a
// pair), so merging each word alone gives the same ids: the order of merges in different words
// never matters, and within a word it is the same. So the text is cut where each run of `▁`
// starts (where it ends for `treat_whitespace_as_suffix` models), and most words are then one
// lookup. A user-defined piece and (for sentencepiece) a character that is in no
// piece end a word too, as nothing merges with them. The check is made on the merge table at
// load time; a model that merges across words is encoded whole.
//
// sentencepiece models with UNUSED pieces, or with a character inside a piece that is not a
// piece itself, are encoded by `encode_exact`, a direct transcription of the algorithm above on
// the whole text (which pair was last proposed for an UNUSED piece depends on the order of every
// proposal in the text, so cutting it into words would change the answer). No trained model has
// either; edited ones may.

use super::model::{merge_table, pair_key, BpeModel, MergeRule, NO_TOKEN, SHORT_PIECE};
use super::pair_table::PairTable;
use super::splits::two_token_splits;
use crate::error::{Error, Result};
use crate::models::pieces::{
    byte_piece_ids, index_spm_pieces, Piece, PieceKind, Semantics, SpmExtras,
};
use crate::normalizers::sentencepiece::{utf8_len, UserDefined, SPACE_SYMBOL};
use rustc_hash::FxHashMap;
use std::collections::BinaryHeap;
use std::sync::Arc;

/// Where the text may be cut into words that merge independently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SpaceSplit {
    /// Where a run of `▁` starts (it starts a word; the run stays whole, as Llama's
    /// whitespace-only pieces `▁▁`, `▁▁▁▁` need).
    Before,
    /// Where a run of `▁` ends (it ends a word: `treat_whitespace_as_suffix`).
    After,
    /// Nowhere: some merge joins across such a place.
    Never,
}

/// The alphabet and unknown-character rules of a character-level model.
#[derive(Clone, Debug)]
pub(crate) struct CharLevel {
    semantics: Semantics,
    /// The symbol of each ASCII character ([`NO_TOKEN`]: unknown).
    ascii: [u32; 128],
    /// The symbol of every other known character, by code point.
    others: FxHashMap<u32, u32>,
    /// The unknown token, or [`NO_TOKEN`].
    unk: u32,
    byte_fallback: bool,
    /// The `<0xNN>` token of each byte, or [`NO_TOKEN`].
    byte_tokens: Box<[u32; 256]>,
    /// HF's `fuse_unk` (sentencepiece always fuses).
    fuse_unk: bool,
    split: SpaceSplit,
    /// The symbol of `▁`, or [`NO_TOKEN`].
    space: u32,
    /// sentencepiece's user-defined pieces, matched whole first, and their ids.
    user_defined: Option<(UserDefined, Vec<u32>)>,
    /// A sentencepiece model's pieces (text, score, type) in id order; empty for HF.
    pieces: Vec<Piece>,
    /// What a `.model` held beyond the pieces, for writing it back unchanged.
    pub(crate) spm_extras: Option<Arc<SpmExtras>>,
    /// sentencepiece models the word-by-word walk does not cover (see the module notes).
    exact: Option<Box<ExactTables>>,
}

/// What [`BpeModel::encode_exact`] looks pieces up in.
#[derive(Clone, Debug)]
struct ExactTables {
    /// sentencepiece's `pieces_`: NORMAL, USER_DEFINED and UNUSED pieces.
    mergeable: FxHashMap<Box<str>, u32>,
}

impl CharLevel {
    fn new(semantics: Semantics) -> Self {
        CharLevel {
            semantics,
            ascii: [NO_TOKEN; 128],
            others: FxHashMap::default(),
            unk: NO_TOKEN,
            byte_fallback: false,
            byte_tokens: Box::new([NO_TOKEN; 256]),
            fuse_unk: true,
            split: SpaceSplit::Never,
            space: NO_TOKEN,
            user_defined: None,
            pieces: Vec::new(),
            spm_extras: None,
            exact: None,
        }
    }

    fn set_char(&mut self, c: char, id: u32) {
        match u8::try_from(c) {
            Ok(b) if b < 128 => self.ascii[b as usize] = id,
            _ => {
                self.others.insert(c as u32, id);
            }
        }
    }

    /// The length of the character at `i` and its symbol ([`NO_TOKEN`]: unknown).
    #[inline(always)]
    fn symbol_at(&self, text: &str, i: usize) -> (usize, u32) {
        let b = text.as_bytes()[i];
        if b < 128 {
            return (1, self.ascii[b as usize]);
        }
        let c = text[i..].chars().next().map_or(0, |c| c as u32);
        let len = utf8_len(b);
        (len, self.others.get(&c).copied().unwrap_or(NO_TOKEN))
    }

    /// Whether every byte of `bytes` has its `<0xNN>` token.
    #[inline]
    fn bytes_known(&self, bytes: &[u8]) -> bool {
        bytes
            .iter()
            .all(|&b| self.byte_tokens[b as usize] != NO_TOKEN)
    }

    /// sentencepiece: an unknown character's ids (its bytes, or one unknown id for a run).
    #[inline]
    fn push_unknown(&self, bytes: &[u8], mark: usize, out: &mut Vec<u32>) {
        if self.byte_fallback {
            out.extend(bytes.iter().map(|&b| self.byte_tokens[b as usize]));
        } else if !(out.len() > mark && out.last() == Some(&self.unk)) {
            out.push(self.unk);
        }
    }
}

impl BpeModel {
    /// A sentencepiece BPE model from its pieces in id order (a `.model`'s), with
    /// sentencepiece's checks on them (see [`crate::models::unigram::UnigramModel::new`]).
    pub fn from_sentencepiece(
        pieces: Vec<Piece>,
        byte_fallback: bool,
        source: &str,
    ) -> Result<Self> {
        let bad = |msg: String| Error::format(source, msg);
        if pieces.is_empty() {
            return Err(bad("the vocabulary is empty".into()));
        }
        if pieces.len() >= NO_TOKEN as usize {
            return Err(bad("too many pieces".into()));
        }
        let index = index_spm_pieces(&pieces, byte_fallback, source)?;
        let mut c = CharLevel::new(Semantics::SentencePiece);
        c.unk = index.unk;
        c.byte_fallback = byte_fallback;
        c.byte_tokens = index.byte_ids.clone();

        // sentencepiece's `pieces_` (the "\0" UNUSED piece its loader skips left out; a piece
        // that a reserved one shadows in `PieceToId` kept), and whether the word-by-word walk
        // covers this model (see the module notes).
        let in_pieces = |_id: usize, p: &Piece| {
            matches!(
                p.kind,
                PieceKind::Normal | PieceKind::UserDefined | PieceKind::Unused
            ) && !(p.kind == PieceKind::Unused && p.text == "\0")
        };
        let mut mergeable: FxHashMap<Box<str>, u32> = FxHashMap::default();
        let mut needs_exact = false;
        for (id, p) in pieces.iter().enumerate() {
            if in_pieces(id, p) {
                mergeable.insert(p.text.as_str().into(), id as u32);
                needs_exact |= p.kind == PieceKind::Unused;
            }
        }
        for (id, p) in pieces.iter().enumerate() {
            if p.kind == PieceKind::Normal && in_pieces(id, p) {
                let mut buf = [0u8; 4];
                if p.text
                    .chars()
                    .any(|ch| !mergeable.contains_key(&*ch.encode_utf8(&mut buf)))
                {
                    needs_exact = true; // a character inside a piece that is not a piece
                }
                let mut chars = p.text.chars();
                if let (Some(ch), None) = (chars.next(), chars.next()) {
                    c.set_char(ch, id as u32);
                }
            }
        }
        let ud: Vec<(&str, u32)> = pieces
            .iter()
            .enumerate()
            .filter(|(_, p)| p.kind == PieceKind::UserDefined)
            .map(|(id, p)| (p.text.as_str(), id as u32))
            .collect();
        c.user_defined = UserDefined::new(ud.iter().map(|(t, _)| *t))
            .map(|m| (m, ud.iter().map(|(_, id)| *id).collect()));

        // Merges: every split of a NORMAL piece into two NORMAL pieces (a USER_DEFINED piece
        // is matched whole before merging, so no merge makes one), ranked by score.
        let mut scores: Vec<f32> = pieces
            .iter()
            .filter(|p| p.kind == PieceKind::Normal)
            .map(|p| p.score as f32)
            .collect();
        scores.sort_by(|a, b| b.total_cmp(a));
        scores.dedup_by(|a, b| a == b);
        let rank = |score: f32| scores.partition_point(|&s| s > score) as u32;
        // (No two of these pieces share a text: `index_spm_pieces` refused that.)
        let normal_pieces: Vec<(&[u8], u32)> = pieces
            .iter()
            .enumerate()
            .filter(|&(id, p)| p.kind == PieceKind::Normal && in_pieces(id, p))
            .map(|(id, p)| (p.text.as_bytes(), id as u32))
            .collect();
        let normal_ids: FxHashMap<&[u8], u32> = normal_pieces.iter().copied().collect();
        let mut merges = FxHashMap::default();
        for (id, l, r) in two_token_splits(&normal_pieces, |b| normal_ids.get(b).copied()) {
            let priority = rank(pieces[id as usize].score as f32);
            merges.insert(pair_key(l, r), (priority, id));
        }
        if needs_exact {
            c.exact = Some(Box::new(ExactTables { mergeable }));
        }
        c.pieces = pieces;
        let (tokens, token_to_id) = {
            let mut tokens = Vec::with_capacity(c.pieces.len());
            for p in &c.pieces {
                tokens.push(Some(p.text.as_bytes().to_vec().into_boxed_slice()));
            }
            let token_to_id = index
                .vocab
                .iter()
                .map(|(t, &id)| (t.as_bytes().to_vec().into_boxed_slice(), id))
                .collect();
            (tokens, token_to_id)
        };
        Self::finish_chars(
            c,
            tokens,
            token_to_id,
            merges,
            Vec::new(),
            MergeRule::Scores,
            false,
        )
    }

    /// An HF `BPE` model over characters: the vocabulary (token text and id), the merges as
    /// token ids in rank order, and HF's `unk_token` (by id), `byte_fallback`, `fuse_unk` and
    /// `ignore_merges`. Every merge's concatenation must be in the vocabulary, as HF requires;
    /// a repeated merge keeps its later rank, as in HF.
    #[allow(clippy::too_many_arguments)]
    pub fn from_hf_chars(
        vocab: Vec<(String, u32)>,
        merge_list: Vec<(u32, u32)>,
        unk: Option<u32>,
        byte_fallback: bool,
        fuse_unk: bool,
        ignore_merges: bool,
        source: &str,
    ) -> Result<Self> {
        let bad = |msg: String| Error::format(source, msg);
        if vocab.is_empty() {
            return Err(bad("the vocabulary is empty".into()));
        }
        let (last, max_id) = vocab.iter().max_by_key(|(_, id)| *id).expect("not empty");
        crate::models::base::check_id_bound(last, *max_id, vocab.len(), source)?;
        let mut tokens: Vec<Option<Box<[u8]>>> = vec![None; *max_id as usize + 1];
        let mut token_to_id: FxHashMap<Box<[u8]>, u32> = FxHashMap::default();
        let mut c = CharLevel::new(Semantics::HuggingFace);
        for (text, id) in vocab {
            if tokens[id as usize].is_some() {
                return Err(bad(format!("id {id} is given to two tokens")));
            }
            let mut chars = text.chars();
            if let (Some(ch), None) = (chars.next(), chars.next()) {
                c.set_char(ch, id);
            }
            let bytes: Box<[u8]> = text.into_bytes().into_boxed_slice();
            tokens[id as usize] = Some(bytes.clone());
            token_to_id.insert(bytes, id);
        }
        if let Some(unk) = unk {
            c.unk = unk;
        }
        c.byte_fallback = byte_fallback;
        c.fuse_unk = fuse_unk;
        if byte_fallback {
            c.byte_tokens =
                byte_piece_ids(NO_TOKEN, |piece| token_to_id.get(piece.as_bytes()).copied());
        }
        let merges = merge_table(&tokens, &token_to_id, &merge_list, source)?;
        Self::finish_chars(
            c,
            tokens,
            token_to_id,
            merges,
            merge_list,
            MergeRule::Listed,
            ignore_merges,
        )
    }

    /// The rest of both constructors: where words may be cut, and which tokens are atomic.
    fn finish_chars(
        mut c: CharLevel,
        tokens: Vec<Option<Box<[u8]>>>,
        token_to_id: FxHashMap<Box<[u8]>, u32>,
        merges: FxHashMap<u64, (u32, u32)>,
        merge_list: Vec<(u32, u32)>,
        rule: MergeRule,
        ignore_merges: bool,
    ) -> Result<Self> {
        let text = |id: u32| {
            tokens
                .get(id as usize)
                .and_then(|t| t.as_deref())
                .unwrap_or_default()
        };
        let space = SPACE_SYMBOL.as_bytes();
        // A byte or unknown token stands for a character that is not `▁`, whatever its text.
        let stands_in = |id: u32| id == c.unk || c.byte_tokens.contains(&id);
        let ends_in_space = |id: u32| !stands_in(id) && text(id).ends_with(space);
        let starts_with_space = |id: u32| !stands_in(id) && text(id).starts_with(space);
        let (mut before, mut after) = (true, true);
        for &key in merges.keys() {
            let (l, r) = ((key >> 32) as u32, key as u32);
            before &= ends_in_space(l) || !starts_with_space(r);
            after &= !ends_in_space(l) || starts_with_space(r);
        }
        c.space = c.symbol_at(SPACE_SYMBOL, 0).1;
        c.split = match (c.space != NO_TOKEN, before, after) {
            (true, true, _) => SpaceSplit::Before,
            (true, false, true) => SpaceSplit::After,
            _ => SpaceSplit::Never,
        };
        let n = tokens.len();
        let mut model = BpeModel {
            tokens,
            token_to_id,
            byte_ids: [NO_TOKEN; 256],
            merges: PairTable::new(&merges),
            merge_list,
            atomic: vec![false; n],
            short_tokens: Default::default(),
            rule,
            ignore_merges,
            chars: Some(Box::new(c)),
            cache_id: 0,
        };
        // A token is atomic when the walk over its own text gives back exactly that token.
        let atomic: Vec<bool> = {
            use rayon::prelude::*;
            let model_ref = &model;
            (0..n)
                .into_par_iter()
                .map(|id| {
                    let Some(bytes) = model_ref.tokens[id].as_deref() else {
                        return false;
                    };
                    if model_ref.token_to_id.get(bytes) != Some(&(id as u32)) {
                        return false;
                    }
                    let Ok(text) = std::str::from_utf8(bytes) else {
                        return false;
                    };
                    let mut out = Vec::with_capacity(4);
                    model_ref.walk(
                        model_ref.chars.as_deref().expect("character level"),
                        text,
                        &mut out,
                    );
                    out.len() == 1 && out[0] == id as u32
                })
                .collect()
        };
        model.atomic = atomic;
        Ok(model)
    }

    /// The [`Semantics`] of a character-level model.
    pub fn semantics(&self) -> Option<Semantics> {
        self.chars.as_ref().map(|c| c.semantics)
    }

    /// A sentencepiece model's pieces (text, score, type) in id order.
    pub fn spm_pieces(&self) -> Option<&[Piece]> {
        self.chars
            .as_ref()
            .filter(|c| c.semantics == Semantics::SentencePiece)
            .map(|c| c.pieces.as_slice())
    }

    pub(crate) fn spm_extras(&self) -> Option<&SpmExtras> {
        self.chars.as_ref().and_then(|c| c.spm_extras.as_deref())
    }

    pub(crate) fn set_spm_extras(&mut self, extras: Arc<SpmExtras>) {
        if let Some(c) = &mut self.chars {
            c.spm_extras = Some(extras);
        }
    }

    /// HF's `unk_token` (or sentencepiece's UNKNOWN piece), by id.
    pub fn unk_id(&self) -> Option<u32> {
        self.chars
            .as_ref()
            .map(|c| c.unk)
            .filter(|&u| u != NO_TOKEN)
    }

    /// HF's `byte_fallback` (sentencepiece's trainer flag of that name).
    pub fn byte_fallback(&self) -> bool {
        self.chars.as_ref().is_some_and(|c| c.byte_fallback)
    }

    /// Whether a `<0xNN>` token exists for every byte (the table is filled whenever byte
    /// fallback is on).
    pub(crate) fn knows_every_byte(&self) -> bool {
        self.chars
            .as_ref()
            .is_some_and(|c| !c.byte_tokens.contains(&NO_TOKEN))
    }

    /// HF's `fuse_unk`.
    pub fn fuse_unk(&self) -> bool {
        self.chars.as_ref().is_some_and(|c| c.fuse_unk)
    }

    /// The merges of a sentencepiece model in the order transformers' converter
    /// (`SpmConverter.build_tokenizer_from_spm_proto`) lists them: by score (highest first),
    /// then the merged piece's id, then the two halves' text.
    pub(super) fn scored_merge_list(&self) -> Vec<(u32, u32)> {
        let text = |id: u32| self.token_bytes(id).unwrap_or_default();
        // (priority, merged id, left, right)
        let mut all: Vec<[u32; 4]> = self
            .merges
            .iter()
            .map(|(k, (prio, id))| [prio, id, (k >> 32) as u32, k as u32])
            .collect();
        all.sort_unstable_by(|a, b| {
            (a[0], a[1], text(a[2]), text(a[3])).cmp(&(b[0], b[1], text(b[2]), text(b[3])))
        });
        all.into_iter().map(|[.., l, r]| (l, r)).collect()
    }

    /// Appends the ids of `piece` (UTF-8 text) for a character-level model.
    #[inline(never)]
    pub(super) fn encode_chars(&self, c: &CharLevel, piece: &[u8], out: &mut Vec<u32>) {
        let Ok(text) = std::str::from_utf8(piece) else {
            return;
        };
        if text.is_empty() {
            return;
        }
        if c.exact.is_some() {
            return self.encode_exact(c, text, out);
        }
        // HF's `ignore_merges`: the whole piece, when it is a token.
        if self.ignore_merges {
            if let Some(&id) = self.token_to_id.get(piece) {
                out.push(id);
                return;
            }
        }
        self.walk(c, text, out)
    }

    /// Cuts `text` into words that merge alone (see the module notes) and merges each.
    fn walk(&self, c: &CharLevel, text: &str, out: &mut Vec<u32>) {
        let bytes = text.as_bytes();
        let mark = out.len();
        let mut syms: Vec<u32> = Vec::with_capacity(text.len().min(256));
        let mut word = 0; // where the word being read starts
        let mut i = 0;
        // HF: an unknown token not yet added (runs of unknown characters fuse into it).
        let mut pending_unk = false;
        // Whether the last character was `▁` (words are cut where runs of them start or end).
        let mut after_space = false;
        let spm = c.semantics == Semantics::SentencePiece;
        while i < bytes.len() {
            if let Some((ud, ids)) = &c.user_defined {
                if let Some((len, k)) = ud.longest_prefix(&text[i..]) {
                    self.merge_word(&bytes[word..i], &mut syms, out);
                    out.push(ids[k]);
                    i += len;
                    word = i;
                    after_space = false;
                    continue;
                }
            }
            let (len, sym) = c.symbol_at(text, i);
            if sym == NO_TOKEN {
                if spm {
                    // In no piece: nothing merges with it.
                    self.merge_word(&bytes[word..i], &mut syms, out);
                    c.push_unknown(&bytes[i..i + len], mark, out);
                    i += len;
                    word = i;
                    after_space = false;
                    continue;
                }
                let char_bytes = &bytes[i..i + len];
                let as_bytes = c.byte_fallback && c.bytes_known(char_bytes);
                if !as_bytes && c.unk == NO_TOKEN {
                    // HF drops it: the symbols on either side meet (two `▁` around it may merge),
                    // so it neither cuts the word nor ends a run of `▁`.
                    i += len;
                    continue;
                }
                if after_space && c.split == SpaceSplit::After {
                    self.merge_word(&bytes[word..i], &mut syms, out);
                    word = i;
                }
                after_space = false;
                if as_bytes {
                    // HF adds the bytes before an unknown token still pending.
                    syms.extend(char_bytes.iter().map(|&b| c.byte_tokens[b as usize]));
                } else {
                    if pending_unk && !c.fuse_unk {
                        syms.push(c.unk);
                    }
                    pending_unk = true;
                }
                i += len;
                continue;
            }
            if pending_unk {
                syms.push(c.unk);
                pending_unk = false;
            }
            let is_space = sym == c.space;
            let cut = match c.split {
                SpaceSplit::Before => is_space && !after_space,
                SpaceSplit::After => !is_space && after_space,
                SpaceSplit::Never => false,
            };
            if cut {
                self.merge_word(&bytes[word..i], &mut syms, out);
                word = i;
            }
            after_space = is_space;
            syms.push(sym);
            i += len;
        }
        if pending_unk {
            syms.push(c.unk);
        }
        self.merge_word(&bytes[word..], &mut syms, out);
    }

    /// Appends the ids of one word (its text and its symbols), and empties `syms`.
    #[inline]
    fn merge_word(&self, text: &[u8], syms: &mut Vec<u32>, out: &mut Vec<u32>) {
        match syms.len() {
            0 => return,
            1 => out.push(syms[0]),
            n => {
                if let Some(&id) = self.token_to_id.get(text) {
                    if self.atomic[id as usize] {
                        out.push(id);
                        syms.clear();
                        return;
                    }
                }
                if n <= SHORT_PIECE {
                    let mut stack = [0u32; SHORT_PIECE];
                    stack[..n].copy_from_slice(syms);
                    self.merge_short(&mut stack, n, out);
                } else {
                    self.merge_long(syms, out);
                }
            }
        }
        syms.clear();
    }

    /// sentencepiece's `bpe::Model::SampleEncode` (without dropout) and the processor's unknown
    /// handling, as written there, over the whole text (see the module notes).
    fn encode_exact(&self, c: &CharLevel, text: &str, out: &mut Vec<u32>) {
        let tables = c.exact.as_deref().expect("exact tables");
        let bytes = text.as_bytes();
        let mut symbols: Vec<ExactSymbol> = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let matched = c
                .user_defined
                .as_ref()
                .and_then(|(ud, _)| ud.longest_prefix(&text[i..]));
            let (len, freeze) = match matched {
                Some((len, _)) => (len, true),
                None => (utf8_len(bytes[i]).min(bytes.len() - i), false),
            };
            let index = symbols.len();
            symbols.push(ExactSymbol {
                start: i,
                len,
                prev: if index == 0 { END } else { index - 1 },
                next: if i + len < bytes.len() {
                    index + 1
                } else {
                    END
                },
                freeze,
            });
            i += len;
        }
        if symbols.is_empty() {
            return;
        }
        let mut proposals = Proposals {
            text,
            tables,
            pieces: &c.pieces,
            agenda: BinaryHeap::new(),
            rev_merge: FxHashMap::default(),
        };
        for right in 1..symbols.len() {
            proposals.propose(&symbols, right - 1, right);
        }
        while let Some(top) = proposals.agenda.pop() {
            let (l, r) = (symbols[top.left], symbols[top.right]);
            if l.len == 0 || r.len == 0 || l.len + r.len != top.size {
                continue;
            }
            symbols[top.left].len += r.len;
            symbols[top.left].next = r.next;
            if r.next != END {
                symbols[r.next].prev = top.left;
            }
            symbols[top.right].len = 0;
            let prev = symbols[top.left].prev;
            proposals.propose(&symbols, prev, top.left);
            let next = symbols[top.left].next;
            proposals.propose(&symbols, top.left, next);
        }
        let rev_merge = proposals.rev_merge;

        // The processor: unknown pieces in bytes, or runs of them fused.
        let mut prev_unknown = false;
        let mut emit = |w: &str, id: u32| {
            let unknown = id == c.unk;
            if unknown && c.byte_fallback {
                out.extend(w.bytes().map(|b| c.byte_tokens[b as usize]));
            } else if !(unknown && prev_unknown) {
                out.push(id);
            }
            prev_unknown = unknown;
        };
        fn resegment<'t>(
            w: &'t str,
            c: &CharLevel,
            tables: &ExactTables,
            rev_merge: &FxHashMap<&'t str, (&'t str, &'t str)>,
            emit: &mut dyn FnMut(&str, u32),
        ) {
            let id = tables.mergeable.get(w).copied().unwrap_or(c.unk);
            let unused = c
                .pieces
                .get(id as usize)
                .is_some_and(|p| p.kind == PieceKind::Unused);
            match rev_merge.get(w) {
                Some(&(l, r)) if unused => {
                    resegment(l, c, tables, rev_merge, emit);
                    resegment(r, c, tables, rev_merge, emit);
                }
                _ => emit(w, id),
            }
        }
        let mut index = 0;
        while index != END {
            let s = symbols[index];
            resegment(
                &text[s.start..s.start + s.len],
                c,
                tables,
                &rev_merge,
                &mut emit,
            );
            index = s.next;
        }
    }
}

/// No symbol (sentencepiece's -1).
const END: usize = usize::MAX;

/// A symbol of [`BpeModel::encode_exact`]: a stretch of the text, its neighbours, and whether
/// it is a user-defined piece (never merged). A merged-away symbol has length 0.
#[derive(Clone, Copy)]
struct ExactSymbol {
    start: usize,
    len: usize,
    prev: usize,
    next: usize,
    freeze: bool,
}

/// A proposed merge: the best score first, then the leftmost.
struct Candidate {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl PartialEq for Candidate {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Candidate {}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Candidate {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // Scores are finite (checked at load); -0.0 and 0.0 are equal, as in C++.
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(other.left.cmp(&self.left))
    }
}

/// sentencepiece's agenda and `rev_merge` while [`BpeModel::encode_exact`] runs.
struct Proposals<'t> {
    text: &'t str,
    tables: &'t ExactTables,
    pieces: &'t [Piece],
    agenda: BinaryHeap<Candidate>,
    /// For each UNUSED piece proposed, the two symbols it was last proposed from.
    rev_merge: FxHashMap<&'t str, (&'t str, &'t str)>,
}

impl<'t> Proposals<'t> {
    /// sentencepiece's `MaybeAddNewSymbolPair`.
    fn propose(&mut self, symbols: &[ExactSymbol], left: usize, right: usize) {
        if left == END || right == END || symbols[left].freeze || symbols[right].freeze {
            return;
        }
        let (l, r) = (symbols[left], symbols[right]);
        let text = self.text;
        let piece = &text[l.start..l.start + l.len + r.len];
        let Some(&id) = self.tables.mergeable.get(piece) else {
            return;
        };
        let p = &self.pieces[id as usize];
        self.agenda.push(Candidate {
            score: p.score as f32,
            left,
            right,
            size: piece.len(),
        });
        if p.kind == PieceKind::Unused {
            self.rev_merge.insert(
                piece,
                (
                    &text[l.start..l.start + l.len],
                    &text[r.start..r.start + r.len],
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::pieces::byte_piece;
    use crate::util::SplitMix64;

    const ALPHABET: [&str; 6] = ["a", "b", "c", "d", "▁", "日"];

    /// A sentencepiece model grown as its trainer grows one: characters, then concatenations of
    /// two pieces; scores drawn from a few values, so that ties are common.
    /// How a grown model's pieces hold `▁`: a run at the start, a run at the end, anywhere.
    #[derive(Clone, Copy, PartialEq)]
    enum Style {
        Prefix,
        Suffix,
        Crossing,
    }

    fn grown_model(rng: &mut SplitMix64, style: Style, user_defined: bool) -> Vec<Piece> {
        let mut pieces = vec![
            Piece::new("<unk>", 0.0, PieceKind::Unknown),
            Piece::new("<s>", 0.0, PieceKind::Control),
        ];
        if user_defined {
            pieces.push(Piece::new("ab", 0.0, PieceKind::UserDefined));
            pieces.push(Piece::new("c▁d", 0.0, PieceKind::UserDefined));
        }
        let first_char = pieces.len();
        for c in ALPHABET {
            pieces.push(Piece::new(c, -100.0, PieceKind::Normal));
        }
        for _ in 0..40 {
            let n = pieces.len() - first_char;
            let l = &pieces[first_char + rng.next_u64() as usize % n].text;
            let r = &pieces[first_char + rng.next_u64() as usize % n].text;
            let joined = format!("{l}{r}");
            let body = match style {
                Style::Prefix => joined.trim_start_matches('▁'),
                Style::Suffix => joined.trim_end_matches('▁'),
                Style::Crossing => "",
            };
            if joined.chars().count() > 6
                || body.contains('▁')
                || pieces.iter().any(|p| p.text == joined)
            {
                continue;
            }
            let score = -((rng.next_u64() % 5) as f64);
            pieces.push(Piece::new(joined, score, PieceKind::Normal));
        }
        pieces
    }

    fn random_text(rng: &mut SplitMix64, max: usize) -> String {
        let extra = ["z", "é", " ", "ab", "c▁d"];
        (0..rng.next_u64() as usize % max)
            .map(|_| match rng.next_u64() % 8 {
                0 => extra[rng.next_u64() as usize % extra.len()],
                _ => ALPHABET[rng.next_u64() as usize % ALPHABET.len()],
            })
            .collect()
    }

    /// The same model encoded by [`BpeModel::encode_exact`].
    fn exact(model: &BpeModel) -> BpeModel {
        let mut exact = model.clone();
        let c = exact.chars.as_mut().expect("character level");
        let mergeable = c
            .pieces
            .iter()
            .enumerate()
            .filter(|(_, p)| !matches!(p.kind, PieceKind::Unknown | PieceKind::Control))
            .map(|(id, p)| (p.text.as_str().into(), id as u32))
            .collect();
        c.exact = Some(Box::new(ExactTables { mergeable }));
        exact
    }

    #[test]
    fn word_by_word_walk_agrees_with_the_exact_port() {
        let mut rng = SplitMix64::new(7);
        let mut splits = [0usize; 3];
        for round in 0..300 {
            let style = [Style::Prefix, Style::Suffix, Style::Crossing][round % 3];
            let crossing = style == Style::Crossing;
            let pieces = grown_model(&mut rng, style, round % 2 == 0);
            let byte_fallback = round % 4 == 1;
            let mut pieces = pieces;
            if byte_fallback {
                pieces.extend((0..=255u8).map(|b| Piece::new(byte_piece(b), 0.0, PieceKind::Byte)));
            }
            let model = BpeModel::from_sentencepiece(pieces, byte_fallback, "test").unwrap();
            let c = model.chars.as_deref().unwrap();
            assert!(c.exact.is_none());
            splits[c.split as usize] += 1;
            let reference = exact(&model);
            for _ in 0..40 {
                // Long texts too, past the stack loop's limit, when words are not cut.
                let text = random_text(&mut rng, if crossing { 300 } else { 40 });
                let (mut fast, mut slow) = (Vec::new(), Vec::new());
                model.encode_piece(text.as_bytes(), &mut fast);
                reference.encode_piece(text.as_bytes(), &mut slow);
                assert_eq!(fast, slow, "round {round}, text {text:?}");
            }
        }
        // Both the cut and the uncut walks ran.
        assert!(splits.iter().all(|&n| n > 0), "{splits:?}");
    }

    #[test]
    fn models_with_unused_pieces_or_orphan_characters_take_the_exact_port() {
        let base = vec![
            Piece::new("<unk>", 0.0, PieceKind::Unknown),
            Piece::new("a", -10.0, PieceKind::Normal),
            Piece::new("b", -10.0, PieceKind::Normal),
        ];
        let mut unused = base.clone();
        unused.push(Piece::new("ab", -1.0, PieceKind::Unused));
        let m = BpeModel::from_sentencepiece(unused, false, "t").unwrap();
        assert!(m.chars.as_deref().unwrap().exact.is_some());
        // An UNUSED piece is merged into and split back: "ab" comes out as "a", "b".
        let mut out = Vec::new();
        m.encode_piece("abz".as_bytes(), &mut out);
        assert_eq!(out, [1, 2, 0]);
        let mut orphan = base;
        orphan.push(Piece::new("ax", -1.0, PieceKind::Normal));
        let m = BpeModel::from_sentencepiece(orphan, false, "t").unwrap();
        assert!(m.chars.as_deref().unwrap().exact.is_some());
    }
}
