//! Unigram (sentencepiece's default model): the encoder ([`UnigramModel`]: Viterbi, n-best,
//! sampling) and the sentencepiece tokenizer around it, and the trainer ([`trainer`]: seeds from
//! a suffix array, EM, pruning by likelihood loss) with its training lattice ([`lattice`]).

pub mod lattice;
mod model;
pub mod nbest;
pub mod serialization;
pub mod trainer;
mod trie;

pub(crate) use model::index_spm_pieces;
pub use model::{
    byte_piece, byte_piece_ids, piece_byte, Piece, PieceKind, Semantics, SpmExtras, UnigramModel,
};
