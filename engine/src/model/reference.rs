//! The CPU f32 oracle every kernel is tested against: plain loops, f64 accumulation, no shortcuts.
//! It is careful, not fast.

/// `y[m] = Σ_k w[m·K + k] · x[k]` for a row-major `[M, K]` matrix, accumulated in f64.
///
/// Panics (an internal invariant, not user input) if the slice lengths do not match the shape.
#[track_caller]
pub fn gemv(w: &[f32], x: &[f32], m: usize, k: usize) -> Vec<f32> {
    assert_eq!(
        w.len(),
        m * k,
        "gemv: w has {} values, expected M·K = {}",
        w.len(),
        m * k
    );
    assert_eq!(
        x.len(),
        k,
        "gemv: x has {} values, expected K = {k}",
        x.len()
    );
    w.chunks_exact(k.max(1))
        .take(m)
        .map(|row| {
            row.iter()
                .zip(x)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum::<f64>() as f32
        })
        .collect()
}

/// `Σ_k |w[m·K + k] · x[k]|` per row: the magnitude that bounds a dot product's rounding error.
#[track_caller]
pub fn gemv_magnitude(w: &[f32], x: &[f32], m: usize, k: usize) -> Vec<f64> {
    assert_eq!(w.len(), m * k);
    assert_eq!(x.len(), k);
    w.chunks_exact(k.max(1))
        .take(m)
        .map(|row| {
            row.iter()
                .zip(x)
                .map(|(a, b)| (f64::from(*a) * f64::from(*b)).abs())
                .sum()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemv_hand_computed() {
        // [[1, 2, 3], [4, 5, 6]] · [1, 0, -1] = [-2, -2]
        let w = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        assert_eq!(gemv(&w, &[1.0, 0.0, -1.0], 2, 3), vec![-2.0, -2.0]);
        assert_eq!(gemv_magnitude(&w, &[1.0, 0.0, -1.0], 2, 3), vec![4.0, 10.0]);
    }

    #[test]
    fn gemv_accumulates_without_cancellation_loss() {
        // 1e8 + 1 − 1e8 loses the 1 in f32 summation; f64 keeps it.
        let w = [1e8, 1.0, -1e8];
        assert_eq!(gemv(&w, &[1.0, 1.0, 1.0], 1, 3), vec![1.0]);
    }
}
