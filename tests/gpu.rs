//! Every GPU parity test, in one test binary (so one small binary travels to the GPU machine).
//! Each module compares the CUDA backend with the CPU reference; see `gpu/common.rs` for the
//! skip/fail rule. The segmentation benchmark and the checks that look inside a segmentation
//! frame (per-launch timer regions, round stamps) need the crate's `profiling` feature:
//! `cargo test --release --features profiling --test gpu`.

#[path = "gpu/blur.rs"]
mod blur;
#[path = "gpu/cca.rs"]
mod cca;
#[path = "gpu/common.rs"]
mod common;
#[path = "gpu/compose.rs"]
mod compose;
#[path = "gpu/foreign.rs"]
mod foreign;
#[path = "gpu/graph.rs"]
mod graph;
#[path = "gpu/maxtree.rs"]
mod maxtree;
#[path = "gpu/maxtree_bench.rs"]
mod maxtree_bench;
#[path = "gpu/nv12.rs"]
mod nv12;
#[path = "gpu/orientation.rs"]
mod orientation;
#[path = "gpu/preprocess.rs"]
mod preprocess;
#[path = "common/samples.rs"]
mod samples;
#[path = "gpu/segmentation.rs"]
mod segmentation;
#[cfg(feature = "profiling")]
#[path = "gpu/segmentation_bench.rs"]
mod segmentation_bench;
#[path = "gpu/segmentation_launch.rs"]
mod segmentation_launch;
#[path = "gpu/streams.rs"]
mod streams;
