//! The C ABI of a chosen plan (header `include/patio_layout.h`): what a VOL connector
//! or an MPI-IO layer needs to carry out a decision without Python — an opaque
//! `PatioPlan` made by `patio_decider_plan[_points]`, and accessors for its kind,
//! modelled seconds and saving, the buffer the request fills, and per piece the copy
//! read, the selection in that copy, its destination in the buffer, the axis order,
//! and the byte extents the source touches. Status codes as in [`crate::capi`].

use crate::capi::{
    fail, guarded, handle, handle_mut, hyperslabs, layout_err, slice, PatioDecider, PATIO_EINVAL,
    PATIO_ENULL, PATIO_ERANGE,
};
use crate::decide::Plan;
use crate::flatten::flatten;
use crate::pieces::{Piece, Pieces};
use crate::selection::Selection;

/// Plan kinds (`patio_plan_summary`).
pub const PATIO_PLAN_ORIGINAL: i32 = 0;
pub const PATIO_PLAN_WHOLE: i32 = 1;
pub const PATIO_PLAN_SUB: i32 = 2;
pub const PATIO_PLAN_SPLIT: i32 = 3;
pub const PATIO_PLAN_POINTS: i32 = 4;
pub const PATIO_PLAN_COMBINED: i32 = 5;
/// Selection kinds.
pub const PATIO_SEL_GRIDS: i32 = 0;
pub const PATIO_SEL_POINTS: i32 = 1;
/// Sides of a piece.
pub const PATIO_SOURCE: i32 = 0;
pub const PATIO_DEST: i32 = 1;

/// Opaque plan handle.
pub struct PatioPlan {
    gen: u64,
    kind: i32,
    seconds: f64,
    saved: f64,
    pieces: Pieces,
}

fn kind_of(p: &Plan) -> i32 {
    match p {
        Plan::Original => PATIO_PLAN_ORIGINAL,
        Plan::Whole(_) => PATIO_PLAN_WHOLE,
        Plan::Sub(_) => PATIO_PLAN_SUB,
        Plan::Split { .. } => PATIO_PLAN_SPLIT,
        Plan::Points { .. } => PATIO_PLAN_POINTS,
        Plan::Combined { .. } => PATIO_PLAN_COMBINED,
    }
}

unsafe fn plan_of(
    decider: *mut PatioDecider,
    sel: impl FnOnce() -> Result<Selection, i32>,
    out: *mut *mut PatioPlan,
) -> i32 {
    guarded(|| {
        let d = handle_mut(decider, "decider")?;
        if out.is_null() {
            return Err(fail(PATIO_ENULL, "out is null"));
        }
        let sel = sel()?;
        let (c, saved) = d.d.choose(&sel).map_err(layout_err)?;
        let pieces = d.d.pieces(&sel, &c).map_err(layout_err)?;
        *out = Box::into_raw(Box::new(PatioPlan {
            gen: d.gen,
            kind: kind_of(&c.plan),
            seconds: c.seconds,
            saved,
            pieces,
        }));
        Ok(())
    })
}

/// The plan for reading the hyperslabs (chosen and remembered as by
/// `patio_decider_choose`), as pieces.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_decider_plan(
    decider: *mut PatioDecider,
    rank: u32,
    nslabs: u64,
    slabs: *const u64,
    out: *mut *mut PatioPlan,
) -> i32 {
    plan_of(decider, || hyperslabs(rank, nslabs, slabs), out)
}

/// The plan for reading `npoints` points (`rank` coordinates each, in buffer order).
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_decider_plan_points(
    decider: *mut PatioDecider,
    rank: u32,
    npoints: u64,
    coords: *const u64,
    out: *mut *mut PatioPlan,
) -> i32 {
    plan_of(
        decider,
        || {
            let n = (npoints as usize)
                .checked_mul(rank.max(1) as usize)
                .ok_or_else(|| fail(PATIO_EINVAL, "too many points"))?;
            if rank == 0 {
                return Err(fail(PATIO_EINVAL, "points of rank 0"));
            }
            Ok(Selection::Points {
                rank: rank as usize,
                coords: slice(coords, n, "coords")?.to_vec(),
            })
        },
        out,
    )
}

