//! Shapes as drawing primitives. Boxes, their numeric labels and polylines
//! ([`Shape`]) are expanded on the host into `Primitive`s — line segments
//! and filled rectangles in integer pixel coordinates — which the CPU twin rasterises directly
//! and the GPU path uploads per frame (`compose_shapes` in `kernels/compose.cu`).
//!
//! - A box is a 2-pixel outline: the rectangle through its corners `(left, top)` and
//!   `(left + width - 1, top + height - 1)` (rounded), and the same one pixel further in. Its
//!   label is drawn with a 3x5 digit font at scale 2, 12 pixels above the box's top-left corner
//!   (truncated coordinates), 8 pixels a character; each glyph row's run of set bits is one
//!   filled rectangle. Characters other than digits leave a gap.
//! - A polyline is a line segment between each pair of consecutive (rounded) points.
//! - The pixels of a line from `(x0, y0)` to `(x1, y1)` have a closed form, so every pixel is
//!   computed independently and identically on both sides: with `n = max(|dx|, |dy|)` steps,
//!   pixel `i` in `0..=n` is `(x0 + round(i dx / n), y0 + round(i dy / n))`, rounding halves up
//!   (`floor((2 i d + n) / 2n)`).
//! - Coordinates are clamped to `±COORD_LIMIT`, which bounds a line's pixel count.
//!
//! At a pixel covered by several primitives the last one wins and is blended once, with its
//! colour's alpha scaled by its layer's opacity.

use cudarc::driver::{DeviceRepr, ValidAsZeroBits};

use super::style::{Blend, ComposeStyle, LayerKind};

/// A vector overlay element in image coordinates (pixels, origin top-left).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub enum Shape {
    /// An axis-aligned box with an optional label (e.g. a track id).
    Rect {
        /// Left edge.
        left: f32,
        /// Top edge.
        top: f32,
        /// Width.
        width: f32,
        /// Height.
        height: f32,
        /// RGBA.
        color: [u8; 4],
        /// Text drawn at the top-left corner.
        label: Option<String>,
    },
    /// A polyline (e.g. a track trail).
    Polyline {
        /// Points (x, y).
        points: Vec<[f32; 2]>,
        /// RGBA.
        color: [u8; 4],
    },
}

/// Coordinates are clamped to `-COORD_LIMIT..=COORD_LIMIT`: a line has at most `2 * COORD_LIMIT
/// + 1` pixels, whatever the shape's numbers.
pub(crate) const COORD_LIMIT: i32 = 1 << 16;

/// Flag of a filled rectangle (else a line segment).
pub(crate) const PRIM_RECT: u32 = 1;
/// Flag of an additive primitive (else mixed).
pub(crate) const PRIM_ADDITIVE: u32 = 2;

/// Font scale of box labels (pixels per glyph cell).
const LABEL_SCALE: i32 = 2;
/// Distance from the box's top to the label's top.
const LABEL_RISE: i32 = 12;
/// Horizontal advance per character.
const LABEL_ADVANCE: i32 = 4 * LABEL_SCALE;

/// 3x5 glyphs for 0-9, rows top to bottom, 3 bits a row (bit 2 the left column).
const DIGITS: [[u8; 5]; 10] = [
    [7, 5, 5, 5, 7],
    [2, 6, 2, 2, 7],
    [7, 1, 7, 4, 7],
    [7, 1, 7, 1, 7],
    [5, 5, 7, 1, 1],
    [7, 4, 7, 1, 7],
    [7, 4, 7, 5, 7],
    [7, 1, 2, 2, 2],
    [7, 5, 7, 5, 7],
    [7, 5, 7, 1, 7],
];

/// One drawing primitive. Keep in sync with `Primitive` in `kernels/compose.cu`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Primitive {
    /// First corner / end point.
    pub x0: i32,
    /// First corner / end point.
    pub y0: i32,
    /// Opposite corner (rectangles: `x0 <= x1`, inclusive) / other end point.
    pub x1: i32,
    /// Opposite corner (rectangles: `y0 <= y1`, inclusive) / other end point.
    pub y1: i32,
    /// `r | g << 8 | b << 16 | alpha << 24`, the alpha already scaled by the layer's opacity.
    pub colour: u32,
    /// [`PRIM_RECT`], [`PRIM_ADDITIVE`].
    pub flags: u32,
}

