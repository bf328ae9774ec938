//! `tokpipe._core.BpeTrainer`, `WordPieceTrainer` and `UnigramTrainer`: the core trainers, with
//! the GIL released while they read, count and learn.

use crate::errors::{self, IntoPyResult};
use crate::gate;
use crate::tokenizer::PyTokenizer;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::Mutex;
use tokpipe_core::assembly;
use tokpipe_core::corpus::{CorpusOptions, CorpusReport, SetAsideReason};
use tokpipe_core::lm::LmTrainer;
use tokpipe_core::models::bpe::{BpeTrainer, BpeTrainerConfig};
use tokpipe_core::models::pre_segment::CutText;
use tokpipe_core::models::unigram::trainer::{
    UnigramTrainStats, UnigramTrainer, UnigramTrainerConfig,
};
use tokpipe_core::models::wordpiece::{Score, WordPieceTrainer, WordPieceTrainerConfig};
use tokpipe_core::models::Trainer;
use tokpipe_core::normalizers::BertNormalizer;
use tokpipe_core::pre_tokenizers::PreTokenizer;

/// What the bindings need of a core trainer: the two ways of counting a corpus, which every
/// core trainer has (BPE and WordPiece through [`Trainer`], the n-gram LM trainer, which
/// learns no tokenizer, as its own methods).
pub(crate) trait CountsCorpus: Send {
    fn count_texts(&mut self, texts: &[&str]) -> tokpipe_core::Result<()>;
    fn count_files(
        &mut self,
        paths: &[PathBuf],
        opts: &CorpusOptions,
    ) -> tokpipe_core::Result<CorpusReport>;
}

macro_rules! counts_corpus {
    ($($trainer:ty),*) => {$(
        impl CountsCorpus for $trainer {
            fn count_texts(&mut self, texts: &[&str]) -> tokpipe_core::Result<()> {
                self.feed(texts)
            }
            fn count_files(
                &mut self,
                paths: &[PathBuf],
                opts: &CorpusOptions,
            ) -> tokpipe_core::Result<CorpusReport> {
                self.feed_files(paths, opts)
            }
        }
    )*};
}

counts_corpus!(BpeTrainer, WordPieceTrainer, UnigramTrainer, LmTrainer);

const TRAINED: &str = "this trainer has already trained; make a new one";

// `train` consumes the core trainer, so it sits in an Option. pyo3 needs the class to be Sync;
// the Mutex gives that, and is never contended because every method holds it only while the
// GIL-free work of one call runs. One slot serves every trainer class, so feeding, reporting
// and the "already trained" error are the same for all of them.
pub(crate) struct TrainerSlot<T> {
    inner: Mutex<Option<T>>,
}

impl<T: CountsCorpus> TrainerSlot<T> {
    pub(crate) fn new(trainer: T) -> Self {
        TrainerSlot {
            inner: Mutex::new(Some(trainer)),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut T) -> PyResult<R>) -> PyResult<R> {
        let mut guard = self
            .inner
            .lock()
            .map_err(|_| errors::state_error("the trainer failed in an earlier call"))?;
        f(guard.as_mut().ok_or_else(|| errors::state_error(TRAINED))?)
    }

    /// Counts `texts` with the GIL released.
    pub(crate) fn feed(&self, py: Python<'_>, texts: Vec<PyBackedStr>) -> PyResult<()> {
        self.with(|trainer| {
            gate::enter(py, || {
                let refs: Vec<&str> = texts.iter().map(|t| &**t).collect();
                trainer.count_texts(&refs)
            })
        })
    }

    /// Streams and counts `paths` with the GIL released; the report as a dict.
    pub(crate) fn feed_files<'py>(
        &self,
        py: Python<'py>,
        paths: Vec<PathBuf>,
        strict: bool,
        text_field: String,
    ) -> PyResult<Bound<'py, PyDict>> {
        let opts = CorpusOptions { strict, text_field };
        let report = self.with(|trainer| gate::enter(py, || trainer.count_files(&paths, &opts)))?;
        report_dict(py, &report)
    }

    /// The trainer, for its one `train` call; an error once it has been taken.
    pub(crate) fn take(&self) -> PyResult<T> {
        self.inner
            .lock()
            .ok()
            .and_then(|mut g| g.take())
            .ok_or_else(|| errors::state_error(TRAINED))
    }
}

