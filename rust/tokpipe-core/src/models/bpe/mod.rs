//! BPE: the encoder ([`BpeModel`]: byte-level, and character-level for sentencepiece and HF's
//! Llama-style files) and the byte-level trainer ([`BpeTrainer`]).

mod chars;
mod huge_table;
mod inline_vec;
mod model;
mod pair_table;
mod piece_cache;
mod piece_encoder;
mod short_tokens;
mod splits;
pub mod trainer;

pub use model::{BpeModel, MergeRule, PieceEncoder};
pub use trainer::{BpeTrainer, BpeTrainerConfig, TrainedBpe};
