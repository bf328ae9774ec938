//! n-gram language models, KenLM-compatible: train them (interpolated modified Kneser-Ney, as
//! `lmplz`), read and write them as ARPA files, and score text with them exactly as the
//! `kenlm` Python module scores (the perplexity filter of CCNet and its successors).
//!
//! - [`train`]: counting n-grams of a corpus and estimating the model.
//! - [`arpa`]: the ARPA text format.
//! - [`model`]: [`NgramModel`], the probing hash tables and KenLM's scoring rule.
//! - [`score`]: documents scored line by line as CCNet does, over Arrow string columns.
//! - [`normalize`]: CCNet's line normalisation.
//!
//! A sentence is one line of text: `<s>` before it, `</s>` after it, as in KenLM. Its words
//! are either the line's whitespace-separated words (what KenLM and CCNet users feed, after
//! their own tokenization) or the tokens of a tokenizer, each written as the tokenizer's
//! vocabulary writes it (`Ġthe`), so `kenlm` scores the same words when given them joined by
//! spaces.

pub mod arpa;
pub mod model;
pub mod normalize;
mod probing;
pub mod score;
pub mod train;

pub use model::{NgramModel, State};
pub use score::{ModelTokenizer, Scorer};
pub use train::{LineTokens, LmTrainer, LmTrainerConfig, TrainedLm};
