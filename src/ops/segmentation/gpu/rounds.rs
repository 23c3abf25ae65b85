//! One phase's launched rounds (7-8 launches in 5 dependent steps each, side streams forked
//! and joined by events) and the finisher after them.

use std::sync::Arc;

use cudarc::driver::{CudaFunction, CudaStream, LaunchConfig};

use super::enqueue::timed;
use super::history::zero_key_limit;
use super::layout::{
    ALL, C_CURSOR, C_FRONTIER, C_GIANT, C_LARGE, C_MEMBERS, C_MID, C_ROOTS, C_SMALL, C_TINY,
    C_TREES, CAT_THREADS, LIST, MODE_MIN_SIZE, NCTL, SegmentationFinish, SegmentationPtrs,
};
use super::{SegmentationGpu, eid_bits};
use crate::gpu::launch::{ExLaunch, one_block};
use crate::gpu::{GpuError, KernelTimer};

/// One phase of rounds to enqueue.
pub(super) struct Phase {
    pub mode: u32,
    /// Global number of its first launched round.
    pub first: u32,
    /// Rounds launched.
    pub count: u32,
    pub k: f64,
    pub min_size: u32,
    pub pdl: bool,
    /// The round profile's stamps after each round and the finisher.
    #[cfg(feature = "profiling")]
    pub stamps: bool,
    /// Rounds the finisher may run after the launched ones (0: none).
    pub finish: u32,
    /// [`super::enqueue::Body::giant`] of this phase.
    pub giant: u64,
    /// Slot of `info` where the finisher reports rounds left undone.
    pub info_slot: u32,
}

/// A caterpillar launch of a round: kernel, tree list and its count, shape, timer region, and
/// whether the small and mid-size lists follow the kernel's own (the fused launches).
struct CatLaunch<'a> {
    kernel: &'a CudaFunction,
    list: u64,
    count: u64,
    cfg: LaunchConfig,
    region: &'static str,
    fused: bool,
}

/// What every launch of one phase passes besides its round's lists: the frame's buffers and
/// size, the phase's mode and parameters, the grid-stride shape and whether launches are
/// programmatic. Built once a phase so that each launch helper reads the same values.
struct PhaseArgs {
    p: SegmentationPtrs,
    w: u32,
    h: u32,
    nn: u32,
    eb: u32,
    mode: u32,
    k: f64,
    min_size: u32,
    /// The `min_size` phase (its timer regions, stamps and first lists differ).
    ms: bool,
    /// `segmentation_core`'s weight-0 key limit.
    zlim: u64,
    /// The grid-stride launch over the frame's pixels.
    cfg: LaunchConfig,
    /// Programmatic dependent launches (off when every launch is timed).
    pdl: bool,
}

impl PhaseArgs {
    /// Address of list count `kind` of round `r`.
    fn count_of(&self, kind: u64, r: u32) -> u64 {
        self.p.counts + 4 * (kind * NCTL as u64 + u64::from(r))
    }

