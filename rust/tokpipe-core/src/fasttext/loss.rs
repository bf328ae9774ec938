//! How a fastText model turns its hidden vector into the k best labels: softmax over the
//! output matrix, or the hierarchical softmax (`loss hs`, the loss of the `lid.176` language
//! model) whose labels are the leaves of a Huffman tree built from the labels' training counts.
//! Both keep the k best in a min-heap as fastText does (the same heap operations as the C++
//! standard library's, so that ties come out in fastText's order), scores being
//! `log(p + 1e-5)` in `f32`.

use super::matrix::Matrix;

/// fastText's `std_log`: `log(x + 1e-5)`, in `f64`, rounded to `f32`.
#[inline]
pub(super) fn std_log(x: f32) -> f32 {
    (x as f64 + 1e-5).ln() as f32
}

/// A prediction: `(log score, label index)`.
pub type Prediction = (f32, usize);

/// The k best predictions, a heap ordered as fastText's `comparePairs` orders it (the
/// smallest score on top), with the heap algorithms of libstdc++ (`push_heap`, `pop_heap`,
/// `sort_heap`) step for step: which of two equal scores stays is theirs.
pub(super) struct KBest<'h> {
    pub(super) heap: &'h mut Vec<Prediction>,
    pub(super) k: usize,
}

/// fastText's `comparePairs`: `a` comes before `b` in the heap's order when its score is larger.
#[inline]
fn before(a: &Prediction, b: &Prediction) -> bool {
    a.0 > b.0
}

/// libstdc++'s `__push_heap`: moves `value` up from `hole` towards `top`.
fn push_up(heap: &mut [Prediction], mut hole: usize, top: usize, value: Prediction) {
    while hole > top {
        let parent = (hole - 1) / 2;
        if !before(&heap[parent], &value) {
            break;
        }
        heap[hole] = heap[parent];
        hole = parent;
    }
    heap[hole] = value;
}

/// libstdc++'s `__adjust_heap` on `heap[..len]` from `hole`, then `value` pushed up.
fn adjust(heap: &mut [Prediction], mut hole: usize, len: usize, value: Prediction) {
    let top = hole;
    let mut child = hole;
    while len >= 2 && child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if before(&heap[child], &heap[child - 1]) {
            child -= 1;
        }
        heap[hole] = heap[child];
        hole = child;
    }
    if len & 1 == 0 && len >= 2 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        heap[hole] = heap[child - 1];
        hole = child - 1;
    }
    push_up(heap, hole, top, value);
}

/// libstdc++'s `pop_heap` of `heap[..len]`: the top goes to `len - 1`.
fn pop(heap: &mut [Prediction], len: usize) {
    if len > 1 {
        let value = heap[len - 1];
        heap[len - 1] = heap[0];
        adjust(heap, 0, len - 1, value);
    }
}

impl KBest<'_> {
    /// Whether a score can no longer enter: the heap is full and it is under the smallest.
    #[inline]
    pub(super) fn excludes(&self, score: f32) -> bool {
        self.heap.len() == self.k && score < self.heap[0].0
    }

    pub(super) fn push(&mut self, p: Prediction) {
        self.heap.push(p);
        let last = self.heap.len() - 1;
        push_up(self.heap, last, 0, p);
        if self.heap.len() > self.k {
            let len = self.heap.len();
            pop(self.heap, len);
            self.heap.pop();
        }
    }

    /// `sort_heap`: best first.
    pub(super) fn sort(self) {
        let mut len = self.heap.len();
        while len > 1 {
            pop(self.heap, len);
            len -= 1;
        }
    }
}

/// fastText's softmax `predict` (`findKBest`) over the output matrix's scores `probs`.
pub(super) fn softmax_k_best(probs: &[f32], threshold: f32, best: &mut KBest<'_>) {
    for (i, &p) in probs.iter().enumerate() {
        if p < threshold {
            continue;
        }
        let score = std_log(p);
        if best.excludes(score) {
            continue;
        }
        best.push((score, i));
    }
}

/// fastText's count of an inner node not built yet (`1e15`): the tree is built right only
/// when every label's count is under it (`file` refuses others; fastText reads past its tree).
pub(super) const UNBUILT_COUNT: i64 = 1_000_000_000_000_000;

#[derive(Clone, Copy)]
pub(super) struct Node {
    pub(super) left: i32,
    pub(super) right: i32,
}

/// The Huffman tree of a hierarchical softmax: leaves `0..labels` (the labels), inner nodes
/// after them, the root last; inner node `i` scores with output row `i - labels`.
pub(super) struct Tree {
    labels: usize,
    pub(super) nodes: Vec<Node>,
}

impl Tree {
    /// fastText's `buildTree`: labels come sorted by count, most frequent first (as fastText's
    /// dictionary keeps them), and the two smallest of the leaves left and the inner nodes made
    /// so far join, in fastText's order.
    pub(super) fn new(counts: &[i64]) -> Tree {
        let osz = counts.len();
        let mut count = vec![UNBUILT_COUNT; 2 * osz - 1];
        count[..osz].copy_from_slice(counts);
        let mut nodes = vec![
            Node {
                left: -1,
                right: -1
            };
            2 * osz - 1
        ];
        let mut leaf = osz as isize - 1;
        let mut node = osz;
        for i in osz..2 * osz - 1 {
            let mut mini = [0usize; 2];
            for m in mini.iter_mut() {
                if leaf >= 0 && count[leaf as usize] < count[node] {
                    *m = leaf as usize;
                    leaf -= 1;
                } else {
                    *m = node;
                    node += 1;
                }
            }
            nodes[i] = Node {
                left: mini[0] as i32,
                right: mini[1] as i32,
            };
            count[i] = count[mini[0]].wrapping_add(count[mini[1]]);
        }
        Tree { labels: osz, nodes }
    }

    /// fastText's `HierarchicalSoftmaxLoss::predict`: a depth-first walk from the root, left
    /// (`1 - sigmoid`) before right (`sigmoid`), that leaves a branch once its score is under
    /// `log(threshold)` or can no longer enter the k best. fastText recurses; this walk keeps
    /// its pending branches in `stack` instead, as a corrupt file's label counts can make the
    /// tree as deep as it has labels (all counts 0: a chain) and a recursion that deep would
    /// overflow the thread's stack. A right branch waits under its left one and is checked when
    /// the left subtree is done, as in fastText's recursion, so the visits are in its order.
    pub(super) fn k_best(
        &self,
        output: &Matrix,
        hidden: &[f32],
        threshold: f32,
        best: &mut KBest<'_>,
        stack: &mut Vec<(usize, f32)>,
    ) {
        let floor = std_log(threshold);
        stack.clear();
        stack.push((2 * self.labels - 2, 0.0));
        while let Some((node, score)) = stack.pop() {
            if score < floor || best.excludes(score) {
                continue;
            }
            let Node { left, right } = self.nodes[node];
            if left == -1 && right == -1 {
                best.push((score, node));
                continue;
            }
            let f = output.dot_row(node - self.labels, hidden);
            // fastText: `f = 1. / (1 + std::exp(-f))`, the exponential in f32, the division in f64.
            let f = (1.0f64 / (1.0f32 + (-f).exp()) as f64) as f32;
            stack.push((right as usize, score + std_log(f)));
            // `std_log(1.0 - f)` takes a real (f32): the difference is rounded first.
            stack.push((left as usize, score + std_log((1.0f64 - f as f64) as f32)));
        }
    }
}
