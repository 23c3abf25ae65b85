//! Component features from exact integer sums, and the serializable component table.
//!
//! Both backends accumulate, per component, the integer sums of [`ComponentSums`]: area,
//! bounding box, `Σx`, `Σy`, `Σx²`, `Σxy`, `Σy²` (x = column, y = row). A horizontal run
//! `x0..=x1` on row `y` contributes closed forms (`ComponentSums::add_run`), which is how the
//! run-based CPU labeler and the HA4 GPU kernels (features from the segment bitmask, Alg. 6)
//! accumulate without visiting pixels one by one. Floating-point features are derived once from
//! the sums (`Component::from_sums`), in one place, so CPU and GPU agree bit for bit. Both
//! also sum the 8-bit grey level of the frame over each component's pixels (`Σg`, 64-bit: a
//! 4K frame of 255s is past 32 bits), for its mean grey level.
//!
//! Conventions: centroid `[x, y] = [Σx/n, Σy/n]` (OpenCV's); `mu20 = Σ(x-cx)²`,
//! `mu11 = Σ(x-cx)(y-cy)`, `mu02 = Σ(y-cy)²` (unnormalized, as OpenCV's `moments`), computed
//! as `(nΣx² - (Σx)²)/n` with an exact 128-bit numerator; orientation
//! `θ = ½·atan2(2·mu11, mu20 - mu02)` in radians, in (-π/2, π/2], the angle of the major axis
//! from the +x axis towards +y (image rows grow downwards); eccentricity `sqrt(1 - λ2/λ1)` of
//! the covariance eigenvalues `λ1 >= λ2` (scikit-image's), 0 for a single pixel.

use serde::{Deserialize, Serialize};

/// Exact per-component sums (x = column, y = row).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ComponentSums {
    /// Pixel count.
    pub area: u64,
    /// Σx.
    pub sum_x: u64,
    /// Σy.
    pub sum_y: u64,
    /// Σx².
    pub sum_xx: u64,
    /// Σxy.
    pub sum_xy: u64,
    /// Σy².
    pub sum_yy: u64,
    /// Leftmost column.
    pub min_x: u32,
    /// Rightmost column.
    pub max_x: u32,
    /// Top row.
    pub min_y: u32,
    /// Bottom row.
    pub max_y: u32,
    /// Σg: the frame's 8-bit grey level over the component's pixels (0 when a mask alone is
    /// labeled).
    pub sum_grey: u64,
}

/// `Σ_{i=0}^{m} i²`.
#[must_use]
pub(crate) fn sum_squares_to(m: u64) -> u64 {
    m * (m + 1) * (2 * m + 1) / 6
}

impl ComponentSums {
    /// Sums with no pixels yet, bounding box empty (min at MAX, max at 0).
    #[must_use]
    pub fn empty() -> Self {
        Self {
            min_x: u32::MAX,
            min_y: u32::MAX,
            ..Self::default()
        }
    }

    /// Adds one pixel.
    pub fn add_pixel(&mut self, x: u32, y: u32) {
        let (xx, yy) = (u64::from(x), u64::from(y));
        self.area += 1;
        self.sum_x += xx;
        self.sum_y += yy;
        self.sum_xx += xx * xx;
        self.sum_xy += xx * yy;
        self.sum_yy += yy * yy;
        self.min_x = self.min_x.min(x);
        self.max_x = self.max_x.max(x);
        self.min_y = self.min_y.min(y);
        self.max_y = self.max_y.max(y);
    }

    /// Adds the run `x0..=x1` of row `y` (`x0 <= x1`) in closed form.
    pub fn add_run(&mut self, x0: u32, x1: u32, y: u32) {
        let (a, b, yy) = (u64::from(x0), u64::from(x1), u64::from(y));
        let n = b - a + 1;
        let sx = (a + b) * n / 2;
        let sxx = sum_squares_to(b) - if a == 0 { 0 } else { sum_squares_to(a - 1) };
        self.area += n;
        self.sum_x += sx;
        self.sum_y += yy * n;
        self.sum_xx += sxx;
        self.sum_xy += yy * sx;
        self.sum_yy += yy * yy * n;
        self.min_x = self.min_x.min(x0);
        self.max_x = self.max_x.max(x1);
        self.min_y = self.min_y.min(y);
        self.max_y = self.max_y.max(y);
    }

