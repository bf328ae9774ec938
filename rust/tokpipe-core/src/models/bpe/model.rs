//! The byte-level BPE encoder.
//!
//! A model is a vocabulary (token id -> bytes) plus a merge table: for a pair of adjacent
//! tokens `(left, right)` the table gives the merge's priority and the id of the token it makes.
//! Encoding a piece starts from its bytes and repeatedly applies the lowest-priority merge
//! among adjacent pairs, the leftmost on ties.
//!
//! Two published rule sets are expressed as two ways of filling that one table:
//! - merges files (GPT-2 `vocab.bpe`, HF `tokenizer.json`): one entry per listed merge, the
//!   priority is the merge's line number ([`MergeRule::Listed`]);
//! - tiktoken ranks: tiktoken merges *any* adjacent pair whose concatenation is a token, with
//!   the token's rank as priority, and returns a piece that is itself a token as that token
//!   without merging ([`MergeRule::Ranks`]). Listing every split of every token reproduces
//!   that exactly with the same pair-driven loop.
//!
//! A piece that is itself a token is looked up directly when that gives the same answer as
//! merging ("atomic" tokens). Under tiktoken ranks every token is atomic by definition; under
//! listed merges we check each token once at load time. Most pieces of real text are whole
//! tokens, so this lookup is the common path.
//!
//! The same model, with a character alphabet instead of bytes, is sentencepiece's BPE and HF's
//! BPE over characters (Llama-1/2, Mistral): see [`super::chars`].
//!
//! Byte-level pieces are encoded through a bounded per-thread cache of piece -> ids
//! ([`super::piece_cache`], via [`BpeModel::with_piece_cache`]); the ids are the same. The
//! cache's probes, and the misses' merges, are made a batch at a time so that their loads from
//! memory overlap ([`PieceEncoder`], module `piece_encoder`).
//!
//! (Over 500 lines: 78 of them are its unit tests; the rest is one model: its merge table, built
//! for both rule sets, the short and long merge loops that read it, and the cached entry point.)

pub(super) use super::pair_table::pair_key;
use super::pair_table::PairTable;
use super::piece_cache::{key_of, PieceCache, MAX_PIECE};
pub use super::piece_encoder::PieceEncoder;
use super::piece_encoder::Scratch;
use super::short_tokens::ShortTokens;
use crate::error::{shown, Error, Result};
use rustc_hash::FxHashMap;
use std::collections::BinaryHeap;

/// How the merge table was defined; decides the whole-piece shortcut and how we save.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MergeRule {
    /// An ordered list of merges (GPT-2, HF tokenizer.json, our trainer).
    Listed,
    /// tiktoken's rank semantics (any split, priority = rank of the result, pieces that are
    /// tokens are returned whole).
    Ranks,
    /// sentencepiece's BPE: any split whose halves are pieces, priority = the rank of the
    /// result's score (equal scores, equal priority: the leftmost pair goes first).
    Scores,
}

/// Pieces up to this many bytes use the simple quadratic loop (fast for short pieces); longer
/// ones use the heap, which keeps 1 MB pieces at O(n log n).
pub(super) const SHORT_PIECE: usize = 96;

/// `byte_ids` entry of a byte the vocabulary lacks.
pub(super) const NO_TOKEN: u32 = u32::MAX;

#[derive(Clone, Debug)]
pub struct BpeModel {
    /// id -> token bytes; `None` for ids that are not ordinary tokens (holes, special tokens).
    pub(super) tokens: Vec<Option<Box<[u8]>>>,
    pub(super) token_to_id: FxHashMap<Box<[u8]>, u32>,
    pub(super) byte_ids: [u32; 256],
    /// (left, right) -> (priority, merged id) ([`super::pair_table`]).
    pub(super) merges: PairTable,
    /// Listed merges in priority order (only kept for `MergeRule::Listed`, for saving).
    pub(super) merge_list: Vec<(u32, u32)>,
    /// Whether looking a whole piece up gives the same ids as merging it.
    pub(super) atomic: Vec<bool>,
    /// The atomic tokens of 2 to 15 bytes, for byte-level models ([`super::short_tokens`]).
    pub(super) short_tokens: ShortTokens,
    pub(super) rule: MergeRule,
    /// A piece that is a token is returned whole (tiktoken; HF `ignore_merges`).
    pub(super) ignore_merges: bool,
    /// The character alphabet of a character-level model; `None` for byte-level BPE.
    pub(super) chars: Option<Box<super::chars::CharLevel>>,
    /// This model's tag in the per-thread piece cache ([`super::piece_cache`]); 0: not cached.
    /// A clone keeps it, as it encodes every piece the same way.
    pub(super) cache_id: u32,
}

