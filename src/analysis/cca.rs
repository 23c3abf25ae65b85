//! The `cca` analysis: binarization (fixed/Otsu threshold, polarity, frame or motion source),
//! connected-component labeling with features (`ops::cca`, HA4 on the GPU), then the tracker
//! (`track`) in frame order. Overlay: a box per tracked component labelled with its track id,
//! and the track trails (a merged track: its predicted box, labelled "merged"). Files of a
//! headless run: `tracks.csv` (MOT Challenge rows; conf 1 for a track's own component, 0.5 for
//! a merged track's predicted box; a track's tentative frames come in the line of the frame that
//! confirmed it) and `components.jsonl` (the component table of each frame with track ids, plus
//! `merges` — components holding several tracks — and `backfill` — earlier frames' components of
//! tracks confirmed in this frame — when there are any). The tracker's appearance includes each
//! component's mean grey level, from the grey sum both backends add to the component table.
//!
//! The motion background lives on the device in one buffer handed from slot to slot: each
//! slot's stage takes it from a shared cell before enqueueing its frame and puts it back after,
//! and the ring makes each slot's stages wait for the previous slot's, so the background is
//! updated in frame order.

use std::sync::{Arc, Mutex};

use cudarc::driver::CudaStream;
use serde::{Deserialize, Serialize};

use super::descriptor::{Descriptor, LayerLook, Property, PropertyKind, in_section};
use super::{
    Analysis, DeviceFrame, FrameInput, FrameMeta, GpuStage, Layer, OpData, OpOutput, OpSettings,
    Payload, TrackInfo,
};
use crate::compose::Shape;
use crate::gpu::{GpuContext, KernelTimer};
use crate::ops::OpError;
use crate::ops::cca::gpu::GpuBackground;
use crate::ops::cca::{CcaCpu, CcaGpu, CcaParams, ComponentTable, Polarity, Source, Threshold};
use crate::track::{TrackState, Tracker};

/// The `cca` analysis, described (see [`super::Descriptor`]).
pub const DESCRIPTOR: Descriptor = Descriptor {
    name: "cca",
    title: "components + tracks",
    legend: "Boxes: connected components of the binarized frame; the number is the track id (stable \
              across frames), the line is the track's recent path. Click a box or a row of the Tracks \
              panel to highlight a track.",
    layer: Some(LayerLook {
        additive: false,
        hue_wheel: false,
    }),
    properties: &[
        Property {
            name: "cca",
            key: "cca.enabled",
            blurb: "Connected components of the binarized frame, tracked across frames (region-of-interest metas)",
            kind: PropertyKind::Bool(true),
        },
        Property {
            name: "cca-threshold",
            key: "cca.threshold",
            blurb: "Binarization threshold: otsu, or a grey level (0..=65535)",
            kind: PropertyKind::Text("30"),
        },
        Property {
            name: "cca-source",
            key: "cca.source",
            blurb: "What is thresholded: frame (the grey frame) or motion (|frame - running background|)",
            kind: PropertyKind::Text("motion"),
        },
        Property {
            name: "min-area",
            key: "tracker.min_area",
            blurb: "Components smaller than this (pixels) are not tracked",
            kind: PropertyKind::UInt {
                min: 0,
                max: u32::MAX,
                default: 25,
            },
        },
    ],
    enabled: |s| s.cca.enabled,
    validate: |s| {
        in_section(DESCRIPTOR.name, s.cca.params().validate())?;
        in_section("tracker", s.tracker.validate())
    },
    build: |s| Ok(Box::new(Cca::new(s)?)),
};

/// `[cca]`
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CcaSettings {
    /// Run the analysis.
    pub enabled: bool,
    /// `"otsu"` or a level.
    pub threshold: Threshold,
    /// `"bright"` (`s > T`) or `"dark"` (`s <= T`).
    pub polarity: Polarity,
    /// 4 or 8.
    pub connectivity: u8,
    /// `"frame"` (threshold the grey frame) or `"motion"` (|frame − running background|).
    pub source: Source,
    /// Background learning rate of the motion source, (0, 1].
    pub learning_rate: f64,
}

