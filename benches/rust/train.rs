//! BPE trainer throughput on the shared text corpora (English, Japanese, Chinese prose read as
//! lines, as HF reads files): counting pre-tokens alone, and counting plus learning an 8k
//! vocabulary. The Python side-by-side with HF and gigatoken is `benches/python/bench_train.py`;
//! this one isolates the core so a change to the counter or the merge loop shows up on its
//! own. Run with `cargo bench -p tokpipe-benches --bench train`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::path::{Path, PathBuf};
use tokpipe_core::corpus::CorpusOptions;
use tokpipe_core::models::bpe::{BpeTrainer, BpeTrainerConfig};
use tokpipe_core::pre_tokenizers::PreTokenizer;

fn text_files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpora/text");
    let mut files = Vec::new();
    let mut stack = vec![dir.clone()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "txt") {
                files.push(path);
            }
        }
    }
    files.sort();
    assert!(!files.is_empty(), "no .txt files under {}", dir.display());
    files
}

fn trainer(vocab_size: usize) -> BpeTrainer {
    let config = BpeTrainerConfig {
        vocab_size,
        min_frequency: 2,
        special_tokens: vec!["<|endoftext|>".into()],
        max_token_length: None,
        show_progress: false,
    };
    BpeTrainer::new(config, PreTokenizer::new("gpt2").unwrap()).unwrap()
}

fn bench_train(c: &mut Criterion) {
    let files = text_files();
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).unwrap().len())
        .sum();
    let opts = CorpusOptions::default();
    let mut group = c.benchmark_group("train/shared_text");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(10);
    group.bench_function("count", |b| {
        b.iter(|| {
            let mut t = trainer(8000);
            t.feed_files(&files, &opts).unwrap()
        })
    });
    group.bench_function("count+merge_8k", |b| {
        b.iter(|| {
            let mut t = trainer(8000);
            t.feed_files(&files, &opts).unwrap();
            t.train().unwrap()
        })
    });
    group.finish();
}

criterion_group!(benches, bench_train);
criterion_main!(benches);
