//! The vector instances of a register-resident run ([`super::chain`]): one
//! body, written once as a macro over a handful of per-instruction-set
//! primitives, instantiated for AVX2 (a block of four 8-lane registers, 32
//! points) and AVX-512 (eight 16-lane registers, 128 points: the step's
//! dispatch is paid once per 128 points instead of 32).
//!
//! A step dispatches on its [`super::chain::Form`], resolved when the plan
//! was made: the common steps against a constant are one match arm each,
//! `max`/`min` among them as the one hardware instruction where that is
//! bit-exact (the general form needs a compare and a blend to put a NaN
//! first operand back).

/// The run over `n` points, shared by the instances. Expects in scope: the
/// vector type `V`, the block's register count `K`, the lanes `LANES`, and
/// the primitives `loadu`, `storeu`, `stream` (a non-temporal store to an
/// address aligned to the vector), `splat`, `zero`, `add`,
/// `sub`, `mul`, `div`, `vmax`, `vmin` (the hardware's: the second operand
/// when either is NaN or both are equal), `nan_first` (where the first
/// operand is NaN, it), `neg`, `abs`, `leaky`.
macro_rules! run_body {
    ($features:literal) => {
        use super::super::chain::{Arg, Form, Shifted, Step, StepOp};
        use crate::kernel::{BinaryOp, Instr, UnaryOp};
        use crate::simd::math::Fused;
        use crate::simd::tile::{self, Place};

        /// How far ahead of a block a far program's operands are
        /// prefetched: 4 KiB (the chain8 benchmark, one thread, with the
        /// streaming stores: 75-83% of copy bandwidth without the
        /// prefetch, 78-94% with it; 90-96% in the final runs).
        const AHEAD: usize = 1024;

        /// Points of a block.
        pub const WIDTH: usize = K * LANES;

        /// A block's points in registers.
        type Block = [V; K];

        /// Evaluates run `steps` of `body` over `n` points of `place`'s
        /// registers.
        ///
        /// # Safety
        /// As [`tile::eval_with`] for the run's instructions; the processor
        /// has the instance's instruction set.
        #[target_feature(enable = $features)]
        pub unsafe fn run<P: Place>(steps: &[Step], body: &[Instr], place: P, n: usize) {
            // The operands read in place that the steps load (at most
            // four), when the program is far: each block prefetches theirs
            // `AHEAD` points on.
            let mut ahead = [0usize; 4];
            let mut aheads = 0;
            if place.far() {
                for a in steps.iter().flat_map(|s| [s.a, s.b]) {
                    if let Arg::Reg(j) = a {
                        if place.loaded(j) && aheads < ahead.len() && !ahead[..aheads].contains(&j) {
                            ahead[aheads] = j;
                            aheads += 1;
                        }
                    }
                }
            }
            let mut t = 0;
            while t + WIDTH <= n {
                for &j in &ahead[..aheads] {
                    let p = place.at(j).wrapping_add(t + AHEAD) as *const i8;
                    for line in 0..WIDTH / 16 {
                        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(64 * line));
                    }
                }
                let mut acc: Block = [zero(); K];
                for s in steps {
                    acc = step(s, acc, place, t);
                    if s.keep {
                        let p = place.at(s.inst).add(t);
                        if place.streamed(s.inst) && (p as usize) % (4 * LANES) == 0 {
                            for (v, &x) in acc.iter().enumerate() {
                                stream(p.add(LANES * v), x);
                            }
                        } else {
                            for (v, &x) in acc.iter().enumerate() {
                                storeu(p.add(LANES * v), x);
                            }
                        }
                    }
                }
                t += WIDTH;
            }
            if t < n {
                let rest = Shifted { place, by: t };
                for s in steps {
                    tile::eval_one::<_, Fused>(body, s.inst, rest, n - t, &[], &[], &[]);
                }
            }
        }

        #[inline(always)]
        unsafe fn fetch<P: Place>(arg: Arg, acc: Block, place: P, t: usize) -> Block {
            match arg {
                Arg::Acc => acc,
                Arg::Reg(j) => {
                    let p = place.at(j).add(t) as *const f32;
                    let mut b = acc;
                    for (v, x) in b.iter_mut().enumerate() {
                        *x = loadu(p.add(LANES * v));
                    }
                    b
                }
                Arg::Scalar(c) => [splat(c); K],
            }
        }

        #[inline(always)]
        fn map(a: Block, f: impl Fn(V) -> V) -> Block {
            let mut o = a;
            for x in &mut o {
                *x = f(*x);
            }
            o
        }

        #[inline(always)]
        fn zip(a: Block, b: Block, f: impl Fn(V, V) -> V) -> Block {
            let mut o = a;
            for (x, &y) in o.iter_mut().zip(&b) {
                *x = f(*x, y);
            }
            o
        }

        #[inline(always)]
        unsafe fn step<P: Place>(s: &Step, acc: Block, place: P, t: usize) -> Block {
            let x = || fetch(s.a, acc, place, t);
            match s.form {
                Form::AddC(c) => map(x(), |x| add(x, splat(c))),
                Form::SubC(c) => map(x(), |x| sub(x, splat(c))),
                Form::SubFromC(c) => map(x(), |x| sub(splat(c), x)),
                Form::MulC(c) => map(x(), |x| mul(x, splat(c))),
                Form::MaxC(c) => map(x(), |x| vmax(splat(c), x)),
                Form::MinC(c) => map(x(), |x| vmin(splat(c), x)),
                // `x < 0 ? 0 : x`: `vmax(0, x)` gives x when x is NaN.
                Form::Relu => map(x(), |x| vmax(zero(), x)),
                Form::General => general(s, acc, place, t),
            }
        }

        #[inline(always)]
        unsafe fn general<P: Place>(s: &Step, acc: Block, place: P, t: usize) -> Block {
            let a = fetch(s.a, acc, place, t);
            match s.op {
                StepOp::Binary(op) => {
                    let b = fetch(s.b, acc, place, t);
                    match op {
                        BinaryOp::Add => zip(a, b, |x, y| add(x, y)),
                        BinaryOp::Sub => zip(a, b, |x, y| sub(x, y)),
                        BinaryOp::Mul => zip(a, b, |x, y| mul(x, y)),
                        BinaryOp::Div => zip(a, b, |x, y| div(x, y)),
                        BinaryOp::Max => zip(a, b, |x, y| nan_first(x, vmax(x, y))),
                        BinaryOp::Min => zip(a, b, |x, y| nan_first(x, vmin(x, y))),
                        _ => unreachable!("a run's operators have a vector form"),
                    }
                }
                StepOp::Unary(op) => match op {
                    UnaryOp::Identity => a,
                    UnaryOp::Neg => map(a, |x| neg(x)),
                    UnaryOp::Abs => map(a, |x| abs(x)),
                    UnaryOp::Square => map(a, |x| mul(x, x)),
                    UnaryOp::LeakyRelu(k) => {
                        let k = k as f32;
                        map(a, |x| leaky(k, x))
                    }
                    // `x < lo ? lo : x`, then `x > hi ? hi : x`: NaN passes.
                    UnaryOp::Clip { min: lo, max: hi } => {
                        let (lo, hi) = (splat(lo as f32), splat(hi as f32));
                        map(a, |x| vmin(hi, vmax(lo, x)))
                    }
                    _ => unreachable!("a run's operators have a vector form"),
                },
            }
        }
    };
}

