//! Near-duplicate detection with MinHash LSH, interchangeable with datasketch.
//!
//! - [`shingles`]: the set each document stands for (word or character n-grams of its
//!   normalised text).
//! - [`signature`]: MinHash signatures equal to `datasketch.MinHash(num_perm, seed, scheme)`
//!   updated with the same shingles (SHA-1 based, `affine32` or `legacy` permutations).
//! - [`params`]: bands and rows for a Jaccard threshold, datasketch's optimiser.
//! - [`banding`] and [`union_find`]: candidate pairs by LSH banding (band keys sorted, and
//!   spilled to disk as sorted runs past a memory budget), optional verification, connected
//!   components, one keeper per cluster.
//! - [`exact`]: exact Jaccard similarity of candidate pairs, to verify them.
//!
//! The pipeline's `minhash_dedup` stage calls [`dedup_keys`] per batch (in parallel workers),
//! then feeds every task's keys to one [`banding::LshIndex`] and joins its bands.

pub mod banding;
pub mod exact;
mod numpy_rng;
pub mod params;
pub mod sha1x2;
pub mod shingles;
pub mod signature;
pub mod union_find;

use crate::error::{Error, Result};
use crate::text::StrColumn;
use memmap2::Mmap;
use rayon::prelude::*;
pub use shingles::{ShingleConfig, ShingleKind, Shingler};
pub use signature::{HashFunc, MinHasher, Scheme};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

/// Flushes and closes the scratch file at `path` that `writer` wrote, and maps it for reading
/// (None when nothing was written: an empty file cannot be mapped). The banding index's keys
/// and the exact check's shingle sets are read back so: the page cache holds them, not the
/// heap. The file must be its writer's own and never written again.
fn map_scratch(mut writer: BufWriter<File>, path: &Path, written: bool) -> Result<Option<Mmap>> {
    writer.flush().map_err(|e| Error::io(path, e))?;
    drop(writer);
    if !written {
        return Ok(None);
    }
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    // SAFETY: the file is in its owner's private scratch directory and nothing writes it once
    // it is mapped; a mapping of it cannot change under us.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    Ok(Some(map))
}

/// Rows per parallel task; documents are long enough that a few make a worthwhile task.
const ROWS_PER_TASK: usize = 16;

/// Signatures of every row, row after row (`column.len() * num_perm` values), in parallel.
pub fn signatures(column: &StrColumn<'_>, hasher: &MinHasher, config: &ShingleConfig) -> Vec<u32> {
    let k = hasher.num_perm;
    let mut out = vec![0u32; column.len() * k];
    out.par_chunks_mut(ROWS_PER_TASK * k)
        .enumerate()
        .for_each(|(chunk, rows)| {
            let mut shingler = Shingler::default();
            let mut hashes = Vec::with_capacity(64);
            for (j, mins) in rows.chunks_mut(k).enumerate() {
                let text = column.get(chunk * ROWS_PER_TASK + j);
                signature::sign_into(hasher, &mut shingler, config, text, &mut hashes, mins);
            }
        });
    out
}

/// Bytes of one document's dedup key: its length in bytes (u64) then its signature (u32s),
/// all little-endian.
pub fn key_bytes(num_perm: usize) -> usize {
    8 + 4 * num_perm
}

/// The `minhash_dedup` keys of every row: [`key_bytes`] each, concatenated.
pub fn dedup_keys(column: &StrColumn<'_>, hasher: &MinHasher, config: &ShingleConfig) -> Vec<u8> {
    let k = hasher.num_perm;
    let width = key_bytes(k);
    let mut out = vec![0u8; column.len() * width];
    out.par_chunks_mut(ROWS_PER_TASK * width)
        .enumerate()
        .for_each(|(chunk, rows)| {
            let mut shingler = Shingler::default();
            let mut hashes = Vec::with_capacity(64);
            let mut mins = vec![0u32; k];
            for (j, key) in rows.chunks_mut(width).enumerate() {
                let text = column.get(chunk * ROWS_PER_TASK + j);
                signature::sign_into(hasher, &mut shingler, config, text, &mut hashes, &mut mins);
                key[..8].copy_from_slice(&(text.len() as u64).to_le_bytes());
                for (dst, v) in key[8..].chunks_exact_mut(4).zip(&mins) {
                    dst.copy_from_slice(&v.to_le_bytes());
                }
            }
        });
    out
}
