//! `tokpipe._core` bindings of near-duplicate removal (`tokpipe_core::minhash`) and CCNet
//! paragraph dedup (`tokpipe_core::text::paragraphs`): Arrow buffers in, bytes out, the GIL
//! released around the work.

use crate::arrow_c::ArrowStrings;
use crate::errors::{self, IntoPyResult};
use crate::gate;
use crate::kernels::{bytes_of, owned_buffer, OwnedBuffer};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::path::PathBuf;
use tokpipe_core::minhash::banding::{ClusterConfig, Keep, LshIndex, Verify};
use tokpipe_core::minhash::{
    dedup_keys, params, signatures, HashFunc, MinHasher, Scheme, ShingleConfig, ShingleKind,
};
use tokpipe_core::text::paragraphs;
use tokpipe_core::Error;

fn hasher(num_perm: usize, seed: u64, scheme: &str, hashfunc: &str) -> PyResult<MinHasher> {
    let scheme = Scheme::parse(scheme).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "scheme must be 'affine32' or 'legacy', got {scheme:?}"
        ))
    });
    let hashfunc = HashFunc::parse(hashfunc).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "hashfunc must be 'sha1' or 'xxh3', got {hashfunc:?}"
        ))
    });
    Ok(MinHasher::new(num_perm, seed, scheme.py()?)
        .py()?
        .with_hashfunc(hashfunc.py()?))
}

fn shingle_config(
    shingle: &str,
    word_ngram: usize,
    char_ngram: usize,
    lowercase: bool,
) -> PyResult<ShingleConfig> {
    let kind = ShingleKind::parse(shingle).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "shingle must be 'word', 'char' or 'auto', got {shingle:?}"
        ))
    });
    if word_ngram == 0 || char_ngram == 0 {
        return Err(Error::InvalidArgument(
            "n-gram sizes must be positive".into(),
        ))
        .py();
    }
    Ok(ShingleConfig {
        kind: kind.py()?,
        word_ngram,
        char_ngram,
        lowercase,
    })
}

fn u32_bytes(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_le_bytes()).collect()
}

/// Signatures of every row, `num_perm` little-endian u32 each, concatenated.
#[pyfunction]
#[pyo3(signature = (column, num_perm, seed, scheme, shingle, word_ngram, char_ngram, lowercase, hashfunc="sha1"))]
#[allow(clippy::too_many_arguments)]
pub fn minhash_signatures<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    num_perm: usize,
    seed: u64,
    scheme: &str,
    shingle: &str,
    word_ngram: usize,
    char_ngram: usize,
    lowercase: bool,
    hashfunc: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let hasher = hasher(num_perm, seed, scheme, hashfunc)?;
    let config = shingle_config(shingle, word_ngram, char_ngram, lowercase)?;
    let column = ArrowStrings::get(column)?;
    let out = gate::enter(py, || -> PyResult<Vec<u8>> {
        Ok(u32_bytes(&signatures(&column.column()?, &hasher, &config)))
    })?;
    Ok(PyBytes::new(py, &out))
}

/// `minhash_dedup` keys of every row: length (u64) then signature (u32s), concatenated.
#[pyfunction]
#[pyo3(signature = (column, num_perm, seed, scheme, shingle, word_ngram, char_ngram, lowercase, hashfunc="sha1"))]
#[allow(clippy::too_many_arguments)]
pub fn minhash_dedup_keys<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    num_perm: usize,
    seed: u64,
    scheme: &str,
    shingle: &str,
    word_ngram: usize,
    char_ngram: usize,
    lowercase: bool,
    hashfunc: &str,
) -> PyResult<Bound<'py, PyBytes>> {
    let hasher = hasher(num_perm, seed, scheme, hashfunc)?;
    let config = shingle_config(shingle, word_ngram, char_ngram, lowercase)?;
    let column = ArrowStrings::get(column)?;
    let out = gate::enter(py, || -> PyResult<Vec<u8>> {
        Ok(dedup_keys(&column.column()?, &hasher, &config))
    })?;
    Ok(PyBytes::new(py, &out))
}

/// Pairs of u32s read in place from their little-endian bytes.
fn u32_pair_iter(bytes: &[u8]) -> PyResult<impl ExactSizeIterator<Item = (u32, u32)> + '_> {
    if bytes.len() % 8 != 0 {
        return Err(errors::invalid_argument(
            "pairs must be u32s two by two (a multiple of 8 bytes)",
        ));
    }
    Ok(bytes.chunks_exact(8).map(|c| {
        let a = u32::from_le_bytes(c[..4].try_into().expect("4 bytes"));
        let b = u32::from_le_bytes(c[4..].try_into().expect("4 bytes"));
        (a, b)
    }))
}

/// Pairs of u32s from their little-endian bytes.
fn u32_pairs(bytes: &[u8]) -> PyResult<Vec<(u32, u32)>> {
    Ok(u32_pair_iter(bytes)?.collect())
}

