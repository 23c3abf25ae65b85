//! The tracker's fixed tuning: values that shape its algorithm but are no user setting (they
//! follow from the geometry of components, or were measured once on the project's scenes and
//! left alone), kept in one typed place, each with the reason for its value.

/// See the module docs; the values are [`TUNING`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Tuning {
    /// Area ratio (component / track) below which a component is a partial view of its object.
    pub partial_area: f64,
    /// Box size ratio (component / track) below which a component is cut on that axis, if it is
    /// also `partial_pixels` short: an object shrinks this fast only behind an occluder or at
    /// the frame border; the track's size follows real changes of a few percent a frame.
    pub partial_size: f64,
    /// Shortfall in pixels for a component to be cut on an axis (see `partial_size`).
    pub partial_pixels: f64,
    /// Share of a full view blended into a track's appearance and size (a few frames' memory).
    pub look_rate: f64,
    /// The same for partial views: slow, so a real change of size is followed within a second.
    pub partial_look_rate: f64,
    /// Variance of a merged member's placed centroid, in measurement variances (looser than a
    /// measurement: it is inferred from the group).
    pub merged_noise: f64,
    /// Margin around a component's box within which a predicted centroid counts as inside,
    /// pixels (a prediction a pixel or two off the component still lies in it).
    pub inside_margin: f64,
    /// `merge_area_share` for a group that goes on (two or more of its tracks were merged in
    /// the previous frame): objects that overlap more as they cross stay merged while the one
    /// behind shows a tenth of its area.
    pub keep_share: f64,
    /// Share of a merged track's predicted box that must lie in a component for it to stay in
    /// that component's group (its prediction may drift by a few pixels a frame while merged).
    pub keep_cover: f64,
    /// Smallest member of a group, as a share of its largest: a much smaller track whose
    /// prediction lies in a big component is more often a fragment of that object (a
    /// binarization that splits and rejoins it) than another object; it is left lost.
    pub min_member_share: f64,
    /// Largest spread a group's members may be given, as a multiple of their predicted spread
    /// (members predicted on top of each other are not flung to the component's corners).
    pub max_spread: f64,
    /// IoU at or above which a track and a detection that are each other's best overlap, with
    /// no rival of half that overlap on either side, are matched before any other pair is
    /// looked at: in a crowd most tracks pair off there, and the result did not change on the
    /// project's scenes from 0.5 down to 0.3.
    pub sure_iou: f64,
    /// Largest cluster side solved exactly by the Hungarian method (O(n³): 32³ is 33 000
    /// steps; larger clusters come only from crowds of touching objects, solved greedily).
    pub hungarian_max: usize,
    /// Cell side of the grid of the detections still open for re-identification, in
    /// `max_distance`s: they are few, and a lost track's gate spans several `max_distance`s.
    pub open_cell: f64,
    /// Largest appearance difference counted in a cost (a clearly different object is just
    /// that; beyond it, motion decides).
    pub max_difference: f64,
    /// Frame intervals the frame-rate estimate takes its median over (half a second at 30 fps:
    /// a dropped frame or a jittered timestamp does not move it).
    pub timestamp_intervals: usize,
    /// Longest interval between two timestamps counted as time that passed, seconds; a longer
    /// jump is a seek or a restart of the source and counts as one frame (the longest duration
    /// a setting may hold is an hour).
    pub max_step_seconds: f64,
}

/// The tracker's tuning.
pub(crate) const TUNING: Tuning = Tuning {
    partial_area: 0.7,
    partial_size: 0.92,
    partial_pixels: 2.0,
    look_rate: 0.3,
    partial_look_rate: 0.05,
    merged_noise: 4.0,
    inside_margin: 2.0,
    keep_share: 0.1,
    keep_cover: 0.3,
    min_member_share: 0.25,
    max_spread: 3.0,
    sure_iou: 0.3,
    hungarian_max: 32,
    open_cell: 4.0,
    max_difference: 4.0,
    timestamp_intervals: 15,
    max_step_seconds: 3600.0,
};
