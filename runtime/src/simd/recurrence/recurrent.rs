//! The recurrent operators `LSTM`, `GRU` and `RNN` on `f32`, the way
//! onnxruntime computes them: the input's contribution to every gate at
//! every time step is one product for the whole sequence (`X · Wᵀ` plus the
//! biases, `sgemm_on`), and each step then multiplies only the previous hidden
//! state by the recurrence weight (`H · Rᵀ`: a GEMV per batch row, with no
//! packing, through the few-rows product) and applies the gates
//! element by element with the vectorized [`math`](super::math) functions.
//! The reference kernels do all of this one dot product at a time in `f64`
//! (a CRNN's bidirectional LSTM: 80% of an OCR model's time).
//!
//! Covered: both layouts, every direction, sequence lengths (rows past their
//! length keep their state and leave zeros in `Y`), initial states,
//! LSTM peepholes and `input_forget`, GRU's `linear_before_reset`, `clip`.
//! Other activations than the defaults (`Sigmoid`, `Tanh`, `Tanh`),
//! `activation_alpha`/`beta` and other element types return `None`: the node
//! runs on the reference kernels.

use super::contraction::floats;
use super::cpu;
use super::epilogue::{Bias, Epilogue};
use super::gemm::{sgemm_on, MatRef};
use super::math::{clamp, sigmoid_in, tanh_in, Arith, Fused, Split};
use super::recurrence_8bit::Recurrence8;
use crate::tensor::{Data, Tensor};
use diamond_ir::{AttrValue, Node};

/// The three cells.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Cell {
    Rnn,
    Gru,
    Lstm,
}

impl Cell {
    fn of(node: &Node) -> Option<Cell> {
        if !node.domain.as_deref().unwrap_or("").is_empty() {
            return None;
        }
        match node.op_type.as_deref()? {
            "RNN" => Some(Cell::Rnn),
            "GRU" => Some(Cell::Gru),
            "LSTM" => Some(Cell::Lstm),
            _ => None,
        }
    }

    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }

    /// The default activations, the only ones these kernels compute.
    fn activations(self) -> &'static [&'static [u8]] {
        match self {
            Cell::Rnn => &[b"Tanh"],
            Cell::Gru => &[b"Sigmoid", b"Tanh"],
            Cell::Lstm => &[b"Sigmoid", b"Tanh", b"Tanh"],
        }
    }
}

/// Whether the session hands `node` to [`compute`].
pub fn covers(node: &Node) -> bool {
    Cell::of(node).is_some() || quantized(node)
}

/// Whether `node` is onnxruntime's `com.microsoft` `DynamicQuantizeLSTM`:
/// an LSTM over 8-bit `W` and `R`, which [`compute`] dequantizes (as the
/// reference executor does) and runs on these kernels.
pub(crate) fn quantized(node: &Node) -> bool {
    node.domain.as_deref() == Some("com.microsoft") && node.op_type.as_deref() == Some("DynamicQuantizeLSTM")
}

/// The attributes that shape the computation.
#[derive(Clone, Copy, Debug)]
struct Spec {
    cell: Cell,
    seq: usize,
    batch: usize,
    input: usize,
    hidden: usize,
    dirs: usize,
    /// `direction = "reverse"`: the one direction runs backwards.
    reverse: bool,
    /// `layout = 1`: batch-major X, Y and states.
    batch_major: bool,
    clip: Option<f32>,
    input_forget: bool,
    linear_before_reset: bool,
}

impl Spec {
    /// Row of X (and of the input projection) holding time `t` of batch row `b`.
    fn x_row(&self, t: usize, b: usize) -> usize {
        if self.batch_major {
            b * self.seq + t
        } else {
            t * self.batch + b
        }
    }

    /// Offset in Y of time `t`, direction `d`, batch row `b`.
    fn y_at(&self, t: usize, d: usize, b: usize) -> usize {
        let row =
            if self.batch_major { (b * self.seq + t) * self.dirs + d } else { (t * self.dirs + d) * self.batch + b };
        row * self.hidden
    }

