//! Unigram (sentencepiece's default model): the encoder ([`UnigramModel`]: Viterbi, n-best,
//! sampling; a per-thread word -> ids cache for text cut into words, `word_cache`) and the
//! trainer ([`trainer`]: seeds from a suffix array, EM, pruning by likelihood loss) with its
//! training lattice ([`lattice`]). Its pieces are [`crate::models::pieces`]; the
//! sentencepiece tokenizer around it is read by [`crate::formats::sentencepiece`] and, for a
//! trained model, assembled by [`crate::assembly::unigram_tokenizer`].

pub mod lattice;
mod model;
pub mod nbest;
pub mod trainer;
mod trie;
mod word_cache;

pub use model::UnigramModel;
pub use word_cache::CachedWords;