#[pyclass(module = "tokpipe._core", name = "BpeTrainer")]
pub struct PyBpeTrainer {
    slot: TrainerSlot<BpeTrainer>,
}

#[pymethods]
impl PyBpeTrainer {
    #[new]
    #[pyo3(signature = (vocab_size, min_frequency, special_tokens, max_token_length, show_progress, pattern))]
    fn new(
        vocab_size: usize,
        min_frequency: u64,
        special_tokens: Vec<String>,
        max_token_length: Option<usize>,
        show_progress: bool,
        pattern: &str,
    ) -> PyResult<Self> {
        let config = BpeTrainerConfig {
            vocab_size,
            min_frequency,
            special_tokens,
            max_token_length,
            show_progress,
        };
        let trainer = BpeTrainer::new(config, PreTokenizer::new(pattern).py()?).py()?;
        Ok(PyBpeTrainer {
            slot: TrainerSlot::new(trainer),
        })
    }

    fn feed(&self, py: Python<'_>, texts: Vec<PyBackedStr>) -> PyResult<()> {
        self.slot.feed(py, texts)
    }

    /// Counts texts given as their pre-segmented parts: each text is pre-tokenized whole, and
    /// no merge crosses a join between two Han characters (`BpeTrainer::feed_cut`).
    fn feed_segmented(&self, py: Python<'_>, texts: Vec<Vec<PyBackedStr>>) -> PyResult<()> {
        self.slot
            .with(|trainer| feed_joined(py, &texts, |cut| trainer.feed_cut(cut)))
    }

    #[pyo3(signature = (paths, strict=false, text_field="text".to_string()))]
    fn feed_files<'py>(
        &self,
        py: Python<'py>,
        paths: Vec<PathBuf>,
        strict: bool,
        text_field: String,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.slot.feed_files(py, paths, strict, text_field)
    }

    fn train(&self, py: Python<'_>) -> PyResult<PyTokenizer> {
        let trainer = self.slot.take()?;
        let inner = gate::enter(py, || assembly::train_bpe(trainer))?;
        Ok(PyTokenizer::new(inner))
    }
}

#[pyclass(module = "tokpipe._core", name = "WordPieceTrainer")]
pub struct PyWordPieceTrainer {
    slot: TrainerSlot<WordPieceTrainer>,
}

#[pymethods]
impl PyWordPieceTrainer {
    #[new]
    #[pyo3(signature = (vocab_size, min_frequency, special_tokens, limit_alphabet, initial_alphabet, continuing_subword_prefix, unk_token, score, lowercase, strip_accents, clean_text, handle_chinese_chars, show_progress))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        vocab_size: usize,
        min_frequency: u64,
        special_tokens: Vec<String>,
        limit_alphabet: Option<usize>,
        initial_alphabet: Vec<char>,
        continuing_subword_prefix: String,
        unk_token: String,
        score: &str,
        lowercase: bool,
        strip_accents: Option<bool>,
        clean_text: bool,
        handle_chinese_chars: bool,
        show_progress: bool,
    ) -> PyResult<Self> {
        let score = match score {
            "likelihood" => Score::Likelihood,
            "pmi" => Score::Pmi,
            "frequency" => Score::Frequency,
            other => {
                return Err(errors::invalid_argument(format!(
                    "score must be \"likelihood\", \"pmi\" or \"frequency\", not {:?}",
                    other.chars().take(40).collect::<String>()
                )))
            }
        };
        let config = WordPieceTrainerConfig {
            vocab_size,
            min_frequency,
            special_tokens,
            limit_alphabet,
            initial_alphabet,
            continuing_subword_prefix,
            unk_token,
            score,
            normalizer: BertNormalizer {
                clean_text,
                handle_chinese_chars,
                strip_accents,
                lowercase,
            },
            show_progress,
        };
        Ok(PyWordPieceTrainer {
            slot: TrainerSlot::new(WordPieceTrainer::new(config).py()?),
        })
    }

    fn feed(&self, py: Python<'_>, texts: Vec<PyBackedStr>) -> PyResult<()> {
        self.slot.feed(py, texts)
    }

    #[pyo3(signature = (paths, strict=false, text_field="text".to_string()))]
    fn feed_files<'py>(
        &self,
        py: Python<'py>,
        paths: Vec<PathBuf>,
        strict: bool,
        text_field: String,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.slot.feed_files(py, paths, strict, text_field)
    }

    fn train(&self, py: Python<'_>) -> PyResult<PyTokenizer> {
        let trainer = self.slot.take()?;
        let inner = gate::enter(py, || assembly::train_wordpiece(trainer))?;
        Ok(PyTokenizer::new(inner))
    }
}

