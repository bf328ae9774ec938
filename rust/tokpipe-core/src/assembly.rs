//! Tokenizer assembly: the presets that put a whole [`Tokenizer`] (normalizer, pre-tokenizer,
//! special tokens, post-processor, decoder) around a model.
//!
//! This module sits above both the models, which know nothing of the tokenizer (a trainer
//! returns the model and its special tokens, see [`crate::models::Trainer`]), and
//! [`crate::tokenizer`], which knows nothing of the presets; the file readers of
//! [`crate::formats`] sit between them and the sentencepiece preset reuses one.
//!
//! - [`bert_tokenizer`]: HF's `BertWordPieceTokenizer` around a WordPiece model (a `vocab.txt`,
//!   or a trained model: [`wordpiece_tokenizer`]).
//! - [`bpe_tokenizer`]: a trained byte-level BPE with the pre-tokenizer it was trained with.
//! - [`unigram_tokenizer`]: trained Unigram pieces, as the `.model` sentencepiece would write
//!   for them and the training options (`unigram_spec`) loads.
//! - [`train_bpe`], [`train_wordpiece`], [`train_unigram`]: train, then assemble (what the
//!   binding's `train` methods call).

mod unigram_spec;

use crate::error::Result;
use crate::formats::sentencepiece::tokenizer_from_proto;
use crate::models::base::{Model, Trainer};
use crate::models::bpe::{BpeModel, BpeTrainer, TrainedBpe};
use crate::models::unigram::trainer::{
    UnigramPieces, UnigramTrainStats, UnigramTrainer, UnigramTrainerConfig,
};
use crate::models::wordpiece::{TrainedWordPiece, WordPieceModel, WordPieceTrainer};
use crate::normalizers::{BertNormalizer, Normalizer};
use crate::pre_tokenizers::PreTokenizer;
use crate::tokenizer::{AddedToken, Decoder, PostProcessor, Tokenizer};

/// BERT's special tokens, in the order HF's `BertWordPieceTokenizer` registers them.
pub const BERT_SPECIAL_TOKENS: [&str; 5] = ["[UNK]", "[SEP]", "[CLS]", "[PAD]", "[MASK]"];

/// A BERT tokenizer around `model`, as HF's `BertWordPieceTokenizer` builds one: the BERT
/// normalizer `normalizer`, the BERT pre-tokenizer, the
/// BERT special tokens the vocabulary has, `[CLS] … [SEP]` when special tokens are asked for,
/// and the WordPiece decoder.
pub fn bert_tokenizer(model: WordPieceModel, normalizer: BertNormalizer) -> Result<Tokenizer> {
    let specials: Vec<AddedToken> = BERT_SPECIAL_TOKENS
        .iter()
        .filter_map(|t| model.token_to_id(t).map(|id| AddedToken::special(*t, id)))
        .collect();
    let post = match (model.token_to_id("[CLS]"), model.token_to_id("[SEP]")) {
        (Some(cls), Some(sep)) => Some(PostProcessor::Bert {
            cls: ("[CLS]".into(), cls),
            sep: ("[SEP]".into(), sep),
        }),
        _ => None,
    };
    let decoder = Decoder::WordPiece {
        prefix: model.continuing_subword_prefix().to_string(),
        cleanup: true,
    };
    Ok(Tokenizer::new(PreTokenizer::Bert, model, specials)?
        .with_normalizer(Some(Normalizer::Bert(normalizer)))
        .with_post_processor(post)
        .with_decoder(decoder))
}

/// The BERT tokenizer around a trained WordPiece model, with the normalizer its words were
/// counted after. Its special tokens are BERT's preset's, as for a `vocab.txt`, so the trained
/// tokenizer is the one its `vocab.txt` loads back into; `trained.specials` (the configured
/// tokens, HF's trainer's answer) is not needed for that.
pub fn wordpiece_tokenizer(trained: TrainedWordPiece) -> Result<Tokenizer> {
    bert_tokenizer(trained.model, trained.normalizer)
}

/// The tokenizer trained byte-level BPE merges make with `pre`, the pre-tokenizer they were
/// trained with, and the special tokens (which `encode` treats as text unless allowed).
pub fn bpe_tokenizer(trained: TrainedBpe, pre: PreTokenizer) -> Result<Tokenizer> {
    let model = BpeModel::from_merges(trained.vocab, trained.merges, false, "<trained>")?;
    let specials = trained
        .specials
        .into_iter()
        .map(|(text, id)| AddedToken::special(text, id))
        .collect();
    Tokenizer::new(pre, model, specials)
}

/// The tokenizer of trained Unigram pieces: the one [`crate::formats::sentencepiece::load`]
/// reads from the `.model` sentencepiece writes for these pieces and `config`'s options.
pub fn unigram_tokenizer(
    trained: &UnigramPieces,
    config: &UnigramTrainerConfig,
) -> Result<Tokenizer> {
    let proto = unigram_spec::model_proto(
        &trained.pieces,
        unigram_spec::trainer_spec(config),
        unigram_spec::normalizer_spec(config)?,
    );
    tokenizer_from_proto(&proto, "<trained Unigram model>")
}

