//! [`Tokenizer`]: pre-tokenizer + BPE model + special tokens; what callers encode and decode with.

use crate::error::{Error, Result};
use crate::models::bpe::BpeModel;
use crate::pre_tokenizers::PreTokenizer;
use aho_corasick::{AhoCorasick, MatchKind};
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};

/// Which special tokens `encode` turns into their ids. Anything not allowed is encoded as the
/// ordinary text it is, as tiktoken's `encode_ordinary` does.
#[derive(Clone, Debug, Default)]
pub enum AllowedSpecial {
    #[default]
    None,
    All,
    Some(FxHashSet<String>),
}

impl AllowedSpecial {
    fn allows(&self, token: &str) -> bool {
        match self {
            AllowedSpecial::None => false,
            AllowedSpecial::All => true,
            AllowedSpecial::Some(set) => set.contains(token),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Tokenizer {
    pre: PreTokenizer,
    model: BpeModel,
    /// Special tokens in id order.
    specials: Vec<(String, u32)>,
    special_ids: FxHashMap<String, u32>,
    special_by_id: FxHashMap<u32, usize>,
    /// Finds special tokens in text; leftmost-longest so `<|a|>` never hides `<|a|>b|>`.
    special_matcher: Option<AhoCorasick>,
    /// HF ByteLevel's `add_prefix_space`: a space is put before text that does not start with one.
    add_prefix_space: bool,
}

impl Tokenizer {
    pub fn new(pre: PreTokenizer, model: BpeModel, specials: Vec<(String, u32)>) -> Result<Self> {
        let mut specials = specials;
        specials.sort_by_key(|(_, id)| *id);
        let mut special_ids = FxHashMap::default();
        let mut special_by_id = FxHashMap::default();
        for (i, (tok, id)) in specials.iter().enumerate() {
            if tok.is_empty() {
                return Err(Error::InvalidArgument("a special token cannot be empty".into()));
            }
            if model.token_bytes(*id).is_some() {
                return Err(Error::InvalidArgument(format!("special token {tok:?} has id {id}, which an ordinary token already has")));
            }
            if special_ids.insert(tok.clone(), *id).is_some() {
                return Err(Error::InvalidArgument(format!("special token {tok:?} is given twice")));
            }
            if special_by_id.insert(*id, i).is_some() {
                return Err(Error::InvalidArgument(format!("two special tokens share id {id}")));
            }
        }
        let special_matcher = if specials.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(specials.iter().map(|(t, _)| t.as_str()))
                    .map_err(|e| Error::InvalidArgument(format!("special tokens: {e}")))?,
            )
        };
        Ok(Tokenizer { pre, model, specials, special_ids, special_by_id, special_matcher, add_prefix_space: false })
    }

    pub fn with_add_prefix_space(mut self, on: bool) -> Self {
        self.add_prefix_space = on;
        self
    }

    pub fn add_prefix_space(&self) -> bool {
        self.add_prefix_space
    }

    pub fn pre_tokenizer(&self) -> &PreTokenizer {
        &self.pre
    }

    pub fn model(&self) -> &BpeModel {
        &self.model
    }

    pub fn special_tokens(&self) -> &[(String, u32)] {
        &self.specials
    }

    /// One past the largest id, ordinary or special (tiktoken's `n_vocab`).
    pub fn vocab_size(&self) -> usize {
        let max_special = self.specials.iter().map(|(_, id)| *id as usize + 1).max().unwrap_or(0);
        self.model.id_bound().max(max_special)
    }

    /// Bytes of a token, ordinary or special.
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.model
            .token_bytes(id)
            .or_else(|| self.special_by_id.get(&id).map(|&i| self.specials[i].0.as_bytes()))
    }

    /// Id of a token given its bytes, ordinary or special.
    pub fn token_id(&self, bytes: &[u8]) -> Option<u32> {
        std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| self.special_ids.get(s).copied())
            .or_else(|| self.model.token_id(bytes))
    }

    pub fn is_special(&self, id: u32) -> bool {
        self.special_by_id.contains_key(&id)
    }

    /// Encodes text; special tokens are recognised only where `allowed` says so.
    pub fn encode(&self, text: &str, allowed: &AllowedSpecial) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        self.encode_into(text, allowed, &mut out)?;
        Ok(out)
    }

    pub fn encode_into(&self, text: &str, allowed: &AllowedSpecial, out: &mut Vec<u32>) -> Result<()> {
        let prefixed;
        let text = if self.add_prefix_space && !text.is_empty() && !text.starts_with(' ') {
            prefixed = format!(" {text}");
            prefixed.as_str()
        } else {
            text
        };
        let matcher = match (&self.special_matcher, allowed) {
            (Some(m), AllowedSpecial::All | AllowedSpecial::Some(_)) => m,
            _ => return self.encode_ordinary(text, out),
        };
        let mut start = 0; // start of the ordinary text not yet encoded
        let mut search = 0; // where the next search for a special token begins
        while let Some(m) = matcher.find(aho_corasick::Input::new(text).span(search..text.len())) {
            let (tok, id) = &self.specials[m.pattern().as_usize()];
            if allowed.allows(tok) {
                self.encode_ordinary(&text[start..m.start()], out)?;
                out.push(*id);
                start = m.end();
                search = m.end();
            } else {
                // Not allowed here: look again one character later, so an allowed special token
                // that overlaps this one is still found.
                search = m.start() + text[m.start()..].chars().next().map_or(1, char::len_utf8);
            }
        }
        self.encode_ordinary(&text[start..], out)
    }

    fn encode_ordinary(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        self.pre.split(text, |piece| self.model.encode_piece(piece.as_bytes(), out))
    }

    /// Encodes many texts in parallel on `num_threads` threads (all cores when `None`). The
    /// output is the same whatever the thread count.
    pub fn encode_batch(&self, texts: &[&str], allowed: &AllowedSpecial, num_threads: Option<usize>) -> Result<Vec<Vec<u32>>> {
        let work = || texts.par_iter().map(|t| self.encode(t, allowed)).collect::<Result<Vec<_>>>();
        match num_threads {
            None | Some(0) => work(),
            Some(n) => rayon::ThreadPoolBuilder::new()
                .num_threads(n)
                .build()
                .map_err(|e| Error::InvalidArgument(format!("cannot start {n} threads: {e}")))?
                .install(work),
        }
    }

    /// The bytes the ids stand for; an unknown id is an error.
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            match self.token_bytes(id) {
                Some(b) => out.extend_from_slice(b),
                None => return Err(Error::InvalidArgument(format!("token id {id} is not in the vocabulary (size {})", self.vocab_size()))),
            }
        }
        Ok(out)
    }

    /// Decodes to text; byte sequences that are not valid UTF-8 become U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let bytes = self.decode_bytes(ids)?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }
}
