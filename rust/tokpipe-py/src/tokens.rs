//! `tokpipe._core` binding of `tokpipe_core::tokens` and `tokpipe_core::packed_parquet`:
//! gathering rows of Arrow list columns (token ids) from several columns or from the files
//! they were staged in, the shuffle's copy in `tokpipe tokenize`, and writing packed rows to
//! Parquet. Buffers in (read in place), buffers out, the GIL released while working.

use crate::errors::{self, IntoPyResult};
use crate::gate;
use crate::kernels::{bytes_of, owned_buffer, IntoNumbers, OwnedBuffer};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::Mutex;
use tokpipe_core::packed_parquet::{Compression, PackedRowsWriter};
use tokpipe_core::tokens::{gather_lists_into, gathered_len, Lists, StagedFiles};

/// `bytes` seen as a slice of `T`, or an error when it is not aligned for `T`.
fn typed<'a, T: Copy>(bytes: &'a [u8], what: &str) -> PyResult<&'a [T]> {
    // SAFETY: only used with plain integer types, for which every bit pattern is valid.
    let (head, values, tail) = unsafe { bytes.align_to::<T>() };
    if !head.is_empty() || !tail.is_empty() {
        return Err(errors::invalid_argument(format!(
            "the {what} buffer is not aligned or not a whole number of items"
        )));
    }
    Ok(values)
}

fn gather<'py, T: Copy + Send + Sync + Default>(
    py: Python<'py>,
    sources: &[(PyUntypedBuffer, PyUntypedBuffer)],
    pieces: &[i64],
    rows: &[i64],
) -> PyResult<(Bound<'py, OwnedBuffer>, Bound<'py, OwnedBuffer>)>
where
    Vec<T>: IntoNumbers,
{
    let lists = sources
        .iter()
        .map(|(offsets, values)| {
            Ok(Lists {
                offsets: typed::<i64>(bytes_of(offsets)?, "offsets")?,
                values: typed::<T>(bytes_of(values)?, "values")?,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let picks = || {
        pieces
            .iter()
            .zip(rows)
            .map(|(&p, &r)| (p.max(-1) as usize, r.max(-1) as usize))
    };
    let (offsets, values) = gate::enter(py, || -> PyResult<(Vec<i64>, Vec<T>)> {
        let mut values = vec![T::default(); gathered_len(&lists, picks()).py()?];
        let offsets = gather_lists_into(&lists, picks(), &mut values).py()?;
        Ok((offsets, values))
    })?;
    Ok((owned_buffer(py, offsets)?, owned_buffer(py, values)?))
}

/// Rows `(pieces[i], rows[i])` of the list columns `sources` (each `(int64 offsets, values)`,
/// values `width` bytes wide: 2 or 4), in that order: `(int64 offsets from 0, values)`.
#[pyfunction]
pub fn gather_lists<'py>(
    py: Python<'py>,
    sources: Vec<(Bound<'py, PyAny>, Bound<'py, PyAny>)>,
    width: usize,
    pieces: &Bound<'py, PyAny>,
    rows: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, OwnedBuffer>, Bound<'py, OwnedBuffer>)> {
    let buffers = sources
        .iter()
        .map(|(o, v)| Ok((PyUntypedBuffer::get(o)?, PyUntypedBuffer::get(v)?)))
        .collect::<PyResult<Vec<_>>>()?;
    let (pieces, rows) = (PyUntypedBuffer::get(pieces)?, PyUntypedBuffer::get(rows)?);
    let pieces = typed::<i64>(bytes_of(&pieces)?, "pieces")?;
    let rows = typed::<i64>(bytes_of(&rows)?, "rows")?;
    if pieces.len() != rows.len() {
        return Err(errors::invalid_argument("pieces and rows differ in length"));
    }
    match width {
        2 => gather::<u16>(py, &buffers, pieces, rows),
        4 => gather::<u32>(py, &buffers, pieces, rows),
        _ => Err(errors::invalid_argument(format!(
            "width must be 2 or 4, not {width}"
        ))),
    }
}

/// Integers whose every bit pattern is valid, so their memory can be filled as bytes.
trait Plain: Copy + Default + Send {}
impl Plain for u16 {}
impl Plain for u32 {}

fn bytes_mut<T: Plain>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: `T` is a plain integer (no padding, any bit pattern valid); the byte view
    // covers exactly the slice's memory and borrows it mutably for its lifetime.
    unsafe {
        std::slice::from_raw_parts_mut(
            values.as_mut_ptr() as *mut u8,
            std::mem::size_of_val(values),
        )
    }
}

/// Files opened once, read by byte ranges (`tokpipe_core::tokens::StagedFiles`).
#[pyclass(module = "tokpipe._core", name = "StagedFiles", frozen)]
pub struct PyStagedFiles {
    inner: StagedFiles,
}

fn read_ranges<T: Plain>(
    py: Python<'_>,
    files: &StagedFiles,
    ranges: &[(usize, u64, usize)],
    total: usize,
) -> PyResult<Vec<T>> {
    let size = std::mem::size_of::<T>();
    if total % size != 0 {
        return Err(errors::invalid_argument(format!(
            "the ranges hold {total} bytes, not a whole number of {size}-byte ids"
        )));
    }
    gate::enter(py, || -> tokpipe_core::Result<_> {
        let mut values = vec![T::default(); total / size];
        files.read_into(ranges.iter().copied(), bytes_mut(&mut values))?;
        Ok(values)
    })
}

#[pymethods]
impl PyStagedFiles {
    #[new]
    fn new(py: Python<'_>, paths: Vec<PathBuf>) -> PyResult<Self> {
        let inner = gate::enter(py, || StagedFiles::open(&paths))?;
        Ok(PyStagedFiles { inner })
    }

    /// The byte ranges `(files[i], starts[i], lengths[i])` (int64 arrays) back to back, as
    /// `width`-byte ids (2 or 4).
    fn read<'py>(
        &self,
        py: Python<'py>,
        files: &Bound<'py, PyAny>,
        starts: &Bound<'py, PyAny>,
        lengths: &Bound<'py, PyAny>,
        width: usize,
    ) -> PyResult<Bound<'py, OwnedBuffer>> {
        let (files, starts, lengths) = (
            PyUntypedBuffer::get(files)?,
            PyUntypedBuffer::get(starts)?,
            PyUntypedBuffer::get(lengths)?,
        );
        let files = typed::<i64>(bytes_of(&files)?, "files")?;
        let starts = typed::<i64>(bytes_of(&starts)?, "starts")?;
        let lengths = typed::<i64>(bytes_of(&lengths)?, "lengths")?;
        if files.len() != starts.len() || files.len() != lengths.len() {
            return Err(errors::invalid_argument(
                "files, starts and lengths differ in length",
            ));
        }
        let mut ranges = Vec::with_capacity(files.len());
        let mut total = 0usize;
        for ((&f, &s), &n) in files.iter().zip(starts).zip(lengths) {
            if f < 0 || s < 0 || n < 0 {
                return Err(errors::invalid_argument("a negative file, start or length"));
            }
            ranges.push((f as usize, s as u64, n as usize));
            total += n as usize;
        }
        match width {
            2 => owned_buffer(py, read_ranges::<u16>(py, &self.inner, &ranges, total)?),
            4 => owned_buffer(py, read_ranges::<u32>(py, &self.inner, &ranges, total)?),
            _ => Err(errors::invalid_argument(format!(
                "width must be 2 or 4, not {width}"
            ))),
        }
    }
}