/// The AVX2 instance: four 8-lane registers a block.
#[cfg(target_arch = "x86_64")]
pub(in crate::simd) mod avx2 {
    use std::arch::x86_64::*;

    type V = __m256;
    const K: usize = 4;
    const LANES: usize = 8;

    #[inline(always)]
    unsafe fn loadu(p: *const f32) -> V {
        _mm256_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn storeu(p: *mut f32, x: V) {
        _mm256_storeu_ps(p, x)
    }
    #[inline(always)]
    unsafe fn stream(p: *mut f32, x: V) {
        _mm256_stream_ps(p, x)
    }
    #[inline(always)]
    fn splat(c: f32) -> V {
        // SAFETY: the instance runs only where AVX2 is.
        unsafe { _mm256_set1_ps(c) }
    }
    #[inline(always)]
    fn zero() -> V {
        // SAFETY: as `splat`.
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    fn add(x: V, y: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm256_add_ps(x, y) }
    }
    #[inline(always)]
    fn sub(x: V, y: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm256_sub_ps(x, y) }
    }
    #[inline(always)]
    fn mul(x: V, y: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm256_mul_ps(x, y) }
    }
    #[inline(always)]
    fn div(x: V, y: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm256_div_ps(x, y) }
    }
    #[inline(always)]
    fn vmax(x: V, y: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm256_max_ps(x, y) }
    }
    #[inline(always)]
    fn vmin(x: V, y: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm256_min_ps(x, y) }
    }
    #[inline(always)]
    fn nan_first(x: V, r: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm256_blendv_ps(r, x, _mm256_cmp_ps::<_CMP_UNORD_Q>(x, x)) }
    }
    #[inline(always)]
    fn neg(x: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm256_xor_ps(x, _mm256_set1_ps(-0.0)) }
    }
    #[inline(always)]
    fn abs(x: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm256_andnot_ps(_mm256_set1_ps(-0.0), x) }
    }
    #[inline(always)]
    fn leaky(k: f32, x: V) -> V {
        // SAFETY: as `splat`.
        unsafe {
            let neg = _mm256_cmp_ps::<_CMP_LT_OQ>(x, _mm256_setzero_ps());
            _mm256_blendv_ps(x, _mm256_mul_ps(_mm256_set1_ps(k), x), neg)
        }
    }

    run_body!("avx2,fma");
}

