//! [`Tokenizer`]: what callers encode and decode with. Text flows through HF's pipeline:
//! added tokens are found in the raw text, the stretches between them are normalized,
//! pre-tokenized and encoded by the model; the post-processor adds `[CLS]`/`[SEP]` when asked,
//! and the decoder turns ids back into text.
//!
//! (Over 500 lines: the encode and decode paths of every model kind meet here, with the added
//! tokens' matcher. The presets that put a whole tokenizer around a model live above this
//! module, in [`crate::assembly`].)
//!
//! A Unigram tokenizer can also give its n best segmentations and draw one at random
//! (subword regularization): [`Tokenizer::encode_nbest`], [`Tokenizer::encode_sample`].

use crate::decoders::{DecodeStep, SentencePieceDecoder};
use crate::error::{shown, Error, Result};
use crate::models::unigram::nbest::Segment;
use crate::models::{Model, ModelWrapper};
use crate::normalizers::Normalizer;
use crate::pre_tokenizers::PreTokenizer;
use crate::util::{SplitMix64, KEEP_SCRATCH_BYTES};
use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use std::borrow::Cow;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

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

/// A token matched as a whole string in the text before pre-tokenization.
///
/// `special` tokens (`<|endoftext|>`) are matched only where the caller allows them. Tokens
/// that are not special come from HF's `added_tokens` (GPT-NeoX's runs of spaces, say); HF
/// always matches those, so we do too, or ids would differ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddedToken {
    pub content: String,
    pub id: u32,
    pub special: bool,
    /// HF's `normalized` flag, kept for writing the file back. (HF matches such a token in the
    /// normalized text; it is matched in the raw text here, which is the same for the
    /// tokenizers whose normalizer leaves the token's spelling alone.)
    pub normalized: bool,
}

impl AddedToken {
    pub fn special(content: impl Into<String>, id: u32) -> Self {
        AddedToken {
            content: content.into(),
            id,
            special: true,
            normalized: false,
        }
    }
}

/// What wraps a sequence's ids when special tokens are asked for (HF's `post_processor`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PostProcessor {
    /// HF's BertProcessing (or the TemplateProcessing `[CLS] $A [SEP]` it became):
    /// `[CLS]` first, `[SEP]` last.
    Bert {
        cls: (String, u32),
        sep: (String, u32),
    },
    /// HF's `TemplateProcessing` for one sequence: special tokens before and after it
    /// (`<s> $A </s>`, T5's `$A </s>`, Llama's `<s> $A`).
    Template {
        before: Vec<(String, u32)>,
        after: Vec<(String, u32)>,
    },
}

/// How ids become text again (HF's `decoder`).
#[derive(Clone, Debug, Default)]
pub enum Decoder {
    /// The tokens' bytes, concatenated (byte-level BPE).
    #[default]
    ByteLevel,
    /// HF's WordPiece decoder: tokens joined by spaces, the prefix glues a token to the one
    /// before it; `cleanup` removes the spaces BERT's tokenization put before punctuation.
    WordPiece { prefix: String, cleanup: bool },
    /// sentencepiece's `DecodeIds` (needs a Unigram model).
    SentencePiece(std::sync::Arc<SentencePieceDecoder>),
    /// HF's decoders in order (`Metaspace`, or a `Sequence` of them) over the token strings,
    /// special tokens skipped.
    Steps(std::sync::Arc<[DecodeStep]>),
}

#[derive(Clone, Debug)]
pub struct Tokenizer {
    normalizer: Option<Normalizer>,
    pre: PreTokenizer,
    model: ModelWrapper,
    post_processor: Option<PostProcessor>,
    decoder: Decoder,
    /// Added and special tokens in id order.
    added: Vec<AddedToken>,
    added_ids: FxHashMap<String, u32>,
    added_by_id: FxHashMap<u32, usize>,
    /// Finds added tokens in text; leftmost-longest (as HF) so `<|a|>` never hides `<|a|>b|>`.
    added_matcher: Option<AhoCorasick>,
    /// Whether any added token is matched whatever the caller allows.
    has_plain_added: bool,
    /// HF ByteLevel's `add_prefix_space`: a space is put before text that does not start with one.
    add_prefix_space: bool,
}

