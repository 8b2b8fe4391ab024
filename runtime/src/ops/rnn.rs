//! The recurrent operators `RNN`, `GRU` and `LSTM`: one time step at a
//! time, per direction, with sequence lengths, initial states, peepholes,
//! clipping and both layouts; and onnxruntime's `DynamicQuantizeLSTM`, an
//! LSTM over dequantized 8-bit weights.

use super::elementwise::{floats, from_f64s};
use super::{NodeCtx, Outs};
use crate::error::Result;
use crate::tensor::Value;

pub(super) fn dispatch(ctx: &NodeCtx<'_>) -> Option<Result<Outs>> {
    Some(match ctx.op() {
        "RNN" => recurrent(ctx, Cell::Rnn),
        "GRU" => recurrent(ctx, Cell::Gru),
        "LSTM" => recurrent(ctx, Cell::Lstm),
        _ => return None,
    })
}

#[derive(Clone, Copy, PartialEq)]
enum Cell {
    Rnn,
    Gru,
    Lstm,
}

fn activation(ctx: &NodeCtx<'_>, name: &[u8]) -> Result<fn(f64) -> f64> {
    Ok(match name {
        b"Tanh" => f64::tanh,
        b"Sigmoid" => |x| 1.0 / (1.0 + (-x).exp()),
        b"Relu" => |x| x.max(0.0),
        b"Softsign" => |x| x / (1.0 + x.abs()),
        b"Softplus" => |x| x.exp().ln_1p(),
        other => return Err(ctx.unsupported(format!("activation '{}'", String::from_utf8_lossy(other)))),
    })
}

/// `m` (rows × cols, row-major) times vector `v`, added to `out`.
fn matvec(out: &mut [f64], m: &[f64], v: &[f64], rows: usize, cols: usize) {
    for r in 0..rows {
        out[r] += m[r * cols..(r + 1) * cols].iter().zip(v).map(|(a, b)| a * b).sum::<f64>();
    }
}

fn recurrent(ctx: &NodeCtx<'_>, cell: Cell) -> Result<Outs> {
    recurrent_with(ctx, cell, ctx.input(1)?, ctx.input(2)?)
}

/// onnxruntime's `com.microsoft` `DynamicQuantizeLSTM`: an LSTM whose `W`
/// (`[dirs, input, 4·hidden]`) and `R` (`[dirs, hidden, 4·hidden]`) are
/// 8-bit integers with a scale and zero point per direction or per
/// direction and gate row (inputs 8–11). They are dequantized to the
/// LSTM's layout and the LSTM runs in float; onnxruntime also quantizes `X`
/// at run time, so the two differ by that rounding.
pub(super) fn quantized_lstm(ctx: &NodeCtx<'_>) -> Result<Outs> {
    let w = dequantized(ctx, 1, 8, 9)?;
    let r = dequantized(ctx, 2, 10, 11)?;
    recurrent_with(ctx, Cell::Lstm, &w, &r)
}

/// Input `at` (`[dirs, rows, cols]` integers) dequantized and transposed to
/// `[dirs, cols, rows]`, with the scale and zero point at `scale_at`, `zero_at`.
fn dequantized(ctx: &NodeCtx<'_>, at: usize, scale_at: usize, zero_at: usize) -> Result<crate::tensor::Tensor> {
    let (q, scale, zero) = (ctx.input(at)?, ctx.input(scale_at)?, ctx.opt_input(zero_at)?);
    dequantize_weights(q, scale, zero).map_err(|e| ctx.err(format!("input {at}: {e}")))
}

/// A `DynamicQuantizeLSTM` weight `q` (`[dirs, rows, cols]` integers)
/// dequantized with `scale` and `zero` (one per direction, or per direction
/// and column) and transposed to the LSTM's `[dirs, cols, rows]`, in `f32`;
/// the reference executor and the SIMD session both run the LSTM on it.
pub(crate) fn dequantize_weights(
    q: &crate::tensor::Tensor,
    scale: &crate::tensor::Tensor,
    zero: Option<&crate::tensor::Tensor>,
) -> std::result::Result<crate::tensor::Tensor, String> {
    let &[dirs, rows, cols] = q.shape.as_slice() else {
        return Err(format!("the weight must have rank 3, not {}", q.rank()));
    };
    let values = q.to_f64s().ok_or("string weights")?;
    let scale = scale.to_f64s().ok_or("string scale")?;
    let zero = match zero {
        Some(z) => z.to_f64s().ok_or("string zero point")?,
        None => vec![0.0; scale.len()],
    };
    // per direction, or per direction and column
    let per_column = match scale.len() {
        n if n == dirs => false,
        n if n == dirs * cols => true,
        n => return Err(format!("{n} scales for {dirs} direction(s) of {cols}")),
    };
    if zero.len() != scale.len() {
        return Err(format!("{} zero points for {} scales", zero.len(), scale.len()));
    }
    let mut out = vec![0.0f32; values.len()];
    for d in 0..dirs {
        for j in 0..cols {
            let at = if per_column { d * cols + j } else { d };
            let (s, z) = (scale[at], zero[at]);
            for k in 0..rows {
                out[(d * cols + j) * rows + k] = ((values[(d * rows + k) * cols + j] - z) * s) as f32;
            }
        }
    }
    Ok(crate::tensor::Tensor { shape: vec![dirs, cols, rows], data: crate::tensor::Data::F32(out) })
}

