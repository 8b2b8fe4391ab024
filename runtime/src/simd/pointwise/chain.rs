//! Register-resident runs: a chain of elementwise instructions, each taking
//! the one before it as an operand, evaluated in vector registers a block
//! of points at a time (32 on AVX2, 128 on AVX-512: [`super::chain_vector`])
//! instead of one pass over a tile register per instruction.
//!
//! The tile evaluator ([`super::tile`]) stores every instruction's value to
//! its register in L1 and loads it back for the next one: on a chain of
//! cheap operators (`x·a + b`, `max`, `min`, `relu`, …) the stores bound
//! the speed. A [`Plan`] cuts the tile's instruction list into runs and
//! single instructions; a run keeps the running value (the *accumulator*)
//! in vector registers through all its steps and stores a step's value
//! only when something else reads it — a later instruction other than the
//! next step, or an output. Only operators with a short vector form here
//! (add, sub, mul, div, max, min, relu, clip, …) are steps; the others
//! (exp, sigmoid, comparisons, …) end a run. Runs are the vector instances'; the portable
//! one evaluates the tile instruction by instruction as before. The last
//! points of a tile that do not fill a block are evaluated step by step on
//! the tile's registers.

use super::tile::Place;
use crate::kernel::{BinaryOp, Inst, Instr, UnaryOp};
use std::ops::Range;

/// Where a step's operand is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// The value of the step before it, in registers.
    Acc,
    /// An instruction's register (an operand read where it lies, an
    /// instruction before the run, a kept step of this run).
    Reg(usize),
    /// A constant.
    Scalar(f32),
}

/// What a step computes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum StepOp {
    /// `op(a)`.
    Unary(UnaryOp),
    /// `op(a, b)`.
    Binary(BinaryOp),
}

/// A step's shape, resolved when the plan is made so that the vector
/// instances dispatch on one match per step and block: the common forms
/// against a constant `c` (the step's `a` then is its other operand, `x`),
/// the rest by operator and operands.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Form {
    /// `x + c` (added in either order).
    AddC(f32),
    /// `x - c`.
    SubC(f32),
    /// `c - x`.
    SubFromC(f32),
    /// `x * c` (either order).
    MulC(f32),
    /// The tile's `max` of `x` and `c` (either order), which is the
    /// hardware's `max(c, x)`: `c` is not NaN, and not zero when second.
    MaxC(f32),
    /// The tile's `min`, as [`Form::MaxC`].
    MinC(f32),
    /// `relu(x)`.
    Relu,
    /// Any other: by [`Step::op`], [`Step::a`] and [`Step::b`].
    General,
}

impl Form {
    /// The form of `op(a, b)`, and the operand `x` it takes.
    fn of(op: StepOp, a: Arg, b: Arg) -> (Form, Arg) {
        // A constant that the hardware's max/min may take as its first
        // operand: the tile's `max(x, y)` is NaN when either is, else
        // `x > y ? x : y`; the hardware's gives y when either is NaN or
        // they are equal. Equal values differ only as signed zeros.
        let plain = |c: f32, first: bool| !c.is_nan() && (first || c != 0.0);
        match (op, a, b) {
            (StepOp::Unary(UnaryOp::Relu), x, _) => (Form::Relu, x),
            (StepOp::Binary(op), Arg::Scalar(c), x) | (StepOp::Binary(op), x, Arg::Scalar(c))
                if !matches!(x, Arg::Scalar(_)) =>
            {
                let first = a == Arg::Scalar(c);
                let form = match op {
                    BinaryOp::Add => Form::AddC(c),
                    BinaryOp::Mul => Form::MulC(c),
                    BinaryOp::Sub if first => Form::SubFromC(c),
                    BinaryOp::Sub => Form::SubC(c),
                    BinaryOp::Max if plain(c, first) => Form::MaxC(c),
                    BinaryOp::Min if plain(c, first) => Form::MinC(c),
                    _ => return (Form::General, a),
                };
                (form, x)
            }
            _ => (Form::General, a),
        }
    }
}

/// One instruction of a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// The instruction.
    pub inst: usize,
    /// Its operator.
    pub op: StepOp,
    /// How the vector instances evaluate it.
    pub form: Form,
    /// Its first operand (its non-constant one when the form has a
    /// constant).
    pub a: Arg,
    /// Its second operand (unused by a unary step).
    pub b: Arg,
    /// Whether its value is stored to its register: something besides the
    /// next step reads it.
    pub keep: bool,
}

