//! Unit tests of the fastText reader: hand-made model files (dense, quantized, pruned, both
//! losses) whose predictions are worked out by hand. The agreement with fastText itself, on
//! models it trains and quantizes, is tested from Python (tests/pipeline/stages/test_language.py).

use super::file::{HIERARCHICAL_SOFTMAX, MAGIC, SOFTMAX, SUPERVISED};
use super::*;

#[test]
fn fnv_sign_extends_high_bytes() {
    // FNV-1a of "a" is 0xe40c292c; a byte >= 0x80 is xored as 0xffffff80 and up.
    assert_eq!(fnv(b"a"), 0xe40c292c);
    let unsigned = (2166136261u32 ^ 0xC3).wrapping_mul(16777619);
    let signed = (2166136261u32 ^ 0xFFFF_FFC3).wrapping_mul(16777619);
    assert_ne!(unsigned, signed);
    assert_eq!(fnv(&[0xC3]), signed);
}

/// The header and dictionary of a model file as fastText lays it out: `words` then
/// `labels` (with `counts`), no buckets, no character n-grams, word unigrams only.
fn header(
    dim: i32,
    loss: i32,
    words: &[&str],
    labels: &[&str],
    counts: &[i64],
    prune: i64,
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend(MAGIC.to_le_bytes());
    f.extend(12i32.to_le_bytes());
    for a in [dim, 5, 5, 1, 5, 1, loss, SUPERVISED, 0, 0, 0, 100] {
        f.extend(a.to_le_bytes());
    }
    f.extend(1e-4f64.to_le_bytes());
    f.extend(((words.len() + labels.len()) as i32).to_le_bytes());
    f.extend((words.len() as i32).to_le_bytes());
    f.extend((labels.len() as i32).to_le_bytes());
    f.extend(100i64.to_le_bytes());
    f.extend(prune.to_le_bytes());
    for (kind, entries) in [(0u8, words), (1u8, labels)] {
        for (i, e) in entries.iter().enumerate() {
            f.extend(e.as_bytes());
            f.push(0);
            f.extend(if kind == 1 { counts[i] } else { 7i64 }.to_le_bytes());
            f.push(kind);
        }
    }
    f
}

fn dense(f: &mut Vec<u8>, rows: usize, dim: usize, values: &[f32]) {
    f.push(0);
    f.extend((rows as i64).to_le_bytes());
    f.extend((dim as i64).to_le_bytes());
    f.extend(values.iter().flat_map(|v| v.to_le_bytes()));
}

/// A softmax model file with dense matrices.
fn model_file(dim: i32, words: &[&str], labels: &[&str], input: &[f32], output: &[f32]) -> Vec<u8> {
    let mut f = header(dim, SOFTMAX, words, labels, &vec![1; labels.len()], -1);
    dense(&mut f, words.len(), dim as usize, input);
    dense(&mut f, labels.len(), dim as usize, output);
    f
}

fn probs(model: &FastText, line: &str, s: &mut Scratch) -> Vec<f32> {
    assert!(model.hidden(line.as_bytes(), s));
    model.softmax(s);
    s.probs.clone()
}

#[test]
fn predict_follows_fasttexts_rules() {
    // Rows: </s> = (1, 0), "a" = (0, 1); label x scores the first coordinate, y the second.
    let file = model_file(
        2,
        &["</s>", "a"],
        &["__label__x", "__label__y"],
        &[1., 0., 0., 1.],
        &[1., 0., 0., 1.],
    );
    let model = FastText::from_bytes(&file, "m.bin").unwrap();
    assert_eq!(model.labels(), ["__label__x", "__label__y"]);
    let mut s = Scratch::default();
    let sigmoid = |x: f32| 1.0 / (1.0 + (-x).exp());
    // "a", then "</s>": hidden (0.5, 0.5), a tie, which the later label wins.
    for line in [
        "a",
        "a b",
        " a\tb\x0b",
        "__label__x a __label__other",
        "a\nzzz a a",
        "a </s> a a",
    ] {
        assert_eq!(probs(&model, line, &mut s), [0.5, 0.5], "{line:?}");
        let (top, p) = model.predict_top(line.as_bytes(), &mut s).unwrap();
        assert_eq!(top, 1, "{line:?}");
        assert!((p - 0.50001).abs() < 1e-7, "{line:?}");
        // k = 2: both, the tie in the heap's order.
        let both: Vec<usize> = model
            .predict(line.as_bytes(), 2, 0.0, &mut s)
            .iter()
            .map(|p| p.1)
            .collect();
        assert_eq!(both, [1, 0], "{line:?}");
    }
    // "a a </s>": hidden (1/3, 2/3).
    let p = probs(&model, "a a", &mut s);
    assert!((p[1] - sigmoid(1.0 / 3.0)).abs() < 1e-6 && (p[0] + p[1] - 1.0).abs() < 1e-6);
    // A threshold leaves out the labels under it.
    assert_eq!(model.predict(b"a a", 2, 0.5, &mut s).len(), 1);
    // "</s>" alone (an empty line): hidden (1, 0), label x.
    assert_eq!(model.predict_top(b"", &mut s).unwrap().0, 0);
    // A word written twice is its last entry, as fastText's loader leaves it.
    let file = model_file(
        2,
        &["</s>", "a", "a"],
        &["__label__x", "__label__y"],
        &[1., 0., 0., 1., 9., 0.],
        &[1., 0., 0., 1.],
    );
    let model = FastText::from_bytes(&file, "m.bin").unwrap();
    assert_eq!(model.predict_top(b"a a a", &mut s).unwrap().0, 0);
    // No "</s>" in the dictionary and no known word: no features, no prediction.
    let file = model_file(
        2,
        &["a"],
        &["__label__x", "__label__y"],
        &[0., 1.],
        &[1., 0., 0., 1.],
    );
    let model = FastText::from_bytes(&file, "m.bin").unwrap();
    assert_eq!(model.predict_top(b"zzz", &mut s), None);
}

