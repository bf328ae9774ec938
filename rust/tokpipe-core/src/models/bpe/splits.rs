//! Every way to cut each token of a vocabulary into two tokens, which the merge tables of
//! tiktoken ranks and of sentencepiece's BPE are made of.
//!
//! Trying each cut of a token and looking both halves up hashes `O(n²)` bytes for a token of
//! `n` bytes: the fastest way for the short tokens real vocabularies are made of (cl100k's
//! longest has 128 bytes, the average 6.4), but one long token in a file (a 1 MB line) would
//! take minutes. So tokens of up to [`SHORT`] bytes are cut that way, and a longer token looks
//! up only its halves of up to [`SHORT`] bytes; its longer halves are long tokens too, and
//! those that are a prefix of it come from one scan of the long tokens in sorted order (they
//! are exactly the stack of tokens each a prefix of the next), those that are a suffix from
//! the same scan in the order of the reversed bytes. That is `O(SHORT · b)` hashing and
//! `O(b log n)` comparisons for `b` bytes in `n` long tokens, in `O(b)` memory.

/// Tokens of up to this many bytes are cut the plain way (see the module notes).
const SHORT: usize = 64;

/// `(token, left, right)` for every cut of a token into a left and a right token: ids as
/// given. `tokens` holds `(bytes, id)` with no two tokens of the same bytes; `id_of` finds a
/// token of `tokens` by its bytes. An empty token is no half of a cut.
pub(crate) fn two_token_splits(
    tokens: &[(&[u8], u32)],
    id_of: impl Fn(&[u8]) -> Option<u32>,
) -> Vec<(u32, u32, u32)> {
    let mut splits = Vec::new();
    for &(bytes, id) in tokens.iter().filter(|t| t.0.len() <= SHORT) {
        for cut in 1..bytes.len() {
            if let (Some(l), Some(r)) = (id_of(&bytes[..cut]), id_of(&bytes[cut..])) {
                splits.push((id, l, r));
            }
        }
    }
    let long: Vec<(&[u8], u32)> = tokens
        .iter()
        .filter(|t| t.0.len() > SHORT)
        .copied()
        .collect();
    // The long suffixes of long token `i`: `long_suffixes[suffix_at[i].0..][..suffix_at[i].1]`.
    let mut suffix_at: Vec<(usize, usize)> = vec![(0, 0); long.len()];
    let mut long_suffixes: Vec<u32> = Vec::new();
    visit_proper_affixes(&long, true, |i, found| {
        suffix_at[i] = (long_suffixes.len(), found.len());
        long_suffixes.extend_from_slice(found);
    });
    // By length of the token's suffix: the id of the suffix token of that length, if any.
    let mut right_at: Vec<u32> = Vec::new();
    visit_proper_affixes(&long, false, |i, long_prefixes| {
        let (bytes, id) = long[i];
        let n = bytes.len();
        right_at.clear();
        right_at.resize(n, NO_ID);
        for k in 1..=SHORT {
            if let Some(r) = id_of(&bytes[n - k..]) {
                right_at[k] = r;
            }
        }
        let (start, count) = suffix_at[i];
        for &j in &long_suffixes[start..start + count] {
            right_at[long[j as usize].0.len()] = long[j as usize].1;
        }
        let short_prefixes = (1..=SHORT).filter_map(|k| id_of(&bytes[..k]).map(|l| (k, l)));
        let long_prefixes = long_prefixes
            .iter()
            .map(|&p| (long[p as usize].0.len(), long[p as usize].1));
        for (k, left) in short_prefixes.chain(long_prefixes) {
            let right = right_at[n - k];
            if right != NO_ID {
                splits.push((id, left, right));
            }
        }
    });
    splits
}

const NO_ID: u32 = u32::MAX;

