//! The WordPiece encoder: greedy longest-match-first (BERT's rule, and HF `tokenizers`'),
//! computed in time linear in the word with LinMaxMatch ("Fast WordPiece Tokenization",
//! Song et al., EMNLP 2021).
//!
//! (Over 500 lines: the LinMaxMatch construction, its bounded-pops fallback and the tests that
//! check both against plain greedy matching belong together.)
//!
//! Two tries over the tokens' UTF-8 bytes: one from the root `r` holding every vocabulary
//! string as written (a word's first token is looked up as is, so `##x` matches there too, as
//! in HF), and one from the suffix root `r#` holding the continuing tokens without their
//! `##` prefix. Every node `v` gets, once, at load time:
//! - `pops(v)`: the tokens greedy matching emits on the text spelled by `v` until what is left
//!   is a path from `r#`;
//! - `fail(v)`: the node of that leftover under `r#`, or none when greedy matching of that
//!   text gets stuck (the word is then `[UNK]`).
//!
//! Encoding walks the trie; where no edge continues, it emits `pops(v)` and jumps to `fail(v)`,
//! so each byte is read once and each token emitted once. Matching bytes rather than chars
//! gives the same tokens: every token is whole UTF-8, so matches end on char boundaries.
//!
//! `pops(v)` grows with the depth of `v`, so keeping every one would take memory quadratic in
//! a token's length (one 40,000-character line of `vocab.txt`: 3.2 GB). Real vocabularies need
//! a handful at most; a node whose pops would pass [`MAX_POPS`] keeps none and is marked, and a
//! word that reaches it is matched by the plain greedy walk over the same tries instead
//! (quadratic in the word, as HF's loop is, and only for such crafted vocabularies).

use crate::error::{shown, Error, Result};
use crate::models::base::Model;
use rustc_hash::FxHashMap;
use std::borrow::Cow;
use std::collections::VecDeque;

/// BERT's and HF's `max_input_chars_per_word`: a longer word is `[UNK]`.
pub const DEFAULT_MAX_INPUT_CHARS_PER_WORD: usize = 100;

/// The most failure pops a node keeps (see the module notes).
const MAX_POPS: usize = 16;

const NONE: u32 = u32::MAX;
/// `fail` of a node whose pops were too many to keep: the word is matched by the greedy walk.
const TOO_DEEP: u32 = u32::MAX - 1;
const ROOT: u32 = 0;
const SUFFIX_ROOT: u32 = 1;

/// How the linear walk over a word ended.
enum Walk {
    /// The word's tokens are written.
    Matched,
    /// Greedy matching gets stuck: the word is `[UNK]`.
    Stuck,
    /// The walk reached a node that keeps no pops: match the word with the greedy walk.
    TooDeep,
}

#[derive(Clone, Debug)]
struct Node {
    /// This node's edges are `edge_bytes[edges..edges + n_edges]` (sorted by byte).
    edges: u32,
    n_edges: u32,
    fail: u32,
    pops: u32,
    n_pops: u32,
}

/// The two tries with failure links and failure pops, flattened for matching.
#[derive(Clone, Debug)]
struct LinMaxMatch {
    nodes: Vec<Node>,
    edge_bytes: Vec<u8>,
    edge_targets: Vec<u32>,
    /// Dense child tables of the two roots, where most lookups start and fan-out is widest.
    root_children: Box<[u32; 256]>,
    suffix_children: Box<[u32; 256]>,
    pops: Vec<u32>,
}

