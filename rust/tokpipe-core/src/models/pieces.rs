//! sentencepiece's pieces: a piece's text, score and type ([`Piece`], [`PieceKind`]), the
//! `<0xNN>` byte pieces, what a `.model` holds beyond its pieces ([`SpmExtras`]) and the index
//! sentencepiece's loader builds over them (`index_spm_pieces`).
//!
//! Every model read from a `.model` is made of these, the Unigram model
//! ([`crate::models::unigram`]) and the character-level BPE model ([`crate::models::bpe`]),
//! and the decoders and the file formats read them; so they live apart from both models.

use crate::error::{shown, Error, Result};
use rustc_hash::FxHashMap;

/// No id: the unknown piece of a byte-fallback model that has none, a byte without its piece.
pub(crate) const NONE: u32 = u32::MAX;

/// sentencepiece's `kMaxPieceSize`: a piece this long is refused.
const MAX_PIECE_BYTES: usize = 8000;

/// What sentencepiece's `InitializePieces` makes of a `.model`'s pieces, for every model type:
/// the `PieceToId` map (a reserved piece, CONTROL, UNKNOWN or BYTE, shadows a NORMAL,
/// USER_DEFINED or UNUSED one of the same text), the UNKNOWN piece ([`NONE`] when there is
/// none, which only `byte_fallback` allows) and the `<0xNN>` piece of each byte.
pub(crate) struct SpmIndex {
    pub vocab: FxHashMap<Box<str>, u32>,
    pub unk: u32,
    pub byte_ids: Box<[u32; 256]>,
}

/// [`SpmIndex`] of `pieces` in id order, with sentencepiece's checks (see [`UnigramModel::new`]).
pub(crate) fn index_spm_pieces(
    pieces: &[Piece],
    byte_fallback: bool,
    source: &str,
) -> Result<SpmIndex> {
    let bad = |msg: String| Error::format(source, msg);
    let mut vocab: FxHashMap<Box<str>, u32> = FxHashMap::default();
    let mut byte_ids = Box::new([NONE; 256]);
    let mut unk = None;
    let mut reserved: FxHashMap<&str, u32> = FxHashMap::default();
    for (id, p) in pieces.iter().enumerate() {
        let id = id as u32;
        if p.text.is_empty() {
            return Err(bad(format!("piece {id} is empty")));
        }
        if p.text.len() >= MAX_PIECE_BYTES {
            return Err(bad(format!(
                "piece {id} is too long ({} bytes)",
                p.text.len()
            )));
        }
        if !p.score.is_finite() {
            return Err(bad(format!(
                "piece {id} {} has score {}",
                shown(&p.text),
                p.score
            )));
        }
        if p.text == "\0" && p.kind == PieceKind::Unused {
            continue;
        }
        if p.text.contains('\0') {
            return Err(bad(format!(
                "piece {id} {} holds a NUL character",
                shown(&p.text)
            )));
        }
        let normal = matches!(
            p.kind,
            PieceKind::Normal | PieceKind::UserDefined | PieceKind::Unused
        );
        let clash = if normal {
            vocab.insert(p.text.as_str().into(), id).is_some()
        } else {
            reserved.insert(&p.text, id).is_some()
        };
        if clash {
            return Err(bad(format!("piece {} is defined twice", shown(&p.text))));
        }
        match p.kind {
            PieceKind::Unknown if unk.is_some() => {
                return Err(bad("more than one UNKNOWN piece".into()))
            }
            PieceKind::Unknown => unk = Some(id),
            PieceKind::Byte => {
                if !byte_fallback {
                    return Err(bad(format!(
                        "byte piece {} found although byte_fallback is false",
                        shown(&p.text)
                    )));
                }
                let b = piece_byte(&p.text).ok_or_else(|| {
                    bad(format!(
                        "byte piece {} is not <0x00>..<0xFF>",
                        shown(&p.text)
                    ))
                })?;
                byte_ids[b as usize] = id;
            }
            _ => {}
        }
    }
    if byte_fallback && byte_ids.contains(&NONE) {
        return Err(bad(
            "byte_fallback is true but not all 256 byte pieces are defined".into(),
        ));
    }
    for (text, id) in reserved {
        vocab.insert(text.into(), id);
    }
    // With byte_fallback an unknown character is always spelled in bytes, so the
    // model needs no unknown piece.
    let unk = match unk {
        Some(unk) => unk,
        None if byte_fallback => NONE,
        None => return Err(bad("no UNKNOWN piece (<unk>) is defined".into())),
    };
    Ok(SpmIndex {
        vocab,
        unk,
        byte_ids,
    })
}

