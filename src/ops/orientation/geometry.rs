//! Digital segments and the families of parallel digital lines they slide along.
//!
//! A [`LineFamily`] is what the CPU, the reference and the GPU share: the major axis (columns or
//! rows), the minor rise `q` per `r` major steps and `r = (L−1)/2`. Line `c` is the set of pixels
//! `minor = c + φ(major)` with `φ(a) = sgn(q)·⌊(2|q|a + r) / 2r⌋` (a ≥ 0). Working in *major,
//! minor* coordinates ("a", "b") makes the two orientations one case: for a column-major family
//! (a, b) = (x, y), for a row-major one (a, b) = (y, x).

/// `n/d` rounded to the nearest integer, halves away from zero (`d > 0`).
fn div_round_away(n: i64, d: i64) -> i64 {
    let q = (2 * n.abs() + d) / (2 * d);
    if n < 0 { -q } else { q }
}

/// `⌈n/d⌉` for `n ≥ 0`, `d > 0`.
fn ceil_div(n: i64, d: i64) -> i64 {
    (n + d - 1) / d
}

/// The end point (dx, dy) of the segment of `length` pixels at `angle_deg`, in (column, row)
/// coordinates: dx = round(r·cos α / m), dy = −round(r·sin α / m), m = max(|cos α|, |sin α|),
/// r = (length−1)/2, halves rounded away from zero. The segment runs from −(dx, dy) to (dx, dy).
#[must_use]
pub fn segment_end(angle_deg: f64, length: u32) -> (i32, i32) {
    let r = (length.max(1) - 1) / 2;
    if r == 0 {
        return (0, 0);
    }
    let (s, c) = angle_deg.to_radians().sin_cos();
    let m = c.abs().max(s.abs());
    let rf = f64::from(r);
    let dx = (rf * c / m).round() as i32;
    let dy = -(rf * s / m).round() as i32;
    (dx, dy)
}

/// The line family (and segment) of one angle and length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LineFamily {
    /// True when the major axis is x (columns): lines `y = c + φ(x)`; else lines `x = c + φ(y)`.
    pub x_major: bool,
    /// Minor displacement per `r` major steps, `|q| ≤ r`, in image directions (rows downwards for
    /// a column-major family, columns rightwards for a row-major one).
    pub q: i32,
    /// Half length `r = (L−1)/2`.
    pub r: i32,
}

impl LineFamily {
    /// The family of the segment of `length` (odd) pixels at `angle_deg`. `length` 1 gives
    /// `r = 0` (the identity; the family is then the columns, unused).
    #[must_use]
    pub fn new(angle_deg: f64, length: u32) -> Self {
        let r = ((length.max(1) - 1) / 2) as i32;
        if r == 0 {
            return Self {
                x_major: false,
                q: 0,
                r: 0,
            };
        }
        let (dx, dy) = segment_end(angle_deg, length);
        if dx.abs() == r {
            Self {
                x_major: true,
                q: dy * dx.signum(),
                r,
            }
        } else {
            Self {
                x_major: false,
                q: dx * dy.signum(),
                r,
            }
        }
    }

    /// Segment length `2r + 1`.
    #[must_use]
    pub fn length(&self) -> usize {
        2 * self.r as usize + 1
    }

    /// (major extent, minor extent) of a `width` x `height` image.
    #[must_use]
    pub(crate) fn extents(&self, width: usize, height: usize) -> (usize, usize) {
        if self.x_major {
            (width, height)
        } else {
            (height, width)
        }
    }

    /// φ(a) for a major coordinate `a ≥ 0`.
    #[must_use]
    pub(crate) fn phi(&self, a: i64) -> i64 {
        if self.q == 0 || self.r == 0 {
            return 0;
        }
        let (aq, r) = (i64::from(self.q.abs()), i64::from(self.r));
        let v = (2 * aq * a + r) / (2 * r);
        if self.q < 0 { -v } else { v }
    }

    /// Number of lines meeting an image of the given extents: `minor + |φ(major−1)|`.
    #[must_use]
    pub(crate) fn line_count(&self, major: usize, minor: usize) -> usize {
        if major == 0 || minor == 0 {
            return 0;
        }
        minor + self.phi(major as i64 - 1).unsigned_abs() as usize
    }

    /// The smallest line index `c` meeting the image: `−max(φ(major−1), 0)`.
    #[must_use]
    pub(crate) fn first_line(&self, major: usize) -> i64 {
        if major == 0 {
            return 0;
        }
        -self.phi(major as i64 - 1).max(0)
    }

    /// The major range `[a0, a1]` (inclusive) where line `c` lies inside the image, or `None`.
    #[must_use]
    pub(crate) fn line_span(&self, c: i64, major: usize, minor: usize) -> Option<(usize, usize)> {
        let (big_a, big_b) = (major as i64, minor as i64);
        if big_a == 0 || big_b == 0 {
            return None;
        }
        if self.q == 0 || self.r == 0 {
            return (0..big_b).contains(&c).then_some((0, major - 1));
        }
        let (aq, r) = (i64::from(self.q.abs()), i64::from(self.r));
        // The unsigned staircase φ⁺(a) = ⌊(2|q|a + r) / 2r⌋ must lie in [lo, hi].
        let (lo, hi) = if self.q > 0 {
            (-c, big_b - 1 - c)
        } else {
            (c - big_b + 1, c)
        };
        if hi < 0 {
            return None;
        }
        let a0 = if lo <= 0 {
            0
        } else {
            ceil_div(r * (2 * lo - 1), 2 * aq)
        };
        let a1 = (ceil_div(r * (2 * hi + 1), 2 * aq) - 1).min(big_a - 1);
        (a0 <= a1).then_some((a0 as usize, a1 as usize))
    }
}

