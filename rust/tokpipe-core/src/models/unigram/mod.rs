//! Unigram (sentencepiece's default model): the encoder ([`UnigramModel`]: Viterbi, n-best,
//! sampling) and the sentencepiece tokenizer around it.

mod model;
pub mod nbest;
pub mod serialization;
mod trie;

pub use model::{byte_piece, piece_byte, Piece, PieceKind, Semantics, SpmExtras, UnigramModel};
