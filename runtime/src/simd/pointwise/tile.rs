//! The tile evaluator: a program's instructions run over one tile of up to
//! [`TILE`] points along the innermost swept axis, each instruction a loop
//! over registers of `TILE` floats that stay in L1, so that memory traffic
//! is only the loads of operands and the stores of outputs.
//!
//! Values are `f32`; booleans are 0.0 and 1.0. The body is one generic
//! function inlined into two entry points: one compiled for AVX2 and FMA
//! (chosen at run time when the processor has them) and the portable one;
//! the loops are written so the compiler vectorizes them.

use super::chain::{Item, Plan};
#[cfg(target_arch = "x86_64")]
use super::chain_vector;
use super::math::{self, Arith, Fused, Split};
use crate::kernel::{BinaryOp, Inst, Instr, UnaryOp};

/// Points per tile: 256 floats per register, so a program of 30
/// instructions keeps its registers within a 32 KiB L1 cache.
pub const TILE: usize = 256;

/// Where an operand's elements are.
#[derive(Clone, Copy, Debug)]
pub enum Src {
    /// `f32` elements.
    F32(*const f32),
    /// Booleans.
    Bool(*const bool),
}

/// Where an output's elements go.
#[derive(Clone, Copy, Debug)]
pub enum Dst {
    /// `f32` elements.
    F32(*mut f32),
    /// Booleans.
    Bool(*mut bool),
}

// SAFETY: the pointers are into buffers that outlive the parallel run;
// every thread writes disjoint elements (each output point belongs to one
// work item) and only reads operands.
unsafe impl Send for Src {}
unsafe impl Sync for Src {}
unsafe impl Send for Dst {}
unsafe impl Sync for Dst {}

/// Evaluates instructions `which` (in order, none a reduction) over `n`
/// points: a load of operand `k` reads `offs[k] + t * inner[k]` for point
/// `t`. Register `i` is `regs[i*TILE..][..n]`.
///
/// # Safety
/// Every element a load reads must be inside its operand (the binder
/// checks the whole reach of each view), `n <= TILE`, and `regs` holds a
/// register per instruction.
pub unsafe fn eval(
    simd: bool,
    body: &[Instr],
    which: &[usize],
    regs: &mut [f32],
    n: usize,
    srcs: &[Src],
    offs: &[isize],
    inner: &[isize],
) {
    eval_with(simd, body, which, Packed(regs.as_mut_ptr()), n, srcs, offs, inner)
}

/// Where each instruction's register is.
pub trait Place: Copy {
    /// The first point of instruction `i`'s register.
    fn at(self, i: usize) -> *mut f32;
    /// Whether instruction `i` (a load) already finds its points at
    /// [`Place::at`], so that there is nothing to copy.
    fn loaded(self, i: usize) -> bool;
    /// Whether instruction `i`'s register is a large output that a run
    /// may write with streaming (non-temporal) stores where a block of
    /// it is aligned to the vector: its lines are then written without
    /// being read first. The writer fences when its work item ends.
    fn streamed(self, _i: usize) -> bool {
        false
    }
    /// Whether the program is so large that its operands come from memory,
    /// not from a cache: a run then prefetches its loaded operands ahead of
    /// the block it computes.
    fn far(self) -> bool {
        false
    }
}

/// The registers one after the other in one buffer, `TILE` floats each.
#[derive(Clone, Copy)]
pub struct Packed(pub *mut f32);

impl Place for Packed {
    #[inline(always)]
    fn at(self, i: usize) -> *mut f32 {
        // SAFETY (of the callers): the buffer holds a register per instruction.
        unsafe { self.0.add(i * TILE) }
    }
    #[inline(always)]
    fn loaded(self, _: usize) -> bool {
        false
    }
}

/// Registers placed one by one: a load of a contiguous `f32` operand reads
/// the operand itself where it lies, and an instruction that is a
/// contiguous `f32` output writes the output buffer directly, so that
/// neither is copied through a register. `at[i]` is instruction `i`'s
/// register; `loaded[i]` marks the loads that need no copy.
#[derive(Clone, Copy)]
pub struct Placed<'a> {
    /// Each instruction's register.
    pub at: &'a [*mut f32],
    /// The loads whose register is their operand.
    pub loaded: &'a [bool],
    /// The registers that are streamed outputs ([`Place::streamed`]);
    /// shorter than the body when none past its end is.
    pub streamed: &'a [bool],
    /// [`Place::far`].
    pub far: bool,
}