#[test]
fn the_k_best_heap_keeps_the_best_in_order() {
    // Against a sort: the k largest scores, best first (distinct scores: no ties).
    let scores: Vec<f32> = (0..40).map(|i| ((i * 37) % 41) as f32 - 20.0).collect();
    for k in 1..=scores.len() {
        let mut heap = Vec::new();
        let mut best = KBest { heap: &mut heap, k };
        for (i, &score) in scores.iter().enumerate() {
            if !best.excludes(score) {
                best.push((score, i));
            }
        }
        best.sort();
        let mut expected: Vec<(f32, usize)> = scores.iter().copied().zip(0..).collect();
        expected.sort_by(|a, b| b.0.total_cmp(&a.0));
        expected.truncate(k);
        assert_eq!(heap, expected, "k = {k}");
    }
}

#[test]
fn hierarchical_softmax_walks_fasttexts_huffman_tree() {
    // Three labels, counts 5, 3, 2: leaves 0, 1, 2; node 3 joins 2 and 1 (the two smallest,
    // leaf 2 left), node 4 (the root) joins node 3 (count 5) and leaf 0 (count 5: a leaf is
    // taken first only when strictly smaller). Inner node 3 scores with output row 0, the
    // root with row 1.
    let tree = Tree::new(&[5, 3, 2]);
    let (l, r): (Vec<i32>, Vec<i32>) = tree.nodes.iter().map(|n| (n.left, n.right)).unzip();
    assert_eq!((l, r), (vec![-1, -1, -1, 2, 3], vec![-1, -1, -1, 1, 0]));
    // hidden = row of "a" = (1, -2) (plus "</s>" = (0, 0)) / 2 = (0.5, -1).
    let mut f = header(
        2,
        HIERARCHICAL_SOFTMAX,
        &["</s>", "a"],
        &["__label__x", "__label__y", "__label__z"],
        &[5, 3, 2],
        -1,
    );
    dense(&mut f, 2, 2, &[0., 0., 1., -2.]);
    dense(&mut f, 3, 2, &[2., 0., 0., 1., 7., 7.]);
    let model = FastText::from_bytes(&f, "m.bin").unwrap();
    let mut s = Scratch::default();
    let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
    let (root, inner) = (sig(-1.0), sig(1.0)); // row 1 . h = -1, row 0 . h = 1
                                               // P(x) = root; P(z) = (1 - root) * (1 - inner); P(y) = (1 - root) * inner.
    let expected = [
        (1, (1.0 - root) * inner),
        (0, root),
        (2, (1.0 - root) * (1.0 - inner)),
    ];
    let got = model.predict(b"a", 3, 0.0, &mut s).to_vec();
    assert_eq!(got.iter().map(|p| p.1).collect::<Vec<_>>(), [1, 0, 2]);
    for ((label, p), (score, got_label)) in expected.iter().zip(got) {
        assert_eq!(*label, got_label);
        assert!(
            (score.exp() as f64 - p).abs() < 1e-4,
            "{label}: {} vs {p}",
            score.exp()
        );
    }
    // A threshold prunes the branches under it: only y (0.53) is over 0.5.
    assert_eq!(model.predict(b"a", 3, 0.5, &mut s).len(), 1);
}

