//! The `morphoscope` GStreamer plugin: one element, `morphoscope`, that runs morphoscope's
//! analyses (max-tree attribute filtering, connected components with tracking, linear-opening
//! orientation maps, graph segmentation) on the frames of any GStreamer pipeline and hands the
//! results downstream as standard buffer metadata ([`metadata`]): a
//! `GstVideoRegionOfInterestMeta` per tracked component and a frame summary, also posted on the
//! bus as an element message. With `draw=true` the outgoing frame carries the overlays, as in
//! `morphoscope run`'s `overlay.mp4`.
//!
//! Build it with `cargo build --release -p gst-morphoscope` and point `GST_PLUGIN_PATH` at
//! `target/release`; applications and tests that link this crate register it in-process with
//! [`plugin_register_static`].

use gstreamer as gst;

pub mod metadata;
mod morphoscope;

#[cfg(feature = "analytics")]
pub mod analytics;

pub use morphoscope::{Morphoscope, QosPolicy};

fn plugin_init(plugin: &gst::Plugin) -> Result<(), glib::BoolError> {
    metadata::register_frame_meta();
    morphoscope::register(plugin)
}

/// The plugin's descriptor (generated): `gst_plugin_morphoscope_get_desc` for dynamic loading
/// and [`plugin_register_static`] for in-process registration.
#[allow(missing_docs)]
mod plugin {
    use super::{gst, plugin_init};

    gst::plugin_define!(
        morphoscope,
        env!("CARGO_PKG_DESCRIPTION"),
        plugin_init,
        env!("CARGO_PKG_VERSION"),
        // GStreamer's name for the MIT licence (the crate is MIT OR Apache-2.0).
        "MIT/X11",
        env!("CARGO_PKG_NAME"),
        env!("CARGO_PKG_NAME"),
        env!("CARGO_PKG_REPOSITORY")
    );
}

pub use plugin::plugin_register_static;
