//! Overlay layers: the original frame plus one layer per analysis that draws something (a raster
//! on the host or on the device, shapes, or both), keyed by the `op` name of its [`OpOutput`].
//! Each layer has a toggle, an opacity, an additive switch (rasters) and a legend; a layer
//! appears the first time its op sends something to draw, so a new analysis needs no change
//! here: titles, legends and default looks come from each analysis' [`Descriptor`]; an op no
//! descriptor names gets a generic legend from what it sends.
//!
//! The layers are not drawn here: their states become a [`ComposeStyle`] (keyed by op name and
//! [`ORIGINAL`]) that the viewer sends to the pipeline, whose compose step draws every layer
//! into the one picture the viewer shows.

use eframe::egui::{self, Color32};

use crate::analysis::{Descriptor, LayerLook, OpOutput, descriptor};
use crate::compose::{ComposeStyle, HostRaster, LayerKind, LayerStyle};

pub use crate::compose::ORIGINAL;

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

impl LayerState {
    /// The viewer's default state of layer `key`, which draws a raster or not.
    #[must_use]
    pub(crate) fn default_for(key: &str, has_raster: bool) -> Self {
        let add = default_add(key);
        let opacity = if add {
            ADD_OPACITY
        } else {
            default_opacity(key, has_raster)
        };
        Self {
            key: key.to_owned(),
            visible: true,
            opacity,
            add,
        }
    }

    /// How the compose step draws this layer.
    #[must_use]
    pub fn style(&self) -> LayerStyle {
        LayerStyle {
            visible: self.visible,
            opacity: self.opacity,
            additive: self.add,
        }
    }
}

/// Default opacity of a layer: the frame opaque, rasters as in the overlay video, shapes opaque.
#[must_use]
pub(crate) fn default_opacity(key: &str, has_raster: bool) -> f32 {
    if key == ORIGINAL || !has_raster {
        1.0
    } else {
        crate::compose::RASTER_ALPHA
    }
}

/// The default look of layer `key`, from its analysis' descriptor.
fn look(key: &str) -> Option<LayerLook> {
    descriptor(key).and_then(|d| d.layer)
}

/// Whether a layer blends additively by default ([`LayerLook::additive`]).
#[must_use]
pub(crate) fn default_add(key: &str) -> bool {
    look(key).is_some_and(|l| l.additive)
}

/// Default opacity of additive layers.
pub(crate) const ADD_OPACITY: f32 = 0.6;

/// The viewer's look before any layer was changed: the overlay video's styles
/// ([`ComposeStyle::default`]) with the viewer's additive defaults ([`default_add`]).
#[must_use]
pub(crate) fn default_style() -> ComposeStyle {
    let mut style = ComposeStyle::default();
    for d in crate::analysis::ANALYSES {
        if d.layer.is_some_and(|l| l.additive) {
            style.set(d.name, LayerStyle::added(ADD_OPACITY));
        }
    }
    style
}

/// Every layer in display order.
#[derive(Default)]
pub struct Layers {
    /// Layer states, `original` first, then ops in the order they first appeared.
    pub states: Vec<LayerState>,
}

impl Layers {
    /// Layers from a saved list (the original layer is always first).
    #[must_use]
    pub(crate) fn from_saved(saved: Vec<LayerState>) -> Self {
        let mut states = saved;
        states.retain(|s| s.key != ORIGINAL);
        states.insert(0, LayerState::default_for(ORIGINAL, false));
        Self { states }
    }