impl LinMaxMatch {
    /// `tokens`: (text, id); `prefix`: the continuing-subword prefix; `max_pops`: the most
    /// failure pops a node keeps.
    fn build<'a>(
        tokens: impl Iterator<Item = (&'a str, u32)> + Clone,
        prefix: &str,
        max_pops: usize,
    ) -> Self {
        // Build with per-node child lists, then flatten.
        let mut children: Vec<Vec<(u8, u32)>> = vec![Vec::new(), Vec::new()];
        let mut token_at: Vec<u32> = vec![NONE, NONE];
        let mut insert = |from: u32, bytes: &[u8], id: u32| {
            let mut node = from;
            for &b in bytes {
                node = match children[node as usize].iter().find(|(c, _)| *c == b) {
                    Some(&(_, child)) => child,
                    None => {
                        let child = children.len() as u32;
                        children.push(Vec::new());
                        token_at.push(NONE);
                        children[node as usize].push((b, child));
                        child
                    }
                };
            }
            token_at[node as usize] = id;
        };
        for (text, id) in tokens.clone() {
            insert(ROOT, text.as_bytes(), id);
        }
        for (text, id) in tokens {
            if let Some(rest) = text.strip_prefix(prefix).filter(|r| !r.is_empty()) {
                insert(SUFFIX_ROOT, rest.as_bytes(), id);
            }
        }
        let child = |children: &[Vec<(u8, u32)>], node: u32, b: u8| {
            children[node as usize]
                .iter()
                .find(|(c, _)| *c == b)
                .map(|&(_, v)| v)
        };
        // Failure links and pops, breadth first over both tries so `fail` of every shallower
        // node is known (a leftover is always shorter than the text it is left of). A node
        // without a failure link (the word fails there) needs no pops, nor do its children;
        // a node past `max_pops` is `TOO_DEEP`, and so is each child that is no token.
        let n = children.len();
        let mut fail = vec![NONE; n];
        let mut pops: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut queue: VecDeque<u32> = VecDeque::from([ROOT, SUFFIX_ROOT]);
        while let Some(u) = queue.pop_front() {
            for &(b, v) in &children[u as usize] {
                if token_at[v as usize] != NONE {
                    fail[v as usize] = SUFFIX_ROOT;
                    pops[v as usize] = vec![token_at[v as usize]];
                } else if fail[u as usize] == TOO_DEEP {
                    fail[v as usize] = TOO_DEEP;
                } else {
                    let mut p = pops[u as usize].clone();
                    let mut z = fail[u as usize];
                    while z != NONE && child(&children, z, b).is_none() {
                        if fail[z as usize] == TOO_DEEP
                            || p.len() + pops[z as usize].len() > max_pops
                        {
                            z = TOO_DEEP;
                            break;
                        }
                        p.extend_from_slice(&pops[z as usize]);
                        z = fail[z as usize];
                    }
                    match z {
                        NONE => {}
                        TOO_DEEP => fail[v as usize] = TOO_DEEP,
                        z => {
                            fail[v as usize] = child(&children, z, b).expect("checked above");
                            pops[v as usize] = p;
                        }
                    }
                }
                queue.push_back(v);
            }
        }
        let mut m = LinMaxMatch {
            nodes: Vec::with_capacity(n),
            edge_bytes: Vec::new(),
            edge_targets: Vec::new(),
            root_children: Box::new([NONE; 256]),
            suffix_children: Box::new([NONE; 256]),
            pops: Vec::new(),
        };
        for (i, mut edges) in children.into_iter().enumerate() {
            edges.sort_unstable();
            let node = Node {
                edges: m.edge_bytes.len() as u32,
                n_edges: edges.len() as u32,
                fail: fail[i],
                pops: m.pops.len() as u32,
                n_pops: pops[i].len() as u32,
            };
            m.pops.extend_from_slice(&pops[i]);
            for &(b, v) in &edges {
                m.edge_bytes.push(b);
                m.edge_targets.push(v);
                if i as u32 == ROOT {
                    m.root_children[b as usize] = v;
                } else if i as u32 == SUFFIX_ROOT {
                    m.suffix_children[b as usize] = v;
                }
            }
            m.nodes.push(node);
        }
        m
    }

    #[inline]
    fn child(&self, node: u32, b: u8) -> u32 {
        match node {
            ROOT => self.root_children[b as usize],
            SUFFIX_ROOT => self.suffix_children[b as usize],
            _ => {
                let n = &self.nodes[node as usize];
                let (start, len) = (n.edges as usize, n.n_edges as usize);
                match self.edge_bytes[start..start + len]
                    .iter()
                    .position(|&c| c == b)
                {
                    Some(k) => self.edge_targets[start + k],
                    None => NONE,
                }
            }
        }
    }

