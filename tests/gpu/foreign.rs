//! Results kept on the device for another library (the Python package's CUDA arrays): the
//! conversions of `ops::convert` against their host twins, device memory owned elsewhere read in
//! place (`gpu::foreign`), and the device accessors of the ops against their downloads.

// Helpers outside `#[test]` functions unwrap and panic as the tests do.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use morphoscope::gpu::{
    DeviceImage, ForeignSlice, GpuContext, KernelTimer, MemoryKind, free_after_default_stream,
    pointer_info, upload_view, wait_for_stream,
};
use morphoscope::image::Image;
use morphoscope::ops::cca::{CcaGpu, CcaParams, Polarity, Source, Threshold, cca_gpu};
use morphoscope::ops::convert::{labels_to_i32_gpu, labels_to_i64_gpu, lookup_f32_gpu};
use morphoscope::ops::maxtree::{
    Attribute, MaxTreeGpu, MaxTreeParams, Rule, TreeKind, maxtree_gpu,
};
use morphoscope::ops::orientation::{OrientationGpu, OrientationParams, orientation_gpu};
use morphoscope::ops::segmentation::{SegmentationGpu, SegmentationParams, segment_gpu_rgb};

use crate::common::{Rng, gpu, random_gray};

fn ptr_of<T>(s: &CudaSlice<T>) -> u64 {
    let (p, _sync) = s.device_ptr(s.stream());
    p
}

fn read<T: cudarc::driver::DeviceRepr + Default + Clone>(
    stream: &Arc<CudaStream>,
    s: &CudaSlice<T>,
    n: usize,
) -> Vec<T> {
    let v = stream.clone_dtoh(&s.slice(0..n)).unwrap();
    stream.synchronize().unwrap();
    v
}

#[test]
fn conversions_match_their_host_twins() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let mut rng = Rng(5);
    for n in [1usize, 7, 1000, (1 << 20) + 3] {
        let labels: Vec<u32> = (0..n)
            .map(|i| match i % 5 {
                0 => 0,
                1 => u32::MAX - (rng.next_u64() as u32 % 7),
                _ => rng.next_u64() as u32,
            })
            .collect();
        let dev = stream.clone_htod(&labels).unwrap();
        let wide = labels_to_i64_gpu(g, &stream, &dev, n).unwrap();
        let want: Vec<i64> = labels.iter().map(|&v| i64::from(v)).collect();
        assert_eq!(read(&stream, &wide, n), want, "i64, n = {n}");
        let narrow = labels_to_i32_gpu(g, &stream, &dev, n).unwrap();
        let want: Vec<i32> = labels.iter().map(|&v| v as i32).collect();
        assert_eq!(read(&stream, &narrow, n), want, "i32, n = {n}");
        let index: Vec<u16> = (0..n).map(|_| rng.below(40) as u16).collect();
        let table: Vec<f32> = (0..37).map(|k| k as f32 * 4.864_865).collect();
        let dev_index = stream.clone_htod(&index).unwrap();
        for t in [&table[..], &[]] {
            let got = lookup_f32_gpu(g, &stream, &dev_index, n, t).unwrap();
            let want: Vec<f32> = index
                .iter()
                .map(|&k| t.get(usize::from(k)).copied().unwrap_or(0.0))
                .collect();
            let got = read(&stream, &got, n);
            assert!(
                got.iter()
                    .zip(&want)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "lookup, n = {n}, table of {}",
                t.len()
            );
        }
        assert!(labels_to_i64_gpu(g, &stream, &dev, n + 1).is_err());
    }
}

#[test]
fn pointer_info_knows_device_memory_and_refuses_host_memory() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    let buf = stream.alloc_zeros::<u16>(1000).unwrap();
    let p = ptr_of(&buf);
    let info = pointer_info(g, p + 200).unwrap();
    assert_eq!(
        (info.ordinal, info.memory),
        (g.info().ordinal, MemoryKind::Device)
    );
    if info.allocation.is_some() {
        assert!(info.bytes_from(p).unwrap() >= 2000);
        assert_eq!(
            info.bytes_from(p + 200).unwrap() + 200,
            info.bytes_from(p).unwrap()
        );
    }
    let host = vec![0u8; 4096];
    assert!(pointer_info(g, host.as_ptr() as u64).is_err());
}

fn maxtree_params() -> MaxTreeParams {
    MaxTreeParams {
        enabled: true,
        tree: TreeKind::Max,
        attribute: Attribute::Area,
        threshold: 30.0,
        rule: Rule::Direct,
        connectivity: 8,
    }
}

/// Another library's image: uploaded on its own stream, handed over as a bare pointer.
fn owned_elsewhere(g: &GpuContext, img: &Image<u8>) -> (Arc<CudaStream>, CudaSlice<u8>) {
    let owner = g.new_stream().unwrap();
    let up = upload_view(&owner, img.view()).unwrap();
    (owner, up.data)
}

