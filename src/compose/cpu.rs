//! The CPU twin of the compose kernel: the same picture, byte for byte, composed on the host.
//!
//! Rows are composed in parallel (rayon), each into a row buffer of RGB pixels that every
//! layer updates in turn over whole row slices (no per-pixel `get`/`set`), and then written out
//! in the picture's format (I420: two rows at a time, for the 2x2 chroma blocks). Two things
//! are prepared before the rows: each segment layer's fill table (mean colours summed over the
//! frame in bands of rows, one table a band), and the shape primitives' winners: every pixel a
//! primitive covers, sorted, keeping the last primitive at each pixel.

use rayon::prelude::*;

use super::layer::{HostBase, HostLayers, HostRaster, Segments};
use super::pixel::{self, blend};
use super::shapes::{self, Primitive};
use super::style::{Blend, ComposeStyle, RESIDUE_COLOUR};
use super::{ComposeError, Picture, PictureFormat};
use crate::image::Image;
use crate::ops::segmentation::OverlayMode;
use crate::ops::segmentation::overlay::{label_colour, segment_sums};

/// Composes `layers` with `style` into a picture in `format` (see the module docs of
/// [`crate::compose`] for the drawing order and the arithmetic).
pub fn compose_cpu(
    layers: &HostLayers,
    style: &ComposeStyle,
    format: PictureFormat,
) -> Result<Picture, ComposeError> {
    let (width, height) = layers.base.size();
    let rasters = plan_rasters(layers, style, width, height)?;
    let (pw, ph) = format.picture_size(width, height);
    let prims = shapes::primitives(&layers.shapes, style);
    let plan = Plan {
        base: &layers.base,
        base_alpha: u32::from(style.base_alpha()),
        rasters,
        marks: Marks::new(&prims, pw, ph),
        prims,
        width,
        height,
    };
    let mut data = vec![0u8; format.byte_len(pw, ph)];
    if pw > 0 && ph > 0 {
        let rows = || Rows::new(pw);
        match format {
            PictureFormat::Rgb => {
                data.par_chunks_mut(pw * 3)
                    .enumerate()
                    .for_each_init(rows, |r, (y, out)| {
                        plan.compose_row(y, &mut r.row, &mut r.colours);
                        out.copy_from_slice(r.row.as_flattened());
                    });
            }
            PictureFormat::Rgba => {
                data.par_chunks_mut(pw * 4)
                    .enumerate()
                    .for_each_init(rows, |r, (y, out)| {
                        plan.compose_row(y, &mut r.row, &mut r.colours);
                        for (o, p) in out.as_chunks_mut::<4>().0.iter_mut().zip(&r.row) {
                            o.copy_from_slice(&[p[0], p[1], p[2], 255]);
                        }
                    });
            }
            PictureFormat::I420 => {
                let (luma, chroma) = data.split_at_mut(pw * ph);
                let (u, v) = chroma.split_at_mut((pw / 2) * (ph / 2));
                let pairs = luma
                    .par_chunks_mut(2 * pw)
                    .zip(u.par_chunks_mut(pw / 2))
                    .zip(v.par_chunks_mut(pw / 2));
                pairs
                    .enumerate()
                    .for_each_init(rows, |r, (j, ((y_rows, u_row), v_row))| {
                        plan.compose_row(2 * j, &mut r.row, &mut r.colours);
                        plan.compose_row(2 * j + 1, &mut r.second, &mut r.colours);
                        let (top, bottom) = (&r.row, &r.second);
                        for (o, &p) in y_rows.iter_mut().zip(top.iter().chain(bottom.iter())) {
                            *o = pixel::luma(p);
                        }
                        let blocks = top
                            .as_chunks::<2>()
                            .0
                            .iter()
                            .zip(bottom.as_chunks::<2>().0.iter());
                        for ((uo, vo), (t, b)) in u_row.iter_mut().zip(v_row.iter_mut()).zip(blocks)
                        {
                            let sum = |c: usize| {
                                i32::from(t[0][c])
                                    + i32::from(t[1][c])
                                    + i32::from(b[0][c])
                                    + i32::from(b[1][c])
                            };
                            (*uo, *vo) = pixel::chroma([sum(0), sum(1), sum(2)]);
                        }
                    });
            }
        }
    }
    Ok(Picture {
        format,
        width: pw,
        height: ph,
        data,
    })
}

/// Everything a row needs, prepared once per picture.
struct Plan<'a> {
    base: &'a HostBase,
    base_alpha: u32,
    rasters: Vec<PlannedRaster<'a>>,
    marks: Marks,
    prims: Vec<Primitive>,
    width: usize,
    height: usize,
}

/// A visible raster layer with its quantised blend.
enum PlannedRaster<'a> {
    Residue {
        img: &'a Image<u8>,
        peak: u32,
        additive: bool,
    },
    Colour {
        img: &'a Image<[u8; 3]>,
        blend: Blend,
    },
    Segments(PlannedSegments<'a>),
}