/// Packed token rows to one Parquet file (`tokpipe_core::packed_parquet`). The Mutex makes
/// the class Sync (it is written from a writer thread and closed from another) and holds the
/// core writer until `close` takes it.
#[pyclass(module = "tokpipe._core", name = "PackedParquetWriter", frozen)]
pub struct PyPackedParquetWriter {
    inner: Mutex<Option<PackedRowsWriter<BufWriter<File>>>>,
    id_bits: u8,
}

#[pymethods]
impl PyPackedParquetWriter {
    /// `compression` is `"zstd"` (at `level`) or `"none"`.
    #[new]
    #[pyo3(signature = (path, width, id_bits, compression="zstd", level=1, created_by="tokpipe"))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        width: usize,
        id_bits: u8,
        compression: &str,
        level: i32,
        created_by: &str,
    ) -> PyResult<Self> {
        let compression = match compression {
            "zstd" => Compression::Zstd(level),
            "none" | "uncompressed" => Compression::None,
            other => {
                return Err(errors::invalid_argument(format!(
                    "packed rows are written with zstd or none, not {other:?}"
                )))
            }
        };
        let writer = gate::enter(py, || {
            PackedRowsWriter::create(&path, width, id_bits, compression, created_by)
        })?;
        Ok(PyPackedParquetWriter {
            inner: Mutex::new(Some(writer)),
            id_bits,
        })
    }

    /// One row group: `ids` (the rows back to back; uint16 or uint32, as the file) and
    /// `lengths` (int32, real tokens per row).
    fn write(
        &self,
        py: Python<'_>,
        ids: &Bound<'_, PyAny>,
        lengths: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (ids, lengths) = (PyUntypedBuffer::get(ids)?, PyUntypedBuffer::get(lengths)?);
        let (ids, lengths) = (
            bytes_of(&ids)?,
            typed::<i32>(bytes_of(&lengths)?, "lengths")?,
        );
        let id_bits = self.id_bits;
        gate::enter(py, || {
            let mut slot = self.inner.lock().unwrap_or_else(|e| e.into_inner());
            let writer = slot
                .as_mut()
                .ok_or_else(|| errors::state_error("write() on a closed PackedParquetWriter"))?;
            match id_bits {
                16 => writer
                    .write_row_group(typed::<u16>(ids, "ids")?, lengths)
                    .py(),
                _ => writer
                    .write_row_group(typed::<u32>(ids, "ids")?, lengths)
                    .py(),
            }
        })
    }

    /// Writes the footer and closes the file; later calls do nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        gate::enter(py, || {
            let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
            match taken {
                Some(writer) => writer.finish().map(drop).py(),
                None => Ok(()),
            }
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(gather_lists, m)?)?;
    m.add_class::<PyStagedFiles>()?;
    m.add_class::<PyPackedParquetWriter>()?;
    Ok(())
}
