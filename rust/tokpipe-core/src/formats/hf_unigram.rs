//! The `model` object of an HF `tokenizer.json` for Unigram:
//! `{"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["▁the", -3.2], ...],
//! "byte_fallback": false}`. The rest of the file is read by [`crate::formats::hf_json`].

use super::hf_components::json_id;
use crate::error::{shown_json, Error, Result};
use crate::models::pieces::{piece_byte, Piece, PieceKind, Semantics};
use crate::models::unigram::UnigramModel;
use crate::tokenizer::AddedToken;
use rustc_hash::FxHashMap;
use serde_json::{json, Value};

/// The model HF builds from this object, with HF's encoding rules. The pieces' types, which
/// the file does not hold, are worked out for writing a `.model` later: the unknown piece, the
/// added tokens that are vocabulary entries (special: CONTROL, else USER_DEFINED), and with
/// `byte_fallback` the `<0xNN>` pieces.
pub fn from_json(model: &Value, added: &[AddedToken], source: &str) -> Result<UnigramModel> {
    let bad = |msg: String| Error::format(source, format!("model: {msg}"));
    let vocab = model
        .get("vocab")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("vocab is not a list".into()))?;
    if vocab.is_empty() {
        return Err(bad("the vocabulary is empty".into()));
    }
    let unk_id = match model.get("unk_id") {
        None | Some(Value::Null) => None,
        Some(v) => {
            Some(json_id(v).ok_or_else(|| bad(format!("unk_id {} is not an id", shown_json(v))))?)
        }
    };
    let byte_fallback = model
        .get("byte_fallback")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    // Added tokens by id, so each vocabulary entry finds its own in one look-up.
    let added_by_id: FxHashMap<u32, &AddedToken> = added.iter().map(|t| (t.id, t)).collect();
    let mut pieces = Vec::with_capacity(vocab.len());
    for (i, entry) in vocab.iter().enumerate() {
        let (text, score) = match entry.as_array().map(Vec::as_slice) {
            Some([t, s]) => (t.as_str(), s.as_f64()),
            _ => (None, None),
        };
        let (Some(text), Some(score)) = (text, score) else {
            return Err(bad(format!(
                "vocab[{i}] is not a [piece, score] pair: {}",
                shown_json(entry)
            )));
        };
        let kind = if Some(i as u32) == unk_id {
            PieceKind::Unknown
        } else if let Some(t) = added_by_id.get(&(i as u32)).filter(|t| t.content == text) {
            if t.special {
                PieceKind::Control
            } else {
                PieceKind::UserDefined
            }
        } else if byte_fallback && piece_byte(text).is_some() {
            PieceKind::Byte
        } else {
            PieceKind::Normal
        };
        pieces.push(Piece::new(text, score, kind));
    }
    UnigramModel::new(
        pieces,
        unk_id,
        byte_fallback,
        Semantics::HuggingFace,
        source,
    )
}

/// The `model` object HF reads back into the same model.
pub fn to_json(model: &UnigramModel) -> Value {
    let vocab: Vec<Value> = model
        .pieces()
        .iter()
        .map(|p| json!([p.text, p.score]))
        .collect();
    json!({
        "type": "Unigram",
        "unk_id": model.unk_id(),
        "vocab": vocab,
        "byte_fallback": model.byte_fallback(),
    })
}
