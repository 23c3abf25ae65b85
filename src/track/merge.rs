//! Merges: one component that explains several tracks (objects that touch or overlap form a
//! single connected component).
//!
//! After the tracked round, a confirmed or merged track left without a detection whose
//! prediction lies in a detection's box is a *candidate member* of that detection (see
//! [`rounds`](super::rounds)). The detection's *group* starts with the track the association
//! gave it (unless that one is tentative) and takes candidates nearest first while the
//! component is big enough to hold them all, [`holds`]: `area >= largest member +
//! merge_area_share · (sum of the others)` (areas of the tracks' running appearance), and no
//! member below `Tuning::min_member_share` of the
//! largest. A group of two or more is a merge.
//!
//! Members are not updated with the shared component's measurement (it describes none of
//! them). Each keeps its own prediction, corrected by `place_members`, axis by axis: the
//! members' predicted offsets from their area-weighted mean are scaled (their order kept) so
//! that their boxes together span the component's box, all are moved by one common shift so
//! that the mean falls on the component's centroid, and each box is pushed inside the
//! component's box. The placed centroid is folded into each member's filter as a loose
//! measurement, so the members follow the group when it turns or stops and stop closing in once
//! they touch, and their boxes keep the size they had before the merge.

use super::tuning::TUNING;
#[cfg(doc)]
use super::tuning::Tuning;

/// One merge group: a detection and the tracks it holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Group {
    /// Detection index.
    pub det: usize,
    /// Track indices, the first being the one the association matched (when not tentative).
    pub members: Vec<usize>,
}

/// Whether a component of `area` can hold tracks of `areas` (see the module docs).
#[must_use]
pub fn holds(area: f64, areas: &[f64], share: f64) -> bool {
    let largest = areas.iter().copied().fold(0.0, f64::max);
    let smallest = areas.iter().copied().fold(f64::INFINITY, f64::min);
    let sum: f64 = areas.iter().sum();
    area >= largest + share * (sum - largest) && smallest >= TUNING.min_member_share * largest
}

/// Builds the group of one detection: `first` (the matched track, if any) then `candidates`
/// sorted by distance, each kept while [`holds`] stays true. Returns the members.
#[must_use]
pub(crate) fn grow_group(
    area: f64,
    first: Option<(usize, f64)>,
    candidates: &[(usize, f64, f64)],
    share: f64,
) -> Vec<usize> {
    // candidates: (track, area, distance to the component's centroid).
    let mut sorted: Vec<(usize, f64, f64)> = candidates.to_vec();
    sorted.sort_by(|a, b| a.2.total_cmp(&b.2));
    let mut members: Vec<usize> = Vec::new();
    let mut areas: Vec<f64> = Vec::new();
    if let Some((t, a)) = first {
        members.push(t);
        areas.push(a);
    }
    for (t, a, _) in sorted {
        areas.push(a);
        if members.is_empty() || holds(area, &areas, share) {
            members.push(t);
        } else {
            areas.pop();
        }
    }
    members
}

/// Corrected centroids of the members of a group (see the module docs): `predicted` are the
/// members' predicted centroids, `sizes` their box sizes `[w, h]`, `areas` their areas;
/// `bbox` and `centroid` the shared component's box and centroid.
#[must_use]
pub(crate) fn place_members(
    predicted: &[[f64; 2]],
    sizes: &[[f64; 2]],
    areas: &[f64],
    bbox: [f64; 4],
    centroid: [f64; 2],
) -> Vec<[f64; 2]> {
    let total: f64 = areas.iter().sum::<f64>().max(1e-9);
    let mut z: Vec<[f64; 2]> = predicted.to_vec();
    for a in 0..2 {
        let mean = z.iter().zip(areas).map(|(p, w)| p[a] * w).sum::<f64>() / total;
        if z.len() > 1 {
            let k = spread_to_fit(
                &z.iter().map(|p| p[a] - mean).collect::<Vec<_>>(),
                &sizes.iter().map(|s| s[a]).collect::<Vec<_>>(),
                bbox[a + 2],
            );
            for p in &mut z {
                p[a] = mean + k * (p[a] - mean);
            }
        }
        let (lo, len) = (bbox[a], bbox[a + 2]);
        for (p, s) in z.iter_mut().zip(sizes) {
            p[a] += centroid[a] - mean;
            // Centre range that keeps a box of size s[a] inside [lo, lo + len - 1].
            let half = 0.5 * (s[a] - 1.0);
            p[a] = if s[a] >= len {
                lo + 0.5 * (len - 1.0)
            } else {
                p[a].clamp(lo + half, lo + len - 1.0 - half)
            };
        }
    }
    z
}