    /// The timer region of a round kernel: `merge` (the kernel's own name) in the merge phase,
    /// `segment_minsize` for every kernel of the min_size phase.
    fn name(&self, merge: &'static str) -> &'static str {
        if self.ms { "segment_minsize" } else { merge }
    }
}

/// Where a phase's launches go: the caller's stream, the timer (a region a launch with
/// per-kernel timing, else `None`) and the phase's arguments; one value the launch helpers
/// share instead of three parameters each.
struct Cx<'c, 't> {
    stream: &'c Arc<CudaStream>,
    timer: &'c mut Option<&'t mut KernelTimer>,
    a: &'c PhaseArgs,
}

/// One launched round's numbers and list addresses: its global number, the round its gate
/// reads, its input and output lists (double-buffered by parity) and the counts each step
/// writes. Derived once a round so that the five steps' helpers pass the same addresses.
struct RoundArgs {
    r: u32,
    gate: u32,
    /// Whether `segmentation_cat_giant` runs this round (after `segmentation_cat_block_g`).
    giant_here: bool,
    gcnt: u64,
    least_iterates: u32,
    fin: u64,
    fout: u64,
    rin: u64,
    rout: u64,
    fcin: u64,
    fcout: u64,
    rcin: u64,
    rcout: u64,
    hcount: u64,
    xcount: u64,
    scount: u64,
    bcount: u64,
    cursor: u64,
    tcount: u64,
    mcount: u64,
}

impl RoundArgs {
    /// Round `i` (from 0) of phase `ph`; `giant_blocks`: the grid of `segmentation_cat_giant` (0:
    /// never launched).
    fn new(a: &PhaseArgs, ph: &Phase, i: u32, giant_blocks: u32) -> Self {
        let p = &a.p;
        let r = ph.first + i;
        // Round r's index in its phase's giant mask (merge rounds count from 1, min_size rounds
        // from the phase's first).
        let phase_first = if a.ms { ph.first } else { 1 };
        let gi = r - phase_first;
        let giant_here = giant_blocks > 0 && (gi >= 64 || (ph.giant >> gi) & 1 == 1);
        // A phase's first round reads the lists that start it (segmentation_reset_done's; for
        // merge round 2 the roots segmentation_tiles listed, while its least edges scan every
        // pixel); later rounds the previous round's.
        let from_lists = i == 0 && a.ms;
        let (cur, prev) = ((i & 1) as usize, ((i + 1) & 1) as usize);
        let input = if from_lists { 0 } else { r - 1 };
        Self {
            r,
            gate: if i == 0 { 0 } else { r - 1 },
            giant_here,
            gcnt: a.count_of(C_GIANT, r),
            least_iterates: if i == 0 && !a.ms { ALL } else { LIST },
            fin: p.flist[prev],
            fout: p.flist[cur],
            rin: p.rlist[prev],
            rout: p.rlist[cur],
            fcin: a.count_of(C_FRONTIER, input),
            fcout: a.count_of(C_FRONTIER, r),
            rcin: a.count_of(C_ROOTS, input),
            rcout: a.count_of(C_ROOTS, r),
            hcount: a.count_of(C_TREES, r),
            xcount: a.count_of(C_MEMBERS, r),
            scount: a.count_of(C_SMALL, r),
            bcount: a.count_of(C_LARGE, r),
            cursor: a.count_of(C_CURSOR, r),
            tcount: a.count_of(C_TINY, r),
            mcount: a.count_of(C_MID, r),
        }
    }
}

/// The caterpillar kernels' parameters (SEG_CAT_ARGS) for tree list `list` counted at `count`:
/// every caterpillar launch (and `segmentation_cat_giant`) starts with these.
fn cat_args<'a>(
    l: &mut ExLaunch<'a>,
    a: &'a PhaseArgs,
    ra: &'a RoundArgs,
    list: &'a u64,
    count: &'a u64,
) {
    let p = &a.p;
    l.arg(&p.link)
        .arg(&p.done)
        .arg(&p.size)
        .arg(&p.cint)
        .arg(&p.tkey)
        .arg(&p.tcnt)
        .arg(&p.joff);
    l.arg(&p.jarr)
        .arg(&p.round)
        .arg(&p.w4)
        .arg(&a.eb)
        .arg(&a.mode)
        .arg(&a.min_size);
    l.arg(&a.k)
        .arg(&p.ctl)
        .arg(&p.mctl)
        .arg(&ra.gate)
        .arg(&ra.r)
        .arg(list)
        .arg(count);
    l.arg(&p.scr_k).arg(&p.scr_i).arg(&a.nn).arg(&ra.gcnt);
}

