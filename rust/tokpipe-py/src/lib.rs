//! `tokpipe._core`: the thin PyO3 binding of `tokpipe-core`.
//!
//! This crate only converts types, releases the GIL around Rust work and maps errors (both
//! through one gate, `gate.rs`, with the mapping in `errors.rs`); every algorithm lives in the core so it can be tested and benchmarked from
//! Rust. The typed, documented Python API is `python/tokpipe`, which wraps these classes.

mod arrow_c;
mod decont;
mod errors;
mod fasttext;
mod gate;
mod ids;
mod kernels;
mod lm;
mod minhash;
mod pii;
mod quality;
mod readers;
mod sentences;
mod text_stats;
mod tokenizer;
mod tokens;
mod trainers;
mod urls;

use pyo3::prelude::*;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<tokenizer::PyTokenizer>()?;
    m.add_class::<trainers::PyBpeTrainer>()?;
    m.add_class::<trainers::PyWordPieceTrainer>()?;
    m.add_class::<trainers::PyUnigramTrainer>()?;
    m.add_function(wrap_pyfunction!(kernels::exact_dedup_keys, m)?)?;
    quality::register(m)?;
    fasttext::register(m)?;
    text_stats::register(m)?;
    minhash::register(m)?;
    lm::register(m)?;
    pii::register(m)?;
    readers::register(m)?;
    tokens::register(m)?;
    urls::register(m)?;
    decont::register(m)?;
    sentences::register(m)?;
    Ok(())
}