impl Place for Placed<'_> {
    #[inline(always)]
    fn at(self, i: usize) -> *mut f32 {
        self.at[i]
    }
    #[inline(always)]
    fn loaded(self, i: usize) -> bool {
        self.loaded[i]
    }
    #[inline(always)]
    fn streamed(self, i: usize) -> bool {
        self.streamed.get(i).copied().unwrap_or(false)
    }
    #[inline(always)]
    fn far(self) -> bool {
        self.far
    }
}

/// [`eval`] with the registers where `place` says.
///
/// # Safety
/// As [`eval`]; besides, every register `place` names has room for `n`
/// points, the registers of distinct instructions do not overlap, and a
/// register that is not a loaded operand overlaps no operand.
#[allow(clippy::too_many_arguments)]
pub unsafe fn eval_with<P: Place>(
    simd: bool,
    body: &[Instr],
    which: &[usize],
    place: P,
    n: usize,
    srcs: &[Src],
    offs: &[isize],
    inner: &[isize],
) {
    #[cfg(target_arch = "x86_64")]
    if simd {
        if super::cpu::avx512() {
            return eval_avx512(body, which, place, n, srcs, offs, inner);
        }
        return eval_avx2(body, which, place, n, srcs, offs, inner);
    }
    let _ = simd;
    eval_body::<P, Split>(body, which, place, n, srcs, offs, inner)
}

/// The tile evaluator compiled for AVX-512: the same loops vectorized 16
/// lanes wide (the long functions, exp to GELU, are compute-bound).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn eval_avx512<P: Place>(
    body: &[Instr],
    which: &[usize],
    place: P,
    n: usize,
    srcs: &[Src],
    offs: &[isize],
    inner: &[isize],
) {
    eval_body::<P, Fused>(body, which, place, n, srcs, offs, inner)
}

/// [`eval_with`] by `plan` (made of `which`): on AVX2 its runs are
/// evaluated in vector registers ([`chain`](crate::simd::chain)), the rest instruction by
/// instruction; the portable code ignores the plan.
///
/// # Safety
/// As [`eval_with`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn eval_planned<P: Place>(
    simd: bool,
    body: &[Instr],
    which: &[usize],
    plan: &Plan,
    place: P,
    n: usize,
    srcs: &[Src],
    offs: &[isize],
    inner: &[isize],
) {
    #[cfg(target_arch = "x86_64")]
    if simd && plan.has_runs() {
        if super::cpu::avx512() {
            return eval_planned_avx512(body, plan, place, n, srcs, offs, inner);
        }
        return eval_planned_avx2(body, plan, place, n, srcs, offs, inner);
    }
    eval_with(simd, body, which, place, n, srcs, offs, inner)
}

/// [`eval_planned_avx2`] compiled for AVX-512, the runs by their AVX-512
/// instance. The planned and the plain instances are separate
/// functions on purpose: one function per feature set choosing between
/// them made Tanh and SiLU 15% slower (0.145 → 0.165 ms on `[2,48,64,64]`).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx2,fma")]
unsafe fn eval_planned_avx512<P: Place>(
    body: &[Instr],
    plan: &Plan,
    place: P,
    n: usize,
    srcs: &[Src],
    offs: &[isize],
    inner: &[isize],
) {
    eval_items::<P, true>(body, plan, place, n, srcs, offs, inner)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn eval_planned_avx2<P: Place>(
    body: &[Instr],
    plan: &Plan,
    place: P,
    n: usize,
    srcs: &[Src],
    offs: &[isize],
    inner: &[isize],
) {
    eval_items::<P, false>(body, plan, place, n, srcs, offs, inner)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn eval_avx2<P: Place>(
    body: &[Instr],
    which: &[usize],
    place: P,
    n: usize,
    srcs: &[Src],
    offs: &[isize],
    inner: &[isize],
) {
    eval_body::<P, Fused>(body, which, place, n, srcs, offs, inner)
}

/// The registers of one program run: `len` floats, from a buffer that the
/// thread keeps between runs (a model runs hundreds of small programs, and
/// a fresh zeroed buffer for each was a tenth of a small model's time).
/// Every instruction writes its register before any reads it, so the old
/// contents never show; dropping hands the buffer back to the thread.
pub struct Registers(Vec<f32>);

thread_local! {
    static SPARE: std::cell::Cell<Vec<f32>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Registers {
    /// Registers for `len` floats.
    pub fn new(len: usize) -> Registers {
        let mut v = SPARE.with(|s| s.take());
        if v.len() < len {
            v.resize(len, 0.0);
        }
        Registers(v)
    }
}

impl Drop for Registers {
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.0);
        // A thread that is being torn down has no slot left: the buffer is simply freed.
        let _ = SPARE.try_with(|s| s.set(v));
    }
}

impl std::ops::Deref for Registers {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.0
    }
}