#[test]
fn foreign_memory_is_read_in_place_and_left_allocated() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(11);
    let img = random_gray(&mut rng, 301, 203, 12);
    let (w, h) = (img.width(), img.height());
    let p = maxtree_params();
    let want = maxtree_gpu(g, img.view(), &p).unwrap().filtered;
    let (owner, data) = owned_elsewhere(g, &img);
    let ptr = ptr_of(&data);
    let stream = g.new_stream().unwrap();
    // SAFETY (test): `owner` is a live stream of this context.
    unsafe { wait_for_stream(&stream, owner.cu_stream() as usize) }.unwrap();
    assert!(unsafe { wait_for_stream(&stream, 0) }.is_err());
    // The legacy default stream (1), as CuPy names it.
    unsafe { wait_for_stream(&stream, 1) }.unwrap();
    // SAFETY (test): `data` holds w * h bytes and outlives the wrapper.
    let foreign = unsafe { ForeignSlice::<u8>::new(&stream, ptr, w * h) };
    let mut op = MaxTreeGpu::new(g).unwrap();
    let image = DeviceImage::new(&stream, foreign.slice(), w, h, 1).unwrap();
    op.enqueue(&mut KernelTimer::new(), image, &p).unwrap();
    let filtered = op.into_filtered::<u8>().unwrap();
    stream.synchronize().unwrap();
    drop(foreign);
    let got = Image::from_vec(w, h, read(&stream, &filtered, w * h)).unwrap();
    assert_eq!(morphoscope::image::DynImage::Gray8(got), want);
    // The owner's buffer is untouched and still allocated.
    assert_eq!(read(&owner, &data, w * h), img.data().to_vec());
    assert!(ptr_of(&filtered) != ptr);
    free_after_default_stream(filtered).unwrap();
}

#[test]
fn device_accessors_equal_the_downloads() {
    let Some(g) = gpu() else { return };
    let mut rng = Rng(3);
    let img = random_gray(&mut rng, 257, 190, 6);
    let (w, h, n) = (img.width(), img.height(), img.width() * img.height());

    // Labels and their count.
    let cca = CcaParams {
        threshold: Threshold::Fixed(0),
        polarity: Polarity::Bright,
        connectivity: 8,
        source: Source::Frame,
        learning_rate: CcaParams::default().learning_rate,
    };
    let want = cca_gpu(g, img.view(), &cca).unwrap();
    let up = upload_view(&g.new_stream().unwrap(), img.view()).unwrap();
    let stream = &up.stream;
    let mut op = CcaGpu::new(g).unwrap();
    let mut timer = KernelTimer::new();
    op.enqueue_binarize(&mut timer, up.image(), &cca).unwrap();
    op.enqueue_labeling(stream, &mut timer, 8, None).unwrap();
    let (labels, lw, lh) = op.device_labels().unwrap();
    assert_eq!((lw, lh), (w, h));
    assert_eq!(read(stream, labels, n), want.labels.data().to_vec());
    assert_eq!(op.download_count(stream).unwrap(), want.table.len());

    // Orientation maps, the angle map looked up on the device.
    let op_params = OrientationParams {
        enabled: true,
        length: 9,
        angles: 12,
        angle_list: Vec::new(),
        closing: false,
    };
    let want = orientation_gpu(g, img.view(), &op_params).unwrap();
    let mut op = OrientationGpu::<u8>::new(g).unwrap();
    op.enqueue(&mut KernelTimer::new(), up.image(), &op_params)
        .unwrap();
    assert_eq!(op.download_spectrum(stream).unwrap(), want.spectrum);
    let table: Vec<f32> = op.angles_deg().iter().map(|&a| a as f32).collect();
    let (strength, index) = op.into_maps().unwrap();
    let angle = lookup_f32_gpu(g, stream, &index, n, &table).unwrap();
    assert_eq!(read(stream, &strength, n), want.strength.data().to_vec());
    let want_angle: Vec<u32> = want
        .angle_map_deg()
        .data()
        .iter()
        .map(|a| a.to_bits())
        .collect();
    let got_angle: Vec<u32> = read(stream, &angle, n)
        .iter()
        .map(|a| a.to_bits())
        .collect();
    assert_eq!(got_angle, want_angle);

    // Segmentation labels after the summary (the frame is final then).
    let rgb = Image::from_fn(w, h, |x, y| {
        let v = img.get(x, y);
        [v, v / 2, 255 - v]
    });
    let sp = SegmentationParams {
        scale: 100.0,
        ..SegmentationParams::default()
    };
    let want = segment_gpu_rgb(g, rgb.view(), &sp).unwrap();
    let up = upload_view(&g.new_stream().unwrap(), rgb.view()).unwrap();
    let mut op = SegmentationGpu::new(g).unwrap();
    op.enqueue(&mut KernelTimer::new(), up.image(), &sp)
        .unwrap();
    let summary = op.download_summary(&up.stream).unwrap();
    assert_eq!(summary.segment_count, want.segment_count);
    let (labels, _, _) = op.device_labels().unwrap();
    let wide = labels_to_i64_gpu(g, &up.stream, labels, n).unwrap();
    let want: Vec<i64> = want.labels.data().iter().map(|&v| i64::from(v)).collect();
    assert_eq!(read(&up.stream, &wide, n), want);
}
