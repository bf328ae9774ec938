//! The Unigram trainer: sentencepiece's `unigram_model_trainer` algorithm (Kudo 2018), in Rust.
//!
//! 1. Counting ([`UnigramTrainer::feed`], [`UnigramTrainer::feed_files`]): each line is a
//!    sentence, normalized by the encoder's sentencepiece normalizer (the rule's precompiled
//!    charsmap, the whitespace rules, spaces escaped to `▁`), so training sees the text exactly
//!    as the trained tokenizer will, then cut into words that start at `▁` ([`words`]), and,
//!    with [`UnigramTrainer::feed_cut`], also where a pre-segmenter cut between two Han
//!    characters ([`cuts`]). Distinct words are counted on all cores; memory is the word table.
//! 2. Alphabet: the most frequent characters covering `character_coverage` of the corpus; the
//!    others become the unknown character.
//! 3. Seeds ([`seeds`]): the characters and the `seed_sentencepiece_size` most frequent × longest
//!    repeated substrings of the words, found with a suffix array.
//! 4. EM ([`em`]): `num_sub_iterations` rounds of expected counts by forward-backward over each
//!    word's lattice and the Bayesian digamma update, then pruning to `shrinking_factor` of the
//!    pieces by likelihood loss, until at most 1.1 × the wanted size is left.
//! 5. Finalizing: the required characters, then the best-scoring pieces up to `vocab_size`, meta
//!    pieces (`<unk>`, `<s>`, `</s>`, `<pad>`, user-defined and control symbols, the 256 byte
//!    pieces with `byte_fallback`) at their ids and the rest in falling score order.
//!
//! Training returns the pieces with their types ([`UnigramPieces`]: the meta pieces are the
//! special tokens) and what it read and did. The tokenizer is the `.model` sentencepiece would
//! write for these pieces and options, loaded as any `.model`
//! ([`crate::assembly::unigram_tokenizer`]).
//!
//! The result is the same for any number of threads.
//!
//! (Over 500 lines: 171 of them are its unit tests and about 85 the documented options; the steps
//! are in the submodules, and what is left here is the driver that runs them and the finalizing.)

mod cuts;
mod em;
mod seeds;
mod trie;
mod words;

use crate::corpus::{self, CorpusOptions, CorpusReport};
use crate::error::{Error, Result};
use crate::models::base::Trainer;
use crate::models::piece_counter::CorpusCounts;
use crate::models::pieces::PieceKind;
use crate::models::pre_segment::{self, CutText};
use crate::normalizers::spm_rules;
use em::Model;
use rustc_hash::{FxHashMap, FxHashSet};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use words::{Alphabet, PieceRules, SentenceSplitter, SentenceStats, Words};

/// The trainer's options, named as sentencepiece's `TrainerSpec` names them; the defaults are
/// sentencepiece's.
#[derive(Clone, Debug)]
pub struct UnigramTrainerConfig {
    /// Pieces in the result, meta pieces included.
    pub vocab_size: usize,
    /// Share of character occurrences the alphabet must cover (0.98 to 1; 1 for small
    /// alphabets, 0.9995 suits Chinese and Japanese).
    pub character_coverage: f64,
    /// Longest piece, in characters.
    pub max_sentencepiece_length: usize,
    /// Substrings kept as seeds, besides the characters.
    pub seed_sentencepiece_size: usize,
    /// Share of the pieces each pruning round keeps.
    pub shrinking_factor: f64,
    /// EM rounds between two prunings.
    pub num_sub_iterations: usize,
    /// Sentences longer than this, in bytes, are skipped (and counted).
    pub max_sentence_length: usize,
    /// Cut sentences into words at `▁` (pieces then never span words).
    pub split_by_whitespace: bool,
    /// A piece holds one Unicode script (Hiragana and Katakana count as Han).
    pub split_by_unicode_script: bool,
    /// Digits are a script of their own.
    pub split_by_number: bool,
    /// Every digit is a piece on its own.
    pub split_digits: bool,
    /// Put `▁` before each sentence, so a word is the same piece first or not.
    pub add_dummy_prefix: bool,
    /// Drop leading, trailing and repeated spaces (after the rule, which maps tabs and line
    /// breaks to spaces under `nmt_nfkc`).
    pub remove_extra_whitespaces: bool,
    pub unk_id: u32,
    pub bos_id: Option<u32>,
    pub eos_id: Option<u32>,
    pub pad_id: Option<u32>,
    pub unk_piece: String,
    pub bos_piece: String,
    pub eos_piece: String,
    pub pad_piece: String,
    /// Pieces always kept whole in text (they never split); ids after the special ones.
    pub user_defined_symbols: Vec<String>,
    /// Pieces that never come out of text (ids only).
    pub control_symbols: Vec<String>,
    /// Add the 256 `<0xNN>` byte pieces, so unknown characters encode as bytes.
    pub byte_fallback: bool,
    /// sentencepiece's normalization rule, applied to every sentence before training and by
    /// the trained tokenizer: `nmt_nfkc` (sentencepiece's default), `nfkc`, `nmt_nfkc_cf`,
    /// `nfkc_cf` or `identity` (see [`spm_rules`]).
    pub normalization: String,
    pub show_progress: bool,
}

