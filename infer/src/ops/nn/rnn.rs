//! Recurrent layers: `RNN`, `GRU`, `LSTM` — `Y`, `Y_h` (and `Y_c`) from the
//! sequence, batch, direction count and hidden size, in either `layout` —
//! and onnxruntime's `com.microsoft` `DynamicQuantizeLSTM` (an LSTM over
//! int8 weights stored `[dirs, input, 4·hidden]`; its `hidden_size` is
//! required).

use super::{dtype_from, settle};
use crate::ops::{OpTable, MICROSOFT, ONNX};
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::DimTerm;

pub(super) fn register(t: &mut OpTable) {
    t.add_all(ONNX, &["RNN", "GRU", "LSTM"], 1, recurrent);
    t.add(MICROSOFT, "DynamicQuantizeLSTM", 1, quantized_lstm);
}

/// `DynamicQuantizeLSTM`: the LSTM's outputs (layout 0) from X and `hidden_size`.
fn quantized_lstm(ctx: &mut OpCtx) -> Result<(), Defer> {
    // the types hold whatever X's rank turns out to be
    for j in 0..ctx.output_count() {
        dtype_from(ctx, j, 0);
    }
    let x = ctx.need_dims(0)?;
    let stated = (|| {
        if x.len() != 3 {
            ctx.rank_conflict(0, format!("X has rank {}; it must be [seq_length, batch_size, input_size]", x.len()));
            return None;
        }
        let dirs = directions(ctx)?;
        let hidden = match ctx.attr_int("hidden_size") {
            Some(h) if h >= 1 => ctx.known(h as u64),
            _ => return None,
        };
        let dirs = ctx.known(dirs);
        ctx.set_dims(0, vec![x[0].clone(), dirs.clone(), x[1].clone(), hidden.clone()]);
        let state = vec![dirs, x[1].clone(), hidden];
        ctx.set_dims(1, state.clone());
        ctx.set_dims(2, state);
        Some(())
    })()
    .is_some();
    settle(ctx, stated)
}

/// A recurrent layer: every output has X's type.
fn recurrent(ctx: &mut OpCtx) -> Result<(), Defer> {
    // the types hold whatever X's rank turns out to be
    for j in 0..ctx.output_count() {
        dtype_from(ctx, j, 0);
    }
    let x = ctx.need_dims(0)?;
    let stated = recurrent_shape(ctx, &x).is_some();
    settle(ctx, stated)
}

/// The number of directions `direction` names; `None`, reported, for another word.
fn directions(ctx: &mut OpCtx) -> Option<u64> {
    match ctx.attr_str("direction").as_deref() {
        None | Some("forward") | Some("reverse") => Some(1),
        Some("bidirectional") => Some(2),
        Some(other) => {
            ctx.invalid(format!("attribute direction is '{other}'; expected forward, reverse or bidirectional"));
            None
        }
    }
}

/// The number of gates of the layer's weight blocks.
fn gate_count(op: &str) -> i64 {
    match op {
        "LSTM" => 4,
        "GRU" => 3,
        _ => 1,
    }
}

/// States the shapes of `Y`, `Y_h` and `Y_c`.
fn recurrent_shape(ctx: &mut OpCtx, x: &[DimTerm]) -> Option<()> {
    if x.len() != 3 {
        ctx.rank_conflict(0, format!("X has rank {}; it must be [seq_length, batch_size, input_size]", x.len()));
        return None;
    }
    let layout = if ctx.version() >= 14 { ctx.attr_int("layout").unwrap_or(0) } else { 0 };
    if layout != 0 && layout != 1 {
        ctx.invalid(format!("attribute layout is {layout}; it must be 0 or 1"));
        return None;
    }
    let dirs = directions(ctx)?;
    let (seq, batch) = if layout == 0 { (x[0].clone(), x[1].clone()) } else { (x[1].clone(), x[0].clone()) };
    let dirs = ctx.known(dirs);
    let hidden = hidden_size(ctx, &x[2], &dirs)?;
    let y = if layout == 0 {
        vec![seq, dirs.clone(), batch.clone(), hidden.clone()]
    } else {
        vec![batch.clone(), seq, dirs.clone(), hidden.clone()]
    };
    let state = if layout == 0 { vec![dirs, batch, hidden] } else { vec![batch, dirs, hidden] };
    ctx.set_dims(0, y);
    ctx.set_dims(1, state.clone());
    if ctx.op() == "LSTM" {
        ctx.set_dims(2, state);
    }
    Some(())
}

/// The hidden size (`hidden_size`, else R's last axis), checking W and R:
/// `W = [dirs, gates·hidden, input]`, `R = [dirs, gates·hidden, hidden]`.
fn hidden_size(ctx: &mut OpCtx, input: &DimTerm, dirs: &DimTerm) -> Option<DimTerm> {
    let gates = gate_count(ctx.op());
    let attr = ctx.attr_int("hidden_size");
    if let Some(h) = attr {
        if h < 1 {
            ctx.invalid(format!("attribute hidden_size is {h}; it must be at least 1"));
            return None;
        }
    }
    let w = ctx.dims(1).filter(|d| d.len() == 3);
    let r = ctx.dims(2).filter(|d| d.len() == 3);
    let hidden = match (attr, &r) {
        (Some(h), _) => ctx.known(h as u64),
        (None, Some(r)) => r[2].clone(),
        (None, None) => ctx.unknown_dim(),
    };
    let rows = attr.and_then(|h| h.checked_mul(gates)).map(|n| ctx.known(n as u64));
    if let Some(w) = w {
        ctx.eq_dims_at(w[0].clone(), dirs.clone(), "input 1", 0, "W has one block per direction");
        ctx.eq_dims_at(w[2].clone(), input.clone(), "input 1", 2, "W's axis 2 is the input size (X's axis 2)");
        if let Some(rows) = &rows {
            ctx.eq_dims_at(w[1].clone(), rows.clone(), "input 1", 1, "W's axis 1 is gates × hidden_size");
        }
    }
    if let Some(r) = r {
        ctx.eq_dims_at(r[0].clone(), dirs.clone(), "input 2", 0, "R has one block per direction");
        ctx.eq_dims_at(r[2].clone(), hidden.clone(), "input 2", 2, "R's axis 2 is the hidden size");
        if let Some(rows) = &rows {
            ctx.eq_dims_at(r[1].clone(), rows.clone(), "input 2", 1, "R's axis 1 is gates × hidden_size");
        }
    }
    Some(hidden)
}
