//! Pre-tokenizer throughput: each hand-written preset scanner against fancy-regex running the
//! published pattern, on the shared corpora (English, Japanese, Chinese, English web text).
//! Why: the scanners exist only to be faster than the regex while giving the same pieces, so
//! this is the number that justifies them. Run with `cargo bench -p tokpipe-benches --bench encode`;
//! criterion reports MB/s (decimal bytes) per corpus, preset and engine.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::io::Read;
use std::path::{Path, PathBuf};
use tokpipe_core::pre_tokenizers::{scanners, PreTokenizer, Preset};

fn corpora_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/corpora")
}

/// Named benchmark texts; a missing corpus is skipped so the bench still runs elsewhere.
fn corpora() -> Vec<(&'static str, String)> {
    let dir = corpora_dir();
    let read = |p: &str| std::fs::read_to_string(dir.join(p)).ok();
    let mut out = Vec::new();
    if let Some(t) = read("text/tinyshakespeare.txt") {
        out.push(("en_shakespeare", t));
    }
    if let Some(t) = read("text/botchan.txt") {
        out.push(("en_botchan", t));
    }
    if let Some(t) = read("text/wagahaiwa_nekodearu.txt") {
        out.push(("ja_neko", t));
    }
    // The Chinese notes are small; concatenated they make one corpus.
    if let Ok(entries) = std::fs::read_dir(dir.join("text/zh_notes")) {
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        let zh: String = paths
            .iter()
            .filter_map(|p| std::fs::read_to_string(p).ok())
            .collect();
        if !zh.is_empty() {
            out.push(("zh_notes", zh));
        }
    }
    // Web text: the `text` fields of the jsonl.gz records, joined by blank lines.
    let mut web = String::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("web")) {
        let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.retain(|p| p.to_string_lossy().ends_with(".jsonl.gz"));
        paths.sort();
        for p in paths {
            let mut s = String::new();
            if flate2::read::GzDecoder::new(std::fs::File::open(&p).unwrap())
                .read_to_string(&mut s)
                .is_err()
            {
                continue;
            }
            for line in s.lines() {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
                    if let Some(t) = v["text"].as_str() {
                        web.push_str(t);
                        web.push_str("\n\n");
                    }
                }
            }
        }
    }
    if !web.is_empty() {
        out.push(("en_web", web));
    }
    out
}

fn bench_pre_tokenizers(c: &mut Criterion) {
    let corpora = corpora();
    assert!(
        !corpora.is_empty(),
        "no corpora under {}",
        corpora_dir().display()
    );
    for (corpus, text) in &corpora {
        let mut group = c.benchmark_group(format!("pretok/{corpus}"));
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.sample_size(10);
        for preset in [Preset::Gpt2, Preset::Cl100k, Preset::O200k] {
            let name = preset.name();
            group.bench_function(format!("{name}/scanner"), |b| {
                b.iter(|| {
                    let mut n = 0usize;
                    let mut emit = |p: &str| n += black_box(p).len();
                    match preset {
                        Preset::Gpt2 => scanners::gpt2(black_box(text), &mut emit),
                        Preset::Cl100k => scanners::cl100k(black_box(text), &mut emit),
                        Preset::O200k => scanners::o200k(black_box(text), &mut emit),
                    }
                    n
                })
            });
            let re = PreTokenizer::regex(preset.pattern()).unwrap();
            group.bench_function(format!("{name}/fancy-regex"), |b| {
                b.iter(|| {
                    let mut n = 0usize;
                    re.split(black_box(text), |p| n += black_box(p).len())
                        .unwrap();
                    n
                })
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench_pre_tokenizers);
criterion_main!(benches);