impl std::ops::DerefMut for Registers {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.0
    }
}

/// Writes `n` points of register `reg` to `dst` from `off` by `stride`.
///
/// # Safety
/// The points written must be inside the output buffer.
pub unsafe fn store(dst: Dst, off: isize, stride: isize, reg: &[f32]) {
    match dst {
        Dst::F32(p) => {
            if stride == 1 {
                std::ptr::copy_nonoverlapping(reg.as_ptr(), p.offset(off), reg.len());
            } else {
                for (t, &v) in reg.iter().enumerate() {
                    *p.offset(off + t as isize * stride) = v;
                }
            }
        }
        Dst::Bool(p) => {
            for (t, &v) in reg.iter().enumerate() {
                *p.offset(off + t as isize * stride) = v != 0.0;
            }
        }
    }
}

/// Writes the `reg.len()` points of `reg` to the contiguous `f32`s at `dst`
/// with non-temporal (streaming) stores where the destination is 32-byte
/// aligned: the output bypasses the caches, so a large output costs its
/// write alone, not a read for ownership as well. The caller ends its work
/// with [`fence`].
///
/// # Safety
/// `dst` must have room for `reg.len()` floats and the processor AVX.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
pub unsafe fn store_streaming(dst: *mut f32, reg: &[f32]) {
    use std::arch::x86_64::{_mm256_loadu_ps, _mm256_stream_ps};
    let n = reg.len();
    let head = (dst.align_offset(32)).min(n);
    std::ptr::copy_nonoverlapping(reg.as_ptr(), dst, head);
    let mut t = head;
    while t + 8 <= n {
        _mm256_stream_ps(dst.add(t), _mm256_loadu_ps(reg.as_ptr().add(t)));
        t += 8;
    }
    std::ptr::copy_nonoverlapping(reg.as_ptr().add(t), dst.add(t), n - t);
}

/// Orders this thread's streaming stores before whatever it does next (they
/// are weakly ordered): called once at the end of a work item.
pub fn fence() {
    // SAFETY: SSE is part of x86-64.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
}

/// The items of `plan` in order: single instructions by the tile's loops,
/// runs in registers.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn eval_items<P: Place, const WIDE: bool>(
    body: &[Instr],
    plan: &Plan,
    place: P,
    n: usize,
    srcs: &[Src],
    offs: &[isize],
    inner: &[isize],
) {
    for item in &plan.items {
        match item {
            Item::One(i) => eval_one::<P, Fused>(body, *i, place, n, srcs, offs, inner),
            Item::Run(r) if WIDE => chain_vector::avx512::run(&plan.steps[r.clone()], body, place, n),
            Item::Run(r) => chain_vector::avx2::run(&plan.steps[r.clone()], body, place, n),
        }
    }
}

#[inline(always)]
unsafe fn eval_body<P: Place, A: Arith>(
    body: &[Instr],
    which: &[usize],
    place: P,
    n: usize,
    srcs: &[Src],
    offs: &[isize],
    inner: &[isize],
) {
    for &i in which {
        eval_one::<P, A>(body, i, place, n, srcs, offs, inner);
    }
}

