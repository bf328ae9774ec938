//! BPE trainer. PLACEHOLDER: being written.

#[derive(Clone, Debug)]
pub struct BpeTrainerConfig {
    pub vocab_size: usize,
    pub min_frequency: u64,
    pub special_tokens: Vec<String>,
    pub max_token_length: Option<usize>,
    pub show_progress: bool,
}

#[derive(Debug, Default)]
pub struct BpeTrainer;

#[derive(Debug)]
pub struct TrainedBpe;