const _: () = assert!(std::mem::size_of::<Primitive>() == 24);

// SAFETY: plain-old-data, `#[repr(C)]`, the layout asserted above and in compose.cu.
unsafe impl DeviceRepr for Primitive {}
// SAFETY: all-zero bytes are a valid primitive (integers only).
unsafe impl ValidAsZeroBits for Primitive {}

impl Primitive {
    /// The colour's RGB.
    #[must_use]
    pub fn rgb(&self) -> [u8; 3] {
        [
            self.colour as u8,
            (self.colour >> 8) as u8,
            (self.colour >> 16) as u8,
        ]
    }

    /// The alpha it is blended with.
    #[must_use]
    pub(crate) fn alpha(&self) -> u32 {
        self.colour >> 24
    }

    /// Whether it is added rather than mixed.
    #[must_use]
    pub fn additive(&self) -> bool {
        self.flags & PRIM_ADDITIVE != 0
    }

    /// Steps of a line (`max(|dx|, |dy|)`); a line has `steps + 1` pixels.
    #[must_use]
    pub fn steps(&self) -> i64 {
        let (dx, dy) = (
            i64::from(self.x1) - i64::from(self.x0),
            i64::from(self.y1) - i64::from(self.y0),
        );
        dx.abs().max(dy.abs())
    }

    /// Pixel `i` (`0..=steps`) of a line.
    #[must_use]
    pub(crate) fn line_pixel(&self, i: i64) -> (i64, i64) {
        let n = self.steps();
        if n == 0 {
            return (i64::from(self.x0), i64::from(self.y0));
        }
        let along = |a: i32, b: i32| {
            i64::from(a) + (2 * i * (i64::from(b) - i64::from(a)) + n).div_euclid(2 * n)
        };
        (along(self.x0, self.x1), along(self.y0, self.y1))
    }

    /// Calls `f(x, y)` for every pixel of the primitive inside `0..width` x `0..height`, each
    /// once for rectangles (a line may name a pixel twice only when it has one step).
    pub(crate) fn for_each_pixel(
        &self,
        width: usize,
        height: usize,
        mut f: impl FnMut(usize, usize),
    ) {
        let (w, h) = (width as i64, height as i64);
        if self.flags & PRIM_RECT != 0 {
            let (xa, xb) = (i64::from(self.x0).max(0), i64::from(self.x1).min(w - 1));
            let (ya, yb) = (i64::from(self.y0).max(0), i64::from(self.y1).min(h - 1));
            for y in ya..=yb {
                for x in xa..=xb {
                    f(x as usize, y as usize);
                }
            }
        } else {
            for i in 0..=self.steps() {
                let (x, y) = self.line_pixel(i);
                if (0..w).contains(&x) && (0..h).contains(&y) {
                    f(x as usize, y as usize);
                }
            }
        }
    }
}

/// A coordinate rounded (halves away from zero) and clamped; NaN is 0.
fn rounded(v: f32) -> i32 {
    clamp_coord(v.round())
}

/// A coordinate truncated towards zero and clamped; NaN is 0.
fn truncated(v: f32) -> i32 {
    clamp_coord(v.trunc())
}

fn clamp_coord(v: f32) -> i32 {
    let limit = COORD_LIMIT as f32;
    if v.is_nan() {
        0
    } else {
        v.clamp(-limit, limit) as i32
    }
}

