//! The analyses' algorithms: each op has a CPU implementation (the reference, multi-threaded
//! where it pays) and a CUDA implementation checked against it (`tests/gpu.rs`).

pub mod blur;
pub mod ccl;
pub mod error;
pub mod linear_opening;
pub mod maxtree;
pub mod preprocess;
pub mod segment;

pub use error::OpError;
