//! Tokenization models: what turns one pre-tokenized piece into ids.
//!
//! Each model has its own folder in HF `tokenizers`' layout: `model.rs` (the encoder),
//! `trainer.rs`, and how it is written to files. [`Model`] is what every model offers the
//! [`crate::Tokenizer`]; [`ModelWrapper`] holds one of them, so the tokenizer dispatches once
//! per stretch of text (a `match`, not a virtual call per piece) and byte-level BPE's hot loop
//! stays what it was. [`Trainer`] is what every trainer offers the binding and the CLI.
//! [`unigram`] is the third (sentencepiece's model).

pub mod bpe;
pub(crate) mod piece_counter;
pub mod unigram;
pub mod wordpiece;

use crate::corpus::{CorpusOptions, CorpusReport};
use crate::error::{shown, Error, Result};
use crate::tokenizer::Tokenizer;
use std::borrow::Cow;
use std::path::PathBuf;

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

/// One of the models, for static dispatch.
// BPE's inline byte table makes its variant large; a tokenizer holds one model, so boxing it
// would save nothing and add a pointer chase.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug)]
pub enum ModelWrapper {
    Bpe(bpe::BpeModel),
    WordPiece(wordpiece::WordPieceModel),
    Unigram(unigram::UnigramModel),
}

impl From<bpe::BpeModel> for ModelWrapper {
    fn from(m: bpe::BpeModel) -> Self {
        ModelWrapper::Bpe(m)
    }
}

impl From<wordpiece::WordPieceModel> for ModelWrapper {
    fn from(m: wordpiece::WordPieceModel) -> Self {
        ModelWrapper::WordPiece(m)
    }
}

impl From<unigram::UnigramModel> for ModelWrapper {
    fn from(m: unigram::UnigramModel) -> Self {
        ModelWrapper::Unigram(m)
    }
}

macro_rules! each_model {
    ($self:expr, $m:ident => $e:expr) => {
        match $self {
            ModelWrapper::Bpe($m) => $e,
            ModelWrapper::WordPiece($m) => $e,
            ModelWrapper::Unigram($m) => $e,
        }
    };
}

impl ModelWrapper {
    pub fn as_bpe(&self) -> Option<&bpe::BpeModel> {
        match self {
            ModelWrapper::Bpe(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_wordpiece(&self) -> Option<&wordpiece::WordPieceModel> {
        match self {
            ModelWrapper::WordPiece(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_unigram(&self) -> Option<&unigram::UnigramModel> {
        match self {
            ModelWrapper::Unigram(m) => Some(m),
            _ => None,
        }
    }

    /// The pieces (text, score, type) of a sentencepiece-style model: any Unigram model, and a
    /// BPE model read from a sentencepiece `.model`.
    pub fn spm_pieces(&self) -> Option<&[unigram::Piece]> {
        match self {
            ModelWrapper::Unigram(m) => Some(m.pieces()),
            ModelWrapper::Bpe(m) => m.spm_pieces(),
            ModelWrapper::WordPiece(_) => None,
        }
    }

    /// What a sentencepiece `.model` held beyond the pieces, when the model was read from one.
    pub(crate) fn spm_extras(&self) -> Option<&unigram::SpmExtras> {
        match self {
            ModelWrapper::Unigram(m) => m.spm_extras.as_deref(),
            ModelWrapper::Bpe(m) => m.spm_extras(),
            ModelWrapper::WordPiece(_) => None,
        }
    }
}

impl Model for ModelWrapper {
    fn kind(&self) -> &'static str {
        each_model!(self, m => m.kind())
    }
    fn encode_piece(&self, piece: &str, out: &mut Vec<u32>) {
        each_model!(self, m => Model::encode_piece(m, piece, out))
    }
    fn id_bound(&self) -> usize {
        each_model!(self, m => Model::id_bound(m))
    }
    fn id_to_token(&self, id: u32) -> Option<Cow<'_, str>> {
        each_model!(self, m => m.id_to_token(id))
    }
    fn token_to_id(&self, token: &str) -> Option<u32> {
        each_model!(self, m => m.token_to_id(token))
    }
    fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        each_model!(self, m => Model::token_bytes(m, id))
    }
    fn bytes_to_id(&self, bytes: &[u8]) -> Option<u32> {
        each_model!(self, m => m.bytes_to_id(bytes))
    }
}

/// What every trainer offers: count a corpus (texts or files, as often as needed), then
/// learn a model and return it as a ready tokenizer.
pub trait Trainer: Send {
    /// The model this trainer learns.
    type Model: Model;
    /// Counts `texts`, each one sequence.
    fn feed(&mut self, texts: &[&str]) -> Result<()>;
    /// Streams and counts `paths` (see [`crate::corpus`]).
    fn feed_files(&mut self, paths: &[PathBuf], opts: &CorpusOptions) -> Result<CorpusReport>;
    /// Learns the model from everything fed so far.
    fn train_tokenizer(self) -> Result<Tokenizer>;
}
