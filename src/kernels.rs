//! The embedded kernel sources: every `kernels/*.cu` with the entry points it must provide, and
//! every header they include (`kernels/common/*.cuh`, and the parts of a module too large for
//! one file, `kernels/segmentation/*.cuh`). The registry (`gpu::context`) compiles and loads them all
//! at start; the CI compile check (`tests/kernels_compile.rs`) compiles them for each target
//! architecture. Add a module here when adding a `.cu` file.

/// A kernel module's embedded source.
#[derive(Clone, Copy, Debug)]
pub struct KernelSource {
    /// Module name: the file stem in `kernels/` (`maxtree` for `kernels/maxtree.cu`).
    pub name: &'static str,
    /// The `.cu` text.
    pub source: &'static str,
    /// Entry points that must resolve at load time.
    pub functions: &'static [&'static str],
}

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
        functions: &[
            "preprocess_rgb_to_gray",
            "preprocess_gray16_to_gray8",
            "preprocess_downscale",
            "preprocess_histogram",
        ],
    },
    KernelSource {
        name: "nv12",
        source: include_str!("../kernels/nv12.cu"),
        functions: &["nv12_to_rgb"],
    },
    KernelSource {
        name: "maxtree",
        source: include_str!("../kernels/maxtree.cu"),
        functions: &[
            "maxtree_local_u8",
            "maxtree_local_u16",
            "maxtree_merge",
            "maxtree_flatten",
            "maxtree_nodes",
            "maxtree_pixels",
            "maxtree_double",
            "maxtree_attr",
            "maxtree_amax_init",
            "maxtree_amax",
            "maxtree_amax_fold",
            "maxtree_keep",
            "maxtree_jump",
            "maxtree_restitute_u8",
            "maxtree_restitute_u16",
            "maxtree_residue_stats_u8",
            "maxtree_residue_stats_u16",
        ],
    },
    KernelSource {
        name: "cca",
        source: include_str!("../kernels/cca.cu"),
        functions: &[
            "cca_hist",
            "cca_otsu",
            "cca_binarize",
            "cca_strip",
            "cca_merge",
            "cca_count_roots",
            "cca_scan_rows",
            "cca_label_roots",
            "cca_relabel",
            "cca_features",
        ],
    },
    KernelSource {
        name: "blur",
        source: include_str!("../kernels/blur.cu"),
        functions: &[
            "blur_vertical",
            "blur_horizontal",
            "blur_vertical_f64",
            "blur_horizontal_f64",
        ],
    },
    KernelSource {
        name: "segmentation",
        source: include_str!("../kernels/segmentation.cu"),
        functions: &[
            "segmentation_init",
            "segmentation_edges",
            "segmentation_blur_edges",
            "segmentation_least",
            "segmentation_targets_trees",
            "segmentation_exits",
            "segmentation_core",
            "segmentation_alloc",
            "segmentation_cat_block",
            "segmentation_cat_block_g",
            "segmentation_cat_giant",
            "segmentation_cat_mid",
            "segmentation_cat_small",
            "segmentation_cat_small_mid",
            "segmentation_reset_done",
            "segmentation_final",
            "segmentation_minpix",
            "segmentation_scan_count",
            "segmentation_scan_blocks",
            "segmentation_scan_label",
            "segmentation_labels",
            "segmentation_level_threshold",
            "segmentation_level_comp",
            "segmentation_stamp",
            "segmentation_finish",
            "segmentation_finish_grid",
            "segmentation_tiles",
        ],
    },
    KernelSource {
        name: "compose",
        source: include_str!("../kernels/compose.cu"),
        functions: &[
            "compose_segment_sums",
            "compose_segment_fill",
            "compose_shapes",
            "compose_rgb",
            "compose_rgba",
            "compose_i420",
        ],
    },
    KernelSource {
        name: "orientation",
        source: include_str!("../kernels/orientation.cu"),
        functions: &[
            "orientation_lines_u8",
            "orientation_lines_u16",
            "orientation_lines_global_u8",
            "orientation_lines_global_u16",
            "orientation_transpose_u8",
            "orientation_transpose_u16",
            "orientation_reduce_u8",
            "orientation_reduce_u16",
            "orientation_finish_u8",
            "orientation_finish_u16",
        ],
    },
    KernelSource {
        name: "convert",
        source: include_str!("../kernels/convert.cu"),
        functions: &[
            "convert_u32_to_i64",
            "convert_u32_to_i32",
            "convert_lookup_u16_f32",
        ],
    },
];
