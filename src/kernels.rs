//! The embedded kernel sources: every `kernels/*.cu` with the entry points it must provide, and
//! every `kernels/common/*.cuh` header. The registry (`gpu::context`) compiles and loads them all
//! at start; the CI compile check (`tests/kernels_compile.rs`) compiles them for each target
//! architecture. Add a module here when adding a `.cu` file.

use crate::gpu::KernelSource;

/// Shared headers, by the name `#include` uses.
pub const HEADERS: &[(&str, &str)] = &[
    ("common/util.cuh", include_str!("../kernels/common/util.cuh")),
    ("common/blur.cuh", include_str!("../kernels/common/blur.cuh")),
];

/// Every kernel module.
pub const SOURCES: &[KernelSource] = &[
    KernelSource {
        name: "preprocess",
        source: include_str!("../kernels/preprocess.cu"),
        functions: &["preprocess_rgb_to_gray", "preprocess_gray16_to_gray8", "preprocess_downscale"],
    },
    KernelSource { name: "maxtree", source: include_str!("../kernels/maxtree.cu"), functions: crate::ops::maxtree::gpu::FUNCTIONS },
    KernelSource { name: "ccl", source: include_str!("../kernels/ccl.cu"), functions: crate::ops::ccl::gpu::FUNCTIONS },
    KernelSource { name: "blur", source: include_str!("../kernels/blur.cu"), functions: crate::ops::blur::gpu::FUNCTIONS },
    KernelSource { name: "segment", source: include_str!("../kernels/segment.cu"), functions: crate::ops::segment::gpu::FUNCTIONS },
    KernelSource {
        name: "linear_opening",
        source: include_str!("../kernels/linear_opening.cu"),
        functions: &[
            "linear_opening_lines_u8",
            "linear_opening_lines_u16",
            "linear_opening_lines_spill_u8",
            "linear_opening_lines_spill_u16",
            "linear_opening_transpose_u8",
            "linear_opening_transpose_u16",
            "linear_opening_reduce_u8",
            "linear_opening_reduce_u16",
            "linear_opening_finish_u8",
            "linear_opening_finish_u16",
        ],
    },
];
