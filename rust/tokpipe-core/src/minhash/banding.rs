//! LSH banding and clustering: which documents are near-duplicates, and which one of each
//! cluster is kept.
//!
//! Each signature is cut into `bands` bands of `rows` values (datasketch's layout: band `j`
//! is values `j*rows .. (j+1)*rows`; values past `bands * rows` are unused). Two documents
//! are candidates when some band is equal in both. Band by band, every document's band is
//! hashed to 64 bits, the (hash, position) pairs are sorted, and each run of equal hashes
//! joins its members in a union-find. So memory is the signatures plus one band's pairs
//! (16 bytes a document), whatever the number of bands; no hash map of buckets, no Python
//! objects.
//!
//! With `verify`, a candidate joins a cluster only if its signature agrees with a member's
//! on at least that fraction of values (the MinHash estimate of their Jaccard similarity):
//! this removes the band's false positives (and 64-bit hash collisions). Within a bucket, a
//! document is compared with the bucket's first few unmatched members ("representatives",
//! at most [`MAX_REPRESENTATIVES`]), not with every member, so a bucket of a thousand exact
//! copies costs a thousand comparisons, not half a million.
//!
//! Everything is in document order and the union-find roots at the smallest position, so the
//! clusters are a function of the signatures alone: the same for any number of workers.
//!
//! Spilling (not done here): the pairs of one band could be sorted in chunks written to disk
//! and merged back (a k-way merge of sorted runs), and the signatures streamed from the
//! staging files instead of held; then memory would be bounded by the union-find (4 bytes a
//! document) and the verification's random reads.

use super::union_find::UnionFind;
use crate::error::{Error, Result};
use rayon::prelude::*;

/// Representatives compared per bucket when verifying (see the module docs).
pub const MAX_REPRESENTATIVES: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Keep {
    /// The first document of the cluster (smallest position).
    First,
    /// The longest (in bytes); ties go to the first.
    Longest,
}

impl Keep {
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "first" => Some(Keep::First),
            "longest" => Some(Keep::Longest),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct ClusterConfig {
    pub bands: usize,
    pub rows: usize,
    /// Minimum signature agreement for a candidate to join, or None to trust the bands.
    pub verify: Option<f64>,
    pub keep: Keep,
}

/// One document: its signature and its length (for [`Keep::Longest`]).
#[derive(Clone, Copy, Debug)]
pub struct Doc<'a> {
    pub signature: &'a [u32],
    pub length: u64,
}

#[derive(Debug, Default)]
pub struct Clusters {
    /// For each document, the position of the document kept in its place (its own if kept).
    pub keeper: Vec<u32>,
    /// Documents that share a band with an earlier member of their bucket (summed over bands).
    pub candidates: u64,
    /// Candidates rejected by verification.
    pub rejected: u64,
}

#[inline]
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^ (h >> 33)
}

/// A band's values as one 64-bit key (a chain of a bijective mixer).
#[inline]
pub fn band_hash(values: &[u32]) -> u64 {
    let mut h = 0x9E37_79B9_7F4A_7C15u64 ^ values.len() as u64;
    for pair in values.chunks(2) {
        let v = pair[0] as u64 | (pair.get(1).copied().unwrap_or(0) as u64) << 32;
        h = fmix64(h ^ v);
    }
    h
}

/// Fraction of equal values: the MinHash estimate of two sets' Jaccard similarity.
#[inline]
pub fn agreement(a: &[u32], b: &[u32]) -> f64 {
    let same = a.iter().zip(b).filter(|(x, y)| x == y).count();
    same as f64 / a.len() as f64
}

