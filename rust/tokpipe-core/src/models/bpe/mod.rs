//! Byte-level BPE: the encoder ([`BpeModel`]) and the trainer ([`BpeTrainer`]).

mod model;
pub mod trainer;

pub use model::{BpeModel, MergeRule};
pub use trainer::{BpeTrainer, BpeTrainerConfig, TrainedBpe};
