//! `tokpipe._core.UrlRules`: the `url_filter` stage's rules (`tokpipe_core::text::urls`),
//! built once (lists loaded without the GIL) and applied to whole Arrow string columns.

use crate::arrow_c::ArrowStrings;
use crate::gate;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::Arc;
use tokpipe_core::text::urls::{UrlLists, UrlRules};

#[pyclass(module = "tokpipe._core", name = "UrlRules", frozen)]
pub struct PyUrlRules {
    rules: Arc<UrlRules>,
}

#[pymethods]
impl PyUrlRules {
    #[new]
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (block_domains, block_domain_files, allow_domains, allow_domain_files, block_urls,
                        block_url_files, block_url_patterns, banned_words, banned_subwords,
                        soft_banned_words, soft_word_threshold))]
    fn new(
        py: Python<'_>,
        block_domains: Vec<String>,
        block_domain_files: Vec<String>,
        allow_domains: Vec<String>,
        allow_domain_files: Vec<String>,
        block_urls: Vec<String>,
        block_url_files: Vec<String>,
        block_url_patterns: Vec<String>,
        banned_words: Vec<String>,
        banned_subwords: Vec<String>,
        soft_banned_words: Vec<String>,
        soft_word_threshold: usize,
    ) -> PyResult<Self> {
        let lists = UrlLists {
            block_domains,
            block_domain_files,
            allow_domains,
            allow_domain_files,
            block_urls,
            block_url_files,
            block_url_patterns,
            banned_words,
            banned_subwords,
            soft_banned_words,
            soft_word_threshold,
        };
        let rules = gate::enter(py, || UrlRules::new(&lists))?;
        Ok(PyUrlRules {
            rules: Arc::new(rules),
        })
    }

    /// (block, allow): the distinct domains of each list.
    fn domain_counts(&self) -> (usize, usize) {
        (
            self.rules.block_domains.len(),
            self.rules.allow_domains.len(),
        )
    }

    /// One verdict byte per row (`tokpipe_core::text::urls::UrlVerdict`).
    fn decide<'py>(
        &self,
        py: Python<'py>,
        column: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let column = ArrowStrings::get(column)?;
        let rules = self.rules.clone();
        let out = gate::enter(py, || -> PyResult<Vec<u8>> {
            let column = column.column()?;
            Ok(rules
                .decide_column(&column)
                .into_iter()
                .map(|v| v as u8)
                .collect())
        })?;
        Ok(PyBytes::new(py, &out))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyUrlRules>()?;
    Ok(())
}