    /// Adds another component's sums (union of pixel sets).
    pub fn merge(&mut self, o: &Self) {
        self.area += o.area;
        self.sum_x += o.sum_x;
        self.sum_y += o.sum_y;
        self.sum_xx += o.sum_xx;
        self.sum_xy += o.sum_xy;
        self.sum_yy += o.sum_yy;
        self.min_x = self.min_x.min(o.min_x);
        self.max_x = self.max_x.max(o.max_x);
        self.min_y = self.min_y.min(o.min_y);
        self.max_y = self.max_y.max(o.max_y);
        self.sum_grey += o.sum_grey;
    }
}

/// Second-order shape descriptors of one component.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Moments {
    /// Σ(x - cx)².
    pub mu20: f64,
    /// Σ(x - cx)(y - cy).
    pub mu11: f64,
    /// Σ(y - cy)².
    pub mu02: f64,
    /// Major-axis angle in radians from +x towards +y, in (-π/2, π/2].
    pub orientation: f64,
    /// `sqrt(1 - λ2/λ1)` in [0, 1]: 0 for a disc, 1 for a line.
    pub eccentricity: f64,
}

/// One connected component, as written to `components.jsonl` and the `image --op cca` JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Component {
    /// Label in the label image (1..=n, raster order of the first pixel).
    pub label: u32,
    /// Pixel count.
    pub area: u64,
    /// Leftmost column.
    pub left: u32,
    /// Top row.
    pub top: u32,
    /// Bounding-box width.
    pub width: u32,
    /// Bounding-box height.
    pub height: u32,
    /// `[x, y]` = (column, row) mean.
    pub centroid: [f64; 2],
    /// Central moments, orientation, eccentricity.
    pub moments: Moments,
    /// Sum of the frame's 8-bit grey level over the component's pixels (16-bit frames: their
    /// high byte); 0 when a mask alone is labeled. See [`Component::mean_grey`].
    #[serde(default)]
    pub grey_sum: u64,
    /// Id of the confirmed track this component belongs to (set by the tracker).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub track_id: Option<u64>,
}

/// `(n·Σab - Σa·Σb) / n` with the numerator exact in i128.
fn central(n: u64, sab: u64, sa: u64, sb: u64) -> f64 {
    let num = i128::from(n) * i128::from(sab) - i128::from(sa) * i128::from(sb);
    num as f64 / n as f64
}

impl Component {
    /// Features of component `label` from its sums (`area > 0`).
    #[must_use]
    pub fn from_sums(label: u32, s: &ComponentSums) -> Self {
        let n = s.area.max(1);
        let nf = n as f64;
        let mu20 = central(n, s.sum_xx, s.sum_x, s.sum_x);
        let mu11 = central(n, s.sum_xy, s.sum_x, s.sum_y);
        let mu02 = central(n, s.sum_yy, s.sum_y, s.sum_y);
        let (a, b, c) = (mu20 / nf, mu11 / nf, mu02 / nf);
        let half_tr = 0.5 * (a + c);
        let root = (0.25 * (a - c) * (a - c) + b * b).sqrt();
        let l1 = half_tr + root;
        let l2 = (half_tr - root).max(0.0);
        let eccentricity = if l1 > 0.0 {
            (1.0 - l2 / l1).clamp(0.0, 1.0).sqrt()
        } else {
            0.0
        };
        let mut orientation = 0.5 * (2.0 * mu11).atan2(mu20 - mu02);
        if orientation <= -std::f64::consts::FRAC_PI_2 {
            orientation += std::f64::consts::PI;
        }
        Self {
            label,
            area: s.area,
            left: s.min_x,
            top: s.min_y,
            width: s.max_x - s.min_x + 1,
            height: s.max_y - s.min_y + 1,
            centroid: [s.sum_x as f64 / nf, s.sum_y as f64 / nf],
            moments: Moments {
                mu20,
                mu11,
                mu02,
                orientation,
                eccentricity,
            },
            grey_sum: s.sum_grey,
            track_id: None,
        }
    }

    /// Mean grey level over the component's pixels (`grey_sum / area`): the same on both
    /// backends, as both sum integers.
    #[must_use]
    pub fn mean_grey(&self) -> f64 {
        self.grey_sum as f64 / self.area.max(1) as f64
    }

