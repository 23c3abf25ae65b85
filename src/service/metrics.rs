//! The service's Prometheus metrics, kept in one `prometheus-client` registry.
//!
//! Each stream's series carry the label `stream` (its id); they are updated on the stream's own
//! thread as frames are written ([`StreamMetrics`], the atomics and histograms of the crate),
//! and removed when the stream is. A scrape encodes the registry: it reads those values and
//! never waits for a stream. Units are seconds and bytes; counters end in `_total` (the crate
//! appends it).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::analysis::AnalysedFrame;
use crate::stats::CounterSnapshot;

/// The `Content-Type` of the OpenMetrics text format (what Prometheus asks for first).
pub(crate) const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A stream's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StreamLabel {
    stream: String,
}

/// A stream's analysis region.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RegionLabels {
    stream: String,
    region: String,
}

/// A device's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DeviceLabel {
    device: String,
}

/// What was built and where it runs.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BuildLabels {
    version: String,
    backend: String,
    device: String,
}

/// Builds the histograms of a family.
type HistogramOf = fn() -> Histogram;

/// Arrival to results: 1 ms to about 16 s.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// One analysis region of one frame: 50 µs to about 1.6 s.
fn region_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_05, 2.0, 16))
}

/// Every metric of a service.
pub struct Metrics {
    registry: Registry,
    frames_in: Family<StreamLabel, Counter>,
    frames_out: Family<StreamLabel, Counter>,
    frames_dropped: Family<StreamLabel, Counter>,
    reconnects: Family<StreamLabel, Counter>,
    up: Family<StreamLabel, Gauge>,
    latency: Family<StreamLabel, Histogram, HistogramOf>,
    region: Family<RegionLabels, Histogram, HistogramOf>,
    publish_dropped: Family<StreamLabel, Counter>,
    gpu_memory: Family<DeviceLabel, Gauge>,
    /// The regions each stream has series of (to remove them with the stream).
    regions: Mutex<BTreeMap<String, BTreeSet<String>>>,
}

impl Metrics {
    /// A registry with every family, and `morphoscope_build_info` set for each device
    /// (`devices`: `(backend, device)` pairs such as `("cuda", "cuda:0")`).
    #[must_use]
    pub fn new(devices: &[(String, String)]) -> Self {
        let mut registry = Registry::with_prefix("morphoscope");
        let frames_in = Family::default();
        let frames_out = Family::default();
        let frames_dropped = Family::default();
        let reconnects = Family::default();
        let up = Family::default();
        let latency = Family::new_with_constructor(latency_histogram as HistogramOf);
        let region = Family::new_with_constructor(region_histogram as HistogramOf);
        let publish_dropped = Family::default();
        let gpu_memory = Family::default();
        let build = Family::<BuildLabels, Gauge>::default();
        registry.register(
            "frames_in",
            "Frames the source delivered",
            frames_in.clone(),
        );
        registry.register(
            "frames_out",
            "Frames analysed and written",
            frames_out.clone(),
        );
        registry.register(
            "frames_dropped",
            "Frames a live source delivered while the analyses were busy, not analysed",
            frames_dropped.clone(),
        );
        registry.register(
            "source_reconnects",
            "Times the live source was lost and reconnecting began",
            reconnects.clone(),
        );
        registry.register(
            "stream_up",
            "1 while the stream runs and delivers, 0 while it starts, reconnects or ends",
            up.clone(),
        );
        registry.register(
            "latency_seconds",
            "Time from a frame's arrival to its results",
            latency.clone(),
        );
        registry.register(
            "region_seconds",
            "GPU (CUDA events) or CPU time of each analysis region per frame",
            region.clone(),
        );
        registry.register(
            "publish_dropped",
            "Broker messages of the stream dropped at the publish queue",
            publish_dropped.clone(),
        );
        registry.register(
            "gpu_memory_used_bytes",
            "Memory in use on the device (every process), bytes",
            gpu_memory.clone(),
        );
        registry.register(
            "build_info",
            "1, labelled with the version, the backend and the device",
            build.clone(),
        );
        for (backend, device) in devices {
            build
                .get_or_create(&BuildLabels {
                    version: env!("CARGO_PKG_VERSION").to_owned(),
                    backend: backend.clone(),
                    device: device.clone(),
                })
                .set(1);
        }
        Self {
            registry,
            frames_in,
            frames_out,
            frames_dropped,
            reconnects,
            up,
            latency,
            region,
            publish_dropped,
            gpu_memory,
            regions: Mutex::default(),
        }
    }