impl Default for CcaSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            threshold: Threshold::Fixed(30),
            polarity: Polarity::Bright,
            connectivity: 8,
            source: Source::Motion,
            learning_rate: 0.15,
        }
    }
}

impl CcaSettings {
    /// The op parameters.
    #[must_use]
    pub fn params(&self) -> CcaParams {
        CcaParams {
            threshold: self.threshold,
            polarity: self.polarity,
            connectivity: self.connectivity,
            source: self.source,
            learning_rate: self.learning_rate,
        }
    }
}

/// Labeling + tracking.
pub(crate) struct Cca {
    settings: CcaSettings,
    cpu: CcaCpu,
    tracker: Tracker,
    background: Arc<Mutex<GpuBackground>>,
}

impl Cca {
    /// From settings.
    pub fn new(settings: &OpSettings) -> Result<Self, OpError> {
        settings.cca.params().validate()?;
        Ok(Self {
            settings: settings.cca.clone(),
            cpu: CcaCpu::new(),
            tracker: Tracker::new(settings.tracker.clone())?,
            background: Arc::new(Mutex::new(GpuBackground::default())),
        })
    }
}

/// A colour per track id (golden-angle hues).
fn id_colour(id: u64) -> [u8; 4] {
    let h = (id as f64 * 137.508) % 360.0;
    let x = 1.0 - ((h / 60.0) % 2.0 - 1.0).abs();
    let (r, g, b) = match (h / 60.0) as u32 {
        0 => (1.0, x, 0.0),
        1 => (x, 1.0, 0.0),
        2 => (0.0, 1.0, x),
        3 => (0.0, x, 1.0),
        4 => (x, 0.0, 1.0),
        _ => (1.0, 0.0, x),
    };
    [(r * 255.0) as u8, (g * 255.0) as u8, (b * 255.0) as u8, 255]
}

/// What `run_cpu` and the GPU stage hand to `finish` (the label image is not needed by the
/// tracker): the component table.
struct Labeled {
    table: ComponentTable,
}

fn payload_output(table: ComponentTable) -> OpOutput {
    OpOutput {
        op: DESCRIPTOR.name,
        payload: Some(Payload::new(Labeled { table })),
        ..Default::default()
    }
}