#[inline]
/// The merge table of an ordered merge list: for each pair, its priority (its position; a
/// repeated pair keeps its later one) and the token it makes, which must be in the vocabulary.
pub(super) fn merge_table(
    tokens: &[Option<Box<[u8]>>],
    token_to_id: &FxHashMap<Box<[u8]>, u32>,
    merge_list: &[(u32, u32)],
    source: &str,
) -> Result<FxHashMap<u64, (u32, u32)>> {
    let mut merges = FxHashMap::default();
    for (prio, &(l, r)) in merge_list.iter().enumerate() {
        let get = |id: u32| tokens.get(id as usize).and_then(|t| t.as_deref());
        let (Some(lb), Some(rb)) = (get(l), get(r)) else {
            return Err(Error::format(
                source,
                format!("merge #{prio} refers to unknown token id {l} or {r}"),
            ));
        };
        let joined = [lb, rb].concat();
        let Some(&new_id) = token_to_id.get(joined.as_slice()) else {
            return Err(Error::format(
                source,
                format!(
                    "merge #{prio} ({} + {}) makes a token missing from the vocabulary",
                    shown(&String::from_utf8_lossy(lb)),
                    shown(&String::from_utf8_lossy(rb))
                ),
            ));
        };
        merges.insert(pair_key(l, r), (prio as u32, new_id));
    }
    Ok(merges)
}

impl BpeModel {
    /// Builds a model from tiktoken ranks: `(token bytes, rank)`; the rank is the token id.
    pub fn from_ranks(ranks: Vec<(Vec<u8>, u32)>, source: &str) -> Result<Self> {
        let (tokens, token_to_id, byte_ids) = Self::index_vocab(ranks, source)?;
        let all: Vec<(&[u8], u32)> = token_to_id.iter().map(|(t, &id)| (&**t, id)).collect();
        let mut merges = FxHashMap::default();
        for (id, l, r) in super::splits::two_token_splits(&all, |b| token_to_id.get(b).copied()) {
            merges.insert(pair_key(l, r), (id, id));
        }
        let atomic = vec![true; tokens.len()];
        let mut model = BpeModel {
            tokens,
            token_to_id,
            byte_ids,
            merges: PairTable::new(&merges),
            merge_list: Vec::new(),
            atomic,
            short_tokens: ShortTokens::default(),
            rule: MergeRule::Ranks,
            ignore_merges: true,
            chars: None,
            cache_id: crate::models::base::new_cache_id(),
        };
        model.index_short_tokens();
        Ok(model)
    }

    /// Fills [`BpeModel::short_tokens`] from the atomic tokens (byte-level models).
    fn index_short_tokens(&mut self) {
        let atomic = &self.atomic;
        let short = ShortTokens::new(
            self.tokens()
                .filter(|&(id, _)| atomic[id as usize])
                .map(|(id, bytes)| (bytes, id)),
        );
        self.short_tokens = short;
    }

    /// Builds a model from a vocabulary and an ordered merge list of `(left, right)` token ids.
    /// Every merge's concatenation must be in the vocabulary. A repeated pair keeps its later
    /// priority, as HF `tokenizers` does. `ignore_merges` is HF's flag of that name: a piece
    /// that is itself a token is returned whole, as tiktoken does.
    pub fn from_merges(
        vocab: Vec<(Vec<u8>, u32)>,
        merge_list: Vec<(u32, u32)>,
        ignore_merges: bool,
        source: &str,
    ) -> Result<Self> {
        let (tokens, token_to_id, byte_ids) = Self::index_vocab(vocab, source)?;
        let merges = merge_table(&tokens, &token_to_id, &merge_list, source)?;
        let mut model = BpeModel {
            atomic: vec![false; tokens.len()],
            short_tokens: ShortTokens::default(),
            tokens,
            token_to_id,
            byte_ids,
            merges: PairTable::new(&merges),
            merge_list,
            rule: MergeRule::Listed,
            ignore_merges,
            chars: None,
            cache_id: crate::models::base::new_cache_id(),
        };
        if ignore_merges {
            model.atomic = model.tokens.iter().map(Option::is_some).collect();
            model.index_short_tokens();
            return Ok(model);
        }
        // A token is atomic when merging its own bytes gives back exactly that token.
        let atomic: Vec<bool> = {
            use rayon::prelude::*;
            let model_ref = &model;
            (0..model.tokens.len())
                .into_par_iter()
                .map(|id| match &model_ref.tokens[id] {
                    Some(bytes) => {
                        let mut out = Vec::with_capacity(4);
                        model_ref.merge_piece(bytes, &mut out);
                        out.len() == 1 && out[0] == id as u32
                    }
                    None => false,
                })
                .collect()
        };
        model.atomic = atomic;
        model.index_short_tokens();
        Ok(model)
    }