    /// Bounding box as `[left, top, width, height]` in f64 (for IoU and MOT rows).
    #[must_use]
    pub fn bbox(&self) -> [f64; 4] {
        [
            f64::from(self.left),
            f64::from(self.top),
            f64::from(self.width),
            f64::from(self.height),
        ]
    }
}

/// The components of one frame (`image --op cca` JSON; one line of `components.jsonl`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ComponentTable {
    /// Frame width.
    pub width: usize,
    /// Frame height.
    pub height: usize,
    /// 4 or 8.
    pub connectivity: u8,
    /// The threshold level used (fixed or Otsu's).
    pub threshold: u32,
    /// Components, label `i + 1` at index `i` (label 0, the background, is not listed).
    pub components: Vec<Component>,
}

impl ComponentTable {
    /// A table from per-label sums (`sums[i]` belongs to label `i + 1`).
    #[must_use]
    pub(crate) fn from_sums(
        width: usize,
        height: usize,
        connectivity: u8,
        threshold: u32,
        sums: &[ComponentSums],
    ) -> Self {
        let components = sums
            .iter()
            .enumerate()
            .map(|(i, s)| Component::from_sums(i as u32 + 1, s))
            .collect();
        Self {
            width,
            height,
            connectivity,
            threshold,
            components,
        }
    }

    /// Number of components.
    #[must_use]
    pub fn len(&self) -> usize {
        self.components.len()
    }

    /// True when the frame has no foreground.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.components.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_equals_pixels() {
        for y in [0u32, 3, 1000] {
            for x0 in 0..20u32 {
                for x1 in x0..25 {
                    let mut a = ComponentSums::empty();
                    a.add_run(x0, x1, y);
                    let mut b = ComponentSums::empty();
                    for x in x0..=x1 {
                        b.add_pixel(x, y);
                    }
                    assert_eq!(a, b);
                }
            }
        }
    }

    #[test]
    fn features_of_simple_shapes() {
        // One pixel: no spread.
        let mut s = ComponentSums::empty();
        s.add_pixel(5, 7);
        let c = Component::from_sums(1, &s);
        assert_eq!((c.left, c.top, c.width, c.height, c.area), (5, 7, 1, 1, 1));
        assert_eq!(c.centroid, [5.0, 7.0]);
        assert_eq!(c.moments.eccentricity, 0.0);
        assert_eq!(c.moments.mu20, 0.0);
        // Horizontal line of 5: mu20 = 10, a line (eccentricity 1), orientation 0.
        let mut s = ComponentSums::empty();
        s.add_run(2, 6, 3);
        let c = Component::from_sums(1, &s);
        assert_eq!(c.moments.mu20, 10.0);
        assert_eq!(c.moments.mu02, 0.0);
        assert_eq!(c.moments.eccentricity, 1.0);
        assert_eq!(c.moments.orientation, 0.0);
        // Vertical line: orientation pi/2.
        let mut s = ComponentSums::empty();
        for y in 0..4 {
            s.add_pixel(1, y);
        }
        let c = Component::from_sums(1, &s);
        assert!((c.moments.orientation - std::f64::consts::FRAC_PI_2).abs() < 1e-12);
        // Diagonal (x = y): orientation pi/4 (towards +y).
        let mut s = ComponentSums::empty();
        for i in 0..5 {
            s.add_pixel(i, i);
        }
        let c = Component::from_sums(1, &s);
        assert!((c.moments.orientation - std::f64::consts::FRAC_PI_4).abs() < 1e-12);
        // Square: eccentricity 0.
        let mut s = ComponentSums::empty();
        for y in 0..4 {
            s.add_run(0, 3, y);
        }
        assert_eq!(Component::from_sums(1, &s).moments.eccentricity, 0.0);
    }

    #[test]
    fn table_json_shape() {
        let mut s = ComponentSums::empty();
        s.add_run(0, 1, 0);
        let t = ComponentTable::from_sums(4, 2, 8, 128, &[s]);
        let v = serde_json::to_value(&t).unwrap();
        assert_eq!(v["components"][0]["label"], 1);
        assert_eq!(v["components"][0]["centroid"][0], 0.5);
        assert!(v["components"][0]["moments"]["mu20"].is_number());
        assert!(v["components"][0].get("track_id").is_none());
        let back: ComponentTable = serde_json::from_value(v).unwrap();
        assert_eq!(back, t);
    }
}
