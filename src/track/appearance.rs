//! What a component looks like, for telling objects apart when motion cannot: after a merge
//! splits, and when a lost track's object comes back.
//!
//! An [`Appearance`] holds the features the labeling already measures — area and the
//! second moments, summarised as the standard deviations along the major and minor axes
//! (`sqrt` of the covariance eigenvalues: an ellipse of semi-axes `a, b` gives `a/2, b/2`) —
//! and the mean grey level of the component's pixels ([`mean_grey_levels`], measured from the
//! frame inside each component's box). Tracks keep a running average of the appearance of the
//! components they were matched to alone and in full view.
//!
//! `Appearance::difference` is the mean of three normalised terms: `|ln(area ratio)|` over
//! `ln(shape_tolerance²)`, the larger `|ln(axis ratio)|` over `ln(shape_tolerance)`, and the
//! grey-level difference over `grey_tolerance` (left out when either side has no grey level).
//! 1 means "at the tolerance" on average.

use super::tuning::TUNING;
#[cfg(doc)]
use super::tuning::Tuning;
use crate::image::ImageView;
use crate::ops::cca::{Component, ComponentTable};

/// Area, second-moment axes and mean grey level of a component (or a track's average).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Appearance {
    /// Pixels.
    pub area: f64,
    /// Standard deviations along the major and minor axes, pixels (minor at least 0.5).
    pub axes: [f64; 2],
    /// Mean grey level of the component's pixels, when measured.
    pub grey: Option<f64>,
    /// `[ln area, ln major, ln minor]`, kept with the values (comparisons take no logarithm).
    logs: [f64; 3],
}

impl Appearance {
    /// An appearance from its features.
    #[must_use]
    pub fn new(area: f64, axes: [f64; 2], grey: Option<f64>) -> Self {
        let area = area.max(1.0);
        let axes = [axes[0].max(0.5), axes[1].max(0.5)];
        Self {
            area,
            axes,
            grey: grey.filter(|g| g.is_finite()),
            logs: [area.ln(), axes[0].ln(), axes[1].ln()],
        }
    }

    /// The appearance of a component with its mean grey level, if known.
    #[must_use]
    pub fn of(c: &Component, grey: Option<f64>) -> Self {
        let n = c.area.max(1) as f64;
        let (a, b, d) = (c.moments.mu20 / n, c.moments.mu11 / n, c.moments.mu02 / n);
        let half_tr = 0.5 * (a + d);
        let root = (0.25 * (a - d) * (a - d) + b * b).sqrt();
        Self::new(
            n,
            [
                (half_tr + root).max(0.25).sqrt(),
                (half_tr - root).max(0.25).sqrt(),
            ],
            grey,
        )
    }

    /// The same with another grey level.
    #[must_use]
    pub fn with_grey(self, grey: Option<f64>) -> Self {
        Self::new(self.area, self.axes, grey)
    }

    /// Moves this average towards `o` by `alpha` (0: unchanged, 1: replaced).
    pub fn blend(&mut self, o: &Self, alpha: f64) {
        let mix = |a: f64, b: f64| a + alpha * (b - a);
        let grey = match (self.grey, o.grey) {
            (Some(a), Some(b)) => Some(mix(a, b)),
            (a, b) => a.or(b),
        };
        *self = Self::new(
            mix(self.area, o.area),
            [mix(self.axes[0], o.axes[0]), mix(self.axes[1], o.axes[1])],
            grey,
        );
    }

    /// Normalised difference (see the module docs), at most [`Tuning::max_difference`].
    #[must_use]
    pub(crate) fn difference(&self, o: &Self, shape_tolerance: f64, grey_tolerance: f64) -> f64 {
        let ln_tol = shape_tolerance.ln();
        let area = (o.logs[0] - self.logs[0]).abs() / (2.0 * ln_tol);
        let shape = (o.logs[1] - self.logs[1])
            .abs()
            .max((o.logs[2] - self.logs[2]).abs())
            / ln_tol;
        let (sum, n) = match (self.grey, o.grey) {
            (Some(a), Some(b)) => (area + shape + (a - b).abs() / grey_tolerance, 3.0),
            _ => (area + shape, 2.0),
        };
        (sum / n).min(TUNING.max_difference)
    }

    /// Whether `o`, possibly a partly hidden view (smaller, other shape), can be the object of
    /// this average: grey levels within `grey_tolerance` when both are known, and an area not
    /// larger than `shape_tolerance²` times this one nor smaller than a fifth of it.
    #[must_use]
    pub(crate) fn may_be(&self, o: &Self, shape_tolerance: f64, grey_tolerance: f64) -> bool {
        let ratio = o.area / self.area;
        let grey_ok = match (self.grey, o.grey) {
            (Some(a), Some(b)) => (a - b).abs() <= grey_tolerance,
            _ => true,
        };
        grey_ok && (0.2..=shape_tolerance * shape_tolerance).contains(&ratio)
    }
}

