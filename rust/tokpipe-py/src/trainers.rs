//! `tokpipe._core.BpeTrainer` and `WordPieceTrainer`: the core trainers, with the GIL released
//! while they read, count and merge.

use crate::errors::IntoPyResult;
use crate::tokenizer::PyTokenizer;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::PyDict;
use std::path::PathBuf;
use std::sync::Mutex;
use tokpipe_core::corpus::{CorpusOptions, CorpusReport, SetAsideReason};
use tokpipe_core::models::bpe::{BpeTrainer, BpeTrainerConfig};
use tokpipe_core::models::wordpiece::{Score, WordPieceTrainer, WordPieceTrainerConfig};
use tokpipe_core::models::Trainer;
use tokpipe_core::normalizers::BertNormalizer;
use tokpipe_core::pre_tokenizers::PreTokenizer;

// `train` consumes the core trainer, so it sits in an Option. pyo3 needs the class to be Sync;
// the Mutex gives that, and is never contended because every method holds it only while the
// GIL-free work of one call runs.
#[pyclass(module = "tokpipe._core", name = "BpeTrainer")]
pub struct PyBpeTrainer {
    inner: Mutex<Option<BpeTrainer>>,
}

const TRAINED: &str = "this trainer has already trained; make a new one";

impl PyBpeTrainer {
    fn with<T>(&self, f: impl FnOnce(&mut BpeTrainer) -> PyResult<T>) -> PyResult<T> {
        let mut guard = self
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("the trainer failed in an earlier call"))?;
        f(guard
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err(TRAINED))?)
    }
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
            inner: Mutex::new(Some(trainer)),
        })
    }

    fn feed(&self, py: Python<'_>, texts: Vec<PyBackedStr>) -> PyResult<()> {
        self.with(|trainer| {
            py.detach(|| {
                let refs: Vec<&str> = texts.iter().map(|t| &**t).collect();
                trainer.feed(&refs)
            })
            .py()
        })
    }

    #[pyo3(signature = (paths, strict=false, text_field="text".to_string()))]
    fn feed_files<'py>(
        &self,
        py: Python<'py>,
        paths: Vec<PathBuf>,
        strict: bool,
        text_field: String,
    ) -> PyResult<Bound<'py, PyDict>> {
        let opts = CorpusOptions { strict, text_field };
        let report = self.with(|trainer| py.detach(|| trainer.feed_files(&paths, &opts)).py())?;
        report_dict(py, &report)
    }

    fn train(&self, py: Python<'_>) -> PyResult<PyTokenizer> {
        let trainer = self
            .inner
            .lock()
            .ok()
            .and_then(|mut g| g.take())
            .ok_or_else(|| PyRuntimeError::new_err(TRAINED))?;
        let inner = py.detach(|| trainer.train_tokenizer()).py()?;
        Ok(PyTokenizer::new(inner))
    }
}

#[pyclass(module = "tokpipe._core", name = "WordPieceTrainer")]
pub struct PyWordPieceTrainer {
    inner: Mutex<Option<WordPieceTrainer>>,
}

impl PyWordPieceTrainer {
    fn with<T>(&self, f: impl FnOnce(&mut WordPieceTrainer) -> PyResult<T>) -> PyResult<T> {
        let mut guard = self
            .inner
            .lock()
            .map_err(|_| PyRuntimeError::new_err("the trainer failed in an earlier call"))?;
        f(guard
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err(TRAINED))?)
    }
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
            "frequency" => Score::Frequency,
            other => {
                return Err(crate::errors::to_py(tokpipe_core::Error::InvalidArgument(
                    format!("score must be \"likelihood\" or \"frequency\", not {other:?}"),
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
            inner: Mutex::new(Some(WordPieceTrainer::new(config).py()?)),
        })
    }

    fn feed(&self, py: Python<'_>, texts: Vec<PyBackedStr>) -> PyResult<()> {
        self.with(|trainer| {
            py.detach(|| {
                let refs: Vec<&str> = texts.iter().map(|t| &**t).collect();
                trainer.feed(&refs)
            })
            .py()
        })
    }

    #[pyo3(signature = (paths, strict=false, text_field="text".to_string()))]
    fn feed_files<'py>(
        &self,
        py: Python<'py>,
        paths: Vec<PathBuf>,
        strict: bool,
        text_field: String,
    ) -> PyResult<Bound<'py, PyDict>> {
        let opts = CorpusOptions { strict, text_field };
        let report = self.with(|trainer| py.detach(|| trainer.feed_files(&paths, &opts)).py())?;
        report_dict(py, &report)
    }

    fn train(&self, py: Python<'_>) -> PyResult<PyTokenizer> {
        let trainer = self
            .inner
            .lock()
            .ok()
            .and_then(|mut g| g.take())
            .ok_or_else(|| PyRuntimeError::new_err(TRAINED))?;
        let inner = py.detach(|| trainer.train_tokenizer()).py()?;
        Ok(PyTokenizer::new(inner))
    }
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
