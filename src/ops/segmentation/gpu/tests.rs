//! Unit tests of the host side: the finisher structs' layout against the kernel's, the giant
//! masks, the rounds read from the counters and the round caps they set.

use super::history::{History, Produced, Recent, RoundsUsed, giant_masks, read_rounds};
use super::layout::{NCTL, SegmentationFinish, SegmentationPtrs};
use super::{SegmentationParams, SegmentationTuning};

#[test]
fn finish_parameters_have_the_kernel_layout() {
    // 36 device addresses (SegmentationPtrs), k, zlim, 14 u32s (SegmentationFinish in segmentation.cu).
    assert_eq!(std::mem::size_of::<SegmentationPtrs>(), 36 * 8);
    assert_eq!(
        std::mem::size_of::<SegmentationFinish>(),
        36 * 8 + 8 + 8 + 14 * 4
    );
    assert_eq!(std::mem::align_of::<SegmentationFinish>(), 8);
}

#[test]
fn giant_masks_mark_the_rounds_with_giant_trees() {
    let max_rounds = 100;
    let mut counts = vec![0u32; NCTL];
    counts[1] = 1; // merge round 1
    counts[11] = 2; // merge round 11
    counts[70] = 1; // merge round 70: past the mask, always launched
    counts[max_rounds as usize + 2] = 1; // min_size round 2
    let m = giant_masks(&counts, max_rounds);
    assert_eq!(m, [1 | (1 << 10), 1 << 1]);
    assert_eq!(giant_masks(&vec![0; NCTL], max_rounds), [0, 0]);
}

/// `SegmentationPtrs` and segmentation.cu's `SegmentationPtrs` name the same fields in the same order (a field added
/// on one side only shifts every address after it: the grid finisher's barrier then lands
/// in another buffer and the frame never finishes).
#[test]
fn ptrs_fields_match_the_kernel_struct() {
    let dbg = format!("{:?}", SegmentationPtrs::default());
    let body = &dbg[dbg.find('{').unwrap() + 1..dbg.rfind('}').unwrap()];
    let parts: Vec<&str> = body.split(": ").collect();
    let rust: Vec<&str> = parts[..parts.len() - 1]
        .iter()
        .map(|p| p.rsplit([' ', ',']).next().unwrap())
        .collect();
    let src = include_str!("../../../../kernels/segmentation/grid.cuh");
    let start = src.find("struct SegmentationPtrs {").unwrap();
    let end = start + src[start..].find("};").unwrap();
    let kernel: Vec<&str> = src[start..end]
        .lines()
        .skip(1)
        .filter_map(|l| l.trim().strip_suffix(';'))
        .map(|decl| {
            let name = decl.rsplit(['*', ' ']).next().unwrap();
            name.split('[').next().unwrap()
        })
        .collect();
    assert_eq!(rust, kernel);
}

#[test]
fn rounds_from_counters() {
    let prod = Produced {
        width: 1,
        height: 1,
        caps: [4, 3],
        finish: false,
        full: [4, 3],
        max_rounds: 4,
        level: None,
    };
    let mut ctl = vec![0u32; NCTL];
    let mut mctl = vec![0u32; NCTL];
    let mut frontier = vec![0u32; NCTL];
    let mut info = vec![0u32; 4];
    ctl[0] = 1;
    // Merge rounds 1..=4 (round 2 froze components but merged nothing), min_size 5..=7.
    for (r, e, m, f) in [
        (1, 5, 5, 900),
        (2, 1, 0, 500),
        (3, 2, 2, 90),
        (5, 9, 3, 700),
        (6, 1, 1, 600),
    ] {
        ctl[r] = e;
        mctl[r] = m;
        frontier[r] = f;
    }
    let read = |ctl: &[u32], frontier: &[u32], info: &[u32], prod: &Produced| {
        read_rounds(ctl, &mctl, frontier, info, prod, 100)
    };
    let (lv, used) = read(&ctl, &frontier, &info, &prod);
    assert_eq!(lv, vec![1, 3, 5, 6]);
    assert_eq!(used.used, [3, 2]);
    assert_eq!(used.capped, [false, false]);
    // Merge: round 3 left 90 <= 100 frontier pixels; min_size: never, so one past its last.
    assert_eq!(used.handoff, [3, 3]);
    ctl[4] = 1;
    assert!(read(&ctl, &frontier, &info, &prod).1.capped[0]);
    ctl[4] = 0;
    // segmentation_finish ran each phase on to the parameters' caps (8 / 4 rounds here): its
    // rounds count, and a phase it left undone is capped.
    let fin = Produced {
        caps: [2, 1],
        finish: true,
        full: [8, 4],
        max_rounds: 8,
        ..prod
    };
    let (mut ctl8, mut mctl8, mut front8) = (vec![0u32; NCTL], vec![0u32; NCTL], vec![0u32; NCTL]);
    for (r, e, f) in [
        (1, 5, 900),
        (2, 3, 400),
        (3, 2, 50),
        (4, 1, 10),
        (9, 4, 300),
        (10, 1, 20),
    ] {
        ctl8[r] = e;
        mctl8[r] = e;
        front8[r] = f;
    }
    let (lv, used) = read_rounds(&ctl8, &mctl8, &front8, &info, &fin, 100);
    assert_eq!(lv, vec![1, 2, 3, 4, 9, 10]);
    assert_eq!(used.used, [4, 2]);
    assert_eq!(used.capped, [false, false]);
    assert_eq!(used.handoff, [3, 2]);
    info[3] = 1;
    assert_eq!(
        read_rounds(&ctl8, &mctl8, &front8, &info, &fin, 100)
            .1
            .capped,
        [false, true]
    );
}