/// Calls `each(i, affixes)` for every token `i`, with the indices of the tokens that are its
/// proper prefixes (or suffixes when `reversed`), shortest first.
///
/// In sorted order every token that is a prefix of `t` comes before `t`, and every token
/// between the two starts with it too; so a stack of tokens, each a prefix of the next, popped
/// until its top is a prefix of `t`, holds exactly `t`'s prefixes. Each token is pushed and
/// popped once; each comparison reads at most the bytes of the token popped or of `t`.
fn visit_proper_affixes(
    tokens: &[(&[u8], u32)],
    reversed: bool,
    mut each: impl FnMut(usize, &[u32]),
) {
    let mut order: Vec<u32> = (0..tokens.len() as u32).collect();
    let bytes = |i: u32| tokens[i as usize].0;
    if reversed {
        order.sort_unstable_by(|&a, &b| bytes(a).iter().rev().cmp(bytes(b).iter().rev()));
    } else {
        order.sort_unstable_by(|&a, &b| bytes(a).cmp(bytes(b)));
    }
    let is_affix = |short: &[u8], long: &[u8]| {
        !short.is_empty()
            && short.len() < long.len()
            && if reversed {
                long.ends_with(short)
            } else {
                long.starts_with(short)
            }
    };
    let mut stack: Vec<u32> = Vec::new();
    for i in order {
        let t = bytes(i);
        while stack.last().is_some_and(|&top| !is_affix(bytes(top), t)) {
            stack.pop();
        }
        each(i as usize, &stack);
        stack.push(i);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn splits(tokens: &[(&[u8], u32)]) -> Vec<(u32, u32, u32)> {
        let ids: HashMap<&[u8], u32> = tokens.iter().copied().collect();
        let mut got = two_token_splits(tokens, |b| ids.get(b).copied());
        got.sort_unstable();
        got
    }

    /// Every cut of every token tried, both halves looked up: the plain quadratic way.
    fn plain(tokens: &[(&[u8], u32)]) -> Vec<(u32, u32, u32)> {
        let ids: HashMap<&[u8], u32> = tokens.iter().copied().collect();
        let mut out = Vec::new();
        for &(t, id) in tokens {
            for cut in 1..t.len() {
                if let (Some(&l), Some(&r)) = (ids.get(&t[..cut]), ids.get(&t[cut..])) {
                    out.push((id, l, r));
                }
            }
        }
        out.sort_unstable();
        out
    }

    #[test]
    fn finds_the_cuts_the_plain_way_finds() {
        let words = [
            "a", "b", "ab", "ba", "aba", "abab", "bab", "aa", "aaa", "aaaa", "c", "abc", "bc",
            "cab", "x", "xyz", "yz", "xy", "z", "zzz", "zz", "abcab", "",
        ];
        let tokens: Vec<(&[u8], u32)> = words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.as_bytes(), 1000 + i as u32))
            .collect();
        let got = splits(&tokens);
        assert_eq!(got, plain(&tokens));
        assert!(got.len() > 15, "{got:?}");
    }

    #[test]
    fn long_tokens_are_cut_like_short_ones() {
        // Halves short and long, on both sides of `SHORT`, and runs of one byte (every
        // prefix a token) where the cuts are many.
        let run = |n: usize| "a".repeat(n);
        let mut words: Vec<String> = [1, 2, 3, 63, 64, 65, 66, 127, 128, 129, 130, 200]
            .iter()
            .map(|&n| run(n))
            .collect();
        for n in [60, 64, 65, 70, 128, 129] {
            words.push(format!("{}b", run(n)));
            words.push(format!("b{}", run(n)));
            words.push(format!("{}b{}", run(n), run(n / 2)));
        }
        words.extend(["b", "ab", "ba"].map(String::from));
        let tokens: Vec<(&[u8], u32)> = words
            .iter()
            .enumerate()
            .map(|(i, w)| (w.as_bytes(), i as u32))
            .collect();
        let got = splits(&tokens);
        assert_eq!(got, plain(&tokens));
        assert!(got.len() > 50, "{}", got.len());
    }

    #[test]
    fn one_long_token_is_cut_without_trying_every_cut() {
        // The plain way hashes about 5 * 10^11 bytes here (minutes); this way a few megabytes.
        let long = vec![b'a'; 1 << 20];
        let tokens: Vec<(&[u8], u32)> = vec![(b"a", 0), (&long, 1), (&long[1..], 2)];
        assert_eq!(splits(&tokens), vec![(1, 0, 2), (1, 2, 0)]);
    }
}