/// datasketch's permutation parameters (a, b) for `(num_perm, seed, scheme)`.
#[pyfunction]
pub fn minhash_permutations(
    num_perm: usize,
    seed: u64,
    scheme: &str,
) -> PyResult<(Vec<u64>, Vec<u64>)> {
    Ok(hasher(num_perm, seed, scheme, "sha1")?.permutations())
}

/// datasketch's optimal (bands, rows) for a threshold.
#[pyfunction]
#[pyo3(signature = (threshold, num_perm, false_positive_weight=0.5, false_negative_weight=0.5))]
pub fn minhash_optimal_params(
    py: Python<'_>,
    threshold: f64,
    num_perm: usize,
    false_positive_weight: f64,
    false_negative_weight: f64,
) -> PyResult<(usize, usize)> {
    gate::enter(py, || {
        params::optimal_params(
            threshold,
            num_perm,
            false_positive_weight,
            false_negative_weight,
        )
    })
}

/// Clusters the documents whose keys (`minhash_dedup_keys` output) are the concatenation of
/// `chunks`, in order: (keeper position per document as u32 bytes, candidates, rejected).
/// Near-duplicate clusters over the keys of task after task, in bounded memory
/// (`tokpipe_core::minhash::banding::LshIndex`). Python drives it band by band so that it
/// can show progress; each call releases the GIL.
#[pyclass(module = "tokpipe._core", name = "LshIndex")]
pub struct PyLshIndex {
    index: Option<LshIndex>,
}

impl PyLshIndex {
    fn index(&mut self) -> PyResult<&mut LshIndex> {
        self.index
            .as_mut()
            .ok_or_else(|| errors::state_error("this LshIndex has already finished"))
    }
}

#[pymethods]
impl PyLshIndex {
    #[new]
    #[pyo3(signature = (scratch, num_perm, bands, rows, verify, threshold, keep, memory_budget))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        scratch: PathBuf,
        num_perm: usize,
        bands: usize,
        rows: usize,
        verify: &str,
        threshold: f64,
        keep: &str,
        memory_budget: usize,
    ) -> PyResult<Self> {
        let keep = Keep::parse(keep).ok_or_else(|| {
            Error::InvalidArgument(format!("keep must be 'first' or 'longest', got {keep:?}"))
        });
        let verify = match verify {
            "none" => Verify::Bands,
            "signature" => Verify::Signature(threshold),
            "exact" => Verify::Exact(threshold),
            other => {
                return Err(Error::InvalidArgument(format!(
                    "verify must be 'none', 'signature' or 'exact', got {other:?}"
                )))
                .py()
            }
        };
        let config = ClusterConfig {
            bands,
            rows,
            verify,
            keep: keep.py()?,
        };
        let index = LshIndex::new(&scratch, num_perm, config, memory_budget).py()?;
        Ok(PyLshIndex { index: Some(index) })
    }

    /// Adds the next documents' dedup keys (a buffer of `8 + 4 * num_perm` bytes each).
    fn add(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<()> {
        let buffer = PyUntypedBuffer::get(keys)?;
        let index = self.index()?;
        let bytes = bytes_of(&buffer)?;
        gate::enter(py, || index.add(bytes))
    }

    /// Joins the next band's buckets; returns the number of bands left.
    fn join_band(&mut self, py: Python<'_>) -> PyResult<usize> {
        let index = self.index()?;
        gate::enter(py, || index.join_band())
    }

    fn __len__(&self) -> usize {
        self.index.as_ref().map_or(0, LshIndex::len)
    }

    /// With `verify="exact"`: joins every band left; the documents of the pairs to check
    /// (native u32s, in position order) and where to cut them into slices of about `budget`
    /// bytes of text; see `LshIndex::check_documents`.
    fn check_documents<'py>(
        &mut self,
        py: Python<'py>,
        budget: u64,
    ) -> PyResult<(Bound<'py, OwnedBuffer>, Vec<usize>)> {
        let index = self.index()?;
        let (documents, cuts) = gate::enter(py, || index.check_documents(budget))?;
        Ok((owned_buffer(py, documents)?, cuts))
    }

    /// The texts (a string column) of the next documents `check_documents` gave, shingled
    /// as the signatures were; see `LshIndex::add_check_texts`.
    #[pyo3(signature = (texts, shingle, word_ngram, char_ngram, lowercase))]
    fn add_check_texts(
        &mut self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        shingle: &str,
        word_ngram: usize,
        char_ngram: usize,
        lowercase: bool,
    ) -> PyResult<()> {
        let config = shingle_config(shingle, word_ngram, char_ngram, lowercase)?;
        let texts = ArrowStrings::get(texts)?;
        let index = self.index()?;
        gate::enter(py, || -> PyResult<()> {
            let column = texts.column()?;
            index.add_check_texts(&column, &config).py()
        })
    }

    /// Joins the pairs whose texts' exact Jaccard similarity reaches the threshold; returns
    /// how many did not. See `LshIndex::check_pairs`.
    fn check_pairs(&mut self, py: Python<'_>) -> PyResult<u64> {
        let index = self.index()?;
        gate::enter(py, || index.check_pairs())
    }

    /// Keeps no band keys: candidates will come from `offer_pairs`. Before any `add`.
    fn band_elsewhere(&mut self) -> PyResult<()> {
        self.index()?.band_elsewhere();
        Ok(())
    }

    /// Candidate pairs from a band join done elsewhere (little-endian u32s, two by two),
    /// instead of `join_band`; see `LshIndex::offer_pairs`.
    fn offer_pairs(&mut self, py: Python<'_>, pairs: &Bound<'_, PyAny>) -> PyResult<()> {
        let buffer = PyUntypedBuffer::get(pairs)?;
        let pairs = u32_pairs(bytes_of(&buffer)?)?;
        let index = self.index()?;
        gate::enter(py, || index.offer_pairs(&pairs))
    }

    /// Ends the index (its scratch files are removed): `(keepers, candidates, rejected,
    /// spilled_runs, clusters)`, the keepers as native u32s, one per document, handed over
    /// without a copy.
    #[allow(clippy::type_complexity)]
    fn finish<'py>(
        &mut self,
        py: Python<'py>,
    ) -> PyResult<(Bound<'py, OwnedBuffer>, u64, u64, u64, u64)> {
        let index = self
            .index
            .take()
            .ok_or_else(|| errors::state_error("this LshIndex has already finished"))?;
        let out = gate::enter(py, || index.finish())?;
        Ok((
            owned_buffer(py, out.keeper)?,
            out.candidates,
            out.rejected,
            out.spilled_runs,
            out.clusters,
        ))
    }
}