impl Default for UnigramTrainerConfig {
    fn default() -> Self {
        UnigramTrainerConfig {
            vocab_size: 8000,
            character_coverage: 0.9995,
            max_sentencepiece_length: 16,
            seed_sentencepiece_size: 1_000_000,
            shrinking_factor: 0.75,
            num_sub_iterations: 2,
            max_sentence_length: 4192,
            split_by_whitespace: true,
            split_by_unicode_script: true,
            split_by_number: true,
            split_digits: false,
            add_dummy_prefix: true,
            remove_extra_whitespaces: true,
            unk_id: 0,
            bos_id: Some(1),
            eos_id: Some(2),
            pad_id: None,
            unk_piece: "<unk>".into(),
            bos_piece: "<s>".into(),
            eos_piece: "</s>".into(),
            pad_piece: "<pad>".into(),
            user_defined_symbols: Vec::new(),
            control_symbols: Vec::new(),
            byte_fallback: false,
            normalization: spm_rules::DEFAULT_RULE.into(),
            show_progress: false,
        }
    }
}

/// What training read and did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct UnigramTrainStats {
    /// Sentences (lines) used.
    pub sentences: u64,
    /// Sentences skipped as longer than `max_sentence_length`.
    pub skipped_too_long: u64,
    /// Sentences skipped for holding U+2585, which sentencepiece reserves.
    pub skipped_reserved_char: u64,
    /// Distinct words.
    pub words: usize,
    /// Characters in the alphabet.
    pub required_chars: usize,
    /// Seed pieces, characters included.
    pub seed_pieces: usize,
    /// EM steps run.
    pub em_steps: usize,
    /// Negative log-likelihood per word occurrence after the last EM step.
    pub objective: f64,
}

/// A trained Unigram vocabulary: the model's pieces, whose types mark the special tokens (the
/// meta pieces: unknown, control, user-defined and byte pieces), and what training did.
#[derive(Clone, Debug, PartialEq)]
pub struct UnigramPieces {
    /// `(piece, score, kind)` in id order; meta pieces score 0.
    pub pieces: Vec<(String, f64, PieceKind)>,
    pub stats: UnigramTrainStats,
}

/// Counts words, then learns the pieces. Feed it texts and/or files, then call `train`.
pub struct UnigramTrainer {
    config: UnigramTrainerConfig,
    /// `(id, piece, kind)` by id.
    meta: Vec<(u32, String, PieceKind)>,
    splitter: Arc<SentenceSplitter>,
    stats: Arc<SentenceStats>,
    counts: CorpusCounts,
}

impl std::fmt::Debug for UnigramTrainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UnigramTrainer")
            .field("config", &self.config)
            .field("distinct_words", &self.counts.counts.len())
            .field("fed_bytes", &self.counts.fed_bytes)
            .finish()
    }
}