impl Analysis for Cca {
    fn name(&self) -> &'static str {
        DESCRIPTOR.name
    }
    fn enabled(&self) -> bool {
        self.settings.enabled
    }
    fn update(&mut self, settings: &OpSettings) -> Result<(), OpError> {
        settings.cca.params().validate()?;
        if settings.cca.source != self.settings.source
            || settings.cca.learning_rate != self.settings.learning_rate
        {
            self.cpu.reset_background();
            if let Ok(mut bg) = self.background.lock() {
                bg.reset();
            }
        }
        self.settings = settings.cca.clone();
        if settings.tracker != *self.tracker.params() {
            self.tracker.set_params(settings.tracker.clone())?;
        }
        Ok(())
    }
    fn run_cpu(
        &mut self,
        input: &FrameInput,
        timings: &mut Vec<(String, f64)>,
    ) -> Result<OpOutput, OpError> {
        let t = std::time::Instant::now();
        let p = self.settings.params();
        let out = match &input.gray16 {
            Some(g16) => self.cpu.process(g16.view(), &p)?,
            None => self.cpu.process(input.gray.view(), &p)?,
        };
        timings.push(("cca_cpu".into(), t.elapsed().as_secs_f64() * 1e3));
        Ok(payload_output(out.table))
    }
    fn gpu_stage(&self, gpu: &GpuContext) -> Result<Option<Box<dyn GpuStage>>, OpError> {
        Ok(Some(Box::new(CcaStage {
            cca: CcaGpu::new(gpu)?,
            background: self.background.clone(),
        })))
    }
    fn finish(&mut self, output: OpOutput, frame: &FrameMeta) -> OpOutput {
        let Some(Labeled { table }) = output.payload.as_ref().and_then(|p| p.get::<Labeled>())
        else {
            return output;
        };
        // The tracker's appearance: each tracked component's mean grey level.
        let min_area = self.tracker.params().min_area;
        let grey: Vec<Option<f64>> = table
            .components
            .iter()
            .map(|c| (c.area >= min_area).then(|| c.mean_grey()))
            .collect();
        // A live source that came back: its tracks end at the gap (ids go on, never reused).
        if frame.after_gap {
            self.tracker.reset();
        }
        // Durations and velocities follow the timestamps; `tracker.frame_rate` stands in without.
        let tracked = self.tracker.update(table, &grey, frame.pts_nanos);
        let mut shapes = Vec::new();
        let mut tracks = Vec::new();
        for c in &tracked.table.components {
            if let Some(id) = c.track_id {
                let [l, t, w, h] = c.bbox();
                shapes.push(Shape::Rect {
                    left: l as f32,
                    top: t as f32,
                    width: w as f32,
                    height: h as f32,
                    color: id_colour(id),
                    label: Some(id.to_string()),
                });
            }
        }
        for tr in tracked.tracks.iter().filter(|t| {
            matches!(
                t.state,
                TrackState::Confirmed | TrackState::Merged | TrackState::Lost
            )
        }) {
            if tr.state == TrackState::Merged {
                // Its predicted box inside the component it shares.
                let [l, t, w, h] = tr.bbox;
                shapes.push(Shape::Rect {
                    left: l as f32,
                    top: t as f32,
                    width: w as f32,
                    height: h as f32,
                    color: id_colour(tr.id),
                    label: Some(format!("{} merged", tr.id)),
                });
            }
            if tr.trail.len() > 1 {
                let points = tr.trail.clone();
                shapes.push(Shape::Polyline {
                    points,
                    color: id_colour(tr.id),
                });
            }
            tracks.push(TrackInfo {
                id: tr.id,
                age: u64::from(tr.age),
                area: tr.area,
                position: [tr.centroid[0] as f32, tr.centroid[1] as f32],
                velocity: [tr.velocity[0] as f32, tr.velocity[1] as f32],
                bbox: [
                    tr.bbox[0] as f32,
                    tr.bbox[1] as f32,
                    tr.bbox[2] as f32,
                    tr.bbox[3] as f32,
                ],
            });
        }
        let count = |s: TrackState| tracked.tracks.iter().filter(|t| t.state == s).count();
        let mut records: Vec<(&'static str, String)> = tracked
            .mot_rows()
            .into_iter()
            .map(|r| ("tracks.csv", r))
            .collect();
        let mut line = serde_json::json!({ "frame": tracked.frame, "table": &tracked.table });
        if !tracked.merges.is_empty() {
            line["merges"] = serde_json::json!(&tracked.merges);
        }
        if !tracked.backfill.is_empty() {
            line["backfill"] = serde_json::json!(&tracked.backfill);
        }
        records.push(("components.jsonl", line.to_string()));
        OpOutput {
            op: DESCRIPTOR.name,
            summary: serde_json::json!({
                "components": table.components.len(),
                "threshold": table.threshold,
                "tracks": count(TrackState::Confirmed),
                "merged": count(TrackState::Merged),
                "lost": count(TrackState::Lost),
            }),
            layer: Layer {
                raster: None,
                shapes,
                device_raster: None,
            },
            data: OpData::Tracks(tracks),
            records,
            payload: output.payload.clone(),
        }
    }
}

/// One ring slot's labeling buffers.
struct CcaStage {
    cca: CcaGpu,
    background: Arc<Mutex<GpuBackground>>,
}

