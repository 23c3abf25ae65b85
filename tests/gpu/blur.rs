//! GPU parity of the shared Gaussian blur (`kernels/blur.cu`) with the CPU `f32` path: the
//! kernels use the same operation order without FMA, so the results should be bit-identical;
//! the assertion allows 1e-6 and the message reports how many samples are identical.

use morphoscope::image::Image;
use morphoscope::ops::blur::gpu::blur_gpu;
use morphoscope::ops::blur::{BlurParams, blur_gray, blur_rgb};

use crate::common::{Rng, gpu, random_gray, sample_gray, sample_rgb};

fn compare(a: &[f32], b: &[f32], what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    let same = a
        .iter()
        .zip(b)
        .filter(|(x, y)| x.to_bits() == y.to_bits())
        .count();
    let maxdiff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    eprintln!(
        "{what}: {same}/{} bit-identical, max |diff| {maxdiff:e}",
        a.len()
    );
    assert!(maxdiff <= 1e-6, "{what}: max diff {maxdiff}");
}

#[test]
fn gray_matches_cpu_on_real_and_random_images() {
    let Some(g) = gpu() else { return };
    let mut images = Vec::new();
    if let Some(img) = sample_gray("fruits.jpg") {
        images.push(("fruits", img));
    }
    let mut rng = Rng(7);
    for (w, h) in [(1, 1), (1, 9), (9, 1), (3, 5), (64, 48), (257, 131)] {
        images.push(("random", random_gray(&mut rng, w, h, 256)));
    }
    for (name, img) in &images {
        for sigma in [0.0, 0.5, 0.8, 2.0, 5.0] {
            let p = BlurParams::with_sigma(sigma);
            let cpu = blur_gray(img.view(), &p).unwrap();
            let gpu_out = blur_gpu(g, img.view(), &p).unwrap();
            assert_eq!(
                (gpu_out.width, gpu_out.height, gpu_out.channels),
                (img.width(), img.height(), 1)
            );
            compare(
                &gpu_out.data,
                cpu.data(),
                &format!("{name} {}x{} sigma {sigma}", img.width(), img.height()),
            );
        }
    }
}

#[test]
fn rgb_matches_cpu_and_empty_is_fine() {
    let Some(g) = gpu() else { return };
    if let Some(img) = sample_rgb("baboon.jpg") {
        for sigma in [0.8, 3.0] {
            let p = BlurParams::with_sigma(sigma);
            let cpu = blur_rgb(img.view(), &p).unwrap();
            let gpu_out = blur_gpu(g, img.view(), &p).unwrap();
            assert_eq!(gpu_out.channels, 3);
            compare(
                &gpu_out.data,
                cpu.data().as_flattened(),
                &format!("baboon rgb sigma {sigma}"),
            );
        }
    }
    let empty = Image::<u8>::new(0, 4, 0);
    assert!(
        blur_gpu(g, empty.view(), &BlurParams::default())
            .unwrap()
            .data
            .is_empty()
    );
    let e3 = Image::<[u8; 3]>::new(5, 0, [0; 3]);
    assert!(
        blur_gpu(g, e3.view(), &BlurParams::default())
            .unwrap()
            .data
            .is_empty()
    );
}

#[test]
fn f64_blur_is_bit_identical_to_the_scikit_image_path() {
    use morphoscope::gpu::{KernelTimer, upload_view};
    use morphoscope::ops::blur::BlurGpu;
    use morphoscope::ops::blur::cpu::{blur_f64, pack_rgb};
    let Some(g) = gpu() else { return };
    let Some(img) = sample_rgb("fruits.jpg") else {
        return;
    };
    let stream = g.new_stream().unwrap();
    let data = pack_rgb(img.view());
    let input = upload_view(&stream, img.view()).unwrap();
    let mut op = BlurGpu::new(g).unwrap();
    let mut timer = KernelTimer::new();
    for sigma in [0.0, 0.8, 2.5] {
        let p = BlurParams::with_sigma(sigma);
        op.enqueue_f64_named(&mut timer, input.image(), &p, "blur")
            .unwrap();
        let gpu_out = op.download_f64(&stream).unwrap();
        let cpu = blur_f64(&data, img.width(), img.height(), 3, &p).unwrap();
        let same = gpu_out
            .iter()
            .zip(&cpu)
            .filter(|(a, b)| a.to_bits() == b.to_bits())
            .count();
        eprintln!(
            "fruits f64 sigma {sigma}: {same}/{} bit-identical",
            cpu.len()
        );
        assert_eq!(same, cpu.len());
    }
}
