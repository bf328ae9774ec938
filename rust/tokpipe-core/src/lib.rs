//! tokpipe-core: the pure-Rust half of tokpipe (no Python here; `tokpipe-py` binds it).
//!
//! Crate map, following the order text flows through a tokenizer:
//! - [`normalizers`]: Unicode normal forms and BERT's normalizer, applied first (HF `normalizer`).
//! - [`pre_tokenizers`]: splits text into pieces (regex presets gpt2 / cl100k / o200k with
//!   hand-written scanners, any custom pattern through fancy-regex, or BERT's splitter).
//! - [`models`]: the [`models::Model`] and [`models::Trainer`] traits ([`models::base`]), the
//!   sentencepiece pieces ([`models::pieces`]) and one folder per model: [`models::bpe`]
//!   (byte-level BPE), [`models::wordpiece`] (BERT, LinMaxMatch encoder, likelihood or
//!   frequency trainer) and [`models::unigram`] (sentencepiece's model: Viterbi, n-best,
//!   sampling). A trainer returns the model and its special tokens, not a tokenizer.
//! - [`decoders`]: sentencepiece's decoder and HF's decoders for converted tokenizers.
//! - [`tokenizer`]: [`Tokenizer`] ties normalizer, pre-tokenizer, model, special tokens,
//!   post-processor and decoder together and is what callers encode and decode with.
//! - [`formats`]: readers and writers for the files people already have: HF `tokenizer.json`,
//!   sentencepiece `.model`, `.tiktoken`, GPT-2 `encoder.json` + `vocab.bpe`, BERT `vocab.txt`.
//! - [`assembly`]: the presets that put a whole tokenizer around a model: BERT's, and the ones
//!   of trained BPE, WordPiece and Unigram models.
//! - [`corpus`]: streaming readers for training input (txt, jsonl[.gz|.zst]).
//! - [`jsonl`]: JSON-lines records: the field extraction both JSON readers share, and the
//!   data pipeline reader's fast path (blocks of lines to Arrow string buffers).
//! - [`text`]: kernels of the data pipeline's stages over borrowed Arrow string columns.
//! - [`minhash`]: near-duplicate detection (MinHash signatures equal to datasketch's, LSH banding,
//!   union-find clusters).
//! - [`pii`]: PII detection (validated detectors) and scrubbing over Arrow string columns.
//! - [`fasttext`]: fastText supervised classifiers (its model files, `.bin` and quantized
//!   `.ftz`, and its predict): the quality classifier's scores and the `language` stage's
//!   labels over Arrow string columns.
//! - [`lm`]: KenLM-compatible n-gram language models (training, ARPA, scoring).
//! - [`tokens`]: token-id lists as Arrow list buffers (the gathers of tokenize's shuffle).
//! - [`packed_parquet`]: the Parquet writer of tokenize's packed rows (fixed-width token rows).
//! - [`zstd_file`]: zstd files decompressed a buffer at a time (the pipeline's line readers).
//! - [`error`]: the one error enum of the crate.
//! - [`util`]: small helpers shared across layers (character-table lookup, the scratch-buffer
//!   bound, the SplitMix64 generator); it uses nothing else of the crate.
//!
//! Modules use each other in one direction only: [`error`] and [`util`] at the bottom, then
//! normalizers and pre-tokenizers, the models, decoders, the tokenizer, the formats and the
//! assembly, with the pipeline's kernels ([`text`], [`lm`], ...) on top.
//! `tests/test_rust_layering.py` fails on a module that imports one that imports it back.

pub mod assembly;
pub mod corpus;
pub mod decoders;
pub mod error;
pub mod fasttext;
pub mod formats;
pub mod jsonl;
pub mod lm;
pub mod minhash;
pub mod models;
pub mod normalizers;
pub mod packed_parquet;
pub mod pii;
pub mod pre_tokenizers;
pub mod text;
pub mod tokenizer;
pub mod tokens;
pub mod util;
pub mod zstd_file;

pub use error::{Error, Result};
pub use tokenizer::Tokenizer;