/// A segment layer ready to draw: the label image's column of each frame column, the fill of
/// each label below the count.
struct PlannedSegments<'a> {
    labels: &'a Image<u32>,
    columns: Vec<usize>,
    factor: usize,
    fill: Vec<[u8; 3]>,
    boundary: Option<[u8; 3]>,
    blend: Blend,
}

fn plan_rasters<'a>(
    layers: &'a HostLayers,
    style: &ComposeStyle,
    width: usize,
    height: usize,
) -> Result<Vec<PlannedRaster<'a>>, ComposeError> {
    let mut out = Vec::with_capacity(layers.rasters.len());
    for layer in &layers.rasters {
        let frame_sized = |w: usize, h: usize| {
            if (w, h) == (width, height) {
                Ok(())
            } else {
                Err(ComposeError::Layer {
                    layer: layer.name.to_owned(),
                    what: format!("picture {w}x{h} over a {width}x{height} frame"),
                })
            }
        };
        match &layer.raster {
            HostRaster::Residue(img) => frame_sized(img.width(), img.height())?,
            HostRaster::Colour(img) => frame_sized(img.width(), img.height())?,
            HostRaster::Segments { segments, .. } => {
                let (lw, lh) = (segments.labels.width(), segments.labels.height());
                if (lw, lh) != (segments.label_width, segments.label_height) {
                    return Err(ComposeError::Layer {
                        layer: layer.name.to_owned(),
                        what: format!(
                            "label image is {lw}x{lh}, the layer says {}x{}",
                            segments.label_width, segments.label_height
                        ),
                    });
                }
                segments.check(layer.name, lw * lh, width, height)?;
            }
        }
        let Some(blend) = style.blend(layer.name, layer.raster.kind()) else {
            continue;
        };
        out.push(match &layer.raster {
            HostRaster::Residue(img) => PlannedRaster::Residue {
                img,
                peak: u32::from(blend.alpha),
                additive: blend.additive,
            },
            HostRaster::Colour(img) => PlannedRaster::Colour { img, blend },
            HostRaster::Segments { segments, count } => PlannedRaster::Segments(plan_segments(
                &layers.base,
                segments,
                *count,
                blend,
                width,
                height,
            )),
        });
    }
    Ok(out)
}

fn plan_segments<'a>(
    base: &HostBase,
    seg: &'a Segments<std::sync::Arc<Image<u32>>>,
    count: usize,
    blend: Blend,
    width: usize,
    height: usize,
) -> PlannedSegments<'a> {
    let factor = seg.effective_factor(width, height);
    let columns: Vec<usize> = (0..width)
        .map(|x| (x / factor).min(seg.label_width.saturating_sub(1)))
        .collect();
    let labels = &*seg.labels;
    let count = count.min(seg.label_width * seg.label_height);
    let fill = match seg.fill {
        OverlayMode::Random => (0..count as u32).map(label_colour).collect(),
        OverlayMode::Mean => {
            let row_of =
                |y: usize| labels.row((y / factor).min(seg.label_height.saturating_sub(1)));
            let sums = segment_sums(count, height, base.size().0 * height, |sums, y| {
                let ids = row_of(y);
                match base {
                    HostBase::Rgb(img) => add_runs(sums, ids, &columns, img.row(y), |&p| p),
                    HostBase::Gray(img) => add_runs(sums, ids, &columns, img.row(y), |&v| [v; 3]),
                }
            });
            sums.iter()
                .map(|s| {
                    let n = s[3].max(1);
                    [0, 1, 2].map(|k| ((s[k] + n / 2) / n) as u8)
                })
                .collect()
        }
    };
    PlannedSegments {
        labels,
        columns,
        factor,
        fill,
        boundary: seg.boundary,
        blend,
    }
}

/// Adds one frame row's pixels into the sums of their labels (`ids[columns[x]]`), one table
/// update per run of equal labels; labels without a slot are left out.
fn add_runs<P>(
    sums: &mut [[u64; 4]],
    ids: &[u32],
    columns: &[usize],
    row: &[P],
    to_rgb: impl Fn(&P) -> [u8; 3],
) {
    let mut flush = |label: u32, run: [u64; 4]| {
        if let Some(s) = sums.get_mut(label as usize) {
            for k in 0..4 {
                s[k] += run[k];
            }
        }
    };
    let mut label = u32::MAX;
    let mut run = [0u64; 4];
    for (p, &c) in row.iter().zip(columns) {
        let l = ids[c];
        if l != label {
            flush(label, run);
            (label, run) = (l, [0; 4]);
        }
        let [r, g, b] = to_rgb(p);
        run[0] += u64::from(r);
        run[1] += u64::from(g);
        run[2] += u64::from(b);
        run[3] += 1;
    }
    flush(label, run);
}

/// The winning primitive of every pixel some primitive covers: `(pixel index y * width + x,
/// primitive index)`, sorted by pixel, the last primitive kept.
struct Marks {
    width: usize,
    marks: Vec<(u64, u32)>,
}