    /// Offset in a state (initial or final) of direction `d`, batch row `b`.
    fn state_at(&self, d: usize, b: usize) -> usize {
        let row = if self.batch_major { b * self.dirs + d } else { d * self.batch + b };
        row * self.hidden
    }

    fn state_shape(&self) -> Vec<usize> {
        if self.batch_major {
            vec![self.batch, self.dirs, self.hidden]
        } else {
            vec![self.dirs, self.batch, self.hidden]
        }
    }

    fn y_shape(&self) -> Vec<usize> {
        if self.batch_major {
            vec![self.batch, self.seq, self.dirs, self.hidden]
        } else {
            vec![self.seq, self.dirs, self.batch, self.hidden]
        }
    }
}

fn attr<'n>(node: &'n Node, name: &str) -> Option<AttrValue<'n>> {
    node.attribute(name).and_then(|a| a.value())
}

fn int(node: &Node, name: &str, default: i64) -> Option<i64> {
    match attr(node, name) {
        None => Some(default),
        Some(AttrValue::Int(v)) => Some(v),
        _ => None,
    }
}

/// Reads the attributes and checks the operands' shapes; `None` for what
/// these kernels leave to the reference (which reports what is wrong).
fn spec(node: &Node, cell: Cell, x: &Tensor, w: &Tensor, r: &Tensor) -> Option<Spec> {
    if attr(node, "activation_alpha").is_some() || attr(node, "activation_beta").is_some() {
        return None;
    }
    let dirs_named = match attr(node, "direction") {
        None => (1, false),
        Some(AttrValue::String(b"forward")) => (1, false),
        Some(AttrValue::String(b"reverse")) => (1, true),
        Some(AttrValue::String(b"bidirectional")) => (2, false),
        _ => return None,
    };
    let (dirs, reverse) = dirs_named;
    match attr(node, "activations") {
        None => {}
        Some(AttrValue::Strings(names)) => {
            let want = cell.activations();
            if names.len() != want.len() * dirs || names.iter().enumerate().any(|(i, n)| *n != want[i % want.len()]) {
                return None;
            }
        }
        _ => return None,
    }
    let clip = match attr(node, "clip") {
        None => None,
        Some(AttrValue::Float(c)) => Some(c),
        _ => return None,
    };
    let batch_major = int(node, "layout", 0)? == 1;
    let (&[a, b, input], &[wd, wg, wi], &[rd, rg, rh]) = (x.shape.as_slice(), w.shape.as_slice(), r.shape.as_slice())
    else {
        return None;
    };
    let (seq, batch) = if batch_major { (b, a) } else { (a, b) };
    let hidden = match attr(node, "hidden_size") {
        None => rh,
        Some(AttrValue::Int(h)) => usize::try_from(h).ok()?,
        _ => return None,
    };
    let g = cell.gates() * hidden;
    if wd != dirs || rd != dirs || wg != g || rg != g || wi != input || rh != hidden || hidden == 0 {
        return None;
    }
    Some(Spec {
        cell,
        seq,
        batch,
        input,
        hidden,
        dirs,
        reverse,
        batch_major,
        clip,
        input_forget: int(node, "input_forget", 0)? != 0,
        linear_before_reset: int(node, "linear_before_reset", 0)? != 0,
    })
}

/// Computes the node's outputs (`Y`, `Y_h` and, for LSTM, `Y_c`), or
/// `None` when these kernels do not cover it.
pub fn compute(node: &Node, inputs: &[Option<&Tensor>]) -> Option<Vec<Tensor>> {
    compute_keeping(node, inputs, None)
}

/// What a `DynamicQuantizeLSTM` derives from its constant weights, kept
/// by the session from run to run: `W` and `R` dequantized, and `R` per
/// direction in 8 bits for the steps ([`Recurrence8`]).
pub(crate) struct KeptLstm {
    w: Tensor,
    r: Tensor,
    r8: Option<Vec<Recurrence8>>,
}