    /// Emits the pops of `node` and returns its failure link (`NONE`: the word fails;
    /// `TOO_DEEP`: the node keeps no pops).
    #[inline]
    fn fail(&self, node: u32, out: &mut Vec<u32>) -> u32 {
        let n = &self.nodes[node as usize];
        if n.fail < TOO_DEEP {
            out.extend_from_slice(&self.pops[n.pops as usize..(n.pops + n.n_pops) as usize]);
        }
        n.fail
    }

    /// Greedy longest-match-first tokens of `word` appended to `out` (partly written unless
    /// the walk ends [`Walk::Matched`]).
    #[inline]
    fn match_word(&self, word: &[u8], out: &mut Vec<u32>) -> Walk {
        let stopped = |u: u32| {
            if u == NONE {
                Walk::Stuck
            } else {
                Walk::TooDeep
            }
        };
        let mut u = ROOT;
        for &b in word {
            loop {
                let v = self.child(u, b);
                if v != NONE {
                    u = v;
                    break;
                }
                u = self.fail(u, out);
                if u >= TOO_DEEP {
                    return stopped(u);
                }
            }
        }
        while u != SUFFIX_ROOT {
            u = self.fail(u, out);
            if u >= TOO_DEEP {
                return stopped(u);
            }
        }
        Walk::Matched
    }

    /// The token that ends at `node`, if any: a token's node, and only such a node, fails to
    /// the suffix root (any other failure link is a child, which the suffix root is not),
    /// with that token as its one pop.
    fn token_at(&self, node: u32) -> Option<u32> {
        let n = &self.nodes[node as usize];
        (n.fail == SUFFIX_ROOT).then(|| self.pops[n.pops as usize])
    }

    /// The same tokens as [`LinMaxMatch::match_word`], found the plain way: the longest token
    /// at the start of what is left (from the root for the first, the suffix root after),
    /// again and again. `false` (and `out` partly written) when the word cannot be covered.
    fn greedy_word(&self, word: &[u8], out: &mut Vec<u32>) -> bool {
        let (mut start, mut root) = (0, ROOT);
        while start < word.len() {
            let mut longest = None;
            let mut node = root;
            for (i, &b) in word[start..].iter().enumerate() {
                node = self.child(node, b);
                if node == NONE {
                    break;
                }
                if let Some(token) = self.token_at(node) {
                    longest = Some((token, start + i + 1));
                }
            }
            let Some((token, end)) = longest else {
                return false;
            };
            out.push(token);
            (start, root) = (end, SUFFIX_ROOT);
        }
        true
    }
}

#[derive(Clone, Debug)]
pub struct WordPieceModel {
    /// id -> token; `None` for ids no token has.
    tokens: Vec<Option<Box<str>>>,
    vocab: FxHashMap<Box<str>, u32>,
    unk_token: String,
    unk_id: u32,
    prefix: String,
    max_input_chars_per_word: usize,
    matcher: LinMaxMatch,
}

impl WordPieceModel {
    /// A model from `(token, id)` pairs. A token given twice keeps its last id, as HF's
    /// vocab.txt reader does. `unk_token` must be in the vocabulary.
    pub fn new(
        vocab: Vec<(String, u32)>,
        unk_token: &str,
        continuing_subword_prefix: &str,
        max_input_chars_per_word: usize,
        source: &str,
    ) -> Result<Self> {
        Self::with_max_pops(
            vocab,
            unk_token,
            continuing_subword_prefix,
            max_input_chars_per_word,
            source,
            MAX_POPS,
        )
    }

