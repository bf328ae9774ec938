//! `tokpipe._core` binding of the JSON-lines block parser (`tokpipe_core::jsonl`), the fast
//! path of `tokpipe.pipeline.readers.jsonl`: a block of lines in (any buffer, read in place),
//! Arrow string buffers out; the GIL is released while parsing.

use crate::kernels::{bytes_of, owned_buffer, OwnedBuffer};
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use tokpipe_core::jsonl::{count_newlines as count_in, parse_block, BlockSpec, BlockStop};

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
    let parsed = py.detach(|| -> PyResult<_> {
        let bytes = bytes_of(&buffer)?;
        let block = bytes
            .get(start..)
            .ok_or_else(|| PyValueError::new_err("start is past the end of the block"))?;
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
    py.detach(|| Ok(count_in(bytes_of(&buffer)?)))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(parse_jsonl_block, m)?)?;
    m.add_function(wrap_pyfunction!(count_newlines, m)?)?;
    Ok(())
}