impl KeptLstm {
    /// The bytes it holds.
    pub(crate) fn byte_size(&self) -> u64 {
        self.w.byte_size() + self.r.byte_size() + self.r8.iter().flatten().map(Recurrence8::byte_size).sum::<u64>()
    }
}

/// [`compute`], with `kept` the session's slot for a `DynamicQuantizeLSTM`'s
/// dequantized `W` and `R` when they (and their scales and zero points) are
/// constant: filled on the first run, used as they are after.
pub(crate) fn compute_keeping(
    node: &Node,
    inputs: &[Option<&Tensor>],
    kept: Option<&mut Option<KeptLstm>>,
) -> Option<Vec<Tensor>> {
    if quantized(node) {
        // W and R dequantized to the LSTM's layout; the scales and zero
        // points (inputs 8-11) are not operands of the LSTM
        let operand = |i: usize| inputs.get(i).copied().flatten();
        let derive = || {
            let one = |at: usize, scale: usize, zero: usize| {
                crate::ops::rnn::dequantize_weights(operand(at)?, operand(scale)?, operand(zero)).ok()
            };
            let r8 = recurrence_8bit(operand(2)?, operand(10)?, operand(11));
            Some(KeptLstm { w: one(1, 8, 9)?, r: one(2, 10, 11)?, r8 })
        };
        let mut fresh = None;
        let kept = super::quantized::kept_or_fresh(kept, &mut fresh, derive)?;
        let mut lstm: Vec<Option<&Tensor>> = inputs.iter().take(8).copied().collect();
        lstm[1] = Some(&kept.w);
        lstm[2] = Some(&kept.r);
        return compute_cell(node, Cell::Lstm, &lstm, kept.r8.as_deref());
    }
    compute_cell(node, Cell::of(node)?, inputs, None)
}

/// A `DynamicQuantizeLSTM`'s `R` (`[dirs, hidden, 4·hidden]` 8-bit
/// integers) per direction in 8 bits, or `None` for other types or scales.
fn recurrence_8bit(r: &Tensor, scale: &Tensor, zero: Option<&Tensor>) -> Option<Vec<Recurrence8>> {
    let &[dirs, hidden, gates] = r.shape.as_slice() else { return None };
    let (values, unsigned): (Vec<i16>, bool) = match &r.data {
        Data::I8(v) => (v.iter().map(|&x| i16::from(x)).collect(), false),
        Data::U8(v) => (v.iter().map(|&x| i16::from(x)).collect(), true),
        _ => return None,
    };
    let scale = floats(scale)?;
    let zero: Vec<f32> = match zero {
        None => vec![0.0; scale.len()],
        Some(z) => z.to_f64s()?.iter().map(|&v| v as f32).collect(),
    };
    let per = scale.len().checked_div(dirs)?;
    if per * dirs != scale.len() || zero.len() != scale.len() {
        return None;
    }
    (0..dirs)
        .map(|d| {
            Recurrence8::from_columns(
                &values[d * hidden * gates..][..hidden * gates],
                unsigned,
                (hidden, gates),
                &scale[d * per..][..per],
                &zero[d * per..][..per],
            )
        })
        .collect()
}

