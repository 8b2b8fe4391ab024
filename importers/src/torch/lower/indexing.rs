//! Operators that read by index or build new tensors like an existing one:
//! advanced indexing (`x[i, j]` with index tensors, `aten::index`), `diff`,
//! bitwise and logical operators, `new_ones`/`new_zeros`/`new_full`.

use super::args::Args;
use super::builder::{attr_int, attr_scalar_tensor};
use super::interp::Interp;
use super::value::{scalar_type, Val, T};
use diamond_ir::{ElemType, ValueId};

type R<'a> = Result<Val<'a>, String>;

impl<'a> Interp<'a> {
    /// `index(self, indices: List[Optional[Tensor]])`: index tensors on the
    /// leading axes, broadcast together, gather as `GatherND`; one index
    /// tensor after `None`s is a `Gather` on its axis.
    pub(super) fn index(&mut self, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        let list = a.get(1, "indices").and_then(Val::items).ok_or("aten::index without an index list")?.to_vec();
        let tensors: Vec<(usize, T)> =
            list.iter().enumerate().filter_map(|(i, v)| v.tensor().map(|t| (i, t))).collect();
        if tensors.iter().any(|(_, t)| t.elem == Some(ElemType::Bool)) {
            return Err("aten::index with a boolean mask (the result's size depends on data)".into());
        }
        match &tensors[..] {
            [(axis, t)] if list[..*axis].iter().all(Val::is_none) => {
                let rank = x.rank.zip(t.rank).map(|(r, q)| r - 1 + q);
                Ok(self.emit("Gather", &[x.id, t.id], vec![attr_int("axis", *axis as i64)], x.elem, rank))
            }
            many if many.iter().enumerate().all(|(k, (i, _))| k == *i) && !many.is_empty() => {
                self.gather_nd(x, many.iter().map(|(_, t)| *t).collect())
            }
            _ => Err("aten::index with index tensors that are not on the leading axes".into()),
        }
    }