/// sentencepiece's layout of meta pieces: `<unk>`, `<s>`, `</s>`, `<pad>` at their ids, then
/// control symbols, user-defined symbols and byte pieces at the lowest free ids, in that order.
/// A control or user-defined symbol spelled like `<s>`, `</s>` or `<pad>` changes that
/// piece's kind instead of taking a new id.
fn meta_pieces(c: &UnigramTrainerConfig) -> Result<Vec<(u32, String, PieceKind)>> {
    let bad = |m: String| Err(Error::InvalidArgument(m));
    let mut by_id: std::collections::BTreeMap<u32, (String, PieceKind)> = Default::default();
    let specials = [
        (Some(c.unk_id), &c.unk_piece, "unk_id", PieceKind::Unknown),
        (c.bos_id, &c.bos_piece, "bos_id", PieceKind::Control),
        (c.eos_id, &c.eos_piece, "eos_id", PieceKind::Control),
        (c.pad_id, &c.pad_piece, "pad_id", PieceKind::Control),
    ];
    for (id, piece, name, kind) in specials {
        let Some(id) = id else { continue };
        if id as usize >= c.vocab_size {
            return bad(format!(
                "{name} {id} is not below vocab_size {}",
                c.vocab_size
            ));
        }
        if piece.is_empty() {
            return bad(format!("the piece of {name} is empty"));
        }
        if let Some((other, _)) = by_id.get(&id) {
            return bad(format!("{name} {id} is already the id of {other:?}"));
        }
        if by_id.values().any(|(p, _)| p == piece) {
            return bad(format!("{piece:?} is given two ids"));
        }
        by_id.insert(id, (piece.clone(), kind));
    }
    let bytes: Vec<String> = if c.byte_fallback {
        (0..=255u8).map(|b| format!("<0x{b:02X}>")).collect()
    } else {
        Vec::new()
    };
    let symbols = c
        .control_symbols
        .iter()
        .map(|s| (s, PieceKind::Control))
        .chain(
            c.user_defined_symbols
                .iter()
                .map(|s| (s, PieceKind::UserDefined)),
        )
        .chain(bytes.iter().map(|s| (s, PieceKind::Byte)));
    let mut seen = FxHashSet::default();
    let mut next = 0u32;
    for (symbol, kind) in symbols {
        if symbol.is_empty() {
            return bad("control and user-defined symbols must not be empty".into());
        }
        if !seen.insert(symbol.as_str()) {
            return bad(format!(
                "{symbol:?} is given twice: symbols must be distinct"
            ));
        }
        if *symbol == c.unk_piece {
            return bad(format!(
                "{symbol:?} is the unknown piece; it cannot be a control or user-defined symbol"
            ));
        }
        if let Some((_, existing)) = by_id.values_mut().find(|(p, _)| p == symbol) {
            *existing = kind;
            continue;
        }
        while by_id.contains_key(&next) {
            next += 1;
        }
        by_id.insert(next, (symbol.clone(), kind));
    }
    if let Some((&id, _)) = by_id.last_key_value() {
        if id as usize >= c.vocab_size {
            return bad(format!(
                "vocab_size {} cannot hold the {} meta pieces (special, control, user-defined and byte pieces)",
                c.vocab_size,
                by_id.len()
            ));
        }
    }
    Ok(by_id.into_iter().map(|(id, (p, k))| (id, p, k)).collect())
}

