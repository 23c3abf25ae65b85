//! Overlay layers: the original frame plus one layer per analysis that draws something (a raster,
//! shapes, or both), keyed by the `op` name of its [`OpOutput`]. Each layer has a toggle, an
//! opacity and a legend; a layer appears the first time its op sends something to draw, so a new
//! analysis needs no change here. Known op names get a hand-written legend; any other op gets a
//! generic one from what it sends.
//!
//! Textures: one per layer, created on first use and re-uploaded with `TextureHandle::set` when a
//! newer frame is shown and the layer is visible (hidden layers are uploaded when shown again).

use eframe::egui::{self, Color32, ColorImage, TextureHandle, TextureOptions};

use crate::analysis::{AnalysedFrame, OpOutput, Raster};
use crate::image::Image;

/// Key of the base picture's layer.
pub const ORIGINAL: &str = "original";

/// Toggle and opacity of one layer (persisted between runs).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct LayerState {
    /// `original` or the op name.
    pub key: String,
    /// Drawn or not.
    pub visible: bool,
    /// 0..=1, applied to the raster and the shapes.
    pub opacity: f32,
}

/// Default opacity of a layer: the frame opaque, rasters as in the overlay video, shapes opaque.
#[must_use]
pub fn default_opacity(key: &str, has_raster: bool) -> f32 {
    if key == ORIGINAL || !has_raster {
        1.0
    } else {
        crate::output::compose::RASTER_ALPHA
    }
}

/// Every layer in display order, with its texture.
#[derive(Default)]
pub struct Layers {
    /// Layer states, `original` first, then ops in the order they first appeared.
    pub states: Vec<LayerState>,
    textures: Vec<(String, TextureHandle, u64)>,
}

impl Layers {
    /// Layers from a saved list (the original layer is always first).
    #[must_use]
    pub fn from_saved(saved: Vec<LayerState>) -> Self {
        let mut states = saved;
        states.retain(|s| s.key != ORIGINAL);
        let original = LayerState { key: ORIGINAL.into(), visible: true, opacity: 1.0 };
        states.insert(0, original);
        Self { states, textures: Vec::new() }
    }

    /// Adds layers for ops of `frame` that draw something and have no layer yet.
    pub fn discover(&mut self, frame: &AnalysedFrame) {
        if self.states.first().is_none_or(|s| s.key != ORIGINAL) {
            self.states.insert(0, LayerState { key: ORIGINAL.into(), visible: true, opacity: 1.0 });
        }
        for o in frame.outputs.iter().filter(|o| draws(o)) {
            if !self.states.iter().any(|s| s.key == o.op) {
                let opacity = default_opacity(o.op, o.layer.raster.is_some());
                self.states.push(LayerState { key: o.op.to_owned(), visible: true, opacity });
            }
        }
    }

    /// The state of layer `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&LayerState> {
        self.states.iter().find(|s| s.key == key)
    }

    /// Whether `key` is drawn (unknown keys are).
    #[must_use]
    pub fn visible(&self, key: &str) -> bool {
        self.get(key).is_none_or(|s| s.visible)
    }

    /// Opacity of `key` (1 when unknown).
    #[must_use]
    pub fn opacity(&self, key: &str) -> f32 {
        self.get(key).map_or(1.0, |s| s.opacity)
    }

    /// Flips layer number `n` (1-based, as the keys 1-5).
    pub fn toggle_nth(&mut self, n: usize) {
        if let Some(s) = n.checked_sub(1).and_then(|i| self.states.get_mut(i)) {
            s.visible = !s.visible;
        }
    }

    /// Uploads the pictures of `frame` that are visible and not yet uploaded for `frame_seq`.
    /// Where the copy happens: the frame's packed pixels are converted into an egui `ColorImage`
    /// (one copy per visible raster per new frame), then handed to the renderer.
    pub fn sync_textures(&mut self, ctx: &egui::Context, frame: &AnalysedFrame, frame_seq: u64) {
        let opts = TextureOptions { magnification: egui::TextureFilter::Nearest, ..TextureOptions::LINEAR };
        let base_wanted = self.visible(ORIGINAL);
        if base_wanted && !self.uploaded(ORIGINAL, frame_seq) {
            let img = match &frame.rgb {
                Some(rgb) => rgb_image(rgb),
                None => gray_image(&frame.gray),
            };
            self.upload(ctx, ORIGINAL, img, opts, frame_seq);
        }
        for o in &frame.outputs {
            let Some(r) = &o.layer.raster else { continue };
            if !self.visible(o.op) || self.uploaded(o.op, frame_seq) {
                continue;
            }
            let img = match r {
                Raster::Gray(g) => gray_image(g),
                Raster::Rgb(c) => rgb_image(c),
            };
            self.upload(ctx, o.op, img, opts, frame_seq);
        }
    }

    fn uploaded(&self, key: &str, frame_seq: u64) -> bool {
        self.textures.iter().any(|(k, _, seq)| k == key && *seq == frame_seq)
    }

    fn upload(&mut self, ctx: &egui::Context, key: &str, img: ColorImage, opts: TextureOptions, frame_seq: u64) {
        if let Some((_, tex, seq)) = self.textures.iter_mut().find(|(k, _, _)| k == key) {
            tex.set(img, opts);
            *seq = frame_seq;
        } else {
            let tex = ctx.load_texture(format!("layer-{key}"), img, opts);
            self.textures.push((key.to_owned(), tex, frame_seq));
        }
    }

    /// The texture of `key` if it holds the picture of `frame_seq`.
    #[must_use]
    pub fn texture(&self, key: &str, frame_seq: u64) -> Option<&TextureHandle> {
        self.textures.iter().find(|(k, _, seq)| k == key && *seq == frame_seq).map(|(_, t, _)| t)
    }
}