    #[allow(clippy::type_complexity)]
    fn index_vocab(
        vocab: Vec<(Vec<u8>, u32)>,
        source: &str,
    ) -> Result<(
        Vec<Option<Box<[u8]>>>,
        FxHashMap<Box<[u8]>, u32>,
        [u32; 256],
    )> {
        if vocab.is_empty() {
            return Err(Error::format(source, "the vocabulary is empty"));
        }
        let (last, max_id) = vocab.iter().max_by_key(|(_, id)| *id).expect("not empty");
        crate::models::base::check_id_bound(
            &String::from_utf8_lossy(last),
            *max_id,
            vocab.len(),
            source,
        )?;
        let mut tokens: Vec<Option<Box<[u8]>>> = vec![None; *max_id as usize + 1];
        let mut token_to_id = FxHashMap::with_capacity_and_hasher(vocab.len(), Default::default());
        for (bytes, id) in vocab {
            let bytes: Box<[u8]> = bytes.into_boxed_slice();
            if let Some(prev) = token_to_id.insert(bytes.clone(), id) {
                return Err(Error::format(
                    source,
                    format!(
                        "token {} appears twice (ids {prev} and {id})",
                        shown(&String::from_utf8_lossy(&bytes))
                    ),
                ));
            }
            if tokens[id as usize].is_some() {
                return Err(Error::format(
                    source,
                    format!("id {id} is given to two tokens"),
                ));
            }
            tokens[id as usize] = Some(bytes);
        }
        // A vocabulary may leave out bytes that never occur in UTF-8 text (GPT-NeoX has no
        // 0xC0, 0xC1, 0xF5..0xFF); such bytes are skipped when met, as HF does without an
        // unknown token.
        let mut byte_ids = [NO_TOKEN; 256];
        for b in 0..=255u8 {
            if let Some(&id) = token_to_id.get(&[b][..]) {
                byte_ids[b as usize] = id;
            }
        }
        if byte_ids.iter().filter(|&&id| id != NO_TOKEN).count() < 128 {
            return Err(Error::format(
                source,
                "not a byte-level vocabulary: fewer than 128 of the 256 single bytes are tokens",
            ));
        }
        Ok((tokens, token_to_id, byte_ids))
    }

    pub fn rule(&self) -> MergeRule {
        self.rule
    }

    /// Whether the alphabet is the 256 bytes (GPT-2, tiktoken) rather than characters.
    pub fn is_byte_level(&self) -> bool {
        self.chars.is_none()
    }

    /// Whether a piece that is itself a token is returned whole without merging.
    pub fn ignore_merges(&self) -> bool {
        self.ignore_merges
    }

    /// One past the largest ordinary token id.
    pub fn id_bound(&self) -> usize {
        self.tokens.len()
    }

