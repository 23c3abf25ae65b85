//! `gpu::GraphCache`: a captured sequence replays what it captured, a key seen before is not
//! captured again, and a capture whose enqueue fails ends the capture (the stream works on).

use cudarc::driver::sys::CUstreamCaptureStatus;
use cudarc::driver::{DevicePtr, PushKernelArg};
use morphoscope::gpu::{GpuError, GraphCache};

use crate::common::gpu;

#[test]
fn graphs_replay_cache_and_recover_from_a_failed_capture() {
    let Some(g) = gpu() else { return };
    let stream = g.new_stream().unwrap();
    // preprocess_gray16_to_gray8 (dst = src >> 8) as the captured work, on 4 pixels.
    let f = g
        .function("preprocess", "preprocess_gray16_to_gray8")
        .unwrap();
    let src = stream
        .clone_htod(&[0x0100u16, 0x0200, 0x0300, 0x0400])
        .unwrap();
    let mut dst = stream.alloc_zeros::<u8>(4).unwrap();
    // Raw addresses: no cudarc event tracking may run inside a capture.
    let s = {
        let (p, _record) = src.device_ptr(&stream);
        p
    };
    let d = {
        let (p, _record) = dst.device_ptr(&stream);
        p
    };
    let (stride, w, h) = (4u32, 4u32, 1u32);
    let enqueue = || -> Result<(), GpuError> {
        let mut l = stream.launch_builder(&f);
        l.arg(&s).arg(&stride).arg(&d).arg(&w).arg(&h);
        // SAFETY: 4 u16 in, 4 u8 out, one row; the kernel bounds-checks x < 4, y < 1.
        unsafe { l.launch(cudarc::driver::LaunchConfig::for_num_elems(4)) }?;
        Ok(())
    };
    let mut cache = GraphCache::new(2);
    cache.launch(&stream, 1u32, enqueue).unwrap();
    assert_eq!(stream.clone_dtoh(&dst).unwrap(), vec![1, 2, 3, 4]);
    // Overwrite the output, replay: the graph writes it again; no second capture.
    stream.memcpy_htod(&[9u8; 4], &mut dst).unwrap();
    cache
        .launch(&stream, 1u32, || {
            panic!("a cached key must not be captured again")
        })
        .unwrap();
    assert_eq!(stream.clone_dtoh(&dst).unwrap(), vec![1, 2, 3, 4]);
    assert_eq!(cache.captures(), 1);
    // A failing enqueue: the error comes back and the stream is not left capturing.
    let err = cache.launch(&stream, 2u32, || {
        Err(GpuError::Unsupported("test failure".into()))
    });
    assert!(matches!(err, Err(GpuError::Unsupported(_))), "{err:?}");
    assert_eq!(
        stream.capture_status().unwrap(),
        CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
    );
    stream.memcpy_htod(&[7u8; 4], &mut dst).unwrap();
    assert_eq!(stream.clone_dtoh(&dst).unwrap(), vec![7; 4]);
}
