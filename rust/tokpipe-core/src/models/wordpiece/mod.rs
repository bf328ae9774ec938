//! WordPiece (BERT): the linear-time encoder ([`WordPieceModel`]) and the trainer
//! ([`WordPieceTrainer`], likelihood, PMI or frequency scores). The BERT tokenizer around them is
//! made by [`crate::assembly::bert_tokenizer`].

mod model;
pub mod trainer;

pub use model::{WordPieceModel, DEFAULT_MAX_INPUT_CHARS_PER_WORD};
pub use trainer::{Score, TrainedWordPiece, WordPieceTrainer, WordPieceTrainerConfig};