/// Frees a plan.
///
/// # Safety
/// `plan` is null or a handle from `patio_decider_plan[_points]`, freed once.
#[no_mangle]
pub unsafe extern "C" fn patio_plan_free(plan: *mut PatioPlan) {
    if !plan.is_null() {
        drop(Box::from_raw(plan));
    }
}

unsafe fn out<'a, T>(p: *mut T, what: &str) -> Result<&'a mut T, i32> {
    p.as_mut()
        .ok_or_else(|| fail(PATIO_ENULL, format!("{what} is null")))
}

/// The plan's kind (`PATIO_PLAN_*`), modelled seconds, saving over the original and
/// number of pieces.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_plan_summary(
    plan: *const PatioPlan,
    kind: *mut i32,
    seconds: *mut f64,
    saved: *mut f64,
    npieces: *mut u64,
) -> i32 {
    guarded(|| {
        let p = handle(plan, "plan")?;
        *out(kind, "kind")? = p.kind;
        *out(seconds, "seconds")? = p.seconds;
        *out(saved, "saved")? = p.saved;
        *out(npieces, "npieces")? = p.pieces.pieces.len() as u64;
        Ok(())
    })
}

/// Copies `v` (items of `per` values) into `dst[..cap * per]` and its item count into
/// `n` (`PATIO_ERANGE` when `cap` items do not hold it).
unsafe fn copy_out<T: Copy>(
    v: &[T],
    per: usize,
    dst: *mut T,
    cap: u64,
    n: *mut u64,
) -> Result<(), i32> {
    let n = out(n, "n")?;
    let items = (v.len() / per.max(1)) as u64;
    *n = items;
    if items > cap {
        return Err(fail(PATIO_ERANGE, format!("{items} items, room for {cap}")));
    }
    if !v.is_empty() {
        if dst.is_null() {
            return Err(fail(PATIO_ENULL, "output array is null"));
        }
        std::ptr::copy_nonoverlapping(v.as_ptr(), dst, v.len());
    }
    Ok(())
}

/// The shape of the buffer the request fills: its rank into `n`, the sides into
/// `dims[..cap]`.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_plan_buffer(
    plan: *const PatioPlan,
    dims: *mut u64,
    cap: u64,
    n: *mut u64,
) -> i32 {
    guarded(|| copy_out(&handle(plan, "plan")?.pieces.buffer, 1, dims, cap, n))
}

unsafe fn piece<'a>(plan: *const PatioPlan, i: u64) -> Result<&'a Piece, i32> {
    let p = handle(plan, "plan")?;
    p.pieces.pieces.get(i as usize).ok_or_else(|| {
        fail(
            PATIO_EINVAL,
            format!("piece {i} of a plan of {}", p.pieces.pieces.len()),
        )
    })
}

/// Piece `i`: the copy read (-1 the original, else the replica's index) and the axis
/// order (`cap` >= the buffer's rank).
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_plan_piece(
    plan: *const PatioPlan,
    i: u64,
    copy: *mut i64,
    order: *mut u32,
    cap: u64,
    n: *mut u64,
) -> i32 {
    guarded(|| {
        let pc = piece(plan, i)?;
        *out(copy, "copy")? = pc.copy.map_or(-1, |c| c as i64);
        let order_u32: Vec<u32> = pc.order.iter().map(|&a| a as u32).collect();
        copy_out(&order_u32, 1, order, cap, n)
    })
}

unsafe fn side<'a>(plan: *const PatioPlan, i: u64, which: i32) -> Result<&'a Selection, i32> {
    let pc = piece(plan, i)?;
    match which {
        PATIO_SOURCE => Ok(&pc.source),
        PATIO_DEST => Ok(&pc.dest),
        w => Err(fail(
            PATIO_EINVAL,
            format!("side {w} is neither source nor dest"),
        )),
    }
}

