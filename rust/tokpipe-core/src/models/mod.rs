//! Tokenization models: what turns one pre-tokenized piece into ids.
//!
//! Each model has its own folder in HF `tokenizers`' layout: `model.rs` (the encoder) and
//! `trainer.rs`. [`Model`] is what every model offers the [`crate::Tokenizer`] and [`Trainer`]
//! what every trainer offers the binding and the CLI (both in [`base`], which the families
//! import); [`ModelWrapper`] holds one of the models, so the tokenizer dispatches once per
//! stretch of text (a `match`, not a virtual call per piece) and byte-level BPE's hot loop
//! stays what it was. [`bpe`], [`wordpiece`] and [`unigram`] (sentencepiece's model) are the
//! families; [`pieces`] holds the sentencepiece pieces that Unigram and sentencepiece's BPE
//! are both made of.
//!
//! [`pre_segment`] holds the word-segmenter cuts the BPE and Unigram trainers can be fed.
//! `packed_key` packs short byte strings into the `u128` keys of the per-thread caches of BPE
//! pieces and Unigram words; `long_keys` holds their longer ones; `prefetch` requests a table's
//! line ahead of its probe.
//!
//! Layers: [`base`], [`pieces`], `packed_key`, `long_keys`, `prefetch` and [`pre_segment`] below
//! the families, the families below this file's [`ModelWrapper`], and all of it below
//! [`crate::tokenizer`] (tests/test_rust_layering.py checks that no module imports one that
//! imports it back).

pub mod base;
pub mod bpe;
pub(crate) mod long_keys;
pub(crate) mod packed_key;
pub(crate) mod piece_counter;
pub mod pieces;
pub mod pre_segment;
pub(crate) mod prefetch;
pub mod unigram;
pub mod wordpiece;

pub use base::{id_limit, Model, Trainer, ID_SLACK};
use std::borrow::Cow;

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
    pub fn spm_pieces(&self) -> Option<&[pieces::Piece]> {
        match self {
            ModelWrapper::Unigram(m) => Some(m.pieces()),
            ModelWrapper::Bpe(m) => m.spm_pieces(),
            ModelWrapper::WordPiece(_) => None,
        }
    }

    /// What a sentencepiece `.model` held beyond the pieces, when the model was read from one.
    pub(crate) fn spm_extras(&self) -> Option<&pieces::SpmExtras> {
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