/// A special piece's id from Python, where -1 (any negative) turns it off.
fn optional_id(id: i64) -> Option<u32> {
    u32::try_from(id).ok()
}

#[pyclass(module = "tokpipe._core", name = "UnigramTrainer")]
pub struct PyUnigramTrainer {
    slot: TrainerSlot<UnigramTrainer>,
}

#[pymethods]
impl PyUnigramTrainer {
    #[new]
    #[pyo3(signature = (
        vocab_size=8000, *, character_coverage=0.9995, max_sentencepiece_length=16,
        seed_sentencepiece_size=1_000_000, shrinking_factor=0.75, num_sub_iterations=2,
        max_sentence_length=4192, split_by_whitespace=true, split_by_unicode_script=true,
        split_by_number=true, split_digits=false, add_dummy_prefix=true,
        remove_extra_whitespaces=true, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        unk_piece="<unk>".to_string(), bos_piece="<s>".to_string(), eos_piece="</s>".to_string(),
        pad_piece="<pad>".to_string(), user_defined_symbols=Vec::new(), control_symbols=Vec::new(),
        byte_fallback=false, normalization="nmt_nfkc".to_string(), show_progress=false
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        vocab_size: usize,
        character_coverage: f64,
        max_sentencepiece_length: usize,
        seed_sentencepiece_size: usize,
        shrinking_factor: f64,
        num_sub_iterations: usize,
        max_sentence_length: usize,
        split_by_whitespace: bool,
        split_by_unicode_script: bool,
        split_by_number: bool,
        split_digits: bool,
        add_dummy_prefix: bool,
        remove_extra_whitespaces: bool,
        unk_id: i64,
        bos_id: i64,
        eos_id: i64,
        pad_id: i64,
        unk_piece: String,
        bos_piece: String,
        eos_piece: String,
        pad_piece: String,
        user_defined_symbols: Vec<String>,
        control_symbols: Vec<String>,
        byte_fallback: bool,
        normalization: String,
        show_progress: bool,
    ) -> PyResult<Self> {
        let unk_id = optional_id(unk_id).ok_or_else(|| {
            errors::invalid_argument(
                "unk_id must be a valid id: the unknown piece cannot be turned off",
            )
        })?;
        let config = UnigramTrainerConfig {
            vocab_size,
            character_coverage,
            max_sentencepiece_length,
            seed_sentencepiece_size,
            shrinking_factor,
            num_sub_iterations,
            max_sentence_length,
            split_by_whitespace,
            split_by_unicode_script,
            split_by_number,
            split_digits,
            add_dummy_prefix,
            remove_extra_whitespaces,
            unk_id,
            bos_id: optional_id(bos_id),
            eos_id: optional_id(eos_id),
            pad_id: optional_id(pad_id),
            unk_piece,
            bos_piece,
            eos_piece,
            pad_piece,
            user_defined_symbols,
            control_symbols,
            byte_fallback,
            normalization,
            show_progress,
        };
        Ok(PyUnigramTrainer {
            slot: TrainerSlot::new(UnigramTrainer::new(config).py()?),
        })
    }

    fn feed(&self, py: Python<'_>, texts: Vec<PyBackedStr>) -> PyResult<()> {
        self.slot.feed(py, texts)
    }

    /// Counts texts given as their pre-segmented parts: a text is its parts joined, and no
    /// piece is learned across a join between two Han characters (`UnigramTrainer::feed_cut`).
    fn feed_segmented(&self, py: Python<'_>, texts: Vec<Vec<PyBackedStr>>) -> PyResult<()> {
        self.slot
            .with(|trainer| feed_joined(py, &texts, |cut| trainer.feed_cut(cut)))
    }

    #[pyo3(signature = (paths, strict=false, text_field="text".to_string()))]
    fn feed_files<'py>(
        &self,
        py: Python<'py>,
        paths: Vec<PathBuf>,
        strict: bool,
        text_field: String,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.slot.feed_files(py, paths, strict, text_field)
    }

    /// The trained tokenizer and what training read and did (see `_core.pyi`).
    fn train<'py>(&self, py: Python<'py>) -> PyResult<(PyTokenizer, Bound<'py, PyDict>)> {
        let trainer = self.slot.take()?;
        let (tokenizer, stats) = gate::enter(py, || assembly::train_unigram(trainer))?;
        Ok((PyTokenizer::new(tokenizer), stats_dict(py, &stats)?))
    }
}