    /// The handles a stream updates its series through (series start at 0).
    #[must_use]
    pub fn stream(self: &Arc<Self>, id: &str) -> StreamMetrics {
        let label = StreamLabel {
            stream: id.to_owned(),
        };
        StreamMetrics {
            metrics: Arc::clone(self),
            id: id.to_owned(),
            frames_in: self.frames_in.get_or_create_owned(&label),
            frames_out: self.frames_out.get_or_create_owned(&label),
            frames_dropped: self.frames_dropped.get_or_create_owned(&label),
            reconnects: self.reconnects.get_or_create_owned(&label),
            up: self.up.get_or_create_owned(&label),
            latency: self.latency.get_or_create_owned(&label),
            publish_dropped: self.publish_dropped.get_or_create_owned(&label),
            regions: HashMap::new(),
            seen: Seen::default(),
        }
    }

    /// Removes every series of stream `id`.
    pub(crate) fn forget(&self, id: &str) {
        let label = StreamLabel {
            stream: id.to_owned(),
        };
        for family in [
            &self.frames_in,
            &self.frames_out,
            &self.frames_dropped,
            &self.reconnects,
            &self.publish_dropped,
        ] {
            family.remove(&label);
        }
        self.up.remove(&label);
        self.latency.remove(&label);
        let regions = self
            .regions
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(id)
            .unwrap_or_default();
        for region in regions {
            self.region.remove(&RegionLabels {
                stream: id.to_owned(),
                region,
            });
        }
    }

    /// Sets the memory in use on `device` (e.g. `cuda:0`).
    pub(crate) fn set_gpu_memory_used(&self, device: &str, bytes: u64) {
        self.gpu_memory
            .get_or_create(&DeviceLabel {
                device: device.to_owned(),
            })
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// The exposition: OpenMetrics text when `openmetrics`, else Prometheus text 0.0.4 (what
    /// `curl` and `promtool` read); with its `Content-Type`.
    pub(crate) fn encode(
        &self,
        openmetrics: bool,
    ) -> Result<(String, &'static str), std::fmt::Error> {
        let mut text = String::new();
        if openmetrics {
            prometheus_client::encoding::text::encode(&mut text, &self.registry)?;
            Ok((text, OPENMETRICS_CONTENT_TYPE))
        } else {
            prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry)?;
            Ok((
                text,
                prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            ))
        }
    }
}

/// What a stream's counters were at the last update (the series grow by the difference).
#[derive(Clone, Copy, Debug, Default)]
struct Seen {
    frames_in: u64,
    dropped: u64,
    publish_dropped: u64,
}

/// One stream's series, updated on its thread.
pub struct StreamMetrics {
    metrics: Arc<Metrics>,
    id: String,
    frames_in: Counter,
    frames_out: Counter,
    frames_dropped: Counter,
    reconnects: Counter,
    up: Gauge,
    latency: Histogram,
    publish_dropped: Counter,
    regions: HashMap<String, Histogram>,
    seen: Seen,
}

