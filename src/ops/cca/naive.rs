//! Brute-force reference definitions for the tests: labels by breadth-first flood fill started
//! at each unlabeled foreground pixel in raster order (so labels are numbered in raster order of
//! the first pixel by construction), sums pixel by pixel, and features computed directly from
//! the pixel list in floating point (two-pass: mean, then squared deviations).

use std::collections::VecDeque;

use crate::image::{Image, ImageView};

use super::Connectivity;
use super::features::{Component, ComponentSums, Moments};

/// Labels of the non-zero pixels by BFS, with per-label sums (label `i + 1` at index `i`).
#[must_use]
pub fn label_bfs<T: Copy + Default + PartialEq>(
    img: ImageView<'_, T>,
    conn: Connectivity,
) -> (Image<u32>, Vec<ComponentSums>) {
    let (w, h) = (img.width(), img.height());
    let zero = T::default();
    let mut labels = Image::new(w, h, 0u32);
    let mut sums = Vec::new();
    let mut queue = VecDeque::new();
    let offsets: &[(isize, isize)] = match conn {
        Connectivity::Four => &[(-1, 0), (1, 0), (0, -1), (0, 1)],
        Connectivity::Eight => &[
            (-1, -1),
            (0, -1),
            (1, -1),
            (-1, 0),
            (1, 0),
            (-1, 1),
            (0, 1),
            (1, 1),
        ],
    };
    for y in 0..h {
        for x in 0..w {
            if img.get(x, y) == zero || labels.get(x, y) != 0 {
                continue;
            }
            let l = sums.len() as u32 + 1;
            let mut s = ComponentSums::empty();
            labels.set(x, y, l);
            queue.push_back((x, y));
            while let Some((cx, cy)) = queue.pop_front() {
                s.add_pixel(cx as u32, cy as u32);
                for &(dx, dy) in offsets {
                    let (nx, ny) = (cx as isize + dx, cy as isize + dy);
                    if nx < 0 || ny < 0 || nx >= w as isize || ny >= h as isize {
                        continue;
                    }
                    let (nx, ny) = (nx as usize, ny as usize);
                    if img.get(nx, ny) != zero && labels.get(nx, ny) == 0 {
                        labels.set(nx, ny, l);
                        queue.push_back((nx, ny));
                    }
                }
            }
            sums.push(s);
        }
    }
    (labels, sums)
}

/// Features of `label` computed directly from its pixels (f64, two-pass).
#[must_use]
pub fn direct_features(labels: &Image<u32>, label: u32) -> Component {
    let mut px = Vec::new();
    for y in 0..labels.height() {
        for x in 0..labels.width() {
            if labels.get(x, y) == label {
                px.push((x as f64, y as f64));
            }
        }
    }
    let n = px.len() as f64;
    let cx = px.iter().map(|p| p.0).sum::<f64>() / n;
    let cy = px.iter().map(|p| p.1).sum::<f64>() / n;
    let mu20: f64 = px.iter().map(|p| (p.0 - cx) * (p.0 - cx)).sum();
    let mu11: f64 = px.iter().map(|p| (p.0 - cx) * (p.1 - cy)).sum();
    let mu02: f64 = px.iter().map(|p| (p.1 - cy) * (p.1 - cy)).sum();
    // Eigen-decomposition of the 2x2 covariance, written out.
    let (a, b, c) = (mu20 / n, mu11 / n, mu02 / n);
    let l1 = 0.5 * (a + c) + (0.25 * (a - c).powi(2) + b * b).sqrt();
    let l2 = (0.5 * (a + c) - (0.25 * (a - c).powi(2) + b * b).sqrt()).max(0.0);
    let eccentricity = if l1 > 0.0 {
        (1.0 - l2 / l1).sqrt()
    } else {
        0.0
    };
    // Major axis direction: the eigenvector of l1, from its better-conditioned form
    // ((l1 - c, b) when a >= c, else (b, l1 - a)).
    let orientation = if a >= c {
        b.atan2(l1 - c)
    } else {
        (l1 - a).atan2(b)
    };
    let orientation = if orientation > std::f64::consts::FRAC_PI_2 {
        orientation - std::f64::consts::PI
    } else if orientation <= -std::f64::consts::FRAC_PI_2 {
        orientation + std::f64::consts::PI
    } else {
        orientation
    };
    let min_x = px.iter().map(|p| p.0 as u32).min().unwrap_or(0);
    let max_x = px.iter().map(|p| p.0 as u32).max().unwrap_or(0);
    let min_y = px.iter().map(|p| p.1 as u32).min().unwrap_or(0);
    let max_y = px.iter().map(|p| p.1 as u32).max().unwrap_or(0);
    Component {
        label,
        area: px.len() as u64,
        left: min_x,
        top: min_y,
        width: max_x - min_x + 1,
        height: max_y - min_y + 1,
        centroid: [cx, cy],
        moments: Moments {
            mu20,
            mu11,
            mu02,
            orientation,
            eccentricity,
        },
        grey_sum: 0, // a label image alone has no grey levels
        track_id: None,
    }
}