/// Joins each text's parts and feeds the texts with the joins as cuts, the GIL released.
fn feed_joined(
    py: Python<'_>,
    texts: &[Vec<PyBackedStr>],
    feed: impl Send + FnOnce(&[CutText<'_>]) -> tokpipe_core::Result<()>,
) -> PyResult<()> {
    gate::enter(py, || {
        let joined: Vec<(String, Vec<usize>)> = texts.iter().map(|parts| join(parts)).collect();
        let cut: Vec<CutText<'_>> = joined
            .iter()
            .map(|(text, cuts)| CutText { text, cuts })
            .collect();
        feed(&cut)
    })
}

/// A text given as its parts: the parts joined, and the byte offsets of the joins.
fn join(parts: &[PyBackedStr]) -> (String, Vec<usize>) {
    let mut text = String::with_capacity(parts.iter().map(|p| p.len()).sum());
    let mut cuts = Vec::with_capacity(parts.len().saturating_sub(1));
    for part in parts {
        if !text.is_empty() {
            cuts.push(text.len());
        }
        text.push_str(part);
    }
    (text, cuts)
}

fn stats_dict<'py>(py: Python<'py>, s: &UnigramTrainStats) -> PyResult<Bound<'py, PyDict>> {
    let stats = PyDict::new(py);
    stats.set_item("sentences", s.sentences)?;
    stats.set_item("skipped_too_long", s.skipped_too_long)?;
    stats.set_item("skipped_reserved_char", s.skipped_reserved_char)?;
    stats.set_item("words", s.words)?;
    stats.set_item("required_chars", s.required_chars)?;
    stats.set_item("seed_pieces", s.seed_pieces)?;
    stats.set_item("em_steps", s.em_steps)?;
    stats.set_item("objective", s.objective)?;
    Ok(stats)
}

/// A `CorpusReport` as the plain dict `tokpipe.train.CorpusReport.add` reads.
pub(crate) fn report_dict<'py>(
    py: Python<'py>,
    report: &CorpusReport,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("files", report.files)?;
    d.set_item("empty_files", report.empty_files)?;
    d.set_item("documents", report.documents)?;
    d.set_item("bytes", report.bytes)?;
    d.set_item("invalid_utf8_documents", report.invalid_utf8_documents)?;
    let set_aside = PyDict::new(py);
    for reason in SetAsideReason::ALL {
        let count = report.count(reason);
        if count > 0 {
            set_aside.set_item(reason.as_str(), count)?;
        }
    }
    d.set_item("set_aside", set_aside)?;
    let examples: Vec<(String, u64, String)> = report
        .examples
        .iter()
        .map(|e| {
            (
                e.path.display().to_string(),
                e.line,
                format!("{}: {}", e.reason, e.detail),
            )
        })
        .collect();
    d.set_item("examples", examples)?;
    Ok(d)
}