impl SegmentationGpu {
    /// `ph.count` rounds of `ph.mode` with global numbers `ph.first..`, each gated on the
    /// previous, then the finisher.
    pub(super) fn enqueue_phase(
        &self,
        stream: &Arc<CudaStream>,
        timer: &mut Option<&mut KernelTimer>,
        ph: &Phase,
    ) -> Result<(), GpuError> {
        let Some(b) = self.buffers.as_ref() else {
            return Ok(());
        };
        let n = b.width * b.height;
        let nn = n as u32;
        let eb = eid_bits(n);
        let ms = ph.mode == MODE_MIN_SIZE;
        let a = PhaseArgs {
            p: b.p,
            w: b.width as u32,
            h: b.height as u32,
            nn,
            eb,
            mode: ph.mode,
            k: ph.k,
            min_size: ph.min_size,
            ms,
            zlim: zero_key_limit(ms, ph.k, nn, eb),
            cfg: self.launch.stride(n),
            // Every round kernel starts while the one before it drains (programmatic dependent
            // launch; each waits on the device first) unless every launch is timed (the timer's
            // events sit between them).
            pdl: ph.pdl && timer.is_none(),
        };
        let mut cx = Cx {
            stream,
            timer,
            a: &a,
        };
        if ms {
            self.enqueue_reset_done(&mut cx)?;
        }
        for i in 0..ph.count {
            self.enqueue_round(&mut cx, ph, i)?;
        }
        if ph.finish > 0 {
            self.enqueue_finisher(&mut cx, ph)?;
        }
        Ok(())
    }

    /// The min_size phase's start: its first round runs over lists `segmentation_reset_done` makes
    /// (the pixels and roots of components below min_size), which it counts in the unused slot
    /// of round 0 (zeroed by segmentation_init) and writes where the first round reads its input
    /// (flist[1], rlist[1]: the lists of "the previous round").
    fn enqueue_reset_done(&self, cx: &mut Cx<'_, '_>) -> Result<(), GpuError> {
        let (stream, a) = (cx.stream, cx.a);
        let p = &a.p;
        timed(cx.timer, stream, "segment_minsize", || {
            let mut l = ExLaunch::new(stream, &self.kernels.reset_done, a.pdl);
            l.arg(&p.done)
                .arg(&p.order)
                .arg(&p.size)
                .arg(&a.min_size)
                .arg(&a.nn);
            let (fc0, rc0) = (a.count_of(C_FRONTIER, 0), a.count_of(C_ROOTS, 0));
            l.arg(&p.comp).arg(&p.link);
            l.arg(&p.flist[1]).arg(&fc0).arg(&p.rlist[1]).arg(&rc0);
            // SAFETY: block-uniform grid-stride over pixels < n; link chains end at roots
            // < n; each list gets at most n entries (one a pixel), counts NCOUNTS * NCTL.
            unsafe { l.launch(a.cfg) }?;
            Ok(())
        })
    }

    /// Launched round `i` of phase `ph`, its five dependent steps in order: least edges;
    /// targets and trees; the trees' ranges beside the exits; core; the caterpillars.
    fn enqueue_round(&self, cx: &mut Cx<'_, '_>, ph: &Phase, i: u32) -> Result<(), GpuError> {
        let ra = RoundArgs::new(cx.a, ph, i, self.launch.giant_blocks);
        self.enqueue_least_edges(cx, &ra)?;
        self.enqueue_targets_trees(cx, &ra)?;
        // With per-launch timing everything stays on `stream` (the timer's events are there);
        // else the side streams run beside it.
        let concurrent = cx.timer.is_none();
        self.enqueue_alloc_exits(cx, &ra, concurrent)?;
        self.enqueue_core(cx, &ra)?;
        self.enqueue_caterpillars(cx, &ra, concurrent)?;
        #[cfg(feature = "profiling")]
        if ph.stamps {
            let label = if cx.a.ms { "min_size" } else { "merge" };
            self.stamp(cx.stream, label, Some(ra.r))?;
        }
        Ok(())
    }

