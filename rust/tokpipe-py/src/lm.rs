//! `tokpipe._core` bindings of the n-gram language models (`tokpipe_core::lm`): loading and
//! scoring (`NgramModel`), training (`LmTrainer` -> `TrainedLm`). Every call that reads,
//! counts or scores releases the GIL; document scoring takes an Arrow column's buffers.

use crate::arrow_c::ArrowStrings;
use crate::errors::IntoPyResult;
use crate::gate;
use crate::tokenizer::PyTokenizer;
use crate::trainers::TrainerSlot;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyBytes, PyDict};
use std::path::PathBuf;
use std::sync::Arc;

use tokpipe_core::lm::{
    LineTokens, LmTrainer, LmTrainerConfig, ModelTokenizer, NgramModel, Scorer, TrainedLm,
};

/// A loaded model, optionally paired with the tokenizer its words come from.
#[pyclass(module = "tokpipe._core", name = "NgramModel", frozen)]
pub struct PyNgramModel {
    model: Arc<NgramModel>,
    tokenizer: Option<Arc<ModelTokenizer>>,
}

impl PyNgramModel {
    fn scorer(&self, normalize: bool) -> Scorer<'_> {
        Scorer {
            model: &self.model,
            tokenizer: self.tokenizer.as_deref(),
            normalize,
        }
    }
}

#[pymethods]
impl PyNgramModel {
    /// Loads an ARPA file; with `tokenizer`, lines are scored as its tokens.
    #[staticmethod]
    #[pyo3(signature = (path, tokenizer=None))]
    fn load_arpa(
        py: Python<'_>,
        path: PathBuf,
        tokenizer: Option<PyRef<'_, PyTokenizer>>,
    ) -> PyResult<Self> {
        let tok = tokenizer.map(|t| t.inner.clone());
        gate::enter(py, || -> tokpipe_core::Result<_> {
            let model = NgramModel::load_arpa(&path)?;
            let tokenizer = tok.map(|t| Arc::new(ModelTokenizer::new(t, &model)));
            Ok(PyNgramModel {
                model: Arc::new(model),
                tokenizer,
            })
        })
    }

    /// The same model paired with another tokenizer (or none: whitespace words).
    #[pyo3(signature = (tokenizer=None))]
    fn with_tokenizer(
        &self,
        py: Python<'_>,
        tokenizer: Option<PyRef<'_, PyTokenizer>>,
    ) -> PyResult<Self> {
        let tok = tokenizer.map(|t| t.inner.clone());
        let model = self.model.clone();
        gate::enter_ok(py, || PyNgramModel {
            tokenizer: tok.map(|t| Arc::new(ModelTokenizer::new(t, &model))),
            model,
        })
    }

    #[getter]
    fn order(&self) -> usize {
        self.model.order()
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.model.vocab_size()
    }

    #[getter]
    fn counts(&self) -> Vec<u64> {
        self.model.counts().to_vec()
    }

    #[getter]
    fn memory(&self) -> usize {
        self.model.memory()
    }

    #[getter]
    fn has_tokenizer(&self) -> bool {
        self.tokenizer.is_some()
    }

    /// `kenlm.Model.score`: log10 P of whitespace-separated words (the tokenizer, if any, is
    /// not used).
    #[pyo3(signature = (sentence, bos=true, eos=true))]
    fn score(&self, sentence: &str, bos: bool, eos: bool) -> f32 {
        self.model.score_words(sentence, bos, eos).0
    }

    /// One line as the pipeline scores it (normalised if asked, tokenized if the model has a
    /// tokenizer, between `<s>` and `</s>`): (log10 P, tokens without `</s>`).
    #[pyo3(signature = (line, normalize=false))]
    fn score_line(&self, line: &str, normalize: bool) -> PyResult<(f32, usize)> {
        let mut buf = Default::default();
        self.scorer(normalize).line(line, &mut buf).py()
    }

