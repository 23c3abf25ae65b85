//! CUDA linear openings and orientation maps (`kernels/orientation.cu`), bit-identical to the
//! CPU ([`super::cpu`]) for u8 and u16 images.
//!
//! Per frame, on the caller's stream: the input is transposed once when some angle has a
//! column-major family (`orientation_transpose`); one launch of `orientation_lines`
//! computes the openings of every angle (one thread per line and zone, `blockIdx.y` = angle)
//! into a stack of planes and accumulates each angle's spectrum; `orientation_reduce` folds
//! the planes into the strength and first-argmax maps; `orientation_finish` writes the
//! strength in the input domain and the colour picture. Angles whose line family coincides are
//! computed once ([`OrientationTuning::dedup`]). When the stack of planes would exceed
//! [`OrientationTuning::stack_bytes`], the angles are processed in several launches (chunks) and
//! the reduce carries the running maps over. Device buffers are allocated on first use and kept
//! while the frame size and parameters stay the same. Each line is opened by van Herk /
//! Gil-Werman with a ring of L words a thread; segments longer than
//! [`OrientationTuning::shared_ring_words`] (96 by default) use the `orientation_lines_global_*`
//! variant, whose rings live in global memory. Launch
//! shapes come from [`OrientationTuning`] (`tuning.rs`), chosen per device.
//!
//! Timer regions: `orientation_transpose`, `orientation_lines`, `orientation_reduce`,
//! `orientation_finish`.

use std::cell::RefCell;
use std::sync::Arc;

use cudarc::driver::{
    CudaFunction, CudaSlice, CudaStream, DeviceRepr, LaunchConfig, PushKernelArg, ValidAsZeroBits,
};

use crate::gpu::launch::{alloc_zeroed, blocks_for, linear};
use crate::gpu::{DeviceImage, GpuContext, GpuError, HostPixel, KernelTimer, Readback, round_trip};
use crate::image::{Image, ImageView};
use crate::ops::OpError;

use super::plan::{Plan, to_i32};
use super::tuning::OrientationTuning;
use super::{LinearOpeningParams, OrientationOutput, OrientationParams, Sample, hue_of_angle};

/// Pixel types of the CUDA path (u8 and u16).
pub trait GpuSample:
    Sample + HostPixel<Sample = Self> + DeviceRepr + ValidAsZeroBits + Unpin
{
    /// Kernel name suffix.
    const SUFFIX: &'static str;
}
impl GpuSample for u8 {
    const SUFFIX: &'static str = "u8";
}
impl GpuSample for u16 {
    const SUFFIX: &'static str = "u16";
}

/// The device state shared by the single-opening and orientation front ends.
struct Engine<T: GpuSample> {
    lines: CudaFunction,
    lines_global: CudaFunction,
    transpose: CudaFunction,
    reduce: CudaFunction,
    finish: CudaFunction,
    sm_count: usize,
    tuning: OrientationTuning,
    plan: Option<Plan>,
    img_t: Option<CudaSlice<T>>,
    planes: Option<CudaSlice<T>>,
    table: Option<CudaSlice<i32>>,
    plane_transposed: Option<CudaSlice<i32>>,
    plane_angle: Option<CudaSlice<i32>>,
    ring: Option<CudaSlice<u32>>,
    spectrum: Option<CudaSlice<u64>>,
    best: Option<CudaSlice<T>>,
    index: Option<CudaSlice<u16>>,
    strength: Option<CudaSlice<T>>,
    rgb: Option<CudaSlice<u8>>,
    hue: Option<CudaSlice<u16>>,
    out: Option<CudaSlice<T>>,
    closing: bool,
}

fn missing(what: &str) -> OpError {
    OpError::Gpu(GpuError::Unsupported(format!(
        "{what}: nothing enqueued yet"
    )))
}