    /// Step 1: `segmentation_least`, every frontier pixel's least alive edge, over the previous
    /// round's frontier (or every pixel in merge round 2); it lists this round's frontier.
    fn enqueue_least_edges(&self, cx: &mut Cx<'_, '_>, ra: &RoundArgs) -> Result<(), GpuError> {
        let (stream, a) = (cx.stream, cx.a);
        let p = &a.p;
        timed(cx.timer, stream, a.name("segment_minedge"), || {
            let mut l = ExLaunch::new(stream, &self.kernels.least, a.pdl);
            l.arg(&p.comp)
                .arg(&p.link)
                .arg(&p.w4)
                .arg(&p.best)
                .arg(&p.done)
                .arg(&p.target)
                .arg(&p.tkey);
            l.arg(&p.order)
                .arg(&a.w)
                .arg(&a.h)
                .arg(&a.eb)
                .arg(&a.mode)
                .arg(&p.ctl)
                .arg(&ra.gate)
                .arg(&ra.least_iterates);
            l.arg(&ra.fin).arg(&ra.fcin).arg(&ra.fout).arg(&ra.fcout);
            // SAFETY: grid-stride over pixels < n (or list entries < the list's count, which
            // hold pixel ids); neighbours are bounds-checked; lists hold n entries.
            unsafe { l.launch(a.cfg) }?;
            Ok(())
        })
    }

    /// Step 2: targets and trees in one launch, over a list of roots (the previous round's, or
    /// the lists of segmentation_tiles and segmentation_reset_done that start a phase).
    fn enqueue_targets_trees(&self, cx: &mut Cx<'_, '_>, ra: &RoundArgs) -> Result<(), GpuError> {
        let (stream, a) = (cx.stream, cx.a);
        let p = &a.p;
        timed(
            cx.timer,
            stream,
            a.name("segmentation_targets_trees"),
            || {
                let mut l = ExLaunch::new(stream, &self.kernels.targets_trees, a.pdl);
                l.arg(&p.comp)
                    .arg(&p.link)
                    .arg(&p.best)
                    .arg(&p.tkey)
                    .arg(&p.target)
                    .arg(&p.tree);
                l.arg(&p.exitk)
                    .arg(&p.done)
                    .arg(&a.w)
                    .arg(&a.eb)
                    .arg(&a.mode)
                    .arg(&p.ctl)
                    .arg(&p.mctl);
                l.arg(&ra.gate)
                    .arg(&ra.r)
                    .arg(&ra.rin)
                    .arg(&ra.rcin)
                    .arg(&ra.rout)
                    .arg(&ra.rcout)
                    .arg(&p.tcnt);
                l.arg(&p.hlist).arg(&ra.hcount);
                // SAFETY: grid-stride over the previous round's roots (list entries < its
                // count, ids < n); edge ids decode to pixels < n; each walk follows targets
                // to a mutual pair or a sink; a tree is listed once; r < NCTL.
                unsafe { l.launch(a.cfg) }?;
                Ok(())
            },
        )
    }

    /// Step 3: the trees' ranges (`segmentation_alloc`), on the first side stream when `concurrent`
    /// (forked from `stream` and joined back), while `segmentation_exits` scans the exits on
    /// `stream`; the two touch disjoint buffers.
    fn enqueue_alloc_exits(
        &self,
        cx: &mut Cx<'_, '_>,
        ra: &RoundArgs,
        concurrent: bool,
    ) -> Result<(), GpuError> {
        let (stream, a) = (cx.stream, cx.a);
        let kn = &self.kernels;
        let p = &a.p;
        if concurrent {
            kn.fork.record(stream)?;
            kn.side[0].wait(&kn.fork)?;
        }
        let on = if concurrent { &kn.side[0] } else { stream };
        timed(cx.timer, stream, a.name("segmentation_alloc"), || {
            let mut l = ExLaunch::new(on, &kn.alloc, a.pdl);
            l.arg(&p.tcnt).arg(&p.joff).arg(&ra.cursor);
            l.arg(&p.done).arg(&a.mode).arg(&p.jarr).arg(&p.tkey);
            l.arg(&p.ctl).arg(&ra.gate).arg(&p.hlist).arg(&ra.hcount);
            // SAFETY: grid-stride over the listed trees (ids < n, each once); the ranges sum
            // to the round's active roots plus one slot per sink tree (the sink, a root
            // outside them), at most n. It reads and writes nothing segmentation_exits touches.
            unsafe { l.launch(a.cfg) }?;
            Ok(())
        })?;
        timed(cx.timer, stream, a.name("segmentation_exits"), || {
            let mut l = ExLaunch::new(stream, &kn.exits, a.pdl);
            l.arg(&p.comp)
                .arg(&p.link)
                .arg(&p.w4)
                .arg(&p.done)
                .arg(&p.target)
                .arg(&p.tree)
                .arg(&p.order);
            l.arg(&p.exitk)
                .arg(&a.w)
                .arg(&a.eb)
                .arg(&a.mode)
                .arg(&p.ctl)
                .arg(&ra.gate);
            l.arg(&ra.fout).arg(&ra.fcout);
            // SAFETY: grid-stride over this round's frontier (pixel ids < n); the order
            // words only name in-image neighbours; tree ids are roots < n.
            unsafe { l.launch(a.cfg) }?;
            Ok(())
        })?;
        if concurrent {
            kn.joins[0].record(&kn.side[0])?;
            stream.wait(&kn.joins[0])?;
        }
        Ok(())
    }