/// Clusters `docs` (in their global order); see the module docs.
pub fn cluster(docs: &[Doc<'_>], config: &ClusterConfig) -> Result<Clusters> {
    let n = docs.len();
    if n > u32::MAX as usize {
        return Err(Error::InvalidArgument(
            "minhash clustering takes at most 2^32 - 1 documents".into(),
        ));
    }
    if config.bands == 0 || config.rows == 0 {
        return Err(Error::InvalidArgument(
            "bands and rows must be positive".into(),
        ));
    }
    if let Some(first) = docs.first() {
        let num_perm = first.signature.len();
        if config.bands * config.rows > num_perm {
            return Err(Error::InvalidArgument(format!(
                "{} bands of {} rows need {} values, signatures have {num_perm}",
                config.bands,
                config.rows,
                config.bands * config.rows
            )));
        }
        if docs.iter().any(|d| d.signature.len() != num_perm) {
            return Err(Error::InvalidArgument(
                "signatures have different lengths".into(),
            ));
        }
    }
    // An empty document's signature (all u32::MAX) would share every band with every other.
    let live: Vec<u32> = (0..n as u32)
        .into_par_iter()
        .filter(|&i| docs[i as usize].signature.iter().any(|&v| v != u32::MAX))
        .collect();
    let mut uf = UnionFind::new(n);
    let mut out = Clusters::default();
    let mut pairs: Vec<(u64, u32)> = Vec::with_capacity(live.len());
    let mut representatives: Vec<u32> = Vec::with_capacity(MAX_REPRESENTATIVES);
    for band in 0..config.bands {
        let span = band * config.rows..(band + 1) * config.rows;
        pairs.clear();
        pairs.par_extend(
            live.par_iter()
                .map(|&i| (band_hash(&docs[i as usize].signature[span.clone()]), i)),
        );
        pairs.par_sort_unstable();
        let mut start = 0;
        while start < pairs.len() {
            let mut end = start + 1;
            while end < pairs.len() && pairs[end].0 == pairs[start].0 {
                end += 1;
            }
            if end - start > 1 {
                let bucket = &pairs[start..end];
                out.candidates += (bucket.len() - 1) as u64;
                match config.verify {
                    None => {
                        for &(_, i) in &bucket[1..] {
                            uf.union(bucket[0].1, i);
                        }
                    }
                    Some(threshold) => {
                        representatives.clear();
                        for &(_, i) in bucket {
                            let root = uf.find(i);
                            let mut placed = false;
                            for &rep in &representatives {
                                if uf.find(rep) == root
                                    || agreement(
                                        docs[rep as usize].signature,
                                        docs[i as usize].signature,
                                    ) >= threshold
                                {
                                    uf.union(rep, i);
                                    placed = true;
                                    break;
                                }
                            }
                            if !placed {
                                if !representatives.is_empty() {
                                    out.rejected += 1;
                                }
                                if representatives.len() < MAX_REPRESENTATIVES {
                                    representatives.push(i);
                                }
                            }
                        }
                    }
                }
            }
            start = end;
        }
    }
    drop(pairs);
    let roots: Vec<u32> = (0..n as u32).map(|i| uf.find(i)).collect();
    out.keeper = match config.keep {
        Keep::First => roots,
        Keep::Longest => {
            let mut best: Vec<u32> = (0..n as u32).collect();
            for (i, &root) in roots.iter().enumerate() {
                let b = best[root as usize] as usize;
                if docs[i].length > docs[b].length {
                    best[root as usize] = i as u32;
                }
            }
            roots.iter().map(|&r| best[r as usize]).collect()
        }
    };
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs<'a>(sigs: &'a [Vec<u32>], lengths: &[u64]) -> Vec<Doc<'a>> {
        sigs.iter()
            .zip(lengths)
            .map(|(s, &length)| Doc {
                signature: s,
                length,
            })
            .collect()
    }

    #[test]
    fn equal_bands_join_and_keep_rules_apply() {
        let sigs = vec![
            vec![1, 2, 3, 4],
            vec![9, 9, 9, 9],
            vec![7, 7, 3, 4], // shares band 1 with doc 0
            vec![u32::MAX; 4],
            vec![u32::MAX; 4], // empty documents never join
        ];
        let lengths = [10, 10, 30, 0, 0];
        let config = ClusterConfig {
            bands: 2,
            rows: 2,
            verify: None,
            keep: Keep::First,
        };
        let c = cluster(&docs(&sigs, &lengths), &config).unwrap();
        assert_eq!(c.keeper, [0, 1, 0, 3, 4]);
        let longest = ClusterConfig {
            keep: Keep::Longest,
            ..config
        };
        assert_eq!(
            cluster(&docs(&sigs, &lengths), &longest).unwrap().keeper,
            [2, 1, 2, 3, 4]
        );
        // Agreement 0.5 < 0.8: verification keeps them apart.
        let verified = ClusterConfig {
            verify: Some(0.8),
            ..config
        };
        let c = cluster(&docs(&sigs, &lengths), &verified).unwrap();
        assert_eq!(c.keeper, [0, 1, 2, 3, 4]);
        assert_eq!(c.rejected, 1);
    }
}
