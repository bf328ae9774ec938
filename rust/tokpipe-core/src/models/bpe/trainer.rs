//! The byte-level BPE trainer: learns the same merges as HF `tokenizers`' `BpeTrainer`
//! (configured with a byte-level pre-tokenizer and the full byte-level initial alphabet), in a
//! fraction of its time and memory.
//!
//! Training has two phases:
//! 1. Counting ([`BpeTrainer::feed`], [`BpeTrainer::feed_files`]): each document is cut into
//!    pre-tokens by the [`PreTokenizer`] and each distinct pre-token is counted, in parallel
//!    with one counter per rayon thread. Memory grows with the number of *distinct*
//!    pre-tokens, not with the corpus: files are streamed in batches (see [`crate::corpus`]).
//! 2. Merging ([`BpeTrainer::train`]): HF's merge loop, see [`merge_loop`] for the algorithm
//!    and the details that make the output identical.
//!
//! Ids: special tokens first (in the given order), then the 256 byte-level characters sorted
//! by code point (not by byte value), then one id per merge whose result is new. The output is
//! the same whatever the number of threads: counts are sums, and every tie is broken by ids.
//!
//! (Over 500 lines: 344 of them are the tests of the whole trainer, merge loop included; the code
//! is 245.)

mod merge_loop;

use crate::corpus::{self, CorpusOptions, CorpusReport};
use crate::error::{Error, Result};
use crate::models::piece_counter::{CorpusCounts, PieceCounter};
use crate::models::pre_segment::{self, CutText};
use crate::pre_tokenizers::PreTokenizer;
use merge_loop::{MergeLimits, TokenTable};
use rustc_hash::FxHashMap;
use std::path::PathBuf;

#[derive(Clone, Debug)]
pub struct BpeTrainerConfig {
    /// Size of the final vocabulary, special tokens and the 256 bytes included.
    pub vocab_size: usize,
    /// A pair seen fewer times than this is never merged (training stops there).
    pub min_frequency: u64,
    /// Added first, with ids `0..k` in this order.
    pub special_tokens: Vec<String>,
    /// Longest token, in characters (bytes). As in HF, pairs whose merge would reach this
    /// length are not counted, so learned tokens stay shorter than it (or are two bytes).
    pub max_token_length: Option<usize>,
    /// Progress bars on stderr (hidden anyway when stderr is not a terminal).
    pub show_progress: bool,
}

/// A trained byte-level BPE: the model's vocabulary and merges, ready for
/// [`crate::models::bpe::BpeModel::from_merges`], and its special tokens
/// ([`crate::assembly::bpe_tokenizer`] makes the tokenizer).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrainedBpe {
    /// Ordinary tokens: bytes and id, in id order (the 256 bytes and every merge result).
    pub vocab: Vec<(Vec<u8>, u32)>,
    /// Merges as `(left id, right id)`, highest priority first. A pair HF merged twice is
    /// listed once, at its later position, which is what HF saves and how its model ranks it.
    pub merges: Vec<(u32, u32)>,
    /// Special tokens and their ids (`0..k`, in the configured order).
    pub specials: Vec<(String, u32)>,
}

/// Counts pre-tokens, then learns merges. Feed it texts and/or files, then call `train`.
pub struct BpeTrainer {
    config: BpeTrainerConfig,
    pre: PreTokenizer,
    counts: CorpusCounts,
}

impl std::fmt::Debug for BpeTrainer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BpeTrainer")
            .field("config", &self.config)
            .field("pre_tokenizer", &self.pre.pattern())
            .field("distinct_pre_tokens", &self.counts.counts.len())
            .field("fed_bytes", &self.counts.fed_bytes)
            .finish()
    }
}

