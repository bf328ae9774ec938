//! `tokpipe._core.Tokenizer`: type conversion and GIL release around the core `Tokenizer`.

use crate::arrow_c::ArrowStrings;
use crate::errors::{self, IntoPyResult};
use crate::gate;
use crate::ids::{self, IdObjects};
use numpy::PyArray1;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList, PyString};
use rustc_hash::FxHashSet;
use std::ops::ControlFlow;
use std::path::PathBuf;
use tokpipe_core::assembly;
use tokpipe_core::formats::{self, gpt2, hf_json, sentencepiece, tiktoken, vocab_txt};
use tokpipe_core::models::wordpiece::WordPieceModel;
use tokpipe_core::models::Model;
use tokpipe_core::normalizers::BertNormalizer;
use tokpipe_core::pre_tokenizers::PreTokenizer;
use tokpipe_core::text::encode::IdWidth;
use tokpipe_core::tokenizer::{AddedToken, AllowedSpecial};

// Inputs at or above this size are encoded with the GIL released; below it the release and
// re-acquire cost more than the encoding (a few hundred ns against ~50 ns per short word).
const DETACH_BYTES: usize = 4096;

// Input per chunk of `encode_batch`: small enough that the last chunk's conversion (the part
// that cannot overlap) is short, large enough that each chunk keeps every thread busy.
const BATCH_CHUNK_BYTES: usize = 2 << 20;

#[pyclass(module = "tokpipe._core", name = "Tokenizer", frozen)]
pub struct PyTokenizer {
    pub inner: tokpipe_core::Tokenizer,
    ids: IdObjects,
}

impl PyTokenizer {
    pub fn new(inner: tokpipe_core::Tokenizer) -> Self {
        let ids = IdObjects::new(inner.vocab_size());
        PyTokenizer { inner, ids }
    }

    /// One text's ids, the GIL released only for a text long enough to repay it.
    fn encode_one(
        &self,
        py: Python<'_>,
        text: &str,
        allowed_special: Option<&Bound<'_, PyAny>>,
        add_special_tokens: bool,
    ) -> PyResult<Vec<u32>> {
        let allowed = parse_allowed_special(allowed_special)?;
        if text.len() < DETACH_BYTES {
            self.inner
                .encode_with(text, &allowed, add_special_tokens)
                .py()
        } else {
            gate::enter(py, || {
                self.inner.encode_with(text, &allowed, add_special_tokens)
            })
        }
    }
}

/// `"all"`, or any iterable of special-token strings.
fn parse_allowed_special(value: Option<&Bound<'_, PyAny>>) -> PyResult<AllowedSpecial> {
    let Some(value) = value else {
        return Ok(AllowedSpecial::None);
    };
    if let Ok(s) = value.cast::<PyString>() {
        return match s.to_str()? {
            "all" => Ok(AllowedSpecial::All),
            other => Err(errors::invalid_argument(format!(
                "allowed_special must be \"all\" or a collection of special tokens, not the string {other:?}"
            ))),
        };
    }
    let mut set = FxHashSet::default();
    for item in value.try_iter()? {
        set.insert(item?.extract::<String>()?);
    }
    Ok(if set.is_empty() {
        AllowedSpecial::None
    } else {
        AllowedSpecial::Some(set)
    })
}

fn specials_from(pairs: Vec<(String, u32)>) -> Vec<AddedToken> {
    pairs
        .into_iter()
        .map(|(t, id)| AddedToken::special(t, id))
        .collect()
}

#[pymethods]
impl PyTokenizer {
    /// An HF `tokenizer.json` or a sentencepiece `.model`, told by content.
    #[staticmethod]
    fn from_file(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = gate::enter(py, || formats::load_any(&path))?;
        Ok(PyTokenizer::new(inner))
    }

    #[staticmethod]
    fn from_sentencepiece(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let inner = gate::enter(py, || sentencepiece::load(&path))?;
        Ok(PyTokenizer::new(inner))
    }