    /// Step 4: `segmentation_core`, each tree's core members counted into its range and the trees
    /// listed by size (tiny, small, mid-size, large) for the caterpillars.
    fn enqueue_core(&self, cx: &mut Cx<'_, '_>, ra: &RoundArgs) -> Result<(), GpuError> {
        let (stream, a) = (cx.stream, cx.a);
        let p = &a.p;
        timed(cx.timer, stream, a.name("segmentation_core"), || {
            let mut l = ExLaunch::new(stream, &self.kernels.core, a.pdl);
            l.arg(&p.target)
                .arg(&p.tree)
                .arg(&p.best)
                .arg(&p.tkey)
                .arg(&p.exitk)
                .arg(&p.done)
                .arg(&a.mode);
            l.arg(&p.tcnt).arg(&p.joff).arg(&p.jarr).arg(&ra.xcount);
            l.arg(&p.tlist)
                .arg(&ra.tcount)
                .arg(&p.slist)
                .arg(&ra.scount)
                .arg(&p.mlist)
                .arg(&ra.mcount);
            l.arg(&p.blist)
                .arg(&ra.bcount)
                .arg(&p.ctl)
                .arg(&p.mctl)
                .arg(&ra.gate)
                .arg(&ra.rout)
                .arg(&ra.rcout);
            l.arg(&p.link)
                .arg(&p.size)
                .arg(&p.round)
                .arg(&ra.r)
                .arg(&a.zlim);
            // SAFETY: grid-stride over the active roots (ids < n); a weight-0 member joins
            // its tree's id (< n) directly; r < NCTL; a core member's slot is
            // below its tree's member count (its range's length, from segmentation_alloc, which
            // this stream has waited for), so it lands in the tree's range inside jarr; each
            // tree is listed once (by the group that counts its members off to 0), at most
            // n trees.
            unsafe { l.launch(a.cfg) }?;
            Ok(())
        })
    }

