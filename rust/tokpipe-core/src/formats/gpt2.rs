//! GPT-2's original files: `encoder.json` (byte-level token text -> id) and `vocab.bpe`
//! (a `#version` line, then one `left right` merge per line, in priority order).

use super::hf_components::json_id;
use super::read_maybe_gzip;
use crate::error::{shown, shown_json, Error, Result};
use crate::models::bpe::BpeModel;
use crate::pre_tokenizers::byte_level;
use crate::tokenizer::AddedToken;
use std::collections::HashMap;
use std::path::Path;

/// Loads the model; entries of `encoder.json` named in `special_tokens` (GPT-2's
/// `<|endoftext|>`) are returned apart as special tokens.
pub fn load(
    encoder_json: &Path,
    vocab_bpe: &Path,
    special_tokens: &[String],
) -> Result<(BpeModel, Vec<AddedToken>)> {
    let enc_name = encoder_json.display().to_string();
    let raw = read_maybe_gzip(encoder_json)?;
    let root: serde_json::Value = serde_json::from_slice(&raw)
        .map_err(|e| Error::format(&enc_name, format!("invalid JSON: {e}")))?;
    let encoder = root
        .as_object()
        .ok_or_else(|| Error::format(&enc_name, "not a JSON object of token -> id"))?;
    let mut vocab = Vec::with_capacity(encoder.len());
    let mut specials = Vec::new();
    let mut ids: HashMap<&str, u32> = HashMap::with_capacity(encoder.len());
    for (token, id) in encoder {
        let id = json_id(id).ok_or_else(|| {
            Error::format(
                &enc_name,
                format!(
                    "token {} has the id {}, not an integer from 0 to 2^32 - 2",
                    shown(token),
                    shown_json(id)
                ),
            )
        })?;
        ids.insert(token, id);
        if special_tokens.iter().any(|s| s == token) {
            specials.push(AddedToken::special(token.clone(), id));
            continue;
        }
        let bytes = byte_level::decode(token).ok_or_else(|| {
            Error::format(
                &enc_name,
                format!("token {} is not byte-level text", shown(token)),
            )
        })?;
        vocab.push((bytes, id));
    }
    let merges_name = vocab_bpe.display().to_string();
    let raw = read_maybe_gzip(vocab_bpe)?;
    let text = std::str::from_utf8(&raw)
        .map_err(|e| Error::format(&merges_name, format!("not UTF-8 text ({e})")))?;
    let merges = parse_merge_lines(text, &ids, &merges_name)?;
    Ok((
        BpeModel::from_merges(vocab, merges, false, &enc_name)?,
        specials,
    ))
}

/// Parses `left right` lines (skipping a leading `#version` line and blank lines) into id pairs.
pub(crate) fn parse_merge_lines(
    text: &str,
    ids: &HashMap<&str, u32>,
    source: &str,
) -> Result<Vec<(u32, u32)>> {
    let mut merges = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if (n == 0 && line.starts_with("#version")) || line.trim().is_empty() {
            continue;
        }
        let (l, r) = line.split_once(' ').ok_or_else(|| {
            Error::format(
                source,
                format!("line {}: expected `left right`: {}", n + 1, shown(line)),
            )
        })?;
        merges.push(pair_ids(l, r, ids, source)?);
    }
    Ok(merges)
}

pub(crate) fn pair_ids(
    l: &str,
    r: &str,
    ids: &HashMap<&str, u32>,
    source: &str,
) -> Result<(u32, u32)> {
    let get = |t: &str| {
        ids.get(t)
            .copied()
            .ok_or_else(|| Error::format(source, format!("merge uses unknown token {}", shown(t))))
    };
    Ok((get(l)?, get(r)?))
}
