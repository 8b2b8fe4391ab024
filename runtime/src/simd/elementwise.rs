//! Running a program without reduction axes: the bound space is walked as
//! rows along its innermost axis, each row in tiles; rows (or pieces of
//! long rows) are spread over the current rayon pool. Instructions that
//! vary with no axis are evaluated once and held as splats.

use super::bind::{offset_of, Bound};
use super::tile::{self, Dst, Registers, Src, TILE};
use crate::kernel::{Level, Program};
use rayon::prelude::*;

/// Points per parallel work item.
pub const CHUNK: usize = 1 << 14;

/// Outputs of at least this many bytes in all are written with streaming
/// stores: they cannot stay in the caches anyway (this machine's L3 is 32
/// MiB, shared), and the stores then cost no read of the destination.
pub const STREAM_BYTES: usize = 16 << 20;

/// The order of evaluation of an elementwise program, worked out once when
/// the program is bound: the instructions that vary with no axis (evaluated
/// once and splatted), then the rest (evaluated per tile).
pub struct Order {
    uniform: Vec<usize>,
    varying: Vec<usize>,
}

impl Order {
    /// The order of `p`'s instructions.
    pub fn of(p: &Program) -> Order {
        let levels = p.levels();
        let uniform = (0..p.body.len()).filter(|&i| levels[i] == Level::Uniform).collect();
        let varying = (0..p.body.len()).filter(|&i| levels[i] != Level::Uniform).collect();
        Order { uniform, varying }
    }
}

/// Runs elementwise program `p` bound as `b` in order `order` (of `p`),
/// reading `srcs` and writing `dsts`.
///
/// # Safety
/// `srcs` and `dsts` point at buffers of the lengths `b` was checked
/// against.
pub unsafe fn run(p: &Program, order: &Order, b: &Bound, srcs: &[Src], dsts: &[Dst], simd: bool) {
    if b.empty {
        return;
    }
    let (uniform, varying) = (&order.uniform, &order.varying);
    let r = b.extents.len();
    let inner = if r == 0 { 1 } else { b.extents[r - 1] };
    let outer = &b.extents[..r.saturating_sub(1)];
    let rows: usize = outer.iter().product();
    let inner_of = |s: &[isize]| if r == 0 { 0 } else { s[r - 1] };
    let op_inner: Vec<isize> = b.operands.iter().map(|v| inner_of(&v.strides)).collect();
    let out_inner: Vec<isize> = b.outputs.iter().map(|v| inner_of(&v.strides)).collect();
    let base_offs: Vec<isize> = b.operands.iter().map(|v| v.offset).collect();
    let out_bytes: usize = b.output_shapes.iter().map(|s| s.iter().product::<usize>() * 4).sum();
    // Which outputs are streamed: dense f32 rows of a large result, on AVX.
    let stream: Vec<bool> = dsts
        .iter()
        .zip(&out_inner)
        .map(|(d, &st)| {
            cfg!(target_arch = "x86_64") && simd && out_bytes >= STREAM_BYTES && st == 1 && matches!(d, Dst::F32(_))
        })
        .collect();
    let streaming = stream.contains(&true);
    let init = || {
        let mut regs = Registers::new(p.body.len() * TILE);
        tile::eval(simd, &p.body, uniform, &mut regs, 1, srcs, &base_offs, &op_inner);
        for &i in uniform {
            let v = regs[i * TILE];
            regs[i * TILE..(i + 1) * TILE].fill(v);
        }
        regs
    };
    // A work item: rows row0..row1, points c0..c1 of each.
    let (rows_per_item, pieces) = if inner >= CHUNK { (1, inner.div_ceil(CHUNK)) } else { ((CHUNK / inner).max(1), 1) };
    let items = if pieces > 1 { rows * pieces } else { rows.div_ceil(rows_per_item) };
    let work = |regs: &mut Registers, item: usize| {
        let (row0, row1, c0, c1) = if pieces > 1 {
            let piece = item % pieces;
            let row = item / pieces;
            (row, row + 1, piece * CHUNK, ((piece + 1) * CHUNK).min(inner))
        } else {
            (item * rows_per_item, ((item + 1) * rows_per_item).min(rows), 0, inner)
        };
        let mut offs = vec![0isize; srcs.len()];
        let (mut row_offs, mut out_offs) = (vec![0isize; b.operands.len()], vec![0isize; b.outputs.len()]);
        for row in row0..row1 {
            for (o, v) in row_offs.iter_mut().zip(&b.operands) {
                *o = v.offset + offset_of(row, outer, &v.strides[..outer.len()]);
            }
            for (o, v) in out_offs.iter_mut().zip(&b.outputs) {
                *o = v.offset + offset_of(row, outer, &v.strides[..outer.len()]);
            }
            let mut c = c0;
            while c < c1 {
                let n = TILE.min(c1 - c);
                for k in 0..offs.len() {
                    offs[k] = row_offs[k] + c as isize * op_inner[k];
                }
                tile::eval(simd, &p.body, varying, regs, n, srcs, &offs, &op_inner);
                for (j, out) in p.outputs.iter().enumerate() {
                    let reg = &regs[out.source * TILE..][..n];
                    let at = out_offs[j] + c as isize * out_inner[j];
                    match dsts[j] {
                        #[cfg(target_arch = "x86_64")]
                        Dst::F32(d) if stream[j] => tile::store_streaming(d.offset(at), reg),
                        dst => tile::store(dst, at, out_inner[j], reg),
                    }
                }
                c += n;
            }
        }
        if streaming {
            tile::fence();
        }
    };
    if rows * inner <= CHUNK || rayon::current_num_threads() == 1 {
        let mut regs = init();
        for item in 0..items {
            work(&mut regs, item);
        }
    } else {
        (0..items).into_par_iter().for_each_init(init, work);
    }
}