/// One item of a [`Plan`].
#[derive(Clone, Debug, PartialEq)]
pub enum Item {
    /// An instruction evaluated by the tile evaluator.
    One(usize),
    /// A run: these steps of [`Plan::steps`].
    Run(Range<usize>),
}

/// How a tile's instructions are evaluated: runs and single instructions,
/// in the order of the instruction list.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// The items in order.
    pub items: Vec<Item>,
    /// The steps of all runs.
    pub steps: Vec<Step>,
}

impl Plan {
    /// The plan of instructions `which` of `body`: `loaded[i]` marks the
    /// loads that need no evaluation (their register is their operand) and
    /// `outputs` the instructions whose values are outputs.
    pub fn new(body: &[Instr], which: &[usize], loaded: &[bool], outputs: impl IntoIterator<Item = usize>) -> Plan {
        let mut keep = vec![false; body.len()];
        for i in outputs {
            keep[i] = true;
        }
        let mut plan = Plan::default();
        // The current run: where its steps start, and its last instruction.
        let mut open: Option<(usize, usize)> = None;
        for &i in which {
            if loaded[i] {
                continue;
            }
            let (op, a, b) = match &body[i].inst {
                &Inst::Unary(op, a) if vector_unary(op) => (StepOp::Unary(op), a, None),
                &Inst::Binary(op, a, b) if vector_binary(op) => (StepOp::Binary(op), a, Some(b)),
                inst => {
                    plan.close(open.take(), &keep);
                    plan.items.push(Item::One(i));
                    for x in inst.args() {
                        keep[x] = true;
                    }
                    continue;
                }
            };
            let prev = match open {
                Some((_, last)) if a == last || b == Some(last) => Some(last),
                _ => None,
            };
            if prev.is_none() {
                plan.close(open.take(), &keep);
            }
            let mut arg = |x: usize| {
                if Some(x) == prev {
                    Arg::Acc
                } else if let Inst::Const(c) = body[x].inst {
                    Arg::Scalar(c as f32)
                } else {
                    keep[x] = true;
                    Arg::Reg(x)
                }
            };
            let (a, b) = (arg(a), b.map_or(Arg::Acc, &mut arg));
            let start = open.map_or(plan.steps.len(), |(s, _)| s);
            let (form, a) = Form::of(op, a, b);
            plan.steps.push(Step { inst: i, op, form, a, b, keep: false });
            open = Some((start, i));
        }
        plan.close(open, &keep);
        for s in &mut plan.steps {
            s.keep = keep[s.inst];
        }
        if plan.items.len() > 1 {
            plan.unrun_single_steps();
        }
        plan
    }

    /// Hands the runs of one step back to the tile evaluator: a run of
    /// one step pays only where it is the whole plan (its output then
    /// written over its operand with no copy); beside other items it made
    /// EfficientNet's SiLUs 2–3% slower.
    fn unrun_single_steps(&mut self) {
        let (items, old) = (std::mem::take(&mut self.items), std::mem::take(&mut self.steps));
        for item in items {
            match item {
                Item::Run(r) if r.len() == 1 => self.items.push(Item::One(old[r.start].inst)),
                Item::Run(r) => {
                    let start = self.steps.len();
                    self.steps.extend_from_slice(&old[r]);
                    self.items.push(Item::Run(start..self.steps.len()));
                }
                one => self.items.push(one),
            }
        }
    }

    /// Ends the run that starts at step `start`: a run of one step is
    /// evaluated by the tile evaluator (it would store its value all the
    /// same), unless its value is an output (`keep`, which holds the
    /// outputs from the start) and the run turns out to be the whole plan
    /// ([`Self::unrun_single_steps`]): a run stores it where the output
    /// lies, after reading its operand, which lets the output be written
    /// over that operand with no copy through a tile register.
    fn close(&mut self, open: Option<(usize, usize)>, keep: &[bool]) {
        let Some((start, _)) = open else { return };
        if self.steps.len() - start == 1 && !keep[self.steps[start].inst] {
            let s = self.steps.pop().expect("the run's step");
            self.items.push(Item::One(s.inst));
        } else {
            self.items.push(Item::Run(start..self.steps.len()));
        }
    }

    /// Whether the plan has a run.
    pub fn has_runs(&self) -> bool {
        !self.steps.is_empty()
    }
}