/// Learns the merges and returns the tokenizer with the trainer's pre-tokenizer.
pub fn train_bpe(trainer: BpeTrainer) -> Result<Tokenizer> {
    let pre = trainer.pre_tokenizer().clone();
    bpe_tokenizer(Trainer::train(trainer)?, pre)
}

/// Learns the vocabulary and returns the BERT tokenizer around it.
pub fn train_wordpiece(trainer: WordPieceTrainer) -> Result<Tokenizer> {
    wordpiece_tokenizer(Trainer::train(trainer)?)
}

/// Learns the pieces and returns the tokenizer and what training read and did.
pub fn train_unigram(trainer: UnigramTrainer) -> Result<(Tokenizer, UnigramTrainStats)> {
    let config = trainer.config().clone();
    let trained = Trainer::train(trainer)?;
    Ok((unigram_tokenizer(&trained, &config)?, trained.stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::formats::sentencepiece;
    use crate::models::pieces::PieceKind;
    use crate::normalizers::spm_rules;
    use crate::tokenizer::AllowedSpecial;
    use crate::util::shared_text as corpus;

    fn trained_unigram(text: &str, config: UnigramTrainerConfig) -> Tokenizer {
        let mut trainer = UnigramTrainer::new(config).unwrap();
        trainer.feed(&[text]).unwrap();
        train_unigram(trainer).unwrap().0
    }

    #[test]
    fn the_unigram_tokenizer_is_the_one_its_model_file_loads() {
        let text = corpus("botchan.txt");
        let config = UnigramTrainerConfig {
            vocab_size: 700,
            byte_fallback: true,
            user_defined_symbols: vec!["<sep>".into()],
            pad_id: Some(3),
            ..Default::default()
        };
        let tok = trained_unigram(&text, config);
        let bytes = sentencepiece::to_vec(&tok).unwrap();
        let loaded = sentencepiece::from_bytes(&bytes, "m.model").unwrap();
        assert_eq!(sentencepiece::to_vec(&loaded).unwrap(), bytes);
        let sample = "Botchan<sep> said ＡＢＣ \u{6f22}\tthen  left.";
        let none = AllowedSpecial::None;
        let ids = tok.encode(sample, &none).unwrap();
        assert_eq!(ids, loaded.encode(sample, &none).unwrap());
        assert!(ids.contains(&tok.token_to_id("<sep>").unwrap()));
        assert_eq!(tok.token_to_id("<pad>"), Some(3));
        // Byte fallback spells the unseen character as its UTF-8 bytes.
        let bytes_of_han: Vec<u32> = ["<0xE6>", "<0xBC>", "<0xA2>"]
            .iter()
            .map(|p| tok.token_to_id(p).unwrap())
            .collect();
        assert!(ids.windows(3).any(|w| w == bytes_of_han));
    }

    /// Training normalizes with `spm_rules::trainer_normalizer`; the tokenizer normalizes with
    /// what its `.model`'s `NormalizerSpec` loads into. The two must agree for every rule and
    /// whitespace option, or the pieces would be learned on other text than they meet.
    #[test]
    fn the_unigram_tokenizer_normalizes_as_training_did() {
        let pieces = UnigramPieces {
            pieces: vec![
                ("<unk>".into(), 0.0, PieceKind::Unknown),
                ("<s>".into(), 0.0, PieceKind::Control),
                ("</s>".into(), 0.0, PieceKind::Control),
                ("\u{2581}".into(), -1.0, PieceKind::Normal),
                ("a".into(), -2.0, PieceKind::Normal),
            ],
            stats: UnigramTrainStats::default(),
        };
        let samples = [
            "  Ｈｅｌｌｏ,\tWORLD  ① ﬁne\u{3000}text  ",
            "ＡＢＣ\u{00a0}é e\u{301}  Straße ",
        ];
        for rule in spm_rules::RULE_NAMES {
            for (add_dummy_prefix, remove_extra_whitespaces) in
                [(true, true), (false, true), (true, false), (false, false)]
            {
                let config = UnigramTrainerConfig {
                    normalization: rule.into(),
                    add_dummy_prefix,
                    remove_extra_whitespaces,
                    vocab_size: pieces.pieces.len(),
                    ..Default::default()
                };
                let tok = unigram_tokenizer(&pieces, &config).unwrap();
                let Some(Normalizer::SentencePiece(loaded)) = tok.normalizer() else {
                    panic!("a sentencepiece tokenizer has a sentencepiece normalizer");
                };
                let training =
                    spm_rules::trainer_normalizer(rule, add_dummy_prefix, remove_extra_whitespaces)
                        .unwrap();
                for text in samples {
                    assert_eq!(
                        loaded.normalize(text),
                        training.normalize(text),
                        "{rule} {add_dummy_prefix} {remove_extra_whitespaces}: {text:?}"
                    );
                }
            }
        }
    }
}
