//! The embedded kernel sources: every `kernels/*.cu` with the entry points it must provide, and
//! every `kernels/common/*.cuh` header. The registry (`gpu::context`) compiles and loads them all
//! at start; the CI compile check (`tests/kernels_compile.rs`) compiles them for each target
//! architecture. Add a module here when adding a `.cu` file.

use crate::gpu::KernelSource;

/// Shared headers, by the name `#include` uses.
pub const HEADERS: &[(&str, &str)] = &[("common/util.cuh", include_str!("../kernels/common/util.cuh"))];

/// Every kernel module.
pub const SOURCES: &[KernelSource] = &[KernelSource {
    name: "preprocess",
    source: include_str!("../kernels/preprocess.cu"),
    functions: &["preprocess_rgb_to_gray", "preprocess_gray16_to_gray8"],
}];