    /// `x[i0, i1, ...]` with index tensors on the leading axes.
    fn gather_nd(&mut self, x: T, indices: Vec<T>) -> R<'a> {
        // The broadcast shape of the indices: the shape of their sum.
        let mut sum = indices[0];
        for t in &indices[1..] {
            sum = self.emit_t("Add", &[sum.id, t.id], vec![], Some(ElemType::Int64), sum.rank.max(t.rank));
        }
        let shape = self.emit_t("Shape", &[sum.id], vec![], Some(ElemType::Int64), Some(1));
        let last = self.b.const_vector(&[-1]);
        let mut columns: Vec<ValueId> = Vec::new();
        for t in &indices {
            let t64 = self.int64_of(*t);
            let full = self.emit_t("Expand", &[t64, shape.id], vec![], Some(ElemType::Int64), sum.rank);
            columns.push(self.emit_t("Unsqueeze", &[full.id, last], vec![], Some(ElemType::Int64), None).id);
        }
        let stacked = self.emit_t("Concat", &columns, vec![attr_int("axis", -1)], Some(ElemType::Int64), None);
        let rank = x.rank.zip(sum.rank).map(|(r, q)| q + r - indices.len());
        Ok(self.emit("GatherND", &[x.id, stacked.id], vec![], x.elem, rank))
    }

    /// `diff(self, n=1, dim=-1, prepend=None, append=None)`.
    pub(super) fn diff(&mut self, a: &Args<'a>) -> R<'a> {
        let mut x = a.tensor(0, "self")?;
        if a.int(1, "n", 1)? != 1 {
            return Err("aten::diff with n other than 1".into());
        }
        let dim = a.int(2, "dim", -1)?;
        let parts: Vec<ValueId> = [a.opt_tensor(3, "prepend")?, Some(x), a.opt_tensor(4, "append")?]
            .into_iter()
            .flatten()
            .map(|t| t.id)
            .collect();
        if parts.len() > 1 {
            x = self.emit_t("Concat", &parts, vec![attr_int("axis", dim)], x.elem, x.rank);
        }
        let axes = self.b.const_vector(&[dim]);
        let (zero, one, minus_one, end) = (
            self.b.const_vector(&[0]),
            self.b.const_vector(&[1]),
            self.b.const_vector(&[-1]),
            self.b.const_vector(&[i64::MAX]),
        );
        let tail = self.emit_t("Slice", &[x.id, one, end, axes], vec![], x.elem, x.rank);
        let head = self.emit_t("Slice", &[x.id, zero, minus_one, axes], vec![], x.elem, x.rank);
        let op = if x.elem == Some(ElemType::Bool) { "Xor" } else { "Sub" };
        Ok(self.emit(op, &[tail.id, head.id], vec![], x.elem, x.rank))
    }

    /// `&`, `|`, `^` on tensors: logical for bools, bitwise for integers.
    pub(super) fn logical(&mut self, logical: &str, bitwise: &str, a: &Args<'a>) -> R<'a> {
        let x = a.get(0, "self").ok_or("missing self")?.clone();
        let y = a.get(1, "other").ok_or("missing other")?.clone();
        if let (Some(p), Some(q)) = (x.as_int(), y.as_int()) {
            return Ok(Val::Int(match logical {
                "And" => p & q,
                "Or" => p | q,
                _ => p ^ q,
            }));
        }
        let like =
            x.tensor().or(y.tensor()).ok_or_else(|| format!("{logical} of {} and {}", x.describe(), y.describe()))?;
        let (p, q) = (self.scalar_for(&x, like)?, self.scalar_for(&y, like)?);
        let op = if like.elem == Some(ElemType::Bool) { logical } else { bitwise };
        let rank = x.tensor().and_then(|t| t.rank).max(y.tensor().and_then(|t| t.rank));
        Ok(self.emit(op, &[p, q], vec![], like.elem, rank))
    }

    /// `new_ones(self, size, dtype=None, ...)`, `new_zeros`, `new_full(self, size, fill_value, dtype=None, ...)`.
    pub(super) fn new_filled(&mut self, op: &str, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        let size = a.get(1, "size").cloned().unwrap_or(Val::List(Vec::new()));
        let rank = size.items().map(<[Val]>::len);
        let shape = self.shape_tensor(&size)?;
        let (value, dtype_at) = match op {
            "new_full" => (a.float(2, "fill_value", 0.0)?, 3),
            "new_ones" => (1.0, 2),
            _ => (0.0, 2),
        };
        let elem =
            a.get(dtype_at, "dtype").and_then(Val::as_int).and_then(scalar_type).or(x.elem).unwrap_or(ElemType::Float);
        let attr = attr_scalar_tensor("value", elem, super::aten::scalar_bytes(value, elem));
        Ok(self.emit("ConstantOfShape", &[shape], vec![attr], Some(elem), rank))
    }

    /// Piece `i` of `split(x, size, dim)`: a slice along `dim`.
    pub(super) fn chunk(&mut self, x: T, size: i64, dim: i64, i: i64) -> Result<T, String> {
        if i < 0 {
            return Err("a negative index into a split by size".into());
        }
        let (start, end) = (self.b.const_vector(&[i * size]), self.b.const_vector(&[(i + 1) * size]));
        let axes = self.b.const_vector(&[dim]);
        Ok(self.emit_t("Slice", &[x.id, start, end, axes], vec![], x.elem, x.rank))
    }

    /// `remainder(self, other)` (the divisor's sign, as Python's `%`) and `fmod` (the dividend's).
    pub(super) fn remainder(&mut self, fmod: bool, a: &Args<'a>) -> R<'a> {
        let x = a.get(0, "self").ok_or("missing self")?.clone();
        let y = a.get(1, "other").ok_or("missing other")?.clone();
        if let (Some(p), Some(q)) = (x.as_int(), y.as_int()) {
            let r = if fmod {
                p.checked_rem(q)
            } else {
                p.checked_rem(q).and_then(|r| r.checked_add(q)).and_then(|r| r.checked_rem(q))
            };
            return r.map(Val::Int).ok_or_else(|| "remainder by zero".into());
        }
        let like = x.tensor().or(y.tensor()).or(x.as_operand()).or(y.as_operand());
        let like = like.ok_or_else(|| format!("remainder of {} and {}", x.describe(), y.describe()))?;
        let (p, q) = (self.scalar_for(&x, like)?, self.scalar_for(&y, like)?);
        let float = like.elem.is_some_and(super::value::is_float);
        let rank = like.rank;
        if float && !fmod {
            // a - floor(a / b) * b
            let d = self.emit_t("Div", &[p, q], vec![], like.elem, rank);
            let f = self.emit_t("Floor", &[d.id], vec![], like.elem, rank);
            let m = self.emit_t("Mul", &[f.id, q], vec![], like.elem, rank);
            return Ok(self.emit("Sub", &[p, m.id], vec![], like.elem, rank));
        }
        let out = self.emit_t("Mod", &[p, q], vec![attr_int("fmod", i64::from(float || fmod))], like.elem, rank);
        if matches!((&x, &y), (Val::RuntimeInt(_) | Val::Int(_), Val::RuntimeInt(_) | Val::Int(_))) {
            return Ok(Val::RuntimeInt(out.id));
        }
        Ok(Val::Tensor(out))
    }

    /// `pad(input, pad, mode="constant", value=None)` and `constant_pad_nd(input, pad, value=0)`:
    /// `pad` pairs (before, after) from the last axis backwards.
    pub(super) fn pad(&mut self, op: &str, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "input").or_else(|_| a.tensor(0, "self"))?;
        let pairs = a.get(1, "pad").and_then(Val::items).ok_or("aten::pad without a pad list")?.to_vec();
        if pairs.len() % 2 != 0 {
            return Err(format!("aten::pad with an odd pad list of {} entries", pairs.len()));
        }
        let (mode, value_at) =
            if op == "pad" { (a.str(2, "mode").unwrap_or("constant").to_string(), 3) } else { ("constant".into(), 2) };
        let onnx_mode = match mode.as_str() {
            "constant" => "constant",
            "reflect" => "reflect",
            "replicate" => "edge",
            "circular" => "wrap",
            other => return Err(format!("aten::pad mode '{other}'")),
        };
        let k = pairs.len() / 2;
        let begins: Vec<Val<'a>> = (0..k).map(|i| pairs[2 * i].clone()).collect();
        let ends: Vec<Val<'a>> = (0..k).map(|i| pairs[2 * i + 1].clone()).collect();
        let pads = self.shape_tensor(&Val::List(begins.into_iter().chain(ends).collect()))?;
        let axes: Vec<i64> = (0..k as i64).map(|i| -1 - i).collect();
        let axes = self.b.const_vector(&axes);
        let value = match a.get(value_at, "value").and_then(Val::as_f64) {
            Some(v) if onnx_mode == "constant" => self.scalar_for(&Val::Float(v), x)?,
            _ => self.b.graph.intern(""),
        };
        let mode = super::builder::attr_str("mode", onnx_mode);
        Ok(self.emit("Pad", &[x.id, pads, value, axes], vec![mode], x.elem, x.rank))
    }
}
