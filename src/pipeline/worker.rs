//! The worker: takes frames from the source channel and starts their analysis. On the GPU it
//! only uploads and enqueues (into a free ring slot, waiting only when every slot is in flight);
//! on the CPU it runs the analyses and their in-order steps. Either way it hands the frame to
//! the collector ([`super::collector`]) and goes on with the next one. It also applies the
//! viewer's commands: settings and styles travel with each frame from then on.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, bounded};
use cudarc::driver::CudaEvent;

use super::collector::{self, Collector};
use super::ring::{self, Slot};
use super::{Arrived, Command, Delivery, PictureWant, PipelineError, PipelineEvent};
use crate::analysis::{Analysis, FrameInput, FrameMeta, OpOutput, OpSettings, build_analyses};
use crate::backend::Backend;
use crate::compose::ComposeStyle;
use crate::config::Settings;
use crate::gpu::GpuContext;
use crate::image::{DynImage, Image};
use crate::ops::{OpError, preprocess};
use crate::source::{Frame, Pixels};
use crate::stats::Counters;

/// A frame on its way from the worker to the collector.
pub(super) struct InFlight {
    pub meta: FrameMeta,
    pub received: Instant,
    pub queue_wait_ms: f64,
    pub settings: Arc<OpSettings>,
    pub style: Arc<ComposeStyle>,
    pub work: Work,
}

/// What is left to do for a frame.
pub(super) enum Work {
    /// CPU: the analyses ran; the collector composes and delivers.
    Cpu {
        input: FrameInput,
        outputs: Vec<OpOutput>,
        regions: Vec<(String, f64)>,
    },
    /// GPU: the frame's work is enqueued on the slot's stream.
    Cuda {
        slot: Box<Slot>,
        rgb: Option<Arc<Image<[u8; 3]>>>,
        /// A device frame's planes, kept allocated until the slot's work is done.
        device_input: Option<Arc<dyn std::any::Any + Send + Sync>>,
    },
}

/// The message from worker to collector: a frame, or the error that ended the stream.
pub(super) type ToCollector = Result<InFlight, String>;

/// Starts the worker and collector threads for `backend`.
#[allow(clippy::too_many_arguments)]
pub(super) fn start(
    backend: &Backend,
    settings: &Settings,
    frames: Receiver<Arrived>,
    commands: Receiver<Command>,
    events: Sender<PipelineEvent>,
    delivery: Delivery,
    want: PictureWant,
    counters: Arc<Counters>,
) -> Result<(JoinHandle<()>, JoinHandle<()>), PipelineError> {
    let analyses = build_analyses(&settings.ops)?;
    let names: Vec<&'static str> = analyses.iter().map(|a| a.name()).collect();
    let ring_size = settings.pipeline.ring_size.max(1);
    let (to_collector, from_worker) = bounded::<ToCollector>(ring_size + 1);
    let state = WorkerState {
        frames,
        commands,
        to_collector,
        settings: Arc::new(settings.ops.clone()),
        style: Arc::new(ComposeStyle::default()),
        paused: false,
        steps: 0,
    };
    let (engine, collector) = match backend {
        Backend::Cpu => (
            Engine::Cpu { analyses },
            Collector::new(None, Vec::new(), want, delivery, events, counters)?,
        ),
        Backend::Cuda(gpu) => {
            let slots = ring::new_slots(gpu, &analyses, ring_size, settings.pipeline.upload)?;
            let (free_tx, free_rx) = bounded::<Box<Slot>>(ring_size);
            for s in slots {
                let _ = free_tx.send(Box::new(s));
            }
            let engine = Engine::Cuda {
                gpu: gpu.clone(),
                names,
                free: free_rx,
                ordered_done: None,
            };
            (
                engine,
                Collector::new(
                    Some((gpu.clone(), free_tx)),
                    analyses,
                    want,
                    delivery,
                    events,
                    counters,
                )?,
            )
        }
    };
    let worker = crate::stream_label::spawn("morphoscope-worker".into(), move || {
        worker_loop(state, engine);
    })
    .map_err(PipelineError::Thread)?;
    let collector = crate::stream_label::spawn("morphoscope-collector".into(), move || {
        collector::run(collector, &from_worker);
    })
    .map_err(PipelineError::Thread)?;
    Ok((worker, collector))
}

struct WorkerState {
    frames: Receiver<Arrived>,
    commands: Receiver<Command>,
    to_collector: Sender<ToCollector>,
    settings: Arc<OpSettings>,
    style: Arc<ComposeStyle>,
    paused: bool,
    steps: u32,
}

enum Engine {
    /// The analyses run here, one frame at a time.
    Cpu { analyses: Vec<Box<dyn Analysis>> },
    /// Frames are enqueued into free ring slots.
    Cuda {
        gpu: Arc<GpuContext>,
        /// Analysis names, in the order of each slot's stages.
        names: Vec<&'static str>,
        free: Receiver<Box<Slot>>,
        /// The previous frame's ordered-stages event.
        ordered_done: Option<CudaEvent>,
    },
}

/// What the worker does after handling the commands.
enum Next {
    Go,
    Wait,
    Stop,
}