fn recurrent_with(ctx: &NodeCtx<'_>, cell: Cell, w: &crate::tensor::Tensor, r: &crate::tensor::Tensor) -> Result<Outs> {
    ctx.only_attrs(&[
        "activation_alpha",
        "activation_beta",
        "activations",
        "clip",
        "direction",
        "hidden_size",
        "layout",
        "linear_before_reset",
        "input_forget",
    ])?;
    if ctx.attr("activation_alpha").is_some() || ctx.attr("activation_beta").is_some() {
        return Err(ctx.unsupported("activation_alpha/activation_beta"));
    }
    let gates = match cell {
        Cell::Rnn => 1,
        Cell::Gru => 3,
        Cell::Lstm => 4,
    };
    let x = ctx.input(0)?;
    let layout = ctx.attr_i("layout", 0);
    if x.rank() != 3 || w.rank() != 3 || r.rank() != 3 {
        return Err(ctx.err("X, W and R must have rank 3"));
    }
    let (seq, batch, input) =
        if layout == 0 { (x.shape[0], x.shape[1], x.shape[2]) } else { (x.shape[1], x.shape[0], x.shape[2]) };
    let dirs = w.shape[0];
    let direction = ctx.attr_s("direction").unwrap_or_else(|| "forward".into());
    let expected_dirs = if direction == "bidirectional" { 2 } else { 1 };
    let hidden = ctx.attr_opt_i("hidden_size").map_or(r.shape[2], |h| h as usize);
    if dirs != expected_dirs
        || w.shape[1] != gates * hidden
        || w.shape[2] != input
        || r.shape != [dirs, gates * hidden, hidden]
    {
        return Err(ctx.err(format!(
            "W {:?} / R {:?} do not fit {gates} gates of {hidden} in {dirs} direction(s)",
            w.shape, r.shape
        )));
    }
    let xv = floats(ctx, x)?;
    let wv = floats(ctx, w)?;
    let rv = floats(ctx, r)?;
    let bv = match ctx.opt_input(3)? {
        Some(b) => floats(ctx, b)?,
        None => vec![0.0; dirs * 2 * gates * hidden],
    };
    if bv.len() != dirs * 2 * gates * hidden {
        return Err(ctx.err("B must hold 2·gates·hidden values per direction"));
    }
    let lens: Vec<usize> = match ctx.opt_ints(4)? {
        Some(l) => l.iter().map(|&v| (v.max(0) as usize).min(seq)).collect(),
        None => vec![seq; batch],
    };
    // states are read in (dirs, batch, hidden) order whatever the layout
    let state = |i: usize| -> Result<Vec<f64>> {
        match ctx.opt_input(i)? {
            None => Ok(vec![0.0; dirs * batch * hidden]),
            Some(t) => {
                let v = floats(ctx, t)?;
                if v.len() != dirs * batch * hidden {
                    return Err(ctx.err(format!("initial state {:?} does not fit", t.shape)));
                }
                if layout == 0 {
                    return Ok(v);
                }
                let mut o = vec![0.0; v.len()];
                for b in 0..batch {
                    for d in 0..dirs {
                        for h in 0..hidden {
                            o[(d * batch + b) * hidden + h] = v[(b * dirs + d) * hidden + h];
                        }
                    }
                }
                Ok(o)
            }
        }
    };
    let mut hs = state(5)?;
    let mut cs = if cell == Cell::Lstm { state(6)? } else { Vec::new() };
    let peep = match (cell, ctx.opt_input(7)?) {
        (Cell::Lstm, Some(p)) => floats(ctx, p)?,
        _ => vec![0.0; dirs * 3 * hidden],
    };
    let names: Vec<Vec<u8>> = ctx.attr_strings("activations").unwrap_or_default();
    let per_dir = match cell {
        Cell::Rnn => 1,
        Cell::Gru => 2,
        Cell::Lstm => 3,
    };
    let defaults: &[&[u8]] = match cell {
        Cell::Rnn => &[b"Tanh"],
        Cell::Gru => &[b"Sigmoid", b"Tanh"],
        Cell::Lstm => &[b"Sigmoid", b"Tanh", b"Tanh"],
    };
    let clip = ctx.attr_opt_f("clip").map(f64::from);
    let lbr = ctx.attr_i("linear_before_reset", 0) != 0;
    let input_forget = ctx.attr_i("input_forget", 0) != 0;
    let mut y = vec![0.0; seq * dirs * batch * hidden];
    let gh = gates * hidden;
    for d in 0..dirs {
        let acts: Vec<fn(f64) -> f64> = (0..per_dir)
            .map(|k| match names.get(d * per_dir + k) {
                Some(n) => activation(ctx, n),
                None => activation(ctx, defaults[k]),
            })
            .collect::<Result<_>>()?;
        let reverse = direction == "reverse" || d == 1;
        let wd = &wv[d * gh * input..(d + 1) * gh * input];
        let rd = &rv[d * gh * hidden..(d + 1) * gh * hidden];
        let wb = &bv[d * 2 * gh..d * 2 * gh + gh];
        let rb = &bv[d * 2 * gh + gh..(d + 1) * 2 * gh];
        let pd = &peep[d * 3 * hidden..(d + 1) * 3 * hidden];
        let clipf = |v: f64| clip.map_or(v, |c| v.clamp(-c, c));
        for b in 0..batch {
            let mut h: Vec<f64> = hs[(d * batch + b) * hidden..][..hidden].to_vec();
            let mut c: Vec<f64> =
                if cell == Cell::Lstm { cs[(d * batch + b) * hidden..][..hidden].to_vec() } else { Vec::new() };
            for step in 0..lens[b] {
                let t = if reverse { lens[b] - 1 - step } else { step };
                let xt: &[f64] = if layout == 0 {
                    &xv[(t * batch + b) * input..][..input]
                } else {
                    &xv[(b * seq + t) * input..][..input]
                };
                let mut xw = wb.to_vec();
                matvec(&mut xw, wd, xt, gh, input);
                let mut hr = rb.to_vec();
                matvec(&mut hr, rd, &h, gh, hidden);
                match cell {
                    Cell::Rnn => {
                        for k in 0..hidden {
                            h[k] = acts[0](clipf(xw[k] + hr[k]));
                        }
                    }
                    Cell::Gru => {
                        let (f, g) = (acts[0], acts[1]);
                        let z: Vec<f64> = (0..hidden).map(|k| f(clipf(xw[k] + hr[k]))).collect();
                        let rr: Vec<f64> = (0..hidden).map(|k| f(clipf(xw[hidden + k] + hr[hidden + k]))).collect();
                        let cand: Vec<f64> = if lbr {
                            (0..hidden).map(|k| g(clipf(xw[2 * hidden + k] + rr[k] * hr[2 * hidden + k]))).collect()
                        } else {
                            let rh: Vec<f64> = (0..hidden).map(|k| rr[k] * h[k]).collect();
                            let mut m = rb[2 * hidden..3 * hidden].to_vec();
                            matvec(&mut m, &rd[2 * hidden * hidden..3 * hidden * hidden], &rh, hidden, hidden);
                            (0..hidden).map(|k| g(clipf(xw[2 * hidden + k] + m[k]))).collect()
                        };
                        for k in 0..hidden {
                            h[k] = (1.0 - z[k]) * cand[k] + z[k] * h[k];
                        }
                    }
                    Cell::Lstm => {
                        let (f, g, hf) = (acts[0], acts[1], acts[2]);
                        let pre = |gate: usize, k: usize| xw[gate * hidden + k] + hr[gate * hidden + k];
                        for k in 0..hidden {
                            let i = f(clipf(pre(0, k) + pd[k] * c[k]));
                            let fg =
                                if input_forget { 1.0 - i } else { f(clipf(pre(2, k) + pd[2 * hidden + k] * c[k])) };
                            let cc = g(clipf(pre(3, k)));
                            c[k] = fg * c[k] + i * cc;
                            let o = f(clipf(pre(1, k) + pd[hidden + k] * c[k]));
                            h[k] = o * hf(c[k]);
                        }
                    }
                }
                for k in 0..hidden {
                    y[((t * dirs + d) * batch + b) * hidden + k] = h[k];
                }
            }
            hs[(d * batch + b) * hidden..][..hidden].copy_from_slice(&h);
            if cell == Cell::Lstm {
                cs[(d * batch + b) * hidden..][..hidden].copy_from_slice(&c);
            }
        }
    }
    let elem = x.elem();
    let (y_shape, y_vals) = if layout == 0 {
        (vec![seq, dirs, batch, hidden], y)
    } else {
        let mut o = vec![0.0; y.len()];
        for t in 0..seq {
            for d in 0..dirs {
                for b in 0..batch {
                    for k in 0..hidden {
                        o[((b * seq + t) * dirs + d) * hidden + k] = y[((t * dirs + d) * batch + b) * hidden + k];
                    }
                }
            }
        }
        (vec![batch, seq, dirs, hidden], o)
    };
    let state_out = |v: &[f64]| -> Result<Value> {
        if layout == 0 {
            return Ok(Value::Tensor(from_f64s(ctx, elem, vec![dirs, batch, hidden], v)?));
        }
        let mut o = vec![0.0; v.len()];
        for d in 0..dirs {
            for b in 0..batch {
                for k in 0..hidden {
                    o[(b * dirs + d) * hidden + k] = v[(d * batch + b) * hidden + k];
                }
            }
        }
        Ok(Value::Tensor(from_f64s(ctx, elem, vec![batch, dirs, hidden], &o)?))
    };
    let mut outs = vec![Some(Value::Tensor(from_f64s(ctx, elem, y_shape, &y_vals)?)), Some(state_out(&hs)?)];
    if cell == Cell::Lstm {
        outs.push(Some(state_out(&cs)?));
    }
    Ok(outs)
}