impl Marks {
    fn new(prims: &[Primitive], width: usize, height: usize) -> Self {
        let mut marks = Vec::new();
        for (k, p) in prims.iter().enumerate() {
            p.for_each_pixel(width, height, |x, y| {
                marks.push(((y * width + x) as u64, k as u32))
            });
        }
        marks.sort_unstable_by_key(|&(i, k)| (i, std::cmp::Reverse(k)));
        marks.dedup_by_key(|m| m.0);
        Self { width, marks }
    }

    /// The marks of row `y`.
    fn row(&self, y: usize) -> &[(u64, u32)] {
        let start = (y * self.width) as u64;
        let a = self.marks.partition_point(|m| m.0 < start);
        let b = self
            .marks
            .partition_point(|m| m.0 < start + self.width as u64);
        &self.marks[a..b]
    }
}

/// A rayon task's rows: the picture row being composed (RGB pixels), a second one for I420's
/// row pairs, and the colours a segment layer blends over a row.
#[derive(Default)]
struct Rows {
    row: Vec<[u8; 3]>,
    second: Vec<[u8; 3]>,
    colours: Vec<[u8; 3]>,
}

impl Rows {
    fn new(width: usize) -> Self {
        Self {
            row: vec![[0; 3]; width],
            second: vec![[0; 3]; width],
            colours: vec![[0; 3]; width],
        }
    }
}

/// Blends `src` over `dst` sample by sample with one alpha (a loop the compiler vectorises).
fn blend_samples(dst: &mut [u8], src: &[u8], alpha: u32, additive: bool) {
    if additive {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = pixel::add(*d, s, alpha);
        }
    } else {
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = pixel::mix(*d, s, alpha);
        }
    }
}

impl Plan<'_> {
    /// Composes picture row `y` into `row` (the picture's width); `colours` is scratch of the
    /// same width.
    fn compose_row(&self, y: usize, row: &mut [[u8; 3]], colours: &mut [[u8; 3]]) {
        let a = self.base_alpha;
        match self.base {
            HostBase::Rgb(img) if a == 255 => row.copy_from_slice(&img.row(y)[..row.len()]),
            HostBase::Rgb(img) => {
                for (d, &s) in row
                    .as_flattened_mut()
                    .iter_mut()
                    .zip(img.row(y).as_flattened())
                {
                    *d = pixel::mix(0, s, a);
                }
            }
            HostBase::Gray(img) => {
                for (d, &v) in row.iter_mut().zip(img.row(y)) {
                    *d = [pixel::mix(0, v, a); 3];
                }
            }
        }
        for r in &self.rasters {
            match r {
                PlannedRaster::Residue {
                    img,
                    peak,
                    additive,
                } => {
                    for (d, &v) in row.iter_mut().zip(img.row(y)) {
                        if v != 0 {
                            *d = blend(
                                *d,
                                RESIDUE_COLOUR,
                                pixel::residue_alpha(v, *peak),
                                *additive,
                            );
                        }
                    }
                }
                PlannedRaster::Colour { img, blend: b } => {
                    let src = img.row(y).as_flattened();
                    blend_samples(row.as_flattened_mut(), src, u32::from(b.alpha), b.additive);
                }
                PlannedRaster::Segments(s) => {
                    s.colour_row(y, colours, self.width, self.height);
                    let b = s.blend;
                    blend_samples(
                        row.as_flattened_mut(),
                        colours.as_flattened(),
                        u32::from(b.alpha),
                        b.additive,
                    );
                }
            }
        }
        for &(i, k) in self.marks.row(y) {
            let p = &self.prims[k as usize];
            let d = &mut row[(i - (y * self.marks.width) as u64) as usize];
            *d = blend(*d, p.rgb(), p.alpha(), p.additive());
        }
    }
}

impl PlannedSegments<'_> {
    /// The colour of each pixel of frame row `y` (its segment's fill, or the boundary colour)
    /// into `out`.
    fn colour_row(&self, y: usize, out: &mut [[u8; 3]], width: usize, height: usize) {
        let last_row = self.labels.height().saturating_sub(1);
        let label_row = |y: usize| (y / self.factor).min(last_row);
        let here = self.labels.row(label_row(y));
        // The row below differs only where it reads another label row (every f-th row).
        let below = (y + 1 < height && label_row(y + 1) != label_row(y))
            .then(|| self.labels.row(label_row(y + 1)));
        let fill = |l: u32| self.fill.get(l as usize).copied().unwrap_or([0; 3]);
        let columns = &self.columns[..out.len()];
        let Some(b) = self.boundary else {
            for (o, &c) in out.iter_mut().zip(columns) {
                *o = fill(here[c]);
            }
            return;
        };
        for (x, (o, &c)) in out.iter_mut().zip(columns).enumerate() {
            let l = here[c];
            // The pixel to the right reads another label only at a new label column.
            let right = x + 1 < width && self.columns[x + 1] != c && here[self.columns[x + 1]] != l;
            let down = below.is_some_and(|r| r[c] != l);
            *o = if right || down { b } else { fill(l) };
        }
    }
}
