//! How each layer is drawn: a [`LayerStyle`] (visible, opacity, additive) per analysis name,
//! collected in a [`ComposeStyle`] whose default is the overlay video's look. The opacities are
//! quantised here, once, into the integer [`Blend`] both the CPU twin and the kernel use.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Style key of the base layer (the frame itself).
pub const ORIGINAL: &str = "original";

/// Default opacity of colour and segment rasters over the frame.
pub const RASTER_ALPHA: f32 = 0.4;

/// Colour of the residue highlight.
pub(crate) const RESIDUE_COLOUR: [u8; 3] = [255, 230, 0];

/// Opacity of the residue highlight where the residue is strongest (layer opacity 1): the frame
/// stays faintly visible under it.
pub(crate) const RESIDUE_PEAK: f32 = 0.9;

/// A residue value `v` becomes the alpha `min(RESIDUE_GAIN * v, 255)` before the peak and the
/// layer's opacity scale it: residues are mostly small, so they are stretched to show.
pub(crate) const RESIDUE_GAIN: u32 = 4;

/// How one layer is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LayerStyle {
    /// Drawn at all.
    pub visible: bool,
    /// Opacity `a` in `0..=1` (values outside are clamped).
    pub opacity: f32,
    /// `dst + src*a` (clamped; black adds nothing) instead of `dst*(1-a) + src*a`.
    pub additive: bool,
}

impl LayerStyle {
    /// A visible layer mixed with `opacity`.
    #[must_use]
    pub const fn mixed(opacity: f32) -> Self {
        Self {
            visible: true,
            opacity,
            additive: false,
        }
    }

    /// A visible layer added with `opacity`.
    #[must_use]
    pub const fn added(opacity: f32) -> Self {
        Self {
            visible: true,
            opacity,
            additive: true,
        }
    }

    /// A layer that is not drawn.
    pub const HIDDEN: Self = Self {
        visible: false,
        opacity: 1.0,
        additive: false,
    };

    /// The integer blend of this style with the opacity scaled by `scale` (1 for every layer but
    /// the residue, whose peak is `RESIDUE_PEAK`); `None` when nothing is drawn (hidden, or an
    /// opacity that quantises to 0, which changes no pixel in either mode).
    #[must_use]
    pub fn blend(&self, scale: f32) -> Option<Blend> {
        let alpha = quantise(self.opacity * scale);
        (self.visible && alpha > 0).then_some(Blend {
            alpha,
            additive: self.additive,
        })
    }
}

/// `a` in `0..=1` as `0..=255`, rounded (NaN is 0).
#[must_use]
pub(crate) fn quantise(a: f32) -> u8 {
    if a.is_nan() {
        0
    } else {
        (a.clamp(0.0, 1.0) * 255.0).round() as u8
    }
}

/// A quantised style: alpha in `0..=255` (never 0) and the blend mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blend {
    /// Alpha, `1..=255` (for the residue: the alpha of the strongest residue).
    pub alpha: u8,
    /// Additive instead of mixing.
    pub additive: bool,
}

/// What a layer holds, which sets its default style.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// The frame itself.
    Base,
    /// A grey residue drawn as a highlight.
    Residue,
    /// A colour picture.
    Colour,
    /// Segments filled with a colour.
    Segments,
    /// Boxes, labels and polylines.
    Shapes,
}

impl LayerKind {
    /// The style of a layer of this kind that the [`ComposeStyle`] does not name: the frame
    /// opaque, the residue with its own alpha rule, rasters at [`RASTER_ALPHA`], shapes opaque.
    #[must_use]
    pub(crate) fn default_style(self) -> LayerStyle {
        match self {
            Self::Base | Self::Residue | Self::Shapes => LayerStyle::mixed(1.0),
            Self::Colour | Self::Segments => LayerStyle::mixed(RASTER_ALPHA),
        }
    }
}

/// The style of every layer, keyed by analysis name ([`ORIGINAL`] for the base). Layers it does
/// not name are drawn with their kind's default (`LayerKind::default_style`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ComposeStyle {
    /// Styles by analysis name.
    pub layers: BTreeMap<String, LayerStyle>,
}

