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
    /// Additive blending of the raster (black adds nothing), instead of mixing.
    #[serde(default)]
    pub add: bool,
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

/// Whether a layer blends additively by default: pictures that are black where nothing was found
/// (the max-tree residue, the orientation map) would otherwise darken the whole frame.
#[must_use]
pub fn default_add(key: &str) -> bool {
    has_hue_legend(key) || key.to_ascii_lowercase().contains("maxtree")
}

/// A segmentation layer drawn opaque over the frame's own pixels (its texture).
fn segments_picture(frame: &AnalysedFrame, raster: &Raster) -> Option<Image<[u8; 3]>> {
    use crate::compose::{ComposeStyle, LayerStyle, PictureFormat, RasterLayer, compose_cpu};
    let mut layers = crate::output::compose::layers_of(frame);
    layers.rasters = vec![RasterLayer { name: "segmentation", raster: raster.clone() }];
    layers.shapes.clear();
    let style = ComposeStyle::default().with("segmentation", LayerStyle::mixed(1.0));
    compose_cpu(&layers, &style, PictureFormat::Rgb).ok()?.to_rgb_image()
}

/// Default opacity of additive layers.
pub const ADD_OPACITY: f32 = 0.6;

/// A layer's texture and what it holds.
struct LayerTexture {
    key: String,
    handle: TextureHandle,
    frame_seq: u64,
    add: bool,
}

/// Every layer in display order, with its texture.
#[derive(Default)]
pub struct Layers {
    /// Layer states, `original` first, then ops in the order they first appeared.
    pub states: Vec<LayerState>,
    textures: Vec<LayerTexture>,
}

impl Layers {
    /// Layers from a saved list (the original layer is always first).
    #[must_use]
    pub fn from_saved(saved: Vec<LayerState>) -> Self {
        let mut states = saved;
        states.retain(|s| s.key != ORIGINAL);
        let original = LayerState { key: ORIGINAL.into(), visible: true, opacity: 1.0, add: false };
        states.insert(0, original);
        Self { states, textures: Vec::new() }
    }

    /// Adds layers for ops of `frame` that draw something and have no layer yet.
    pub fn discover(&mut self, frame: &AnalysedFrame) {
        if self.states.first().is_none_or(|s| s.key != ORIGINAL) {
            self.states.insert(0, LayerState { key: ORIGINAL.into(), visible: true, opacity: 1.0, add: false });
        }
        for o in frame.outputs.iter().filter(|o| draws(o)) {
            if !self.states.iter().any(|s| s.key == o.op) {
                let add = default_add(o.op);
                let opacity = if add { ADD_OPACITY } else { default_opacity(o.op, o.layer.raster.is_some()) };
                self.states.push(LayerState { key: o.op.to_owned(), visible: true, opacity, add });
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

    /// Whether `key` blends additively.
    #[must_use]
    pub fn additive(&self, key: &str) -> bool {
        self.get(key).is_some_and(|s| s.add)
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
        if base_wanted && !self.uploaded(ORIGINAL, frame_seq, false) {
            let composed = frame.picture.as_deref().filter(|p| p.format == crate::compose::PictureFormat::Rgba);
            let img = match (composed, &frame.rgb, &frame.gray) {
                // GPU: the frame with its layers as the pipeline composed them on the device.
                (Some(p), _, _) => Some(ColorImage::from_rgba_unmultiplied([p.width, p.height], &p.data)),
                (None, Some(rgb), _) => Some(rgb_image(rgb, false)),
                (None, None, Some(g)) => Some(gray_image(g, false)),
                (None, None, None) => None,
            };
            if let Some(img) = img {
                self.upload(ctx, ORIGINAL, img, opts, frame_seq, false);
            }
        }
        for o in &frame.outputs {
            let Some(r) = &o.layer.raster else { continue };
            let add = self.additive(o.op);
            if !self.visible(o.op) || self.uploaded(o.op, frame_seq, add) {
                continue;
            }
            let img = match r {
                Raster::Residue(g) => gray_image(g, add),
                Raster::Colour(c) => rgb_image(c, add),
                Raster::Segments { .. } => match segments_picture(frame, r) {
                    Some(pic) => rgb_image(&pic, add),
                    None => continue,
                },
            };
            self.upload(ctx, o.op, img, opts, frame_seq, add);
        }
    }

    fn uploaded(&self, key: &str, frame_seq: u64, add: bool) -> bool {
        self.textures.iter().any(|t| t.key == key && t.frame_seq == frame_seq && t.add == add)
    }

    fn upload(&mut self, ctx: &egui::Context, key: &str, img: ColorImage, opts: TextureOptions, frame_seq: u64, add: bool) {
        if let Some(t) = self.textures.iter_mut().find(|t| t.key == key) {
            t.handle.set(img, opts);
            t.frame_seq = frame_seq;
            t.add = add;
        } else {
            let handle = ctx.load_texture(format!("layer-{key}"), img, opts);
            self.textures.push(LayerTexture { key: key.to_owned(), handle, frame_seq, add });
        }
    }

    /// The texture of `key` if it holds the picture of `frame_seq`.
    #[must_use]
    pub fn texture(&self, key: &str, frame_seq: u64) -> Option<&TextureHandle> {
        self.textures.iter().find(|t| t.key == key && t.frame_seq == frame_seq).map(|t| &t.handle)
    }
}

/// Whether an output has anything to draw.
#[must_use]
pub fn draws(o: &OpOutput) -> bool {
    o.layer.raster.is_some() || !o.layer.shapes.is_empty()
}

/// Pixels for a texture. With `add`, alpha is 0: egui blends premultiplied colours, so an
/// opaque-looking colour with zero alpha is *added* to what is below (black adds nothing).
fn color_image(width: usize, height: usize, pixels: impl Iterator<Item = [u8; 3]>, add: bool) -> ColorImage {
    let pixels = pixels
        .map(|[r, g, b]| if add { Color32::from_rgba_premultiplied(r, g, b, 0) } else { Color32::from_rgb(r, g, b) })
        .collect();
    ColorImage::new([width, height], pixels)
}

fn gray_image(g: &Image<u8>, add: bool) -> ColorImage {
    color_image(g.width(), g.height(), g.rows().flat_map(|r| r.iter().map(|&v| [v, v, v])), add)
}

fn rgb_image(c: &Image<[u8; 3]>, add: bool) -> ColorImage {
    color_image(c.width(), c.height(), c.rows().flat_map(|r| r.iter().copied()), add)
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
    if k == ORIGINAL || known.contains(&k) { known.to_owned() } else { format!("{known} ({key})") }
}

/// The legend of a layer: what its colours and marks mean.
#[must_use]
pub fn legend_text(key: &str, output: Option<&OpOutput>) -> String {
    let k = key.to_ascii_lowercase();
    if k == ORIGINAL {
        return "The source frame (colour, or grey for grey sources). Turn it off to see the overlays on black.".into();
    }
    if k.contains("maxtree") {
        return "Grey picture: the residue of the attribute filter (|frame - filtered|, a top-hat): the \
                small bright (max-tree) or dark (min-tree) structures the filter removed glow; black = \
                nothing removed."
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
                    Raster::Residue(_) => "a grey picture".to_owned(),
                    Raster::Colour(_) => "a colour picture".to_owned(),
                    Raster::Segments { .. } => "segments filled from the frame".to_owned(),
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
