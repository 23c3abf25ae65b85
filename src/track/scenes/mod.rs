//! Synthetic scenes with exact ground truth, for measuring the tracker: bright objects
//! (ellipses of their own grey level) move over a dark, noisy background, cross and merge into
//! one component, travel glued together, hide behind occluders, bounce off the borders, enter
//! and leave, among noise specks and short-lived clutter blobs.
//!
//! A [`Scene`] is a list of [`SceneObject`]s, each with its position at every frame
//! (`None` = not in the scene), plus [`Occluder`]s and [`Noise`]. [`Scene::render`] draws one
//! frame into a grey image and returns the frame's ground truth: for every object whose visible
//! pixels are at least `VISIBLE_FRACTION` of its whole ellipse, the bounding box of those
//! visible pixels (objects drawn later cover earlier ones; occluders cover every object; the
//! frame border clips). Occluders and the background stay below [`FOREGROUND_THRESHOLD`], the
//! objects, specks and clutter above it, so `cca.source = "frame"` with that fixed threshold
//! finds exactly what a perfect detector would, and nothing else.
//!
//! [`catalogue`] holds the scenes: the set the tracker's defaults were chosen on and a held-out
//! set generated with other seeds and parameters. `examples/track_scenes.rs` renders them as
//! videos with MOT ground truth for `scripts/bench_trackers.py`.

pub mod catalogue;
pub mod random;
#[cfg(test)]
mod tests;

use crate::image::Image;

/// Binarization level the scenes are drawn for (`cca.threshold`, bright polarity).
pub const FOREGROUND_THRESHOLD: u8 = 30;

/// Share of an object's pixels that must be visible for it to be in the ground truth.
pub(crate) const VISIBLE_FRACTION: f64 = 0.25;

/// Deterministic pseudo-random numbers (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform in `[lo, hi)`.
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }

    /// Uniform integer in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// Approximately standard normal (sum of four uniforms, rescaled).
    pub(crate) fn normal(&mut self) -> f64 {
        ((0..4).map(|_| self.unit()).sum::<f64>() - 2.0) * 3.0f64.sqrt()
    }
}

/// One object of a scene.
#[derive(Clone, Debug)]
pub struct SceneObject {
    /// Ground-truth id (1, 2, ...).
    pub id: u64,
    /// Semi-axes `[rx, ry]` of the ellipse, pixels.
    pub radii: [f64; 2],
    /// Grey level (above [`FOREGROUND_THRESHOLD`]).
    pub grey: u8,
    /// Centre at each frame; `None` where the object is not in the scene.
    pub path: Vec<Option<[f64; 2]>>,
}

/// A rectangle drawn over every object in a grey level below the threshold: objects behind it
/// are hidden.
#[derive(Clone, Copy, Debug)]
pub struct Occluder {
    /// `[left, top, right, bottom]`, pixels, inclusive.
    pub rect: [usize; 4],
    /// Grey level (below [`FOREGROUND_THRESHOLD`]).
    pub grey: u8,
}

/// Foreground that is no object.
#[derive(Clone, Copy, Debug, Default)]
pub struct Noise {
    /// Amplitude of the uniform pixel noise on background and objects (grey levels).
    pub pixel: u8,
    /// Bright specks of 1-3 pixels a frame (below any sensible `min_area`).
    pub specks: usize,
    /// Clutter blobs (discs of radius 3-4, about 30-50 pixels) a second, each lasting 1-2 frames.
    pub clutter_per_second: f64,
}

/// A scene: size, frame rate, objects, occluders, noise.
#[derive(Clone, Debug)]
pub struct Scene {
    /// Name (a file-name-safe word).
    pub name: String,
    /// Frame width, pixels (even, for H.264).
    pub width: usize,
    /// Frame height, pixels (even).
    pub height: usize,
    /// Frames per second.
    pub fps: u32,
    /// Number of frames.
    pub frames: usize,
    /// Background grey level.
    pub background: u8,
    /// Objects, drawn in this order (later ones cover earlier ones).
    pub objects: Vec<SceneObject>,
    /// Occluders, drawn over the objects.
    pub occluders: Vec<Occluder>,
    /// Noise.
    pub noise: Noise,
    /// Seed of the noise.
    pub seed: u64,
}

/// One object of a frame's ground truth.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TruthBox {
    /// Object id.
    pub id: u64,
    /// Visible pixels' box `[left, top, width, height]`.
    pub bbox: [f64; 4],
    /// Visible pixels over the whole ellipse's pixels.
    pub visibility: f64,
}

/// Pixels of the ellipse of `radii` centred at `c`, as `(x, y)` in the plane (may lie outside
/// the frame).
fn ellipse_pixels(c: [f64; 2], radii: [f64; 2]) -> impl Iterator<Item = (i64, i64)> {
    let [rx, ry] = radii;
    let (x0, x1) = ((c[0] - rx).floor() as i64, (c[0] + rx).ceil() as i64);
    let (y0, y1) = ((c[1] - ry).floor() as i64, (c[1] + ry).ceil() as i64);
    (y0..=y1).flat_map(move |y| {
        (x0..=x1).filter_map(move |x| {
            let (dx, dy) = ((x as f64 - c[0]) / rx, (y as f64 - c[1]) / ry);
            (dx * dx + dy * dy <= 1.0).then_some((x, y))
        })
    })
}

