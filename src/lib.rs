//! morphoscope: real-time mathematical morphology on video with NVIDIA GPUs.
//!
//! Module map: [`image`] (strided pixel containers), [`gpu`] (CUDA context, NVRTC kernel
//! registry, timers), [`kernels`] (embedded `.cu` sources), [`ops`] (the analyses, each with a
//! CPU reference and a CUDA implementation).
pub mod gpu;
pub mod image;
pub mod kernels;