/// Mean grey level of each component with at least `min_area` pixels (`None` for the others):
/// the mean over the pixels of its box for which `foreground` holds (its own pixels when the
/// components come from thresholding this very frame; other components' pixels inside the box
/// count too).
#[must_use]
pub fn mean_grey_levels(
    table: &ComponentTable,
    frame: ImageView<'_, u8>,
    min_area: u64,
    foreground: impl Fn(u8) -> bool,
) -> Vec<Option<f64>> {
    table
        .components
        .iter()
        .map(|c| {
            if c.area < min_area {
                return None;
            }
            let (mut sum, mut n) = (0u64, 0u64);
            let x_end = (c.left + c.width) as usize;
            for y in c.top as usize..(c.top + c.height) as usize {
                let row = frame.row(y.min(frame.height().saturating_sub(1)));
                // Branch-free per pixel: the row sums vectorise.
                let (s, k) = row[(c.left as usize).min(row.len())..x_end.min(row.len())]
                    .iter()
                    .fold((0u32, 0u32), |(s, k), &v| {
                        let f = u32::from(foreground(v));
                        (s + f * u32::from(v), k + f)
                    });
                sum += u64::from(s);
                n += u64::from(k);
            }
            (n > 0).then(|| sum as f64 / n as f64)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;
    use crate::ops::cca::{ComponentSums, ComponentTable};

    /// A filled axis-aligned rectangle as a component.
    fn rect(x: u32, y: u32, w: u32, h: u32) -> Component {
        let mut s = ComponentSums::empty();
        for yy in y..y + h {
            s.add_run(x, x + w - 1, yy);
        }
        Component::from_sums(1, &s)
    }

    #[test]
    fn axes_are_the_standard_deviations() {
        // A 1 x n line: variance (n² - 1) / 12 along it.
        let a = Appearance::of(&rect(0, 0, 13, 1), Some(100.0));
        assert!((a.axes[0] - (168.0f64 / 12.0).sqrt()).abs() < 1e-9);
        assert_eq!(a.axes[1], 0.5, "the minor axis is floored");
        let sq = Appearance::of(&rect(0, 0, 10, 10), None);
        assert!((sq.axes[0] - sq.axes[1]).abs() < 1e-9);
        assert_eq!(sq.area, 100.0);
    }

    #[test]
    fn difference_is_zero_for_the_same_and_grows_with_each_feature() {
        let a = Appearance::of(&rect(0, 0, 10, 10), Some(100.0));
        assert_eq!(a.difference(&a, 1.5, 20.0), 0.0);
        let grey = a.with_grey(Some(120.0));
        assert!((a.difference(&grey, 1.5, 20.0) - 1.0 / 3.0).abs() < 1e-12);
        let bigger = Appearance::of(&rect(0, 0, 15, 15), Some(100.0));
        // Axes about x1.5 (1 tolerance), area x2.25 (1 tolerance), grey equal: mean about 2/3.
        assert!((a.difference(&bigger, 1.5, 20.0) - 2.0 / 3.0).abs() < 0.01);
        let far = Appearance::new(1e9, a.axes, Some(250.0));
        assert_eq!(a.difference(&far, 1.5, 20.0), TUNING.max_difference);
        // No grey level on one side: the mean of the two shape terms.
        assert!((a.difference(&bigger.with_grey(None), 1.5, 20.0) - 1.0).abs() < 0.01);
    }

    #[test]
    fn may_be_accepts_partial_views_of_the_same_grey() {
        let a = Appearance::of(&rect(0, 0, 10, 10), Some(100.0));
        let half = Appearance::of(&rect(0, 0, 5, 10), Some(104.0));
        assert!(a.may_be(&half, 1.5, 20.0));
        assert!(!a.may_be(&half.with_grey(Some(130.0)), 1.5, 20.0));
        assert!(
            !a.may_be(&Appearance::of(&rect(0, 0, 3, 3), Some(100.0)), 1.5, 20.0),
            "a speck is no view of it"
        );
        assert!(!a.may_be(&Appearance::of(&rect(0, 0, 20, 20), Some(100.0)), 1.5, 20.0));
    }

    #[test]
    fn mean_grey_counts_the_foreground_pixels_of_each_box() {
        // Two blocks of 90 and 200 on a background of 10; a third component is too small.
        let img = Image::from_fn(20, 10, |x, y| match (x, y) {
            (1..=4, 1..=4) => 90u8,
            (10..=15, 2..=7) => 200,
            (18, 9) => 250,
            _ => 10,
        });
        let mut sums = [
            ComponentSums::empty(),
            ComponentSums::empty(),
            ComponentSums::empty(),
        ];
        for y in 1..=4 {
            sums[0].add_run(1, 4, y);
        }
        for y in 2..=7 {
            sums[1].add_run(10, 15, y);
        }
        sums[2].add_pixel(18, 9);
        let table = ComponentTable::from_sums(20, 10, 8, 30, &sums);
        let g = mean_grey_levels(&table, img.view(), 2, |v| v > 30);
        assert_eq!(g, vec![Some(90.0), Some(200.0), None]);
    }
}