    /// Adds layers for ops of `frame` that draw something and have no layer yet.
    pub fn discover(&mut self, outputs: &[OpOutput]) {
        if self.states.first().is_none_or(|s| s.key != ORIGINAL) {
            self.states
                .insert(0, LayerState::default_for(ORIGINAL, false));
        }
        for o in outputs.iter().filter(|o| draws(o)) {
            if !self.states.iter().any(|s| s.key == o.op) {
                self.states
                    .push(LayerState::default_for(o.op, raster_kind(o).is_some()));
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

    /// Flips layer number `n` (1-based, as the keys 1-9).
    pub(crate) fn toggle_nth(&mut self, n: usize) {
        if let Some(s) = n.checked_sub(1).and_then(|i| self.states.get_mut(i)) {
            s.visible = !s.visible;
        }
    }

    /// The compose step's styles for these layers: [`default_style`] for the layers not
    /// discovered yet, each layer's state for the others.
    #[must_use]
    pub(crate) fn compose_style(&self) -> ComposeStyle {
        let mut style = default_style();
        for s in &self.states {
            style.set(s.key.clone(), s.style());
        }
        style
    }
}

/// The kind of raster an output draws: its host raster's, else the one it left on the device.
#[must_use]
pub(crate) fn raster_kind(o: &OpOutput) -> Option<LayerKind> {
    o.layer
        .raster
        .as_ref()
        .map(HostRaster::kind)
        .or(o.layer.device_raster)
}

/// Whether an output has anything to draw.
#[must_use]
pub fn draws(o: &OpOutput) -> bool {
    raster_kind(o).is_some() || !o.layer.shapes.is_empty()
}

/// A readable name for a layer key: its analysis' title, followed by the key (the settings
/// section) where the title does not say it; else the key.
#[must_use]
pub(crate) fn title(key: &str) -> String {
    if key == ORIGINAL {
        return "original frame".into();
    }
    match descriptor(key) {
        Some(d) if d.title.contains(key) => d.title.to_owned(),
        Some(d) => format!("{} ({key})", d.title),
        None => key.to_owned(),
    }
}

/// The legend of a layer: what its colours and marks mean.
#[must_use]
pub(crate) fn legend_text(key: &str, output: Option<&OpOutput>) -> String {
    if key == ORIGINAL {
        return "The source frame (colour, or grey for grey sources). Turn it off to see the overlays on black.".into();
    }
    if let Some(d) = descriptor(key).filter(|d: &&Descriptor| !d.legend.is_empty()) {
        return d.legend.to_owned();
    }
    match output {
        Some(o) => {
            let mut parts = Vec::new();
            if let Some(kind) = raster_kind(o) {
                parts.push(match kind {
                    LayerKind::Residue => "a grey picture".to_owned(),
                    LayerKind::Colour => "a colour picture".to_owned(),
                    LayerKind::Segments => "segments filled from the frame".to_owned(),
                    LayerKind::Base | LayerKind::Shapes => "a picture".to_owned(),
                });
            }
            if !o.layer.shapes.is_empty() {
                parts.push(format!("{} shapes (boxes, lines)", o.layer.shapes.len()));
            }
            format!(
                "Analysis `{key}` draws {} over the frame.",
                parts.join(" and ")
            )
        }
        None => format!("Analysis `{key}` (not in the current frame)."),
    }
}

/// True when the legend should show the hue wheel of angles ([`LayerLook::hue_wheel`]).
#[must_use]
pub(crate) fn has_hue_legend(key: &str) -> bool {
    look(key).is_some_and(|l| l.hue_wheel)
}

/// The colour of an angle in degrees on the orientation maps' hue scale (0° and 180° are the same
/// orientation, so the hue goes round once over 180°).
#[must_use]
pub(crate) fn angle_color(deg: f32) -> Color32 {
    let h = (deg / 180.0).rem_euclid(1.0);
    egui::ecolor::Hsva::new(h, 1.0, 1.0, 1.0).into()
}

/// Draws a hue bar for 0..180° with ticks every 45°.
pub(crate) fn hue_legend_ui(ui: &mut egui::Ui) {
    let width = ui.available_width().min(220.0);
    let (rect, _) = ui.allocate_exact_size(egui::vec2(width, 26.0), egui::Sense::hover());
    let bar = egui::Rect::from_min_size(rect.min, egui::vec2(width, 10.0));
    let painter = ui.painter();
    let steps = 60;
    for i in 0..steps {
        let t0 = i as f32 / steps as f32;
        let t1 = (i + 1) as f32 / steps as f32;
        let r = egui::Rect::from_x_y_ranges(
            bar.left() + t0 * width..=bar.left() + t1 * width,
            bar.y_range(),
        );
        painter.rect_filled(r, 0.0, angle_color(t0 * 180.0));
    }
    let text = ui.visuals().text_color();
    for deg in [0.0f32, 45.0, 90.0, 135.0, 180.0] {
        let x = bar.left() + deg / 180.0 * width;
        painter.line_segment(
            [
                egui::pos2(x, bar.bottom()),
                egui::pos2(x, bar.bottom() + 3.0),
            ],
            (1.0, text),
        );
        let anchor = if deg == 0.0 {
            egui::Align2::LEFT_TOP
        } else if deg == 180.0 {
            egui::Align2::RIGHT_TOP
        } else {
            egui::Align2::CENTER_TOP
        };
        painter.text(
            egui::pos2(x, bar.bottom() + 3.0),
            anchor,
            format!("{deg:.0}°"),
            egui::FontId::proportional(10.0),
            text,
        );
    }
}

/// A stable colour for a name (timing regions, unknown layers).
#[must_use]
pub(crate) fn name_color(name: &str) -> Color32 {
    let mut h: u32 = 2_166_136_261;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(16_777_619);
    }
    let hue = (h % 360) as f32 / 360.0;
    egui::ecolor::Hsva::new(hue, 0.65, 0.9, 1.0).into()
}
