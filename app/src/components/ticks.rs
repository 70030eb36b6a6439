//! Round axis ticks, shared by every chart.

/// A round tick step (1, 2 or 5 × 10ⁿ) and how many steps cover `max` (at most about 6).
pub fn nice_ticks(max: f64) -> (f64, usize) {
    if max.is_nan() || max <= 0.0 || max.is_infinite() {
        return (1.0, 1);
    }
    let raw = max / 5.0;
    let base = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * base)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * base);
    (step, (max / step).ceil().max(1.0) as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_maximum() {
        assert_eq!(nice_ticks(1959.0), (500.0, 4));
        assert_eq!(nice_ticks(48.0), (10.0, 5));
        assert_eq!(nice_ticks(0.7), (0.2, 4));
        assert_eq!(nice_ticks(0.0), (1.0, 1));
        assert_eq!(nice_ticks(f64::NAN), (1.0, 1));
    }
}