/// The factor `k` in `[0, max_spread]` ([`Tuning::max_spread`]) by which offsets `d` (centres
/// about their mean) must be scaled for the members' boxes (`sizes`) to span `span` pixels from
/// the first pixel of the leftmost box to the last of the rightmost (bisection: the span grows
/// with `k`).
fn spread_to_fit(d: &[f64], sizes: &[f64], span: f64) -> f64 {
    let extent = |k: f64| {
        let hi = d
            .iter()
            .zip(sizes)
            .map(|(x, s)| k * x + 0.5 * (s - 1.0))
            .fold(f64::MIN, f64::max);
        let lo = d
            .iter()
            .zip(sizes)
            .map(|(x, s)| k * x - 0.5 * (s - 1.0))
            .fold(f64::MAX, f64::min);
        hi - lo + 1.0
    };
    if extent(0.0) >= span {
        return 0.0;
    }
    if extent(TUNING.max_spread) <= span {
        return TUNING.max_spread;
    }
    let (mut lo, mut hi) = (0.0, TUNING.max_spread);
    for _ in 0..40 {
        let mid = 0.5 * (lo + hi);
        if extent(mid) < span {
            lo = mid
        } else {
            hi = mid
        }
    }
    0.5 * (lo + hi)
}

/// The part of box `b` inside box `outer` (both `[left, top, width, height]`); `b` itself when
/// they do not meet.
#[must_use]
pub(crate) fn clip_box(b: [f64; 4], outer: [f64; 4]) -> [f64; 4] {
    let (l, t) = (b[0].max(outer[0]), b[1].max(outer[1]));
    let (r, bt) = (
        (b[0] + b[2]).min(outer[0] + outer[2]),
        (b[1] + b[3]).min(outer[1] + outer[3]),
    );
    if r <= l || bt <= t {
        b
    } else {
        [l, t, r - l, bt - t]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_holds_tracks_when_big_enough() {
        assert!(holds(200.0, &[100.0, 100.0], 0.3));
        assert!(holds(130.0, &[100.0, 100.0], 0.3));
        assert!(
            !holds(120.0, &[100.0, 100.0], 0.3),
            "one object mostly hiding the other"
        );
        assert!(
            holds(1100.0, &[1000.0, 300.0], 0.3),
            "a smaller object merged into a big one"
        );
        assert!(!holds(1050.0, &[1000.0, 300.0], 0.3));
        assert!(
            !holds(1100.0, &[1000.0, 100.0], 0.3),
            "a fragment is no member"
        );
    }

    #[test]
    fn groups_take_the_nearest_candidates_that_fit() {
        // Area 150: the matched track (100) and the nearer candidate (100) fit (130 needed), a
        // third does not (160).
        let m = grow_group(
            150.0,
            Some((7, 100.0)),
            &[(3, 100.0, 9.0), (5, 100.0, 2.0)],
            0.3,
        );
        assert_eq!(m, vec![7, 5]);
        assert_eq!(
            grow_group(100.0, Some((7, 100.0)), &[(3, 100.0, 1.0)], 0.3),
            vec![7]
        );
        // Without a matched track, the nearest candidate leads.
        assert_eq!(
            grow_group(400.0, None, &[(3, 100.0, 5.0), (4, 200.0, 1.0)], 0.3),
            vec![4, 3]
        );
    }

    #[test]
    fn members_follow_the_component_and_stay_inside_it() {
        // Two 10 x 10 members predicted 4 px left of where the component (x 0..=29) lies, with
        // boxes spanning 24 of its 30 columns: spread and shifted onto it.
        let z = place_members(
            &[[6.0, 5.0], [20.0, 5.0]],
            &[[10.0, 10.0]; 2],
            &[100.0, 100.0],
            [0.0, 0.0, 30.0, 10.0],
            [14.5, 4.5],
        );
        assert!(
            (z[0][0] - 4.5).abs() < 1e-6 && (z[1][0] - 24.5).abs() < 1e-6,
            "{z:?}"
        );
        assert_eq!([z[0][1], z[1][1]], [4.5, 4.5]);
        // Predicted past each other (closing in after they touched): the order is kept.
        let z = place_members(
            &[[12.0, 5.0], [8.0, 5.0]],
            &[[10.0, 10.0]; 2],
            &[100.0, 100.0],
            [0.0, 0.0, 22.0, 10.0],
            [10.5, 4.5],
        );
        assert!(
            z[0][0] > z[1][0] && (z[0][0] - z[1][0] - 12.0).abs() < 1e-6,
            "{z:?}"
        );
        // A member predicted outside is pushed in.
        let z = place_members(
            &[[-20.0, 5.0], [20.0, 5.0]],
            &[[10.0, 10.0]; 2],
            &[100.0, 100.0],
            [0.0, 0.0, 30.0, 10.0],
            [0.0, 4.5],
        );
        assert_eq!(z[0], [4.5, 4.5]);
        // Wider than the component: centred on it.
        let z = place_members(
            &[[0.0, 0.0]],
            &[[40.0, 4.0]],
            &[100.0],
            [0.0, 0.0, 30.0, 10.0],
            [0.0, 0.0],
        );
        assert_eq!(z[0][0], 14.5);
        assert_eq!(
            clip_box([-5.0, 2.0, 10.0, 10.0], [0.0, 0.0, 30.0, 10.0]),
            [0.0, 2.0, 5.0, 8.0]
        );
        assert_eq!(
            clip_box([50.0, 2.0, 10.0, 10.0], [0.0, 0.0, 30.0, 10.0]),
            [50.0, 2.0, 10.0, 10.0]
        );
    }
}