impl Tokenizer {
    pub fn new(
        pre: PreTokenizer,
        model: impl Into<ModelWrapper>,
        added: Vec<AddedToken>,
    ) -> Result<Self> {
        let model = model.into();
        let mut added = added;
        added.sort_by_key(|t| t.id);
        let mut added_ids = FxHashMap::default();
        let mut added_by_id = FxHashMap::default();
        // The binding keeps an int object per id below `vocab_size`: an added token far past
        // the vocabulary would make that table gigabytes.
        let size = model.id_bound() + added.len();
        for (i, t) in added.iter().enumerate() {
            let (tok, id) = (&t.content, t.id);
            if tok.is_empty() {
                return Err(Error::InvalidArgument(
                    "a special token cannot be empty".into(),
                ));
            }
            if id >= crate::models::id_limit(size) {
                return Err(Error::InvalidArgument(crate::models::base::id_past_limit(
                    &format!("special token {}", shown(tok)),
                    id.into(),
                    size,
                )));
            }
            // HF keeps one string -> id map, so a special token whose text is the spelling of
            // an ordinary token (byte-level for BPE) is that token (HF's BPE trainer makes these
            // when a special token spells a byte or a merge; BERT's vocab.txt holds [CLS]). Any
            // other clash is a broken vocabulary.
            if let Some(spelling) = model.id_to_token(id) {
                if spelling != tok.as_str() {
                    return Err(Error::InvalidArgument(format!(
                        "special token {} has id {id}, which an ordinary token already has",
                        shown(tok)
                    )));
                }
            }
            if added_ids.insert(tok.clone(), id).is_some() {
                return Err(Error::InvalidArgument(format!(
                    "special token {} is given twice",
                    shown(tok)
                )));
            }
            if added_by_id.insert(id, i).is_some() {
                return Err(Error::InvalidArgument(format!(
                    "two special tokens share id {id}"
                )));
            }
        }
        let added_matcher = if added.is_empty() {
            None
        } else {
            Some(added_token_matcher(&added)?)
        };
        let has_plain_added = added.iter().any(|t| !t.special);
        Ok(Tokenizer {
            normalizer: None,
            pre,
            model,
            post_processor: None,
            decoder: Decoder::default(),
            added,
            added_ids,
            added_by_id,
            added_matcher,
            has_plain_added,
            add_prefix_space: false,
        })
    }

    pub fn with_add_prefix_space(mut self, on: bool) -> Self {
        self.add_prefix_space = on;
        self
    }

    pub fn with_normalizer(mut self, normalizer: Option<Normalizer>) -> Self {
        self.normalizer = normalizer;
        self
    }

    pub fn with_post_processor(mut self, post: Option<PostProcessor>) -> Self {
        self.post_processor = post;
        self
    }

    pub fn with_decoder(mut self, decoder: Decoder) -> Self {
        self.decoder = decoder;
        self
    }

    pub fn post_processor(&self) -> Option<&PostProcessor> {
        self.post_processor.as_ref()
    }

    pub fn decoder(&self) -> &Decoder {
        &self.decoder
    }

    pub fn normalizer(&self) -> Option<&Normalizer> {
        self.normalizer.as_ref()
    }

    pub fn add_prefix_space(&self) -> bool {
        self.add_prefix_space
    }

    pub fn pre_tokenizer(&self) -> &PreTokenizer {
        &self.pre
    }

    pub fn model(&self) -> &ModelWrapper {
        &self.model
    }

    /// Added and special tokens in id order.
    pub fn added_tokens(&self) -> &[AddedToken] {
        &self.added
    }

    /// One past the largest id, ordinary or special (tiktoken's `n_vocab`).
    pub fn vocab_size(&self) -> usize {
        let max_added = self
            .added
            .iter()
            .map(|t| t.id as usize + 1)
            .max()
            .unwrap_or(0);
        self.model.id_bound().max(max_added)
    }