/// The AVX-512 instance: eight 16-lane registers a block (AVX-512 F only).
#[cfg(target_arch = "x86_64")]
pub(in crate::simd) mod avx512 {
    use std::arch::x86_64::*;

    type V = __m512;
    const K: usize = 8;
    const LANES: usize = 16;

    #[inline(always)]
    unsafe fn loadu(p: *const f32) -> V {
        _mm512_loadu_ps(p)
    }
    #[inline(always)]
    unsafe fn storeu(p: *mut f32, x: V) {
        _mm512_storeu_ps(p, x)
    }
    #[inline(always)]
    unsafe fn stream(p: *mut f32, x: V) {
        _mm512_stream_ps(p, x)
    }
    #[inline(always)]
    fn splat(c: f32) -> V {
        // SAFETY: the instance runs only where AVX-512 F is.
        unsafe { _mm512_set1_ps(c) }
    }
    #[inline(always)]
    fn zero() -> V {
        // SAFETY: as `splat`.
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    fn add(x: V, y: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm512_add_ps(x, y) }
    }
    #[inline(always)]
    fn sub(x: V, y: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm512_sub_ps(x, y) }
    }
    #[inline(always)]
    fn mul(x: V, y: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm512_mul_ps(x, y) }
    }
    #[inline(always)]
    fn div(x: V, y: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm512_div_ps(x, y) }
    }
    #[inline(always)]
    fn vmax(x: V, y: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm512_max_ps(x, y) }
    }
    #[inline(always)]
    fn vmin(x: V, y: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm512_min_ps(x, y) }
    }
    #[inline(always)]
    fn nan_first(x: V, r: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), x) }
    }
    #[inline(always)]
    fn neg(x: V) -> V {
        // SAFETY: as `splat` (the integer xor: `vxorps` on zmm is AVX-512 DQ).
        unsafe { _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(i32::MIN))) }
    }
    #[inline(always)]
    fn abs(x: V) -> V {
        // SAFETY: as `splat`.
        unsafe { _mm512_abs_ps(x) }
    }
    #[inline(always)]
    fn leaky(k: f32, x: V) -> V {
        // SAFETY: as `splat`.
        unsafe {
            let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_setzero_ps());
            _mm512_mask_mul_ps(x, neg, _mm512_set1_ps(k), x)
        }
    }

    run_body!("avx512f,avx2,fma");
}