#[pyfunction]
pub fn paragraph_keys<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let column = ArrowStrings::get(column)?;
    let (keys, key_offsets) = gate::enter(py, || -> PyResult<_> {
        let (keys, offsets) = paragraphs::paragraph_keys(&column.column()?);
        Ok((
            keys,
            offsets
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<u8>>(),
        ))
    })?;
    Ok((PyBytes::new(py, &keys), PyBytes::new(py, &key_offsets)))
}

/// Which lines to remove: (drop flag per line, emptied flag per document, paragraphs,
/// paragraphs removed, bytes removed). `lines` holds each document's line count (u32).
#[pyfunction]
#[allow(clippy::type_complexity)]
pub fn paragraph_decide<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyAny>,
    lines: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, u64, u64, u64)> {
    let keys = PyUntypedBuffer::get(keys)?;
    let lines = PyUntypedBuffer::get(lines)?;
    let verdict = gate::enter(py, || -> PyResult<_> {
        let lines_bytes = bytes_of(&lines)?;
        let counts: Vec<u32> = lines_bytes
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect();
        paragraphs::paragraph_decide(bytes_of(&keys)?, &counts).py()
    })?;
    Ok((
        PyBytes::new(py, &verdict.drop),
        PyBytes::new(py, &verdict.emptied),
        verdict.paragraphs,
        verdict.paragraphs_removed,
        verdict.bytes_removed,
    ))
}

/// Rows without their flagged lines: (data, int64 offsets as bytes). `flag_offsets` are the
/// int32 offsets of a binary column holding one flag byte per line of each row.
#[pyfunction]
pub fn paragraph_drop_lines<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    flag_offsets: &Bound<'py, PyAny>,
    flag_data: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let column = ArrowStrings::get(column)?;
    let flag_offsets = PyUntypedBuffer::get(flag_offsets)?;
    let flag_data = PyUntypedBuffer::get(flag_data)?;
    let (text, text_offsets) = gate::enter(py, || -> PyResult<_> {
        let column = column.column()?;
        let fo: Vec<usize> = bytes_of(&flag_offsets)?
            .chunks_exact(4)
            .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")).max(0) as usize)
            .collect();
        let fd = bytes_of(&flag_data)?;
        if fo.len() != column.len() + 1
            || fo.windows(2).any(|w| w[0] > w[1])
            || fo.last().is_some_and(|&e| e > fd.len())
        {
            return Err(errors::invalid_argument(
                "paragraph flags do not match the column",
            ));
        }
        let (text, offsets) = paragraphs::drop_lines(&column, |i| &fd[fo[i]..fo[i + 1]]).py()?;
        Ok((
            text,
            offsets
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect::<Vec<u8>>(),
        ))
    })?;
    Ok((PyBytes::new(py, &text), PyBytes::new(py, &text_offsets)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(minhash_signatures, m)?)?;
    m.add_function(wrap_pyfunction!(minhash_dedup_keys, m)?)?;
    m.add_function(wrap_pyfunction!(minhash_permutations, m)?)?;
    m.add_function(wrap_pyfunction!(minhash_optimal_params, m)?)?;
    m.add_class::<PyLshIndex>()?;
    m.add(
        "MINHASH_REPRESENTATIVES",
        tokpipe_core::minhash::banding::MAX_REPRESENTATIVES,
    )?;
    m.add_function(wrap_pyfunction!(paragraph_keys, m)?)?;
    m.add_function(wrap_pyfunction!(paragraph_decide, m)?)?;
    m.add_function(wrap_pyfunction!(paragraph_drop_lines, m)?)?;
    Ok(())
}