    /// Bytes of a token, ordinary or added.
    pub fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.model.token_bytes(id).or_else(|| {
            self.added_by_id
                .get(&id)
                .map(|&i| self.added[i].content.as_bytes())
        })
    }

    /// Id of a token given its bytes, ordinary or added.
    pub fn token_id(&self, bytes: &[u8]) -> Option<u32> {
        std::str::from_utf8(bytes)
            .ok()
            .and_then(|s| self.added_ids.get(s).copied())
            .or_else(|| self.model.bytes_to_id(bytes))
    }

    /// The token as the model's files spell it (byte-level text for BPE), or the added token.
    pub fn id_to_token(&self, id: u32) -> Option<Cow<'_, str>> {
        match self.added_by_id.get(&id) {
            Some(&i) => Some(Cow::Borrowed(self.added[i].content.as_str())),
            None => self.model.id_to_token(id),
        }
    }

    /// Inverse of [`Tokenizer::id_to_token`].
    pub fn token_to_id(&self, token: &str) -> Option<u32> {
        self.added_ids
            .get(token)
            .copied()
            .or_else(|| self.model.token_to_id(token))
    }

    /// Whether `id` is an added or special token rather than a BPE token.
    pub fn is_added(&self, id: u32) -> bool {
        self.added_by_id.contains_key(&id)
    }

    /// Encodes text; special tokens are recognised only where `allowed` says so.
    pub fn encode(&self, text: &str, allowed: &AllowedSpecial) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(self.ids_capacity(text));
        self.encode_into(text, allowed, &mut out)?;
        Ok(out)
    }

    pub fn encode_into(
        &self,
        text: &str,
        allowed: &AllowedSpecial,
        out: &mut Vec<u32>,
    ) -> Result<()> {
        self.for_each_stretch(text, allowed, |stretch| match stretch {
            Stretch::Text(t, at_start) => self.encode_ordinary(t, at_start, out),
            Stretch::Added(id) => {
                out.push(id);
                Ok(())
            }
        })
    }

    /// Cuts `text` at the added tokens that are matched (see [`AllowedSpecial`]) and calls
    /// `each` with the stretches of ordinary text and the added tokens, in order.
    fn for_each_stretch<'t>(
        &self,
        text: &'t str,
        allowed: &AllowedSpecial,
        mut each: impl FnMut(Stretch<'t>) -> Result<()>,
    ) -> Result<()> {
        let matcher = match (&self.added_matcher, allowed) {
            (Some(m), AllowedSpecial::All | AllowedSpecial::Some(_)) => m,
            (Some(m), AllowedSpecial::None) if self.has_plain_added => m,
            _ => return each(Stretch::Text(text, true)),
        };
        let mut start = 0; // start of the ordinary text not yet encoded
        let mut search = 0; // where the next search for an added token begins
        while let Some(m) = matcher.find(aho_corasick::Input::new(text).span(search..text.len())) {
            let tok = &self.added[m.pattern().as_usize()];
            if !tok.special || allowed.allows(&tok.content) {
                each(Stretch::Text(&text[start..m.start()], start == 0))?;
                each(Stretch::Added(tok.id))?;
                start = m.end();
                search = m.end();
            } else {
                // Not allowed here: look again one character later, so an allowed special token
                // that overlaps this one is still found.
                search = m.start() + text[m.start()..].chars().next().map_or(1, char::len_utf8);
            }
        }
        each(Stretch::Text(&text[start..], start == 0))
    }

    /// [`Tokenizer::encode`], then `[CLS]`/`[SEP]` (or whatever the post-processor adds)
    /// when `add_special_tokens` is set; a tokenizer without a post-processor adds nothing,
    /// as HF's byte-level one does.
    pub fn encode_with(
        &self,
        text: &str,
        allowed: &AllowedSpecial,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(self.ids_capacity(text) + 2);
        match (add_special_tokens, &self.post_processor) {
            (true, Some(PostProcessor::Bert { cls, sep })) => {
                out.push(cls.1);
                self.encode_into(text, allowed, &mut out)?;
                out.push(sep.1);
            }
            (true, Some(PostProcessor::Template { before, after })) => {
                out.extend(before.iter().map(|t| t.1));
                self.encode_into(text, allowed, &mut out)?;
                out.extend(after.iter().map(|t| t.1));
            }
            _ => self.encode_into(text, allowed, &mut out)?,
        }
        Ok(out)
    }

    /// Room for the ids of `text` that avoids growing the vector on most texts: a Unigram
    /// vocabulary of a few thousand pieces gives about one id per two bytes of English, the
    /// byte-level BPE ones about one per four. The byte-level encoder copies a cache entry's
    /// three id places at once and first makes room for them, so a short text (under about
    /// 24 bytes) needs a few places more than its ids, or the vector is grown for its last
    /// piece (the other models share the arm: three places more cost them nothing).
    fn ids_capacity(&self, text: &str) -> usize {
        match self.model {
            ModelWrapper::Unigram(_) => text.len() / 2 + 1,
            _ => text.len() / 3 + 4,
        }
    }

    /// Encodes a stretch of text that holds no added token to match: normalizer,
    /// pre-tokenizer, model. `at_start`: the stretch starts the input.
    fn encode_ordinary(&self, text: &str, at_start: bool, out: &mut Vec<u32>) -> Result<()> {
        // HF drops empty stretches between added tokens before normalizing them.
        if text.is_empty() {
            return Ok(());
        }
        match &self.normalizer {
            // sentencepiece's normalizer always writes new text (`▁`): into a buffer reused
            // across calls, not a fresh allocation per document.
            Some(Normalizer::SentencePiece(n)) if !(at_start && self.pre.prepends_first_only()) => {
                NORMALIZED.with(|buf| {
                    let mut buf = buf.take();
                    n.normalize_into(text, &mut buf);
                    let result = self.encode_normalized(&buf, at_start, out);
                    // Kept for the next document, unless a huge one made it huge.
                    if buf.capacity() <= KEEP_SCRATCH_BYTES {
                        NORMALIZED.set(buf);
                    }
                    result
                })
            }
            _ => {
                let (normalized, at_start) = self.normalize_stretch(text, at_start);
                self.encode_normalized(&normalized, at_start, out)
            }
        }
    }

    fn encode_normalized(&self, text: &str, at_start: bool, out: &mut Vec<u32>) -> Result<()> {
        let model = match &self.model {
            ModelWrapper::Bpe(model) if model.is_byte_level() => model,
            ModelWrapper::WordPiece(model) => {
                return self.pre.split(text, |word| model.encode_word(word, out));
            }
            // Unigram cut into words (T5's Metaspace with `split`): each word through this
            // thread's word cache, since text repeats its words and a word's ids depend on it
            // alone.
            ModelWrapper::Unigram(model) if !matches!(self.pre, PreTokenizer::Whole) => {
                return model.with_word_cache(out, |words| {
                    self.pre
                        .for_each_piece(text, at_start, &mut |p| words.encode(p))
                });
            }
            // sentencepiece-style models (Unigram, character-level BPE): the text whole, or the
            // pieces of a pre-tokenizer that may rewrite it (Metaspace).
            model => {
                return match &self.pre {
                    PreTokenizer::Whole => {
                        model.encode_piece(text, out);
                        Ok(())
                    }
                    pre => pre.for_each_piece(text, at_start, &mut |p| model.encode_piece(p, out)),
                };
            }
        };
        // HF puts the prefix space before each stretch of text between added tokens.
        let prefixed;
        let text = if self.add_prefix_space && !text.is_empty() && !text.starts_with(' ') {
            prefixed = format!(" {text}");
            &prefixed
        } else {
            text
        };
        // Through this thread's piece cache: repeated words skip the vocabulary lookup and the
        // merge loop, with the same ids.
        model.with_piece_cache(text.as_bytes(), out, |pieces| {
            self.pre
                .split(text, |piece| pieces.encode(piece.as_bytes()))
        })
    }

    /// Encodes many texts in parallel on `num_threads` threads (all cores when `None`). The
    /// output is the same whatever the thread count.
    pub fn encode_batch(
        &self,
        texts: &[&str],
        allowed: &AllowedSpecial,
        num_threads: Option<usize>,
    ) -> Result<Vec<Vec<u32>>> {
        in_pool(num_threads, || {
            texts
                .par_iter()
                .map(|t| self.encode_with(t, allowed, false))
                .collect::<Result<Vec<_>>>()
        })?
    }

    /// [`Tokenizer::encode_batch`] handing the ids over in chunks of about `chunk_bytes` of
    /// input to `consume`, with the index of each chunk's first text, which runs on the calling
    /// thread while the pool encodes the rest. Chunks come in the order they are finished, not
    /// in the texts' order; the ids of each text are the same whatever the order or thread
    /// count. `consume` stops the work by returning `Break`.
    ///
    /// Why: a caller that must turn ids into something single-threaded (Python lists, which
    /// need the GIL) would otherwise do it after the whole batch, a serial tail that kept two
    /// threads at ~1.6x one thread on the benchmark corpus. Overlapped, it hides behind the
    /// encoding of the rest of the batch. The pool runs over all the chunks at once, and each
    /// is handed over as soon as it is finished: encoding one chunk at a time beside the
    /// hand-over of the one before left a thread idle at every chunk's last documents (two
    /// threads at 1.75x one), and handing them over in the texts' order left the calling
    /// thread waiting for the first thread's next chunk while the second thread's piled up,
    /// to be handed over after the encoding ended. (So on many threads, which encode faster
    /// than one thread hands over, the encoded chunks may wait for the calling thread: up to
    /// the whole batch's ids, 4 bytes an id, beside what `consume` makes of them.)
    pub fn encode_batch_chunked(
        &self,
        texts: &[&str],
        allowed: &AllowedSpecial,
        add_special_tokens: bool,
        num_threads: Option<usize>,
        chunk_bytes: usize,
        mut consume: impl FnMut(usize, Vec<Vec<u32>>) -> ControlFlow<()>,
    ) -> Result<()> {
        let pool = thread_pool(num_threads)?;
        let mut chunks = Vec::new();
        let mut first = 0;
        for chunk in chunks_by_bytes(texts, chunk_bytes) {
            chunks.push((first, chunk));
            first += chunk.len();
        }
        // Chunks encoded and not yet taken by the calling thread; `ended` once the pool has
        // stopped (normally or by a panic, which the scope then passes on).
        let slots = Mutex::new(Slots {
            finished: Vec::new(),
            ended: false,
        });
        let filled = Condvar::new();
        let stop = AtomicBool::new(false);
        let lock = || slots.lock().unwrap_or_else(|e| e.into_inner());
        std::thread::scope(|scope| {
            scope.spawn(|| {
                let _ended = OnDrop(|| {
                    lock().ended = true;
                    filled.notify_all();
                });
                let work = || {
                    chunks.par_iter().for_each(|&(first, chunk)| {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let encoded = chunk
                            .iter()
                            .map(|t| self.encode_with(t, allowed, add_special_tokens))
                            .collect::<Result<Vec<_>>>();
                        lock().finished.push((first, encoded));
                        filled.notify_all();
                    })
                };
                run_on(pool.as_deref(), work)
            });
            let halt = |result| {
                stop.store(true, Ordering::Relaxed);
                result
            };
            for _ in 0..chunks.len() {
                let mut slots = lock();
                let (first, encoded) = loop {
                    if let Some(finished) = slots.finished.pop() {
                        break finished;
                    }
                    if slots.ended {
                        // The pool panicked; the scope passes the panic on.
                        return halt(Ok(()));
                    }
                    slots = filled.wait(slots).unwrap_or_else(|e| e.into_inner());
                };
                drop(slots);
                match encoded.map(|ids| consume(first, ids)) {
                    Ok(ControlFlow::Continue(())) => {}
                    Ok(ControlFlow::Break(())) => return halt(Ok(())),
                    Err(e) => return halt(Err(e)),
                }
            }
            Ok(())
        })
    }

    /// The bytes the ids stand for; an unknown id is an error. A sentencepiece decoder gives
    /// its text with byte pieces as raw bytes; HF's decoder steps give their text.
    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        match &self.decoder {
            Decoder::SentencePiece(d) => return d.decode(self.spm_pieces_for_decode()?, ids, true),
            Decoder::Steps(steps) => return self.decode_steps(ids, steps).map(String::into_bytes),
            _ => {}
        }
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            match self.token_bytes(id) {
                Some(b) => out.extend_from_slice(b),
                None => {
                    return Err(Error::InvalidArgument(format!(
                        "token id {id} is not in the vocabulary (size {})",
                        self.vocab_size()
                    )))
                }
            }
        }
        Ok(out)
    }

    /// Decodes to text; byte sequences that are not valid UTF-8 become U+FFFD. The WordPiece
    /// decoder skips special tokens, as HF's `decode` does by default.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        match &self.decoder {
            Decoder::WordPiece { prefix, cleanup } => {
                return self.decode_wordpiece(ids, prefix, *cleanup)
            }
            Decoder::SentencePiece(d) => {
                let bytes = d.decode(self.spm_pieces_for_decode()?, ids, false)?;
                return Ok(String::from_utf8(bytes)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()));
            }
            Decoder::Steps(steps) => return self.decode_steps(ids, steps),
            Decoder::ByteLevel => {}
        }
        let bytes = self.decode_bytes(ids)?;
        Ok(match String::from_utf8(bytes) {
            Ok(s) => s,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        })
    }
}

