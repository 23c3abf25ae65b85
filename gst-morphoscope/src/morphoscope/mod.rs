//! The `morphoscope` element: registration, its public type and its enum properties. The
//! implementation is in [`imp`]; the user settings in [`settings`]; the engine it drives (the
//! morphoscope frame pipeline fed from the chain function) in [`engine`]; the conversion of
//! decoder and camera formats to RGB and frames in CUDA memory are the library's
//! (`morphoscope::source::convert`, `morphoscope::source::cuda_memory`), shared with `run`'s
//! sources.

use gstreamer as gst;
use gstreamer::prelude::*;

mod engine;
mod imp;
mod settings;

glib::wrapper! {
    /// The `morphoscope` element (see the crate docs).
    pub struct Morphoscope(ObjectSubclass<imp::Morphoscope>) @extends gst::Element, gst::Object;
}

/// The `backend` property.
#[derive(Debug, Eq, PartialEq, Hash, Clone, Copy, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstMorphoscopeBackend")]
pub enum BackendChoice {
    /// CUDA when a device, the driver and NVRTC are present, else the CPU.
    #[enum_value(name = "CUDA when available, else the CPU", nick = "auto")]
    Auto = 0,
    /// The CPU reference implementations.
    #[enum_value(
        name = "The CPU (multi-threaded reference implementations)",
        nick = "cpu"
    )]
    Cpu = 1,
    /// CUDA; the element fails to start without it.
    #[enum_value(name = "CUDA (an error when unavailable)", nick = "cuda")]
    Cuda = 2,
}

impl BackendChoice {
    /// The word of the settings file's `pipeline.backend`.
    #[must_use]
    pub fn config_word(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Cpu => "cpu",
            Self::Cuda => "cuda",
        }
    }
}

/// The `qos` property: what happens to frames that arrive late (downstream's QoS events say
/// they would be shown after their time) or while every ring slot is busy.
#[derive(Debug, Eq, PartialEq, Hash, Clone, Copy, glib::Enum)]
#[repr(u32)]
#[enum_type(name = "GstMorphoscopeQos")]
pub enum QosPolicy {
    /// Every frame is analysed; a busy ring holds the streaming thread (back-pressure).
    #[enum_value(
        name = "Analyse every frame (back-pressure when the ring is busy)",
        nick = "analyse"
    )]
    Analyse = 0,
    /// Late frames, and frames arriving while the ring is full, are dropped and counted
    /// (property `dropped`); the element never holds the streaming thread for the ring.
    #[enum_value(
        name = "Drop late frames and frames arriving while the ring is full, and count them",
        nick = "drop"
    )]
    Drop = 1,
}

/// Registers the element with `plugin`.
pub fn register(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    gst::Element::register(
        Some(plugin),
        "morphoscope",
        gst::Rank::NONE,
        Morphoscope::static_type(),
    )
}