impl BpeTrainer {
    pub fn new(config: BpeTrainerConfig, pre: PreTokenizer) -> Result<Self> {
        let mut seen = rustc_hash::FxHashSet::default();
        for special in &config.special_tokens {
            if special.is_empty() {
                return Err(Error::InvalidArgument(
                    "special tokens must not be empty strings".into(),
                ));
            }
            if !seen.insert(special.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "special token {special:?} is given twice"
                )));
            }
        }
        let minimum = 256 + config.special_tokens.len();
        if config.vocab_size < minimum {
            return Err(Error::InvalidArgument(format!(
                "vocab_size {} is too small: the 256 byte tokens and {} special token(s) need at least {minimum}",
                config.vocab_size,
                config.special_tokens.len()
            )));
        }
        if config.vocab_size > u32::MAX as usize / 2 {
            return Err(Error::InvalidArgument(format!(
                "vocab_size {} is too large",
                config.vocab_size
            )));
        }
        Ok(BpeTrainer {
            config,
            pre,
            counts: CorpusCounts::default(),
        })
    }

    /// Counts the pre-tokens of `texts`, each text one sequence (pre-tokenization never spans
    /// two texts), in parallel. May be called many times, e.g. once per batch of a dataset.
    pub fn feed(&mut self, texts: &[&str]) -> Result<()> {
        let pre = &self.pre;
        self.counts
            .feed(texts, &|text, counter| count_pre_tokens(pre, text, counter))
    }

    /// [`BpeTrainer::feed`] with pre-segmentation: each text is pre-tokenized whole, as
    /// always, and a pre-token is then also split at each of the text's `cuts` that falls
    /// between two Han characters, so no merge crosses one (see [`pre_segment`]).
    pub fn feed_cut(&mut self, texts: &[CutText<'_>]) -> Result<()> {
        pre_segment::check_cuts(texts)?;
        let pre = &self.pre;
        self.counts.feed_items(
            texts,
            |t| t.text.len(),
            |t, counter| count_cut_pre_tokens(pre, t.text, t.cuts, counter),
        )
    }

    /// Streams `paths` (txt, jsonl, json, optionally .gz/.zst; see [`crate::corpus`]) and
    /// counts their pre-tokens: reader threads open and decompress files (one file per reader
    /// at a time), all rayon threads decode and count. Returns what was read and what was set
    /// aside.
    pub fn feed_files(&mut self, paths: &[PathBuf], opts: &CorpusOptions) -> Result<CorpusReport> {
        let total_bytes = corpus::check_paths(paths)?;
        let progress = self.progress_bar(
            total_bytes,
            "{msg} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec})",
        );
        progress.set_message("reading");
        let pre = &self.pre;
        self.counts
            .feed_files(paths, opts, &progress, &|text, counter| {
                count_pre_tokens(pre, text, counter)
            })
    }

    /// Learns the merges from everything fed so far.
    pub fn train(self) -> Result<TrainedBpe> {
        if self.counts.fed_bytes == 0 {
            return Err(Error::Corpus(
                "no text to train on: the corpus is empty".into(),
            ));
        }
        let mut tokens = TokenTable::new(&self.config.special_tokens);
        let limits = MergeLimits {
            vocab_size: self.config.vocab_size,
            min_frequency: self.config.min_frequency,
            max_token_length: self.config.max_token_length.unwrap_or(usize::MAX),
        };
        let progress = self.progress_bar(
            self.config.vocab_size.saturating_sub(tokens.len()) as u64,
            "{msg} [{elapsed_precise}] {wide_bar} {pos}/{len} tokens (eta {eta})",
        );
        progress.set_message("merging");
        let merges = merge_loop::learn_merges(self.counts.counts, &mut tokens, &limits, &progress);
        progress.finish_and_clear();
        let specials = self
            .config
            .special_tokens
            .iter()
            .enumerate()
            .map(|(id, s)| (s.clone(), id as u32))
            .collect();
        Ok(TrainedBpe {
            vocab: tokens.into_ordinary(),
            merges: dedup_merges(merges),
            specials,
        })
    }

    /// The pre-tokenizer pieces are counted after, which the tokenizer around the trained
    /// model must use.
    pub fn pre_tokenizer(&self) -> &PreTokenizer {
        &self.pre
    }

    fn progress_bar(&self, len: u64, template: &str) -> indicatif::ProgressBar {
        if !self.config.show_progress {
            return indicatif::ProgressBar::hidden();
        }
        let style = indicatif::ProgressStyle::with_template(template)
            .expect("progress templates are valid");
        indicatif::ProgressBar::new(len).with_style(style)
    }
}

