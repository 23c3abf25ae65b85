//! CPU linear openings, closings and orientation maps: the van Herk / Gil-Werman opening
//! (`van_herk.rs`) along every line of a [`LineFamily`], lines in parallel with rayon.
//!
//! Column-major families (near-horizontal lines) are processed in place: a line's samples lie
//! along rows, which is cache-friendly. Row-major families are processed on the transposed image
//! (so their lines lie along rows too) and the result is transposed back. Each line is gathered
//! into a small buffer, opened, and the image is then rebuilt row by row in parallel (every
//! pixel belongs to exactly one line: `c = y − φ(x)`), so no two threads ever write one pixel.

use std::collections::HashMap;

use rayon::prelude::*;

use crate::image::{Image, ImageView};
use crate::ops::OpError;

use super::geometry::LineFamily;
use super::van_herk::{Scratch, open_1d};
use super::{
    LinearOpeningParams, OrientationOutput, OrientationParams, Sample, hsv_to_rgb, hue_of_angle,
};

/// Rejects values the order cannot handle (NaN in f32 input).
fn check_ordered<T: Sample>(img: ImageView<'_, T>) -> Result<(), OpError> {
    for (y, row) in img.rows().enumerate() {
        if let Some(x) = row.iter().position(|v| !v.is_ordered()) {
            return Err(OpError::Unsupported(format!(
                "NaN at ({x}, {y}): linear openings need ordered values"
            )));
        }
    }
    Ok(())
}

/// A packed transposed copy (32x32 blocks, rows of the result in parallel).
fn transpose<T: Copy + Default + Send + Sync>(img: ImageView<'_, T>) -> Image<T> {
    let (w, h) = (img.width(), img.height());
    let mut out = Image::new(h, w, T::default());
    if w == 0 || h == 0 {
        return out;
    }
    const B: usize = 32;
    out.data_mut()
        .par_chunks_mut(h * B)
        .enumerate()
        .for_each(|(bx, band)| {
            // `band` holds output rows x in bx*B .. bx*B + B (input columns).
            let x0 = bx * B;
            let rows = band.len() / h;
            for y0 in (0..h).step_by(B) {
                for y in y0..(y0 + B).min(h) {
                    let src = img.row(y);
                    for dx in 0..rows {
                        band[dx * h + y] = src[x0 + dx];
                    }
                }
            }
        });
    out
}

/// Opens along a column-major family: lines `y = c + φ(x)` of `src`.
fn open_x_major<T: Sample>(src: ImageView<'_, T>, family: LineFamily) -> Image<T> {
    let (w, h) = (src.width(), src.height());
    let r = family.r as usize;
    let mut out = Image::new(w, h, T::default());
    if family.q == 0 {
        out.data_mut()
            .par_chunks_mut(w)
            .enumerate()
            .for_each_init(Scratch::default, |scratch, (y, orow)| {
                open_1d(src.row(y), r, scratch, orow)
            });
        return out;
    }
    let phi: Vec<i64> = (0..w as i64).map(|a| family.phi(a)).collect();
    let c0 = family.first_line(w);
    let count = family.line_count(w, h);
    let lines: Vec<(usize, Vec<T>)> = (0..count)
        .into_par_iter()
        .map_init(
            || (Scratch::default(), Vec::new()),
            |(scratch, buf), li| {
                let c = c0 + li as i64;
                let Some((a0, a1)) = family.line_span(c, w, h) else {
                    return (0, Vec::new());
                };
                buf.clear();
                buf.extend((a0..=a1).map(|a| src.get(a, (c + phi[a]) as usize)));
                let mut o = vec![T::default(); buf.len()];
                open_1d(buf, r, scratch, &mut o);
                (a0, o)
            },
        )
        .collect();
    out.data_mut()
        .par_chunks_mut(w)
        .enumerate()
        .for_each(|(y, orow)| {
            for (x, px) in orow.iter_mut().enumerate() {
                let li = (y as i64 - phi[x] - c0) as usize;
                let v = lines.get(li).and_then(|(a0, o)| o.get(x.wrapping_sub(*a0)));
                debug_assert!(v.is_some(), "pixel ({x}, {y}) on no line");
                *px = v.copied().unwrap_or_default();
            }
        });
    out
}