    fn with_max_pops(
        vocab: Vec<(String, u32)>,
        unk_token: &str,
        continuing_subword_prefix: &str,
        max_input_chars_per_word: usize,
        source: &str,
        max_pops: usize,
    ) -> Result<Self> {
        if vocab.is_empty() {
            return Err(Error::format(source, "the vocabulary is empty"));
        }
        let (last, max_id) = vocab.iter().max_by_key(|(_, id)| *id).expect("not empty");
        crate::models::base::check_id_bound(last, *max_id, vocab.len(), source)?;
        let mut map: FxHashMap<Box<str>, u32> = FxHashMap::default();
        for (token, id) in vocab {
            map.insert(token.into_boxed_str(), id);
        }
        let bound = map.values().map(|&id| id as usize + 1).max().unwrap_or(0);
        let mut tokens: Vec<Option<Box<str>>> = vec![None; bound];
        for (token, &id) in &map {
            if let Some(other) = &tokens[id as usize] {
                return Err(Error::format(
                    source,
                    format!(
                        "id {id} is given to two tokens, {} and {}",
                        shown(other),
                        shown(token)
                    ),
                ));
            }
            tokens[id as usize] = Some(token.clone());
        }
        let unk_id = *map.get(unk_token).ok_or_else(|| {
            Error::format(
                source,
                format!(
                    "the unknown token {} is not in the vocabulary",
                    shown(unk_token)
                ),
            )
        })?;
        let matcher = LinMaxMatch::build(
            map.iter().map(|(t, &id)| (&**t, id)),
            continuing_subword_prefix,
            max_pops,
        );
        Ok(WordPieceModel {
            tokens,
            vocab: map,
            unk_token: unk_token.to_string(),
            unk_id,
            prefix: continuing_subword_prefix.to_string(),
            max_input_chars_per_word,
            matcher,
        })
    }

    pub fn unk_token(&self) -> &str {
        &self.unk_token
    }

    pub fn continuing_subword_prefix(&self) -> &str {
        &self.prefix
    }

    pub fn max_input_chars_per_word(&self) -> usize {
        self.max_input_chars_per_word
    }

    /// Number of tokens.
    pub fn len(&self) -> usize {
        self.vocab.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vocab.is_empty()
    }

    /// `(id, token)` in id order.
    pub fn tokens(&self) -> impl Iterator<Item = (u32, &str)> {
        self.tokens
            .iter()
            .enumerate()
            .filter_map(|(id, t)| t.as_deref().map(|t| (id as u32, t)))
    }

    /// Appends the ids of one word: its greedy longest-match-first tokens, or `[UNK]` alone
    /// when it is longer than `max_input_chars_per_word` or cannot be covered by tokens.
    #[inline]
    pub fn encode_word(&self, word: &str, out: &mut Vec<u32>) {
        // Bytes bound chars from above: only a long word needs counting.
        if word.len() > self.max_input_chars_per_word
            && word.chars().count() > self.max_input_chars_per_word
        {
            out.push(self.unk_id);
            return;
        }
        let mark = out.len();
        let matched = match self.matcher.match_word(word.as_bytes(), out) {
            Walk::Matched => true,
            Walk::Stuck => false,
            Walk::TooDeep => {
                out.truncate(mark);
                self.matcher.greedy_word(word.as_bytes(), out)
            }
        };
        if !matched {
            out.truncate(mark);
            out.push(self.unk_id);
        }
    }
}

