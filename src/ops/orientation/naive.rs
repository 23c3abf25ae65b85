//! Brute-force references, straight from the definitions in the module docs; O(N·L), for tests
//! and benches only.
//!
//! - [`opening_along_lines`]: for each pixel, the minimum over the L-sample window of its own
//!   line (the part inside the image), then the maximum of those minima over the same window.
//! - [`opening_2d`]: the true 2D opening by a flat structuring element given as (column, row)
//!   offsets (symmetric): erosion then dilation, pixels outside ignored — what OpenCV's
//!   `morphologyEx(MORPH_OPEN)` computes. Equal to the former at 0°, 45°, 90° and 135°.

use crate::image::{Image, ImageView};

use super::Sample;
use super::geometry::LineFamily;

fn min_of<T: Sample>(a: T, b: T) -> T {
    if b < a { b } else { a }
}

fn max_of<T: Sample>(a: T, b: T) -> T {
    if b > a { b } else { a }
}

/// The pixels (x, y) of the window of L samples centred on (x, y) along its line of `family`,
/// restricted to the image.
fn window(
    family: LineFamily,
    width: usize,
    height: usize,
    x: usize,
    y: usize,
) -> Vec<(usize, usize)> {
    let (major, minor) = family.extents(width, height);
    let (a, b) = if family.x_major {
        (x as i64, y as i64)
    } else {
        (y as i64, x as i64)
    };
    let c = b - family.phi(a);
    let r = i64::from(family.r);
    let mut out = Vec::with_capacity(family.length());
    for a2 in (a - r)..=(a + r) {
        if a2 < 0 || a2 >= major as i64 {
            continue;
        }
        let b2 = c + family.phi(a2);
        if b2 < 0 || b2 >= minor as i64 {
            continue;
        }
        out.push(if family.x_major {
            (a2 as usize, b2 as usize)
        } else {
            (b2 as usize, a2 as usize)
        });
    }
    out
}

/// The opening of a 1D signal by windows of `2r + 1` samples, by definition (min then max over
/// each window, samples outside the signal ignored).
#[must_use]
pub fn opening_1d<T: Sample>(f: &[T], r: usize) -> Vec<T> {
    let n = f.len();
    let window = |c: usize| c.saturating_sub(r)..(c + r + 1).min(n);
    let ero: Vec<T> = (0..n)
        .map(|c| f[window(c)].iter().fold(T::TOP, |m, &v| min_of(m, v)))
        .collect();
    (0..n)
        .map(|a| ero[window(a)].iter().fold(T::BOTTOM, |m, &v| max_of(m, v)))
        .collect()
}

/// The opening along the lines of `family`, by definition (min then max over each window).
#[must_use]
pub fn opening_along_lines<T: Sample>(img: ImageView<'_, T>, family: LineFamily) -> Image<T> {
    let (w, h) = (img.width(), img.height());
    let windows: Vec<Vec<(usize, usize)>> = (0..w * h)
        .map(|i| window(family, w, h, i % w, i / w))
        .collect();
    let ero = Image::from_fn(w, h, |x, y| {
        windows[y * w + x]
            .iter()
            .fold(T::TOP, |m, &(u, v)| min_of(m, img.get(u, v)))
    });
    Image::from_fn(w, h, |x, y| {
        windows[y * w + x]
            .iter()
            .fold(T::BOTTOM, |m, &(u, v)| max_of(m, ero.get(u, v)))
    })
}

/// The closing along the lines of `family`, by definition (max then min over each window).
#[must_use]
pub fn closing_along_lines<T: Sample>(img: ImageView<'_, T>, family: LineFamily) -> Image<T> {
    let (w, h) = (img.width(), img.height());
    let windows: Vec<Vec<(usize, usize)>> = (0..w * h)
        .map(|i| window(family, w, h, i % w, i / w))
        .collect();
    let dil = Image::from_fn(w, h, |x, y| {
        windows[y * w + x]
            .iter()
            .fold(T::BOTTOM, |m, &(u, v)| max_of(m, img.get(u, v)))
    });
    Image::from_fn(w, h, |x, y| {
        windows[y * w + x]
            .iter()
            .fold(T::TOP, |m, &(u, v)| min_of(m, dil.get(u, v)))
    })
}

/// The 2D opening by the flat structuring element `offsets` ((column, row), symmetric about the
/// origin), pixels outside the image ignored.
#[must_use]
pub fn opening_2d<T: Sample>(img: ImageView<'_, T>, offsets: &[(i32, i32)]) -> Image<T> {
    let (w, h) = (img.width(), img.height());
    let inside = |x: usize, y: usize, dx: i32, dy: i32| -> Option<(usize, usize)> {
        let (u, v) = (x as i64 + i64::from(dx), y as i64 + i64::from(dy));
        ((0..w as i64).contains(&u) && (0..h as i64).contains(&v))
            .then_some((u as usize, v as usize))
    };
    let ero = Image::from_fn(w, h, |x, y| {
        offsets
            .iter()
            .filter_map(|&(dx, dy)| inside(x, y, dx, dy))
            .fold(T::TOP, |m, (u, v)| min_of(m, img.get(u, v)))
    });
    Image::from_fn(w, h, |x, y| {
        offsets
            .iter()
            .filter_map(|&(dx, dy)| inside(x, y, -dx, -dy))
            .fold(T::BOTTOM, |m, (u, v)| max_of(m, ero.get(u, v)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn horizontal_window_is_the_row() {
        let f = LineFamily::new(0.0, 5);
        assert_eq!(window(f, 6, 3, 0, 1), vec![(0, 1), (1, 1), (2, 1)]);
        let f = LineFamily::new(45.0, 3);
        assert_eq!(window(f, 4, 4, 1, 1), vec![(0, 2), (1, 1), (2, 0)]);
    }

    #[test]
    fn small_opening_by_hand() {
        // A vertical bar of height 3 survives a vertical segment of 3, not of 5.
        let img = Image::from_fn(3, 5, |x, y| {
            if x == 1 && (1..4).contains(&y) {
                9u8
            } else {
                0
            }
        });
        let f3 = LineFamily::new(90.0, 3);
        assert_eq!(opening_along_lines(img.view(), f3), img);
        let f5 = LineFamily::new(90.0, 5);
        assert_eq!(opening_along_lines(img.view(), f5), Image::new(3, 5, 0));
        let h = LineFamily::new(0.0, 3);
        assert_eq!(opening_along_lines(img.view(), h), Image::new(3, 5, 0));
        // The dilation spreads the bar over its rows; the erosion ignores the outside.
        let rows = Image::from_fn(3, 5, |_, y| if (1..4).contains(&y) { 9u8 } else { 0 });
        assert_eq!(closing_along_lines(img.view(), h), rows);
    }
}