impl UnigramTrainer {
    pub fn new(config: UnigramTrainerConfig) -> Result<Self> {
        let bad = |m: String| Err(Error::InvalidArgument(m));
        if config.vocab_size == 0 || config.vocab_size > (1 << 30) {
            return bad(format!("vocab_size {} is out of range", config.vocab_size));
        }
        if !(0.98..=1.0).contains(&config.character_coverage) {
            return bad(format!(
                "character_coverage {} is outside 0.98..=1.0",
                config.character_coverage
            ));
        }
        if !(1..=512).contains(&config.max_sentencepiece_length) {
            return bad(format!(
                "max_sentencepiece_length {} is outside 1..=512",
                config.max_sentencepiece_length
            ));
        }
        if !(config.shrinking_factor > 0.0 && config.shrinking_factor < 1.0) {
            return bad(format!(
                "shrinking_factor {} is not between 0 and 1",
                config.shrinking_factor
            ));
        }
        if config.num_sub_iterations == 0 || config.seed_sentencepiece_size == 0 {
            return bad("num_sub_iterations and seed_sentencepiece_size must be positive".into());
        }
        if config.max_sentence_length == 0 {
            return bad("max_sentence_length must be positive".into());
        }
        let meta = meta_pieces(&config)?;
        let meta_strings: Vec<&str> = meta.iter().map(|(_, p, _)| p.as_str()).collect();
        // sentencepiece's trainer normalizes user-defined symbols with the rest of the text
        // (its normalizer has no prefix matcher then), so this one knows none either.
        let normalizer = spm_rules::trainer_normalizer(
            &config.normalization,
            config.add_dummy_prefix,
            config.remove_extra_whitespaces,
        )?;
        let splitter = SentenceSplitter::new(
            normalizer,
            config.split_by_whitespace,
            config.max_sentence_length,
            &meta_strings,
        );
        Ok(UnigramTrainer {
            config,
            meta,
            splitter: Arc::new(splitter),
            stats: Arc::default(),
            counts: CorpusCounts::default(),
        })
    }

    /// The options this trainer was made with, which the tokenizer's `.model` records.
    pub fn config(&self) -> &UnigramTrainerConfig {
        &self.config
    }

    fn progress_bar(&self, len: u64, template: &str) -> indicatif::ProgressBar {
        if !self.config.show_progress {
            return indicatif::ProgressBar::hidden();
        }
        let style = indicatif::ProgressStyle::with_template(template)
            .expect("progress templates are valid");
        indicatif::ProgressBar::new(len).with_style(style)
    }

    /// Counts the words of `texts`; every line of a text is a sentence. May be called many
    /// times.
    pub fn feed(&mut self, texts: &[&str]) -> Result<()> {
        let (splitter, stats) = (&self.splitter, &self.stats);
        self.counts.feed(texts, &|text, counter| {
            splitter.count_text(text, counter, stats);
            Ok(())
        })
    }