impl GpuStage for CcaStage {
    fn ordered(&self) -> bool {
        true // the motion background lives on the device from frame to frame
    }
    fn enqueue(
        &mut self,
        frame: &DeviceFrame<'_>,
        timer: &mut KernelTimer,
        settings: &OpSettings,
    ) -> Result<(), OpError> {
        let p = settings.cca.params();
        let mut shared = self
            .background
            .lock()
            .map_err(|_| OpError::Unsupported("background lock poisoned".into()))?;
        std::mem::swap(&mut self.cca.background, &mut shared);
        let r = self.cca.enqueue(timer, frame.gray, &p);
        std::mem::swap(&mut self.cca.background, &mut shared);
        r
    }
    fn collect(
        &mut self,
        stream: &Arc<CudaStream>,
        _frame: &FrameMeta,
    ) -> Result<OpOutput, OpError> {
        Ok(payload_output(self.cca.download_table(stream)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::Image;

    /// One frame through the CPU analysis and its tracking (`after_gap`: the first frame after
    /// the source came back).
    fn analyse(cca: &mut Cca, f: &FrameInput, after_gap: bool) -> OpOutput {
        let out = cca.run_cpu(f, &mut Vec::new()).unwrap();
        let meta = FrameMeta {
            index: f.index,
            pts_nanos: None,
            width: f.gray.width(),
            height: f.gray.height(),
            after_gap,
        };
        cca.finish(out, &meta)
    }

    fn frame(index: u64, square_at: Option<usize>) -> FrameInput {
        let gray = Image::from_fn(64, 48, |x, y| match square_at {
            Some(x0) if (x0..x0 + 6).contains(&x) && (20..26).contains(&y) => 200u8,
            _ => 0,
        });
        FrameInput {
            index,
            gray: Arc::new(gray),
            rgb: None,
            gray16: None,
        }
    }

    #[test]
    fn a_lost_track_keeps_the_area_it_had_when_last_matched() {
        let mut settings = OpSettings::default();
        settings.cca.source = Source::Frame;
        let mut cca = Cca::new(&settings).unwrap();
        let mut run = |f: FrameInput| analyse(&mut cca, &f, false);
        for i in 0..8 {
            let out = run(frame(i, Some(10 + i as usize)));
            if i == 7 {
                let OpData::Tracks(t) = &out.data else {
                    panic!("no tracks")
                };
                assert_eq!(t.len(), 1, "one confirmed track after 8 frames");
                assert_eq!(t[0].area, 36);
            }
        }
        // The square disappears: the track is lost, not removed, and keeps its area.
        let out = run(frame(8, None));
        let OpData::Tracks(t) = &out.data else {
            panic!("no tracks")
        };
        assert_eq!(t.len(), 1);
        assert_eq!(t[0].area, 36, "area of the lost track");
        assert_eq!(out.summary["components"], 0);
    }

    #[test]
    fn tracks_end_at_a_gap_of_the_source_and_new_ones_take_new_ids() {
        let mut settings = OpSettings::default();
        settings.cca.source = Source::Frame;
        let mut cca = Cca::new(&settings).unwrap();
        let mut ids = |range: std::ops::Range<u64>, gap_at: Option<u64>| {
            let mut seen = Vec::new();
            for i in range {
                let f = frame(i, Some(10 + (i % 20) as usize));
                if let OpData::Tracks(t) = &analyse(&mut cca, &f, gap_at == Some(i)).data {
                    seen.extend(t.iter().map(|t| t.id));
                }
            }
            seen.sort_unstable();
            seen.dedup();
            seen
        };
        let before = ids(0..10, None);
        // The same square, in the same place, after the source came back: a new track.
        let after = ids(10..20, Some(10));
        assert_eq!(before, [1]);
        assert_eq!(
            after,
            [2],
            "the track before the gap ended there; its id is not reused"
        );
    }

    #[test]
    fn track_velocities_follow_the_frame_timestamps() {
        // The square moves 1 px a frame: 25 px/s at the default `frame_rate` without timestamps,
        // 10 px/s with frames 100 ms apart.
        for (pts_step, expected) in [(None, 25.0), (Some(100_000_000u64), 10.0)] {
            let mut settings = OpSettings::default();
            settings.cca.source = Source::Frame;
            let mut cca = Cca::new(&settings).unwrap();
            let mut speed = 0.0;
            for i in 0..30 {
                let f = frame(i, Some(10 + i as usize));
                let out = cca.run_cpu(&f, &mut Vec::new()).unwrap();
                let meta = FrameMeta {
                    index: f.index,
                    pts_nanos: pts_step.map(|s| i * s),
                    width: f.gray.width(),
                    height: f.gray.height(),
                    after_gap: false,
                };
                let out = cca.finish(out, &meta);
                if let OpData::Tracks(t) = &out.data
                    && let Some(t) = t.first()
                {
                    speed = t.velocity[0];
                }
            }
            assert!(
                (speed - expected).abs() < 0.5,
                "{pts_step:?}: {speed} px/s, expected {expected}"
            );
        }
    }

    #[test]
    fn files_get_every_frame_of_a_track_and_its_merges() {
        let mut settings = OpSettings::default();
        settings.cca.source = Source::Frame;
        let mut cca = Cca::new(&settings).unwrap();
        // Two 6 x 6 squares (grey 200 and 90) 2 px a frame closer each frame; they touch from
        // index 9 (MOT frame 10) on.
        let frame = |index: u64| {
            let (a, b) = (10 + 2 * index as usize, 52 - 2 * index as usize);
            let gray = Image::from_fn(80, 48, |x, y| match (x, y) {
                (x, 20..=25) if (a..a + 6).contains(&x) => 200u8,
                (x, 20..=25) if (b..b + 6).contains(&x) => 90,
                _ => 0,
            });
            FrameInput {
                index,
                gray: Arc::new(gray),
                rgb: None,
                gray16: None,
            }
        };
        let (mut csv, mut lines) = (Vec::new(), Vec::new());
        for i in 0..12 {
            let f = frame(i);
            let out = cca.run_cpu(&f, &mut Vec::new()).unwrap();
            let meta = FrameMeta {
                index: f.index,
                pts_nanos: None,
                width: f.gray.width(),
                height: f.gray.height(),
                after_gap: false,
            };
            let out = cca.finish(out, &meta);
            for (file, r) in out.records {
                if file == "tracks.csv" {
                    csv.push(r);
                } else {
                    lines.push(serde_json::from_str::<serde_json::Value>(&r).unwrap());
                }
            }
        }
        // Confirmed after 0.2 s (5 frames at 25 fps): frames 1-4 are written with frame 5.
        let first: Vec<&str> = csv
            .iter()
            .filter(|r| r.starts_with("1,"))
            .map(String::as_str)
            .collect();
        assert_eq!(
            first,
            vec!["1,1,10,20,6,6,1,-1,-1,-1", "1,2,52,20,6,6,1,-1,-1,-1"]
        );
        assert_eq!(
            lines[4]["backfill"].as_array().map(Vec::len),
            Some(8),
            "{}",
            lines[4]
        );
        assert!(lines[3].get("backfill").is_none());
        // Every frame has a row for each square, merged frames with conf 0.5.
        for f in 1..=12 {
            let rows: Vec<Vec<&str>> = csv
                .iter()
                .filter(|r| r.starts_with(&format!("{f},")))
                .map(|r| r.split(',').collect())
                .collect();
            assert_eq!(rows.len(), 2, "frame {f}: {rows:?}");
            let conf = if f >= 10 { "0.5" } else { "1" };
            assert!(rows.iter().all(|r| r[6] == conf), "frame {f}: {rows:?}");
        }
        assert!(
            csv.contains(&"10,1,28,20,6,6,0.5,-1,-1,-1".to_owned())
                && csv.contains(&"10,2,34,20,6,6,0.5,-1,-1,-1".to_owned())
        );
        assert_eq!(
            lines[9]["merges"],
            serde_json::json!([{ "label": 1, "track_ids": [1, 2] }])
        );
        assert!(lines[9]["table"]["components"][0].get("track_id").is_none());
    }
}
