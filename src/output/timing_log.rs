//! Per-region timing samples of a run, for `timings.json` and the summary table.

use std::collections::BTreeMap;

use crate::analysis::AnalysedFrame;
use crate::stats::{Series, Summary};

/// Per-region timing samples, in first-seen order, in bounded memory (`Series`: exact count,
/// mean and max; median and p95 from a reservoir on runs past 8192 frames).
#[derive(Debug, Default)]
pub struct TimingLog {
    order: Vec<String>,
    samples: BTreeMap<String, Series>,
}

impl TimingLog {
    /// Adds one frame's regions plus upload/download/latency/compute.
    pub fn add(&mut self, f: &AnalysedFrame) {
        let t = &f.timings;
        let extra = [
            ("upload", t.upload_ms),
            ("download", t.download_ms),
            ("queue_wait", t.queue_wait_ms),
            ("latency", t.latency_ms),
            ("compute_total", t.compute_ms),
        ];
        let cpu = t.backend == "cpu";
        let extra = extra
            .into_iter()
            .filter(|(n, _)| !(cpu && (*n == "upload" || *n == "download")));
        for (name, ms) in t
            .regions
            .iter()
            .map(|(n, ms)| (n.as_str(), *ms))
            .chain(extra)
        {
            match self.samples.get_mut(name) {
                Some(series) => series.push(ms),
                None => {
                    self.order.push(name.to_owned());
                    let mut series = Series::default();
                    series.push(ms);
                    self.samples.insert(name.to_owned(), series);
                }
            }
        }
    }
    /// (region, summary) in first-seen order.
    #[must_use]
    pub fn summaries(&self) -> Vec<(String, Summary)> {
        self.order
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    self.samples
                        .get(n)
                        .map_or_else(Summary::default, Series::summary),
                )
            })
            .collect()
    }
    /// A plain-text table of the summaries.
    #[must_use]
    pub fn table(&self) -> String {
        let mut s = format!(
            "{:<34} {:>7} {:>10} {:>10} {:>10}\n",
            "region", "frames", "median ms", "p95 ms", "max ms"
        );
        for (n, m) in self.summaries() {
            s.push_str(&format!(
                "{n:<34} {:>7} {:>10.3} {:>10.3} {:>10.3}\n",
                m.count, m.median_ms, m.p95_ms, m.max_ms
            ));
        }
        s
    }
}
