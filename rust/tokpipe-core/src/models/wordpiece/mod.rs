//! WordPiece (BERT): the linear-time encoder ([`WordPieceModel`]), the trainer
//! ([`WordPieceTrainer`], likelihood or frequency scores), and the BERT tokenizer around them
//! ([`bert_tokenizer`]).

mod model;
pub mod serialization;
pub mod trainer;

pub use model::{WordPieceModel, DEFAULT_MAX_INPUT_CHARS_PER_WORD};
pub use trainer::{Score, WordPieceTrainer, WordPieceTrainerConfig};

use crate::error::Result;
use crate::models::Model;
use crate::normalizers::{BertNormalizer, Normalizer};
use crate::pre_tokenizers::PreTokenizer;
use crate::tokenizer::{AddedToken, Decoder, PostProcessor, Tokenizer};

/// BERT's special tokens, in the order HF's `BertWordPieceTokenizer` registers them.
pub const BERT_SPECIAL_TOKENS: [&str; 5] = ["[UNK]", "[SEP]", "[CLS]", "[PAD]", "[MASK]"];

/// A BERT tokenizer around `model`, as HF's `BertWordPieceTokenizer` builds one: the BERT
/// normalizer `normalizer`, the BERT pre-tokenizer, the
/// BERT special tokens the vocabulary has, `[CLS] … [SEP]` when special tokens are asked for,
/// and the WordPiece decoder.
pub fn bert_tokenizer(model: WordPieceModel, normalizer: BertNormalizer) -> Result<Tokenizer> {
    let specials: Vec<AddedToken> = BERT_SPECIAL_TOKENS
        .iter()
        .filter_map(|t| model.token_to_id(t).map(|id| AddedToken::special(*t, id)))
        .collect();
    let post = match (model.token_to_id("[CLS]"), model.token_to_id("[SEP]")) {
        (Some(cls), Some(sep)) => Some(PostProcessor::Bert {
            cls: ("[CLS]".into(), cls),
            sep: ("[SEP]".into(), sep),
        }),
        _ => None,
    };
    let decoder = Decoder::WordPiece {
        prefix: model.continuing_subword_prefix().to_string(),
        cleanup: true,
    };
    Ok(Tokenizer::new(PreTokenizer::Bert, model, specials)?
        .with_normalizer(Some(Normalizer::Bert(normalizer)))
        .with_post_processor(post)
        .with_decoder(decoder))
}