/// Evaluates instruction `i` of `body` over `n` points into its register.
///
/// # Safety
/// As [`eval_with`], for the one instruction.
#[inline(always)]
pub(in crate::simd) unsafe fn eval_one<P: Place, A: Arith>(
    body: &[Instr],
    i: usize,
    place: P,
    n: usize,
    srcs: &[Src],
    offs: &[isize],
    inner: &[isize],
) {
    if place.loaded(i) {
        return;
    }
    // SAFETY: register i is distinct from the registers of its
    // arguments (SSA: they are earlier instructions).
    let out = std::slice::from_raw_parts_mut(place.at(i), n);
    let reg = |a: usize| std::slice::from_raw_parts(place.at(a) as *const f32, n);
    match body[i].inst {
        Inst::Load(k) => load(srcs[k], offs[k], inner[k], out),
        Inst::Const(c) => out.fill(c as f32),
        Inst::Unary(op, a) => unary::<A>(op, reg(a), out),
        // A constant operand stays a scalar: one load less per point.
        Inst::Binary(op, a, b) => match (&body[a].inst, &body[b].inst) {
            (_, Inst::Const(c)) => binary_scalar(op, reg(a), *c as f32, false, out),
            (Inst::Const(c), _) => binary_scalar(op, reg(b), *c as f32, true, out),
            _ => binary(op, reg(a), reg(b), out),
        },
        Inst::Select(c, a, b) => {
            let (c, a, b) = (reg(c), reg(a), reg(b));
            for t in 0..n {
                out[t] = if c[t] != 0.0 { a[t] } else { b[t] };
            }
        }
        Inst::Cast(a) => {
            let a = reg(a);
            if body[i].ty == diamond_ir::ElemType::Bool {
                map1(out, a, |x| f32::from(u8::from(x != 0.0)));
            } else {
                out.copy_from_slice(a);
            }
        }
        Inst::Reduce(..) => {}
    }
}

/// Reads `out.len()` points of `src` from `off` by `stride` (booleans as
/// 0.0 and 1.0).
///
/// # Safety
/// Every point read lies inside the operand.
#[inline(always)]
pub(in crate::simd) unsafe fn load(src: Src, off: isize, stride: isize, out: &mut [f32]) {
    match src {
        Src::F32(p) => {
            let p = p.offset(off);
            if stride == 1 {
                std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len());
            } else if stride == 0 {
                out.fill(*p);
            } else {
                for (t, o) in out.iter_mut().enumerate() {
                    *o = *p.offset(t as isize * stride);
                }
            }
        }
        Src::Bool(p) => {
            let p = p.offset(off);
            for (t, o) in out.iter_mut().enumerate() {
                *o = f32::from(u8::from(*p.offset(t as isize * stride)));
            }
        }
    }
}

#[inline(always)]
fn map1(out: &mut [f32], a: &[f32], f: impl Fn(f32) -> f32) {
    for (o, &x) in out.iter_mut().zip(a) {
        *o = f(x);
    }
}

/// [`map1`] for the long functions (exp, tanh, erf and what uses them):
/// blocks of [`BLOCK`] points, each compiled to several independent vector
/// chains side by side. One function is a long chain of dependent
/// multiply-adds; evaluated one vector at a time, the scheduler fills with
/// operations waiting on their predecessor, and interleaved chains keep
/// the arithmetic units busy.
#[inline(always)]
fn map1_long(out: &mut [f32], a: &[f32], f: impl Fn(f32) -> f32) {
    let whole = out.len() / BLOCK * BLOCK;
    for (o, x) in out[..whole].chunks_exact_mut(BLOCK).zip(a[..whole].chunks_exact(BLOCK)) {
        let x: &[f32; BLOCK] = x.try_into().expect("a whole block");
        let o: &mut [f32; BLOCK] = o.try_into().expect("a whole block");
        for t in 0..BLOCK {
            o[t] = f(x[t]);
        }
    }
    map1(&mut out[whole..], &a[whole..], f)
}

/// Points per block of [`map1_long`].
const BLOCK: usize = 32;

#[inline(always)]
fn map2(out: &mut [f32], a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) {
    for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
        *o = f(x, y);
    }
}

#[inline(always)]
fn via_f64(out: &mut [f32], a: &[f32], f: impl Fn(f64) -> f64) {
    map1(out, a, |x| f(f64::from(x)) as f32)
}

#[inline(always)]
fn flag(b: bool) -> f32 {
    f32::from(u8::from(b))
}