/// The L pixels of the segment as (column, row) offsets from its centre, in major order.
#[must_use]
pub fn segment_offsets(angle_deg: f64, length: u32) -> Vec<(i32, i32)> {
    let f = LineFamily::new(angle_deg, length);
    let r = i64::from(f.r);
    (-r..=r)
        .map(|k| {
            let minor = if r == 0 {
                0
            } else {
                div_round_away(k * i64::from(f.q), r)
            } as i32;
            if f.x_major {
                (k as i32, minor)
            } else {
                (minor, k as i32)
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_points_of_the_main_angles() {
        assert_eq!(segment_end(0.0, 5), (2, 0));
        assert_eq!(segment_end(45.0, 5), (2, -2));
        assert_eq!(segment_end(90.0, 5), (0, -2));
        assert_eq!(segment_end(135.0, 5), (-2, -2));
        assert_eq!(segment_end(30.0, 31), (15, -9)); // round(15·tan 30°) = round(8.66)
        assert_eq!(segment_end(60.0, 31), (9, -15));
        assert_eq!(segment_end(7.0, 1), (0, 0));
        assert_eq!(segment_end(180.0, 3), (-1, 0));
    }

    #[test]
    fn families_of_the_main_angles() {
        assert_eq!(
            LineFamily::new(0.0, 5),
            LineFamily {
                x_major: true,
                q: 0,
                r: 2
            }
        );
        assert_eq!(
            LineFamily::new(45.0, 5),
            LineFamily {
                x_major: true,
                q: -2,
                r: 2
            }
        );
        assert_eq!(
            LineFamily::new(90.0, 5),
            LineFamily {
                x_major: false,
                q: 0,
                r: 2
            }
        );
        assert_eq!(
            LineFamily::new(135.0, 5),
            LineFamily {
                x_major: true,
                q: 2,
                r: 2
            }
        );
        assert_eq!(LineFamily::new(180.0, 5), LineFamily::new(0.0, 5));
        assert_eq!(LineFamily::new(-45.0, 5), LineFamily::new(135.0, 5));
        assert_eq!(segment_offsets(135.0, 3), vec![(-1, -1), (0, 0), (1, 1)]);
        assert_eq!(segment_offsets(45.0, 3), vec![(-1, 1), (0, 0), (1, -1)]);
        assert_eq!(segment_offsets(90.0, 3), vec![(0, -1), (0, 0), (0, 1)]);
    }

    #[test]
    fn segments_have_l_distinct_pixels_and_are_symmetric() {
        for len in (1..=41).step_by(2) {
            for deg in 0..180 {
                let s = segment_offsets(f64::from(deg), len);
                assert_eq!(s.len(), len as usize);
                let set: std::collections::HashSet<_> = s.iter().copied().collect();
                assert_eq!(set.len(), len as usize);
                assert!(
                    s.iter().all(|&(x, y)| set.contains(&(-x, -y))),
                    "{deg} {len}"
                );
                let r = (len as i32 - 1) / 2;
                let (dx, dy) = segment_end(f64::from(deg), len);
                assert!(set.contains(&(dx, dy)) && (dx.abs() == r || dy.abs() == r));
            }
        }
    }

    #[test]
    fn every_pixel_on_exactly_one_line_and_spans_are_exact() {
        for len in [3u32, 5, 7, 9, 31] {
            for deg in (0..180).step_by(7) {
                let f = LineFamily::new(f64::from(deg), len);
                for (major, minor) in [(1usize, 1usize), (1, 9), (9, 1), (13, 7), (7, 13), (40, 3)]
                {
                    let c0 = f.first_line(major);
                    let n = f.line_count(major, minor);
                    let mut seen = vec![0u32; major * minor];
                    for li in 0..n as i64 {
                        let c = c0 + li;
                        let brute: Vec<usize> = (0..major)
                            .filter(|&a| (0..minor as i64).contains(&(c + f.phi(a as i64))))
                            .collect();
                        let span = f.line_span(c, major, minor);
                        assert!(!brute.is_empty(), "empty line {c} {f:?} {major}x{minor}");
                        assert_eq!(
                            span,
                            Some((brute[0], *brute.last().unwrap())),
                            "{f:?} c={c}"
                        );
                        assert_eq!(brute.len(), brute.last().unwrap() - brute[0] + 1);
                        for a in brute {
                            seen[a * minor + (c + f.phi(a as i64)) as usize] += 1;
                        }
                    }
                    assert!(seen.iter().all(|&s| s == 1), "{f:?} {major}x{minor}");
                    assert_eq!(f.line_span(c0 - 1, major, minor), None);
                    assert_eq!(f.line_span(c0 + n as i64, major, minor), None);
                }
            }
        }
    }
}