/// The opening along the lines of `family` (no validation; see the module docs for the
/// definition). Honours strides; returns a packed image.
#[must_use]
pub fn open_along_lines<T: Sample>(img: ImageView<'_, T>, family: LineFamily) -> Image<T> {
    let (w, h) = (img.width(), img.height());
    if w == 0 || h == 0 || family.r == 0 {
        return img.to_image();
    }
    if family.x_major {
        open_x_major(img, family)
    } else {
        let t = transpose(img);
        let o = open_x_major(t.view(), family);
        transpose(o.view())
    }
}

/// The closing along the lines of `family`: the opening of the inverted image, inverted.
#[must_use]
pub fn close_along_lines<T: Sample>(img: ImageView<'_, T>, family: LineFamily) -> Image<T> {
    let inv = img.map(Sample::invert);
    open_along_lines(inv.view(), family).map(Sample::invert)
}

/// The linear opening (or closing, with `params.closing`) of `img` by the segment of
/// `params.length` pixels at `params.angle` degrees.
pub fn linear_opening<T: Sample>(
    img: ImageView<'_, T>,
    params: &LinearOpeningParams,
) -> Result<Image<T>, OpError> {
    params.validate()?;
    check_ordered(img)?;
    let family = LineFamily::new(params.angle, params.length);
    Ok(if params.closing {
        close_along_lines(img, family)
    } else {
        open_along_lines(img, family)
    })
}

/// The linear closing of `img` by the segment of `length` pixels at `angle` degrees.
pub fn linear_closing<T: Sample>(
    img: ImageView<'_, T>,
    length: u32,
    angle: f64,
) -> Result<Image<T>, OpError> {
    linear_opening(
        img,
        &LinearOpeningParams {
            length,
            angle,
            closing: true,
        },
    )
}

/// Orientation maps: strength (sup of the openings), orientation (first argmax) and angular
/// spectrum over the angles of `params` (closings with `params.closing`; see the module docs).
/// Angles whose line family coincides are computed once.
///
/// ```
/// use morphoscope::image::Image;
/// use morphoscope::ops::orientation::{OrientationParams, orientation};
///
/// // A horizontal bright line: its strongest opening is the one at 0°.
/// let img = Image::from_fn(64, 64, |_, y| if y == 32 { 200u8 } else { 0 });
/// let params = OrientationParams { length: 15, angles: 4, ..OrientationParams::default() };
/// let out = orientation(img.view(), &params)?;
/// let angle = out.angles_deg[usize::from(out.angle_index.get(32, 32))];
/// assert_eq!((angle, out.strength.get(32, 32)), (0.0, 200));
/// # Ok::<(), morphoscope::ops::OpError>(())
/// ```
pub fn orientation<T: Sample>(
    img: ImageView<'_, T>,
    params: &OrientationParams,
) -> Result<OrientationOutput<T>, OpError> {
    params.validate()?;
    check_ordered(img)?;
    let angles = params.angle_degrees();
    let (w, h) = (img.width(), img.height());
    let mut spectrum = vec![0.0; angles.len()];
    let mut best = Image::new(w, h, T::BOTTOM);
    let mut index = Image::new(w, h, 0u16);
    if w > 0 && h > 0 {
        let src = if params.closing {
            img.map(Sample::invert)
        } else {
            img.to_image()
        };
        let mut seen: HashMap<LineFamily, usize> = HashMap::new();
        for (k, &angle) in angles.iter().enumerate() {
            let family = LineFamily::new(angle, params.length);
            if let Some(&k0) = seen.get(&family) {
                // Same lines, same opening: no pixel changes (ties keep the smaller index).
                spectrum[k] = spectrum[k0];
                continue;
            }
            seen.insert(family, k);
            let o = open_along_lines(src.view(), family);
            let k16 = k as u16;
            let closing = params.closing;
            let row_sums: Vec<f64> = best
                .data_mut()
                .par_chunks_mut(w)
                .zip(index.data_mut().par_chunks_mut(w))
                .enumerate()
                .map(|(y, (brow, irow))| {
                    let mut sum = 0.0;
                    for ((b, i), &v) in brow.iter_mut().zip(irow.iter_mut()).zip(o.row(y)) {
                        if k == 0 || v > *b {
                            *b = v;
                            *i = k16;
                        }
                        sum += if closing {
                            v.invert().to_f64()
                        } else {
                            v.to_f64()
                        };
                    }
                    sum
                })
                .collect();
            spectrum[k] = row_sums.iter().sum();
        }
    }
    let strength = if params.closing {
        best.map(Sample::invert)
    } else {
        best
    };
    Ok(OrientationOutput {
        angles_deg: angles,
        strength,
        angle_index: index,
        spectrum,
        closing: params.closing,
    })
}

