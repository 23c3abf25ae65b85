//! Shared helpers for the GPU parity tests: one `GpuContext` for the whole test binary, skip or
//! fail when no GPU is present, and access to the real sample images.
//!
//! Without a GPU each test returns early with a message; with `MORPHOSCOPE_REQUIRE_GPU=1` (set on
//! the GPU machine by `.device/run.sh`) a missing GPU is a failure instead.
#![allow(dead_code)]

use std::sync::OnceLock;

use morphoscope::gpu::GpuContext;

static GPU: OnceLock<Option<GpuContext>> = OnceLock::new();

/// The shared context, or `None` (after printing why) when no usable GPU is present.
pub fn gpu() -> Option<&'static GpuContext> {
    GPU.get_or_init(|| match GpuContext::new(0) {
        Ok(g) => Some(g),
        Err(e) => {
            assert!(
                std::env::var("MORPHOSCOPE_REQUIRE_GPU").as_deref() != Ok("1"),
                "MORPHOSCOPE_REQUIRE_GPU=1 but the CUDA backend is unavailable: {e}"
            );
            eprintln!("GPU tests skipped: {e}");
            None
        }
    })
    .as_ref()
}

pub use crate::samples::samples_dir;

/// A real grey image from the samples (decoded with the `image` crate), or `None` when the
/// samples are absent (a failure when `MORPHOSCOPE_REQUIRE_SAMPLES=1`).
pub fn sample_gray(name: &str) -> Option<morphoscope::image::Image<u8>> {
    let p = samples_dir().join(name);
    match image::open(&p) {
        Ok(img) => {
            let g = img.to_luma8();
            let (w, h) = (g.width() as usize, g.height() as usize);
            morphoscope::image::Image::from_vec(w, h, g.into_raw()).ok()
        }
        Err(e) => {
            assert!(
                std::env::var("MORPHOSCOPE_REQUIRE_SAMPLES").as_deref() != Ok("1"),
                "sample {} missing: {e}",
                p.display()
            );
            eprintln!("sample {} missing ({e}); skipped", p.display());
            None
        }
    }
}

/// A real RGB image from the samples.
pub fn sample_rgb(name: &str) -> Option<morphoscope::image::Image<[u8; 3]>> {
    let p = samples_dir().join(name);
    let img = image::open(&p).ok()?.to_rgb8();
    let (w, h) = (img.width() as usize, img.height() as usize);
    let px: Vec<[u8; 3]> = img.pixels().map(|p| p.0).collect();
    morphoscope::image::Image::from_vec(w, h, px).ok()
}

/// A real grey image tiled (mirrored) to `width` x `height`: real content at any size, never a
/// constant image.
pub fn tiled_gray(
    name: &str,
    width: usize,
    height: usize,
) -> Option<morphoscope::image::Image<u8>> {
    Some(sample_gray(name)?.mirror_tiled(width, height))
}

/// Deterministic pseudo-random generator (SplitMix64) for test images: the scene
/// generator's.
pub use morphoscope::track::scenes::Rng;

/// A random grey image with `levels` distinct values spread over 0..=255.
pub fn random_gray(
    rng: &mut Rng,
    width: usize,
    height: usize,
    levels: u32,
) -> morphoscope::image::Image<u8> {
    let levels = levels.clamp(1, 256);
    morphoscope::image::Image::from_fn(width, height, |_, _| {
        let l = rng.below(levels as usize) as u32;
        if levels == 1 {
            0
        } else {
            (l * 255 / (levels - 1)) as u8
        }
    })
}

/// A real 16-bit frame: the luminance `0.2126 R + 0.7152 G + 0.0722 B` of a tiled (mirrored)
/// sample quantised on 16 bits (the max-tree paper's §6.3 protocol).
pub fn tiled_gray16(name: &str, w: usize, h: usize) -> Option<morphoscope::image::Image<u16>> {
    Some(sample_rgb(name)?.mirror_tiled(w, h).map(|[r, g, b]| {
        let l = 0.2126 * f64::from(r) + 0.7152 * f64::from(g) + 0.0722 * f64::from(b);
        (l / 255.0 * 65535.0).round() as u16
    }))
}

/// The median of timings (0 for none).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    if v.is_empty() { 0.0 } else { v[v.len() / 2] }
}