/// The selection on side `which` of piece `i`: its kind (`PATIO_SEL_*`), rank, and
/// count (grids, or points).
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_plan_selection(
    plan: *const PatioPlan,
    i: u64,
    which: i32,
    kind: *mut i32,
    rank: *mut u32,
    count: *mut u64,
) -> i32 {
    guarded(|| {
        let s = side(plan, i, which)?;
        let (k, r, c) = match s {
            Selection::Grids(gs) => (
                PATIO_SEL_GRIDS,
                gs.first().map_or(0, |g| g.rank()),
                gs.len() as u64,
            ),
            Selection::Points { rank, .. } => (PATIO_SEL_POINTS, *rank, s.nelements()),
        };
        *out(kind, "kind")? = k;
        *out(rank, "rank")? = r as u32;
        *out(count, "count")? = c;
        Ok(())
    })
}

/// Axis `axis` of grid `grid` of side `which` of piece `i`: its blocks as (start,
/// length) pairs into `blocks[..2 * cap]`, their count into `n`.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_plan_axis(
    plan: *const PatioPlan,
    i: u64,
    which: i32,
    grid: u64,
    axis: u32,
    blocks: *mut u64,
    cap: u64,
    n: *mut u64,
) -> i32 {
    guarded(|| {
        let Selection::Grids(gs) = side(plan, i, which)? else {
            return Err(fail(PATIO_EINVAL, "a point selection has no grids"));
        };
        let a = gs
            .get(grid as usize)
            .and_then(|g| g.axes.get(axis as usize))
            .ok_or_else(|| fail(PATIO_EINVAL, format!("no grid {grid} axis {axis}")))?;
        let flat: Vec<u64> = a.blocks.iter().flat_map(|&(s, l)| [s, l]).collect();
        copy_out(&flat, 2, blocks, cap, n)
    })
}

/// The points of side `which` of piece `i`: `rank` coordinates each into
/// `coords[..cap * rank]`, their count into `n`.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_plan_coords(
    plan: *const PatioPlan,
    i: u64,
    which: i32,
    coords: *mut u64,
    cap: u64,
    n: *mut u64,
) -> i32 {
    guarded(|| {
        let Selection::Points { rank, coords: c } = side(plan, i, which)? else {
            return Err(fail(PATIO_EINVAL, "a grid selection has no points"));
        };
        copy_out(c, *rank, coords, cap, n)
    })
}

/// The byte extents piece `i`'s source touches in its copy (as `patio_layout_flatten`
/// gives them; filtered chunks whole, `inflated` the bytes they decompress to). The
/// plan must come from this decider, made since its replicas last changed.
///
/// # Safety
/// Pointers as documented in the header.
#[no_mangle]
pub unsafe extern "C" fn patio_plan_extents(
    decider: *const PatioDecider,
    plan: *const PatioPlan,
    i: u64,
    offsets: *mut u64,
    lengths: *mut u64,
    cap: u64,
    n: *mut u64,
    inflated: *mut u64,
) -> i32 {
    guarded(|| {
        let d = handle(decider, "decider")?;
        let p = handle(plan, "plan")?;
        if p.gen != d.gen {
            return Err(fail(
                PATIO_EINVAL,
                "the plan was made by another decider or before its replicas changed",
            ));
        }
        let pc = piece(plan, i)?;
        let layout = match pc.copy {
            None => d.d.original(),
            Some(c) => &d.d.replicas()[c].layout,
        };
        let f = flatten(layout, &pc.source).map_err(layout_err)?;
        *out(inflated, "inflated")? = f.inflated;
        let offs: Vec<u64> = f.extents.iter().map(|e| e.0).collect();
        copy_out(&offs, 1, offsets, cap, n)?;
        let lens: Vec<u64> = f.extents.iter().map(|e| e.1).collect();
        copy_out(&lens, 1, lengths, cap, n)
    })
}
