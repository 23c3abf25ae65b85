//! The embedded kernel sources: every `kernels/*.cu` with the entry points it must provide, and
//! every header they include (`kernels/common/*.cuh`, and the parts of a module too large for
//! one file, `kernels/segment/*.cuh`). The registry (`gpu::context`) compiles and loads them all
//! at start; the CI compile check (`tests/kernels_compile.rs`) compiles them for each target
//! architecture. Add a module here when adding a `.cu` file.

use crate::gpu::KernelSource;

/// Shared headers, by the name `#include` uses.
pub const HEADERS: &[(&str, &str)] = &[
    ("common/util.cuh", include_str!("../kernels/common/util.cuh")),
    ("common/blur.cuh", include_str!("../kernels/common/blur.cuh")),
    // The parts of kernels/segment.cu, which includes them in order.
    ("segment/common.cuh", include_str!("../kernels/segment/common.cuh")),
    ("segment/edges.cuh", include_str!("../kernels/segment/edges.cuh")),
    ("segment/scan.cuh", include_str!("../kernels/segment/scan.cuh")),
    ("segment/trees.cuh", include_str!("../kernels/segment/trees.cuh")),
    ("segment/tiles.cuh", include_str!("../kernels/segment/tiles.cuh")),
    ("segment/cat_small.cuh", include_str!("../kernels/segment/cat_small.cuh")),
    ("segment/cat_sort.cuh", include_str!("../kernels/segment/cat_sort.cuh")),
    ("segment/cat_large.cuh", include_str!("../kernels/segment/cat_large.cuh")),
    ("segment/grid.cuh", include_str!("../kernels/segment/grid.cuh")),
    ("segment/giant.cuh", include_str!("../kernels/segment/giant.cuh")),
    ("segment/finish.cuh", include_str!("../kernels/segment/finish.cuh")),
    ("segment/relabel.cuh", include_str!("../kernels/segment/relabel.cuh")),
];

/// Every kernel module.
pub const SOURCES: &[KernelSource] = &[
    KernelSource {
        name: "preprocess",
        source: include_str!("../kernels/preprocess.cu"),
        functions: crate::ops::preprocess::FUNCTIONS,
    },
    KernelSource { name: "maxtree", source: include_str!("../kernels/maxtree.cu"), functions: crate::ops::maxtree::gpu::FUNCTIONS },
    KernelSource { name: "ccl", source: include_str!("../kernels/ccl.cu"), functions: crate::ops::ccl::gpu::FUNCTIONS },
    KernelSource { name: "blur", source: include_str!("../kernels/blur.cu"), functions: crate::ops::blur::gpu::FUNCTIONS },
    KernelSource { name: "segment", source: include_str!("../kernels/segment.cu"), functions: crate::ops::segment::gpu::FUNCTIONS },
    KernelSource { name: "compose", source: include_str!("../kernels/compose.cu"), functions: crate::compose::gpu::FUNCTIONS },
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