    /// Per row of a string column: summed log10 P over its lines (f64 bytes) and its length,
    /// tokens plus one `</s>` per line (u64 bytes); on all cores.
    #[pyo3(signature = (column, normalize=false))]
    fn document_scores<'py>(
        &self,
        py: Python<'py>,
        column: &Bound<'py, PyAny>,
        normalize: bool,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let column = ArrowStrings::get(column)?;
        let (scores, lengths) = gate::enter(py, || -> PyResult<_> {
            let column = column.column()?;
            let (scores, lengths) = self.scorer(normalize).column(&column).py()?;
            let scores: Vec<u8> = scores.iter().flat_map(|v| v.to_le_bytes()).collect();
            let lengths: Vec<u8> = lengths.iter().flat_map(|v| v.to_le_bytes()).collect();
            Ok((scores, lengths))
        })?;
        Ok((PyBytes::new(py, &scores), PyBytes::new(py, &lengths)))
    }
}

// `train` consumes the core trainer, hence the Option; the Mutex makes the class Sync and is
// only held while one call's GIL-free work runs.
#[pyclass(module = "tokpipe._core", name = "LmTrainer")]
pub struct PyLmTrainer {
    slot: TrainerSlot<LmTrainer>,
}

#[pymethods]
impl PyLmTrainer {
    #[new]
    #[pyo3(signature = (order, prune, normalize, discount_fallback, show_progress, tokenizer=None))]
    fn new(
        py: Python<'_>,
        order: usize,
        prune: Vec<u64>,
        normalize: bool,
        discount_fallback: Option<(f64, f64, f64)>,
        show_progress: bool,
        tokenizer: Option<PyRef<'_, PyTokenizer>>,
    ) -> PyResult<Self> {
        let config = LmTrainerConfig {
            order,
            prune,
            normalize,
            discount_fallback: discount_fallback.map(|(a, b, c)| [a, b, c]),
            show_progress,
        };
        let tok = tokenizer.map(|t| t.inner.clone());
        let trainer = gate::enter(py, || {
            let tokens = match tok {
                Some(t) => LineTokens::tokenizer(t),
                None => LineTokens::Words,
            };
            LmTrainer::new(config, tokens)
        })?;
        Ok(PyLmTrainer {
            slot: TrainerSlot::new(trainer),
        })
    }

    /// Counts texts, each one document (its lines are the sentences).
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

    fn train(&self, py: Python<'_>) -> PyResult<PyTrainedLm> {
        let trainer = self.slot.take()?;
        let inner = gate::enter(py, || trainer.train())?;
        Ok(PyTrainedLm { inner })
    }
}

#[pyclass(module = "tokpipe._core", name = "TrainedLm", frozen)]
pub struct PyTrainedLm {
    inner: TrainedLm,
}

#[pymethods]
impl PyTrainedLm {
    fn write_arpa(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        gate::enter(py, || self.inner.write_arpa(&path))
    }

    /// The ARPA text, as bytes.
    fn arpa<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let mut out = Vec::new();
        gate::enter(py, || {
            self.inner.write_arpa_to(&mut out).map_err(PyErr::from)
        })?;
        Ok(PyBytes::new(py, &out))
    }

    #[getter]
    fn order(&self) -> usize {
        self.inner.order()
    }

    #[getter]
    fn tokens(&self) -> u64 {
        self.inner.tokens()
    }

    #[getter]
    fn sentences(&self) -> u64 {
        self.inner.sentences()
    }

    /// Distinct n-grams counted per order.
    #[getter]
    fn counted(&self) -> Vec<u64> {
        self.inner.counted()
    }

    /// n-grams kept per order (after pruning).
    #[getter]
    fn kept(&self) -> Vec<u64> {
        self.inner.kept().to_vec()
    }

    /// (D1, D2, D3+) per order.
    #[getter]
    fn discounts(&self) -> Vec<(f64, f64, f64)> {
        self.inner
            .discounts()
            .iter()
            .map(|d| (d[0], d[1], d[2]))
            .collect()
    }

    /// Counts of adjusted counts 1..4 per order.
    #[getter]
    fn count_of_counts(&self) -> Vec<(u64, u64, u64, u64)> {
        self.inner
            .count_of_counts()
            .iter()
            .map(|t| (t[0], t[1], t[2], t[3]))
            .collect()
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyNgramModel>()?;
    m.add_class::<PyLmTrainer>()?;
    m.add_class::<PyTrainedLm>()?;
    Ok(())
}