    /// [`UnigramTrainer::feed`] with pre-segmentation: each text's `cuts` are places where
    /// a word segmenter (jieba) put a boundary, and no piece is learned across one that falls
    /// between two Han characters. The text is counted as it is (no `▁` is added at a cut),
    /// so the trained model needs no segmenter to encode.
    pub fn feed_cut(&mut self, texts: &[CutText<'_>]) -> Result<()> {
        pre_segment::check_cuts(texts)?;
        let (splitter, stats) = (&self.splitter, &self.stats);
        self.counts.feed_items(
            texts,
            |t| t.text.len(),
            |t, counter| {
                splitter.count_cut_text(t.text, t.cuts, counter, stats);
                Ok(())
            },
        )
    }

    /// Streams `paths` (txt, jsonl, json, optionally .gz/.zst; see [`crate::corpus`]) and
    /// counts their words: a text file's every line is a sentence, a JSON record's text is cut
    /// into lines too.
    pub fn feed_files(&mut self, paths: &[PathBuf], opts: &CorpusOptions) -> Result<CorpusReport> {
        let total_bytes = corpus::check_paths(paths)?;
        let progress = self.progress_bar(
            total_bytes,
            "{msg} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec})",
        );
        progress.set_message("reading");
        let (splitter, stats) = (&self.splitter, &self.stats);
        self.counts
            .feed_files(paths, opts, &progress, &|text, counter| {
                splitter.count_text(text, counter, stats);
                Ok(())
            })
    }

    /// Learns the pieces from everything fed so far.
    pub fn train(mut self) -> Result<UnigramPieces> {
        let counted = std::mem::take(&mut self.counts);
        let c = &self.config;
        let mut stats = UnigramTrainStats {
            sentences: self.stats.sentences.load(Ordering::Relaxed),
            skipped_too_long: self.stats.too_long.load(Ordering::Relaxed),
            skipped_reserved_char: self.stats.reserved_char.load(Ordering::Relaxed),
            ..Default::default()
        };
        if counted.fed_bytes == 0 {
            return Err(Error::Corpus(
                "no text to train on: the corpus is empty".into(),
            ));
        }
        if counted.counts.len() == 0 {
            return Err(Error::Corpus(format!(
                "no sentence to train on: {} longer than max_sentence_length {} bytes, {} holding the reserved character U+2585, the rest empty",
                stats.skipped_too_long, c.max_sentence_length, stats.skipped_reserved_char
            )));
        }
        // Words in a fixed order (the counter's depends on the threads that filled it).
        let mut word_list: Vec<(&str, u64)> = counted
            .counts
            .iter()
            .map(|(w, n)| (std::str::from_utf8(w).expect("words are cut from str"), n))
            .collect();
        word_list.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        stats.words = word_list.len();

        let mut char_counts: FxHashMap<char, u64> = FxHashMap::default();
        for &(w, n) in &word_list {
            for ch in w.chars() {
                *char_counts.entry(ch).or_default() += n;
            }
        }
        let required = words::required_chars(&char_counts, c.character_coverage);
        stats.required_chars = required.len();
        if required.len() + self.meta.len() > c.vocab_size {
            return Err(Error::InvalidArgument(format!(
                "vocab_size {} is smaller than the {} required characters and {} meta pieces: increase vocab_size or lower character_coverage",
                c.vocab_size,
                required.len(),
                self.meta.len()
            )));
        }
        let alphabet = Alphabet::new(&required);
        let mut words = Words {
            starts: Vec::with_capacity(word_list.len() + 1),
            counts: Vec::with_capacity(word_list.len()),
            ..Default::default()
        };
        words.starts.push(0);
        for &(w, n) in &word_list {
            words.chars.extend(w.chars().map(|ch| alphabet.id(ch)));
            words.starts.push(words.chars.len() as u32);
            words.counts.push(n);
        }
        drop(word_list);
        drop(counted);

        let rules = PieceRules {
            max_piece_length: c.max_sentencepiece_length,
            split_by_whitespace: c.split_by_whitespace,
            split_by_unicode_script: c.split_by_unicode_script,
            split_by_number: c.split_by_number,
            split_digits: c.split_digits,
        };
        let progress = self.progress_bar(0, "{spinner} [{elapsed_precise}] {msg}");
        progress.set_message("making seed pieces");
        let seeds = seeds::seed_pieces(&words, &alphabet, &rules, c.seed_sentencepiece_size)?;
        stats.seed_pieces = seeds.len();
        // Character ids run to the unknown character's.
        let alphabet_bound = alphabet.len() + 1;
        let mut model = Model::new(seeds, alphabet_bound);

        // sentencepiece stops pruning at 1.1 × the wanted size, leaving the finalizing cut
        // to pick by score among a few more pieces than needed.
        let desired = (c.vocab_size as f64 * 1.1) as usize;
        loop {
            for _ in 0..c.num_sub_iterations {
                let (expected, objective) = em::e_step(&words, &model);
                let pieces = em::m_step(&model.pieces, &expected);
                if pieces.len() == 0 {
                    return Err(Error::Corpus(
                        "too little text to train on: no piece is expected to occur".into(),
                    ));
                }
                model = Model::new(pieces, alphabet_bound);
                stats.em_steps += 1;
                stats.objective = objective;
                progress.set_message(format!(
                    "EM step {}: {} pieces, objective {objective:.4}",
                    stats.em_steps,
                    model.len()
                ));
                progress.tick();
            }
            if model.len() <= desired {
                break;
            }
            let before = model.len();
            let pieces = em::prune(&words, &model, desired, c.shrinking_factor);
            model = Model::new(pieces, alphabet_bound);
            if model.len() == before {
                break; // nothing left that pruning may remove
            }
        }
        progress.finish_and_clear();
        let wanted = c.vocab_size - self.meta.len();
        let normal = finalize(&model, &alphabet, &required, wanted);
        if normal.len() < wanted {
            return Err(Error::InvalidArgument(format!(
                "vocab_size {} is too large for this corpus, which yields {} pieces: set it to at most {}",
                c.vocab_size,
                normal.len(),
                normal.len() + self.meta.len()
            )));
        }
        Ok(self.assemble(normal, stats))
    }

    /// Ids for everything: meta pieces at theirs, normal pieces in the free ones in order.
    fn assemble(&self, normal: Vec<(String, f64)>, stats: UnigramTrainStats) -> UnigramPieces {
        let c = &self.config;
        let mut pieces = Vec::with_capacity(c.vocab_size);
        let mut meta = self.meta.iter().peekable();
        let mut normal = normal.into_iter();
        for id in 0..c.vocab_size as u32 {
            match meta.peek() {
                Some((meta_id, piece, kind)) if *meta_id == id => {
                    pieces.push((piece.clone(), 0.0, *kind));
                    meta.next();
                }
                _ => {
                    let (piece, score) = normal.next().expect("finalize fills the vocabulary");
                    pieces.push((piece, score, PieceKind::Normal));
                }
            }
        }
        UnigramPieces { pieces, stats }
    }
}

impl Trainer for UnigramTrainer {
    type Trained = UnigramPieces;

