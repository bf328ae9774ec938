//! tiktoken's `.tiktoken` format: one `base64(token bytes) rank` line per token. Special
//! tokens are not in the file; callers pass them in.

use super::{read_maybe_gzip, write_atomic};
use crate::error::{shown, Error, Result};
use crate::models::bpe::BpeModel;
use crate::pre_tokenizers::Preset;
use crate::tokenizer::AddedToken;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use std::path::Path;

/// Reads the `(bytes, rank)` pairs of a `.tiktoken` or `.tiktoken.gz` file.
pub fn read_ranks(path: &Path) -> Result<Vec<(Vec<u8>, u32)>> {
    let data = read_maybe_gzip(path)?;
    let name = path.display();
    let text = std::str::from_utf8(&data)
        .map_err(|e| Error::format(&name, format!("not a text file ({e})")))?;
    let mut ranks = Vec::with_capacity(text.len() / 12);
    for (n, line) in text.lines().enumerate() {
        if line.is_empty() {
            continue;
        }
        let bad =
            |what: &str| Error::format(&name, format!("line {}: {what}: {}", n + 1, shown(line)));
        let (token, rank) = line
            .split_once(' ')
            .ok_or_else(|| bad("expected `base64 rank`"))?;
        let bytes = STANDARD.decode(token).map_err(|_| bad("invalid base64"))?;
        let rank: u32 = rank.trim().parse().map_err(|_| bad("invalid rank"))?;
        ranks.push((bytes, rank));
    }
    if ranks.is_empty() {
        return Err(Error::format(&name, "no tokens in file"));
    }
    Ok(ranks)
}

pub fn load(path: &Path) -> Result<BpeModel> {
    BpeModel::from_ranks(read_ranks(path)?, &path.display().to_string())
}

/// Writes the ordinary tokens of `model` with their ids as ranks.
pub fn save(model: &BpeModel, path: &Path) -> Result<()> {
    let mut out = String::with_capacity(model.len() * 16);
    for (id, bytes) in model.tokens() {
        out.push_str(&STANDARD.encode(bytes));
        out.push(' ');
        out.push_str(&id.to_string());
        out.push('\n');
    }
    write_atomic(path, out.as_bytes())
}

/// The special tokens OpenAI publishes for its encodings, recognised by pattern and by the
/// number of ordinary tokens in the file (r50k and p50k share a pattern but not a size).
pub fn openai_special_tokens(preset: Preset, ordinary_tokens: usize) -> Vec<AddedToken> {
    let table: &[(&str, u32)] = match (preset, ordinary_tokens) {
        (Preset::Gpt2, 50_256) | (Preset::Gpt2, 50_280) => &[("<|endoftext|>", 50_256)],
        (Preset::Cl100k, 100_256) => &[
            ("<|endoftext|>", 100_257),
            ("<|fim_prefix|>", 100_258),
            ("<|fim_middle|>", 100_259),
            ("<|fim_suffix|>", 100_260),
            ("<|endofprompt|>", 100_276),
        ],
        (Preset::O200k, 199_998) => &[("<|endoftext|>", 199_999), ("<|endofprompt|>", 200_018)],
        _ => &[],
    };
    table
        .iter()
        .map(|&(t, id)| AddedToken::special(t, id))
        .collect()
}
