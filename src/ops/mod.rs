//! The analyses' algorithms: each op has a CPU implementation (the reference, multi-threaded
//! where it pays) and a CUDA implementation checked against it (`tests/gpu.rs`).

pub mod blur;
pub mod cca;
pub mod connectivity;
pub mod convert;
pub mod error;
pub mod maxtree;
pub mod nv12;
pub mod orientation;
pub mod preprocess;
pub mod segmentation;

pub use connectivity::Connectivity;
pub use error::OpError;
