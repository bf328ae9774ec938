//! `tokpipe._core` binding of the PII kernel (`tokpipe_core::pii`): Arrow buffers in, bytes
//! out; the GIL is released. Names are checked here so that a typo is an InvalidArgumentError.

use crate::arrow_c::ArrowStrings;
use crate::errors::IntoPyResult;
use crate::gate;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use tokpipe_core::pii::detect::DetectOptions;
use tokpipe_core::pii::{find, pii_column, Action, PiiParams, PiiType};
use tokpipe_core::Error;

fn pii_type(name: &str) -> PyResult<PiiType> {
    PiiType::from_name(name)
        .ok_or_else(|| Error::InvalidArgument(format!("no PII type {name:?}")))
        .py()
}

fn detect_options(types: &[String], only_public_ip: bool) -> PyResult<DetectOptions> {
    let mut enabled = [false; PiiType::COUNT];
    for name in types {
        enabled[pii_type(name)? as usize] = true;
    }
    Ok(DetectOptions {
        enabled,
        only_public_ip,
    })
}

/// The PII type names, in the kernel's order (the order of the counts).
#[pyfunction]
pub fn pii_types() -> Vec<&'static str> {
    PiiType::ALL.iter().map(|t| t.name()).collect()
}

/// (type, start, end) of each PII span of `text`, in code points, overlaps resolved.
#[pyfunction]
#[pyo3(signature = (text, types, only_public_ip=false))]
pub fn pii_find(
    py: Python<'_>,
    text: &str,
    types: Vec<String>,
    only_public_ip: bool,
) -> PyResult<Vec<(&'static str, usize, usize)>> {
    let opts = detect_options(&types, only_public_ip)?;
    gate::enter_ok(py, || {
        let spans = find(text, &opts);
        let (mut byte_at, mut char_at) = (0, 0);
        spans
            .into_iter()
            .map(|s| {
                char_at += text[byte_at..s.start].chars().count();
                let start = char_at;
                char_at += text[s.start..s.end].chars().count();
                byte_at = s.end;
                (s.kind.name(), start, char_at)
            })
            .collect()
    })
}

/// (offsets, data, meta_offsets, meta_data, counts, drops) of `pii_scrub`.
type PiiResult<'py> = (
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
    Bound<'py, PyBytes>,
);

/// Scrubs a column: the new text and the JSON metadata as 64-bit Arrow offsets and data,
/// counts per type field-major u64 (in `pii_types()` order), one drop byte per row.
/// `actions` holds one action name per name of `types`.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn pii_scrub<'py>(
    py: Python<'py>,
    column: &Bound<'py, PyAny>,
    types: Vec<String>,
    actions: Vec<String>,
    only_public_ip: bool,
    salt: &str,
    max_per_1000_chars: f64,
) -> PyResult<PiiResult<'py>> {
    if types.len() != actions.len() {
        return Err(Error::InvalidArgument(
            "one action per PII type is needed".into(),
        ))
        .py();
    }
    let mut params = PiiParams {
        detect: detect_options(&types, only_public_ip)?,
        salt: salt.as_bytes().to_vec(),
        max_per_1000_chars,
        ..PiiParams::default()
    };
    for (name, action) in types.iter().zip(&actions) {
        params.actions[pii_type(name)? as usize] = Action::from_name(action)
            .ok_or_else(|| Error::InvalidArgument(format!("no PII action {action:?}")))
            .py()?;
    }
    let column = ArrowStrings::get(column)?;
    let out = gate::enter(py, || -> PyResult<_> {
        let column = column.column()?;
        Ok(pii_column(&column, &params))
    })?;
    let le = |v: &[i64]| -> Vec<u8> { v.iter().flat_map(|x| x.to_le_bytes()).collect() };
    let counts: Vec<u8> = out.counts.iter().flat_map(|x| x.to_le_bytes()).collect();
    Ok((
        PyBytes::new(py, &le(&out.offsets)),
        PyBytes::new(py, &out.data),
        PyBytes::new(py, &le(&out.meta_offsets)),
        PyBytes::new(py, &out.meta_data),
        PyBytes::new(py, &counts),
        PyBytes::new(py, &out.drops),
    ))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(pii_types, m)?)?;
    m.add_function(wrap_pyfunction!(pii_find, m)?)?;
    m.add_function(wrap_pyfunction!(pii_scrub, m)?)?;
    Ok(())
}