/// The colour picture of an orientation map: hue from the angle (`hue_of_angle`), full
/// saturation, value = strength in 8 bits (for closings, of the inverted strength, so dark
/// structures light up).
#[must_use]
pub fn orientation_colour<T: Sample>(out: &OrientationOutput<T>) -> Image<[u8; 3]> {
    let hues: Vec<u16> = out.angles_deg.iter().map(|&a| hue_of_angle(a)).collect();
    let (w, h) = (out.strength.width(), out.strength.height());
    Image::from_fn(w, h, |x, y| {
        let s = out.strength.get(x, y);
        let v = if out.closing { s.invert() } else { s }.to_u8_value();
        let hue = hues
            .get(usize::from(out.angle_index.get(x, y)))
            .copied()
            .unwrap_or(0);
        hsv_to_rgb(hue, v)
    })
}

#[cfg(test)]
mod tests {
    use super::super::naive;
    use super::*;
    use crate::ops::orientation::geometry::segment_offsets;

    pub(crate) struct Lcg(pub u64);
    impl Lcg {
        pub fn next(&mut self) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            self.0 >> 33
        }
    }

    fn random_u8(rng: &mut Lcg, w: usize, h: usize, levels: u64) -> Image<u8> {
        Image::from_fn(w, h, |_, _| {
            (rng.next() % levels * (255 / (levels - 1).max(1))) as u8
        })
    }

    /// Every angle 0..180 by 1° and every L in 1, 3, …, 41 (angles sharing a line family are
    /// checked once: the result depends only on the family), several sizes including L longer
    /// than the image.
    #[test]
    fn every_angle_and_length_matches_brute_force() {
        let mut rng = Lcg(7);
        for (w, h) in [(1, 1), (1, 6), (6, 1), (5, 9), (13, 6), (17, 17)] {
            let img = random_u8(&mut rng, w, h, 4);
            let mut done = std::collections::HashSet::new();
            for len in (1..=41).step_by(2) {
                for deg in 0..180 {
                    let f = LineFamily::new(f64::from(deg), len);
                    if !done.insert(f) {
                        continue;
                    }
                    let fast = open_along_lines(img.view(), f);
                    let slow = naive::opening_along_lines(img.view(), f);
                    assert_eq!(fast, slow, "{w}x{h} angle {deg} L {len} {f:?}");
                }
            }
        }
    }

    #[test]
    fn main_angles_equal_the_2d_opening_by_the_segment() {
        let mut rng = Lcg(11);
        for (w, h) in [(9, 7), (16, 11), (3, 20)] {
            let img = random_u8(&mut rng, w, h, 5);
            for deg in [0.0, 45.0, 90.0, 135.0] {
                for len in [3u32, 5, 9, 15, 41] {
                    let p = LinearOpeningParams {
                        length: len,
                        angle: deg,
                        closing: false,
                    };
                    let fast = linear_opening(img.view(), &p).unwrap();
                    let twod = naive::opening_2d(img.view(), &segment_offsets(deg, len));
                    assert_eq!(fast, twod, "{w}x{h} {deg} {len}");
                }
            }
        }
    }

    #[test]
    fn edge_sizes_and_strides() {
        let p = LinearOpeningParams {
            length: 5,
            angle: 30.0,
            closing: false,
        };
        let empty = Image::<u8>::from_vec(0, 4, vec![]).unwrap();
        assert_eq!(linear_opening(empty.view(), &p).unwrap().height(), 4);
        let empty = Image::<u8>::from_vec(4, 0, vec![]).unwrap();
        assert_eq!(linear_opening(empty.view(), &p).unwrap().width(), 4);
        let one = Image::from_vec(1, 1, vec![7u8]).unwrap();
        assert_eq!(linear_opening(one.view(), &p).unwrap(), one);
        // Stride > width: padding must be ignored.
        let mut rng = Lcg(3);
        let packed = random_u8(&mut rng, 7, 5, 3);
        let mut data = Vec::new();
        for y in 0..5 {
            data.extend_from_slice(packed.row(y));
            data.extend_from_slice(&[255, 255, 255]);
        }
        let strided = Image::from_strided(7, 5, 10, data).unwrap();
        for deg in [0.0, 30.0, 90.0, 120.0] {
            let p = LinearOpeningParams {
                length: 3,
                angle: deg,
                closing: true,
            };
            assert_eq!(
                linear_opening(strided.view(), &p).unwrap(),
                linear_opening(packed.view(), &p).unwrap()
            );
        }
        // All equal stays equal; 16-bit extremes.
        let flat = Image::new(6, 4, u16::MAX);
        assert_eq!(linear_opening(flat.view(), &p).unwrap(), flat);
        let ext = Image::from_fn(6, 4, |x, y| if (x + y) % 2 == 0 { u16::MAX } else { 0 });
        let f = LineFamily::new(60.0, 3);
        assert_eq!(
            open_along_lines(ext.view(), f),
            naive::opening_along_lines(ext.view(), f)
        );
    }

    #[test]
    fn nan_is_rejected() {
        let img = Image::from_vec(2, 1, vec![0.5f32, f32::NAN]).unwrap();
        let err = linear_opening(img.view(), &LinearOpeningParams::default()).unwrap_err();
        assert!(err.to_string().contains("NaN"));
    }

    #[test]
    fn orientation_of_a_bar_and_the_spectrum() {
        // A 1-pixel bar of 25 pixels along a 30° line through the centre: the 30° opening keeps
        // it, the others remove it.
        let (w, h) = (41usize, 41usize);
        let fam = LineFamily::new(30.0, 15);
        let c = 20 - fam.phi(20);
        let mut img = Image::new(w, h, 10u8);
        for x in 8..=32 {
            img.set(x, (c + fam.phi(x as i64)) as usize, 200);
        }
        let p = OrientationParams {
            length: 15,
            angles: 12,
            ..Default::default()
        };
        let out = orientation(img.view(), &p).unwrap();
        assert_eq!(out.angles_deg[2], 30.0);
        assert_eq!(out.angle_index.get(20, 20), 2);
        assert_eq!(out.strength.get(20, 20), 200);
        assert_eq!(out.strength.get(0, 0), 10);
        assert_eq!(
            out.angle_index.get(0, 0),
            0,
            "ties go to the smallest index"
        );
        let k = (0..12)
            .max_by(|&a, &b| out.spectrum[a].total_cmp(&out.spectrum[b]).then(b.cmp(&a)))
            .unwrap();
        assert_eq!(k, 2);
        assert_eq!(out.summary()["dominant_angle_deg"], 30.0);
        let csv = out.spectrum_csv();
        assert!(csv.starts_with("angle_deg,sum\n0,"));
        let colour = out.colour();
        assert_eq!(colour.get(20, 20), hsv_to_rgb(hue_of_angle(30.0), 200));
        assert_eq!(out.angle_map_deg().get(20, 20), 30.0);
    }

    #[test]
    fn orientation_equals_openings_composed() {
        let mut rng = Lcg(5);
        let img = random_u8(&mut rng, 23, 14, 6);
        for closing in [false, true] {
            let p = OrientationParams {
                length: 7,
                angles: 10,
                closing,
                ..Default::default()
            };
            let out = orientation(img.view(), &p).unwrap();
            let per: Vec<Image<u8>> = p
                .angle_degrees()
                .iter()
                .map(|&a| {
                    let f = LineFamily::new(a, 7);
                    if closing {
                        naive::closing_along_lines(img.view(), f)
                    } else {
                        naive::opening_along_lines(img.view(), f)
                    }
                })
                .collect();
            for y in 0..14 {
                for x in 0..23 {
                    let vals: Vec<u8> = per.iter().map(|o| o.get(x, y)).collect();
                    let want = if closing {
                        *vals.iter().min().unwrap()
                    } else {
                        *vals.iter().max().unwrap()
                    };
                    let k = vals.iter().position(|&v| v == want).unwrap();
                    assert_eq!(out.strength.get(x, y), want);
                    assert_eq!(
                        usize::from(out.angle_index.get(x, y)),
                        k,
                        "({x},{y}) {vals:?}"
                    );
                }
            }
            for (k, o) in per.iter().enumerate() {
                let s: f64 = o.data().iter().map(|&v| f64::from(v)).sum();
                assert_eq!(out.spectrum[k], s);
            }
        }
    }
}