/// Whether an output has anything to draw.
#[must_use]
pub fn draws(o: &OpOutput) -> bool {
    o.layer.raster.is_some() || !o.layer.shapes.is_empty()
}

fn gray_image(g: &Image<u8>) -> ColorImage {
    ColorImage::from_gray([g.width(), g.height()], &g.to_packed_vec())
}

fn rgb_image(c: &Image<[u8; 3]>) -> ColorImage {
    let mut bytes = Vec::with_capacity(c.width() * c.height() * 3);
    for row in c.rows() {
        for p in row {
            bytes.extend_from_slice(p);
        }
    }
    ColorImage::from_rgb([c.width(), c.height()], &bytes)
}

/// A readable name for a layer key.
#[must_use]
pub fn title(key: &str) -> String {
    let k = key.to_ascii_lowercase();
    let known = if k == ORIGINAL {
        "original frame"
    } else if k.contains("maxtree") {
        "max-tree filter"
    } else if k.contains("cca") || k.contains("ccl") || k.contains("component") || k.contains("track") {
        "components + tracks"
    } else if k.contains("orient") || k.contains("linear") {
        "orientation map"
    } else if k.contains("segment") || k.contains("felzen") {
        "segmentation"
    } else {
        return key.to_owned();
    };
    if k == ORIGINAL { known.to_owned() } else { format!("{known} ({key})") }
}

/// The legend of a layer: what its colours and marks mean.
#[must_use]
pub fn legend_text(key: &str, output: Option<&OpOutput>) -> String {
    let k = key.to_ascii_lowercase();
    if k == ORIGINAL {
        return "The source frame (colour, or grey for grey sources). Turn it off to see the overlays on black.".into();
    }
    if k.contains("maxtree") {
        return "Grey picture: the attribute-filtered frame, or the residue (frame minus filtered = the \
                structures the filter removed), as [maxtree] chooses. Bright = high level."
            .into();
    }
    if k.contains("cca") || k.contains("ccl") || k.contains("component") || k.contains("track") {
        return "Boxes: connected components of the binarized frame; the number is the track id (stable \
                across frames), the line is the track's recent path. Click a box or a row of the Tracks \
                panel to highlight a track."
            .into();
    }
    if k.contains("orient") || k.contains("linear") {
        return "Colour = orientation of the strongest linear opening at each pixel (hue, see the wheel), \
                brightness = its strength (dark = no linear structure)."
            .into();
    }
    if k.contains("segment") || k.contains("felzen") {
        return "Each segment of the graph-based (Felzenszwalb) segmentation filled with its mean colour \
                or a random colour, with its boundary drawn."
            .into();
    }
    match output {
        Some(o) => {
            let mut parts = Vec::new();
            if let Some(r) = &o.layer.raster {
                parts.push(match r {
                    Raster::Gray(_) => "a grey picture".to_owned(),
                    Raster::Rgb(_) => "a colour picture".to_owned(),
                });
            }
            if !o.layer.shapes.is_empty() {
                parts.push(format!("{} shapes (boxes, lines)", o.layer.shapes.len()));
            }
            format!("Analysis `{key}` draws {} over the frame.", parts.join(" and "))
        }
        None => format!("Analysis `{key}` (not in the current frame)."),
    }
}

/// True when the legend should show the hue wheel of angles.
#[must_use]
pub fn has_hue_legend(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.contains("orient") || k.contains("linear")
}

/// The colour of an angle in degrees on the orientation maps' hue scale (0° and 180° are the same
/// orientation, so the hue goes round once over 180°).
#[must_use]
pub fn angle_color(deg: f32) -> Color32 {
    let h = (deg / 180.0).rem_euclid(1.0);
    egui::ecolor::Hsva::new(h, 1.0, 1.0, 1.0).into()
}

/// Draws a hue bar for 0..180° with ticks every 45°.
pub fn hue_legend_ui(ui: &mut egui::Ui) {
    let width = ui.available_width().min(220.0);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(width, 26.0), egui::Sense::hover());
    let bar = egui::Rect::from_min_size(rect.min, egui::vec2(width, 10.0));
    let painter = ui.painter();
    let steps = 60;
    for i in 0..steps {
        let t0 = i as f32 / steps as f32;
        let t1 = (i + 1) as f32 / steps as f32;
        let r = egui::Rect::from_x_y_ranges(bar.left() + t0 * width..=bar.left() + t1 * width, bar.y_range());
        painter.rect_filled(r, 0.0, angle_color(t0 * 180.0));
    }
    let text = ui.visuals().text_color();
    for deg in [0.0f32, 45.0, 90.0, 135.0, 180.0] {
        let x = bar.left() + deg / 180.0 * width;
        painter.line_segment([egui::pos2(x, bar.bottom()), egui::pos2(x, bar.bottom() + 3.0)], (1.0, text));
        let anchor = if deg == 0.0 {
            egui::Align2::LEFT_TOP
        } else if deg == 180.0 {
            egui::Align2::RIGHT_TOP
        } else {
            egui::Align2::CENTER_TOP
        };
        painter.text(egui::pos2(x, bar.bottom() + 3.0), anchor, format!("{deg:.0}°"), egui::FontId::proportional(10.0), text);
    }
}

/// A stable colour for a name (timing regions, unknown layers).
#[must_use]
pub fn name_color(name: &str) -> Color32 {
    let mut h: u32 = 2_166_136_261;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(16_777_619);
    }
    let hue = (h % 360) as f32 / 360.0;
    egui::ecolor::Hsva::new(hue, 0.65, 0.9, 1.0).into()
}