/// Round caps from the history: the most any remembered frame wanted, the merge phase's
/// rounded up to `round_step`, the `min_size` phase's not; a phase the last frame ran to its
/// caps gets the parameters' caps; without a history (or adaptive rounds) the parameters' caps.
#[test]
fn caps_follow_recent_frames() {
    let tuning = SegmentationTuning {
        round_step: 4,
        adaptive_margin: 2,
        adaptive_history: 3,
        ..SegmentationTuning::default()
    };
    let params = SegmentationParams {
        adaptive_rounds: true,
        max_rounds: 50,
        max_min_size_rounds: 20,
        min_size: 10,
        ..SegmentationParams::default()
    };
    let h = History::new(&tuning);
    assert_eq!(h.caps(&params, &tuning), ([50, 20], false));
    h.hint.set(Some(RoundsUsed {
        used: [9, 2],
        capped: [false, false],
        handoff: [7, 2],
    }));
    // A hint but no remembered frame yet: what the last frame used plus the margin.
    assert_eq!(h.caps(&params, &tuning), ([12, 4], true));
    for (rounds, giant) in [
        ([5, 1], [0, 0]),
        ([9, 3], [1 << 10, 0]),
        ([6, 2], [1 << 2, 1]),
    ] {
        h.remember(Recent { rounds, giant }, tuning.adaptive_history);
    }
    assert_eq!(h.caps(&params, &tuning), ([12, 3], true));
    assert_eq!(h.giant_rounds(true, true), [(1 << 10) | (1 << 2), 1]);
    assert_eq!(h.giant_rounds(true, false), [u64::MAX; 2]);
    assert_eq!(h.giant_rounds(false, true), [u64::MAX; 2]);
    // The oldest frame leaves the history: the most is now 9 / 3, then 6 / 2.
    h.remember(
        Recent {
            rounds: [2, 1],
            giant: [0, 0],
        },
        tuning.adaptive_history,
    );
    h.remember(
        Recent {
            rounds: [2, 1],
            giant: [0, 0],
        },
        tuning.adaptive_history,
    );
    assert_eq!(h.caps(&params, &tuning), ([8, 2], true));
    // The last frame ran its merge phase to its caps: the parameters' caps for that phase.
    h.hint.set(Some(RoundsUsed {
        used: [8, 2],
        capped: [true, false],
        handoff: [8, 2],
    }));
    assert_eq!(h.caps(&params, &tuning), ([50, 2], true));
    // Fixed caps whatever the history.
    assert_eq!(
        h.caps(
            &SegmentationParams {
                adaptive_rounds: false,
                ..params
            },
            &tuning
        ),
        ([50, 20], false)
    );
    // No min_size phase below min_size 2.
    assert_eq!(
        h.caps(
            &SegmentationParams {
                min_size: 1,
                ..params
            },
            &tuning
        )
        .0[1],
        0
    );
}