/// Whether a run evaluates `op` in registers. The others (exp, sigmoid,
/// comparisons, …) gain nothing there: their arithmetic outweighs a store
/// and a load per point, and through a block on the stack they were slower
/// than the tile's loops.
fn vector_unary(op: UnaryOp) -> bool {
    matches!(
        op,
        UnaryOp::Identity
            | UnaryOp::Relu
            | UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Square
            | UnaryOp::LeakyRelu(_)
            | UnaryOp::Clip { .. }
    )
}

/// [`vector_unary`] for binary operators.
fn vector_binary(op: BinaryOp) -> bool {
    matches!(op, BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Max | BinaryOp::Min)
}

/// `place`'s registers from point `by` on.
#[derive(Clone, Copy)]
pub(in crate::simd) struct Shifted<P> {
    pub place: P,
    pub by: usize,
}

impl<P: Place> Place for Shifted<P> {
    #[inline(always)]
    fn at(self, i: usize) -> *mut f32 {
        // SAFETY (of the callers): `by` is within every register's points.
        unsafe { self.place.at(i).add(self.by) }
    }
    #[inline(always)]
    fn loaded(self, i: usize) -> bool {
        self.place.loaded(i)
    }
    #[inline(always)]
    fn streamed(self, i: usize) -> bool {
        self.place.streamed(i)
    }
    #[inline(always)]
    fn far(self) -> bool {
        self.place.far()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use diamond_ir::ElemType;

    fn instr(inst: Inst) -> Instr {
        Instr { inst, ty: ElemType::Float }
    }

    #[test]
    fn a_chain_is_one_run_keeping_what_others_read() {
        // x = load; y = x * 2; z = relu(y); w = z + x; v = w - y (y read twice).
        let body = vec![
            instr(Inst::Load(0)),
            instr(Inst::Const(2.0)),
            instr(Inst::Binary(BinaryOp::Mul, 0, 1)),
            instr(Inst::Unary(UnaryOp::Relu, 2)),
            instr(Inst::Binary(BinaryOp::Add, 3, 0)),
            instr(Inst::Binary(BinaryOp::Sub, 4, 2)),
        ];
        let plan = Plan::new(&body, &[0, 2, 3, 4, 5], &[true, false, false, false, false, false], [5]);
        assert_eq!(plan.items, vec![Item::Run(0..4)]);
        let keeps: Vec<(usize, bool)> = plan.steps.iter().map(|s| (s.inst, s.keep)).collect();
        assert_eq!(keeps, vec![(2, true), (3, false), (4, false), (5, true)]);
        assert_eq!(plan.steps[0].a, Arg::Reg(0));
        assert_eq!(plan.steps[0].b, Arg::Scalar(2.0));
        assert_eq!(plan.steps[2].a, Arg::Acc);
        assert_eq!(plan.steps[2].b, Arg::Reg(0));
        assert_eq!(plan.steps[3].b, Arg::Reg(2));
    }

    #[test]
    fn unchained_instructions_and_single_steps_stay_with_the_tile() {
        // a = load 0 (strided: evaluated); b = load 1 (in place); c = a + b;
        // d = select(c, a, b); e = exp(a); f = neg(b).
        let body = vec![
            instr(Inst::Load(0)),
            instr(Inst::Load(1)),
            instr(Inst::Binary(BinaryOp::Add, 0, 1)),
            instr(Inst::Select(2, 0, 1)),
            instr(Inst::Unary(UnaryOp::Exp, 0)),
            instr(Inst::Unary(UnaryOp::Neg, 1)),
        ];
        let plan = Plan::new(&body, &[0, 1, 2, 3, 4, 5], &[false, true, false, false, false, false], [3, 4, 5]);
        assert!(!plan.has_runs());
        assert_eq!(plan.items, vec![Item::One(0), Item::One(2), Item::One(3), Item::One(4), Item::One(5)]);
    }

    /// A small deterministic generator (SplitMix64).
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn value(&mut self) -> f32 {
            match self.below(16) {
                0 => f32::NAN,
                1 => -0.0,
                2 => 0.0,
                3 => f32::INFINITY,
                _ => (self.next() >> 40) as f32 / (1u64 << 23) as f32 * 4.0 - 2.0,
            }
        }
    }

    const UNARY: &[UnaryOp] = &[
        UnaryOp::Relu,
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Square,
        UnaryOp::LeakyRelu(0.1),
        UnaryOp::Clip { min: -0.5, max: 0.75 },
        UnaryOp::Identity,
        UnaryOp::Exp,
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Sqrt,
        UnaryOp::Not,
    ];
    const BINARY: &[BinaryOp] = &[
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Max,
        BinaryOp::Min,
        BinaryOp::Less,
        BinaryOp::PRelu,
    ];

