//! After the rounds: raster-order numbering, hierarchy levels, and the readbacks: the counters
//! (which set the next frame's round caps, or run the frame again with larger caps), the labels
//! or only the small results, the hierarchy; and the one-shot helpers for host images.

use std::sync::Arc;

use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig, PushKernelArg};

use super::buffers::FrameBuffers;
use super::enqueue::{Body, timed};
use super::history::{Produced, Recent, RoundsUsed, giant_masks, read_rounds};
use super::layout::{C_GIANT, NCTL, SCAN_BLOCK};
use super::{SegmentationGpu, SegmentationHierarchy, SegmentationOutput, SegmentationParams};
use crate::gpu::launch::{ExLaunch, blocks_for, one_block};
use crate::gpu::{GpuContext, GpuError, KernelTimer, upload_view};
use crate::image::{Image, ImageView};
use crate::ops::OpError;

/// What a download reads back of a frame's counters.
struct FrameCounts {
    /// Hierarchy levels (rounds that merged).
    levels: Vec<u16>,
    used: RoundsUsed,
    /// Rounds with a giant tree ([`Body::giant`]).
    giant: [u64; 2],
    /// The op's info words (`info[0]`: the segment count).
    info: Vec<u32>,
}

fn cfg_scan(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks_for(n, SCAN_BLOCK), 1, 1),
        block_dim: (SCAN_BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl SegmentationGpu {
    /// Raster-order numbering of `comp` (minpix must hold `SEG_NONE`); `pdl`: as programmatic
    /// dependent launches (each kernel waits for the one before it itself).
    pub(super) fn enqueue_numbering(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
        pdl: bool,
    ) -> Result<(), GpuError> {
        let Some(b) = self.buffers.as_ref() else {
            return Ok(());
        };
        let kn = &self.kernels;
        let p = b.p;
        let n = b.width * b.height;
        let (w, nn) = (b.width as u32, n as u32);
        let nblocks = blocks_for(n, SCAN_BLOCK);
        let cfg = self.launch.stride(n);
        timed(timer, stream, "segmentation_relabel", || {
            let mut l = ExLaunch::new(stream, &kn.minpix, pdl);
            l.arg(&p.comp).arg(&p.minpix).arg(&w).arg(&nn);
            // SAFETY: grid-stride over pixels < n; comp values are roots < n.
            unsafe { l.launch(cfg) }?;
            let mut l = ExLaunch::new(stream, &kn.scan_count, pdl);
            l.arg(&p.comp).arg(&p.minpix).arg(&p.blocksum).arg(&nn);
            // SAFETY: SCAN_BLOCK threads per block, one block sum each (blocksum has nblocks).
            unsafe { l.launch(cfg_scan(n)) }?;
            let mut l = ExLaunch::new(stream, &kn.scan_blocks, pdl);
            l.arg(&p.blocksum).arg(&nblocks).arg(&p.info);
            // SAFETY: a single block scanning nblocks entries.
            unsafe { l.launch(one_block(SCAN_BLOCK)) }?;
            let mut l = ExLaunch::new(stream, &kn.scan_label, pdl);
            l.arg(&p.comp)
                .arg(&p.minpix)
                .arg(&p.blocksum)
                .arg(&p.rootlabel)
                .arg(&nn);
            // SAFETY: as scan_count; rootlabel is indexed by roots < n.
            unsafe { l.launch(cfg_scan(n)) }?;
            let mut l = ExLaunch::new(stream, &kn.labels, pdl);
            l.arg(&p.comp).arg(&p.rootlabel).arg(&p.labels).arg(&nn);
            // SAFETY: grid-stride over pixels < n.
            unsafe { l.launch(cfg) }?;
            Ok(())
        })?;
        Ok(())
    }

    /// Enqueues the labels of hierarchy `level` (0: one segment per pixel; `levels() - 1` or
    /// more: the final segmentation) of the last segmented frame, without recomputing it, into
    /// the device labels ([`SegmentationGpu::device_labels`]); [`SegmentationGpu::download`] then returns
    /// that level.
    pub fn enqueue_level(
        &mut self,
        stream: &Arc<CudaStream>,
        timer: &mut KernelTimer,
        level: u32,
    ) -> Result<(), OpError> {
        let Some(mut prod) = self.history.produced.get() else {
            return Err(OpError::InvalidParam(
                "enqueue_level needs a segmented frame (call enqueue)".into(),
            ));
        };
        prod.level = Some(level);
        self.history.produced.set(Some(prod));
        let n = prod.width * prod.height;
        let total = NCTL as u32 - 1;
        let Some(b) = self.buffers.as_ref().filter(|_| n > 0) else {
            return Ok(());
        };
        let kn = &self.kernels;
        let p = b.p;
        let nn = n as u32;
        timer.time(stream, "segmentation_relabel", || {
            let mut l = stream.launch_builder(&kn.level_threshold);
            l.arg(&p.mctl).arg(&total).arg(&level).arg(&p.info);
            // SAFETY: one thread reads mctl[1..=total] (total < NCTL) and writes info[1].
            unsafe { l.launch(one_block(32)) }?;
            let mut l = stream.launch_builder(&kn.level_comp);
            l.arg(&p.comp)
                .arg(&p.link)
                .arg(&p.round)
                .arg(&p.minpix)
                .arg(&p.info)
                .arg(&nn);
            // SAFETY: grid-stride over pixels < n; link chains end at never-absorbed roots.
            unsafe { l.launch(self.launch.stride(n)) }?;
            Ok(())
        })?;
        Ok(self.enqueue_numbering(stream, &mut Some(timer), false)?)
    }

    /// The device labels of the last enqueued frame (or of the level of
    /// [`SegmentationGpu::enqueue_level`]): raster-order labels `0..segment_count`, one `u32` a
    /// pixel, with the frame's width and height; `None` before any enqueue or for an empty
    /// frame. They are written on the enqueuing stream: work that reads them must be ordered
    /// after it. Final once [`SegmentationGpu::download`] or [`SegmentationGpu::download_summary`] has
    /// returned for the frame (a frame that needed more rounds than its adaptive caps is run
    /// again there, into the same buffer). The next enqueue overwrites them.
    #[must_use]
    pub fn device_labels(&self) -> Option<(&CudaSlice<u32>, usize, usize)> {
        let p = self.history.produced.get()?;
        let b = self
            .buffers
            .as_ref()
            .filter(|b| b.width == p.width && b.height == p.height)?;
        (p.width * p.height > 0).then_some((&b.labels, p.width, p.height))
    }

    /// Blocking readback of the last enqueued frame (or level).
    pub fn download(&self, stream: &Arc<CudaStream>) -> Result<SegmentationOutput, OpError> {
        self.download_with(stream, true, None)
    }

    /// Blocking readback of the last enqueued frame's (or level's) small results (segment
    /// count, rounds, levels, level, capped) without the label image: a [`SegmentationOutput`]
    /// whose `labels` is 0x0, for a caller that reads the labels on the device
    /// ([`SegmentationGpu::device_labels`]). Like [`SegmentationGpu::download`] it runs a frame that hit
    /// its adaptive caps again first and sets the next frame's caps.
    pub fn download_summary(
        &self,
        stream: &Arc<CudaStream>,
    ) -> Result<SegmentationOutput, OpError> {
        self.download_with(stream, false, None)
    }

    /// Blocking readback of the labels and the whole hierarchy of the last segmented frame.
    pub fn download_hierarchy(
        &self,
        stream: &Arc<CudaStream>,
    ) -> Result<(SegmentationOutput, SegmentationHierarchy), OpError> {
        let mut h = None;
        let out = self.download_with(stream, true, Some(&mut h))?;
        let p = self
            .history
            .produced
            .get()
            .map_or((0, 0), |p| (p.width, p.height));
        let hier = h.unwrap_or(SegmentationHierarchy {
            width: p.0,
            height: p.1,
            parent: Vec::new(),
            round: Vec::new(),
            level_rounds: Vec::new(),
        });
        Ok((out, hier))
    }

    /// The edge weights of the last enqueue, `4 * pixels` (right, down, down-right, down-left of
    /// each pixel; +inf outside the image), for parity tests of the blur and edge graph.
    pub fn download_weights(&self, stream: &Arc<CudaStream>) -> Result<Vec<f64>, OpError> {
        let n = self
            .history
            .produced
            .get()
            .map_or(0, |p| p.width * p.height);
        match self.buffers.as_ref() {
            Some(b) if n > 0 => Ok(stream.clone_dtoh(&b.w4.slice(0..4 * n))?),
            _ => Ok(Vec::new()),
        }
    }

    /// The last frame's results: its counters read back (the frame run again first when it hit
    /// its adaptive caps), the labels when `with_labels` (else a 0x0 image), the hierarchy into
    /// `hier` when given; the next frames' round caps learn from what it used.
    fn download_with(
        &self,
        stream: &Arc<CudaStream>,
        with_labels: bool,
        hier: Option<&mut Option<SegmentationHierarchy>>,
    ) -> Result<SegmentationOutput, OpError> {
        let history = &self.history;
        let Some(mut p) = history.produced.get() else {
            return Err(OpError::InvalidParam("download before any enqueue".into()));
        };
        let n = p.width * p.height;
        // Without labels the (unread) label image is 0x0, not a frame of zeros.
        let (lw, lh) = if with_labels {
            (p.width, p.height)
        } else {
            (0, 0)
        };
        let Some(b) = self.buffers.as_ref().filter(|_| n > 0) else {
            return Ok(SegmentationOutput {
                labels: Image::new(lw, lh, 0),
                segment_count: 0,
                rounds: 0,
                min_size_rounds: 0,
                capped: false,
                level: 0,
                has_rounds: true,
            });
        };
        let max_rounds = p.max_rounds;
        let counts = self.read_counts(stream, b, &p)?;
        let FrameCounts {
            levels,
            used,
            giant: giants,
            info,
        } = self.rerun_capped(stream, b, &mut p, counts)?;
        let labels = if with_labels {
            Some(
                self.labels_readback
                    .borrow_mut()
                    .fetch(stream, &b.labels, n)?,
            )
        } else {
            None
        };
        history.hint.set(Some(used));
        if p.level.is_none() {
            self.remember_rounds(&p, &used, giants);
        }
        let ms_first = max_rounds + 1;
        let ms = levels.iter().filter(|&&r| u32::from(r) >= ms_first).count() as u32;
        let top = levels.len() as u32;
        if let Some(hs) = hier {
            let parent = stream.clone_dtoh(&b.link.slice(0..n))?;
            let round = stream.clone_dtoh(&b.round.slice(0..n))?;
            stream.synchronize()?;
            *hs = Some(SegmentationHierarchy {
                width: p.width,
                height: p.height,
                parent,
                round,
                level_rounds: levels.clone(),
            });
        }
        let labels = match labels {
            Some(l) => Image::from_vec(p.width, p.height, l)?,
            None => Image::new(0, 0, 0),
        };
        Ok(SegmentationOutput {
            labels,
            segment_count: info[0] as usize,
            rounds: top - ms,
            min_size_rounds: ms,
            capped: used.capped[0] || used.capped[1],
            level: p.level.map_or(top, |l| l.min(top)),
            has_rounds: true,
        })
    }

    /// Reads back frame `p`'s round counters, each round's frontier (C_FRONTIER is the counts'
    /// first row), the rounds with a giant tree ([`Body::giant`]) and the info words (the
    /// segment count), waiting for the stream.
    fn read_counts(
        &self,
        stream: &Arc<CudaStream>,
        b: &FrameBuffers,
        p: &Produced,
    ) -> Result<FrameCounts, OpError> {
        let hand = self.launch.finisher.handoff_frontier;
        let ctl = stream.clone_dtoh(&b.ctl)?;
        let mctl = stream.clone_dtoh(&b.mctl)?;
        let frontier = stream.clone_dtoh(&b.counts.slice(0..NCTL))?;
        let giants = stream.clone_dtoh(
            &b.counts
                .slice(C_GIANT as usize * NCTL..(C_GIANT as usize + 1) * NCTL),
        )?;
        let info = stream.clone_dtoh(&b.info)?;
        stream.synchronize()?;
        let (levels, used) = read_rounds(&ctl, &mctl, &frontier, &info, p, hand);
        Ok(FrameCounts {
            levels,
            used,
            giant: giant_masks(&giants, p.max_rounds),
            info,
        })
    }

    /// A frame that hit its adaptive caps (video that changed) is run again with larger caps
    /// (doubled, up to the parameters'), so every frame is the exact result; `p` gets the caps
    /// it ran with last, and the counters of that run are returned (`counts` when it ran once).
    fn rerun_capped(
        &self,
        stream: &Arc<CudaStream>,
        b: &FrameBuffers,
        p: &mut Produced,
        mut counts: FrameCounts,
    ) -> Result<FrameCounts, OpError> {
        let history = &self.history;
        let mut rerun = false;
        while p.level.is_none() && (counts.used.capped[0] || counts.used.capped[1]) {
            let Some(full) = history.last_body.get() else {
                break;
            };
            let mut caps = p.caps;
            for ((c, &capped), &most) in caps.iter_mut().zip(&counts.used.capped).zip(&full.caps) {
                if capped {
                    *c = c.saturating_mul(2).max(self.tuning.round_step).min(most);
                }
            }
            if caps == p.caps {
                break;
            }
            if !rerun {
                history.reruns.set(history.reruns.get() + 1);
                rerun = true;
            }
            log::debug!(
                "segmentation: frame needed more rounds than {:?}, running it again with {caps:?}",
                p.caps
            );
            self.enqueue_body(stream, &mut None, &Body { caps, ..full })?;
            p.caps = caps;
            history.produced.set(Some(*p));
            counts = self.read_counts(stream, b, p)?;
        }
        Ok(counts)
    }

    /// Remembers what frame `p` wants its successors to launch: the rounds before the hand-off
    /// to the finisher, or the rounds it used plus a margin; the rounds that walked a giant tree.
    fn remember_rounds(&self, p: &Produced, used: &RoundsUsed, giants: [u64; 2]) {
        let rounds = std::array::from_fn(|i| {
            if p.finish {
                used.handoff[i].max(1)
            } else {
                used.used[i] + self.tuning.adaptive_margin
            }
        });
        self.history.remember(
            Recent {
                rounds,
                giant: giants,
            },
            self.tuning.adaptive_history,
        );
    }
}

/// Uploads `img` (grey or RGB), segments it on the GPU and downloads the labels.
fn run_once<P: crate::gpu::HostPixel<Sample = u8>>(
    gpu: &GpuContext,
    img: ImageView<'_, P>,
    params: &SegmentationParams,
) -> Result<SegmentationOutput, OpError> {
    let mut op = SegmentationGpu::new(gpu)?;
    let stream = gpu.new_stream()?;
    let mut timer = KernelTimer::new();
    let input = upload_view(&stream, img)?;
    op.enqueue(&mut timer, input.image(), params)?;
    op.download(&stream)
}

/// Uploads a grey image, segments it on the GPU and downloads the labels (CLI and tests).
pub fn segment_gpu(
    gpu: &GpuContext,
    img: ImageView<'_, u8>,
    params: &SegmentationParams,
) -> Result<SegmentationOutput, OpError> {
    run_once(gpu, img, params)
}

/// Uploads an RGB image, segments it on the GPU and downloads the labels.
pub fn segment_gpu_rgb(
    gpu: &GpuContext,
    img: ImageView<'_, [u8; 3]>,
    params: &SegmentationParams,
) -> Result<SegmentationOutput, OpError> {
    run_once(gpu, img, params)
}
