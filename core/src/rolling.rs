//! Rolling medians (and median absolute deviations) of a series, window after window, exactly as
//! numpy's `np.median` of each window gives them (`tuimon/figures/alerts.py`: a loss or grad norm
//! spike, a slowdown of the iteration time). numpy partitions every window afresh: 1.5 us a point
//! for windows of 50, three quarters of `tuimon events` on an llm.c log (240,000 steps a 10 MB).
//! Here one sorted window slides: a value out and a value in by binary search, the median read in
//! the middle, and the deviations from it merged outward from there, smallest first.

/// The median of a sorted slice as numpy takes it: the middle value, or the mean of the two.
fn middle(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 { sorted[n / 2] } else { (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0 }
}

/// The median of `|x - med|` over a sorted window: the deviations below and above `med`, each
/// ascending from it (`fl(med - x)` is `|fl(x - med)|`, as numpy's `abs` of the difference),
/// merged until the middle one (or two) is reached.
fn deviation(sorted: &[f64], med: f64) -> f64 {
    let n = sorted.len();
    let split = sorted.partition_point(|&x| x < med);
    let (mut lo, mut hi) = (split, split); // next below: lo - 1; next above: hi
    let (want_a, want_b) = ((n - 1) / 2, n / 2);
    let (mut a, mut b) = (0.0, 0.0);
    for rank in 0..=want_b {
        let below = if lo > 0 { Some(med - sorted[lo - 1]) } else { None };
        let above = if hi < n { Some(sorted[hi] - med) } else { None };
        let d = match (below, above) {
            (Some(x), Some(y)) if x < y => { lo -= 1; x }
            (Some(x), None) => { lo -= 1; x }
            (_, Some(y)) => { hi += 1; y }
            (None, None) => unreachable!("a window holds n values"),
        };
        if rank == want_a {
            a = d;
        }
        if rank == want_b {
            b = d;
        }
    }
    if want_a == want_b { a } else { (a + b) / 2.0 }
}

/// For each window `values[i..i + window]` (i from 0 to `len - window`): its median, and with
/// `mad` its median absolute deviation from that median (else nothing). Values are finite.
pub fn rolling(values: &[f64], window: usize, mad: bool) -> (Vec<f64>, Vec<f64>) {
    if window == 0 || values.len() < window {
        return (Vec::new(), Vec::new());
    }
    let count = values.len() - window + 1;
    let (mut meds, mut mads) = (Vec::with_capacity(count), Vec::with_capacity(if mad { count } else { 0 }));
    let mut sorted = values[..window].to_vec();
    sorted.sort_by(f64::total_cmp);
    for i in 0..count {
        if i > 0 {
            let out = values[i - 1];
            let at = sorted.partition_point(|x| x.total_cmp(&out).is_lt());
            sorted.remove(at);
            let new = values[i + window - 1];
            let at = sorted.partition_point(|x| x.total_cmp(&new).is_lt());
            sorted.insert(at, new);
        }
        let med = middle(&sorted);
        meds.push(med);
        if mad {
            mads.push(deviation(&sorted, med));
        }
    }
    (meds, mads)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// numpy's way, a window at a time: sort it, take the middle; the same of the deviations.
    fn naive(values: &[f64], window: usize) -> (Vec<f64>, Vec<f64>) {
        let (mut meds, mut mads) = (Vec::new(), Vec::new());
        for w in values.windows(window) {
            let mut s = w.to_vec();
            s.sort_by(f64::total_cmp);
            let med = middle(&s);
            let mut d: Vec<f64> = w.iter().map(|x| (x - med).abs()).collect();
            d.sort_by(f64::total_cmp);
            meds.push(med);
            mads.push(middle(&d));
        }
        (meds, mads)
    }

    #[test]
    fn slides_as_each_window_sorted_afresh() {
        let mut seed = 7u64;
        let mut next = || {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as f64 / 1e3 - 2000.0
        };
        for &(n, window) in &[(1usize, 1usize), (5, 5), (40, 1), (40, 2), (200, 7), (300, 50), (300, 51)] {
            let mut values: Vec<f64> = (0..n).map(|_| next()).collect();
            for k in (0..n).step_by(5) {
                values[k] = 1.5; // ties
            }
            let (meds, mads) = rolling(&values, window, true);
            let (want_meds, want_mads) = naive(&values, window);
            assert_eq!(meds.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                       want_meds.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "{n} {window}");
            assert_eq!(mads.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                       want_mads.iter().map(|x| x.to_bits()).collect::<Vec<_>>(), "{n} {window}");
        }
        assert_eq!(rolling(&[1.0, 2.0], 3, true), (vec![], vec![]));
        assert_eq!(rolling(&[1.0, 2.0, 4.0], 2, false).0, vec![1.5, 3.0]);
    }
}
