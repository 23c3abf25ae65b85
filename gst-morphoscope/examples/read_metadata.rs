//! Reading morphoscope's results in an application: run a pipeline ending in an appsink and
//! print, for each frame, the tracked components (region-of-interest metas) and a few numbers
//! of the frame summary (custom meta).
//!
//! ```sh
//! cargo run --release -p gst-morphoscope --example read_metadata -- \
//!     "filesrc location=assets/samples/vtest.avi ! decodebin ! videoconvert ! morphoscope ! appsink name=sink"
//! ```
//!
//! The same metas are read from C, Python or any binding with
//! `gst_buffer_iterate_meta_filtered(buf, GST_VIDEO_REGION_OF_INTEREST_META_API_TYPE)` and
//! `gst_video_region_of_interest_meta_get_param(meta, "morphoscope/component")`; built with
//! `--features analytics`, it also prints the analytics relation meta's entries.

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    gst::init()?;
    gstmorphoscope::plugin_register_static()?;
    let desc = std::env::args().nth(1).unwrap_or_else(|| {
        "videotestsrc pattern=ball num-buffers=100 ! video/x-raw,format=RGB,width=320,height=240 ! morphoscope ! appsink name=sink".to_owned()
    });
    let pipeline = gst::parse::launch(&desc)?
        .downcast::<gst::Pipeline>()
        .map_err(|_| "not a pipeline")?;
    let sink = pipeline
        .by_name("sink")
        .ok_or("no element named `sink`")?
        .downcast::<gst_app::AppSink>()
        .map_err(|_| "`sink` is not an appsink")?;
    sink.set_property("sync", false);
    pipeline.set_state(gst::State::Playing)?;
    while let Some(sample) = sink.try_pull_sample(gst::ClockTime::from_seconds(30)) {
        let Some(buffer) = sample.buffer() else {
            continue;
        };
        let summary = gstmorphoscope::metadata::frame_summary_of(buffer);
        let index = summary
            .as_ref()
            .and_then(|s| s.get::<u64>("index").ok())
            .unwrap_or(0);
        let cca = summary
            .as_ref()
            .and_then(|s| s.get::<gst::Structure>("cca").ok());
        let components = cca
            .as_ref()
            .and_then(|c| c.get::<u64>("components").ok())
            .unwrap_or(0);
        println!("frame {index}: {components} components");
        for c in gstmorphoscope::metadata::tracked_components(buffer) {
            println!(
                "  track {:>3}: box {:?}, area {}, centroid ({:.1}, {:.1}), velocity ({:.2}, {:.2}) px/frame",
                c.track_id,
                c.bbox,
                c.area,
                c.centroid[0],
                c.centroid[1],
                c.velocity[0],
                c.velocity[1]
            );
        }
        // Built with `--features analytics` (GStreamer >= 1.24): the same components as
        // object-detection entries, each part of a tracking entry.
        #[cfg(feature = "analytics")]
        for d in gstmorphoscope::analytics::tracked_detections(buffer) {
            println!(
                "  analytics track {:>3}: box {:?}, first seen {}, last seen {}",
                d.track_id, d.bbox, d.first_seen, d.last_seen
            );
        }
    }
    pipeline.set_state(gst::State::Null)?;
    Ok(())
}