impl crate::models::base::Trainer for BpeTrainer {
    type Trained = TrainedBpe;

    fn feed(&mut self, texts: &[&str]) -> Result<()> {
        BpeTrainer::feed(self, texts)
    }

    fn feed_files(&mut self, paths: &[PathBuf], opts: &CorpusOptions) -> Result<CorpusReport> {
        BpeTrainer::feed_files(self, paths, opts)
    }

    fn train(self) -> Result<TrainedBpe> {
        BpeTrainer::train(self)
    }
}

/// Counts the pre-tokens of one sequence. Text the pattern does not match (possible with a
/// custom pattern) is counted as pieces of its own, as HF's `Split(..., "isolated")` keeps it.
/// Pieces under two bytes are skipped: they hold no pair, and every byte is in the alphabet.
fn count_pre_tokens(pre: &PreTokenizer, text: &str, counter: &mut PieceCounter) -> Result<()> {
    count_cut_pre_tokens(pre, text, &[], counter)
}

/// [`count_pre_tokens`], each pre-token also split at the `cuts` (ascending byte offsets into
/// `text`) inside it that fall between two Han characters.
fn count_cut_pre_tokens(
    pre: &PreTokenizer,
    text: &str,
    cuts: &[usize],
    counter: &mut PieceCounter,
) -> Result<()> {
    let mut add = |piece: &str| {
        if piece.len() >= 2 {
            counter.add(piece.as_bytes(), 1);
        }
    };
    let mut next_cut = 0;
    let mut count = |piece: &str| {
        let start = piece.as_ptr() as usize - text.as_ptr() as usize;
        let end = start + piece.len();
        let mut from = start;
        while next_cut < cuts.len() && cuts[next_cut] < end {
            let at = cuts[next_cut];
            next_cut += 1;
            if at > from && pre_segment::between_han(text, at) {
                add(&text[from..at]);
                from = at;
            }
        }
        add(&text[from..end]);
    };
    let base = text.as_ptr() as usize;
    let mut covered = 0;
    pre.split(text, |piece| {
        let start = piece.as_ptr() as usize - base;
        if start > covered {
            count(&text[covered..start]);
        }
        count(piece);
        covered = start + piece.len();
    })?;
    if covered < text.len() {
        count(&text[covered..]);
    }
    Ok(())
}

