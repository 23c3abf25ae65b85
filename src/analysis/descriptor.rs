//! What an analysis says of itself, in one place beside its implementation: its name (the
//! settings section, the `op` of its outputs, its layer and the prefix of its timing regions),
//! its title and legend for people, how its overlay layer is drawn by default, which settings
//! switch it on and check its ranges, how it is built, and the GStreamer element's properties
//! that set its keys. The viewer, the compose defaults, the settings checks and the element
//! iterate [`super::ANALYSES`]; no code outside an analysis' own module names it.

use super::{Analysis, OpSettings};
use crate::ops::OpError;

/// One analysis, described.
#[derive(Clone, Copy, Debug)]
pub struct Descriptor {
    /// Short name: the settings section, the `op` of its outputs, its layer's key and the
    /// prefix of its timing regions.
    pub name: &'static str,
    /// A title for people (the viewer's layer list).
    pub title: &'static str,
    /// What its overlay's colours and marks mean (the viewer's legend); empty when it draws
    /// nothing.
    pub legend: &'static str,
    /// How its overlay layer is drawn by default; `None` when it draws nothing.
    pub layer: Option<LayerLook>,
    /// The GStreamer element's properties that set its settings keys.
    pub properties: &'static [Property],
    /// Whether its settings switch it on.
    pub enabled: fn(&OpSettings) -> bool,
    /// Range checks of its settings sections: `Err((key, message))`.
    pub validate: fn(&OpSettings) -> Result<(), (String, String)>,
    /// Builds it from the settings.
    pub build: fn(&OpSettings) -> Result<Box<dyn Analysis>, OpError>,
}

/// How the viewer shows an analysis' overlay layer until the user changes it (the overlay
/// video's look follows the kind of raster each frame's output carries).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LayerLook {
    /// The viewer adds it to the frame rather than mixing it: a picture that is black where
    /// nothing was found would otherwise darken the whole frame.
    pub additive: bool,
    /// Its colours are angles: the viewer shows the hue wheel beside its legend.
    pub hue_wheel: bool,
}

/// One property of the GStreamer element that overrides one settings key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Property {
    /// Property name (`gst-inspect-1.0 morphoscope` lists it).
    pub name: &'static str,
    /// `section.key` in the settings.
    pub key: &'static str,
    /// The property's documentation.
    pub blurb: &'static str,
    /// Type, range and built-in default (that of `config/default.toml`).
    pub kind: PropertyKind,
}

/// The type, range and built-in default of a [`Property`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PropertyKind {
    /// On/off.
    Bool(bool),
    /// An unsigned integer in `min..=max`.
    UInt {
        /// Smallest value.
        min: u32,
        /// Largest value.
        max: u32,
        /// Built-in default.
        default: u32,
    },
    /// A double in `min..=max`.
    Double {
        /// Smallest value.
        min: f64,
        /// Largest value.
        max: f64,
        /// Built-in default.
        default: f64,
    },
    /// A word (its values are listed in the blurb); the built-in default.
    Text(&'static str),
}

/// `Err((section, message))` from a section's own check.
pub(super) fn in_section<E: std::fmt::Display>(
    section: &str,
    checked: Result<(), E>,
) -> Result<(), (String, String)> {
    checked.map_err(|e| (section.to_owned(), e.to_string()))
}