/// A quantized hierarchical-softmax model: words "</s>", "a"; dim 3 as two sub-vectors
/// (2 + 1 values); rows' norms quantized; one n-gram bucket kept by pruning.
fn quantized_file(prune: &[(i32, i32)]) -> Vec<u8> {
    let mut f = header(
        3,
        HIERARCHICAL_SOFTMAX,
        &["</s>", "a"],
        &["__label__x", "__label__y"],
        &[4, 1],
        prune.len() as i64,
    );
    for &(bucket, row) in prune {
        f.extend(bucket.to_le_bytes());
        f.extend(row.to_le_bytes());
    }
    let rows = 2 + prune.len();
    f.push(1); // quantized input
    f.push(1); // qnorm
    f.extend((rows as i64).to_le_bytes());
    f.extend(3i64.to_le_bytes());
    f.extend((rows as i32 * 2).to_le_bytes());
    // Row 0 ("</s>"): centroids 0, 0; row 1 ("a"): centroids 1, 2; the n-gram: 0, 0.
    let codes = [0u8, 0, 1, 2, 0, 0];
    f.extend(&codes[..rows * 2]);
    for a in [3i32, 2, 2, 1] {
        f.extend(a.to_le_bytes());
    }
    // Sub-quantizer 0: 256 centroids of 2 values, centroid c = (c, -c); sub-quantizer 1:
    // 256 of 1 value, centroid c = 10 c.
    let mut centroids: Vec<f32> = (0..256).flat_map(|c| [c as f32, -(c as f32)]).collect();
    centroids.extend((0..256).map(|c| 10.0 * c as f32));
    f.extend(centroids.iter().flat_map(|v| v.to_le_bytes()));
    // Norm codes: "</s>" 1, "a" 2, the n-gram 0; norm centroid c = 0.5 c.
    f.extend(&[1u8, 2, 0][..rows]);
    for a in [1i32, 1, 1, 1] {
        f.extend(a.to_le_bytes());
    }
    f.extend((0..256).flat_map(|c| (0.5 * c as f32).to_le_bytes()));
    f.push(0); // dense output
    f.extend(2i64.to_le_bytes());
    f.extend(3i64.to_le_bytes());
    f.extend(
        [0.0f32, 0.0, 0.1, 0.0, 0.0, 0.0]
            .iter()
            .flat_map(|v| v.to_le_bytes()),
    );
    f
}

#[test]
fn quantized_rows_decode_as_fasttext_decodes_them() {
    let model = FastText::from_bytes(&quantized_file(&[]), "m.ftz").unwrap();
    let mut x = vec![0.0f32; 3];
    // Row 1: centroids (1, -1) and (20), times its norm 0.5 * 2.
    model.input.add_row(1, &mut x);
    assert_eq!(x, [1.0, -1.0, 20.0]);
    assert_eq!(model.input.dot_row(1, &[1.0, 2.0, 3.0]), 1.0 - 2.0 + 60.0);
    // Row 0's norm code is 1: 0.5 times centroids (0, 0) and (0).
    x.fill(0.0);
    model.input.add_row(0, &mut x);
    assert_eq!(x, [0.0, 0.0, 0.0]);
    // "a": hidden = (row 1 + row 0) / 2 = (0.5, -0.5, 10); the root (output row 0) scores
    // 0.1 * 10 = 1: P(x) = sigmoid(1) (the root joins the rarer y, left, and x, right).
    let mut s = Scratch::default();
    let (top, p) = model.predict_top(b"a", &mut s).unwrap();
    assert_eq!(top, 0);
    assert!((p - (1.0 / (1.0 + (-1.0f32).exp()) + 1e-5)).abs() < 1e-6);
}

#[test]
fn a_pruned_dictionary_keeps_only_its_buckets() {
    let map = {
        let mut m = PruneMap::with_capacity(3);
        for (b, r) in [(7, 0), (1_999_999, 1), (7, 2)] {
            m.insert(b, r);
        }
        m
    };
    assert_eq!(
        (map.get(7), map.get(1_999_999), map.get(8), map.len),
        (Some(2), Some(1), None, 2)
    );
    // Pruned of every n-gram (an empty map): no buckets; only "</s>" left of "a b".
    let model = FastText::from_bytes(&quantized_file(&[]), "m.ftz").unwrap();
    let mut s = Scratch::default();
    model.features(b"a zzz", &mut s);
    assert_eq!(s.features, [1, 0]);
    // A map's rows must lie among the kept rows.
    let err = FastText::from_bytes(&quantized_file(&[(5, 3)]), "m.ftz")
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("maps n-gram bucket 5 to row 3 of 1"), "{err}");
}

