//! Bands and rows for a Jaccard threshold: datasketch's `MinHashLSH._optimal_param`.
//!
//! For every `b` in `1..=num_perm` and `r` in `1..=num_perm / b`, datasketch integrates the
//! probability that two sets of similarity `s` share a band, `P(s) = 1 - (1 - s^r)^b`, over
//! `[0, threshold]` (false positives) and `1 - P(s)` over `[threshold, 1]` (false negatives),
//! and keeps the first `(b, r)` with the smallest weighted sum. It integrates with SciPy's
//! `quad`; `P` is a polynomial of degree `b * r <= num_perm`, so Gauss-Legendre quadrature with
//! `num_perm / 2 + 1` nodes integrates it exactly (to rounding), and we get the same argmin
//! without SciPy.

use crate::error::{Error, Result};

/// Gauss-Legendre nodes and weights on [-1, 1] (Newton's method on the Legendre recurrence).
fn gauss_legendre(n: usize) -> (Vec<f64>, Vec<f64>) {
    let (mut x, mut w) = (vec![0.0; n], vec![0.0; n]);
    let m = n.div_ceil(2);
    for i in 0..m {
        let mut z = (std::f64::consts::PI * (i as f64 + 0.75) / (n as f64 + 0.5)).cos();
        let mut dp = 0.0;
        for _ in 0..100 {
            let (mut p1, mut p2) = (1.0, 0.0);
            for j in 0..n {
                let p3 = p2;
                p2 = p1;
                p1 = ((2 * j + 1) as f64 * z * p2 - j as f64 * p3) / (j + 1) as f64;
            }
            dp = n as f64 * (z * p1 - p2) / (z * z - 1.0);
            let step = p1 / dp;
            z -= step;
            if step.abs() < 1e-15 {
                break;
            }
        }
        x[i] = -z;
        x[n - 1 - i] = z;
        w[i] = 2.0 / ((1.0 - z * z) * dp * dp);
        w[n - 1 - i] = w[i];
    }
    (x, w)
}

/// The `(bands, rows)` minimising `fp_weight * FP + fn_weight * FN` for `threshold`.
pub fn optimal_params(
    threshold: f64,
    num_perm: usize,
    fp_weight: f64,
    fn_weight: f64,
) -> Result<(usize, usize)> {
    if !(0.0..=1.0).contains(&threshold) {
        return Err(Error::InvalidArgument(format!(
            "threshold must be in [0, 1], got {threshold}"
        )));
    }
    if num_perm < 2 {
        return Err(Error::InvalidArgument(format!(
            "num_perm must be at least 2, got {num_perm}"
        )));
    }
    let (x, w) = gauss_legendre(num_perm / 2 + 1);
    let integrate = |lo: f64, hi: f64, f: &dyn Fn(f64) -> f64| -> f64 {
        let (mid, half) = ((lo + hi) / 2.0, (hi - lo) / 2.0);
        half * x
            .iter()
            .zip(&w)
            .map(|(&xi, &wi)| wi * f(mid + half * xi))
            .sum::<f64>()
    };
    let mut best = (f64::INFINITY, (0, 0));
    for b in 1..=num_perm {
        for r in 1..=num_perm / b {
            let (bf, rf) = (b as f64, r as f64);
            let p = |s: f64| 1.0 - (1.0 - s.powf(rf)).powf(bf);
            let fp = integrate(0.0, threshold, &p);
            let fneg = integrate(threshold, 1.0, &|s| 1.0 - p(s));
            let error = fp * fp_weight + fneg * fn_weight;
            if error < best.0 {
                best = (error, (b, r));
            }
        }
    }
    Ok(best.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quadrature_is_exact_for_polynomials() {
        let (x, w) = gauss_legendre(5);
        // Degree 9 = 2n - 1 is still exact: the integral of t^8 over [-1, 1] is 2/9.
        let v: f64 = x.iter().zip(&w).map(|(&t, &wt)| wt * t.powi(8)).sum();
        assert!((v - 2.0 / 9.0).abs() < 1e-14);
    }

    #[test]
    fn known_values() {
        // datasketch.MinHashLSH(threshold=0.8, num_perm=128): b=9, r=13.
        assert_eq!(optimal_params(0.8, 128, 0.5, 0.5).unwrap(), (9, 13));
    }
}
