//! Placeholder for the compose step (replaced by the compose module's real implementation):
//! the picture types the pipeline hands its sinks.

/// Pixel layout of a composed picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PictureFormat {
    /// 4 bytes a pixel.
    Rgba,
    /// 3 bytes a pixel.
    Rgb,
    /// Planar 4:2:0.
    I420,
}

/// A composed picture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Picture {
    /// Layout of `data`.
    pub format: PictureFormat,
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// The bytes.
    pub data: Vec<u8>,
}

/// How one layer is drawn.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LayerStyle {
    /// Drawn or not.
    pub visible: bool,
    /// 0..=1.
    pub opacity: f32,
    /// Additive blending.
    pub additive: bool,
}

/// Styles of every layer by analysis name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ComposeStyle {
    /// (name, style) pairs.
    pub layers: Vec<(String, LayerStyle)>,
}