    /// A serialized sentencepiece `ModelProto`.
    #[staticmethod]
    fn from_sentencepiece_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let inner = gate::enter(py, || {
            sentencepiece::from_bytes(data, "<sentencepiece model>")
        })?;
        Ok(PyTokenizer::new(inner))
    }

    #[staticmethod]
    fn from_json(py: Python<'_>, json: &str) -> PyResult<Self> {
        let inner = gate::enter(py, || {
            hf_json::from_slice(json.as_bytes(), "<tokenizer json>")
        })?;
        Ok(PyTokenizer::new(inner))
    }

    /// `special_tokens=None` means OpenAI's own special tokens when the file is one of its
    /// encodings (told by pattern and size), none otherwise.
    #[staticmethod]
    #[pyo3(signature = (path, pattern, special_tokens=None))]
    fn from_tiktoken(
        py: Python<'_>,
        path: PathBuf,
        pattern: &str,
        special_tokens: Option<Vec<(String, u32)>>,
    ) -> PyResult<Self> {
        let inner = gate::enter(py, || {
            let model = tiktoken::load(&path)?;
            let pre = PreTokenizer::new(pattern)?;
            let specials = match special_tokens {
                Some(given) => specials_from(given),
                None => pre
                    .preset()
                    .map(|p| tiktoken::openai_special_tokens(p, model.len()))
                    .unwrap_or_default(),
            };
            tokpipe_core::Tokenizer::new(pre, model, specials)
        })?;
        Ok(PyTokenizer::new(inner))
    }

    #[staticmethod]
    fn from_gpt2(
        py: Python<'_>,
        encoder_json: PathBuf,
        vocab_bpe: PathBuf,
        special_tokens: Vec<String>,
    ) -> PyResult<Self> {
        let inner = gate::enter(py, || {
            let (model, specials) = gpt2::load(&encoder_json, &vocab_bpe, &special_tokens)?;
            tokpipe_core::Tokenizer::new(PreTokenizer::new("gpt2")?, model, specials)
        })?;
        Ok(PyTokenizer::new(inner))
    }

    /// A BERT tokenizer from a `vocab.txt`, as HF's `BertWordPieceTokenizer` builds one.
    #[staticmethod]
    #[pyo3(signature = (path, lowercase, strip_accents, clean_text, handle_chinese_chars, unk_token, continuing_subword_prefix, max_input_chars_per_word))]
    #[allow(clippy::too_many_arguments)]
    fn from_wordpiece_vocab(
        py: Python<'_>,
        path: PathBuf,
        lowercase: bool,
        strip_accents: Option<bool>,
        clean_text: bool,
        handle_chinese_chars: bool,
        unk_token: &str,
        continuing_subword_prefix: &str,
        max_input_chars_per_word: usize,
    ) -> PyResult<Self> {
        let inner = gate::enter(py, || {
            let vocab = vocab_txt::load(&path)?;
            let model = WordPieceModel::new(
                vocab,
                unk_token,
                continuing_subword_prefix,
                max_input_chars_per_word,
                &path.display().to_string(),
            )?;
            let normalizer = BertNormalizer {
                clean_text,
                handle_chinese_chars,
                strip_accents,
                lowercase,
            };
            assembly::bert_tokenizer(model, normalizer)
        })?;
        Ok(PyTokenizer::new(inner))
    }

    #[pyo3(signature = (text, allowed_special=None, add_special_tokens=false))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        text: PyBackedStr,
        allowed_special: Option<&Bound<'_, PyAny>>,
        add_special_tokens: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let ids = self.encode_one(py, &text, allowed_special, add_special_tokens)?;
        self.ids.list(py, &ids)
    }

    // The same ids as `encode`, in a numpy uint32 array (tiktoken's `encode_to_numpy`): one
    // copy of the ids, where a list costs an object reference per id.
    #[pyo3(signature = (text, allowed_special=None, add_special_tokens=false))]
    fn encode_to_numpy<'py>(
        &self,
        py: Python<'py>,
        text: PyBackedStr,
        allowed_special: Option<&Bound<'_, PyAny>>,
        add_special_tokens: bool,
    ) -> PyResult<Bound<'py, PyArray1<u32>>> {
        // `PyArray1` panics where numpy cannot be imported: import it first (once), so that
        // such a failure is the ImportError it is.
        static NUMPY: PyOnceLock<()> = PyOnceLock::new();
        NUMPY.get_or_try_init(py, || py.import("numpy").map(drop))?;
        let ids = self.encode_one(py, &text, allowed_special, add_special_tokens)?;
        Ok(PyArray1::from_slice(py, &ids))
    }

    #[pyo3(signature = (texts, num_threads=None, allowed_special=None, add_special_tokens=false))]
    fn encode_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<PyBackedStr>,
        num_threads: Option<usize>,
        allowed_special: Option<&Bound<'_, PyAny>>,
        add_special_tokens: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let allowed = parse_allowed_special(allowed_special)?;
        // The lists are made (with the GIL) chunk by chunk, in the order the threads finish
        // them, while they encode the rest (without it): see `Tokenizer::encode_batch_chunked`.
        let mut lists: Vec<Option<Py<PyAny>>> = (0..texts.len()).map(|_| None).collect();
        let mut failed: Option<PyErr> = None;
        gate::enter(py, || {
            let refs: Vec<&str> = texts.iter().map(|t| &**t).collect();
            self.inner.encode_batch_chunked(
                &refs,
                &allowed,
                add_special_tokens,
                num_threads,
                BATCH_CHUNK_BYTES,
                |first, chunk| {
                    Python::attach(|py| {
                        for (slot, ids) in lists[first..].iter_mut().zip(&chunk) {
                            match self.ids.list(py, ids) {
                                Ok(list) => *slot = Some(list.into_any().unbind()),
                                Err(e) => {
                                    failed = Some(e);
                                    return ControlFlow::Break(());
                                }
                            }
                        }
                        ControlFlow::Continue(())
                    })
                },
            )
        })?;
        if let Some(e) = failed {
            return Err(e);
        }
        ids::new_list(
            py,
            lists.len(),
            lists.into_iter().map(|l| {
                let list = l.expect("encode_batch_chunked hands every text over once");
                Ok(list.into_bound(py))
            }),
        )
    }

    /// Every row of an Arrow string column (its `__arrow_c_array__()` capsules, see
    /// `arrow_c::ArrowStrings`) encoded in parallel with the GIL released: `(ids, offsets)` as
    /// bytes, the ids flat (`u16` when `narrow`, else `u32`, native order) and the `int64`
    /// row offsets into them (`len + 1`), the buffers of an Arrow `large_list` column.
    /// `append` (the EOS id) follows the ids of each row that has any.
    #[pyo3(signature = (column, num_threads=None, allowed_special=None, append=None, narrow=false))]
    #[allow(clippy::too_many_arguments)]
    fn encode_arrow<'py>(
        &self,
        py: Python<'py>,
        column: &Bound<'py, PyAny>,
        num_threads: Option<usize>,
        allowed_special: Option<&Bound<'_, PyAny>>,
        append: Option<u32>,
        narrow: bool,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
        let allowed = parse_allowed_special(allowed_special)?;
        let column = ArrowStrings::get(column)?;
        let encoded = gate::enter(py, || -> PyResult<_> {
            let column = column.column()?;
            self.inner
                .encode_column(&column, &allowed, append, num_threads)
                .py()
        })?;
        // The ids and offsets are written, in parallel and without the GIL, straight into the
        // `bytes` objects that become the Arrow buffers: one copy, not three.
        let width = if narrow { IdWidth::U16 } else { IdWidth::U32 };
        let ids = ids::bytes_written_by(py, encoded.total_ids() * width.bytes(), |buf| {
            gate::enter(py, || encoded.write_ids(buf, width, num_threads))
        })?;
        let offsets = ids::bytes_written_by(py, (encoded.rows() + 1) * 8, |buf| {
            gate::enter(py, || encoded.write_offsets(buf, num_threads))
        })?;
        Ok((ids, offsets))
    }

    /// `[(ids, score)]`, best first.
    fn encode_nbest(
        &self,
        py: Python<'_>,
        text: PyBackedStr,
        n: usize,
    ) -> PyResult<Vec<(Vec<u32>, f32)>> {
        gate::enter(py, || self.inner.encode_nbest(&text, n))
    }

    fn encode_sample<'py>(
        &self,
        py: Python<'py>,
        text: PyBackedStr,
        alpha: f32,
        nbest_size: i32,
        seed: u64,
    ) -> PyResult<Bound<'py, PyList>> {
        let ids = gate::enter(py, || {
            self.inner.encode_sample(&text, alpha, nbest_size, seed)
        })?;
        self.ids.list(py, &ids)
    }

    #[pyo3(signature = (texts, alpha, nbest_size, seed, num_threads=None))]
    fn encode_batch_sample<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<PyBackedStr>,
        alpha: f32,
        nbest_size: i32,
        seed: u64,
        num_threads: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let all = gate::enter(py, || {
            let refs: Vec<&str> = texts.iter().map(|t| &**t).collect();
            self.inner
                .encode_batch_sample(&refs, alpha, nbest_size, seed, num_threads)
        })?;
        ids::new_list(
            py,
            all.len(),
            all.iter()
                .map(|ids| self.ids.list(py, ids).map(|l| l.into_any())),
        )
    }

    fn decode(&self, py: Python<'_>, ids: Vec<u32>) -> PyResult<String> {
        gate::enter(py, || self.inner.decode(&ids))
    }

    fn decode_bytes<'py>(&self, py: Python<'py>, ids: Vec<u32>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = gate::enter(py, || self.inner.decode_bytes(&ids))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The token as HF writes it: byte-level text (`"Ġthe"`), a WordPiece token (`"##ing"`)
    /// or the special token's string.
    fn id_to_token(&self, id: u32) -> Option<String> {
        self.inner.id_to_token(id).map(|t| t.into_owned())
    }

    /// Inverse of `id_to_token`.
    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.inner.token_to_id(token)
    }

    /// HF's `model.type`: `"BPE"`, `"WordPiece"` or `"Unigram"`.
    #[getter]
    fn model_type(&self) -> &'static str {
        self.inner.model().kind()
    }

    fn token_bytes<'py>(&self, py: Python<'py>, id: u32) -> Option<Bound<'py, PyBytes>> {
        self.inner.token_bytes(id).map(|b| PyBytes::new(py, b))
    }

    fn bytes_to_id(&self, token: &[u8]) -> Option<u32> {
        self.inner.token_id(token)
    }

    #[getter]
    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    #[getter]
    fn pattern(&self) -> String {
        self.inner.pre_tokenizer().pattern().to_string()
    }

    /// `[(content, id, special)]` in id order.
    #[getter]
    fn added_tokens(&self) -> Vec<(String, u32, bool)> {
        self.inner
            .added_tokens()
            .iter()
            .map(|t| (t.content.clone(), t.id, t.special))
            .collect()
    }

    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        gate::enter(py, || hf_json::save(&self.inner, &path))
    }

    fn to_json(&self, py: Python<'_>) -> PyResult<String> {
        gate::enter(py, || hf_json::to_string(&self.inner))
    }

    fn save_tiktoken(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let model = self
            .inner
            .model()
            .as_bpe()
            .filter(|m| m.is_byte_level())
            .ok_or_else(|| {
                errors::invalid_argument(
                    "only a byte-level BPE tokenizer can be written as .tiktoken",
                )
            })?;
        gate::enter(py, || tiktoken::save(model, &path))
    }

    /// Writes a Unigram or sentencepiece-style BPE tokenizer as a sentencepiece `.model`.
    fn save_sentencepiece(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        gate::enter(py, || sentencepiece::save(&self.inner, &path))
    }

    /// The sentencepiece `.model` bytes (sentencepiece's `serialized_model_proto`).
    fn to_sentencepiece_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = gate::enter(py, || sentencepiece::to_vec(&self.inner))?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Writes a WordPiece vocabulary as BERT's `vocab.txt`.
    fn save_vocab(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let model = self.inner.model().as_wordpiece().ok_or_else(|| {
            errors::invalid_argument("only a WordPiece tokenizer has a vocab.txt")
        })?;
        gate::enter(py, || vocab_txt::save(model, &path))
    }
}
