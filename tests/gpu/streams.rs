//! Several streams on one device: two pipelines sharing one `GpuContext` (its loaded kernels),
//! each with its own ring of CUDA streams, run side by side on threads and must give, frame for
//! frame, what one pipeline alone gives: the analyses' summaries and the composed pictures. The
//! segmentation's graph captures of one stream happen while the other enqueues and composes
//! (the per-device capture lock keeps them apart).

// Helpers outside `#[test]` functions unwrap and panic as the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use morphoscope::analysis::{AnalysedFrame, OpSettings};
use morphoscope::backend::Backend;
use morphoscope::compose::PictureFormat;
use morphoscope::image::{DynImage, Image};
use morphoscope::pipeline::{PictureWant, run_frames};
use morphoscope::source::Frame;

use crate::common::{Rng, gpu, sample_rgb};

/// A moving real scene: a sample photo shifted a few pixels a frame (random pixels without
/// the samples), 640x480.
fn scene(n: usize) -> Vec<Frame> {
    let photo = sample_rgb("fruits.jpg");
    let mut rng = Rng(5);
    (0..n)
        .map(|i| {
            let img = match &photo {
                Some(p) => Image::from_fn(640, 480, |x, y| {
                    p.get((x + 4 * i) % p.width(), (y + 2 * i) % p.height())
                }),
                None => Image::from_fn(640, 480, |_, _| {
                    let v = rng.next_u64();
                    [v as u8, (v >> 8) as u8, (v >> 16) as u8]
                }),
            };
            Frame {
                index: i as u64,
                pts_nanos: Some(i as u64 * 33_000_000),
                image: DynImage::Rgb8(img).into(),
                after_gap: false,
            }
        })
        .collect()
}

/// The summary without the keys that say how the work was launched, not what it found.
fn findings(summary: &serde_json::Value) -> serde_json::Value {
    let mut s = summary.clone();
    if let Some(m) = s.as_object_mut() {
        m.remove("graph_capture");
    }
    s
}

fn assert_same(stream: usize, got: &[AnalysedFrame], alone: &[AnalysedFrame]) {
    assert_eq!(got.len(), alone.len(), "stream {stream}: frames");
    for (a, b) in got.iter().zip(alone) {
        assert_eq!(a.index, b.index, "stream {stream}: order");
        assert_eq!(
            a.picture, b.picture,
            "stream {stream} frame {}: composed picture",
            a.index
        );
        assert_eq!(a.outputs.len(), b.outputs.len());
        for (x, y) in a.outputs.iter().zip(&b.outputs) {
            assert_eq!(
                findings(&x.summary),
                findings(&y.summary),
                "stream {stream} frame {} op {}",
                a.index,
                x.op
            );
        }
    }
}

#[test]
fn two_streams_on_one_device_give_what_one_stream_gives() {
    let Some(g) = gpu() else { return };
    let backend = Backend::Cuda(Arc::new(
        morphoscope::gpu::GpuContext::new(g.info().ordinal).unwrap(),
    ));
    let settings = OpSettings::default();
    let frames = scene(24);
    let want = PictureWant::Every(PictureFormat::Rgb);
    let alone = run_frames(&backend, &settings, 3, frames.clone(), want).unwrap();
    assert!(
        alone.iter().all(|f| f.outputs.len() == 5),
        "every analysis ran"
    );
    let together: Vec<Vec<AnalysedFrame>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                let (backend, settings, frames) = (&backend, &settings, frames.clone());
                s.spawn(move || run_frames(backend, settings, 3, frames, want).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (i, got) in together.iter().enumerate() {
        assert_same(i, got, &alone);
    }
}