/// Added tokens of at most this many bytes in all are found with a DFA (the fastest search),
/// more with a contiguous NFA. aho-corasick builds the DFA of up to 100 patterns whatever
/// their length, in time that grows with the square of a repetitive pattern's length (one
/// 64 KB token took a minute); the NFA builds in linear time.
const ADDED_DFA_BYTES: usize = 4096;

/// The leftmost-longest matcher of the added tokens.
fn added_token_matcher(added: &[AddedToken]) -> Result<AhoCorasick> {
    let patterns = || added.iter().map(|t| t.content.as_str());
    let mut builder = AhoCorasick::builder();
    builder.match_kind(MatchKind::LeftmostLongest);
    if patterns().map(str::len).sum::<usize>() > ADDED_DFA_BYTES {
        builder.kind(Some(AhoCorasickKind::ContiguousNFA));
    }
    builder
        .build(patterns())
        .or_else(|_| {
            // Too many states for a contiguous NFA: the plain one has no such limit.
            builder
                .kind(Some(AhoCorasickKind::NoncontiguousNFA))
                .build(patterns())
        })
        .map_err(|e| Error::InvalidArgument(format!("special tokens: {e}")))
}

thread_local! {
    /// The normalized text of the stretch being encoded (see `encode_ordinary`).
    static NORMALIZED: std::cell::Cell<String> = const { std::cell::Cell::new(String::new()) };
}