    /// A random program: two operands, two constants, then instructions
    /// that mostly take the one before them (so that runs form), with the
    /// chained operand first or second, now and then a select.
    fn program(rng: &mut Rng) -> (Vec<Instr>, Vec<usize>) {
        let mut body = vec![
            instr(Inst::Load(0)),
            instr(Inst::Load(1)),
            instr(Inst::Const(f64::from(rng.value()))),
            instr(Inst::Const(0.5)),
        ];
        for _ in 0..4 + rng.below(10) {
            let last = body.len() - 1;
            let pick = |rng: &mut Rng| if rng.below(3) > 0 { last } else { rng.below(body.len()) };
            let a = pick(rng);
            let b = rng.below(body.len());
            let inst = match rng.below(10) {
                0 => Inst::Select(rng.below(body.len()), a, b),
                1..=4 => Inst::Unary(UNARY[rng.below(UNARY.len())], a),
                _ if rng.below(2) == 0 => Inst::Binary(BINARY[rng.below(BINARY.len())], a, b),
                _ => Inst::Binary(BINARY[rng.below(BINARY.len())], b, a),
            };
            body.push(instr(inst));
        }
        let mut outputs = vec![body.len() - 1];
        if rng.below(2) == 0 {
            outputs.push(4 + rng.below(body.len() - 4));
        }
        (body, outputs)
    }

    /// The runs give the tile evaluator's values, bit for bit (NaN for
    /// NaN), on random programs and data with NaN, infinities and signed
    /// zeros, over every tile length up to a whole tile (whole blocks and
    /// tails), on each vector instance the processor has.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn runs_agree_with_the_tile_evaluator() {
        use crate::simd::chain_vector::{avx2, avx512};
        use crate::simd::math::Fused;
        use crate::simd::tile::{eval_one, eval_with, Packed, Src, TILE};
        type Run = unsafe fn(&[Step], &[Instr], Packed, usize);
        let mut instances: Vec<(&str, Run)> = vec![];
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            instances.push(("avx2", avx2::run::<Packed>));
            if is_x86_feature_detected!("avx512f") {
                instances.push(("avx512", avx512::run::<Packed>));
            }
        }
        let mut rng = Rng(7);
        let mut runs = 0;
        for case in 0..600 {
            let (body, outputs) = program(&mut rng);
            let which: Vec<usize> = (0..body.len()).collect();
            let plan = Plan::new(&body, &which, &vec![false; body.len()], outputs.iter().copied());
            runs += plan.items.iter().filter(|i| matches!(i, Item::Run(_))).count();
            let n = if rng.below(2) == 0 { rng.below(81) } else { rng.below(TILE + 1) };
            let xs: Vec<Vec<f32>> = (0..2).map(|_| (0..n.max(1)).map(|_| rng.value()).collect()).collect();
            let srcs = [Src::F32(xs[0].as_ptr()), Src::F32(xs[1].as_ptr())];
            let mut want = vec![0.0f32; body.len() * TILE];
            // SAFETY: each operand holds n points read with stride 1, and the
            // registers one per instruction.
            unsafe { eval_with(true, &body, &which, Packed(want.as_mut_ptr()), n, &srcs, &[0, 0], &[1, 1]) };
            for &(isa, run) in &instances {
                let mut got = vec![0.0f32; body.len() * TILE];
                let place = Packed(got.as_mut_ptr());
                for item in &plan.items {
                    // SAFETY: as above; the instance's instructions are there.
                    unsafe {
                        match item {
                            Item::One(i) => eval_one::<_, Fused>(&body, *i, place, n, &srcs, &[0, 0], &[1, 1]),
                            Item::Run(r) => run(&plan.steps[r.clone()], &body, place, n),
                        }
                    }
                }
                for &o in &outputs {
                    for t in 0..n {
                        let (w, g) = (want[o * TILE + t], got[o * TILE + t]);
                        assert!(
                            w.to_bits() == g.to_bits() || (w.is_nan() && g.is_nan()),
                            "{isa}, case {case}, instruction {o} ({:?}), point {t} of {n}: tile {w}, run {g}\n{body:?}\n{plan:?}",
                            body[o].inst
                        );
                    }
                }
            }
        }
        assert!(runs > 400, "only {runs} runs formed");
    }
}