#[cfg(test)]
mod proptests {
    use proptest::prelude::*;

    use super::super::naive;
    use super::*;

    fn image_strategy(levels: u16) -> impl Strategy<Value = Image<u16>> {
        (1usize..=20, 1usize..=20).prop_flat_map(move |(w, h)| {
            proptest::collection::vec(0..levels, w * h).prop_map(move |v| {
                Image::from_vec(w, h, v.iter().map(|&x| x * (60000 / levels)).collect()).unwrap()
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn streaming_equals_brute_force(img in image_strategy(5), deg in 0u32..180, half in 0u32..=20) {
            let f = LineFamily::new(f64::from(deg), 2 * half + 1);
            prop_assert_eq!(open_along_lines(img.view(), f), naive::opening_along_lines(img.view(), f));
        }

        #[test]
        fn closing_equals_brute_force(img in image_strategy(4), deg in 0u32..180, half in 0u32..=20) {
            let f = LineFamily::new(f64::from(deg), 2 * half + 1);
            prop_assert_eq!(close_along_lines(img.view(), f), naive::closing_along_lines(img.view(), f));
        }

        #[test]
        fn u8_and_f32_equal_brute_force(img in image_strategy(7), deg in 0u32..180, half in 0u32..=12) {
            let f = LineFamily::new(f64::from(deg), 2 * half + 1);
            let g8 = img.map(|v| (v >> 8) as u8);
            prop_assert_eq!(open_along_lines(g8.view(), f), naive::opening_along_lines(g8.view(), f));
            let gf = img.map(|v| f32::from(v) / 60000.0 - 0.25);
            prop_assert_eq!(open_along_lines(gf.view(), f), naive::opening_along_lines(gf.view(), f));
        }

        #[test]
        fn opening_is_anti_extensive_increasing_idempotent(
            img in image_strategy(6), deg in 0u32..180, half in 0u32..=20, bump in proptest::collection::vec(0u16..3000, 400)
        ) {
            let f = LineFamily::new(f64::from(deg), 2 * half + 1);
            let o = open_along_lines(img.view(), f);
            let bigger = Image::from_fn(img.width(), img.height(), |x, y| {
                img.get(x, y).saturating_add(bump[(y * img.width() + x) % bump.len()])
            });
            let ob = open_along_lines(bigger.view(), f);
            for y in 0..img.height() {
                for x in 0..img.width() {
                    prop_assert!(o.get(x, y) <= img.get(x, y), "anti-extensive");
                    prop_assert!(o.get(x, y) <= ob.get(x, y), "increasing");
                }
            }
            prop_assert_eq!(open_along_lines(o.view(), f), o, "idempotent");
            let c = close_along_lines(img.view(), f);
            prop_assert!(c.data().iter().zip(img.data()).all(|(a, b)| a >= b), "closing extensive");
            prop_assert_eq!(close_along_lines(c.view(), f), c, "closing idempotent");
        }

        #[test]
        fn mirroring_across_the_minor_axis_mirrors_the_angle(img in image_strategy(5), deg in 0u32..180, half in 1u32..=15) {
            // Flipping the minor axis (rows for a column-major family, columns for a row-major
            // one) maps each line of slope q onto a line of slope −q: α ↦ 180° − α, exactly.
            let (w, h) = (img.width(), img.height());
            let f = LineFamily::new(f64::from(deg), 2 * half + 1);
            let flip = |i: &Image<u16>| {
                if f.x_major { Image::from_fn(w, h, |x, y| i.get(x, h - 1 - y)) } else { Image::from_fn(w, h, |x, y| i.get(w - 1 - x, y)) }
            };
            let mirrored = LineFamily::new(180.0 - f64::from(deg), 2 * half + 1);
            prop_assert_eq!(mirrored, LineFamily { q: -f.q, ..f });
            let a = open_along_lines(flip(&img).view(), mirrored);
            let b = flip(&open_along_lines(img.view(), f));
            prop_assert_eq!(a, b);
        }
    }
}