/// A piece of the input as [`Tokenizer::for_each_stretch`] cuts it.
enum Stretch<'t> {
    /// Ordinary text, and whether it starts the input.
    Text(&'t str, bool),
    /// An added token's id.
    Added(u32),
}

impl Tokenizer {
    /// A stretch of text normalized, and whether it still starts at the stretch's start:
    /// Metaspace's `first` needs to know whether normalizing dropped the first characters
    /// (HF's alignments, see `normalize_from_start`).
    fn normalize_stretch<'t>(&self, text: &'t str, at_start: bool) -> (Cow<'t, str>, bool) {
        match &self.normalizer {
            Some(n) if at_start && self.pre.prepends_first_only() => n.normalize_from_start(text),
            Some(n) => (n.normalize(text), at_start),
            None => (Cow::Borrowed(text), at_start),
        }
    }

    fn spm_pieces_for_decode(&self) -> Result<&[crate::models::pieces::Piece]> {
        self.model.spm_pieces().ok_or_else(|| {
            Error::InvalidArgument("the sentencepiece decoder needs a sentencepiece model".into())
        })
    }

    /// The tokens decoding shows (HF's `skip_special_tokens`: special added tokens left out),
    /// as strings; an id outside the vocabulary is an error.
    fn shown_tokens<'a>(
        &'a self,
        ids: &'a [u32],
    ) -> impl Iterator<Item = Result<Cow<'a, str>>> + 'a {
        ids.iter()
            .filter(|id| {
                !self
                    .added_by_id
                    .get(id)
                    .is_some_and(|&i| self.added[i].special)
            })
            .map(|&id| {
                self.id_to_token(id).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "token id {id} is not in the vocabulary (size {})",
                        self.vocab_size()
                    ))
                })
            })
    }

    /// HF's `decode` with `skip_special_tokens`: the tokens' strings through each decoder;
    /// without a decoder they are joined by spaces, as HF does.
    fn decode_steps(&self, ids: &[u32], steps: &[DecodeStep]) -> Result<String> {
        let mut tokens = Vec::with_capacity(ids.len());
        for token in self.shown_tokens(ids) {
            tokens.push(token?.into_owned());
        }
        if steps.is_empty() {
            return Ok(tokens.join(" "));
        }
        for step in steps {
            tokens = step.apply(tokens);
        }
        Ok(tokens.concat())
    }

    /// The ordinary text of `text` as segments for the Unigram lattice: each stretch between
    /// added tokens normalized and pre-tokenized, the added tokens fixed.
    fn unigram_segments(&self, text: &str) -> Result<Vec<OwnedSegment>> {
        let mut segments = Vec::new();
        self.for_each_stretch(text, &AllowedSpecial::None, |stretch| {
            match stretch {
                Stretch::Added(id) => segments.push(OwnedSegment::Token(id)),
                Stretch::Text("", _) => {}
                Stretch::Text(t, at_start) => {
                    let (normalized, at_start) = self.normalize_stretch(t, at_start);
                    match &self.pre {
                        PreTokenizer::Whole => {
                            segments.push(OwnedSegment::Text(normalized.into_owned()))
                        }
                        pre => pre.for_each_piece(&normalized, at_start, &mut |p| {
                            segments.push(OwnedSegment::Text(p.to_string()))
                        })?,
                    }
                }
            }
            Ok(())
        })?;
        Ok(segments)
    }

    fn unigram_model(&self, what: &str) -> Result<&crate::models::unigram::UnigramModel> {
        self.model.as_unigram().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{what} needs a Unigram model, not {}",
                self.model.kind()
            ))
        })
    }

    /// The `n` best segmentations of `text` with their scores, best first, as sentencepiece's
    /// `NBestEncodeAsIds` gives them (added tokens that are not special are kept whole, special
    /// tokens are text). `n` is at most 512, as there; 0 and 1 give the best alone.
    pub fn encode_nbest(&self, text: &str, n: usize) -> Result<Vec<(Vec<u32>, f32)>> {
        let model = self.unigram_model("n-best encoding")?;
        if n > MAX_NBEST {
            return Err(Error::InvalidArgument(format!(
                "n must be at most {MAX_NBEST}, not {n}"
            )));
        }
        let owned = self.unigram_segments(text)?;
        let segments: Vec<Segment<'_>> = owned.iter().map(OwnedSegment::as_segment).collect();
        Ok(model.nbest(&segments, n))
    }

    /// One segmentation of `text` drawn for subword regularization, as sentencepiece's
    /// `SampleEncodeAsIds(text, nbest_size, alpha)`: `nbest_size < 0` samples every
    /// segmentation with probability proportional to `exp(alpha * score)`, `nbest_size > 1`
    /// one of the n best, 0 or 1 gives the best. The same `seed` gives the same draw.
    pub fn encode_sample(
        &self,
        text: &str,
        alpha: f32,
        nbest_size: i32,
        seed: u64,
    ) -> Result<Vec<u32>> {
        let model = self.unigram_model("sampling")?;
        check_sampling(alpha, nbest_size)?;
        let owned = self.unigram_segments(text)?;
        let segments: Vec<Segment<'_>> = owned.iter().map(OwnedSegment::as_segment).collect();
        Ok(model.sample(&segments, alpha, nbest_size, &mut SplitMix64::new(seed)))
    }

    /// [`Tokenizer::encode_sample`] of many texts in parallel; text `i` draws from a generator
    /// seeded by `seed` and `i`, so the output is the same at any thread count.
    pub fn encode_batch_sample(
        &self,
        texts: &[&str],
        alpha: f32,
        nbest_size: i32,
        seed: u64,
        num_threads: Option<usize>,
    ) -> Result<Vec<Vec<u32>>> {
        self.unigram_model("sampling")?;
        check_sampling(alpha, nbest_size)?;
        in_pool(num_threads, || {
            texts
                .par_iter()
                .enumerate()
                .map(|(i, t)| self.encode_sample(t, alpha, nbest_size, batch_seed(seed, i)))
                .collect::<Result<Vec<_>>>()
        })?
    }

    fn decode_wordpiece(&self, ids: &[u32], prefix: &str, cleanup: bool) -> Result<String> {
        let mut out = String::new();
        let mut first = true;
        for token in self.shown_tokens(ids) {
            let token = token?;
            let mut piece = match token.strip_prefix(prefix) {
                Some(rest) if !first => rest.to_string(),
                _ if first => token.to_string(),
                _ => format!(" {token}"),
            };
            if cleanup {
                piece = wordpiece_cleanup(&piece);
            }
            out.push_str(&piece);
            first = false;
        }
        Ok(out)
    }
}