/// Appends the primitives of `shapes` drawn with `blend`.
fn expand(shapes: &[Shape], blend: Blend, out: &mut Vec<Primitive>) {
    let additive = if blend.additive { PRIM_ADDITIVE } else { 0 };
    let colour = |c: [u8; 4]| {
        let alpha = (u32::from(c[3]) * u32::from(blend.alpha) + 127) / 255;
        u32::from(c[0]) | u32::from(c[1]) << 8 | u32::from(c[2]) << 16 | alpha << 24
    };
    let line = |x0: i32, y0: i32, x1: i32, y1: i32, colour: u32| Primitive {
        x0,
        y0,
        x1,
        y1,
        colour,
        flags: additive,
    };
    for s in shapes {
        match s {
            Shape::Rect {
                left,
                top,
                width,
                height,
                color,
                label,
            } => {
                let c = colour(*color);
                for inset in [0.0f32, 1.0] {
                    let (l, t) = (rounded(left + inset), rounded(top + inset));
                    let (r, b) = (
                        rounded(left + width - 1.0 - inset),
                        rounded(top + height - 1.0 - inset),
                    );
                    out.extend([
                        line(l, t, r, t, c),
                        line(r, t, r, b, c),
                        line(r, b, l, b, c),
                        line(l, b, l, t, c),
                    ]);
                }
                if let Some(label) = label {
                    label_rects(
                        label,
                        truncated(*left),
                        truncated(*top) - LABEL_RISE,
                        |[x0, y0, x1, y1]| {
                            out.push(Primitive {
                                x0,
                                y0,
                                x1,
                                y1,
                                colour: c,
                                flags: additive | PRIM_RECT,
                            });
                        },
                    );
                }
            }
            Shape::Polyline { points, color } => {
                let c = colour(*color);
                for w in points.windows(2) {
                    out.push(line(
                        rounded(w[0][0]),
                        rounded(w[0][1]),
                        rounded(w[1][0]),
                        rounded(w[1][1]),
                        c,
                    ));
                }
            }
        }
    }
}

/// Calls `rect([x0, y0, x1, y1])` (inclusive corners) for every run of set bits of every glyph
/// row of `text` drawn with its top-left corner at `(x, y)`.
fn label_rects(text: &str, x: i32, y: i32, mut rect: impl FnMut([i32; 4])) {
    let mut cx = x;
    for ch in text.chars() {
        if let Some(glyph) = ch.to_digit(10).and_then(|d| DIGITS.get(d as usize)) {
            for (row, &bits) in glyph.iter().enumerate() {
                let top = y + row as i32 * LABEL_SCALE;
                let mut col = 0;
                while col < 3 {
                    if bits & (4 >> col) == 0 {
                        col += 1;
                        continue;
                    }
                    let start = col;
                    while col < 3 && bits & (4 >> col) != 0 {
                        col += 1;
                    }
                    let left = cx + start * LABEL_SCALE;
                    rect([left, top, cx + col * LABEL_SCALE - 1, top + LABEL_SCALE - 1]);
                }
            }
        }
        cx = cx.saturating_add(LABEL_ADVANCE);
    }
}

