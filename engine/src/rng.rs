//! Seeded random data for synthetic weights, test inputs and benchmarks: the same seed gives the
//! same numbers on every platform (ChaCha8 is specified bit for bit, unlike `StdRng`).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// `n` values drawn uniformly from `[-scale, scale)`.
pub fn uniform_f32(seed: u64, n: usize, scale: f32) -> Vec<f32> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}
