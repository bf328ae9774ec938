//! Scoring documents as CCNet does (`cc_net/perplexity.py`, `DocLM`): a document is cut at
//! every `\n` (empty lines, a last empty line after a final `\n` and the empty document
//! included, as Python's `str.split("\n")` cuts), each line optionally normalised
//! ([`super::normalize`]), tokenized, and scored as a sentence (`<s> ... </s>`); a document's
//! log10 probability is the sum over its lines and its length the number of tokens plus one
//! `</s>` per line, so its perplexity is `10^(-log10 p / length)`.
//!
//! The column kernel runs over an Arrow string column on all cores and allocates nothing per
//! token: each task keeps its buffers.

use super::model::{NgramModel, State, UNK};
use super::normalize::ccnet_normalize;
use super::train::token_strings;
use crate::text::StrColumn;
use crate::tokenizer::{AllowedSpecial, Tokenizer};
use rayon::prelude::*;

/// A tokenizer paired with a model: token id to the model's word id.
#[derive(Clone, Debug)]
pub struct ModelTokenizer {
    tokenizer: Tokenizer,
    to_word: Vec<u32>,
}

impl ModelTokenizer {
    pub fn new(tokenizer: Tokenizer, model: &NgramModel) -> Self {
        let to_word = token_strings(&tokenizer)
            .iter()
            .map(|s| if s.is_empty() { UNK } else { model.word_id(s) })
            .collect();
        ModelTokenizer { tokenizer, to_word }
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }
}

/// How lines become the model's words, and whether they are normalised first.
#[derive(Clone, Copy)]
pub struct Scorer<'a> {
    pub model: &'a NgramModel,
    /// `None`: whitespace-separated words.
    pub tokenizer: Option<&'a ModelTokenizer>,
    /// CCNet's normalisation of each line before tokenizing.
    pub normalize: bool,
}

/// Scratch buffers of one thread.
#[derive(Default)]
pub struct Buffers {
    normalized: String,
    tokens: Vec<u32>,
}

impl Scorer<'_> {
    /// log10 P(`<s>` line `</s>`) and the number of tokens (without `</s>`).
    pub fn line(&self, line: &str, buf: &mut Buffers) -> crate::Result<(f32, usize)> {
        let line = if self.normalize {
            ccnet_normalize(line, &mut buf.normalized);
            buf.normalized.as_str()
        } else {
            line
        };
        let model = self.model;
        match self.tokenizer {
            None => Ok(model.score_words(line, true, true)),
            Some(t) => {
                buf.tokens.clear();
                t.tokenizer
                    .encode_into(line, &AllowedSpecial::None, &mut buf.tokens)?;
                let mut state = model.begin_sentence();
                let mut next = model.null_context();
                let mut total = 0.0f32;
                for &id in &buf.tokens {
                    let word = t.to_word.get(id as usize).copied().unwrap_or(UNK);
                    total += model.score(&state, word, &mut next);
                    std::mem::swap::<State>(&mut state, &mut next);
                }
                total += model.score(&state, model.eos(), &mut next);
                Ok((total, buf.tokens.len()))
            }
        }
    }

    /// A document's summed log10 probability over its lines, and its length (tokens plus one
    /// `</s>` per line).
    pub fn document(&self, text: &str, buf: &mut Buffers) -> crate::Result<(f64, u64)> {
        let mut log10 = 0.0f64;
        let mut length = 0u64;
        for line in text.split('\n') {
            let (score, tokens) = self.line(line, buf)?;
            log10 += score as f64;
            length += tokens as u64 + 1;
        }
        Ok((log10, length))
    }

    /// [`Scorer::document`] of every row of `column`, in parallel.
    pub fn column(&self, column: &StrColumn) -> crate::Result<(Vec<f64>, Vec<u64>)> {
        const ROWS_PER_TASK: usize = 64;
        let n = column.len();
        let mut log10 = vec![0.0f64; n];
        let mut length = vec![0u64; n];
        log10
            .par_chunks_mut(ROWS_PER_TASK)
            .zip(length.par_chunks_mut(ROWS_PER_TASK))
            .enumerate()
            .try_for_each_init(Buffers::default, |buf, (task, (scores, lengths))| {
                let first = task * ROWS_PER_TASK;
                for (k, (s, l)) in scores.iter_mut().zip(lengths.iter_mut()).enumerate() {
                    (*s, *l) = self.document(column.get(first + k), buf)?;
                }
                Ok::<(), crate::Error>(())
            })?;
        Ok((log10, length))
    }
}