/// A lattice segment that owns its text.
enum OwnedSegment {
    Text(String),
    Token(u32),
}

impl OwnedSegment {
    fn as_segment(&self) -> Segment<'_> {
        match self {
            OwnedSegment::Text(t) => Segment::Text(t),
            OwnedSegment::Token(id) => Segment::Token(*id),
        }
    }
}

/// sentencepiece's largest n-best size (`kMaxNBestSize`).
const MAX_NBEST: usize = 512;

/// sentencepiece refuses `nbest_size > 512` and an `alpha` that is negative or not finite.
fn check_sampling(alpha: f32, nbest_size: i32) -> Result<()> {
    if nbest_size > MAX_NBEST as i32 {
        return Err(Error::InvalidArgument(format!(
            "nbest_size must be at most {MAX_NBEST}, not {nbest_size}"
        )));
    }
    if !alpha.is_finite() || alpha < 0.0 {
        return Err(Error::InvalidArgument(format!(
            "alpha must be a finite number >= 0, not {alpha}"
        )));
    }
    Ok(())
}

/// The seed of text `i` of a batch: one SplitMix64 step from the batch seed and the index.
fn batch_seed(seed: u64, i: usize) -> u64 {
    SplitMix64::new(seed ^ (i as u64).wrapping_mul(0xd1b5_4a32_d192_ed03)).next_u64()
}

/// HF's `decoders::wordpiece::cleanup`, applied token by token as HF does.
fn wordpiece_cleanup(s: &str) -> String {
    s.replace(" .", ".")
        .replace(" ?", "?")
        .replace(" !", "!")
        .replace(" ,", ",")
        .replace(" ' ", "'")
        .replace(" n't", "n't")
        .replace(" 'm", "'m")
        .replace(" do not", " don't")
        .replace(" 's", "'s")
        .replace(" 've", "'ve")
        .replace(" 're", "'re")
}