impl Default for ComposeStyle {
    /// The overlay video's look: every layer with its kind's default (the frame opaque, a
    /// residue as a highlight with its own alpha rule, colour pictures and segments mixed at
    /// [`RASTER_ALPHA`], boxes and trails opaque).
    fn default() -> Self {
        Self {
            layers: BTreeMap::new(),
        }
    }
}

impl ComposeStyle {
    /// The style of layer `name` of kind `kind`.
    #[must_use]
    pub fn style(&self, name: &str, kind: LayerKind) -> LayerStyle {
        self.layers
            .get(name)
            .copied()
            .unwrap_or_else(|| kind.default_style())
    }

    /// Sets the style of layer `name`.
    pub fn set(&mut self, name: impl Into<String>, style: LayerStyle) {
        self.layers.insert(name.into(), style);
    }

    /// The same style with layer `name` set (for building styles in one expression).
    #[must_use]
    pub fn with(mut self, name: impl Into<String>, style: LayerStyle) -> Self {
        self.set(name, style);
        self
    }

    /// The quantised blend of layer `name` (see [`LayerStyle::blend`]); the residue's opacity is
    /// scaled by `RESIDUE_PEAK`.
    #[must_use]
    pub fn blend(&self, name: &str, kind: LayerKind) -> Option<Blend> {
        let scale = if kind == LayerKind::Residue {
            RESIDUE_PEAK
        } else {
            1.0
        };
        self.style(name, kind).blend(scale)
    }

    /// The alpha the base is drawn with over black (0: hidden).
    #[must_use]
    pub(crate) fn base_alpha(&self) -> u8 {
        self.blend(ORIGINAL, LayerKind::Base).map_or(0, |b| b.alpha)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_the_overlay_video_look() {
        let s = ComposeStyle::default();
        assert_eq!(s.base_alpha(), 255);
        assert_eq!(
            s.blend("residue", LayerKind::Residue),
            Some(Blend {
                alpha: 230,
                additive: false
            })
        );
        assert_eq!(
            s.blend("angles", LayerKind::Colour),
            Some(Blend {
                alpha: 102,
                additive: false
            })
        );
        assert_eq!(
            s.blend("segments", LayerKind::Segments),
            Some(Blend {
                alpha: 102,
                additive: false
            })
        );
        assert_eq!(
            s.blend("boxes", LayerKind::Shapes),
            Some(Blend {
                alpha: 255,
                additive: false
            })
        );
        // Unknown names take their kind's default.
        assert_eq!(
            s.blend("other", LayerKind::Colour),
            Some(Blend {
                alpha: 102,
                additive: false
            })
        );
    }

    #[test]
    fn hidden_and_transparent_layers_draw_nothing() {
        let s = ComposeStyle::default()
            .with(ORIGINAL, LayerStyle::HIDDEN)
            .with("angles", LayerStyle::added(0.0))
            .with("boxes", LayerStyle::added(0.001))
            .with("segments", LayerStyle::mixed(f32::NAN));
        assert_eq!(s.base_alpha(), 0);
        assert_eq!(s.blend("angles", LayerKind::Colour), None);
        assert_eq!(s.blend("boxes", LayerKind::Shapes), None);
        assert_eq!(s.blend("segments", LayerKind::Segments), None);
        let s = s.with("boxes", LayerStyle::added(2.0));
        assert_eq!(
            s.blend("boxes", LayerKind::Shapes),
            Some(Blend {
                alpha: 255,
                additive: true
            })
        );
    }

    #[test]
    fn quantise_rounds_to_the_nearest_step() {
        assert_eq!(quantise(0.0), 0);
        assert_eq!(quantise(1.0), 255);
        assert_eq!(quantise(0.5), 128);
        assert_eq!(quantise(-3.0), 0);
        assert_eq!(quantise(1.0 / 255.0), 1);
        assert_eq!(quantise(0.49 / 255.0), 0);
    }
}