/// `f` (one of [`math`]'s functions) as a closure forced inline. Passed by
/// name, or in a closure left to the inliner, such a function was called
/// out of line once per element, without AVX2 (a sixth of an export's time
/// under perf); forced inline, it vectorizes with the loop.
macro_rules! inlined {
    ($f:path) => {
        #[inline(always)]
        |x: f32| $f(x)
    };
}

#[inline(always)]
pub(in crate::simd) fn unary<A: Arith>(op: UnaryOp, a: &[f32], out: &mut [f32]) {
    match op {
        UnaryOp::Identity => out.copy_from_slice(a),
        UnaryOp::Neg => map1(out, a, |x| -x),
        UnaryOp::Abs => map1(out, a, |x| x.abs()),
        UnaryOp::Sign => map1(out, a, |x| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x * 0.0 + 0.0 * x
            }
        }),
        UnaryOp::Ceil => map1(out, a, |x| x.ceil()),
        UnaryOp::Floor => map1(out, a, |x| x.floor()),
        UnaryOp::Round => map1(out, a, |x| x.round_ties_even()),
        UnaryOp::Sqrt => map1(out, a, |x| x.sqrt()),
        UnaryOp::Reciprocal => map1(out, a, |x| 1.0 / x),
        UnaryOp::Square => map1(out, a, |x| x * x),
        UnaryOp::Exp => map1_long(out, a, inlined!(math::exp_in::<A>)),
        UnaryOp::Log => via_f64(out, a, f64::ln),
        UnaryOp::Sin => via_f64(out, a, f64::sin),
        UnaryOp::Cos => via_f64(out, a, f64::cos),
        UnaryOp::Tan => via_f64(out, a, f64::tan),
        UnaryOp::Tanh => map1_long(out, a, inlined!(math::tanh_in::<A>)),
        UnaryOp::Erf => map1_long(out, a, inlined!(math::erf_in::<A>)),
        UnaryOp::Relu => map1(out, a, |x| if x < 0.0 { 0.0 } else { x }),
        UnaryOp::Sigmoid => map1_long(out, a, inlined!(math::sigmoid_in::<A>)),
        UnaryOp::Softsign => map1(out, a, |x| x / (1.0 + x.abs())),
        UnaryOp::Softplus => via_f64(out, a, |x| if x > 30.0 { x } else { x.exp().ln_1p() }),
        UnaryOp::Gelu => map1_long(out, a, inlined!(math::gelu_in::<A>)),
        UnaryOp::GeluTanh => map1_long(out, a, inlined!(math::gelu_tanh_in::<A>)),
        UnaryOp::HardSwish => map1(out, a, |x| x * (x / 6.0 + 0.5).clamp(0.0, 1.0)),
        UnaryOp::Not => map1(out, a, |x| flag(x == 0.0)),
        UnaryOp::IsNaN => map1(out, a, |x| flag(x.is_nan())),
        UnaryOp::LeakyRelu(s) => {
            let s = s as f32;
            map1(out, a, |x| if x < 0.0 { s * x } else { x })
        }
        UnaryOp::Elu(al) => via_f64(out, a, |x| if x < 0.0 { al * x.exp_m1() } else { x }),
        UnaryOp::Selu { alpha, gamma } => {
            via_f64(out, a, |x| if x <= 0.0 { gamma * (alpha * x.exp() - alpha) } else { gamma * x })
        }
        UnaryOp::HardSigmoid { alpha, beta } => {
            let (al, be) = (alpha as f32, beta as f32);
            map1(out, a, |x| (al * x + be).clamp(0.0, 1.0))
        }
        UnaryOp::ThresholdedRelu(th) => {
            let th = th as f32;
            map1(out, a, |x| if x > th { x } else { 0.0 })
        }
        UnaryOp::Clip { min, max } => {
            let (lo, hi) = (min as f32, max as f32);
            map1(out, a, |x| {
                let x = if x < lo { lo } else { x };
                if x > hi {
                    hi
                } else {
                    x
                }
            })
        }
        // Small integer powers (GPT-2's tanh GELU cubes) and square roots as
        // multiplications, which vectorize, instead of a `pow` call per element.
        UnaryOp::PowConst(p) if p == 1.0 => map1(out, a, |x| x),
        UnaryOp::PowConst(p) if p == 2.0 => map1(out, a, |x| x * x),
        UnaryOp::PowConst(p) if p == 3.0 => map1(out, a, |x| x * x * x),
        UnaryOp::PowConst(p) if p == 4.0 => map1(out, a, |x| (x * x) * (x * x)),
        UnaryOp::PowConst(p) if p == -1.0 => map1(out, a, |x| 1.0 / x),
        UnaryOp::PowConst(p) if p == 0.5 => {
            map1(out, a, |x| if x == f32::NEG_INFINITY { f32::INFINITY } else { x.sqrt() })
        }
        UnaryOp::PowConst(p) => via_f64(out, a, |x| x.powf(p)),
    }
}