impl Scene {
    /// Draws frame `f` and returns it with its ground truth (sorted by id).
    #[must_use]
    pub fn render(&self, f: usize) -> (Image<u8>, Vec<TruthBox>) {
        let (w, h) = (self.width, self.height);
        let mut rng = Rng(self.seed ^ (f as u64).wrapping_mul(0x2545_f491_4f6c_dd1d));
        let amp = i32::from(self.noise.pixel);
        let jitter = |v: u8, rng: &mut Rng| -> u8 {
            if amp == 0 {
                return v;
            }
            let d = rng.below((2 * amp + 1) as usize) as i32 - amp;
            (i32::from(v) + d).clamp(0, 255) as u8
        };
        let mut img = Image::new(w, h, self.background);
        // owner[p]: 1 + index of the object seen at pixel p, 0 for none.
        let mut owner = vec![0u32; w * h];
        let mut whole = vec![0usize; self.objects.len()];
        for (i, o) in self.objects.iter().enumerate() {
            let Some(c) = o.path.get(f).copied().flatten() else {
                continue;
            };
            for (x, y) in ellipse_pixels(c, o.radii) {
                whole[i] += 1;
                if (0..w as i64).contains(&x) && (0..h as i64).contains(&y) {
                    owner[y as usize * w + x as usize] = i as u32 + 1;
                }
            }
        }
        for oc in &self.occluders {
            let [l, t, r, b] = oc.rect;
            for y in t..=b.min(h - 1) {
                for x in l..=r.min(w - 1) {
                    owner[y * w + x] = u32::MAX;
                }
            }
        }
        let mut count = vec![0usize; self.objects.len()];
        let mut boxes = vec![[usize::MAX, usize::MAX, 0, 0]; self.objects.len()];
        for y in 0..h {
            for x in 0..w {
                let v = match owner[y * w + x] {
                    0 => self.background,
                    u32::MAX => self.occluder_grey(x, y),
                    k => {
                        let i = k as usize - 1;
                        count[i] += 1;
                        let b = &mut boxes[i];
                        *b = [b[0].min(x), b[1].min(y), b[2].max(x), b[3].max(y)];
                        self.objects[i].grey
                    }
                };
                img.set(x, y, jitter(v, &mut rng));
            }
        }
        self.draw_noise(&mut img, f);
        let truth = self
            .objects
            .iter()
            .enumerate()
            .filter(|&(i, _)| count[i] > 0 && count[i] as f64 >= VISIBLE_FRACTION * whole[i] as f64)
            .map(|(i, o)| {
                let [l, t, r, b] = boxes[i];
                TruthBox {
                    id: o.id,
                    bbox: [l as f64, t as f64, (r - l + 1) as f64, (b - t + 1) as f64],
                    visibility: count[i] as f64 / whole[i] as f64,
                }
            })
            .collect();
        (img, truth)
    }

    fn occluder_grey(&self, x: usize, y: usize) -> u8 {
        self.occluders
            .iter()
            .find(|o| (o.rect[0]..=o.rect[2]).contains(&x) && (o.rect[1]..=o.rect[3]).contains(&y))
            .map_or(self.background, |o| o.grey)
    }

    /// Specks (a fresh set every frame) and clutter blobs (each lives 1-2 frames).
    fn draw_noise(&self, img: &mut Image<u8>, f: usize) {
        let (w, h) = (self.width, self.height);
        let mut rng = Rng(self.seed.wrapping_mul(31).wrapping_add(f as u64 * 7919));
        for _ in 0..self.noise.specks {
            let (x, y) = (rng.below(w), rng.below(h));
            let n = 1 + rng.below(3);
            for k in 0..n {
                let (xx, yy) = ((x + k % 2).min(w - 1), (y + k / 2).min(h - 1));
                img.set(xx, yy, 200);
            }
        }
        // A blob born at frame g lives frames g..g+life; look back one frame for live ones.
        let per_frame = self.noise.clutter_per_second / f64::from(self.fps.max(1));
        for g in f.saturating_sub(1)..=f {
            let mut rng = Rng(self.seed.wrapping_mul(131).wrapping_add(g as u64 * 104_729));
            let mut budget = per_frame;
            while budget > 0.0 {
                let born = rng.unit() < budget;
                budget -= 1.0;
                let (cx, cy, r, life) = (
                    rng.range(4.0, w as f64 - 4.0),
                    rng.range(4.0, h as f64 - 4.0),
                    rng.range(3.0, 4.2),
                    1 + rng.below(2),
                );
                if born && f < g + life {
                    for (x, y) in ellipse_pixels([cx, cy], [r, r]) {
                        if (0..w as i64).contains(&x) && (0..h as i64).contains(&y) {
                            img.set(x as usize, y as usize, 180);
                        }
                    }
                }
            }
        }
    }
}

/// One frame's ground truth as MOT Challenge `gt.txt` rows
/// (`frame,id,left,top,width,height,1,1,visibility`, 1-based frame numbers).
#[must_use]
pub fn mot_truth_rows(frame0: usize, truth: &[TruthBox]) -> String {
    truth
        .iter()
        .map(|t| {
            let [l, tp, bw, bh] = t.bbox;
            format!(
                "{},{},{l},{tp},{bw},{bh},1,1,{:.3}\n",
                frame0 + 1,
                t.id,
                t.visibility
            )
        })
        .collect()
}