/// [`compute`] for a node whose attributes are those of `cell`'s ONNX operator.
fn compute_cell(
    node: &Node,
    cell: Cell,
    inputs: &[Option<&Tensor>],
    r8: Option<&[Recurrence8]>,
) -> Option<Vec<Tensor>> {
    let operand = |i: usize| inputs.get(i).copied().flatten();
    let (x, w, r) = (operand(0)?, operand(1)?, operand(2)?);
    let s = spec(node, cell, x, w, r)?;
    let (xd, wd, rd) = (floats(x)?, floats(w)?, floats(r)?);
    let (h, g) = (s.hidden, cell.gates() * s.hidden);
    fn per_dir(t: Option<&Tensor>, len: usize) -> Option<Option<&[f32]>> {
        match t {
            None => Some(None),
            Some(t) => floats(t).filter(|v| v.len() == len).map(Some),
        }
    }
    let bias = per_dir(operand(3), s.dirs * 2 * g)?;
    let lens: Vec<usize> = match operand(4) {
        None => vec![s.seq; s.batch],
        Some(t) => {
            let v: Vec<i64> = match &t.data {
                Data::I32(v) => v.iter().map(|&x| i64::from(x)).collect(),
                Data::I64(v) => v.clone(),
                _ => return None,
            };
            if v.len() != s.batch {
                return None;
            }
            v.iter().map(|&l| usize::try_from(l).unwrap_or(0).min(s.seq)).collect()
        }
    };
    let initial_h = per_dir(operand(5), s.dirs * s.batch * h)?;
    let initial_c = if cell == Cell::Lstm { per_dir(operand(6), s.dirs * s.batch * h)? } else { None };
    let peepholes = if cell == Cell::Lstm { per_dir(operand(7), s.dirs * 3 * h)? } else { None };
    if xd.len() != s.seq * s.batch * s.input {
        return None;
    }

    // One direction: its hidden state at every step (time-major rows of
    // `hidden`, zeros past a row's length) and its final states.
    let direction = |d: usize, threads: usize| {
        let weights = Direction {
            w: &wd[d * g * s.input..][..g * s.input],
            r: &rd[d * g * h..][..g * h],
            wb: bias.map(|b| &b[d * 2 * g..][..g]),
            rb: bias.map(|b| &b[d * 2 * g + g..][..g]),
            peep: peepholes.map(|p| &p[d * 3 * h..][..3 * h]),
            reverse: s.reverse || d == 1,
            r8: r8.and_then(|r| r.get(d)),
        };
        let start = |init: Option<&[f32]>| -> Vec<f32> {
            let mut state = vec![0f32; s.batch * h];
            if let Some(v) = init {
                for b in 0..s.batch {
                    state[b * h..][..h].copy_from_slice(&v[s.state_at(d, b)..][..h]);
                }
            }
            state
        };
        let (mut hs, mut cs) = (start(initial_h), start(initial_c));
        let mut steps = vec![0f32; s.seq * s.batch * h];
        run_direction(&s, &weights, xd, &lens, (&mut hs, &mut cs), &mut steps, threads);
        (steps, hs, cs)
    };
    // Two directions on two threads or more run side by side, each on half
    // the pool: a step's product is too small to share out well.
    let threads = rayon::current_num_threads();
    let runs = if s.dirs == 2 && threads > 1 {
        let (a, b) = rayon::join(|| direction(0, threads / 2), || direction(1, threads - threads / 2));
        vec![a, b]
    } else {
        (0..s.dirs).map(|d| direction(d, threads)).collect()
    };
    let mut y = vec![0f32; s.seq * s.dirs * s.batch * h];
    let mut y_h = vec![0f32; s.dirs * s.batch * h];
    let mut y_c = vec![0f32; if cell == Cell::Lstm { s.dirs * s.batch * h } else { 0 }];
    for (d, (steps, hs, cs)) in runs.iter().enumerate() {
        for t in 0..s.seq {
            for b in 0..s.batch {
                y[s.y_at(t, d, b)..][..h].copy_from_slice(&steps[(t * s.batch + b) * h..][..h]);
            }
        }
        for b in 0..s.batch {
            y_h[s.state_at(d, b)..][..h].copy_from_slice(&hs[b * h..][..h]);
            if cell == Cell::Lstm {
                y_c[s.state_at(d, b)..][..h].copy_from_slice(&cs[b * h..][..h]);
            }
        }
    }
    let mut outs = vec![Tensor::new(s.y_shape(), Data::F32(y))?, Tensor::new(s.state_shape(), Data::F32(y_h))?];
    if cell == Cell::Lstm {
        outs.push(Tensor::new(s.state_shape(), Data::F32(y_c))?);
    }
    Some(outs)
}

