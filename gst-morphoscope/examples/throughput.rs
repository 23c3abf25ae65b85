//! Times a pipeline through the element: runs the description given (any pipeline; the
//! plugin is registered in-process) from PLAYING to EOS and prints the frames that reached
//! the element named `m`'s src pad, the wall time and frames a second. For BENCHMARKS.md:
//!
//! ```sh
//! cargo run --release -p gst-morphoscope --example throughput -- \
//!     "filesrc location=vtest.mp4 ! qtdemux ! h264parse ! nvh264dec ! morphoscope name=m ! fakesink"
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use gstreamer as gst;
use gstreamer::prelude::*;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    gst::init()?;
    gstmorphoscope::plugin_register_static()?;
    let desc = std::env::args()
        .nth(1)
        .ok_or("usage: throughput PIPELINE (with `morphoscope name=m`)")?;
    let pipeline = gst::parse::launch(&desc)?
        .downcast::<gst::Pipeline>()
        .map_err(|_| "not a pipeline")?;
    let elem = pipeline
        .by_name("m")
        .ok_or("name the element: `morphoscope name=m`")?;
    let frames = Arc::new(AtomicU64::new(0));
    // Nanoseconds from PLAYING to the first frame out (start-up: decoder, backend, kernels).
    let first_nanos = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let (counted, first) = (frames.clone(), first_nanos.clone());
    let pad = elem.static_pad("src").ok_or("no src pad")?;
    pad.add_probe(gst::PadProbeType::BUFFER, move |_, _| {
        if counted.fetch_add(1, Ordering::Relaxed) == 0 {
            first.store(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
        }
        gst::PadProbeReturn::Ok
    });
    pipeline.set_state(gst::State::Playing)?;
    let bus = pipeline.bus().ok_or("no bus")?;
    for msg in bus.iter_timed(gst::ClockTime::NONE) {
        match msg.view() {
            gst::MessageView::Eos(_) => break,
            gst::MessageView::Error(e) => {
                return Err(format!("{} ({:?})", e.error(), e.debug()).into());
            }
            _ => {}
        }
    }
    let wall = started.elapsed().as_secs_f64();
    pipeline.set_state(gst::State::Null)?;
    let n = frames.load(Ordering::Relaxed);
    let first = first_nanos.load(Ordering::Relaxed) as f64 * 1e-9;
    println!(
        "frames {n}, wall {wall:.3} s, {:.1} frames/s from PLAYING to EOS",
        n as f64 / wall
    );
    if n > 1 && wall > first {
        println!(
            "first frame after {first:.3} s; after it {:.1} frames/s",
            (n - 1) as f64 / (wall - first)
        );
    }
    Ok(())
}