/// Runs `work` on a pool of `num_threads` threads, or on rayon's global pool (all cores) when
/// `None` or 0.
pub(crate) fn in_pool<T: Send>(
    num_threads: Option<usize>,
    work: impl FnOnce() -> T + Send,
) -> Result<T> {
    Ok(run_on(thread_pool(num_threads)?.as_deref(), work))
}

/// Runs `work` on `pool`, or on rayon's global pool when `None` ([`thread_pool`]'s answer).
fn run_on<T: Send>(pool: Option<&rayon::ThreadPool>, work: impl FnOnce() -> T + Send) -> T {
    match pool {
        Some(pool) => pool.install(work),
        None => work(),
    }
}

/// A pool of `n` threads, or `None` for rayon's global pool (all cores). Pools are made once
/// per thread count and kept for the process (not for a forked child: see below).
//
// Why kept: a pool made per call starts new threads, and the per-thread caches that make
// repeated pieces cheap (the BPE piece cache, the Unigram word cache) die with them, so a
// caller passing `num_threads` to every batch (a pipeline stage, a notebook loop) encoded each
// batch cold and paid the threads' start as well. Idle rayon threads sleep; past
// `KEPT_POOLS` distinct counts a pool is made for the call alone, as before.
//
// Why by process: a forked child (multiprocessing's "fork", `datasets.map(num_proc=...)`)
// inherits the map but not the pools' threads, and a job given to a pool with no threads
// waits forever. The child starts an empty map; the parent's pools are leaked there, not
// dropped, since dropping one wakes threads through locks the fork may have caught held.
fn thread_pool(num_threads: Option<usize>) -> Result<Option<Arc<rayon::ThreadPool>>> {
    const KEPT_POOLS: usize = 8;
    type Pools = (u32, FxHashMap<usize, Arc<rayon::ThreadPool>>);
    static POOLS: OnceLock<Mutex<Pools>> = OnceLock::new();
    let n = match num_threads {
        None | Some(0) => return Ok(None),
        Some(n) => n,
    };
    let build = || {
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .map(Arc::new)
            .map_err(|e| Error::InvalidArgument(format!("cannot start {n} threads: {e}")))
    };
    // A poisoned lock only means another thread panicked while inserting; the map is whole.
    let mut guard = POOLS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let (owner, pools) = &mut *guard;
    let pid = std::process::id();
    if *owner != pid {
        std::mem::forget(std::mem::take(pools));
        *owner = pid;
    }
    if let Some(pool) = pools.get(&n) {
        return Ok(Some(Arc::clone(pool)));
    }
    let pool = build()?;
    if pools.len() < KEPT_POOLS {
        pools.insert(n, Arc::clone(&pool));
    }
    Ok(Some(pool))
}

/// The chunks of [`Tokenizer::encode_batch_chunked`] that the pool has finished (the index
/// of each one's first text, and its ids) and the calling thread has not taken yet.
struct Slots {
    finished: Vec<(usize, Result<Vec<Vec<u32>>>)>,
    ended: bool,
}