/// One direction's weights: `w` (`gates·hidden × input`), `r`
/// (`gates·hidden × hidden`), the input and recurrence biases, the peepholes.
struct Direction<'a> {
    w: &'a [f32],
    r: &'a [f32],
    wb: Option<&'a [f32]>,
    rb: Option<&'a [f32]>,
    peep: Option<&'a [f32]>,
    reverse: bool,
    /// `r` in 8 bits (a `DynamicQuantizeLSTM`'s), for the steps' products.
    r8: Option<&'a Recurrence8>,
}

/// Runs one direction over the sequence from states `hs`, `cs` (batch rows
/// of `hidden`), leaving the final states there and each step's hidden
/// state in `steps` (row `t · batch + b`); its products on at most
/// `threads` threads of the pool.
fn run_direction(
    s: &Spec,
    dir: &Direction<'_>,
    x: &[f32],
    lens: &[usize],
    (hs, cs): (&mut [f32], &mut [f32]),
    steps: &mut [f32],
    threads: usize,
) {
    let (h, g) = (s.hidden, s.cell.gates() * s.hidden);
    let gru = s.cell == Cell::Gru;
    // The input projection of every row of X at once, with the biases that
    // add to it: both for every gate, except GRU's candidate, whose
    // recurrence bias goes with the recurrence (inside `r ⊙ (…)` or with
    // the product of `r ⊙ h`).
    let mut input_bias = vec![0f32; g];
    for (j, v) in input_bias.iter_mut().enumerate() {
        let rb = if gru && j >= 2 * h { 0.0 } else { dir.rb.map_or(0.0, |b| b[j]) };
        *v = dir.wb.map_or(0.0, |b| b[j]) + rb;
    }
    let rows = s.seq * s.batch;
    let mut projected = vec![0f32; rows * g];
    let ep = Epilogue { bias: Bias::PerCol(&input_bias), ..Epilogue::default() };
    sgemm_on(
        MatRef::row_major(x, rows, s.input),
        MatRef::row_major(dir.w, g, s.input).t(),
        &mut projected,
        &ep,
        threads,
    );

    // GRU's candidate recurrence bias, and the gates the first product covers:
    // all of them, except GRU's candidate without `linear_before_reset`
    // (its product is of `r ⊙ h`, known only after the reset gate).
    let candidate_bias: Vec<f32> = match (gru, dir.rb) {
        (true, Some(rb)) => rb[2 * h..3 * h].to_vec(),
        _ => vec![0f32; if gru { h } else { 0 }],
    };
    let recurrent_gates = if gru && !s.linear_before_reset { 2 * h } else { g };
    let mut recurrent_bias = vec![0f32; recurrent_gates];
    if gru && s.linear_before_reset {
        recurrent_bias[2 * h..].copy_from_slice(&candidate_bias);
    }
    let r_first = MatRef::row_major(&dir.r[..recurrent_gates * h], recurrent_gates, h).t();
    let r_candidate = gru.then(|| MatRef::row_major(&dir.r[2 * h * h..], h, h).t());
    let no_peepholes = vec![0f32; if s.cell == Cell::Lstm && dir.peep.is_none() { 3 * h } else { 0 }];
    let peep = dir.peep.unwrap_or(&no_peepholes);
    let mut recurrent = vec![0f32; s.batch * recurrent_gates];
    let mut reset_hidden = vec![0f32; if gru { s.batch * h } else { 0 }];
    let mut candidate = vec![0f32; if gru { s.batch * h } else { 0 }];
    let count = lens.iter().copied().max().unwrap_or(0);
    let fma = cpu::avx2_fma();
    for step in 0..count {
        match dir.r8 {
            Some(r8) if recurrent_gates == g => {
                for (state, out) in hs.chunks_exact(h).zip(recurrent.chunks_exact_mut(g)) {
                    r8.product(state, out);
                    for (o, &b) in out.iter_mut().zip(&recurrent_bias) {
                        *o += b;
                    }
                }
            }
            _ => {
                let ep = Epilogue { bias: Bias::PerCol(&recurrent_bias), ..Epilogue::default() };
                sgemm_on(MatRef::row_major(hs, s.batch, h), r_first, &mut recurrent, &ep, threads);
            }
        }
        let time = |b: usize| if dir.reverse { lens[b] - 1 - step } else { step };
        let live = |b: usize| step < lens[b];
        if let (Some(r_candidate), false) = (r_candidate, s.linear_before_reset) {
            // r ⊙ h per live row, then its product with the candidate's weight
            for b in (0..s.batch).filter(|&b| live(b)) {
                let xw = &projected[s.x_row(time(b), b) * g..][..g];
                let gates = Gates { x: xw, h: &recurrent[b * recurrent_gates..][..recurrent_gates], clip: s.clip };
                reset_times_hidden(fma, &gates, h, &hs[b * h..][..h], &mut reset_hidden[b * h..][..h]);
            }
            let ep = Epilogue { bias: Bias::PerCol(&candidate_bias), ..Epilogue::default() };
            sgemm_on(MatRef::row_major(&reset_hidden, s.batch, h), r_candidate, &mut candidate, &ep, threads);
        }
        for b in (0..s.batch).filter(|&b| live(b)) {
            let t = time(b);
            let gates = Gates {
                x: &projected[s.x_row(t, b) * g..][..g],
                h: &recurrent[b * recurrent_gates..][..recurrent_gates],
                clip: s.clip,
            };
            let state = &mut hs[b * h..][..h];
            match s.cell {
                Cell::Lstm => lstm_step(fma, &gates, peep, s.input_forget, state, &mut cs[b * h..][..h]),
                Cell::Gru => {
                    let m = (!s.linear_before_reset).then(|| &candidate[b * h..][..h]);
                    gru_step(fma, &gates, m, state);
                }
                Cell::Rnn => rnn_step(fma, &gates, state),
            }
            steps[(t * s.batch + b) * h..][..h].copy_from_slice(state);
        }
    }
}

