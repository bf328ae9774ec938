//! Tokenization models. Only byte-level BPE so far; WordPiece and Unigram follow the same
//! layout (`model.rs`, `trainer.rs`, `serialization.rs`).

pub mod bpe;