    /// Number of ordinary tokens.
    pub fn len(&self) -> usize {
        self.token_to_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.token_to_id.is_empty()
    }

    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.tokens.get(id as usize).and_then(|t| t.as_deref())
    }

    pub fn token_id(&self, bytes: &[u8]) -> Option<u32> {
        self.token_to_id.get(bytes).copied()
    }

    /// `(id, bytes)` of every ordinary token in id order.
    pub fn tokens(&self) -> impl Iterator<Item = (u32, &[u8])> {
        self.tokens
            .iter()
            .enumerate()
            .filter_map(|(id, t)| t.as_deref().map(|t| (id as u32, t)))
    }

    /// The merges to write into a merges file, in priority order. For a model loaded from
    /// tiktoken ranks these are all splits of every token, ordered by the resulting rank.
    pub fn merge_list(&self) -> Vec<(u32, u32)> {
        match self.rule {
            MergeRule::Listed => self.merge_list.clone(),
            MergeRule::Scores => self.scored_merge_list(),
            MergeRule::Ranks => {
                let mut all: Vec<(u32, u32, u32)> = self
                    .merges
                    .iter()
                    .map(|(k, (prio, _))| (prio, (k >> 32) as u32, k as u32))
                    .collect();
                all.sort_unstable();
                all.into_iter().map(|(_, l, r)| (l, r)).collect()
            }
        }
    }

    /// Appends the ids of one piece to `out` (for a character-level model, `piece` is text).
    #[inline]
    pub fn encode_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        if let Some(chars) = &self.chars {
            return self.encode_chars(chars, piece, out);
        }
        if piece.len() == 1 {
            let id = self.byte_ids[piece[0] as usize];
            if id != NO_TOKEN {
                out.push(id);
            }
            return;
        }
        // (An empty piece, possible from a custom pattern, goes on to the map and gets no ids.)
        if (2..=MAX_PIECE).contains(&piece.len()) {
            return self.encode_short(key_of(piece), piece, out);
        }
        match self.atomic_token(piece) {
            Some(id) => out.push(id),
            None => self.merge_piece(piece, out),
        }
    }

    /// Runs `f` with an encoder of pieces for this model that appends their ids to `out`
    /// through this thread's piece cache (module `piece_cache`): the same ids as
    /// [`BpeModel::encode_piece`] on each piece in turn, for a whole document's pieces at the
    /// cost of one thread-local access. Every piece given to the encoder is in `out` when this
    /// returns. The pieces are expected to be slices of `text`, whose bytes give their cache
    /// keys the fast way; another piece gets the same ids, a little slower.
    #[inline]
    pub fn with_piece_cache<'t, R>(
        &self,
        text: &'t [u8],
        out: &mut Vec<u32>,
        f: impl FnOnce(&mut PieceEncoder<'_, '_, '_, 't>) -> R,
    ) -> R {
        let run = |cache: Option<(&mut PieceCache, &mut Scratch)>| {
            let mut encoder = PieceEncoder::new(self, text, cache, out);
            let result = f(&mut encoder);
            encoder.flush();
            result
        };
        if self.cache_id == 0 || self.chars.is_some() {
            return run(None);
        }
        super::piece_cache::with_thread_cache(|cache| match cache {
            Some(cache) => {
                super::piece_encoder::with_scratch(|scratch| run(Some((cache, scratch))))
            }
            None => run(None),
        })
    }

    /// The id of `piece` when it is an atomic token (looked up whole, not merged).
    #[inline(always)]
    pub(super) fn atomic_token(&self, piece: &[u8]) -> Option<u32> {
        let &id = self.token_to_id.get(piece)?;
        self.atomic[id as usize].then_some(id)
    }

    /// A byte-level piece of 2 to `MAX_PIECE` bytes, of key `key`: its id when it is an atomic
    /// token, else the merge loop's ids.
    #[inline(always)]
    pub(super) fn encode_short(&self, key: u128, piece: &[u8], out: &mut Vec<u32>) {
        match self.short_tokens.get(key) {
            Some(id) => out.push(id),
            None => self.merge_piece(piece, out),
        }
    }

    #[inline(always)]
    pub(super) fn merge_of(&self, left: u32, right: u32) -> Option<(u32, u32)> {
        self.merges.get(left, right)
    }

    /// Runs the merge loop over `piece`'s bytes (no whole-piece lookup).
    fn merge_piece(&self, piece: &[u8], out: &mut Vec<u32>) {
        let byte_id = |&b: &u8| self.byte_ids[b as usize];
        if piece.len() <= SHORT_PIECE {
            let mut syms = [0u32; SHORT_PIECE];
            let mut n = 0;
            for id in piece.iter().map(byte_id).filter(|&id| id != NO_TOKEN) {
                syms[n] = id;
                n += 1;
            }
            self.merge_short(&mut syms, n, out)
        } else {
            let mut syms: Vec<u32> = piece
                .iter()
                .map(byte_id)
                .filter(|&id| id != NO_TOKEN)
                .collect();
            self.merge_long(&mut syms, out)
        }
    }

    /// Quadratic in the piece length but with tiny constants, and no allocation: the first
    /// `n` symbols, and the priority and result of the pair starting at each, in stack arrays
    /// (most pieces are words of a few bytes, where a heap would cost more than it saves).
    pub(super) fn merge_short(
        &self,
        syms: &mut [u32; SHORT_PIECE],
        mut n: usize,
        out: &mut Vec<u32>,
    ) {
        let mut prio = [u32::MAX; SHORT_PIECE];
        let mut merged = [0u32; SHORT_PIECE];
        let pair = |syms: &[u32; SHORT_PIECE], i: usize| self.merges.pair(syms[i], syms[i + 1]);
        for i in 0..n.saturating_sub(1) {
            (prio[i], merged[i]) = pair(syms, i);
        }
        while n > 1 {
            // The lowest priority, leftmost on ties.
            let mut at = 0;
            for i in 1..n - 1 {
                if prio[i] < prio[at] {
                    at = i;
                }
            }
            if prio[at] == u32::MAX {
                break;
            }
            syms[at] = merged[at];
            syms.copy_within(at + 2..n, at + 1);
            prio.copy_within(at + 1..n - 1, at);
            merged.copy_within(at + 1..n - 1, at);
            n -= 1;
            if at + 1 < n {
                (prio[at], merged[at]) = pair(syms, at);
            }
            if at > 0 {
                (prio[at - 1], merged[at - 1]) = pair(syms, at - 1);
            }
        }
        out.extend_from_slice(&syms[..n]);
    }

    /// O(n log n): symbols in a doubly linked list over the byte positions, candidate merges
    /// in a min-heap keyed by (priority, position); stale heap entries are skipped on pop.
    pub(super) fn merge_long(&self, syms: &mut [u32], out: &mut Vec<u32>) {
        let n = syms.len();
        if n == 0 {
            return;
        }
        let mut prev: Vec<usize> = (0..n).map(|i| i.wrapping_sub(1)).collect();
        let mut next: Vec<usize> = (1..=n).collect();
        let mut alive = vec![true; n];
        // Reverse((priority, left position, merged id, left and right symbol ids at push)):
        // the lowest priority first, then the leftmost, as the rank rule requires.
        type Candidate = std::cmp::Reverse<(u32, usize, u32, u32, u32)>;
        let mut heap: BinaryHeap<Candidate> = BinaryHeap::new();
        for i in 0..n - 1 {
            if let Some((prio, id)) = self.merge_of(syms[i], syms[i + 1]) {
                heap.push(std::cmp::Reverse((prio, i, id, syms[i], syms[i + 1])));
            }
        }
        while let Some(std::cmp::Reverse((prio, i, id, left, right))) = heap.pop() {
            let j = next[i];
            // Stale: the left symbol was merged away or changed, or its right neighbour did.
            if !alive[i] || j >= n || syms[i] != left || syms[j] != right {
                continue;
            }
            syms[i] = id;
            alive[j] = false;
            let k = next[j];
            next[i] = k;
            if k < n {
                prev[k] = i;
                if let Some((p, nid)) = self.merge_of(id, syms[k]) {
                    heap.push(std::cmp::Reverse((p, i, nid, id, syms[k])));
                }
            }
            let h = prev[i];
            if h < n {
                if let Some((p, nid)) = self.merge_of(syms[h], id) {
                    heap.push(std::cmp::Reverse((p, h, nid, syms[h], id)));
                }
            }
            let _ = prio;
        }
        let mut i = 0;
        while i < n {
            out.push(syms[i]);
            i = next[i];
        }
    }
}

