//! What every model and trainer is: the [`Model`] trait the tokenizer encodes through, the
//! [`Trainer`] trait, and the bound every vocabulary's ids are checked against ([`id_limit`]).
//!
//! Below the model families (each implements these) and below [`crate::models::ModelWrapper`],
//! which holds one of them: the families import this module, never the folder's `mod.rs`.

use crate::corpus::{CorpusOptions, CorpusReport};
use crate::error::{shown, Error, Result};
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

/// Ids above this many past twice the vocabulary size are refused (see [`id_limit`]).
pub const ID_SLACK: usize = 1 << 20;

/// One past the largest token id a vocabulary of `tokens` tokens (ordinary and added) may use:
/// `2 * tokens + 2^20`, and never past `u32::MAX`, which no id may be.
///
/// Ids index dense tables (id -> token here, id -> int object in the binding), so an id far
/// past the vocabulary would make a file of a few bytes allocate gigabytes. Real vocabularies
/// are dense or nearly so (cl100k: 100,256 ranks, special tokens up to 100,276); the slack
/// leaves room for special tokens put at round numbers past a small vocabulary.
pub fn id_limit(tokens: usize) -> u32 {
    tokens
        .saturating_mul(2)
        .saturating_add(ID_SLACK)
        .min(u32::MAX as usize) as u32
}

/// The message for an id at or past [`id_limit`], naming the id and the limit.
pub(crate) fn id_past_limit(what: &str, id: u64, tokens: usize) -> String {
    format!(
        "{what} has id {id}, far past the vocabulary size {tokens} (ids must be below {})",
        id_limit(tokens)
    )
}

/// Checks the largest id of a vocabulary of `tokens` tokens against [`id_limit`], before
/// tables are sized by it; `token` is the text that has that id, for the message.
pub(crate) fn check_id_bound(token: &str, max_id: u32, tokens: usize, source: &str) -> Result<()> {
    if max_id >= id_limit(tokens) {
        return Err(Error::format(
            source,
            id_past_limit(&format!("token {}", shown(token)), max_id.into(), tokens),
        ));
    }
    Ok(())
}

/// What a tokenization model offers the tokenizer.
pub trait Model {
    /// HF's `model.type` (`"BPE"`, `"WordPiece"`, `"Unigram"`).
    fn kind(&self) -> &'static str;
    /// Appends the ids of one pre-tokenized piece to `out`.
    fn encode_piece(&self, piece: &str, out: &mut Vec<u32>);
    /// One past the largest ordinary token id.
    fn id_bound(&self) -> usize;
    /// The token as the model's files spell it (byte-level text for byte-level BPE).
    fn id_to_token(&self, id: u32) -> Option<Cow<'_, str>>;
    /// Inverse of [`Model::id_to_token`].
    fn token_to_id(&self, token: &str) -> Option<u32>;
    /// The bytes the token stands for (for WordPiece, its text, prefix included).
    fn token_bytes(&self, id: u32) -> Option<&[u8]>;
    /// The id of the token standing for exactly these bytes.
    fn bytes_to_id(&self, bytes: &[u8]) -> Option<u32>;
}

/// What every trainer offers: count a corpus (texts or files, as often as needed), then learn.
///
/// As HF's `Trainer::train` does, training returns what was learned, the model's vocabulary
/// and its special tokens, and builds no tokenizer: [`crate::assembly`] puts the tokenizer
/// around it (pre-tokenizer, normalizer, decoder), so the models sit below the tokenizer that
/// holds them.
pub trait Trainer: Send {
    /// What training returns: the model, or what it is made of, and its special tokens.
    type Trained;
    /// Counts `texts`, each one sequence.
    fn feed(&mut self, texts: &[&str]) -> Result<()>;
    /// Streams and counts `paths` (see [`crate::corpus`]).
    fn feed_files(&mut self, paths: &[PathBuf], opts: &CorpusOptions) -> Result<CorpusReport>;
    /// Learns from everything fed so far.
    fn train(self) -> Result<Self::Trained>;
}

/// The next model's cache id; 0 is kept for "not cached". One counter for the per-thread
/// caches of every family (BPE's piece cache, Unigram's word cache): an entry tagged with its
/// model's id is never an answer for another model.
static NEXT_CACHE_ID: AtomicU32 = AtomicU32::new(1);

/// A cache id for a new model: unique in the process, or 0 (no caching) once they run out.
pub(crate) fn new_cache_id() -> u32 {
    NEXT_CACHE_ID
        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
            (n != u32::MAX).then_some(n + 1)
        })
        .unwrap_or(0)
}