#[test]
fn bad_files_are_refused_with_a_reason() {
    let err = |bytes: &[u8]| {
        FastText::from_bytes(bytes, "m.bin")
            .err()
            .map(|e| e.to_string())
            .unwrap()
    };
    assert!(err(b"").contains("m.bin: fastText model ends inside its header"));
    assert!(err(&[0u8; 8]).contains("wrong magic"));
    let mut header = MAGIC.to_le_bytes().to_vec();
    header.extend(13i32.to_le_bytes());
    assert!(err(&header).contains("version 13"));
    let mut header = MAGIC.to_le_bytes().to_vec();
    header.extend(12i32.to_le_bytes());
    for a in [16, 5, 5, 1, 5, 2, 2, 3, 100, 0, 0, 100] {
        header.extend(i32::to_le_bytes(a));
    }
    header.extend(0f64.to_le_bytes());
    assert!(err(&header).contains("loss 2 is not supported"));
    // A maxn no model uses (a corrupt file) would ask for L * maxn n-grams per word.
    let mut header = MAGIC.to_le_bytes().to_vec();
    header.extend(12i32.to_le_bytes());
    for a in [16, 5, 5, 1, 5, 1, 3, 3, 100, 3, 1_000_000, 100] {
        header.extend(i32::to_le_bytes(a));
    }
    header.extend(0f64.to_le_bytes());
    assert!(err(&header).contains("maxn 1000000"), "{}", err(&header));
    // Every truncation of a quantized model, and a byte too many, is an error, not a panic.
    let file = quantized_file(&[]);
    for end in 0..file.len() {
        let message = err(&file[..end]);
        assert!(
            message.starts_with("m.bin: ") && message.contains("truncated"),
            "{end}: {message}"
        );
    }
    let mut longer = file.clone();
    longer.push(0);
    assert!(err(&longer).contains("1 bytes after the fastText model"));
    // An inconsistent quantizer: dsub 2, lastdsub 1 but 3 sub-vectors for dim 3.
    let at = file.len() - (1 + 16 + 24) - (16 + 256 * 4) - 2 - (4 * 3 * 256 + 16) + 4;
    let mut bad = file.clone();
    bad[at..at + 4].copy_from_slice(&3i32.to_le_bytes());
    assert!(
        err(&bad).contains("inconsistent product quantizer"),
        "{}",
        err(&bad)
    );
}

#[test]
fn a_hierarchical_softmax_as_deep_as_its_labels_is_walked_without_recursion() {
    // Every label counted 0 (a corrupt file): fastText's tree is a chain, each inner node
    // joining the last one (left) and the next leaf (right), so the root is 100,000 - 1 levels
    // above leaf 99,999 (the chain's end: the first inner node's left leaf). Every inner node
    // scores hidden (1) times -100: sigmoid 0, so each left step adds log(1 + 1e-5) and the
    // walk goes down the whole chain before it reaches a leaf. On a 256 KiB stack, one call per
    // level would overflow it (the process aborts).
    let n = 100_000;
    let labels = vec![""; n];
    let mut f = header(
        1,
        HIERARCHICAL_SOFTMAX,
        &["</s>", "a"],
        &labels,
        &vec![0; n],
        -1,
    );
    dense(&mut f, 2, 1, &[1., 1.]);
    dense(&mut f, n, 1, &vec![-100.; n]);
    let model = FastText::from_bytes(&f, "m.bin").unwrap();
    let top = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || model.predict_top(b"a", &mut Scratch::default()))
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(top.map(|(label, _)| label), Some(n - 1));
}

#[test]
fn corrupt_counts_and_sizes_are_refused_not_a_panic() {
    // A label count of 1e15 or more: fastText's tree building would pick an inner node not
    // built yet (and index past the tree).
    let mut f = header(
        1,
        HIERARCHICAL_SOFTMAX,
        &["</s>", "a"],
        &["x", "y"],
        &[2_000_000_000_000_000; 2],
        -1,
    );
    dense(&mut f, 2, 1, &[1., 1.]);
    dense(&mut f, 2, 1, &[1., 1.]);
    let err = FastText::from_bytes(&f, "m.bin").err().unwrap().to_string();
    assert!(
        err.contains("label count 2000000000000000 is too large"),
        "{err}"
    );
    // A quantized matrix whose row count times its sub-vectors overflows 64 bits (2^62 + 1
    // rows of 4 sub-vectors "make" 4 codes).
    let mut f = header(4, SOFTMAX, &["</s>", "a"], &["x", "y"], &[1, 1], -1);
    f.push(1); // quantized input
    f.push(0); // no qnorm
    f.extend(((1i64 << 62) + 1).to_le_bytes());
    f.extend(4i64.to_le_bytes());
    f.extend(4i32.to_le_bytes());
    f.extend([0u8; 4]);
    for a in [4i32, 4, 1, 1] {
        f.extend(a.to_le_bytes());
    }
    f.extend([0u8; 4 * 256 * 4]);
    let err = FastText::from_bytes(&f, "m.ftz").err().unwrap().to_string();
    assert!(
        err.contains("4 codes for 4611686018427387905 rows"),
        "{err}"
    );
}
