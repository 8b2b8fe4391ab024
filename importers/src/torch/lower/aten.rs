//! TorchScript operators lowered to standard ONNX (opset 21) nodes.
//!
//! Each `torch.<op>` (and `ops.prim.<op>`, `ops.aten.<op>`) the printed code
//! calls maps to one or a few ONNX nodes here; arguments the code omits take
//! the operator's default from its TorchScript signature. The ranks of the
//! tensors are tracked where they follow from the inputs' (a `transpose`
//! needs one to build its permutation). An operator without a lowering is
//! recorded (name, count, first location) and its result is unknown; the
//! importer reports them all at once.

use super::args::Args;
use super::builder::{attr_float, attr_int, attr_ints, attr_scalar_tensor, attr_str};
use super::interp::{Interp, Located};
use super::value::{is_float, scalar_type, Val, T};
use diamond_ir::{ElemType, ValueId};

type R<'a> = Result<Val<'a>, String>;

impl<'a> Interp<'a> {
    /// Calls the operator `name` (`torch.conv2d`, `ops.prim.NumToTensor`, `len`, ...).
    pub fn operator(
        &mut self,
        name: &str,
        positional: Vec<Val<'a>>,
        keywords: Vec<(&'a str, Val<'a>)>,
        line: u32,
    ) -> Result<Val<'a>, Located> {
        let op = name.rsplit('.').next().unwrap_or(name).to_string();
        let a = Args::new(&format!("aten::{op}"), positional, keywords);
        match self.lower_op(&op, &a) {
            Ok(Some(v)) => Ok(v),
            Ok(None) => {
                // Lowering goes on with an opaque result so that every
                // unsupported operator is found and listed at once.
                self.unsupported(&format!("aten::{op}"), line);
                let like = (0..a.len()).find_map(|i| a.get(i, "_").and_then(Val::tensor));
                let id = self.b.fresh(&format!("unsupported_{op}"));
                Ok(Val::Tensor(T { id, elem: like.and_then(|t| t.elem), rank: like.and_then(|t| t.rank) }))
            }
            Err(message) => Err(self.error(line, message)),
        }
    }

    fn lower_op(&mut self, op: &str, a: &Args<'a>) -> Result<Option<Val<'a>>, String> {
        let v = match op {
            // Shapes and scalars.
            "size" => self.size(a)?,
            "NumToTensor" | "Int" | "Float" | "ScalarImplicit" => self.num_to_tensor(a)?,
            "floor_divide" => self.arith("Div", a, true)?,
            "device" => Val::Device,
            "__is__" => {
                Val::Bool(a.raw(0, "self").is_none_or(Val::is_none) && a.raw(1, "obj").is_none_or(Val::is_none))
            }
            "__isnot__" => {
                Val::Bool(!(a.raw(0, "self").is_none_or(Val::is_none) && a.raw(1, "obj").is_none_or(Val::is_none)))
            }
            "__getitem__" => return self.getitem(a).map(Some),
            "len" => Val::Int(a.raw(0, "a").and_then(Val::items).map_or(0, <[Val]>::len) as i64),
            "dim" => Val::Int(a.tensor(0, "self")?.rank.ok_or("aten::dim: rank unknown")? as i64),
            // Arithmetic.
            "add" | "add_" => self.add_sub(a, "Add")?,
            "sub" | "sub_" => self.add_sub(a, "Sub")?,
            "rsub" => self.rsub(a)?,
            "mul" | "mul_" => self.arith("Mul", a, false)?,
            "div" | "div_" => self.div(a)?,
            "pow" => self.arith("Pow", a, false)?,
            "matmul" => self.binary_tensor("MatMul", a)?,
            "neg" => self.unary_op("Neg", a)?,
            "sqrt" => self.unary_op("Sqrt", a)?,
            "rsqrt" => {
                let x = a.tensor(0, "self")?;
                let s = self.emit_t("Sqrt", &[x.id], vec![], x.elem, x.rank);
                let one = self.scalar_for(&Val::Float(1.0), s)?;
                self.emit("Div", &[one, s.id], vec![], s.elem, s.rank)
            }
            "exp" => self.unary_op("Exp", a)?,
            "log" => self.unary_op("Log", a)?,
            "abs" => self.unary_op("Abs", a)?,
            "erf" => self.unary_op("Erf", a)?,
            "sin" => self.unary_op("Sin", a)?,
            "cos" => self.unary_op("Cos", a)?,
            "floor" => self.unary_op("Floor", a)?,
            "ceil" => self.unary_op("Ceil", a)?,
            "clamp" | "clamp_" | "clip" => self.clamp(a)?,
            // Activations.
            "relu" | "relu_" => self.unary_op("Relu", a)?,
            "sigmoid" | "sigmoid_" => self.unary_op("Sigmoid", a)?,
            "tanh" | "tanh_" => self.unary_op("Tanh", a)?,
            "silu" | "silu_" => {
                let x = a.tensor(0, "self")?;
                let s = self.emit_t("Sigmoid", &[x.id], vec![], x.elem, x.rank);
                self.emit("Mul", &[x.id, s.id], vec![], x.elem, x.rank)
            }
            "gelu" | "gelu_" => {
                let x = a.tensor(0, "self")?;
                let approximate = a.str(1, "approximate").unwrap_or("none").to_string();
                self.emit("Gelu", &[x.id], vec![attr_str("approximate", &approximate)], x.elem, x.rank)
            }
            "hardtanh" | "hardtanh_" => {
                let x = a.tensor(0, "self")?;
                let (lo, hi) = (a.float(1, "min_val", -1.0)?, a.float(2, "max_val", 1.0)?);
                self.clip(x, Some(lo), Some(hi))?
            }
            "relu6" | "relu6_" => {
                let x = a.tensor(0, "self")?;
                self.clip(x, Some(0.0), Some(6.0))?
            }
            "leaky_relu" | "leaky_relu_" => {
                let x = a.tensor(0, "self")?;
                let slope = a.float(1, "negative_slope", 0.01)?;
                self.emit("LeakyRelu", &[x.id], vec![attr_float("alpha", slope)], x.elem, x.rank)
            }
            "elu" | "elu_" => {
                let x = a.tensor(0, "self")?;
                self.emit("Elu", &[x.id], vec![attr_float("alpha", a.float(1, "alpha", 1.0)?)], x.elem, x.rank)
            }
            "hardswish" | "hardswish_" => self.unary_op("HardSwish", a)?,
            "hardsigmoid" | "hardsigmoid_" => {
                let x = a.tensor(0, "self")?;
                let attrs = vec![attr_float("alpha", 1.0 / 6.0), attr_float("beta", 0.5)];
                self.emit("HardSigmoid", &[x.id], attrs, x.elem, x.rank)
            }
            "softplus" => self.unary_op("Softplus", a)?,
            "softmax" | "log_softmax" => {
                let x = a.tensor(0, "self")?;
                let axis = a.int(1, "dim", -1)?;
                let onnx = if op == "softmax" { "Softmax" } else { "LogSoftmax" };
                self.emit(onnx, &[x.id], vec![attr_int("axis", axis)], x.elem, x.rank)
            }
            "dropout" | "dropout_" | "feature_dropout" | "alpha_dropout" | "contiguous" | "clone" | "detach"
            | "detach_" | "lift_fresh" => {
                let x = a.tensor(0, "self").or_else(|_| a.tensor(0, "input"))?;
                self.emit("Identity", &[x.id], vec![], x.elem, x.rank)
            }
            // Layers.
            "_convolution" | "conv1d" | "conv2d" | "conv3d" | "conv_transpose1d" | "conv_transpose2d"
            | "conv_transpose3d" => self.convolution(op, a)?,
            "linear" => self.linear(a)?,
            "addmm" => {
                let (c, m1, m2) = (a.tensor(0, "self")?, a.tensor(1, "mat1")?, a.tensor(2, "mat2")?);
                let attrs =
                    vec![attr_float("beta", a.float(3, "beta", 1.0)?), attr_float("alpha", a.float(4, "alpha", 1.0)?)];
                self.emit("Gemm", &[m1.id, m2.id, c.id], attrs, m1.elem, Some(2))
            }
            "batch_norm" => self.batch_norm(a)?,
            "layer_norm" => self.layer_norm(a)?,
            "group_norm" => self.group_norm(a)?,
            "embedding" => {
                let (w, ids) = (a.tensor(0, "weight")?, a.tensor(1, "indices")?);
                let rank = ids.rank.map(|r| r + 1);
                self.emit("Gather", &[w.id, ids.id], vec![attr_int("axis", 0)], w.elem, rank)
            }
            "max_pool1d" | "max_pool2d" | "max_pool3d" => self.pool("MaxPool", op, a)?,
            "avg_pool1d" | "avg_pool2d" | "avg_pool3d" => self.pool("AveragePool", op, a)?,
            "adaptive_avg_pool1d" | "adaptive_avg_pool2d" | "adaptive_avg_pool3d" => self.adaptive_avg_pool(a)?,
            "scaled_dot_product_attention" => self.attention(a)?,
            "_native_multi_head_attention" => self.native_mha(a)?,
            "_transformer_encoder_layer_fwd" => self.encoder_layer(a)?,
            // Shape manipulation.
            "view" | "reshape" => {
                let x = a.tensor(0, "self")?;
                let shape_val =
                    a.get(1, "shape").or_else(|| a.get(1, "size")).ok_or("aten::view: shape missing")?.clone();
                let rank = shape_val.items().map(<[Val]>::len);
                let shape = self.shape_tensor(&shape_val)?;
                self.emit("Reshape", &[x.id, shape], vec![], x.elem, rank)
            }
            "flatten" => self.flatten(a)?,
            "permute" => {
                let x = a.tensor(0, "self")?;
                let perm = a.ints(1, "dims", 0, &[])?;
                let rank = perm.len();
                let perm = normalize_all(&perm, rank);
                self.emit("Transpose", &[x.id], vec![attr_ints("perm", &perm)], x.elem, Some(rank))
            }
            "transpose" | "t" => self.transpose(op, a)?,
            "unsqueeze" | "unsqueeze_" => {
                let x = a.tensor(0, "self")?;
                let dim = a.int(1, "dim", 0)?;
                let axes = self.b.const_vector(&[dim]);
                self.emit("Unsqueeze", &[x.id, axes], vec![], x.elem, x.rank.map(|r| r + 1))
            }
            "squeeze" | "squeeze_" => {
                let x = a.tensor(0, "self")?;
                match a.get(1, "dim") {
                    Some(d) => {
                        let dims = d.as_ints().ok_or("aten::squeeze: dim must be known")?;
                        let axes = self.b.const_vector(&dims);
                        self.emit(
                            "Squeeze",
                            &[x.id, axes],
                            vec![],
                            x.elem,
                            x.rank.map(|r| r.saturating_sub(dims.len())),
                        )
                    }
                    None => self.emit("Squeeze", &[x.id], vec![], x.elem, None),
                }
            }
            "expand" | "expand_as" | "broadcast_to" => {
                let x = a.tensor(0, "self")?;
                let shape = match a.get(1, "size").or_else(|| a.get(1, "other")) {
                    Some(Val::Tensor(other)) => {
                        let other = *other;
                        self.emit_t("Shape", &[other.id], vec![], Some(ElemType::Int64), Some(1)).id
                    }
                    Some(v) => {
                        // -1 keeps the input's size: ONNX Expand broadcasts a 1 to it.
                        let v = replace_minus_one(v.clone());
                        self.shape_tensor(&v)?
                    }
                    None => return Err("aten::expand: size missing".into()),
                };
                let rank = a.get(1, "size").and_then(Val::items).map(<[Val]>::len).or(x.rank);
                self.emit("Expand", &[x.id, shape], vec![], x.elem, rank)
            }
            "slice" => self.slice(a)?,
            "select" => {
                let x = a.tensor(0, "self")?;
                let dim = a.int(1, "dim", 0)?;
                let index = self.int_value(a.get(2, "index").ok_or("aten::select: index missing")?)?;
                self.emit("Gather", &[x.id, index], vec![attr_int("axis", dim)], x.elem, x.rank.map(|r| r - 1))
            }
            "remainder" | "fmod" => self.remainder(op == "fmod", a)?,
            "pad" | "constant_pad_nd" => self.pad(op, a)?,
            "cumsum" => {
                // torch sums bools and integers as int64.
                let mut x = a.tensor(0, "self")?;
                if x.elem.is_some_and(|e| !is_float(e) && e != ElemType::Int64) {
                    let to = attr_int("to", ElemType::Int64.code() as i64);
                    x = self.emit_t("Cast", &[x.id], vec![to], Some(ElemType::Int64), x.rank);
                }
                let axis = self.b.const_int(a.int(1, "dim", 0)?);
                self.emit("CumSum", &[x.id, axis], vec![], x.elem, x.rank)
            }
            "diff" => self.diff(a)?,
            "__and__" | "bitwise_and" | "logical_and" => self.logical("And", "BitwiseAnd", a)?,
            "__or__" | "bitwise_or" | "logical_or" => self.logical("Or", "BitwiseOr", a)?,
            "__xor__" | "bitwise_xor" | "logical_xor" => self.logical("Xor", "BitwiseXor", a)?,
            "bitwise_not" | "logical_not" => {
                let x = a.tensor(0, "self")?;
                let op = if x.elem == Some(ElemType::Bool) || op == "logical_not" { "Not" } else { "BitwiseNot" };
                self.emit(op, &[x.id], vec![], x.elem, x.rank)
            }
            "new_ones" | "new_zeros" | "new_full" => self.new_filled(op, a)?,
            "index" => self.index(a)?,
            "gather" => {
                let (x, index) = (a.tensor(0, "self")?, a.tensor(2, "index")?);
                self.emit(
                    "GatherElements",
                    &[x.id, index.id],
                    vec![attr_int("axis", a.int(1, "dim", 0)?)],
                    x.elem,
                    index.rank,
                )
            }
            "index_select" => {
                let (x, index) = (a.tensor(0, "self")?, a.tensor(2, "index")?);
                self.emit("Gather", &[x.id, index.id], vec![attr_int("axis", a.int(1, "dim", 0)?)], x.elem, x.rank)
            }
            "cat" | "concat" | "stack" => self.cat(op == "stack", a)?,
            "chunk" | "split" | "unbind" => return self.split(op, a).map(Some),
            "to" | "type_as" => self.to(op, a)?,
            "arange" => self.arange(a)?,
            "zeros" | "ones" | "full" => self.fill(op, a)?,
            "zeros_like" | "ones_like" => {
                let x = a.tensor(0, "self")?;
                let shape = self.emit_t("Shape", &[x.id], vec![], Some(ElemType::Int64), Some(1));
                let elem = x.elem.unwrap_or(ElemType::Float);
                let value = if op == "ones_like" { 1.0 } else { 0.0 };
                let attr = attr_scalar_tensor("value", elem, scalar_bytes(value, elem));
                self.emit("ConstantOfShape", &[shape.id], vec![attr], Some(elem), x.rank)
            }
            "where" => {
                let (c, x, y) = (a.tensor(0, "condition")?, a.get(1, "self"), a.get(2, "other"));
                let (x, y) = (x.ok_or("aten::where: self")?.clone(), y.ok_or("aten::where: other")?.clone());
                let like = x.tensor().or(y.tensor()).ok_or("aten::where: no tensor operand")?;
                let (xi, yi) = (self.operand(&x, like)?, self.operand(&y, like)?);
                self.emit("Where", &[c.id, xi, yi], vec![], like.elem, like.rank.max(c.rank))
            }
            "masked_fill" | "masked_fill_" => {
                let (x, mask) = (a.tensor(0, "self")?, a.tensor(1, "mask")?);
                let value = self.operand(a.get(2, "value").ok_or("aten::masked_fill: value")?, x)?;
                self.emit("Where", &[mask.id, value, x.id], vec![], x.elem, x.rank)
            }
            "mean" | "sum" => self.reduce(if op == "mean" { "ReduceMean" } else { "ReduceSum" }, a)?,
            "eq" | "ne" | "lt" | "gt" | "le" | "ge" => self.comparison(op, a)?,
            _ => return Ok(None),
        };
        Ok(Some(v))
    }

    /// Emits `op`; its output as a tensor value.
    pub(super) fn emit(
        &mut self,
        op: &str,
        inputs: &[ValueId],
        attrs: Vec<diamond_ir::Attribute>,
        elem: Option<ElemType>,
        rank: Option<usize>,
    ) -> Val<'a> {
        Val::Tensor(self.emit_t(op, inputs, attrs, elem, rank))
    }

    /// Emits `op`; its output tensor.
    pub(super) fn emit_t(
        &mut self,
        op: &str,
        inputs: &[ValueId],
        attrs: Vec<diamond_ir::Attribute>,
        elem: Option<ElemType>,
        rank: Option<usize>,
    ) -> T {
        let origin = self.origin.clone();
        let id = self.b.op(op, inputs, attrs, &origin);
        T { id, elem, rank }
    }

    fn unary_op(&mut self, onnx: &str, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        Ok(self.emit(onnx, &[x.id], vec![], x.elem, x.rank))
    }

    fn binary_tensor(&mut self, onnx: &str, a: &Args<'a>) -> R<'a> {
        let (x, y) = (a.tensor(0, "self")?, a.tensor(1, "other")?);
        let rank = match (x.rank, y.rank) {
            (Some(p), Some(q)) if p >= 2 && q >= 2 => Some(p.max(q)),
            (Some(p), Some(1)) if p >= 2 => Some(p - 1),
            (Some(1), Some(q)) if q >= 2 => Some(q - 1),
            _ => None,
        };
        Ok(self.emit(onnx, &[x.id, y.id], vec![], x.elem, rank))
    }

    /// A scalar operand shaped for a binary op with `like`: a constant of its element type, or a runtime int.
    pub(super) fn scalar_for(&mut self, v: &Val<'a>, like: T) -> Result<ValueId, String> {
        let elem = like.elem.unwrap_or(ElemType::Float);
        match v {
            Val::Tensor(t) => Ok(t.id),
            Val::RuntimeInt(id) if elem == ElemType::Int64 => Ok(*id),
            Val::RuntimeInt(id) => {
                let origin = self.origin.clone();
                Ok(self.b.op("Cast", &[*id], vec![attr_int("to", elem.code() as i64)], &origin))
            }
            v => {
                let x = v.as_f64().ok_or_else(|| format!("a scalar operand that is {}", v.describe()))?;
                Ok(match elem {
                    ElemType::Int64 => self.b.const_int(x as i64),
                    e if is_float(e) => self.b.const_float(x, e),
                    e => {
                        let c = self.b.const_int(x as i64);
                        let origin = self.origin.clone();
                        self.b.op("Cast", &[c], vec![attr_int("to", e.code() as i64)], &origin)
                    }
                })
            }
        }
    }

    /// An operand of a binary op whose other side is `like`.
    fn operand(&mut self, v: &Val<'a>, like: T) -> Result<ValueId, String> {
        self.scalar_for(v, like)
    }

    /// `x op y` where either may be a tensor, a runtime int or a number.
    fn arith(&mut self, onnx: &str, a: &Args<'a>, floor: bool) -> R<'a> {
        let x = a.get(0, "self").ok_or("missing self")?.clone();
        let y = a.get(1, "other").ok_or("missing other")?.clone();
        self.arith_vals(onnx, &x, &y, floor)
    }

    pub(super) fn arith_vals(&mut self, onnx: &str, x: &Val<'a>, y: &Val<'a>, floor: bool) -> R<'a> {
        if let (Some(p), Some(q)) = (x.as_int(), y.as_int()) {
            return Ok(Val::Int(fold_int(onnx, p, q, floor).ok_or("division by zero")?));
        }
        if let (Some(p), Some(q)) = (x.as_f64(), y.as_f64()) {
            return Ok(Val::Float(fold_float(onnx, p, q, floor)));
        }
        let runtime_int = |v: &Val| matches!(v, Val::RuntimeInt(_) | Val::Int(_));
        if runtime_int(x) && runtime_int(y) {
            let (p, q) = (self.int_value(x)?, self.int_value(y)?);
            let origin = self.origin.clone();
            return Ok(Val::RuntimeInt(self.b.op(onnx, &[p, q], vec![], &origin)));
        }
        let (tx, ty) = (x.as_operand(), y.as_operand());
        let mut like = tx.or(ty).ok_or_else(|| format!("{onnx} of {} and {}", x.describe(), y.describe()))?;
        // An integer tensor with a float number computes in float, as torch promotes.
        let float_number = matches!(x, Val::Float(_)) || matches!(y, Val::Float(_));
        let (mut x, mut y) = (x.clone(), y.clone());
        if float_number && !like.elem.is_some_and(is_float) {
            let to = attr_int("to", ElemType::Float.code() as i64);
            for v in [&mut x, &mut y] {
                if let Some(t) = v.as_operand() {
                    let cast = self.emit("Cast", &[t.id], vec![to.clone()], Some(ElemType::Float), t.rank);
                    *v = cast;
                }
            }
            like = T { elem: Some(ElemType::Float), ..like };
        }
        let (p, q) = (self.operand(&x, like)?, self.operand(&y, like)?);
        let rank = match (tx, ty) {
            (Some(a), Some(b)) => a.rank.zip(b.rank).map(|(r, s)| r.max(s)),
            (Some(t), None) | (None, Some(t)) => t.rank,
            (None, None) => None,
        };
        let out = self.emit_t(onnx, &[p, q], vec![], like.elem, rank);
        if floor && like.elem.is_some_and(is_float) {
            return Ok(self.emit("Floor", &[out.id], vec![], out.elem, out.rank));
        }
        Ok(Val::Tensor(out))
    }

    /// `add(self, other, alpha=1)` / `sub`.
    fn add_sub(&mut self, a: &Args<'a>, onnx: &str) -> R<'a> {
        let x = a.get(0, "self").ok_or("missing self")?.clone();
        let mut y = a.get(1, "other").ok_or("missing other")?.clone();
        let alpha = a.float(2, "alpha", 1.0)?;
        if alpha != 1.0 {
            y = self.arith_vals("Mul", &y, &Val::Float(alpha), false)?;
        }
        self.arith_vals(onnx, &x, &y, false)
    }

    /// `rsub(self, other, alpha=1)` = other - alpha * self.
    fn rsub(&mut self, a: &Args<'a>) -> R<'a> {
        let x = a.get(0, "self").ok_or("missing self")?.clone();
        let y = a.get(1, "other").ok_or("missing other")?.clone();
        let alpha = a.float(2, "alpha", 1.0)?;
        let scaled = if alpha != 1.0 { self.arith_vals("Mul", &x, &Val::Float(alpha), false)? } else { x };
        self.arith_vals("Sub", &y, &scaled, false)
    }

    /// `div(self, other, rounding_mode=None)`.
    fn div(&mut self, a: &Args<'a>) -> R<'a> {
        let x = a.get(0, "self").ok_or("missing self")?.clone();
        let y = a.get(1, "other").ok_or("missing other")?.clone();
        match a.str(2, "rounding_mode") {
            Some("floor") => self.arith_vals("Div", &x, &y, true),
            Some("trunc") | None => self.arith_vals("Div", &x, &y, false),
            Some(other) => Err(format!("aten::div: rounding_mode '{other}'")),
        }
    }

    fn clamp(&mut self, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        let lo = a.get(1, "min").and_then(Val::as_f64);
        let hi = a.get(2, "max").and_then(Val::as_f64);
        self.clip(x, lo, hi)
    }

    fn clip(&mut self, x: T, lo: Option<f64>, hi: Option<f64>) -> R<'a> {
        // An omitted optional input is the empty name.
        let empty = self.b.graph.intern("");
        let lo = match lo {
            Some(v) => self.scalar_for(&Val::Float(v), x)?,
            None => empty,
        };
        let hi = match hi {
            Some(v) => self.scalar_for(&Val::Float(v), x)?,
            None => empty,
        };
        Ok(self.emit("Clip", &[x.id, lo, hi], vec![], x.elem, x.rank))
    }

    /// `torch.size(x, dim)`: a runtime int read from the shape.
    fn size(&mut self, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        let shape = self.emit_t("Shape", &[x.id], vec![], Some(ElemType::Int64), Some(1));
        match a.get(1, "dim") {
            None => Ok(Val::Tensor(shape)),
            Some(d) => {
                let dim = d.as_int().ok_or("aten::size: dim must be known at import")?;
                let index = self.b.const_int(dim);
                let g = self.emit_t(
                    "Gather",
                    &[shape.id, index],
                    vec![attr_int("axis", 0)],
                    Some(ElemType::Int64),
                    Some(0),
                );
                Ok(Val::RuntimeInt(g.id))
            }
        }
    }

    /// `prim::NumToTensor`, `aten::Int`: scalars and 0-d tensors are interchangeable here.
    fn num_to_tensor(&mut self, a: &Args<'a>) -> R<'a> {
        match a.raw(0, "a").cloned().unwrap_or(Val::None) {
            Val::RuntimeInt(id) => Ok(Val::RuntimeInt(id)),
            Val::Tensor(t) if t.elem == Some(ElemType::Int64) || t.elem.is_none() => Ok(Val::RuntimeInt(t.id)),
            Val::Tensor(t) => Ok(Val::Tensor(t)),
            v @ (Val::Int(_) | Val::Float(_) | Val::Bool(_)) => Ok(v),
            other => Err(format!("NumToTensor of {}", other.describe())),
        }
    }

    /// A 0-d int64 value for an int known now or at run time.
    pub(super) fn int_value(&mut self, v: &Val<'a>) -> Result<ValueId, String> {
        match v {
            Val::Int(n) => Ok(self.b.const_int(*n)),
            Val::Bool(b) => Ok(self.b.const_int(i64::from(*b))),
            Val::RuntimeInt(id) => Ok(*id),
            Val::Tensor(t) => Ok(self.int64_of(*t)),
            other => Err(format!("an int was expected, found {}", other.describe())),
        }
    }

    /// A 1-D int64 tensor from a list of ints known now or at run time.
    pub(super) fn shape_tensor(&mut self, v: &Val<'a>) -> Result<ValueId, String> {
        if let Some(ints) = v.as_ints() {
            return Ok(self.b.const_vector(&ints));
        }
        if let Val::Tensor(t) = v {
            return Ok(t.id);
        }
        let items = v.items().ok_or_else(|| format!("a shape was expected, found {}", v.describe()))?.to_vec();
        let axes = self.b.const_vector(&[0]);
        let mut parts = Vec::with_capacity(items.len());
        for item in &items {
            let scalar = self.int_value(item)?;
            let origin = self.origin.clone();
            parts.push(self.b.op("Unsqueeze", &[scalar, axes], vec![], &origin));
        }
        let origin = self.origin.clone();
        Ok(self.b.op("Concat", &parts, vec![attr_int("axis", 0)], &origin))
    }

    fn getitem(&mut self, a: &Args<'a>) -> R<'a> {
        let base = a.raw(0, "self").cloned().unwrap_or(Val::None);
        let index = a.raw(1, "idx").and_then(Val::as_int).ok_or("__getitem__ with an index not known at import")?;
        if let Val::Chunks(x, size, dim) = base {
            return self.chunk(x, size, dim, index).map(Val::Tensor);
        }
        let items = base.items().ok_or_else(|| format!("__getitem__ on {}", base.describe()))?;
        let n = items.len() as i64;
        let at = if index < 0 { index + n } else { index };
        items
            .get(usize::try_from(at).unwrap_or(usize::MAX))
            .cloned()
            .ok_or_else(|| format!("index {index} of {n} items"))
    }

    fn convolution(&mut self, op: &str, a: &Args<'a>) -> R<'a> {
        let (x, w) = (a.tensor(0, "input")?, a.tensor(1, "weight")?);
        let bias = a.opt_tensor(2, "bias")?;
        // The spatial rank: the weight's, else the length of the stride list.
        let stride_len = a.get(3, "stride").and_then(Val::items).map(<[Val]>::len);
        let spatial = match (w.rank, x.rank, stride_len) {
            (Some(r), _, _) | (None, Some(r), _) => r.saturating_sub(2),
            (None, None, Some(n)) => n,
            _ => return Err("convolution: the rank of the input and weight is unknown".into()),
        };
        let transposed = match op {
            "_convolution" => a.bool(6, "transposed", false)?,
            _ => op.starts_with("conv_transpose"),
        };
        let (stride, padding, dilation, groups, output_padding) = match op {
            "_convolution" => (
                a.ints(3, "stride", spatial, &vec![1; spatial])?,
                a.ints(4, "padding", spatial, &vec![0; spatial])?,
                a.ints(5, "dilation", spatial, &vec![1; spatial])?,
                a.int(8, "groups", 1)?,
                a.ints(7, "output_padding", spatial, &vec![0; spatial])?,
            ),
            _ if transposed => (
                a.ints(3, "stride", spatial, &vec![1; spatial])?,
                a.ints(4, "padding", spatial, &vec![0; spatial])?,
                a.ints(7, "dilation", spatial, &vec![1; spatial])?,
                a.int(6, "groups", 1)?,
                a.ints(5, "output_padding", spatial, &vec![0; spatial])?,
            ),
            _ => {
                let mut attrs_pad = a.ints(4, "padding", spatial, &vec![0; spatial]);
                if let Some(mode) = a.str(4, "padding") {
                    attrs_pad = match mode {
                        "valid" => Ok(vec![0; spatial]),
                        _ => Err(format!("{op}: padding='{mode}' (only explicit and 'valid' padding)")),
                    };
                }
                (
                    a.ints(3, "stride", spatial, &vec![1; spatial])?,
                    attrs_pad?,
                    a.ints(5, "dilation", spatial, &vec![1; spatial])?,
                    a.int(6, "groups", 1)?,
                    vec![0; spatial],
                )
            }
        };
        let pads: Vec<i64> = padding.iter().chain(padding.iter()).copied().collect();
        let mut attrs = vec![
            attr_ints("strides", &stride),
            attr_ints("pads", &pads),
            attr_ints("dilations", &dilation),
            attr_int("group", groups),
        ];
        let mut inputs = vec![x.id, w.id];
        if let Some(b) = bias {
            inputs.push(b.id);
        }
        let onnx = if transposed {
            attrs.push(attr_ints("output_padding", &output_padding));
            "ConvTranspose"
        } else {
            "Conv"
        };
        Ok(self.emit(onnx, &inputs, attrs, x.elem, x.rank.or(w.rank)))
    }

    /// `linear(input, weight, bias=None)` = input @ weight.T + bias.
    fn linear(&mut self, a: &Args<'a>) -> R<'a> {
        let (x, w) = (a.tensor(0, "input")?, a.tensor(1, "weight")?);
        let b = a.opt_tensor(2, "bias")?;
        Ok(Val::Tensor(self.linear_t(x, w, b)))
    }

    /// x @ wᵀ (+ b).
    pub(super) fn linear_t(&mut self, x: T, w: T, b: Option<T>) -> T {
        let wt = self.emit_t("Transpose", &[w.id], vec![attr_ints("perm", &[1, 0])], w.elem, Some(2));
        let y = self.emit_t("MatMul", &[x.id, wt.id], vec![], x.elem, x.rank);
        match b {
            Some(b) => self.emit_t("Add", &[y.id, b.id], vec![], y.elem, y.rank),
            None => y,
        }
    }

    /// `batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn)`.
    fn batch_norm(&mut self, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "input")?;
        let mean = a.tensor(3, "running_mean")?;
        let var = a.tensor(4, "running_var")?;
        if a.bool(5, "training", false)? {
            return Err("aten::batch_norm in training mode (save the module after .eval())".into());
        }
        let scale = match a.opt_tensor(1, "weight")? {
            Some(w) => w.id,
            None => self.like_ones(mean, 1.0)?,
        };
        let bias = match a.opt_tensor(2, "bias")? {
            Some(b) => b.id,
            None => self.like_ones(mean, 0.0)?,
        };
        let attrs = vec![
            attr_float("epsilon", a.float(7, "eps", 1e-5)?),
            attr_float("momentum", 1.0 - a.float(6, "momentum", 0.1)?),
        ];
        Ok(self.emit("BatchNormalization", &[x.id, scale, bias, mean.id, var.id], attrs, x.elem, x.rank))
    }

    /// A tensor of `like`'s shape filled with `value`.
    fn like_ones(&mut self, like: T, value: f64) -> Result<ValueId, String> {
        let shape = self.emit_t("Shape", &[like.id], vec![], Some(ElemType::Int64), Some(1));
        let elem = like.elem.unwrap_or(ElemType::Float);
        let attr = attr_scalar_tensor("value", elem, scalar_bytes(value, elem));
        Ok(self.emit_t("ConstantOfShape", &[shape.id], vec![attr], Some(elem), like.rank).id)
    }

    /// `layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5, cudnn_enable=True)`.
    fn layer_norm(&mut self, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "input")?;
        let normalized = a.ints(1, "normalized_shape", 1, &[])?;
        let axis = -(normalized.len() as i64);
        let scale = match a.opt_tensor(2, "weight")? {
            Some(w) => w.id,
            None => self.filled(&normalized, x.elem.unwrap_or(ElemType::Float), 1.0),
        };
        let mut inputs = vec![x.id, scale];
        if let Some(b) = a.opt_tensor(3, "bias")? {
            inputs.push(b.id);
        }
        let attrs = vec![attr_int("axis", axis), attr_float("epsilon", a.float(4, "eps", 1e-5)?)];
        Ok(self.emit("LayerNormalization", &inputs, attrs, x.elem, x.rank))
    }

    /// A constant of `dims` filled with `value`.
    fn filled(&mut self, dims: &[i64], elem: ElemType, value: f64) -> ValueId {
        let shape = self.b.const_vector(dims);
        let attr = attr_scalar_tensor("value", elem, scalar_bytes(value, elem));
        self.emit_t("ConstantOfShape", &[shape], vec![attr], Some(elem), Some(dims.len())).id
    }

    /// `group_norm(input, num_groups, weight=None, bias=None, eps=1e-5, cudnn)` (opset 21: per-channel scale).
    fn group_norm(&mut self, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "input")?;
        let groups = a.int(1, "num_groups", 1)?;
        let (Some(w), Some(b)) = (a.opt_tensor(2, "weight")?, a.opt_tensor(3, "bias")?) else {
            return Err("aten::group_norm without weight and bias".into());
        };
        let attrs = vec![attr_int("num_groups", groups), attr_float("epsilon", a.float(4, "eps", 1e-5)?)];
        Ok(self.emit("GroupNormalization", &[x.id, w.id, b.id], attrs, x.elem, x.rank))
    }

    /// `max_pool2d(input, kernel_size, stride=[], padding=0, dilation=1, ceil_mode=False)`,
    /// `avg_pool2d(input, kernel_size, stride=[], padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None)`.
    fn pool(&mut self, onnx: &str, op: &str, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        let n: usize = op.chars().find(|c| c.is_ascii_digit()).and_then(|c| c.to_digit(10)).unwrap_or(2) as usize;
        let kernel = a.ints(1, "kernel_size", n, &[])?;
        let mut stride = a.ints(2, "stride", n, &[])?;
        if stride.is_empty() {
            stride = kernel.clone();
        }
        let padding = a.ints(3, "padding", n, &vec![0; n])?;
        let pads: Vec<i64> = padding.iter().chain(padding.iter()).copied().collect();
        let mut attrs =
            vec![attr_ints("kernel_shape", &kernel), attr_ints("strides", &stride), attr_ints("pads", &pads)];
        if onnx == "MaxPool" {
            attrs.push(attr_ints("dilations", &a.ints(4, "dilation", n, &vec![1; n])?));
            attrs.push(attr_int("ceil_mode", i64::from(a.bool(5, "ceil_mode", false)?)));
        } else {
            attrs.push(attr_int("ceil_mode", i64::from(a.bool(4, "ceil_mode", false)?)));
            attrs.push(attr_int("count_include_pad", i64::from(a.bool(5, "count_include_pad", true)?)));
            if a.get(6, "divisor_override").is_some() {
                return Err("aten::avg_pool with divisor_override".into());
            }
        }
        Ok(self.emit(onnx, &[x.id], attrs, x.elem, x.rank))
    }

    /// `adaptive_avg_pool2d(input, output_size)`: an output of all ones is a global average pool.
    fn adaptive_avg_pool(&mut self, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        let out = a.ints(1, "output_size", 1, &[])?;
        if out.iter().all(|&s| s == 1) {
            return Ok(self.emit("GlobalAveragePool", &[x.id], vec![], x.elem, x.rank));
        }
        Err(format!("adaptive average pooling to {out:?} (only to all ones)"))
    }

    /// `scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0., is_causal=False, scale=None, enable_gqa=False)`.
    fn attention(&mut self, a: &Args<'a>) -> R<'a> {
        let (q, k, v) = (a.tensor(0, "query")?, a.tensor(1, "key")?, a.tensor(2, "value")?);
        let scale = a.get(6, "scale").and_then(Val::as_f64);
        let causal = a.bool(5, "is_causal", false)?;
        let mask = a.opt_tensor(3, "attn_mask")?;
        self.attention_t(q, k, v, mask, causal, scale).map(Val::Tensor)
    }

    /// softmax(q kᵀ · scale [+ mask]) v, with scale 1/√E by default.
    pub(super) fn attention_t(
        &mut self,
        q: T,
        k: T,
        v: T,
        mask: Option<T>,
        causal: bool,
        scale: Option<f64>,
    ) -> Result<T, String> {
        let rank = q.rank.ok_or("scaled_dot_product_attention: the query's rank is unknown")?;
        let mut perm: Vec<i64> = (0..rank as i64).collect();
        perm.swap(rank - 1, rank - 2);
        let kt = self.emit_t("Transpose", &[k.id], vec![attr_ints("perm", &perm)], k.elem, k.rank);
        let scores = self.emit_t("MatMul", &[q.id, kt.id], vec![], q.elem, Some(rank));
        let scale = match scale {
            Some(s) => self.scalar_for(&Val::Float(s), q)?,
            None => {
                // 1/sqrt(E), E the query's last axis.
                let shape = self.emit_t("Shape", &[q.id], vec![], Some(ElemType::Int64), Some(1));
                let last = self.b.const_int(-1);
                let e =
                    self.emit_t("Gather", &[shape.id, last], vec![attr_int("axis", 0)], Some(ElemType::Int64), Some(0));
                let elem = q.elem.unwrap_or(ElemType::Float);
                let ef = self.emit_t("Cast", &[e.id], vec![attr_int("to", elem.code() as i64)], Some(elem), Some(0));
                let root = self.emit_t("Sqrt", &[ef.id], vec![], Some(elem), Some(0));
                let one = self.scalar_for(&Val::Float(1.0), q)?;
                self.emit_t("Div", &[one, root.id], vec![], Some(elem), Some(0)).id
            }
        };
        let mut scores = self.emit_t("Mul", &[scores.id, scale], vec![], q.elem, Some(rank));
        if causal {
            let mask = self.causal_mask(q, k);
            let neg = self.scalar_for(&Val::Float(f64::NEG_INFINITY), q)?;
            scores = self.emit_t("Where", &[mask, scores.id, neg], vec![], q.elem, Some(rank));
        }
        if let Some(mask) = mask {
            scores = if mask.elem == Some(ElemType::Bool) {
                let neg = self.scalar_for(&Val::Float(f64::NEG_INFINITY), q)?;
                self.emit_t("Where", &[mask.id, scores.id, neg], vec![], q.elem, Some(rank))
            } else {
                self.emit_t("Add", &[scores.id, mask.id], vec![], q.elem, Some(rank))
            };
        }
        let probs = self.emit_t("Softmax", &[scores.id], vec![attr_int("axis", -1)], q.elem, Some(rank));
        Ok(self.emit_t("MatMul", &[probs.id, v.id], vec![], q.elem, Some(rank)))
    }

    /// The `[L, S]` lower-triangular bool mask of a causal attention.
    fn causal_mask(&mut self, q: T, k: T) -> ValueId {
        let mut sizes = Vec::new();
        for t in [q, k] {
            let shape = self.emit_t("Shape", &[t.id], vec![], Some(ElemType::Int64), Some(1));
            let at = self.b.const_vector(&[-2]);
            sizes.push(
                self.emit_t("Gather", &[shape.id, at], vec![attr_int("axis", 0)], Some(ElemType::Int64), Some(1)).id,
            );
        }
        let dims = self.emit_t("Concat", &sizes, vec![attr_int("axis", 0)], Some(ElemType::Int64), Some(1));
        let ones = attr_scalar_tensor("value", ElemType::Bool, vec![1]);
        let full = self.emit_t("ConstantOfShape", &[dims.id], vec![ones], Some(ElemType::Bool), Some(2));
        let as_int = self.emit_t(
            "Cast",
            &[full.id],
            vec![attr_int("to", ElemType::Int32.code() as i64)],
            Some(ElemType::Int32),
            Some(2),
        );
        let tri = self.emit_t("Trilu", &[as_int.id], vec![attr_int("upper", 0)], Some(ElemType::Int32), Some(2));
        let mask = self.emit_t(
            "Cast",
            &[tri.id],
            vec![attr_int("to", ElemType::Bool.code() as i64)],
            Some(ElemType::Bool),
            Some(2),
        );
        mask.id
    }

    /// `flatten(self, start_dim=0, end_dim=-1)`.
    fn flatten(&mut self, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        let (start, end) = (a.int(1, "start_dim", 0)?, a.int(2, "end_dim", -1)?);
        let rank = x.rank.ok_or("aten::flatten: the input's rank is unknown")? as i64;
        let (s, e) = (normalize(start, rank as usize), normalize(end, rank as usize));
        if s == 1 && e == rank - 1 {
            // `flatten(x, 1)`: ONNX Flatten's two axes exactly.
            return Ok(self.emit("Flatten", &[x.id], vec![attr_int("axis", 1)], x.elem, Some(2)));
        }
        // Keep the axes before `s` and after `e`, -1 between.
        let shape = self.emit_t("Shape", &[x.id], vec![], Some(ElemType::Int64), Some(1));
        let mut parts = Vec::new();
        if s > 0 {
            parts.push(self.shape_slice(shape.id, 0, s)?);
        }
        parts.push(self.b.const_vector(&[-1]));
        if e + 1 < rank {
            parts.push(self.shape_slice(shape.id, e + 1, rank)?);
        }
        let target = self.emit_t("Concat", &parts, vec![attr_int("axis", 0)], Some(ElemType::Int64), Some(1));
        Ok(self.emit("Reshape", &[x.id, target.id], vec![], x.elem, Some((rank - (e - s)) as usize)))
    }

    fn shape_slice(&mut self, shape: ValueId, from: i64, to: i64) -> Result<ValueId, String> {
        let (s, e) = (self.b.const_vector(&[from]), self.b.const_vector(&[to]));
        Ok(self.emit_t("Slice", &[shape, s, e], vec![], Some(ElemType::Int64), Some(1)).id)
    }

    fn transpose(&mut self, op: &str, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        let rank = x.rank.ok_or(format!("aten::{op}: the input's rank is unknown"))?;
        if rank < 2 {
            return Ok(self.emit("Identity", &[x.id], vec![], x.elem, x.rank));
        }
        let (d0, d1) = if op == "t" { (0, 1) } else { (a.int(1, "dim0", 0)?, a.int(2, "dim1", 1)?) };
        let mut perm: Vec<i64> = (0..rank as i64).collect();
        perm.swap(normalize(d0, rank) as usize, normalize(d1, rank) as usize);
        Ok(self.emit("Transpose", &[x.id], vec![attr_ints("perm", &perm)], x.elem, Some(rank)))
    }

    /// `slice(self, dim=0, start=None, end=None, step=1)`.
    fn slice(&mut self, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        let dim = a.int(1, "dim", 0)?;
        let start = match a.get(2, "start") {
            Some(v) => self.vector_of(v)?,
            None => self.b.const_vector(&[0]),
        };
        let end = match a.get(3, "end") {
            Some(v) => self.vector_of(v)?,
            None => self.b.const_vector(&[i64::MAX]),
        };
        let axes = self.b.const_vector(&[dim]);
        let step = self.b.const_vector(&[a.int(4, "step", 1)?]);
        Ok(self.emit("Slice", &[x.id, start, end, axes, step], vec![], x.elem, x.rank))
    }

    /// A 1-element int64 vector of an int known now or at run time.
    fn vector_of(&mut self, v: &Val<'a>) -> Result<ValueId, String> {
        if let Some(n) = v.as_int() {
            return Ok(self.b.const_vector(&[n]));
        }
        let scalar = self.int_value(v)?;
        let axes = self.b.const_vector(&[0]);
        Ok(self.emit_t("Unsqueeze", &[scalar, axes], vec![], Some(ElemType::Int64), Some(1)).id)
    }

    fn cat(&mut self, stack: bool, a: &Args<'a>) -> R<'a> {
        let list = a.get(0, "tensors").ok_or("aten::cat: tensors missing")?.clone();
        let items = list.items().ok_or("aten::cat of something other than a list")?.to_vec();
        let dim = a.int(1, "dim", 0)?;
        let mut ids = Vec::new();
        let mut first: Option<T> = None;
        for item in &items {
            let t = item.tensor().ok_or("aten::cat of a list holding something other than tensors")?;
            first.get_or_insert(t);
            if stack {
                let axes = self.b.const_vector(&[dim]);
                ids.push(self.emit_t("Unsqueeze", &[t.id, axes], vec![], t.elem, t.rank.map(|r| r + 1)).id);
            } else {
                ids.push(t.id);
            }
        }
        let first = first.ok_or("aten::cat of an empty list")?;
        let rank = first.rank.map(|r| if stack { r + 1 } else { r });
        Ok(self.emit("Concat", &ids, vec![attr_int("axis", dim)], first.elem, rank))
    }

    /// `chunk(self, chunks, dim=0)`, `split(self, split_size_or_sections: List[int], dim=0)`, `unbind(self, dim=0)`.
    fn split(&mut self, op: &str, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        let origin = self.origin.clone();
        let outputs = match op {
            "chunk" => {
                let n = a.int(1, "chunks", 1)?;
                let dim = a.int(2, "dim", 0)?;
                self.b.node(
                    "Split",
                    &[x.id],
                    n.max(1) as usize,
                    vec![attr_int("axis", dim), attr_int("num_outputs", n)],
                    &origin,
                )
            }
            "split" => {
                let sizes = match a.get(1, "split_size") {
                    Some(Val::List(items)) => items.iter().map(Val::as_int).collect::<Option<Vec<_>>>(),
                    _ => None,
                };
                let Some(sizes) = sizes else {
                    let size = a.int(1, "split_size", 1)?;
                    return Ok(Val::Chunks(x, size.max(1), a.int(2, "dim", 0)?));
                };
                let dim = a.int(2, "dim", 0)?;
                let split = self.b.const_vector(&sizes);
                self.b.node("Split", &[x.id, split], sizes.len(), vec![attr_int("axis", dim)], &origin)
            }
            _ => return Err(format!("aten::{op} (the number of results is not known at import)")),
        };
        Ok(Val::List(outputs.into_iter().map(|id| Val::Tensor(T { id, elem: x.elem, rank: x.rank })).collect()))
    }

    /// `to(self, dtype, ...)`, `to(self, device, dtype, ...)`, `to(self, other, ...)`, `type_as(self, other)`.
    fn to(&mut self, op: &str, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        let target = match (op, a.get(1, "dtype")) {
            ("type_as", _) | (_, Some(Val::Tensor(_))) => {
                let other = a.tensor(1, "other")?;
                return Ok(self.emit("CastLike", &[x.id, other.id], vec![], other.elem, x.rank));
            }
            (_, Some(Val::Int(code))) => Some(*code),
            (_, Some(Val::Device)) => a.get(2, "dtype").and_then(Val::as_int),
            _ => a.get(1, "dtype").and_then(Val::as_int),
        };
        match target.and_then(scalar_type) {
            Some(elem) => Ok(self.emit("Cast", &[x.id], vec![attr_int("to", elem.code() as i64)], Some(elem), x.rank)),
            None => Ok(self.emit("Identity", &[x.id], vec![], x.elem, x.rank)),
        }
    }

    /// `arange(end, ...)`, `arange(start, end, step=1, ...)` (keyword `dtype`).
    fn arange(&mut self, a: &Args<'a>) -> R<'a> {
        let numbers: Vec<Val<'a>> = (0..a.len())
            .filter_map(|i| a.get(i, "_"))
            .filter(|v| matches!(v, Val::Int(_) | Val::Float(_) | Val::RuntimeInt(_)))
            .cloned()
            .collect();
        let (start, end, step) = match &numbers[..] {
            [end] => (Val::Int(0), end.clone(), Val::Int(1)),
            [start, end] => (start.clone(), end.clone(), Val::Int(1)),
            [start, end, step, ..] => (start.clone(), end.clone(), step.clone()),
            [] => return Err("aten::arange without bounds".into()),
        };
        let floats = [&start, &end, &step].iter().any(|v| matches!(v, Val::Float(_)));
        if floats {
            return Err("aten::arange over floats".into());
        }
        let ids = [self.int_value(&start)?, self.int_value(&end)?, self.int_value(&step)?];
        let out = self.emit_t("Range", &ids, vec![], Some(ElemType::Int64), Some(1));
        match a.get(usize::MAX, "dtype").and_then(Val::as_int).and_then(scalar_type) {
            Some(elem) if elem != ElemType::Int64 => {
                Ok(self.emit("Cast", &[out.id], vec![attr_int("to", elem.code() as i64)], Some(elem), Some(1)))
            }
            _ => Ok(Val::Tensor(out)),
        }
    }

    /// `zeros(size, dtype=None, ...)`, `ones`, `full(size, fill_value, dtype=None, ...)`.
    fn fill(&mut self, op: &str, a: &Args<'a>) -> R<'a> {
        let size = a.get(0, "size").ok_or("aten::zeros: size missing")?.clone();
        let rank = size.items().map(<[Val]>::len);
        let shape = self.shape_tensor(&size)?;
        let (value, dtype_at) = match op {
            "full" => (a.float(1, "fill_value", 0.0)?, 2),
            "ones" => (1.0, 1),
            _ => (0.0, 1),
        };
        let elem = a.get(dtype_at, "dtype").and_then(Val::as_int).and_then(scalar_type).unwrap_or(ElemType::Float);
        let attr = attr_scalar_tensor("value", elem, scalar_bytes(value, elem));
        Ok(self.emit("ConstantOfShape", &[shape], vec![attr], Some(elem), rank))
    }

    /// `mean(self, dim, keepdim=False, dtype=None)` / `sum`.
    fn reduce(&mut self, onnx: &str, a: &Args<'a>) -> R<'a> {
        let x = a.tensor(0, "self")?;
        let keep = a.bool(2, "keepdim", false)?;
        let attrs = vec![attr_int("keepdims", i64::from(keep))];
        match a.get(1, "dim") {
            Some(d) => {
                let dims = d.as_ints().ok_or(format!("{onnx}: dims must be known at import"))?;
                let axes = self.b.const_vector(&dims);
                let rank = x.rank.map(|r| if keep { r } else { r.saturating_sub(dims.len()) });
                Ok(self.emit(onnx, &[x.id, axes], attrs, x.elem, rank))
            }
            None => Ok(self.emit(onnx, &[x.id], attrs, x.elem, Some(if keep { x.rank.unwrap_or(0) } else { 0 }))),
        }
    }

    fn comparison(&mut self, op: &str, a: &Args<'a>) -> R<'a> {
        let x = a.get(0, "self").ok_or("missing self")?.clone();
        let y = a.get(1, "other").ok_or("missing other")?.clone();
        if let (Some(p), Some(q)) = (x.as_f64(), y.as_f64()) {
            return Ok(Val::Bool(match op {
                "eq" => p == q,
                "ne" => p != q,
                "lt" => p < q,
                "gt" => p > q,
                "le" => p <= q,
                _ => p >= q,
            }));
        }
        let like =
            x.tensor().or(y.tensor()).ok_or_else(|| format!("aten::{op} of {} and {}", x.describe(), y.describe()))?;
        let (p, q) = (self.operand(&x, like)?, self.operand(&y, like)?);
        let (onnx, negate) = match op {
            "eq" => ("Equal", false),
            "ne" => ("Equal", true),
            "lt" => ("Less", false),
            "gt" => ("Greater", false),
            "le" => ("LessOrEqual", false),
            _ => ("GreaterOrEqual", false),
        };
        let out = self.emit_t(onnx, &[p, q], vec![], Some(ElemType::Bool), like.rank);
        if negate {
            return Ok(self.emit("Not", &[out.id], vec![], Some(ElemType::Bool), out.rank));
        }
        Ok(Val::Tensor(out))
    }
}

impl<'a> Interp<'a> {
    /// `a op b` for the printed code's own operators (ints and floats known at import, runtime ints).
    pub fn binop(&mut self, a: &Val<'a>, op: &str, b: &Val<'a>, line: u32) -> Result<Val<'a>, Located> {
        let onnx = match op {
            "+" => "Add",
            "-" => "Sub",
            "*" => "Mul",
            "/" | "//" => "Div",
            "%" => "Mod",
            _ => return Err(self.error(line, format!("operator '{op}' is not supported"))),
        };
        if op == "/" {
            if let (Some(p), Some(q)) = (a.as_f64(), b.as_f64()) {
                return Ok(Val::Float(p / q));
            }
        }
        self.arith_vals(onnx, a, b, op == "//").map_err(|m| self.error(line, m))
    }

    /// `-a`, `not a`.
    pub fn unary(&mut self, op: &str, v: Val<'a>, line: u32) -> Result<Val<'a>, Located> {
        match (op, &v) {
            ("-", Val::Int(n)) => Ok(Val::Int(-n)),
            ("-", Val::Float(x)) => Ok(Val::Float(-x)),
            ("+", _) => Ok(v),
            ("not", Val::Bool(b)) => Ok(Val::Bool(!b)),
            ("not", Val::None) => Ok(Val::Bool(true)),
            ("-", Val::RuntimeInt(_)) => {
                self.arith_vals("Sub", &Val::Int(0), &v, false).map_err(|m| self.error(line, m))
            }
            _ => Err(self.error(line, format!("'{op}' of {}", v.describe()))),
        }
    }
}

fn fold_int(onnx: &str, p: i64, q: i64, floor: bool) -> Option<i64> {
    Some(match onnx {
        "Add" => p.checked_add(q)?,
        "Sub" => p.checked_sub(q)?,
        "Mul" => p.checked_mul(q)?,
        "Div" if floor => p.checked_div_euclid(q)?,
        "Div" => p.checked_div(q)?,
        // Python's `%`: the result takes the divisor's sign.
        "Mod" => p.checked_rem(q)?.checked_add(q)?.checked_rem(q)?,
        "Pow" => p.checked_pow(u32::try_from(q).ok()?)?,
        _ => return None,
    })
}

fn fold_float(onnx: &str, p: f64, q: f64, floor: bool) -> f64 {
    match onnx {
        "Add" => p + q,
        "Sub" => p - q,
        "Mul" => p * q,
        "Div" if floor => (p / q).floor(),
        "Div" => p / q,
        "Mod" => p.rem_euclid(q),
        _ => p.powf(q),
    }
}

fn normalize(axis: i64, rank: usize) -> i64 {
    if axis < 0 {
        axis + rank as i64
    } else {
        axis
    }
}

fn normalize_all(axes: &[i64], rank: usize) -> Vec<i64> {
    axes.iter().map(|&a| normalize(a, rank)).collect()
}

/// `-1` entries of an `expand` size become 1 (ONNX Expand broadcasts them).
fn replace_minus_one(v: Val<'_>) -> Val<'_> {
    match v {
        Val::List(items) => {
            Val::List(items.into_iter().map(|i| if i.as_int() == Some(-1) { Val::Int(1) } else { i }).collect())
        }
        other => other,
    }
}

/// The little-endian bytes of one `value` of `elem`.
pub(super) fn scalar_bytes(value: f64, elem: ElemType) -> Vec<u8> {
    match elem {
        ElemType::Double => value.to_le_bytes().to_vec(),
        ElemType::Int64 => (value as i64).to_le_bytes().to_vec(),
        ElemType::Int32 => (value as i32).to_le_bytes().to_vec(),
        ElemType::Bool | ElemType::Uint8 | ElemType::Int8 => vec![value as u8],
        _ => (value as f32).to_le_bytes().to_vec(),
    }
}