impl Model for WordPieceModel {
    fn kind(&self) -> &'static str {
        "WordPiece"
    }
    fn encode_piece(&self, piece: &str, out: &mut Vec<u32>) {
        self.encode_word(piece, out)
    }
    fn id_bound(&self) -> usize {
        self.tokens.len()
    }
    fn id_to_token(&self, id: u32) -> Option<Cow<'_, str>> {
        self.tokens
            .get(id as usize)
            .and_then(|t| t.as_deref())
            .map(Cow::Borrowed)
    }
    fn token_to_id(&self, token: &str) -> Option<u32> {
        self.vocab.get(token).copied()
    }
    fn token_bytes(&self, id: u32) -> Option<&[u8]> {
        self.tokens
            .get(id as usize)
            .and_then(|t| t.as_deref())
            .map(str::as_bytes)
    }
    fn bytes_to_id(&self, bytes: &[u8]) -> Option<u32> {
        std::str::from_utf8(bytes)
            .ok()
            .and_then(|t| self.token_to_id(t))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HF's WordPiece loop, written plainly: the reference the trie must agree with.
    fn greedy(model: &WordPieceModel, word: &str) -> Vec<u32> {
        if word.chars().count() > model.max_input_chars_per_word {
            return vec![model.unk_id];
        }
        let mut out = Vec::new();
        let mut start = 0;
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while start < end {
                let sub = if start > 0 {
                    format!("{}{}", model.prefix, &word[start..end])
                } else {
                    word[start..end].to_string()
                };
                if let Some(&id) = model.vocab.get(sub.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= word[..end].chars().last().map_or(1, char::len_utf8);
            }
            match found {
                Some(id) => out.push(id),
                None => return vec![model.unk_id],
            }
            start = end;
        }
        out
    }

    fn model(tokens: &[&str], max_pops: usize) -> WordPieceModel {
        let vocab = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.to_string(), i as u32))
            .collect();
        WordPieceModel::with_max_pops(vocab, "[UNK]", "##", 8, "test", max_pops).unwrap()
    }

    const TOKENS: [&str; 24] = [
        "[UNK]", "a", "b", "c", "ab", "abc", "abcd", "##a", "##b", "##c", "##d", "##bc", "##bcd",
        "##cd", "d", "##", "#", "##x", "é", "##é", "aé", "aaaaaaa", "##aaaaa", "##aaa",
    ];

    #[test]
    fn trie_equals_plain_greedy_matching() {
        // With every node's pops kept, and with almost none (the greedy walk then does the
        // words that reach a node without them).
        for max_pops in [MAX_POPS, 1, 0] {
            let m = model(&TOKENS, max_pops);
            let alphabet = ["a", "b", "c", "d", "x", "é", "#"];
            // Every word of up to 5 letters over the alphabet (and past max_input_chars_per_word).
            let mut words = vec![String::new()];
            for _ in 0..5 {
                words = words
                    .iter()
                    .flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}")))
                    .collect();
                for w in &words {
                    let mut got = Vec::new();
                    m.encode_word(w, &mut got);
                    assert_eq!(got, greedy(&m, w), "{w:?}, max_pops {max_pops}");
                }
            }
            for w in ["aaaaaaaa", "aaaaaab", "aaaaaaaab", "ab".repeat(5).as_str()] {
                let mut got = Vec::new();
                m.encode_word(w, &mut got);
                assert_eq!(got, greedy(&m, w), "{w:?}, max_pops {max_pops}");
            }
        }
    }

    #[test]
    fn pops_are_bounded_by_max_pops() {
        // `a` and `##a` make the pops of the node of `a…a` (not a token) one `a` a byte: kept
        // whole, a 40,000-byte line held 800 million of them (3.2 GB).
        let line = "a".repeat(40_000);
        let vocab = vec![
            ("[UNK]".to_string(), 0),
            ("a".to_string(), 1),
            ("##a".to_string(), 2),
            (format!("{line}b"), 3),
        ];
        let m = WordPieceModel::new(vocab, "[UNK]", "##", 100_000, "test").unwrap();
        assert!(
            m.matcher.pops.len() <= (m.matcher.nodes.len() + 1) * MAX_POPS,
            "{} pops for {} nodes",
            m.matcher.pops.len(),
            m.matcher.nodes.len()
        );
        // Past 16 bytes the pops of `a…a` are not kept, and the greedy walk answers.
        for word in [&line[..10], &line[..30], &line[..300], "aaab", "aaaac"] {
            let mut got = Vec::new();
            m.encode_word(word, &mut got);
            assert_eq!(got, greedy(&m, word), "{word}");
        }
        let encode = |word: &str| {
            let mut got = Vec::new();
            m.encode_word(word, &mut got);
            got
        };
        let mut all_a = vec![1];
        all_a.resize(line.len(), 2);
        assert_eq!(encode(&line), all_a);
        assert_eq!(encode(&format!("{line}b")), vec![3]);
        assert_eq!(encode(&format!("{line}c")), vec![0]);
    }
}
