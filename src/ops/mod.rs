//! The analyses' algorithms: each op has a CPU implementation (the reference, multi-threaded
//! where it pays) and a CUDA implementation checked against it (`tests/gpu.rs`).

pub mod error;
pub mod preprocess;

pub use error::OpError;
