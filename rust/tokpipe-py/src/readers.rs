//! `tokpipe._core` binding of the JSON-lines block parser (`tokpipe_core::jsonl`), the fast
//! path of `tokpipe.pipeline.readers.jsonl`: a block of lines in (any buffer, read in place),
//! Arrow string buffers out; the GIL is released while parsing. Also the zstd stream the line
//! readers read `.zst` files through (`tokpipe_core::zstd_file`).

use crate::errors::{self, IntoPyResult};
use crate::gate;
use crate::kernels::{bytes_of, owned_buffer, OwnedBuffer};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::prelude::*;
use std::path::PathBuf;
use tokpipe_core::jsonl::{count_newlines as count_in, parse_block, BlockSpec, BlockStop};
use tokpipe_core::zstd_file::ZstdFile as CoreZstdFile;

type Parsed<'py> = (
    (Bound<'py, OwnedBuffer>, Bound<'py, OwnedBuffer>),
    (Bound<'py, OwnedBuffer>, Bound<'py, OwnedBuffer>),
    Option<Vec<Option<String>>>,
    (usize, usize),
    u64,
    bool,
    &'static str,
);

/// Documents of `block[start:]` (see `tokpipe_core::jsonl::parse_block`): `((id offsets,
/// id data), (text offsets, text data), other fields per document or None, (bytes consumed
/// from `start`, where the line after a slow one starts), lines read, whether a non-blank
/// line was read, and why it stopped: "end", "full" or "slow" (the line at `start +
/// consumed` is the caller's)`. Offsets are int64.
#[pyfunction]
#[pyo3(signature = (block, start, first_line, text_field, id_field, keep_rest, id_prefix,
                    max_line_bytes, max_text_bytes, max_docs, text_room))]
#[allow(clippy::too_many_arguments)]
pub fn parse_jsonl_block<'py>(
    py: Python<'py>,
    block: &Bound<'py, PyAny>,
    start: usize,
    first_line: u64,
    text_field: &str,
    id_field: &str,
    keep_rest: bool,
    id_prefix: &str,
    max_line_bytes: usize,
    max_text_bytes: usize,
    max_docs: usize,
    text_room: usize,
) -> PyResult<Parsed<'py>> {
    let buffer = PyUntypedBuffer::get(block)?;
    let spec = BlockSpec {
        text_field,
        id_field,
        keep_rest,
        id_prefix,
        max_line_bytes,
        max_text_bytes,
    };
    let parsed = gate::enter(py, || -> PyResult<_> {
        let bytes = bytes_of(&buffer)?;
        let block = bytes
            .get(start..)
            .ok_or_else(|| errors::invalid_argument("start is past the end of the block"))?;
        Ok(parse_block(block, first_line, &spec, max_docs, text_room))
    })?;
    let stop = match parsed.stop {
        BlockStop::End => "end",
        BlockStop::Full => "full",
        BlockStop::Slow => "slow",
    };
    Ok((
        (
            owned_buffer(py, parsed.ids.offsets)?,
            owned_buffer(py, parsed.ids.data)?,
        ),
        (
            owned_buffer(py, parsed.texts.offsets)?,
            owned_buffer(py, parsed.texts.data)?,
        ),
        keep_rest.then_some(parsed.rest),
        (parsed.consumed, parsed.next_line),
        parsed.lines,
        parsed.saw_record,
        stop,
    ))
}

/// The `\n` bytes in `data` (any buffer, read in place; the GIL is released).
#[pyfunction]
pub fn count_newlines(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<usize> {
    let buffer = PyUntypedBuffer::get(data)?;
    gate::enter(py, || -> PyResult<_> { Ok(count_in(bytes_of(&buffer)?)) })
}

/// A zstd file decompressed as it is read (see `tokpipe_core::zstd_file`): the raw stream
/// under `tokpipe.pipeline.readers.lines`' buffered reader. `readinto` fills a writable
/// buffer with the GIL released; a corrupt or truncated stream raises `OSError`.
#[pyclass(module = "tokpipe._core")]
pub struct ZstdFile {
    inner: Option<CoreZstdFile>,
}

#[pymethods]
impl ZstdFile {
    #[new]
    fn new(path: PathBuf) -> PyResult<Self> {
        Ok(ZstdFile {
            inner: Some(CoreZstdFile::open(path).py()?),
        })
    }

    /// Decompressed bytes into `buffer` (any writable contiguous buffer); how many, 0 at the
    /// end of the stream.
    fn readinto(&mut self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let view = PyUntypedBuffer::get(buffer)?;
        if view.readonly() || !view.is_c_contiguous() {
            return Err(errors::invalid_argument(
                "readinto needs a writable contiguous buffer",
            ));
        }
        let Some(file) = self.inner.as_mut() else {
            return Err(errors::state_error("read of a closed zstd file"));
        };
        // An address, not a pointer, so the closure is Send: the exporter keeps the memory
        // alive and in place while `view` exists, which outlives the detached read.
        let (address, len) = (view.buf_ptr() as usize, view.len_bytes());
        gate::enter(py, || {
            if len == 0 {
                return Ok(0);
            }
            // SAFETY: see above; the buffer is writable and nothing else is handed this
            // slice while the read runs.
            let out = unsafe { std::slice::from_raw_parts_mut(address as *mut u8, len) };
            file.read(out)
        })
    }

    /// The bytes of the compressed file read so far (what a run's progress counts).
    fn compressed_position(&self) -> PyResult<u64> {
        let Some(file) = self.inner.as_ref() else {
            return Err(errors::state_error("position of a closed zstd file"));
        };
        file.compressed_position().py()
    }

    fn close(&mut self) {
        self.inner = None;
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ZstdFile>()?;
    m.add_function(wrap_pyfunction!(parse_jsonl_block, m)?)?;
    m.add_function(wrap_pyfunction!(count_newlines, m)?)?;
    Ok(())
}