/// A piece's type in a sentencepiece model (`ModelProto.SentencePiece.Type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PieceKind {
    Normal,
    Unknown,
    /// `<s>`, `</s>`, ...: never produced from text.
    Control,
    /// Matched whole wherever it occurs in the text.
    UserDefined,
    /// `<0x00>` ... `<0xFF>`, for `byte_fallback`.
    Byte,
    /// Kept in the vocabulary, never produced.
    Unused,
}

impl PieceKind {
    /// From the `.model` enum number.
    pub fn from_spm(n: i32) -> Option<Self> {
        Some(match n {
            1 => PieceKind::Normal,
            2 => PieceKind::Unknown,
            3 => PieceKind::Control,
            4 => PieceKind::UserDefined,
            5 => PieceKind::Unused,
            6 => PieceKind::Byte,
            _ => return None,
        })
    }

    /// The `.model` enum number.
    pub fn spm_number(self) -> i32 {
        match self {
            PieceKind::Normal => 1,
            PieceKind::Unknown => 2,
            PieceKind::Control => 3,
            PieceKind::UserDefined => 4,
            PieceKind::Unused => 5,
            PieceKind::Byte => 6,
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    pub text: String,
    /// Log probability (sentencepiece stores an `f32`).
    pub score: f64,
    pub kind: PieceKind,
}

impl Piece {
    pub fn new(text: impl Into<String>, score: f64, kind: PieceKind) -> Self {
        Piece {
            text: text.into(),
            score,
            kind,
        }
    }
}

/// Whose encoding rules a model follows: sentencepiece's (a `.model`) or HF's (a
/// `tokenizer.json`); [`crate::models::unigram`] says where they differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Semantics {
    SentencePiece,
    HuggingFace,
}

/// sentencepiece's spelling of byte `b` as a piece.
pub fn byte_piece(b: u8) -> String {
    format!("<0x{b:02X}>")
}

/// The id of each byte's `<0xNN>` piece as `lookup` finds it; `missing` where it finds none.
pub fn byte_piece_ids(missing: u32, lookup: impl Fn(&str) -> Option<u32>) -> Box<[u32; 256]> {
    let mut ids = Box::new([missing; 256]);
    for b in 0..=255u8 {
        if let Some(id) = lookup(&byte_piece(b)) {
            ids[b as usize] = id;
        }
    }
    ids
}

/// The byte a `<0xNN>` piece stands for.
pub fn piece_byte(piece: &str) -> Option<u8> {
    let hex = piece.strip_prefix("<0x")?.strip_suffix('>')?;
    if hex.len() != 2
        || !hex
            .bytes()
            .all(|c| c.is_ascii_digit() || (b'A'..=b'F').contains(&c))
    {
        return None;
    }
    u8::from_str_radix(hex, 16).ok()
}

/// The parts of a sentencepiece `ModelProto` that no component of the tokenizer represents,
/// as their serialized bytes (see `formats::sentencepiece`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SpmExtras {
    pub trainer_spec: Vec<u8>,
    pub self_test_data: Option<Vec<u8>>,
    /// Top-level fields the format does not define (extensions), serialized.
    pub unknown: Vec<u8>,
    /// Per piece id, its fields beyond piece, score and type (extensions), serialized.
    pub piece_unknown: Vec<(u32, Vec<u8>)>,
    /// Whether each piece's score and type were present in the file (proto2 keeps the
    /// difference between "absent" and "default"), by id.
    pub piece_presence: Vec<(bool, bool)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_pieces_parse_only_in_their_exact_spelling() {
        assert_eq!(piece_byte("<0x0A>"), Some(10));
        assert_eq!(piece_byte("<0xff>"), None);
        assert_eq!(piece_byte("<0x100>"), None);
        assert_eq!(piece_byte("0x0A"), None);
        for b in 0..=255u8 {
            assert_eq!(piece_byte(&byte_piece(b)), Some(b));
        }
    }
}