/// One batch row's gate inputs at one step: the input projection (biases
/// included) and the recurrence product, gate after gate.
struct Gates<'a> {
    x: &'a [f32],
    h: &'a [f32],
    clip: Option<f32>,
}

#[inline(always)]
fn clipped(v: f32, clip: Option<f32>) -> f32 {
    match clip {
        Some(c) => clamp(v, -c, c),
        None => v,
    }
}

/// `i, o, f, c` gates (ONNX's order), peepholes `i, o, f`:
/// `c' = f·c + i·g`, `h' = o·tanh(c')`.
fn lstm_step(fma: bool, gates: &Gates<'_>, peep: &[f32], input_forget: bool, h: &mut [f32], c: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if fma {
        // SAFETY: the processor has AVX2 and FMA.
        return unsafe { lstm_step_avx2(gates, peep, input_forget, h, c) };
    }
    let _ = fma;
    lstm_step_in::<Split>(gates, peep, input_forget, h, c)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn lstm_step_avx2(gates: &Gates<'_>, peep: &[f32], input_forget: bool, h: &mut [f32], c: &mut [f32]) {
    lstm_step_in::<Fused>(gates, peep, input_forget, h, c)
}

#[inline(always)]
fn lstm_step_in<A: Arith>(gates: &Gates<'_>, peep: &[f32], input_forget: bool, h: &mut [f32], c: &mut [f32]) {
    let n = h.len();
    let (x, r, clip) = (&gates.x[..4 * n], &gates.h[..4 * n], gates.clip);
    let (pi, po, pf) = (&peep[..n], &peep[n..2 * n], &peep[2 * n..3 * n]);
    for k in 0..n {
        let old = c[k];
        let i = sigmoid_in::<A>(clipped(x[k] + r[k] + pi[k] * old, clip));
        let f = if input_forget {
            1.0 - i
        } else {
            sigmoid_in::<A>(clipped(x[2 * n + k] + r[2 * n + k] + pf[k] * old, clip))
        };
        let g = tanh_in::<A>(clipped(x[3 * n + k] + r[3 * n + k], clip));
        let new = f * old + i * g;
        let o = sigmoid_in::<A>(clipped(x[n + k] + r[n + k] + po[k] * new, clip));
        c[k] = new;
        h[k] = o * tanh_in::<A>(new);
    }
}