/// Runs its closure when dropped, unwinding included.
struct OnDrop<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// Consecutive runs of `texts` of about `chunk_bytes` each (at least one text per run).
fn chunks_by_bytes<'a, 't>(
    texts: &'a [&'t str],
    chunk_bytes: usize,
) -> impl Iterator<Item = &'a [&'t str]> {
    let mut rest = texts;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut size = 0;
        let end = rest
            .iter()
            .position(|t| {
                size += t.len();
                size >= chunk_bytes
            })
            .map_or(rest.len(), |i| i + 1);
        let (chunk, tail) = rest.split_at(end);
        rest = tail;
        Some(chunk)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::bpe::BpeModel;

    /// Bytes plus a few merges, enough for multi-token pieces.
    fn tokenizer() -> Tokenizer {
        let mut vocab: Vec<(Vec<u8>, u32)> = (0..=255u8).map(|b| (vec![b], b as u32)).collect();
        for (i, t) in ["th", "the", " the", "in", "ing", " a", "er"]
            .iter()
            .enumerate()
        {
            vocab.push((t.as_bytes().to_vec(), 256 + i as u32));
        }
        Tokenizer::new(
            PreTokenizer::new("gpt2").unwrap(),
            BpeModel::from_ranks(vocab, "test").unwrap(),
            vec![],
        )
        .unwrap()
    }

    #[test]
    fn a_short_text_is_encoded_into_the_vector_it_starts_with() {
        // The byte-level encoder makes room for a cache slot's three id places before copying
        // them; the vector sized for a short text must have that room, or it is grown (a
        // reallocation per short text; `Vec::with_capacity` gives exactly what it is asked).
        let tok = tokenizer();
        for text in ["the", "in", "the in", " a the", "the the the", "hello"] {
            for pass in ["a miss", "a hit"] {
                let ids = tok.encode(text, &AllowedSpecial::None).unwrap();
                assert_eq!(ids.capacity(), tok.ids_capacity(text), "{text:?}, {pass}");
            }
        }
    }

    #[test]
    fn added_tokens_far_past_the_vocabulary_are_refused() {
        let model = tokenizer().model().as_bpe().unwrap().clone();
        let pre = || PreTokenizer::new("gpt2").unwrap();
        let err = Tokenizer::new(
            pre(),
            model.clone(),
            vec![AddedToken::special("<big>", 1 << 31)],
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "special token \"<big>\" has id 2147483648, far past the vocabulary size 264 \
             (ids must be below 1049104)"
        );
        // Below the limit, however sparse, is fine (cl100k's special tokens leave gaps).
        let id = crate::models::id_limit(264) - 1;
        let tok = Tokenizer::new(pre(), model, vec![AddedToken::special("<last>", id)]).unwrap();
        assert_eq!(tok.vocab_size(), id as usize + 1);
    }

    #[test]
    fn long_added_tokens_are_found_by_an_nfa() {
        // A DFA of one 64 KB token of one repeated byte took aho-corasick a minute to build.
        let long = "x".repeat(1 << 16);
        let model = tokenizer().model().as_bpe().unwrap().clone();
        let added = vec![AddedToken::special(long.clone(), 300)];
        let tok = Tokenizer::new(PreTokenizer::new("gpt2").unwrap(), model, added).unwrap();
        let matcher = tok.added_matcher.as_ref().unwrap();
        assert_eq!(matcher.kind(), AhoCorasickKind::ContiguousNFA);
        let text = format!("a{long}b");
        let ids = tok.encode(&text, &AllowedSpecial::All).unwrap();
        assert_eq!(ids, vec![b'a' as u32, 300, b'b' as u32]);
        // Short ones keep the DFA, the fastest to search.
        assert_eq!(
            tokenizer_with_specials(&["<|endoftext|>", "<|fim|>"])
                .added_matcher
                .unwrap()
                .kind(),
            AhoCorasickKind::DFA
        );
    }

    fn tokenizer_with_specials(specials: &[&str]) -> Tokenizer {
        let model = tokenizer().model().as_bpe().unwrap().clone();
        let added = specials
            .iter()
            .enumerate()
            .map(|(i, t)| AddedToken::special(*t, 300 + i as u32))
            .collect();
        Tokenizer::new(PreTokenizer::new("gpt2").unwrap(), model, added).unwrap()
    }

    #[test]
    fn messages_show_a_long_special_token_cut_short() {
        let long = "s".repeat(5_000_000);
        let model = tokenizer().model().as_bpe().unwrap().clone();
        let err = Tokenizer::new(
            PreTokenizer::new("gpt2").unwrap(),
            model,
            vec![AddedToken::special(long, 5)],
        )
        .unwrap_err()
        .to_string();
        assert!(err.len() < 200, "{} bytes", err.len());
        assert!(
            err.contains("… (5000000 bytes) has id 5, which an ordinary token already has"),
            "{err}"
        );
    }

    #[test]
    fn chunked_batches_give_the_ids_of_the_whole_batch_in_order() {
        let tok = tokenizer();
        let owned: Vec<String> = (0..500)
            .map(|i| "the thing a ringer ".repeat(i % 37) + &i.to_string())
            .collect();
        let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
        let whole = tok
            .encode_batch(&texts, &AllowedSpecial::None, Some(1))
            .unwrap();
        for (threads, chunk_bytes) in [
            (None, 1),
            (Some(1), 100),
            (Some(2), 1000),
            (Some(3), 1 << 30),
        ] {
            let mut got = vec![None; texts.len()];
            tok.encode_batch_chunked(
                &texts,
                &AllowedSpecial::None,
                false,
                threads,
                chunk_bytes,
                |first, chunk| {
                    for (i, ids) in chunk.into_iter().enumerate() {
                        assert!(
                            got[first + i].is_none(),
                            "text {} handed over twice",
                            first + i
                        );
                        got[first + i] = Some(ids);
                    }
                    ControlFlow::Continue(())
                },
            )
            .unwrap();
            let got: Vec<Vec<u32>> = got
                .into_iter()
                .map(|ids| ids.expect("every text"))
                .collect();
            assert_eq!(got, whole, "threads {threads:?}, chunk {chunk_bytes}");
        }
        // Break stops the batch: no more chunks are handed over.
        let mut calls = 0;
        tok.encode_batch_chunked(
            &texts,
            &AllowedSpecial::None,
            false,
            Some(2),
            100,
            |_, _| {
                calls += 1;
                ControlFlow::Break(())
            },
        )
        .unwrap();
        assert_eq!(calls, 1);
        // An empty batch hands nothing over.
        tok.encode_batch_chunked(&[], &AllowedSpecial::None, false, None, 100, |_, _| {
            panic!("no chunk expected")
        })
        .unwrap();
    }

    #[test]
    fn pools_are_kept_per_thread_count() {
        // A second call with the same count runs on the same threads (their caches stay warm).
        let ids = |n| {
            let pool = thread_pool(Some(n)).unwrap().unwrap();
            let mut ids: Vec<_> = pool.broadcast(|_| std::thread::current().id());
            ids.sort_by_key(|id| format!("{id:?}"));
            (pool.current_num_threads(), ids)
        };
        let (count, first) = ids(3);
        assert_eq!(count, 3);
        assert_eq!(ids(3).1, first);
        let (count, other) = ids(2);
        assert_eq!(count, 2);
        assert!(other.iter().all(|id| !first.contains(id)));
        assert!(thread_pool(None).unwrap().is_none() && thread_pool(Some(0)).unwrap().is_none());
    }
}