/// `op(a, c)`, or `op(c, a)` when `swap`.
#[inline(always)]
pub(in crate::simd) fn binary_scalar(op: BinaryOp, a: &[f32], c: f32, swap: bool, out: &mut [f32]) {
    macro_rules! both {
        ($f:expr) => {
            if swap {
                map1(out, a, |x| $f(c, x))
            } else {
                map1(out, a, |x| $f(x, c))
            }
        };
    }
    match op {
        BinaryOp::Add => both!(|x: f32, y: f32| x + y),
        BinaryOp::Sub => both!(|x: f32, y: f32| x - y),
        BinaryOp::Mul => both!(|x: f32, y: f32| x * y),
        BinaryOp::Div => both!(|x: f32, y: f32| x / y),
        BinaryOp::Max => both!(|x: f32, y: f32| {
            let m = if x > y { x } else { y };
            if x.is_nan() || y.is_nan() {
                f32::NAN
            } else {
                m
            }
        }),
        BinaryOp::Min => both!(|x: f32, y: f32| {
            let m = if x < y { x } else { y };
            if x.is_nan() || y.is_nan() {
                f32::NAN
            } else {
                m
            }
        }),
        _ => {
            let cs = [c; TILE];
            let cs = &cs[..a.len()];
            if swap {
                binary(op, cs, a, out)
            } else {
                binary(op, a, cs, out)
            }
        }
    }
}

#[inline(always)]
pub(in crate::simd) fn binary(op: BinaryOp, a: &[f32], b: &[f32], out: &mut [f32]) {
    match op {
        BinaryOp::Add => map2(out, a, b, |x, y| x + y),
        BinaryOp::Sub => map2(out, a, b, |x, y| x - y),
        BinaryOp::Mul => map2(out, a, b, |x, y| x * y),
        BinaryOp::Div => map2(out, a, b, |x, y| x / y),
        BinaryOp::Max => map2(out, a, b, |x, y| {
            let m = if x > y { x } else { y };
            if x.is_nan() || y.is_nan() {
                f32::NAN
            } else {
                m
            }
        }),
        BinaryOp::Min => map2(out, a, b, |x, y| {
            let m = if x < y { x } else { y };
            if x.is_nan() || y.is_nan() {
                f32::NAN
            } else {
                m
            }
        }),
        BinaryOp::Pow => {
            for ((o, &x), &y) in out.iter_mut().zip(a).zip(b) {
                *o = f64::from(x).powf(f64::from(y)) as f32;
            }
        }
        BinaryOp::PRelu => map2(out, a, b, |x, s| if x < 0.0 { s * x } else { x }),
        BinaryOp::Equal => map2(out, a, b, |x, y| flag(x == y)),
        BinaryOp::Less => map2(out, a, b, |x, y| flag(x < y)),
        BinaryOp::LessOrEqual => map2(out, a, b, |x, y| flag(x <= y)),
        BinaryOp::Greater => map2(out, a, b, |x, y| flag(x > y)),
        BinaryOp::GreaterOrEqual => map2(out, a, b, |x, y| flag(x >= y)),
        BinaryOp::And => map2(out, a, b, |x, y| flag(x != 0.0 && y != 0.0)),
        BinaryOp::Or => map2(out, a, b, |x, y| flag(x != 0.0 || y != 0.0)),
        BinaryOp::Xor => map2(out, a, b, |x, y| flag((x != 0.0) != (y != 0.0))),
    }
}