impl<T: GpuSample> Engine<T> {
    fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        let name = |what: &str| format!("orientation_{what}_{}", T::SUFFIX);
        Ok(Self {
            lines: gpu.function("orientation", &name("lines"))?,
            lines_global: gpu.function("orientation", &name("lines_global"))?,
            transpose: gpu.function("orientation", &name("transpose"))?,
            reduce: gpu.function("orientation", &name("reduce"))?,
            finish: gpu.function("orientation", &name("finish"))?,
            sm_count: usize::try_from(gpu.info().multiprocessors)
                .unwrap_or(1)
                .max(1),
            tuning: OrientationTuning::for_device(gpu.info()),
            plan: None,
            img_t: None,
            planes: None,
            table: None,
            plane_transposed: None,
            plane_angle: None,
            ring: None,
            spectrum: None,
            best: None,
            index: None,
            strength: None,
            rgb: None,
            hue: None,
            out: None,
            closing: false,
        })
    }

    /// Makes the plan and (re)allocates buffers when the size or parameters change.
    fn prepare(
        &mut self,
        stream: &Arc<CudaStream>,
        width: usize,
        height: usize,
        length: u32,
        angles_deg: &[f64],
        orientation: bool,
    ) -> Result<(), OpError> {
        let elem = std::mem::size_of::<T>();
        let same = self.plan.as_ref().is_some_and(|p| {
            p.width == width
                && p.height == height
                && p.length == length
                && p.angles_deg == angles_deg
                && p.tuning == self.tuning
        });
        if !same {
            let plan = Plan::new(
                width,
                height,
                length,
                angles_deg,
                self.tuning,
                self.sm_count,
                elem,
            )?;
            let n = width * height;
            let (w, h) = (width, height);
            let words: Vec<i32> = plan.planes.iter().flat_map(|p| p.to_words()).collect();
            let flags: Vec<i32> = plan.planes.iter().map(|p| p.transposed).collect();
            let hues: Vec<u16> = angles_deg.iter().map(|&a| hue_of_angle(a)).collect();
            self.table = Some(stream.clone_htod(&words)?);
            self.plane_transposed = Some(stream.clone_htod(&flags)?);
            self.plane_angle = Some(stream.clone_htod(&plan.plane_angle)?);
            self.hue = Some(stream.clone_htod(&hues)?);
            self.img_t = if plan.any_transposed {
                Some(alloc_zeroed(stream, n, "transposed frame", w, h)?)
            } else {
                None
            };
            self.planes = Some(alloc_zeroed(
                stream,
                n * plan.max_chunk(),
                "opening planes",
                w,
                h,
            )?);
            self.ring = Some(alloc_zeroed(
                stream,
                plan.global_ring_len.max(1),
                "line rings",
                w,
                h,
            )?);
            self.spectrum = Some(alloc_zeroed(
                stream,
                plan.planes.len().max(1),
                "spectrum",
                w,
                h,
            )?);
            self.best = None;
            self.index = None;
            self.strength = None;
            self.rgb = None;
            self.out = None;
            self.plan = Some(plan);
        }
        let n = width * height;
        if orientation && self.best.is_none() {
            self.best = Some(alloc_zeroed(
                stream,
                n,
                "strength (running)",
                width,
                height,
            )?);
            self.index = Some(alloc_zeroed(stream, n, "orientation index", width, height)?);
            self.strength = Some(alloc_zeroed(stream, n, "strength", width, height)?);
            self.rgb = Some(alloc_zeroed(stream, 3 * n, "colour", width, height)?);
        }
        if !orientation && self.out.is_none() {
            self.out = Some(alloc_zeroed(stream, n, "opening", width, height)?);
        }
        Ok(())
    }

    /// Enqueues the transpose of the frame into `img_t`, for the angles run on the transposed
    /// frame.
    fn transpose_frame(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, T>,
    ) -> Result<(), OpError> {
        let mut img_t = self
            .img_t
            .take()
            .ok_or_else(|| missing("transposed frame"))?;
        let r = self.launch_transpose(timer, input, &mut img_t, false);
        self.img_t = Some(img_t);
        r
    }

    /// Enqueues the transpose of `src` (`src.height` rows of `src.width`) into `dst`, inverting
    /// the samples when `invert`.
    fn launch_transpose(
        &self,
        timer: &mut KernelTimer,
        src: DeviceImage<'_, T>,
        dst: &mut CudaSlice<T>,
        invert: bool,
    ) -> Result<(), OpError> {
        let DeviceImage {
            stream,
            data: src,
            width: cols,
            height: rows,
            ..
        } = src;
        if dst.len() < rows * cols {
            return Err(OpError::InvalidParam(format!(
                "transpose of {cols}x{rows} into {} elements",
                dst.len()
            )));
        }
        let cfg = LaunchConfig {
            grid_dim: (blocks_for(cols, 32), blocks_for(rows, 32), 1),
            block_dim: (32, 8, 1),
            shared_mem_bytes: 0,
        };
        let (r32, c32, inv) = (
            to_i32(rows, "rows")?,
            to_i32(cols, "cols")?,
            i32::from(invert),
        );
        timer.time(stream, "orientation_transpose", || {
            let mut b = stream.launch_builder(&self.transpose);
            b.arg(src).arg(dst).arg(&r32).arg(&c32).arg(&inv);
            // SAFETY: src and dst hold rows*cols elements (the image's own check and the one
            // above); the kernel reads and writes only inside rows x cols.
            unsafe { b.launch(cfg) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Enqueues the lines kernel for chunk `c` of the plan, reading `input` (and its transpose).
    fn launch_lines(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, T>,
        chunk: usize,
        flags: i32,
        to_out: bool,
    ) -> Result<(), OpError> {
        let DeviceImage {
            stream,
            data: input,
            ..
        } = input;
        let plan = self.plan.as_ref().ok_or_else(|| missing("plan"))?;
        let (first, count, grid_x) = plan.chunks[chunk];
        let (w, h) = (to_i32(plan.width, "width")?, to_i32(plan.height, "height")?);
        let r = ((plan.length.max(1) - 1) / 2) as i32;
        let cfg = LaunchConfig {
            grid_dim: (grid_x, count as u32, 1),
            block_dim: (plan.tuning.block, 1, 1),
            shared_mem_bytes: plan.shared_bytes,
        };
        let table = self
            .table
            .as_ref()
            .ok_or_else(|| missing("table"))?
            .slice(first * 8..(first + count) * 8);
        let spectrum = self.spectrum.as_mut().ok_or_else(|| missing("spectrum"))?;
        let mut spectrum = spectrum.slice_mut(first..first + count);
        let ring = self.ring.as_mut().ok_or_else(|| missing("line rings"))?;
        let dst = if to_out {
            self.out.as_mut()
        } else {
            self.planes.as_mut()
        }
        .ok_or_else(|| missing("planes"))?;
        let img_t = self.img_t.as_ref().unwrap_or(input);
        let lines = if plan.ring_in_shared {
            &self.lines
        } else {
            &self.lines_global
        };
        timer.time(stream, "orientation_lines", || {
            let mut b = stream.launch_builder(lines);
            b.arg(input)
                .arg(img_t)
                .arg(&w)
                .arg(&h)
                .arg(&r)
                .arg(&table)
                .arg(dst)
                .arg(ring)
                .arg(&mut spectrum)
                .arg(&flags);
            // SAFETY: the table describes `count` angles whose lines lie inside the W x H frame
            // (geometry.rs, tested against brute force); `dst` holds `count` planes of W*H (the
            // planes buffer is sized for the largest chunk; a single opening has one plane);
            // the rings take block x L words of dynamic shared memory, or, for the global
            // variant, grid threads x L words of `ring`, as the kernel indexes them.
            unsafe { b.launch(cfg) }?;
            Ok(())
        })?;
        Ok(())
    }
}

/// One linear opening or closing per frame on the GPU.
pub struct LinearOpeningGpu<T: GpuSample> {
    engine: Engine<T>,
    size: (usize, usize),
}

impl<T: GpuSample> LinearOpeningGpu<T> {
    /// Resolves the kernels (buffers come with the first frame).
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        Ok(Self {
            engine: Engine::new(gpu)?,
            size: (0, 0),
        })
    }

    /// The tuning in use.
    #[must_use]
    pub fn tuning(&self) -> &OrientationTuning {
        &self.engine.tuning
    }

    /// Changes the tuning from the next frame on (checked when the next frame is planned).
    pub fn set_tuning(&mut self, tuning: OrientationTuning) {
        self.engine.tuning = tuning;
    }

    /// Enqueues the opening (closing) of a packed grey image.
    pub fn enqueue(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, T>,
        params: &LinearOpeningParams,
    ) -> Result<(), OpError> {
        params.validate()?;
        input.check(1, "linear openings")?;
        let DeviceImage {
            stream,
            width,
            height,
            ..
        } = input;
        self.size = (width, height);
        if width == 0 || height == 0 {
            return Ok(());
        }
        let e = &mut self.engine;
        e.prepare(stream, width, height, params.length, &[params.angle], false)?;
        let plan = e.plan.as_ref().ok_or_else(|| missing("plan"))?;
        let transposed = plan.any_transposed;
        if plan.length == 1 {
            let out = e.out.as_mut().ok_or_else(|| missing("output"))?;
            stream.memcpy_dtod(&input.data.slice(0..width * height), out)?;
            return Ok(());
        }
        let closing = params.closing;
        if transposed {
            e.transpose_frame(timer, input)?;
            e.launch_lines(timer, input, 0, i32::from(closing), false)?;
            let planes = e.planes.take().ok_or_else(|| missing("planes"))?;
            let mut out = e.out.take().ok_or_else(|| missing("output"))?;
            // The opening of the transposed frame: `width` rows of `height`.
            let r = DeviceImage::new(stream, &planes, height, width, 1)
                .map_err(OpError::from)
                .and_then(|opened| e.launch_transpose(timer, opened, &mut out, closing));
            e.planes = Some(planes);
            e.out = Some(out);
            r
        } else {
            e.launch_lines(timer, input, 0, if closing { 3 } else { 0 }, true)
        }
    }

    /// The device buffer of the last result (packed, width x height), if any.
    #[must_use]
    pub fn output(&self) -> Option<&CudaSlice<T>> {
        self.engine.out.as_ref()
    }

    /// The last result, taking the device buffer out of the op (packed, `width * height`
    /// samples, written on the enqueue's stream: work that reads it must be ordered after
    /// that stream's work). For a caller that keeps the result on the device (the Python
    /// package). `None` before the first frame and for an empty frame.
    #[must_use]
    pub fn into_output(mut self) -> Option<CudaSlice<T>> {
        let (w, h) = self.size;
        if w == 0 || h == 0 {
            return None;
        }
        self.engine.out.take()
    }

    /// Copies the last result to the host (blocks until the stream's work is done).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<Image<T>, OpError> {
        let (w, h) = self.size;
        if w == 0 || h == 0 {
            return Ok(Image::new(w, h, T::default()));
        }
        let out = self.engine.out.as_ref().ok_or_else(|| missing("output"))?;
        stream.synchronize()?;
        let v = stream.clone_dtoh(&out.slice(0..w * h))?;
        Ok(Image::from_vec(w, h, v)?)
    }
}

/// Orientation maps (strength, orientation, spectrum, colour) per frame on the GPU.
pub struct OrientationGpu<T: GpuSample> {
    engine: Engine<T>,
    size: (usize, usize),
    angles: Vec<f64>,
    /// Pinned buffer for the colour picture's readback.
    colour_readback: RefCell<Readback<u8>>,
}

impl<T: GpuSample> OrientationGpu<T> {
    /// Resolves the kernels (buffers come with the first frame).
    pub fn new(gpu: &GpuContext) -> Result<Self, OpError> {
        Ok(Self {
            engine: Engine::new(gpu)?,
            size: (0, 0),
            angles: Vec::new(),
            colour_readback: RefCell::new(Readback::new(gpu.cuda())),
        })
    }

    /// The tuning in use.
    #[must_use]
    pub fn tuning(&self) -> &OrientationTuning {
        &self.engine.tuning
    }

    /// Changes the tuning from the next frame on (checked when the next frame is planned).
    pub fn set_tuning(&mut self, tuning: OrientationTuning) {
        self.engine.tuning = tuning;
    }

    /// Enqueues the orientation maps of a packed grey image.
    pub fn enqueue(
        &mut self,
        timer: &mut KernelTimer,
        input: DeviceImage<'_, T>,
        params: &OrientationParams,
    ) -> Result<(), OpError> {
        params.validate()?;
        input.check(1, "orientation maps")?;
        let DeviceImage {
            stream,
            width,
            height,
            ..
        } = input;
        self.size = (width, height);
        self.angles = params.angle_degrees();
        if width == 0 || height == 0 {
            return Ok(());
        }
        let e = &mut self.engine;
        e.closing = params.closing;
        e.prepare(stream, width, height, params.length, &self.angles, true)?;
        let plan = e.plan.clone().ok_or_else(|| missing("plan"))?;
        let spectrum = e.spectrum.as_mut().ok_or_else(|| missing("spectrum"))?;
        stream.memset_zeros(spectrum)?;
        if plan.any_transposed {
            e.transpose_frame(timer, input)?;
        }
        let (w, h) = (to_i32(width, "width")?, to_i32(height, "height")?);
        let rcfg = LaunchConfig {
            grid_dim: (blocks_for(width, 32), blocks_for(height, 32), 1),
            block_dim: (32, 8, 1),
            shared_mem_bytes: 0,
        };
        for (c, &(first, count, _)) in plan.chunks.iter().enumerate() {
            e.launch_lines(timer, input, c, i32::from(params.closing), false)?;
            let planes = e.planes.as_ref().ok_or_else(|| missing("planes"))?;
            let tflags = e
                .plane_transposed
                .as_ref()
                .ok_or_else(|| missing("flags"))?
                .slice(first..first + count);
            let aidx = e
                .plane_angle
                .as_ref()
                .ok_or_else(|| missing("angle index"))?
                .slice(first..first + count);
            let best = e.best.as_mut().ok_or_else(|| missing("best"))?;
            let index = e.index.as_mut().ok_or_else(|| missing("index"))?;
            let (n32, init) = (count as i32, i32::from(c == 0));
            let reduce = &e.reduce;
            timer.time(stream, "orientation_reduce", || {
                let mut b = stream.launch_builder(reduce);
                b.arg(planes)
                    .arg(&tflags)
                    .arg(&aidx)
                    .arg(&n32)
                    .arg(best)
                    .arg(index)
                    .arg(&w)
                    .arg(&h)
                    .arg(&init);
                // SAFETY: `planes` holds at least `count` planes of W*H written by the lines
                // kernel of this chunk; the flag and angle slices have `count` entries; best and
                // index hold W*H elements.
                unsafe { b.launch(rcfg) }?;
                Ok(())
            })?;
        }
        let n = width * height;
        let n32 = u32::try_from(n).map_err(|_| OpError::Unsupported("frame too large".into()))?;
        let closing = i32::from(params.closing);
        let best = e.best.as_ref().ok_or_else(|| missing("best"))?;
        let index = e.index.as_ref().ok_or_else(|| missing("index"))?;
        let hue = e.hue.as_ref().ok_or_else(|| missing("hue"))?;
        let strength = e.strength.as_mut().ok_or_else(|| missing("strength"))?;
        let rgb = e.rgb.as_mut().ok_or_else(|| missing("colour"))?;
        let finish = &e.finish;
        timer.time(stream, "orientation_finish", || {
            let mut b = stream.launch_builder(finish);
            b.arg(best)
                .arg(index)
                .arg(hue)
                .arg(strength)
                .arg(rgb)
                .arg(&n32)
                .arg(&closing);
            // SAFETY: best, index and strength hold n elements, rgb 3n; every index written by
            // the reduce is an angle index < hue.len().
            unsafe { b.launch(linear(n, 256)) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Device buffers of the last result: (strength, angle index, RGB colour picture), packed.
    #[must_use]
    pub fn outputs(&self) -> Option<(&CudaSlice<T>, &CudaSlice<u16>, &CudaSlice<u8>)> {
        let e = &self.engine;
        Some((e.strength.as_ref()?, e.index.as_ref()?, e.rgb.as_ref()?))
    }

    /// The colour picture of the last frame on the device (packed RGB, `3 * width * height`
    /// bytes, written on the enqueue's stream): for the compose step. `None` before the first
    /// frame and for an empty frame.
    #[must_use]
    pub fn colour(&self) -> Option<&CudaSlice<u8>> {
        let (w, h) = self.size;
        if w == 0 || h == 0 {
            return None;
        }
        self.engine.rgb.as_ref()
    }

    /// Copies the last maps and spectrum to the host (blocks until the stream's work is done).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<OrientationOutput<T>, OpError> {
        let (w, h) = self.size;
        let e = &self.engine;
        let k = self.angles.len();
        if w == 0 || h == 0 {
            return Ok(OrientationOutput {
                angles_deg: self.angles.clone(),
                strength: Image::new(w, h, T::BOTTOM),
                angle_index: Image::new(w, h, 0),
                spectrum: vec![0.0; k],
                closing: e.closing,
            });
        }
        stream.synchronize()?;
        let n = w * h;
        let strength = stream.clone_dtoh(
            &e.strength
                .as_ref()
                .ok_or_else(|| missing("strength"))?
                .slice(0..n),
        )?;
        let index = stream.clone_dtoh(
            &e.index
                .as_ref()
                .ok_or_else(|| missing("index"))?
                .slice(0..n),
        )?;
        let spectrum = self.download_spectrum(stream)?;
        Ok(OrientationOutput {
            angles_deg: self.angles.clone(),
            strength: Image::from_vec(w, h, strength)?,
            angle_index: Image::from_vec(w, h, index)?,
            spectrum,
            closing: e.closing,
        })
    }

    /// The strength and angle-index maps of the last frame, taking the device buffers out of
    /// the op (packed, `width * height` each, written on the enqueue's stream: work that reads
    /// them must be ordered after that stream's work); the angles they index are
    /// [`OrientationGpu::angles_deg`] and the spectrum [`OrientationGpu::download_spectrum`]
    /// (read them first). For a caller that keeps the maps on the device (the Python package).
    /// `None` before the first frame and for an empty frame.
    #[must_use]
    pub fn into_maps(mut self) -> Option<(CudaSlice<T>, CudaSlice<u16>)> {
        let (w, h) = self.size;
        if w == 0 || h == 0 {
            return None;
        }
        Some((self.engine.strength.take()?, self.engine.index.take()?))
    }

    /// The angular spectrum of the last frame (one sum per angle; blocks until the stream's
    /// work is done), without the maps: a readback of one word per angle.
    pub fn download_spectrum(&self, stream: &Arc<CudaStream>) -> Result<Vec<f64>, OpError> {
        let (w, h) = self.size;
        let e = &self.engine;
        if w == 0 || h == 0 {
            return Ok(vec![0.0; self.angles.len()]);
        }
        let plan = e.plan.as_ref().ok_or_else(|| missing("plan"))?;
        stream.synchronize()?;
        let sums = stream.clone_dtoh(e.spectrum.as_ref().ok_or_else(|| missing("spectrum"))?)?;
        let full = (w * h) as f64 * T::TOP.to_f64();
        Ok(plan
            .angle_plane
            .iter()
            .map(|&p| {
                let s = sums.get(p).copied().unwrap_or(0) as f64;
                if e.closing { full - s } else { s }
            })
            .collect())
    }

    /// The angles of the last frame in degrees.
    #[must_use]
    pub fn angles_deg(&self) -> &[f64] {
        &self.angles
    }

    /// Whether the last frame used closings.
    #[must_use]
    pub fn closing(&self) -> bool {
        self.engine.closing
    }

    /// Copies the last colour picture to the host (blocks until the stream's work is done).
    pub fn download_colour(&self, stream: &Arc<CudaStream>) -> Result<Image<[u8; 3]>, OpError> {
        let (w, h) = self.size;
        if w == 0 || h == 0 {
            return Ok(Image::new(w, h, [0; 3]));
        }
        let rgb = self.engine.rgb.as_ref().ok_or_else(|| missing("colour"))?;
        let v = self
            .colour_readback
            .borrow_mut()
            .fetch(stream, rgb, 3 * w * h)?;
        Ok(Image::from_vec(w, h, v.as_chunks::<3>().0.to_vec())?)
    }
}

/// Convenience: upload, one opening (closing), download. For the CLI and the parity tests.
pub fn linear_opening_gpu<T: GpuSample>(
    gpu: &GpuContext,
    img: ImageView<'_, T>,
    params: &LinearOpeningParams,
) -> Result<Image<T>, OpError> {
    round_trip(
        &gpu.new_stream()?,
        img,
        &mut LinearOpeningGpu::<T>::new(gpu)?,
        |op, timer, input| op.enqueue(timer, input, params),
        |op, stream| op.download(stream),
    )
}

/// Convenience: upload, orientation maps, download (maps and spectrum; the colour picture is
/// [`OrientationOutput::colour`], equal to the GPU's). For the CLI and the parity tests.
pub fn orientation_gpu<T: GpuSample>(
    gpu: &GpuContext,
    img: ImageView<'_, T>,
    params: &OrientationParams,
) -> Result<OrientationOutput<T>, OpError> {
    round_trip(
        &gpu.new_stream()?,
        img,
        &mut OrientationGpu::<T>::new(gpu)?,
        |op, timer, input| op.enqueue(timer, input, params),
        |op, stream| op.download(stream),
    )
}