/// Keeps only the last occurrence of each pair: HF's model maps a pair to one priority, the
/// later one, and its saved merges list holds each pair once in that order.
fn dedup_merges(merges: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    let last: FxHashMap<(u32, u32), usize> = merges
        .iter()
        .enumerate()
        .map(|(i, &pair)| (pair, i))
        .collect();
    if last.len() == merges.len() {
        return merges;
    }
    merges
        .iter()
        .enumerate()
        .filter(|&(i, pair)| last[pair] == i)
        .map(|(_, &pair)| pair)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::test_files::{gzip, zstd, TempDir};
    use crate::models::bpe::BpeModel;
    use crate::pre_tokenizers::byte_level;
    use crate::tokenizer::AllowedSpecial;

    fn config(vocab_size: usize) -> BpeTrainerConfig {
        BpeTrainerConfig {
            vocab_size,
            min_frequency: 0,
            special_tokens: vec![],
            max_token_length: None,
            show_progress: false,
        }
    }

    fn train_texts(config: BpeTrainerConfig, pre: &str, texts: &[&str]) -> TrainedBpe {
        let mut trainer = BpeTrainer::new(config, PreTokenizer::new(pre).unwrap()).unwrap();
        trainer.feed(texts).unwrap();
        trainer.train().unwrap()
    }

    /// Merges as byte-level strings, e.g. `("Ġ", "t")`.
    fn merge_strings(trained: &TrainedBpe) -> Vec<(String, String)> {
        let mut by_id: FxHashMap<u32, String> = trained
            .vocab
            .iter()
            .map(|(b, id)| (*id, byte_level::encode(b)))
            .collect();
        by_id.extend(trained.specials.iter().map(|(s, id)| (*id, s.clone())));
        trained
            .merges
            .iter()
            .map(|(l, r)| (by_id[l].clone(), by_id[r].clone()))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn byte_ids_follow_specials_in_code_point_order() {
        let mut cfg = config(300);
        cfg.special_tokens = vec!["<s>".into(), "</s>".into()];
        let trained = train_texts(cfg, "gpt2", &["hello"]);
        assert_eq!(
            trained.specials,
            vec![("<s>".to_string(), 0), ("</s>".to_string(), 1)]
        );
        let id_of = |b: u8| trained.vocab.iter().find(|(t, _)| t == &[b]).unwrap().1;
        // '!' (U+0021) is the smallest byte-level character, then '"'.
        assert_eq!(id_of(b'!'), 2);
        assert_eq!(id_of(b'"'), 3);
        // Bytes shown as U+0100.. come after every printable one: 0x00 is U+0100.
        assert_eq!(id_of(0xFF), 2 + 94 + 12 + 82 - 1);
        assert_eq!(id_of(0x00), 2 + 188);
        assert_eq!(id_of(b' '), 2 + 188 + 32);
    }

    /// Expected merges worked out by hand from the rules (see `merge_loop`). Ids: a < b < Ġ
    /// (U+0120 sorts after every printable byte-level character), new tokens from 256 up.
    #[test]
    fn tiny_corpus_by_hand() {
        // gpt2 pre-tokens: "aaa" x1, " aaa" x1, "ab" x2, " ab" x1, so the words are
        // [a a a] x1, [Ġ a a a] x1, [a b] x2, [Ġ a b] x1.
        // Pair counts: (a,a) 2+2 = 4, (a,b) 2+1 = 3, (Ġ,a) 1+1 = 2.
        // 1. (a,a) 4 → aa. [a a a] → [aa a]: (a,a) -1 (the overlap), (aa,a) +1.
        //    [Ġ a a a] → [Ġ aa a]: (Ġ,a) -1, (Ġ,aa) +1, (a,a) -1, (aa,a) +1.
        //    Now (a,b) 3, (aa,a) 2, (Ġ,a) 1, (Ġ,aa) 1; (a,a) keeps 2 (a merge does not
        //    subtract its own pair) but is no longer queued.
        // 2. (a,b) 3 → ab. [Ġ a b] → [Ġ ab]: (Ġ,a) -1 → 0, (Ġ,ab) +1.
        // 3. Queued with 2: (Ġ,a) (stale, now 0: queued again with 0) and (aa,a) → aaa.
        //    [aa a] → [aaa]; [Ġ aa a] → [Ġ aaa]: (Ġ,aa) -1 → 0, (Ġ,aaa) +1.
        // 4. Queued with 1: (Ġ,aa) < (Ġ,ab) < (Ġ,aaa) by ids; (Ġ,aa) is stale (0), then
        //    (Ġ,ab) → Ġab, then (Ġ,aaa) → Ġaaa. Only count-0 pairs remain: training stops.
        let trained = train_texts(config(1000), "gpt2", &["aaa aaa", "ab ab", "ab"]);
        let expected = pairs(&[
            ("a", "a"),
            ("a", "b"),
            ("aa", "a"),
            ("Ġ", "ab"),
            ("Ġ", "aaa"),
        ]);
        assert_eq!(merge_strings(&trained), expected);
        let learned: Vec<(String, u32)> = trained.vocab[256..]
            .iter()
            .map(|(b, id)| (byte_level::encode(b), *id))
            .collect();
        let want: Vec<(String, u32)> = [
            ("aa", 256),
            ("ab", 257),
            ("aaa", 258),
            ("Ġab", 259),
            ("Ġaaa", 260),
        ]
        .iter()
        .map(|(s, id)| (s.to_string(), *id))
        .collect();
        assert_eq!(learned, want);
        BpeModel::from_merges(trained.vocab, trained.merges, false, "test").unwrap();
    }

    /// HF keeps one string -> id map: a special token spelled in byte-level characters is the
    /// same token as the bytes it spells, so a merge making those bytes reuses its id.
    #[test]
    fn special_tokens_spelling_a_token_share_its_id() {
        let mut cfg = config(300);
        cfg.special_tokens = vec!["ab".into(), "!".into()];
        let trained = train_texts(cfg, "gpt2", &["ab ab ab"]);
        // Words [a b] x1, [Ġ a b] x2: (a,b) 3 wins and makes "ab", which is special 0.
        assert_eq!(
            trained.merges[0],
            (
                trained.vocab.iter().find(|(b, _)| b == b"a").unwrap().1,
                trained.vocab.iter().find(|(b, _)| b == b"b").unwrap().1
            )
        );
        assert!(trained.vocab.contains(&(b"ab".to_vec(), 0)));
        // "!" is special 1 and also the byte 0x21; the alphabet starts after it at '"'.
        assert!(trained.vocab.contains(&(b"!".to_vec(), 1)));
        assert!(trained.vocab.contains(&(b"\"".to_vec(), 2)));
        // 256 bytes (one shared with a special), "ab" (shared), then "Ġab" as the only new id.
        assert_eq!(trained.vocab.len(), 256 + 1 + 1);
        assert_eq!(trained.vocab.last().unwrap(), &(b" ab".to_vec(), 257));
        // The shared ids make one tokenizer: "!" and "ab" encode to the same id as text or as
        // allowed specials, and every id decodes to its bytes.
        let tok =
            crate::assembly::bpe_tokenizer(trained, PreTokenizer::new("gpt2").unwrap()).unwrap();
        let as_text = tok.encode("ab!", &AllowedSpecial::None).unwrap();
        assert_eq!(as_text, vec![0, 1]);
        assert_eq!(tok.encode("ab!", &AllowedSpecial::All).unwrap(), as_text);
        assert_eq!(tok.decode(&[257, 0, 1]).unwrap(), " abab!");
    }

    #[test]
    fn no_merge_crosses_a_cut_between_han_characters() {
        // 今天|天气 cut at bytes 6 and 19; the cut at 12 (气| ) touches a space and is ignored.
        let text = "今天天气 今天天气";
        let tokens = |cuts: &[usize]| -> Vec<Vec<u8>> {
            let mut trainer =
                BpeTrainer::new(config(1000), PreTokenizer::new("gpt2").unwrap()).unwrap();
            trainer.feed_cut(&[CutText { text, cuts }]).unwrap();
            let trained = trainer.train().unwrap();
            trained
                .vocab
                .into_iter()
                .map(|(b, _)| b)
                .filter(|b| b.len() > 1)
                .collect()
        };
        let uncut = tokens(&[]);
        assert!(uncut.contains(&"今天天气".as_bytes().to_vec()));
        let cut = tokens(&[6, 12, 19]);
        assert!(cut
            .iter()
            .all(|t| !String::from_utf8_lossy(t).contains("天天")));
        assert!(
            cut.contains(&"今天".as_bytes().to_vec()) && cut.contains(&" 今天".as_bytes().to_vec())
        );
        assert!(cut.contains(&"天气".as_bytes().to_vec()));
    }

    #[test]
    fn min_frequency_and_vocab_size_stop_training() {
        // (a,a) 4, (a,b) 3, then count 2: with min_frequency 3, two merges.
        let mut cfg = config(1000);
        cfg.min_frequency = 3;
        let trained = train_texts(cfg, "gpt2", &["aaa aaa", "ab ab", "ab"]);
        assert_eq!(merge_strings(&trained), pairs(&[("a", "a"), ("a", "b")]));
        // vocab_size 257: one merge.
        let trained = train_texts(config(257), "gpt2", &["aaa aaa", "ab ab", "ab"]);
        assert_eq!(merge_strings(&trained), pairs(&[("a", "a")]));
    }

    #[test]
    fn max_token_length_uses_hfs_strict_bound() {
        // Words [a b c d] x1, [Ġ a b c d] x4: (a,b) (b,c) (c,d) 5 each, (Ġ,a) 4.
        // (a,b) wins → [ab c d]; (ab,c) and (Ġ,ab) would be 3 characters, not < 3, so they
        // are not counted, while (b,c) and (Ġ,a) lose their counts. (c,d) 5 → [ab cd];
        // (ab,cd) is 4 characters. Nothing else is left to merge.
        let mut cfg = config(1000);
        cfg.max_token_length = Some(3);
        let trained = train_texts(cfg, "gpt2", &["abcd abcd abcd abcd abcd"]);
        assert_eq!(merge_strings(&trained), pairs(&[("a", "b"), ("c", "d")]));
        let trained = train_texts(config(1000), "gpt2", &["abcd abcd abcd abcd abcd"]);
        assert!(trained.merges.len() > 2);
    }

    #[test]
    fn same_output_on_one_and_two_threads() {
        let lines = botchan_lines();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let dir = TempDir::new("trainer-threads");
        let paths: Vec<PathBuf> = lines
            .chunks(500)
            .enumerate()
            .map(|(i, c)| dir.file(&format!("{i}.txt"), c.concat().as_bytes()))
            .collect();
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let mut from_texts =
                    BpeTrainer::new(config(2000), PreTokenizer::new("gpt2").unwrap()).unwrap();
                from_texts.feed(&refs).unwrap();
                let mut from_files =
                    BpeTrainer::new(config(2000), PreTokenizer::new("gpt2").unwrap()).unwrap();
                from_files
                    .feed_files(&paths, &CorpusOptions::default())
                    .unwrap();
                (from_texts.train().unwrap(), from_files.train().unwrap())
            })
        };
        let (one, two) = (run(1), run(2));
        assert_eq!(one.0.merges.len(), 2000 - 256);
        assert_eq!(one.0, two.0);
        assert_eq!(one.1, two.1);
        assert_eq!(one.0, one.1);
    }

    #[test]
    fn bad_configs_are_rejected() {
        let pre = || PreTokenizer::new("gpt2").unwrap();
        let err = BpeTrainer::new(config(255), pre()).unwrap_err();
        assert!(
            matches!(err, Error::InvalidArgument(_)) && err.to_string().contains("at least 256"),
            "{err}"
        );
        let mut cfg = config(257);
        cfg.special_tokens = vec!["<a>".into(), "<b>".into()];
        assert!(BpeTrainer::new(cfg.clone(), pre())
            .unwrap_err()
            .to_string()
            .contains("at least 258"));
        cfg.vocab_size = 300;
        cfg.special_tokens = vec!["<a>".into(), "<a>".into()];
        assert!(BpeTrainer::new(cfg.clone(), pre())
            .unwrap_err()
            .to_string()
            .contains("twice"));
        cfg.special_tokens = vec!["".into()];
        assert!(BpeTrainer::new(cfg, pre())
            .unwrap_err()
            .to_string()
            .contains("empty"));
    }

    #[test]
    fn no_text_is_a_corpus_error() {
        let mut trainer = BpeTrainer::new(config(300), PreTokenizer::new("gpt2").unwrap()).unwrap();
        trainer.feed(&[]).unwrap();
        trainer.feed(&["", ""]).unwrap();
        assert!(matches!(trainer.train(), Err(Error::Corpus(_))));
    }

    fn botchan_lines() -> Vec<String> {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/corpora/text/botchan.txt"
        ))
        .unwrap();
        text.split_inclusive('\n').map(str::to_string).collect()
    }

    #[test]
    fn files_train_like_the_same_texts() {
        let lines = botchan_lines();
        let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
        let expected = train_texts(config(1500), "gpt2", &refs);

        let dir = TempDir::new("trainer-files");
        let third = lines.len() / 3;
        let records: String = lines[third..2 * third]
            .iter()
            .map(|l| serde_json::json!({ "text": l }).to_string() + "\n")
            .collect();
        let paths = [
            dir.file("a.txt", lines[..third].concat().as_bytes()),
            dir.file("b.jsonl.gz", &gzip(records.as_bytes())),
            dir.file("c.txt.zst", &zstd(lines[2 * third..].concat().as_bytes())),
        ];
        let mut trainer =
            BpeTrainer::new(config(1500), PreTokenizer::new("gpt2").unwrap()).unwrap();
        let report = trainer
            .feed_files(&paths, &CorpusOptions::default())
            .unwrap();
        assert_eq!(report.documents, lines.len() as u64);
        assert_eq!(
            report.bytes,
            lines.iter().map(|l| l.len() as u64).sum::<u64>()
        );
        assert_eq!(trainer.train().unwrap(), expected);
    }

    #[test]
    fn file_errors_reach_the_caller() {
        let dir = TempDir::new("trainer-errors");
        let pre = || PreTokenizer::new("gpt2").unwrap();
        let empty = [dir.file("empty.txt", b""), dir.file("empty.jsonl", b"\n\n")];
        let mut trainer = BpeTrainer::new(config(300), pre()).unwrap();
        let report = trainer
            .feed_files(&empty, &CorpusOptions::default())
            .unwrap();
        assert_eq!(
            (report.files, report.empty_files, report.documents),
            (2, 1, 0)
        );
        let err = trainer.train().unwrap_err();
        assert!(
            matches!(err, Error::Corpus(_)) && !err.to_string().contains('\n'),
            "{err}"
        );

        let bad = dir.file("bad.txt", b"ok\nnot \xff ok\n");
        let mut trainer = BpeTrainer::new(config(300), pre()).unwrap();
        let strict = CorpusOptions {
            strict: true,
            ..CorpusOptions::default()
        };
        let err = trainer
            .feed_files(std::slice::from_ref(&bad), &strict)
            .unwrap_err();
        assert!(
            matches!(err, Error::Corpus(_)) && err.to_string().contains("bad.txt:2"),
            "{err}"
        );
        let report = trainer
            .feed_files(&[bad], &CorpusOptions::default())
            .unwrap();
        assert_eq!(report.invalid_utf8_documents, 1);

        let err = trainer
            .feed_files(&[dir.0.join("missing.txt")], &CorpusOptions::default())
            .unwrap_err();
        assert!(
            matches!(err, Error::Io { .. }) && err.to_string().contains("missing.txt"),
            "{err}"
        );
    }

    /// Counting must be linear in the piece length: a single 8 MB piece (one line, no spaces)
    /// is counted once and its pairs in one pass.
    #[test]
    fn one_long_piece_is_cheap_to_count() {
        let mut state = 1u32;
        let piece: String = (0..8 << 20)
            .map(|_| {
                state = state.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (b'a' + (state >> 16) as u8 % 26) as char
            })
            .collect();
        let start = std::time::Instant::now();
        let trained = train_texts(config(260), "gpt2", &[&piece]);
        assert_eq!(trained.merges.len(), 4);
        assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
    }

    #[test]
    fn dedup_keeps_the_later_place() {
        assert_eq!(
            dedup_merges(vec![(1, 2), (3, 4), (1, 2), (5, 6)]),
            vec![(3, 4), (1, 2), (5, 6)]
        );
    }
}