/// The primitives of every visible shape layer, in drawing order.
#[must_use]
pub(crate) fn primitives(layers: &[super::ShapeLayer], style: &ComposeStyle) -> Vec<Primitive> {
    let mut out = Vec::new();
    for layer in layers {
        if let Some(blend) = style.blend(layer.name, LayerKind::Shapes) {
            expand(&layer.shapes, blend, &mut out);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::sync::Arc;

    use super::*;
    use crate::compose::{LayerStyle, ShapeLayer};

    fn pixels(p: &[Primitive], w: usize, h: usize) -> BTreeSet<(usize, usize)> {
        let mut s = BTreeSet::new();
        for q in p {
            q.for_each_pixel(w, h, |x, y| {
                s.insert((x, y));
            });
        }
        s
    }

    fn layer(shapes: Vec<Shape>) -> Vec<ShapeLayer> {
        vec![ShapeLayer {
            name: "boxes",
            shapes: Arc::new(shapes),
        }]
    }

    #[test]
    fn a_box_is_a_two_pixel_outline() {
        let rect = Shape::Rect {
            left: 2.0,
            top: 3.0,
            width: 6.0,
            height: 5.0,
            color: [1, 2, 3, 255],
            label: None,
        };
        let p = primitives(&layer(vec![rect]), &ComposeStyle::default());
        assert_eq!(p.len(), 8);
        let got = pixels(&p, 20, 20);
        // Outer ring x 2..=7, y 3..=7; inner ring x 3..=6, y 4..=6; nothing inside.
        let want: BTreeSet<(usize, usize)> = (0..20)
            .flat_map(|y| (0..20).map(move |x| (x, y)))
            .filter(|&(x, y)| {
                (2..=7).contains(&x) && (3..=7).contains(&y) && !((4..=5).contains(&x) && y == 5)
            })
            .collect();
        assert_eq!(got, want);
        assert!(
            p.iter()
                .all(|q| q.rgb() == [1, 2, 3] && q.alpha() == 255 && !q.additive())
        );
    }

    #[test]
    fn labels_are_the_digit_font_at_scale_two() {
        let rect = Shape::Rect {
            left: 4.7,
            top: 20.2,
            width: 3.0,
            height: 3.0,
            color: [9, 9, 9, 128],
            label: Some("71".into()),
        };
        let style = ComposeStyle::default().with("boxes", LayerStyle::added(0.5));
        let p = primitives(&layer(vec![rect]), &style);
        let text: Vec<Primitive> = p
            .iter()
            .copied()
            .filter(|q| q.flags & PRIM_RECT != 0)
            .collect();
        assert!(
            text.iter()
                .all(|q| q.additive() && q.alpha() == (128 * 128 + 127) / 255)
        );
        let got = pixels(&text, 40, 40);
        // Glyph cells of "7" at x = 4 (truncated 4.7), y = 20 - 12 = 8; "1" 8 pixels further.
        let mut want = BTreeSet::new();
        for (d, x0) in [(7usize, 4usize), (1, 12)] {
            for (row, bits) in DIGITS[d].iter().enumerate() {
                for col in 0..3 {
                    if bits & (4 >> col) != 0 {
                        for dy in 0..2 {
                            for dx in 0..2 {
                                want.insert((x0 + col * 2 + dx, 8 + row * 2 + dy));
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(got, want);
        // Runs merge: the top row of 7 is one 6x2 rectangle.
        assert!(text.contains(&Primitive {
            x0: 4,
            y0: 8,
            x1: 9,
            y1: 9,
            colour: text[0].colour,
            flags: PRIM_RECT | PRIM_ADDITIVE
        }));
    }

    #[test]
    fn lines_have_the_closed_form() {
        let l = Primitive {
            x0: 0,
            y0: 0,
            x1: 4,
            y1: 2,
            colour: 0,
            flags: 0,
        };
        let got: Vec<(i64, i64)> = (0..=l.steps()).map(|i| l.line_pixel(i)).collect();
        // i*2/4 = 0, .5, 1, 1.5, 2 rounds halves up: 0, 1, 1, 2, 2.
        assert_eq!(got, vec![(0, 0), (1, 1), (2, 1), (3, 2), (4, 2)]);
        let back = Primitive {
            x0: 4,
            y0: 2,
            x1: 0,
            y1: 0,
            ..l
        };
        let got: Vec<(i64, i64)> = (0..=back.steps()).map(|i| back.line_pixel(i)).collect();
        // Negative steps floor: 2 - 0.5 -> 2, 2 - 1.5 -> 1.
        assert_eq!(got, vec![(4, 2), (3, 2), (2, 1), (1, 1), (0, 0)]);
        let dot = Primitive {
            x0: 3,
            y0: -1,
            x1: 3,
            y1: -1,
            ..l
        };
        assert_eq!((dot.steps(), dot.line_pixel(0)), (0, (3, -1)));
        // Every pixel of a line is 8-connected to the next.
        let long = Primitive {
            x0: -7,
            y0: 13,
            x1: 29,
            y1: -2,
            ..l
        };
        for i in 0..long.steps() {
            let (a, b) = (long.line_pixel(i), long.line_pixel(i + 1));
            assert!((a.0 - b.0).abs() <= 1 && (a.1 - b.1).abs() <= 1 && a != b);
        }
        assert_eq!(
            (long.line_pixel(0), long.line_pixel(long.steps())),
            ((-7, 13), (29, -2))
        );
    }

    #[test]
    fn polylines_hidden_layers_and_wild_coordinates() {
        let poly = Shape::Polyline {
            points: vec![[0.4, 0.6], [3.5, 0.6], [f32::NAN, f32::INFINITY]],
            color: [5, 6, 7, 255],
        };
        let p = primitives(&layer(vec![poly.clone()]), &ComposeStyle::default());
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].x0, p[0].y0, p[0].x1, p[0].y1), (0, 1, 4, 1));
        assert_eq!((p[1].x1, p[1].y1), (0, COORD_LIMIT));
        assert!(p[1].steps() <= 2 * i64::from(COORD_LIMIT));
        let hidden = ComposeStyle::default().with("boxes", LayerStyle::HIDDEN);
        assert!(primitives(&layer(vec![poly]), &hidden).is_empty());
    }
}