    /// The caterpillar launches of round `ra`, in launch order: the tiny and small (and from
    /// `mid_trees_fused_from` the mid-size) trees in one launch, else the mid-size trees'
    /// kernel, and last `segmentation_cat_block` (`segmentation_cat_block_g` when the giant trees are
    /// left to `segmentation_cat_giant`).
    fn cat_launches(&self, a: &PhaseArgs, ra: &RoundArgs) -> Vec<CatLaunch<'_>> {
        let (kn, launch, p) = (&self.kernels, &self.launch, &a.p);
        let with_mid = self
            .tuning
            .mid_trees_fused_from
            .is_some_and(|from| ra.r >= from);
        let mut cats = Vec::with_capacity(3);
        cats.push(if with_mid {
            CatLaunch {
                kernel: &kn.cat_small_mid,
                list: p.tlist,
                count: ra.tcount,
                cfg: launch.small_mid,
                region: "segmentation_cat_small",
                fused: true,
            }
        } else {
            CatLaunch {
                kernel: &kn.cat_small,
                list: p.tlist,
                count: ra.tcount,
                cfg: launch.small,
                region: "segmentation_cat_small",
                fused: true,
            }
        });
        if !with_mid {
            cats.push(CatLaunch {
                kernel: &kn.cat_mid,
                list: p.mlist,
                count: ra.mcount,
                cfg: launch.mid,
                region: "segmentation_cat_mid",
                fused: false,
            });
        }
        cats.push(CatLaunch {
            kernel: if ra.giant_here {
                &kn.cat_block_g
            } else {
                &kn.cat_block
            },
            list: p.blist,
            count: ra.bcount,
            cfg: launch.block,
            region: "segmentation_cat_block",
            fused: false,
        });
        cats
    }

    /// Step 5: the caterpillars. The tiny and small (and from `mid_trees_fused_from` the
    /// mid-size) trees share one launch on `stream`; the mid-size trees' kernel before that and
    /// the large trees' get a side stream each when `concurrent` (forked from `stream` and
    /// joined back), `segmentation_cat_giant` after `segmentation_cat_block_g` on the same stream.
    fn enqueue_caterpillars(
        &self,
        cx: &mut Cx<'_, '_>,
        ra: &RoundArgs,
        concurrent: bool,
    ) -> Result<(), GpuError> {
        let (stream, a) = (cx.stream, cx.a);
        let kn = &self.kernels;
        let p = &a.p;
        let cats = self.cat_launches(a, ra);
        // segmentation_cat_block (and segmentation_cat_giant after it) last, on the last side stream;
        // the first kernel on `stream`, the others on the side streams in order.
        let block_side = kn.side.len() - 1;
        let last = cats.len() - 1;
        let side_of = |j: usize| match j {
            0 => None,
            j if j == last => Some(block_side),
            j => Some(j - 1),
        };
        let sides_used: Vec<usize> = (0..cats.len()).filter_map(side_of).collect();
        if concurrent {
            kn.fork.record(stream)?;
            for &j in &sides_used {
                kn.side[j].wait(&kn.fork)?;
            }
        }
        for (j, cat) in cats.into_iter().enumerate() {
            let on = match side_of(j) {
                Some(side) if concurrent => &kn.side[side],
                _ => stream,
            };
            timed(cx.timer, stream, a.name(cat.region), || {
                let mut l = ExLaunch::new(on, cat.kernel, a.pdl);
                cat_args(&mut l, a, ra, &cat.list, &cat.count);
                if cat.fused {
                    l.arg(&p.slist)
                        .arg(&ra.scount)
                        .arg(&p.mlist)
                        .arg(&ra.mcount);
                }
                // SAFETY: one warp lane group (block) per listed tree, each tree listed once,
                // the four lists disjoint (so the kernels may run at once); a member is in one
                // tree's range, so its link/round and the tree root's size/Int/done are
                // written by that group (block) only, as is the tree's range of the sort
                // scratch (2n keys and ids: [off, off + count) and n past it); the block
                // launches have their kernels' SEG_CAT_THREADS / SEG_CAT_MID_THREADS threads;
                // segmentation_cat_block stages a whole tree only when it fits the dynamic shared
                // memory given here (its capacity read from %dynamic_smem_size);
                // segmentation_cat_small takes the small and mid-size lists after its own.
                unsafe { l.launch(cat.cfg) }?;
                Ok(())
            })?;
        }
        if ra.giant_here {
            // After segmentation_cat_block_g on its stream (a branch of its own cost more).
            let on = if concurrent {
                &kn.side[block_side]
            } else {
                stream
            };
            self.enqueue_cat_giant(cx, ra, on)?;
        }
        if concurrent {
            for &j in &sides_used {
                kn.joins[j].record(&kn.side[j])?;
                stream.wait(&kn.joins[j])?;
            }
        }
        Ok(())
    }

    /// `segmentation_cat_giant` on `on`: the large trees above SEG_CAT_GIANT members over a
    /// cooperative grid (timer region on `stream`).
    fn enqueue_cat_giant(
        &self,
        cx: &mut Cx<'_, '_>,
        ra: &RoundArgs,
        on: &Arc<CudaStream>,
    ) -> Result<(), GpuError> {
        let (stream, a) = (cx.stream, cx.a);
        let p = &a.p;
        timed(cx.timer, stream, a.name("segmentation_cat_giant"), || {
            let mut l = ExLaunch::new(on, &self.kernels.cat_giant, false).cooperative();
            cat_args(&mut l, a, ra, &p.blist, &ra.bcount);
            l.arg(&p.giant);
            let gcfg = LaunchConfig {
                grid_dim: (self.launch.giant_blocks, 1, 1),
                block_dim: (CAT_THREADS, 1, 1),
                shared_mem_bytes: 0,
            };
            // SAFETY: the large trees' list, of which it takes the trees above
            // SEG_CAT_GIANT members and segmentation_cat_block_g the others (a tree's count is
            // zeroed by the one that walked it, and both read a zero as "not mine"); a
            // cooperative grid of at most the blocks the device holds at once, so its
            // barriers (in the GIANT_WORDS scratch, zero between trees) complete; the
            // scratch ranges of its trees are theirs alone.
            unsafe { l.launch(gcfg) }?;
            Ok(())
        })
    }

    /// The finisher after phase `ph`'s launched rounds: up to `ph.finish` more rounds without
    /// launches, over a cooperative grid (`segmentation_finish_grid`) handing its smallest rounds on
    /// to one block (`segmentation_finish`), or in that one block alone.
    fn enqueue_finisher(&self, cx: &mut Cx<'_, '_>, ph: &Phase) -> Result<(), GpuError> {
        let (stream, a) = (cx.stream, cx.a);
        let (kn, launch) = (&self.kernels, &self.launch);
        let fin = launch.finisher;
        let grid = fin.grid && launch.grid_finish_blocks > 0;
        let from = ph.first + ph.count;
        let args = SegmentationFinish {
            p: a.p,
            k: a.k,
            zlim: a.zlim,
            width: a.w,
            height: a.h,
            n: a.nn,
            eb: a.eb,
            mode: a.mode,
            min_size: a.min_size,
            nctl: NCTL as u32,
            first: ph.first,
            from,
            last: from + ph.finish - 1,
            limit: fin.frontier_limit,
            info_slot: ph.info_slot,
            solo: fin.solo_frontier,
            resume: 0,
        };
        timed(cx.timer, stream, a.name("segmentation_finish"), || {
            if grid {
                let mut l = ExLaunch::new(stream, &kn.finish_grid, false).cooperative();
                l.arg(&args);
                let cfg = LaunchConfig {
                    grid_dim: (launch.grid_finish_blocks, 1, 1),
                    block_dim: (CAT_THREADS, 1, 1),
                    shared_mem_bytes: 0,
                };
                // SAFETY: as below over a cooperative grid of at most the blocks the device
                // holds at once (so its barriers, info[4], complete); info has 8 entries.
                unsafe { l.launch(cfg) }?;
                if fin.solo_frontier == 0 {
                    return Ok(());
                }
            }
            // After the grid: the rounds it left, from the one it recorded in info[6].
            let args = SegmentationFinish {
                resume: u32::from(grid),
                ..args
            };
            // A programmatic launch where allowed: segmentation_finish starts with grid_dep_wait.
            let mut l = ExLaunch::new(stream, &kn.finish, a.pdl);
            l.arg(&args);
            // SAFETY: one block of SEG_CAT_THREADS threads runs rounds from..=last (< NCTL)
            // over this frame's buffers, the same accesses as the round kernels (each step's
            // grid-stride loops over one block); info has 8 entries (info_slot 2 or 3).
            unsafe { l.launch(one_block(CAT_THREADS)) }?;
            Ok(())
        })?;
        #[cfg(feature = "profiling")]
        if ph.stamps {
            let label = if a.ms {
                "min_size finish"
            } else {
                "merge finish"
            };
            self.stamp(stream, label, None)?;
        }
        Ok(())
    }
}
