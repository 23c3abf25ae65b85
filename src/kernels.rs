//! The embedded kernel sources: every `kernels/*.cu` with the entry points it must provide, and
//! every header they include (`kernels/common/*.cuh`, and the parts of a module too large for
//! one file, `kernels/segmentation/*.cuh`). The registry (`gpu::context`) compiles and loads them all
//! at start; the CI compile check (`tests/kernels_compile.rs`) compiles them for each target
//! architecture. Add a module here when adding a `.cu` file.

use crate::gpu::KernelSource;

/// Shared headers, by the name `#include` uses.
pub const HEADERS: &[(&str, &str)] = &[
    (
        "common/util.cuh",
        include_str!("../kernels/common/util.cuh"),
    ),
    (
        "common/blur.cuh",
        include_str!("../kernels/common/blur.cuh"),
    ),
    // The parts of kernels/segmentation.cu, which includes them in order.
    (
        "segmentation/common.cuh",
        include_str!("../kernels/segmentation/common.cuh"),
    ),
    (
        "segmentation/edges.cuh",
        include_str!("../kernels/segmentation/edges.cuh"),
    ),
    (
        "segmentation/scan.cuh",
        include_str!("../kernels/segmentation/scan.cuh"),
    ),
    (
        "segmentation/trees.cuh",
        include_str!("../kernels/segmentation/trees.cuh"),
    ),
    (
        "segmentation/tiles.cuh",
        include_str!("../kernels/segmentation/tiles.cuh"),
    ),
    (
        "segmentation/cat_small.cuh",
        include_str!("../kernels/segmentation/cat_small.cuh"),
    ),
    (
        "segmentation/cat_sort.cuh",
        include_str!("../kernels/segmentation/cat_sort.cuh"),
    ),
    (
        "segmentation/cat_large.cuh",
        include_str!("../kernels/segmentation/cat_large.cuh"),
    ),
    (
        "segmentation/grid.cuh",
        include_str!("../kernels/segmentation/grid.cuh"),
    ),
    (
        "segmentation/giant.cuh",
        include_str!("../kernels/segmentation/giant.cuh"),
    ),
    (
        "segmentation/finish.cuh",
        include_str!("../kernels/segmentation/finish.cuh"),
    ),
    (
        "segmentation/relabel.cuh",
        include_str!("../kernels/segmentation/relabel.cuh"),
    ),
];

/// Every kernel module.
pub const SOURCES: &[KernelSource] = &[
    KernelSource {
        name: "preprocess",
        source: include_str!("../kernels/preprocess.cu"),
        functions: crate::ops::preprocess::FUNCTIONS,
    },
    KernelSource {
        name: "nv12",
        source: include_str!("../kernels/nv12.cu"),
        functions: crate::ops::nv12::gpu::FUNCTIONS,
    },
    KernelSource {
        name: "maxtree",
        source: include_str!("../kernels/maxtree.cu"),
        functions: crate::ops::maxtree::gpu::FUNCTIONS,
    },
    KernelSource {
        name: "cca",
        source: include_str!("../kernels/cca.cu"),
        functions: crate::ops::cca::gpu::FUNCTIONS,
    },
    KernelSource {
        name: "blur",
        source: include_str!("../kernels/blur.cu"),
        functions: crate::ops::blur::gpu::FUNCTIONS,
    },
    KernelSource {
        name: "segmentation",
        source: include_str!("../kernels/segmentation.cu"),
        functions: crate::ops::segmentation::gpu::FUNCTIONS,
    },
    KernelSource {
        name: "compose",
        source: include_str!("../kernels/compose.cu"),
        functions: crate::compose::gpu::FUNCTIONS,
    },
    KernelSource {
        name: "orientation",
        source: include_str!("../kernels/orientation.cu"),
        functions: &[
            "orientation_lines_u8",
            "orientation_lines_u16",
            "orientation_lines_spill_u8",
            "orientation_lines_spill_u16",
            "orientation_transpose_u8",
            "orientation_transpose_u16",
            "orientation_reduce_u8",
            "orientation_reduce_u16",
            "orientation_finish_u8",
            "orientation_finish_u16",
        ],
    },
];