impl StreamMetrics {
    /// A frame was written: counts it and observes its latency and region times.
    pub fn frame(&mut self, f: &AnalysedFrame) {
        self.frames_out.inc();
        self.latency.observe(f.timings.latency_ms / 1e3);
        for (name, ms) in &f.timings.regions {
            let histogram = match self.regions.get(name) {
                Some(h) => h,
                None => {
                    let h = self.metrics.region.get_or_create_owned(&RegionLabels {
                        stream: self.id.clone(),
                        region: name.clone(),
                    });
                    self.metrics
                        .regions
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .entry(self.id.clone())
                        .or_default()
                        .insert(name.clone());
                    self.regions.entry(name.clone()).or_insert(h)
                }
            };
            histogram.observe(ms / 1e3);
        }
    }

    /// The stream's counters now, and its broker messages dropped so far.
    pub fn counters(&mut self, c: &CounterSnapshot, publish_dropped: u64) {
        let grow = |counter: &Counter, was: &mut u64, now: u64| {
            if now > *was {
                counter.inc_by(now - *was);
                *was = now;
            }
        };
        grow(&self.frames_in, &mut self.seen.frames_in, c.frames_in);
        grow(&self.frames_dropped, &mut self.seen.dropped, c.dropped);
        grow(
            &self.publish_dropped,
            &mut self.seen.publish_dropped,
            publish_dropped,
        );
    }

    /// The stream runs and delivers (`true`), or starts, reconnects or ends.
    pub(crate) fn set_up(&self, up: bool) {
        self.up.set(i64::from(up));
    }

    /// The live source was lost: reconnecting begins.
    pub fn reconnecting(&self) {
        self.reconnects.inc();
        self.set_up(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::FrameTimings;

    fn frame(latency_ms: f64) -> AnalysedFrame {
        AnalysedFrame {
            index: 0,
            pts_nanos: None,
            width: 4,
            height: 3,
            gray: None,
            rgb: None,
            outputs: Vec::new(),
            picture: None,
            timings: FrameTimings {
                backend: "cpu",
                regions: vec![("boxes".into(), 2.0), ("residue".into(), 3.0)],
                latency_ms,
                ..FrameTimings::default()
            },
        }
    }

    #[test]
    fn a_stream_s_series_follow_its_frames_and_counters_and_go_with_it() {
        let m = Arc::new(Metrics::new(&[("cuda".into(), "cuda:0".into())]));
        let mut s = m.stream("door-1");
        s.set_up(true);
        s.frame(&frame(12.0));
        s.frame(&frame(30.0));
        let c = CounterSnapshot {
            frames_in: 5,
            frames_out: 2,
            dropped: 3,
        };
        s.counters(&c, 1);
        s.counters(&c, 1);
        s.reconnecting();
        m.set_gpu_memory_used("cuda:0", 1 << 30);
        let (text, kind) = m.encode(false).unwrap();
        assert!(kind.starts_with("text/plain; version=0.0.4"));
        for line in [
            "morphoscope_frames_in_total{stream=\"door-1\"} 5",
            "morphoscope_frames_out_total{stream=\"door-1\"} 2",
            "morphoscope_frames_dropped_total{stream=\"door-1\"} 3",
            "morphoscope_source_reconnects_total{stream=\"door-1\"} 1",
            "morphoscope_publish_dropped_total{stream=\"door-1\"} 1",
            "morphoscope_stream_up{stream=\"door-1\"} 0",
            "morphoscope_latency_seconds_count{stream=\"door-1\"} 2",
            "morphoscope_latency_seconds_bucket{stream=\"door-1\",le=\"0.016\"} 1",
            "morphoscope_region_seconds_count{stream=\"door-1\",region=\"boxes\"} 2",
            "morphoscope_gpu_memory_used_bytes{device=\"cuda:0\"} 1073741824",
            "morphoscope_build_info{version=\"0.1.0\",backend=\"cuda\",device=\"cuda:0\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
        }
        let (open, kind) = m.encode(true).unwrap();
        assert_eq!(kind, OPENMETRICS_CONTENT_TYPE);
        assert!(open.ends_with("# EOF\n"), "{open}");
        drop(s);
        m.forget("door-1");
        let (text, _) = m.encode(false).unwrap();
        assert!(!text.contains("door-1"), "{text}");
    }
}