impl crate::models::base::Model for BpeModel {
    fn kind(&self) -> &'static str {
        "BPE"
    }
    #[inline]
    fn encode_piece(&self, piece: &str, out: &mut Vec<u32>) {
        BpeModel::encode_piece(self, piece.as_bytes(), out)
    }
    fn id_bound(&self) -> usize {
        BpeModel::id_bound(self)
    }
    /// Byte-level text (`"Ġthe"`), as HF files spell tokens; a character-level model's tokens
    /// as they are.
    fn id_to_token(&self, id: u32) -> Option<std::borrow::Cow<'_, str>> {
        let bytes = BpeModel::token_bytes(self, id)?;
        Some(match self.chars {
            Some(_) => std::borrow::Cow::Borrowed(std::str::from_utf8(bytes).ok()?),
            None => std::borrow::Cow::Owned(crate::pre_tokenizers::byte_level::encode(bytes)),
        })
    }
    fn token_to_id(&self, token: &str) -> Option<u32> {
        match self.chars {
            Some(_) => self.token_id(token.as_bytes()),
            None => {
                crate::pre_tokenizers::byte_level::decode(token).and_then(|b| self.token_id(&b))
            }
        }
    }
    fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        BpeModel::token_bytes(self, id)
    }
    fn bytes_to_id(&self, bytes: &[u8]) -> Option<u32> {
        self.token_id(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_vocab() -> Vec<(Vec<u8>, u32)> {
        (0..=255u8).map(|b| (vec![b], b as u32)).collect()
    }

    #[test]
    fn long_and_short_merge_loops_agree() {
        // "ab" < "bc" < "abc" < "aa" so the outcome depends on priority and position.
        let mut vocab = bytes_vocab();
        for (i, t) in ["ab", "bc", "abc", "aa", "aaaa"].iter().enumerate() {
            vocab.push((t.as_bytes().to_vec(), 256 + i as u32));
        }
        let model = BpeModel::from_ranks(vocab, "test").unwrap();
        let text: Vec<u8> = b"abcaabcaaaabbcaaaaaaaaabc".repeat(20);
        for len in 0..=SHORT_PIECE {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            let mut syms: Vec<u32> = text[..len].iter().map(|&b| b as u32).collect();
            let mut stack = [0u32; SHORT_PIECE];
            stack[..len].copy_from_slice(&syms);
            model.merge_short(&mut stack, len, &mut a);
            model.merge_long(&mut syms, &mut b);
            assert_eq!(a, b, "length {len}");
        }
    }

    #[test]
    fn an_id_far_past_the_vocabulary_is_refused_before_any_table_is_sized() {
        // A rank of 990 million once sized a table of 990 million entries (15.8 GB).
        let mut vocab = bytes_vocab();
        vocab.push((b"xyz".to_vec(), 990_000_000));
        let err = BpeModel::from_ranks(vocab.clone(), "x.tiktoken").unwrap_err();
        assert_eq!(
            err.to_string(),
            "x.tiktoken: token \"xyz\" has id 990000000, far past the vocabulary size 257 \
             (ids must be below 1049090)"
        );
        vocab.last_mut().unwrap().1 = 1_049_089;
        assert_eq!(
            BpeModel::from_ranks(vocab, "x").unwrap().id_bound(),
            1_049_090
        );
    }

    #[test]
    fn ranks_of_a_long_token_make_the_merges_of_its_cuts() {
        // A token of 1 MB: its two cuts into tokens are the merges that make it.
        let mut vocab = bytes_vocab();
        let long = vec![b'a'; 1 << 20];
        vocab.push((long[1..].to_vec(), 256));
        vocab.push((long.clone(), 257));
        let model = BpeModel::from_ranks(vocab, "x").unwrap();
        assert_eq!(model.merge_of(b'a' as u32, 256), Some((257, 257)));
        assert_eq!(model.merge_of(256, b'a' as u32), Some((257, 257)));
        assert_eq!(model.merges.iter().count(), 2);
        let mut out = Vec::new();
        model.encode_piece(&long, &mut out);
        assert_eq!(out, vec![257]);
    }

    #[test]
    fn a_vocabulary_without_byte_tokens_is_a_format_error() {
        let vocab: Vec<(Vec<u8>, u32)> = (0..100u8).map(|b| (vec![b], b as u32)).collect();
        let err = BpeModel::from_ranks(vocab, "x.tiktoken").unwrap_err();
        assert!(err.to_string().contains("byte-level"), "{err}");
    }

    #[test]
    fn bytes_missing_from_the_vocabulary_are_skipped() {
        let vocab: Vec<(Vec<u8>, u32)> = (0..0xC0u8).map(|b| (vec![b], b as u32)).collect();
        let model = BpeModel::from_ranks(vocab, "x").unwrap();
        let mut out = Vec::new();
        model.encode_piece(&[b'a', 0xC1, b'b'], &mut out);
        assert_eq!(out, vec![b'a' as u32, b'b' as u32]);
    }
}