    fn feed(&mut self, texts: &[&str]) -> Result<()> {
        UnigramTrainer::feed(self, texts)
    }

    fn feed_files(&mut self, paths: &[PathBuf], opts: &CorpusOptions) -> Result<CorpusReport> {
        UnigramTrainer::feed_files(self, paths, opts)
    }

    fn train(self) -> Result<UnigramPieces> {
        UnigramTrainer::train(self)
    }
}

/// The `size` normal pieces (fewer when the model has fewer), by falling score: every required character (one the EM dropped
/// scores just under the lowest piece, rarer characters lower), then the best of the rest.
fn finalize(
    model: &Model,
    alphabet: &Alphabet,
    required: &[(char, u64)],
    size: usize,
) -> Vec<(String, f64)> {
    let scores: FxHashMap<&[u32], f64> = (0..model.len())
        .map(|i| (model.pieces.piece(i), model.pieces.scores[i]))
        .collect();
    let mut chosen: FxHashSet<Vec<u32>> = FxHashSet::default();
    let mut out: Vec<(Vec<u32>, f64)> = Vec::with_capacity(size);
    // sentencepiece adds the penalty to the lowest score; subtracting it keeps rarer
    // characters below more frequent ones, which is what the penalty is for.
    let mut penalty = 0.0;
    for (id, _) in required.iter().enumerate() {
        let piece = vec![id as u32];
        let score = scores.get(&piece[..]).copied().unwrap_or_else(|| {
            penalty += 1e-4;
            model.min_score - penalty
        });
        chosen.insert(piece.clone());
        out.push((piece, score));
    }
    let mut rest: Vec<usize> = (0..model.len())
        .filter(|&i| !chosen.contains(model.pieces.piece(i)))
        .collect();
    let by_score = |a: &(f64, &[u32]), b: &(f64, &[u32])| b.0.total_cmp(&a.0).then(a.1.cmp(b.1));
    rest.sort_unstable_by(|&a, &b| {
        by_score(
            &(model.pieces.scores[a], model.pieces.piece(a)),
            &(model.pieces.scores[b], model.pieces.piece(b)),
        )
    });
    for i in rest {
        if out.len() >= size {
            break;
        }
        out.push((model.pieces.piece(i).to_vec(), model.pieces.scores[i]));
    }
    let mut spelled: Vec<(String, f64, Vec<u32>)> = out
        .into_iter()
        .map(|(p, s)| (alphabet.spell(&p), s, p))
        .collect();
    spelled.sort_by(|a, b| by_score(&(a.1, &a.2[..]), &(b.1, &b.2[..])));
    spelled.into_iter().map(|(p, s, _)| (p, s)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::shared_text as corpus;

    fn train(text: &str, config: UnigramTrainerConfig, threads: usize) -> Result<UnigramPieces> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut trainer = UnigramTrainer::new(config)?;
            trainer.feed(&[text])?;
            trainer.train()
        })
    }

    #[test]
    fn trains_exactly_vocab_size_with_required_chars_and_meta_pieces() {
        let text = corpus("botchan.txt");
        // The identity rule keeps every character, so the alphabet is the text's.
        let config = UnigramTrainerConfig {
            vocab_size: 1000,
            character_coverage: 1.0,
            user_defined_symbols: vec!["<sep>".into()],
            normalization: "identity".into(),
            ..Default::default()
        };
        let got = train(&text, config.clone(), 2).unwrap();
        assert_eq!(got.pieces.len(), 1000);
        assert_eq!(
            got.pieces[0],
            ("<unk>".to_string(), 0.0, PieceKind::Unknown)
        );
        assert_eq!(got.pieces[1].0, "<s>");
        assert_eq!(got.pieces[2].0, "</s>");
        assert_eq!(
            got.pieces[3],
            ("<sep>".to_string(), 0.0, PieceKind::UserDefined)
        );
        let pieces: FxHashSet<&str> = got.pieces.iter().map(|p| p.0.as_str()).collect();
        assert_eq!(pieces.len(), 1000, "pieces are distinct");
        for ch in text.chars().filter(|c| !c.is_whitespace()) {
            assert!(pieces.contains(ch.to_string().as_str()), "{ch:?} missing");
        }
        // Normal pieces come by falling score.
        let scores: Vec<f64> = got.pieces[4..].iter().map(|p| p.1).collect();
        assert!(scores.windows(2).all(|w| w[0] >= w[1]));
        // Coverage 1: every character but the space and the line break is required, and `▁`.
        let distinct: FxHashSet<char> = text.chars().filter(|&c| c != ' ' && c != '\n').collect();
        assert_eq!(got.stats.required_chars, distinct.len() + 1);
        assert!(pieces.contains("▁"));
    }

    #[test]
    fn no_piece_crosses_a_cut_and_the_text_is_unchanged() {
        // 天气 and 今天 each follow the other often: uncut, 今天天气 is the best piece.
        let line = "今天天气很好 今天天气";
        let text = format!("{line}\n").repeat(50);
        // Cut 今天|天气 in both places (bytes 6 and 25), 很|好 is left whole.
        let cuts: Vec<usize> = (0..50)
            .flat_map(|i| [i * (line.len() + 1) + 6, i * (line.len() + 1) + 25])
            .collect();
        let config = UnigramTrainerConfig {
            vocab_size: 12,
            character_coverage: 1.0,
            ..Default::default()
        };
        let pieces = |cut: bool| -> FxHashSet<String> {
            let mut trainer = UnigramTrainer::new(config.clone()).unwrap();
            let cuts: &[usize] = if cut { &cuts } else { &[] };
            trainer.feed_cut(&[CutText { text: &text, cuts }]).unwrap();
            trainer
                .train()
                .unwrap()
                .pieces
                .into_iter()
                .map(|p| p.0)
                .collect()
        };
        let uncut = pieces(false);
        assert!(uncut.iter().any(|p| p.contains("天天")), "{uncut:?}");
        let cut = pieces(true);
        assert!(cut.iter().all(|p| !p.contains("天天")), "{cut:?}");
        // The cut words still start with ▁ where the text had a space, and nowhere else.
        assert!(
            cut.contains("▁今天") && cut.contains("天气") && !cut.contains("▁天气"),
            "{cut:?}"
        );
        let mut trainer = UnigramTrainer::new(config).unwrap();
        let err = trainer.feed_cut(&[CutText {
            text: &text,
            cuts: &[9, 3],
        }]);
        assert!(matches!(err, Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn same_pieces_for_one_and_two_threads() {
        let text = corpus("botchan.txt");
        let config = UnigramTrainerConfig {
            vocab_size: 800,
            ..Default::default()
        };
        let one = train(&text, config.clone(), 1).unwrap();
        let two = train(&text, config, 2).unwrap();
        assert_eq!(one, two);
    }

    #[test]
    fn byte_fallback_and_special_ids() {
        let text = corpus("botchan.txt");
        let config = UnigramTrainerConfig {
            vocab_size: 600,
            byte_fallback: true,
            unk_id: 3,
            bos_id: None,
            eos_id: Some(0),
            pad_id: Some(1),
            control_symbols: vec!["<cls>".into()],
            ..Default::default()
        };
        let got = train(&text, config, 2).unwrap();
        let kinds: Vec<(&str, PieceKind)> = got.pieces[..6]
            .iter()
            .map(|p| (p.0.as_str(), p.2))
            .collect();
        assert_eq!(
            kinds,
            [
                ("</s>", PieceKind::Control),
                ("<pad>", PieceKind::Control),
                ("<cls>", PieceKind::Control),
                ("<unk>", PieceKind::Unknown),
                ("<0x00>", PieceKind::Byte),
                ("<0x01>", PieceKind::Byte),
            ]
        );
        assert_eq!(got.pieces[259], ("<0xFF>".into(), 0.0, PieceKind::Byte));
        assert_eq!(got.pieces[260].2, PieceKind::Normal);
        assert_eq!(got.pieces.len(), 600);
    }

    #[test]
    fn training_text_is_normalized_by_the_rule() {
        // Full-width letters fold to ASCII under nmt_nfkc, so no piece holds one; under
        // identity they are characters of their own.
        let text = corpus("botchan.txt").replace("the", "ｔｈｅ");
        let pieces = |rule: &str| {
            let config = UnigramTrainerConfig {
                vocab_size: 600,
                character_coverage: 1.0,
                normalization: rule.into(),
                ..Default::default()
            };
            let mut trainer = UnigramTrainer::new(config).unwrap();
            trainer.feed(&[&text]).unwrap();
            trainer.train().unwrap().pieces
        };
        let has_wide = |p: &[(String, f64, PieceKind)]| p.iter().any(|(s, _, _)| s.contains('ｔ'));
        assert!(!has_wide(&pieces("nmt_nfkc")));
        assert!(has_wide(&pieces("identity")));
    }

    #[test]
    fn bad_input_is_an_error() {
        let text = corpus("botchan.txt");
        let small = UnigramTrainerConfig {
            vocab_size: 20,
            ..Default::default()
        };
        let err = train(&text, small, 1).unwrap_err().to_string();
        assert!(
            err.contains("smaller than the") && err.contains("required characters"),
            "{err}"
        );
        let large = UnigramTrainerConfig {
            vocab_size: 50_000,
            ..Default::default()
        };
        let err = train("a few words here\n", large, 1)
            .unwrap_err()
            .to_string();
        assert!(err.contains("too large for this corpus"), "{err}");
        let err = train("", UnigramTrainerConfig::default(), 1).unwrap_err();
        assert!(matches!(err, Error::Corpus(_)), "{err}");
        let err = train("   \n\n", UnigramTrainerConfig::default(), 1).unwrap_err();
        assert!(matches!(err, Error::Corpus(_)), "{err}");
        for config in [
            UnigramTrainerConfig {
                character_coverage: 0.5,
                ..Default::default()
            },
            UnigramTrainerConfig {
                unk_id: 1,
                ..Default::default()
            },
            UnigramTrainerConfig {
                user_defined_symbols: vec!["<unk>".into()],
                ..Default::default()
            },
            UnigramTrainerConfig {
                vocab_size: 2,
                ..Default::default()
            },
            UnigramTrainerConfig {
                normalization: "nfc".into(),
                ..Default::default()
            },
        ] {
            assert!(UnigramTrainer::new(config).is_err());
        }
    }
}
