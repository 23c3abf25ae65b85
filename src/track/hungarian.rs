//! Optimal assignment (Hungarian / Kuhn-Munkres with potentials, O(n²·m)).
//!
//! [`assign`] takes a rectangular cost matrix (rows = tracks, columns = detections) and returns,
//! for each row, the column it is assigned to, minimising the total cost over assignments of
//! `min(rows, cols)` pairs. Forbidden pairs are given a large finite cost by the caller and
//! dropped after the assignment. The implementation is the shortest augmenting path form with
//! row/column potentials (Jonker-Volgenant style), run on the orientation with rows <= columns.

/// For each row, its assigned column (`None` when there are more rows than columns).
#[must_use]
pub(crate) fn assign(cost: &[Vec<f64>]) -> Vec<Option<usize>> {
    let n = cost.len();
    let m = cost.first().map_or(0, Vec::len);
    if n == 0 || m == 0 {
        return vec![None; n];
    }
    // Non-finite costs become a huge finite one, so every augmenting search terminates.
    let at = |i: usize, j: usize| {
        let c = cost[i].get(j).copied().unwrap_or(f64::MAX);
        if c.is_finite() { c } else { 1e300 }
    };
    if n <= m {
        solve(n, m, at)
    } else {
        // Transpose: assign each column to a row, then invert.
        let cols = solve(m, n, |i, j| at(j, i));
        let mut rows = vec![None; n];
        for (c, r) in cols.iter().enumerate() {
            if let Some(r) = *r {
                rows[r] = Some(c);
            }
        }
        rows
    }
}

/// Rows `0..n`, columns `0..m`, `n <= m`; every row is assigned.
fn solve(n: usize, m: usize, c: impl Fn(usize, usize) -> f64) -> Vec<Option<usize>> {
    // 1-based arrays as in the classical formulation; index 0 is the virtual start.
    let mut u = vec![0.0f64; n + 1];
    let mut v = vec![0.0f64; m + 1];
    let mut p = vec![0usize; m + 1]; // p[j]: row matched to column j (0 = none)
    let mut way = vec![0usize; m + 1];
    for i in 1..=n {
        p[0] = i;
        let mut j0 = 0usize;
        let mut minv = vec![f64::INFINITY; m + 1];
        let mut used = vec![false; m + 1];
        let mut found = true;
        loop {
            used[j0] = true;
            let i0 = p[j0];
            let mut delta = f64::INFINITY;
            let mut j1 = 0usize;
            for j in 1..=m {
                if !used[j] {
                    let cur = c(i0 - 1, j - 1) - u[i0] - v[j];
                    if cur < minv[j] {
                        minv[j] = cur;
                        way[j] = j0;
                    }
                    if minv[j] < delta {
                        delta = minv[j];
                        j1 = j;
                    }
                }
            }
            if j1 == 0 {
                // Unreachable with finite costs; leave the row unassigned rather than loop.
                found = false;
                break;
            }
            for j in 0..=m {
                if used[j] {
                    u[p[j]] += delta;
                    v[j] -= delta;
                } else {
                    minv[j] -= delta;
                }
            }
            j0 = j1;
            if p[j0] == 0 {
                break;
            }
        }
        // Augment along the path.
        if found {
            loop {
                let j1 = way[j0];
                p[j0] = p[j1];
                j0 = j1;
                if j0 == 0 {
                    break;
                }
            }
        }
    }
    let mut rows = vec![None; n];
    for j in 1..=m {
        if p[j] != 0 {
            rows[p[j] - 1] = Some(j - 1);
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn total(cost: &[Vec<f64>], a: &[Option<usize>]) -> f64 {
        a.iter()
            .enumerate()
            .filter_map(|(i, j)| j.map(|j| cost[i][j]))
            .sum()
    }

    /// Minimum over all injective maps of the smaller side into the larger.
    fn brute(cost: &[Vec<f64>]) -> f64 {
        let n = cost.len();
        let m = cost[0].len();
        fn rec(
            i: usize,
            n: usize,
            m: usize,
            used: &mut Vec<bool>,
            f: &dyn Fn(usize, usize) -> f64,
        ) -> f64 {
            if i == n {
                return 0.0;
            }
            let mut best = f64::INFINITY;
            for j in 0..m {
                if !used[j] {
                    used[j] = true;
                    best = best.min(f(i, j) + rec(i + 1, n, m, used, f));
                    used[j] = false;
                }
            }
            best
        }
        if n <= m {
            rec(0, n, m, &mut vec![false; m], &|i, j| cost[i][j])
        } else {
            rec(0, m, n, &mut vec![false; n], &|i, j| cost[j][i])
        }
    }

    #[test]
    fn small_cases() {
        assert!(assign(&[]).is_empty());
        assert_eq!(assign(&[vec![]]), vec![None]);
        let c = vec![
            vec![4.0, 1.0, 3.0],
            vec![2.0, 0.0, 5.0],
            vec![3.0, 2.0, 2.0],
        ];
        assert_eq!(assign(&c), vec![Some(1), Some(0), Some(2)]);
        let tall = vec![vec![1.0], vec![0.5], vec![3.0]];
        assert_eq!(assign(&tall), vec![None, Some(0), None]);
    }

    proptest! {
        #[test]
        fn optimal_like_brute_force(n in 1usize..6, m in 1usize..6, seed in proptest::collection::vec(0u32..1000, 36)) {
            let cost: Vec<Vec<f64>> = (0..n).map(|i| (0..m).map(|j| f64::from(seed[i * 6 + j]) / 10.0).collect()).collect();
            let a = assign(&cost);
            // A valid partial permutation of size min(n, m).
            let cols: Vec<usize> = a.iter().flatten().copied().collect();
            prop_assert_eq!(cols.len(), n.min(m));
            let mut sorted = cols.clone();
            sorted.sort_unstable();
            sorted.dedup();
            prop_assert_eq!(sorted.len(), cols.len());
            prop_assert!((total(&cost, &a) - brute(&cost)).abs() < 1e-9);
        }
    }
}