/// GRU's `r ⊙ h` (the reset gate applied to the previous state), for the
/// candidate's product when `linear_before_reset` is 0.
fn reset_times_hidden(fma: bool, gates: &Gates<'_>, n: usize, h: &[f32], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if fma {
        // SAFETY: the processor has AVX2 and FMA.
        return unsafe { reset_times_hidden_avx2(gates, n, h, out) };
    }
    let _ = fma;
    reset_times_hidden_in::<Split>(gates, n, h, out)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn reset_times_hidden_avx2(gates: &Gates<'_>, n: usize, h: &[f32], out: &mut [f32]) {
    reset_times_hidden_in::<Fused>(gates, n, h, out)
}

#[inline(always)]
fn reset_times_hidden_in<A: Arith>(gates: &Gates<'_>, n: usize, h: &[f32], out: &mut [f32]) {
    let (x, r) = (&gates.x[n..2 * n], &gates.h[n..2 * n]);
    for k in 0..n {
        out[k] = sigmoid_in::<A>(clipped(x[k] + r[k], gates.clip)) * h[k];
    }
}

/// `z, r, h` gates: `h' = (1 − z)·ĥ + z·h` with `ĥ = tanh(x_h + r ⊙ (h·R_hᵀ + Rb_h))`
/// (`linear_before_reset`, `m` absent) or `tanh(x_h + m)`, `m = (r ⊙ h)·R_hᵀ + Rb_h`.
fn gru_step(fma: bool, gates: &Gates<'_>, m: Option<&[f32]>, h: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if fma {
        // SAFETY: the processor has AVX2 and FMA.
        return unsafe { gru_step_avx2(gates, m, h) };
    }
    let _ = fma;
    gru_step_in::<Split>(gates, m, h)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gru_step_avx2(gates: &Gates<'_>, m: Option<&[f32]>, h: &mut [f32]) {
    gru_step_in::<Fused>(gates, m, h)
}

#[inline(always)]
fn gru_step_in<A: Arith>(gates: &Gates<'_>, m: Option<&[f32]>, h: &mut [f32]) {
    let n = h.len();
    let (x, r, clip) = (gates.x, gates.h, gates.clip);
    for k in 0..n {
        let z = sigmoid_in::<A>(clipped(x[k] + r[k], clip));
        let candidate = match m {
            Some(m) => tanh_in::<A>(clipped(x[2 * n + k] + m[k], clip)),
            None => {
                let reset = sigmoid_in::<A>(clipped(x[n + k] + r[n + k], clip));
                tanh_in::<A>(clipped(x[2 * n + k] + reset * r[2 * n + k], clip))
            }
        };
        h[k] = (1.0 - z) * candidate + z * h[k];
    }
}

/// `h' = tanh(x + h·Rᵀ)`, biases included in both.
fn rnn_step(fma: bool, gates: &Gates<'_>, h: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if fma {
        // SAFETY: the processor has AVX2 and FMA.
        return unsafe { rnn_step_avx2(gates, h) };
    }
    let _ = fma;
    rnn_step_in::<Split>(gates, h)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rnn_step_avx2(gates: &Gates<'_>, h: &mut [f32]) {
    rnn_step_in::<Fused>(gates, h)
}

#[inline(always)]
fn rnn_step_in<A: Arith>(gates: &Gates<'_>, h: &mut [f32]) {
    let n = h.len();
    let (x, r) = (&gates.x[..n], &gates.h[..n]);
    for k in 0..n {
        h[k] = tanh_in::<A>(clipped(x[k] + r[k], gates.clip));
    }
}