impl WorkerState {
    fn commands(&mut self, engine: &mut Engine) -> Next {
        while let Ok(cmd) = self.commands.try_recv() {
            match cmd {
                Command::Settings(s) => {
                    let ok = match engine {
                        Engine::Cpu { analyses } => {
                            analyses.iter_mut().try_for_each(|a| a.update(&s))
                        }
                        Engine::Cuda { .. } => s
                            .validate()
                            .map_err(|(k, m)| OpError::InvalidParam(format!("{k}: {m}"))),
                    };
                    match ok {
                        Ok(()) => self.settings = Arc::new(*s),
                        Err(e) => log::warn!("settings rejected: {e}"),
                    }
                }
                Command::Style(s) => self.style = Arc::new(*s),
                Command::Pause(p) => self.paused = p,
                Command::Step => self.steps += 1,
                Command::Stop => return Next::Stop,
            }
        }
        if self.paused && self.steps == 0 {
            Next::Wait
        } else {
            Next::Go
        }
    }
}

fn worker_loop(mut st: WorkerState, mut engine: Engine) {
    loop {
        match st.commands(&mut engine) {
            Next::Stop => break,
            Next::Wait => {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            Next::Go => {}
        }
        let msg = match st.frames.recv_timeout(Duration::from_millis(20)) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => continue,
            Err(RecvTimeoutError::Disconnected) => break,
        };
        st.steps = st.steps.saturating_sub(1);
        let sent = match msg {
            Ok((frame, received)) => match start_frame(&mut st, &mut engine, frame, received) {
                Ok(f) => st.to_collector.send(Ok(f)),
                Err(e) => {
                    let _ = st.to_collector.send(Err(format!("analysis failed: {e}")));
                    break;
                }
            },
            Err(e) => {
                let _ = st.to_collector.send(Err(e.to_string()));
                break;
            }
        };
        if sent.is_err() {
            break; // the collector ended (its consumer went away)
        }
    }
}

/// Starts one frame: analyses on the CPU, or upload and enqueue on the GPU.
fn start_frame(
    st: &mut WorkerState,
    engine: &mut Engine,
    frame: Frame,
    received: Instant,
) -> Result<InFlight, OpError> {
    let queue_wait_ms = received.elapsed().as_secs_f64() * 1e3;
    let (w, h) = frame.image.size();
    let meta = FrameMeta {
        index: frame.index,
        pts_nanos: frame.pts_nanos,
        width: w,
        height: h,
        after_gap: frame.after_gap,
    };
    let work = match engine {
        Engine::Cpu { analyses } => {
            let _permit = super::cpu_gate::CpuGate::global().enter();
            let t0 = Instant::now();
            let Pixels::Host(image) = frame.image else {
                return Err(OpError::Unsupported(
                    "a frame in device memory needs the CUDA backend".into(),
                ));
            };
            let input = frame_input(frame.index, image);
            let mut regions = vec![(
                "preprocess_gray".to_owned(),
                t0.elapsed().as_secs_f64() * 1e3,
            )];
            let mut outputs = Vec::new();
            for a in analyses.iter_mut().filter(|a| a.enabled()) {
                let out = a.run_cpu(&input, &mut regions)?;
                outputs.push(a.finish(out, &meta));
            }
            Work::Cpu {
                input,
                outputs,
                regions,
            }
        }
        Engine::Cuda {
            gpu,
            names,
            free,
            ordered_done,
        } => {
            let mut slot = free
                .recv()
                .map_err(|_| OpError::Unsupported("ring closed".into()))?;
            // Other threads' captures on this device wait while this frame is enqueued; this
            // worker's own captures (inside the enqueue) pass (see gpu::capture_lock).
            let _no_capture = crate::gpu::capture_exclusion(gpu.info().ordinal);
            let enq = slot.enqueue(
                gpu,
                names,
                frame.image,
                frame.index,
                &st.settings,
                ordered_done.as_ref(),
            )?;
            *ordered_done = Some(enq.ordered_done);
            Work::Cuda {
                slot,
                rgb: enq.rgb,
                device_input: enq.device_input,
            }
        }
    };
    Ok(InFlight {
        meta,
        received,
        queue_wait_ms,
        settings: st.settings.clone(),
        style: st.style.clone(),
        work,
    })
}

/// Grey (and colour) views of a frame for the CPU analyses.
#[must_use]
pub(crate) fn frame_input(index: u64, image: DynImage) -> FrameInput {
    let (gray, rgb, gray16) = match image {
        DynImage::Rgb8(rgb) => (
            preprocess::rgb_to_gray(rgb.view()),
            Some(Arc::new(rgb.into_packed())),
            None,
        ),
        DynImage::Gray8(g) => (g.into_packed(), None, None),
        DynImage::Gray16(g) => (
            preprocess::gray16_to_gray8(g.view()),
            None,
            Some(Arc::new(g.into_packed())),
        ),
        DynImage::F32(f) => (
            f.map(|v| (v.clamp(0.0, 1.0) * 255.0).round() as u8),
            None,
            None,
        ),
    };
    FrameInput {
        index,
        gray: Arc::new(gray),
        rgb,
        gray16,
    }
}
