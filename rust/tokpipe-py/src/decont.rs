//! `tokpipe._core.DecontIndex`: the binding of `tokpipe_core::text::decont` (benchmark
//! decontamination). Benchmark columns in, built once; document columns scanned with the
//! GIL released; matches out as buffers Python wraps into Arrow arrays.

use crate::arrow_c::ArrowStrings;
use crate::errors::IntoPyResult;
use crate::gate;
use crate::kernels::{owned_buffer, OwnedBuffer};
use pyo3::prelude::*;
use tokpipe_core::text::decont::{ngram_text, DecontIndex};

#[pyclass(module = "tokpipe._core", name = "DecontIndex")]
pub struct PyDecontIndex {
    index: DecontIndex,
}

#[pymethods]
impl PyDecontIndex {
    #[new]
    fn new(n: usize, min_words: usize) -> PyResult<Self> {
        Ok(PyDecontIndex {
            index: DecontIndex::new(n, min_words).py()?,
        })
    }

    /// Adds every row of a string column as a record of benchmark `benchmark`: `(records,
    /// usable, short, empty, ngrams)` (see `AddCounts`).
    fn add(
        &mut self,
        py: Python<'_>,
        benchmark: u32,
        column: &Bound<'_, PyAny>,
    ) -> PyResult<(u64, u64, u64, u64, u64)> {
        let column = ArrowStrings::get(column)?;
        let index = &mut self.index;
        let counts = gate::enter(py, || -> PyResult<_> {
            let column = column.column()?;
            Ok(index.add(benchmark, &column))
        })?;
        Ok((
            counts.records,
            counts.usable,
            counts.short,
            counts.empty,
            counts.ngrams,
        ))
    }

    fn __len__(&self) -> usize {
        self.index.len()
    }

    /// Each row's first match: `(benchmarks, ngram_offsets, ngram_data)`, the benchmark + 1
    /// per row as u32 (0: no match), and the matching n-gram's normalised words as a
    /// `large_string` array's offsets (i64) and data (empty for rows without a match).
    fn scan<'py>(
        &self,
        py: Python<'py>,
        column: &Bound<'py, PyAny>,
    ) -> PyResult<(
        Bound<'py, OwnedBuffer>,
        Bound<'py, OwnedBuffer>,
        Bound<'py, OwnedBuffer>,
    )> {
        let column = ArrowStrings::get(column)?;
        let index = &self.index;
        let (ids, offsets, data) = gate::enter(py, || -> PyResult<_> {
            let column = column.column()?;
            let found = index.scan(&column);
            let mut ids = Vec::with_capacity(found.len());
            let mut offsets = Vec::with_capacity(found.len() + 1);
            let mut data = Vec::new();
            offsets.push(0i64);
            for (i, hit) in found.iter().enumerate() {
                match hit {
                    Some(hit) => {
                        ids.push(hit.benchmark + 1);
                        data.extend_from_slice(
                            ngram_text(column.get(i), hit.start, hit.len).as_bytes(),
                        );
                    }
                    None => ids.push(0u32),
                }
                offsets.push(data.len() as i64);
            }
            Ok((ids, offsets, data))
        })?;
        Ok((
            owned_buffer(py, ids)?,
            owned_buffer(py, offsets)?,
            owned_buffer(py, data)?,
        ))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDecontIndex>()?;
    Ok(())
}
