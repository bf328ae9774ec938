//! The two matrices of a fastText model, as stored: dense (`model.bin`), or product-quantized
//! (`.ftz`, fastText's `QuantMatrix`). Both answer the two questions prediction asks, "add row
//! `i` to a vector" and "the dot product of row `i` with a vector", with fastText's arithmetic
//! in fastText's order, so that quantized models predict to the last bit as fastText does.
//!
//! A quantized matrix keeps, per row, one byte per sub-vector: the index of a centroid among
//! 256 (a product quantizer splits each row into `nsubq` sub-vectors of `dsub` values, the
//! last of `lastdsub`). With `qnorm`, rows were normalised before quantizing and each row's
//! norm is itself quantized by a one-value quantizer: the row is its centroids times that norm.

use super::file::Reader;
use crate::error::Result;

/// Centroids per sub-quantizer: fastText's `ksub_`, one byte of code.
const KSUB: usize = 256;

/// fastText's `ProductQuantizer`: `nsubq` sub-quantizers of 256 centroids each, `dsub` values
/// long but the last, `lastdsub` long.
pub(super) struct ProductQuantizer {
    nsubq: usize,
    dsub: usize,
    lastdsub: usize,
    centroids: Vec<f32>,
}

impl ProductQuantizer {
    fn read(r: &mut Reader<'_>, what: &str) -> Result<ProductQuantizer> {
        let dim = r.i32(what)?;
        let nsubq = r.i32(what)?;
        let dsub = r.i32(what)?;
        let lastdsub = r.i32(what)?;
        // The layout fastText's constructor makes: `nsubq - 1` full sub-vectors and a last one
        // of 1..=dsub values, covering `dim`. Anything else would index out of the centroids.
        let consistent = dim >= 1
            && nsubq >= 1
            && dsub >= 1
            && (1..=dsub).contains(&lastdsub)
            && (nsubq as i64 - 1) * dsub as i64 + lastdsub as i64 == dim as i64;
        if !consistent {
            return Err(r.error(format!(
                "fastText {what} has an inconsistent product quantizer (dim {dim}, nsubq {nsubq}, dsub {dsub}, lastdsub {lastdsub})"
            )));
        }
        let centroids = r.f32s(dim as usize * KSUB, what)?;
        Ok(ProductQuantizer {
            nsubq: nsubq as usize,
            dsub: dsub as usize,
            lastdsub: lastdsub as usize,
            centroids,
        })
    }

    fn dim(&self) -> usize {
        (self.nsubq - 1) * self.dsub + self.lastdsub
    }

    /// Centroid `code` of sub-quantizer `m` (fastText's `get_centroids`): the last
    /// sub-quantizer's centroids are `lastdsub` long.
    #[inline]
    fn centroid(&self, m: usize, code: u8) -> &[f32] {
        let code = code as usize;
        if m == self.nsubq - 1 {
            let start = m * KSUB * self.dsub + code * self.lastdsub;
            &self.centroids[start..start + self.lastdsub]
        } else {
            let start = (m * KSUB + code) * self.dsub;
            &self.centroids[start..start + self.dsub]
        }
    }

    /// `x += alpha * decoded row` (fastText's `addcode`).
    #[inline]
    fn add_code(&self, x: &mut [f32], codes: &[u8], alpha: f32) {
        if self.dsub == 2 && self.lastdsub == 2 && x.len() <= 64 {
            // fastText's default (`dsub 2`, lid.176's): the row decoded first, then added in
            // one pass the compiler vectorizes. Each value still gets `x + alpha * c`, the
            // same two roundings, so the result is the same to the bit.
            let mut row = [0.0f32; 64];
            for (m, &code) in codes.iter().enumerate() {
                let start = (m * KSUB + code as usize) * 2;
                row[2 * m..2 * m + 2].copy_from_slice(&self.centroids[start..start + 2]);
            }
            for (xi, &ci) in x.iter_mut().zip(&row) {
                *xi += alpha * ci;
            }
            return;
        }
        for (m, &code) in codes.iter().enumerate() {
            let c = self.centroid(m, code);
            for (xi, &ci) in x[m * self.dsub..].iter_mut().zip(c) {
                *xi += alpha * ci;
            }
        }
    }

    /// `alpha * (x . decoded row)`, summed in fastText's order (its `mulcode`).
    #[inline]
    fn mul_code(&self, x: &[f32], codes: &[u8], alpha: f32) -> f32 {
        let mut res = 0.0f32;
        for (m, &code) in codes.iter().enumerate() {
            let c = self.centroid(m, code);
            for (&xi, &ci) in x[m * self.dsub..].iter().zip(c) {
                res += xi * ci;
            }
        }
        res * alpha
    }
}

/// fastText's `QuantMatrix`.
pub(super) struct QuantMatrix {
    rows: usize,
    /// `nsubq` codes per row, row after row.
    codes: Vec<u8>,
    pq: ProductQuantizer,
    /// With `qnorm`: each row's norm code and the norms' one-value quantizer.
    norms: Option<(Vec<u8>, ProductQuantizer)>,
}

impl QuantMatrix {
    #[inline]
    fn norm(&self, i: usize) -> f32 {
        match &self.norms {
            Some((codes, npq)) => npq.centroid(0, codes[i])[0],
            None => 1.0,
        }
    }

    #[inline]
    fn row_codes(&self, i: usize) -> &[u8] {
        &self.codes[i * self.pq.nsubq..(i + 1) * self.pq.nsubq]
    }
}

/// A model's input or output matrix.
pub(super) enum Matrix {
    Dense { cols: usize, values: Vec<f32> },
    Quantized(QuantMatrix),
}

impl Matrix {
    /// Reads a matrix (after its "quantized" flag) of `cols` columns; `what` names it in errors.
    pub(super) fn read(
        r: &mut Reader<'_>,
        what: &str,
        quantized: bool,
        cols: usize,
    ) -> Result<Matrix> {
        if !quantized {
            let rows = r.i64(what)?;
            let n = r.i64(what)?;
            if rows < 0 || n != cols as i64 {
                return Err(r.error(format!(
                    "fastText {what} is {rows} x {n}; the arguments make it {cols} columns wide"
                )));
            }
            let values = r.f32s_checked(rows as u64, cols as u64, what)?;
            return Ok(Matrix::Dense { cols, values });
        }
        let qnorm = r.u8(what)? != 0;
        let rows = r.i64(what)?;
        let n = r.i64(what)?;
        let codesize = r.i32(what)?;
        if rows < 0 || n != cols as i64 || codesize < 0 {
            return Err(r.error(format!(
                "fastText quantized {what} is {rows} x {n} with {codesize} codes; the arguments make it {cols} columns wide"
            )));
        }
        let codes = r.take(codesize as usize, what)?.to_vec();
        let pq = ProductQuantizer::read(r, what)?;
        // (Checked: a corrupt row count could overflow the product.)
        if pq.dim() != cols
            || (rows as u64).checked_mul(pq.nsubq as u64) != Some(codes.len() as u64)
        {
            return Err(r.error(format!(
                "fastText quantized {what}: {} codes for {rows} rows of {} sub-vectors, {} columns",
                codes.len(),
                pq.nsubq,
                pq.dim()
            )));
        }
        let norms = if qnorm {
            let norm_codes = r.take(rows as usize, what)?.to_vec();
            let npq = ProductQuantizer::read(r, what)?;
            if npq.dim() != 1 {
                return Err(r.error(format!(
                    "fastText quantized {what}: its norms' quantizer is {} wide, not 1",
                    npq.dim()
                )));
            }
            Some((norm_codes, npq))
        } else {
            None
        };
        Ok(Matrix::Quantized(QuantMatrix {
            rows: rows as usize,
            codes,
            pq,
            norms,
        }))
    }

    pub(super) fn rows(&self) -> usize {
        match self {
            Matrix::Dense { cols, values } => values.len() / cols,
            Matrix::Quantized(q) => q.rows,
        }
    }

    /// `x += row i` (fastText's `addRowToVector(x, i)`).
    #[inline]
    pub(super) fn add_row(&self, i: usize, x: &mut [f32]) {
        match self {
            Matrix::Dense { cols, values } => {
                for (xi, &v) in x.iter_mut().zip(&values[i * cols..(i + 1) * cols]) {
                    *xi += v;
                }
            }
            Matrix::Quantized(q) => q.pq.add_code(x, q.row_codes(i), q.norm(i)),
        }
    }

    /// `row i . x` (fastText's `dotRow`).
    #[inline]
    pub(super) fn dot_row(&self, i: usize, x: &[f32]) -> f32 {
        match self {
            Matrix::Dense { cols, values } => {
                let mut d = 0.0f32;
                for (&w, &h) in values[i * cols..(i + 1) * cols].iter().zip(x) {
                    d += w * h;
                }
                d
            }
            Matrix::Quantized(q) => q.pq.mul_code(x, q.row_codes(i), q.norm(i)),
        }
    }

    /// Asks the CPU to bring row `i` into the cache (a hint only: no effect on results).
    #[inline]
    pub(super) fn prefetch(&self, i: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            let (ptr, bytes) = match self {
                Matrix::Dense { cols, values } => {
                    (values[i * cols..].as_ptr().cast::<u8>(), cols * 4)
                }
                Matrix::Quantized(q) => (q.row_codes(i).as_ptr(), q.pq.nsubq),
            };
            for offset in (0..bytes).step_by(64) {
                // SAFETY: prefetching reads nothing architecturally and cannot fault; the
                // pointer is in bounds anyway (offset < the row's length).
                unsafe {
                    std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                        ptr.add(offset).cast(),
                    );
                }
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = i;
    }
}
