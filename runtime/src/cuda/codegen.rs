//! Kernel programs to CUDA C.
//!
//! One `extern "C" __global__` function per program. Its parameters are a
//! pointer per operand and per output, then one `long long` per distinct
//! symbolic size the program mentions (an axis extent or a dim of a view),
//! so one compiled kernel serves every binding of the model's symbols.
//! Views become an offset and a stride per axis computed at the top of the
//! kernel from the dims (literals where known), and every instruction a
//! local variable `v<i>` computed in `float` for the float types (storage
//! in `__half`/`__nv_bfloat16` is converted at the load and the store),
//! `double`, `bool` or the integer type.
//!
//! Elementwise programs are a grid-stride loop over the points of the
//! space, one thread a point. Reductions give each block one outer point
//! at a time (a grid-stride loop over them): the block's threads stride
//! over the reduction points, combine partial results, and meet in a tree
//! over shared memory (no warp shuffles: the host execution of the same
//! source runs it). A program whose reductions nest (Softmax: a max, then
//! a sum of exponentials that reads it) sweeps once per depth; the last
//! sweep writes the outputs that vary with the reduction axes, and thread 0
//! writes those that do not.

use super::launch::Launch;
use crate::kernel::{BinaryOp, Combiner, Extent, Inst, Level, Program, UnaryOp, View};
use diamond_ir::ElemType;
use std::collections::BTreeSet;
use std::fmt::Write;

/// Threads per block of every generated kernel (a power of two: the tree
/// reduction halves it).
pub const BLOCK: u32 = 256;

/// One generated kernel.
#[derive(Clone, Debug, PartialEq)]
pub struct CudaKernel {
    /// The function's name (the program's, made a C identifier).
    pub name: String,
    /// The `__global__` function's source (the shared prelude not included).
    pub source: String,
    /// The symbolic sizes passed after the pointers, in order.
    pub symbols: Vec<String>,
    /// How it is launched.
    pub launch: Launch,
    /// Whether it reduces (one block per outer point) or maps (one thread a point).
    pub reduces: bool,
    /// The C storage type of each pointer parameter: operands, then outputs.
    pub buffers: Vec<String>,
    /// How many of `buffers` are operands.
    pub n_inputs: usize,
}

/// The C type a value of `t` is computed in.
fn compute_type(t: ElemType) -> Result<&'static str, String> {
    Ok(match t {
        ElemType::Float | ElemType::Float16 | ElemType::Bfloat16 => "float",
        ElemType::Double => "double",
        ElemType::Bool => "bool",
        ElemType::Int8 | ElemType::Int16 | ElemType::Int32 | ElemType::Uint8 | ElemType::Uint16 => "int",
        ElemType::Int64 => "long long",
        ElemType::Uint32 | ElemType::Uint64 => "unsigned long long",
        other => return Err(format!("no CUDA type for {}", other.name())),
    })
}

/// The C type a tensor of `t` is stored in.
pub fn storage_type(t: ElemType) -> Result<&'static str, String> {
    Ok(match t {
        ElemType::Float => "float",
        ElemType::Float16 => "__half",
        ElemType::Bfloat16 => "__nv_bfloat16",
        ElemType::Double => "double",
        ElemType::Bool => "bool",
        ElemType::Int8 => "signed char",
        ElemType::Int16 => "short",
        ElemType::Int32 => "int",
        ElemType::Int64 => "long long",
        ElemType::Uint8 => "unsigned char",
        ElemType::Uint16 => "unsigned short",
        ElemType::Uint32 => "unsigned int",
        ElemType::Uint64 => "unsigned long long",
        other => return Err(format!("no CUDA storage for {}", other.name())),
    })
}

/// `expr` read from storage of type `t`, as its compute type.
pub(crate) fn load_expr(t: ElemType, expr: &str) -> String {
    match t {
        ElemType::Float16 => format!("__half2float({expr})"),
        ElemType::Bfloat16 => format!("__bfloat162float({expr})"),
        _ => expr.to_string(),
    }
}

/// `expr` (of the compute type) converted for storage of type `t`.
pub(crate) fn store_expr(t: ElemType, expr: &str) -> String {
    match t {
        ElemType::Float16 => format!("__float2half({expr})"),
        ElemType::Bfloat16 => format!("__float2bfloat16({expr})"),
        ElemType::Bool => format!("(bool)({expr})"),
        _ => format!("({})({expr})", storage_type(t).unwrap_or("float")),
    }
}

/// A C literal of `x` in compute type `ty`.
pub(crate) fn literal(x: f64, ty: &str) -> String {
    match ty {
        "float" if x.is_nan() => "__int_as_float(0x7fc00000)".into(),
        "double" if x.is_nan() => "__longlong_as_double(0x7ff8000000000000LL)".into(),
        "float" if x.is_infinite() => format!("({}__int_as_float(0x7f800000))", if x < 0.0 { "-" } else { "" }),
        "double" if x.is_infinite() => {
            format!("({}__longlong_as_double(0x7ff0000000000000LL))", if x < 0.0 { "-" } else { "" })
        }
        "float" => format!("{:?}f", x as f32),
        "double" => format!("{x:?}"),
        "bool" => (if x != 0.0 { "true" } else { "false" }).to_string(),
        _ => format!("(({ty}){})", x as i64),
    }
}

/// A size as C: a literal, or the kernel parameter holding a symbolic one.
pub(crate) fn size_expr(e: &Extent, symbols: &[String]) -> String {
    match e {
        Extent::Known(n) => format!("{n}LL"),
        Extent::Symbol(s) => format!("S{}", symbols.iter().position(|x| x == s).unwrap_or(0)),
    }
}

/// The C identifier of a program name.
pub fn identifier(name: &str) -> String {
    let mut id: String = name.chars().map(|c| if c.is_ascii_alphanumeric() { c } else { '_' }).collect();
    if !id.starts_with(|c: char| c.is_ascii_alphabetic()) {
        id.insert_str(0, "k_");
    }
    id
}

/// Generates the kernel of `p`.
pub fn generate(p: &Program) -> Result<CudaKernel, String> {
    crate::kernel::verify::verify(p)?;
    let name = identifier(&p.name);
    let symbols = program_symbols(p);
    let types: Vec<&str> = p.body.iter().map(|i| compute_type(i.ty)).collect::<Result<_, _>>()?;
    let mut g = Gen { p, types, out: String::new(), symbols: &symbols, replaced: Vec::new() };
    g.signature(&name)?;
    g.prologue();
    let reduces = !p.reduce.is_empty();
    if reduces {
        g.reduction()?;
    } else {
        g.elementwise()?;
    }
    g.out.push_str("}\n");
    let launch = if reduces { Launch::per_outer_point(BLOCK) } else { Launch::grid_stride(BLOCK) };
    let buffers = p
        .operands
        .iter()
        .chain(p.outputs.iter().map(|o| &o.view))
        .map(|v| storage_type(v.elem).map(str::to_string))
        .collect::<Result<_, _>>()?;
    Ok(CudaKernel { name, source: g.out, symbols, launch, reduces, buffers, n_inputs: p.operands.len() })
}

/// The symbolic sizes `p` mentions (axis extents and view dims), sorted:
/// the kernel's `S0, S1, ...` parameters.
pub(crate) fn program_symbols(p: &Program) -> Vec<String> {
    let mut symbols = BTreeSet::new();
    for e in p.axes.iter().chain(p.operands.iter().chain(p.outputs.iter().map(|o| &o.view)).flat_map(|v| &v.dims)) {
        if let Extent::Symbol(s) = e {
            symbols.insert(s.clone());
        }
    }
    symbols.into_iter().collect()
}

/// The emitter of one program's statements, shared by the program kernels
/// and the contraction kernels' epilogues.
pub(crate) struct Gen<'p> {
    pub(crate) p: &'p Program,
    types: Vec<&'static str>,
    pub(crate) out: String,
    symbols: &'p [String],
    /// Per operand, a C expression its loads read instead of memory (a
    /// contraction's accumulator); `None` or absent: loaded from `in<k>`.
    replaced: Vec<Option<String>>,
}

impl<'p> Gen<'p> {
    /// An emitter of `p` whose symbols are `symbols` (`S<i>`), with the
    /// loads of the operands `replaced` names reading those expressions.
    pub(crate) fn new(p: &'p Program, symbols: &'p [String], replaced: Vec<Option<String>>) -> Result<Gen<'p>, String> {
        crate::kernel::verify::verify(p)?;
        let types: Vec<&str> = p.body.iter().map(|i| compute_type(i.ty)).collect::<Result<_, _>>()?;
        Ok(Gen { p, types, out: String::new(), symbols, replaced })
    }

    fn signature(&mut self, name: &str) -> Result<(), String> {
        let mut params = Vec::new();
        for (k, v) in self.p.operands.iter().enumerate() {
            params.push(format!("const {}* __restrict__ in{k}", storage_type(v.elem)?));
        }
        for (k, o) in self.p.outputs.iter().enumerate() {
            params.push(format!("{}* __restrict__ out{k}", storage_type(o.view.elem)?));
        }
        for k in 0..self.symbols.len() {
            params.push(format!("long long S{k}"));
        }
        let _ = writeln!(self.out, "extern \"C\" __global__ void {name}({}) {{", params.join(", "));
        Ok(())
    }

    /// Axis extents, point counts, and each view's offset and strides.
    pub(crate) fn prologue(&mut self) {
        let p = self.p;
        for (a, e) in p.axes.iter().enumerate() {
            let _ = writeln!(self.out, "  const long long A{a} = {};", size_expr(e, self.symbols));
        }
        let outer: Vec<String> = self.outer_axes().iter().map(|a| format!("A{a}")).collect();
        let reduce: Vec<String> = p.reduce.iter().map(|a| format!("A{a}")).collect();
        let product = |v: &[String]| if v.is_empty() { "1LL".to_string() } else { v.join(" * ") };
        let _ = writeln!(self.out, "  const long long n_outer = {};", product(&outer));
        let _ = writeln!(self.out, "  const long long n_reduce = {};", product(&reduce));
        let views: Vec<(String, &View)> = p
            .operands
            .iter()
            .enumerate()
            .map(|(k, v)| (format!("i{k}"), v))
            .chain(p.outputs.iter().enumerate().map(|(k, o)| (format!("o{k}"), &o.view)))
            .collect();
        for (tag, v) in views {
            self.view_strides(&tag, v);
        }
    }

    /// `<tag>_off` and `<tag>_s<axis>` for every axis the view follows.
    fn view_strides(&mut self, tag: &str, v: &View) {
        let mut stride = "1LL".to_string();
        let mut offset = Vec::new();
        let mut per_axis: Vec<Vec<String>> = vec![Vec::new(); self.p.axes.len()];
        for (dim, vd) in v.dims.iter().zip(&v.view).rev() {
            if vd.start != 0 {
                offset.push(format!("{}LL * {stride}", vd.start));
            }
            if let Some(a) = vd.axis {
                per_axis[a].push(format!("{}LL * {stride}", vd.step));
            }
            stride = format!("({stride} * {})", size_expr(dim, self.symbols));
        }
        let sum = |v: &[String]| if v.is_empty() { "0LL".to_string() } else { v.join(" + ") };
        let _ = writeln!(self.out, "  const long long {tag}_off = {};", sum(&offset));
        for (a, terms) in per_axis.iter().enumerate() {
            if !terms.is_empty() {
                let _ = writeln!(self.out, "  const long long {tag}_s{a} = {};", sum(terms));
            }
        }
    }

    fn outer_axes(&self) -> Vec<usize> {
        (0..self.p.axes.len()).filter(|a| !self.p.reduce.contains(a)).collect()
    }

    /// Splits linear index `lin` over `axes` (C order) into `x<axis>`.
    pub(crate) fn decompose(&mut self, indent: &str, lin: &str, axes: &[usize]) {
        let _ = writeln!(self.out, "{indent}long long rest_{lin} = {lin};");
        for &a in axes.iter().rev() {
            let _ = writeln!(self.out, "{indent}const long long x{a} = rest_{lin} % A{a}; rest_{lin} /= A{a};");
        }
    }

    /// The element offset of view `tag` (following `axes` known so far).
    fn offset(&self, tag: &str, v: &View, axes: &BTreeSet<usize>) -> String {
        let mut terms = vec![format!("{tag}_off")];
        for a in v.axes() {
            if axes.contains(&a) && !terms.contains(&format!("x{a} * {tag}_s{a}")) {
                terms.push(format!("x{a} * {tag}_s{a}"));
            }
        }
        terms.join(" + ")
    }

    /// Emits instructions `wanted` (and what they read, unless `have`)
    /// with the axes in `axes` indexed; adds them to `have`.
    pub(crate) fn emit(
        &mut self,
        indent: &str,
        wanted: &[usize],
        have: &mut BTreeSet<usize>,
        axes: &BTreeSet<usize>,
    ) -> Result<(), String> {
        let mut need = BTreeSet::new();
        let mut stack: Vec<usize> = wanted.to_vec();
        while let Some(i) = stack.pop() {
            if have.contains(&i) || !need.insert(i) {
                continue;
            }
            if let Inst::Reduce(..) = self.p.body[i].inst {
                return Err(format!("%{i}: a reduction read before it is computed"));
            }
            stack.extend(self.p.body[i].inst.args());
        }
        for i in need {
            let line = self.instruction(i, axes)?;
            let _ = writeln!(self.out, "{indent}const {} v{i} = {line};", self.types[i]);
            have.insert(i);
        }
        Ok(())
    }

    fn instruction(&self, i: usize, axes: &BTreeSet<usize>) -> Result<String, String> {
        let ty = self.types[i];
        let v = |a: usize| format!("v{a}");
        Ok(match self.p.body[i].inst {
            Inst::Load(k) if self.replaced.get(k).is_some_and(Option::is_some) => {
                self.replaced[k].clone().unwrap_or_default()
            }
            Inst::Load(k) => {
                let view = &self.p.operands[k];
                load_expr(view.elem, &format!("in{k}[{}]", self.offset(&format!("i{k}"), view, axes)))
            }
            Inst::Const(c) => literal(c, ty),
            Inst::Cast(a) => match (self.types[a], ty) {
                (_, "bool") => format!("({} != 0)", v(a)),
                ("float" | "double", "int" | "long long" | "unsigned long long") => format!("({ty})dm_trunc({})", v(a)),
                _ => format!("({ty}){}", v(a)),
            },
            Inst::Select(c, a, b) => format!("({} ? {} : {})", v(c), v(a), v(b)),
            Inst::Unary(op, a) => unary(op, &v(a), ty)?,
            Inst::Binary(op, a, b) => binary(op, &v(a), &v(b), self.types[a])?,
            Inst::Reduce(..) => return Err(format!("%{i}: a reduction inside an expression")),
        })
    }

    /// Stores output `k` from its source at the current point.
    pub(crate) fn store(&mut self, indent: &str, k: usize, axes: &BTreeSet<usize>) {
        let o = &self.p.outputs[k];
        let at = self.offset(&format!("o{k}"), &o.view, axes);
        let value = store_expr(o.view.elem, &format!("v{}", o.source));
        let _ = writeln!(self.out, "{indent}out{k}[{at}] = {value};");
    }

    fn elementwise(&mut self) -> Result<(), String> {
        let outer = self.outer_axes();
        let axes: BTreeSet<usize> = outer.iter().copied().collect();
        self.out.push_str("  for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < n_outer; o += (long long)gridDim.x * blockDim.x) {\n");
        self.decompose("    ", "o", &outer);
        let sources: Vec<usize> = self.p.outputs.iter().map(|o| o.source).collect();
        let mut have = BTreeSet::new();
        self.emit("    ", &sources, &mut have, &axes)?;
        for k in 0..self.p.outputs.len() {
            self.store("    ", k, &axes);
        }
        self.out.push_str("  }\n");
        Ok(())
    }

    fn reduction(&mut self) -> Result<(), String> {
        let p = self.p;
        let outer = self.outer_axes();
        let outer_set: BTreeSet<usize> = outer.iter().copied().collect();
        let all: BTreeSet<usize> = (0..p.axes.len()).collect();
        let levels = p.levels();
        let depths = p.depths();
        let deepest = depths.iter().copied().max().unwrap_or(0);
        let _ = writeln!(self.out, "  __shared__ {} red[{BLOCK}];", self.shared_type());
        self.out.push_str("  for (long long o = blockIdx.x; o < n_outer; o += gridDim.x) {\n");
        self.decompose("    ", "o", &outer);
        let mut have: BTreeSet<usize> = BTreeSet::new();
        for depth in 1..=deepest {
            let reductions: Vec<usize> = (0..p.body.len())
                .filter(|&i| depths[i] == depth && matches!(p.body[i].inst, Inst::Reduce(..)))
                .collect();
            for &r in &reductions {
                let Inst::Reduce(c, _) = p.body[r].inst else { continue };
                let _ = writeln!(self.out, "    {} acc{r} = {};", self.types[r], identity(c, self.types[r]));
            }
            self.out.push_str("    for (long long r = threadIdx.x; r < n_reduce; r += blockDim.x) {\n");
            self.decompose("      ", "r", &p.reduce);
            let mut inner = have.clone();
            let args: Vec<usize> =
                reductions.iter().map(|&r| if let Inst::Reduce(_, a) = p.body[r].inst { a } else { r }).collect();
            self.emit("      ", &args, &mut inner, &all)?;
            for (&r, &a) in reductions.iter().zip(&args) {
                let Inst::Reduce(c, _) = p.body[r].inst else { continue };
                let _ = writeln!(
                    self.out,
                    "      acc{r} = {};",
                    combine(c, &format!("acc{r}"), &format!("v{a}"), self.types[r])
                );
            }
            self.out.push_str("    }\n");
            for &r in &reductions {
                let Inst::Reduce(c, _) = p.body[r].inst else { continue };
                self.block_reduce(r, c);
                have.insert(r);
            }
        }
        // The outputs: those varying with the reduction axes in a last sweep,
        // the others from thread 0.
        let (full, outer_only): (Vec<usize>, Vec<usize>) =
            (0..p.outputs.len()).partition(|&k| levels[p.outputs[k].source] == Level::Full);
        if !full.is_empty() {
            self.out.push_str("    for (long long r = threadIdx.x; r < n_reduce; r += blockDim.x) {\n");
            self.decompose("      ", "r", &p.reduce);
            let mut inner = have.clone();
            let sources: Vec<usize> = full.iter().map(|&k| p.outputs[k].source).collect();
            self.emit("      ", &sources, &mut inner, &all)?;
            for &k in &full {
                self.store("      ", k, &all);
            }
            self.out.push_str("    }\n");
        }
        if !outer_only.is_empty() {
            self.out.push_str("    if (threadIdx.x == 0) {\n");
            let mut inner = have.clone();
            let sources: Vec<usize> = outer_only.iter().map(|&k| p.outputs[k].source).collect();
            self.emit("      ", &sources, &mut inner, &outer_set)?;
            for &k in &outer_only {
                self.store("      ", k, &outer_set);
            }
            self.out.push_str("    }\n");
        }
        // The next outer point reuses the shared buffer.
        self.out.push_str("    __syncthreads();\n  }\n");
        Ok(())
    }

    /// The widest reduction type: the shared buffer holds every combiner's partials in turn.
    fn shared_type(&self) -> &'static str {
        let reduces = self.p.body.iter().enumerate().filter(|(_, i)| matches!(i.inst, Inst::Reduce(..)));
        let mut ty = "float";
        for (i, _) in reduces {
            ty = match (ty, self.types[i]) {
                (_, "double") | ("double", _) => "double",
                (_, "long long") | ("long long", _) => "long long",
                (_, "unsigned long long") => "unsigned long long",
                (t, _) => t,
            };
        }
        ty
    }

    /// Tree reduction of `acc<r>` over the block into `v<r>` (every thread holds it after).
    fn block_reduce(&mut self, r: usize, c: Combiner) {
        let ty = self.types[r];
        let shared = self.shared_type();
        let _ = writeln!(self.out, "    red[threadIdx.x] = ({shared})acc{r};");
        self.out.push_str("    __syncthreads();\n");
        self.out.push_str("    for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {\n");
        let _ = writeln!(
            self.out,
            "      if (threadIdx.x < half) red[threadIdx.x] = ({shared})({});",
            combine(c, &format!("({ty})red[threadIdx.x]"), &format!("({ty})red[threadIdx.x + half]"), ty)
        );
        self.out.push_str("      __syncthreads();\n    }\n");
        let total = format!("({ty})red[0]");
        let value = if c == Combiner::Mean { format!("{total} / ({ty})n_reduce") } else { total };
        let _ = writeln!(self.out, "    const {ty} v{r} = {value};");
        self.out.push_str("    __syncthreads();\n");
    }
}

/// The starting value of a combiner.
fn identity(c: Combiner, ty: &str) -> String {
    match c {
        Combiner::Sum | Combiner::Mean => literal(0.0, ty),
        Combiner::Prod => literal(1.0, ty),
        Combiner::Max => match ty {
            "float" | "double" => literal(f64::NEG_INFINITY, ty),
            "int" => "(-2147483647 - 1)".into(),
            "long long" => "(-9223372036854775807LL - 1)".into(),
            _ => "0".into(),
        },
        Combiner::Min => match ty {
            "float" | "double" => literal(f64::INFINITY, ty),
            "int" => "2147483647".into(),
            "long long" => "9223372036854775807LL".into(),
            _ => "18446744073709551615ULL".into(),
        },
    }
}

/// `acc` combined with `x`.
fn combine(c: Combiner, acc: &str, x: &str, ty: &str) -> String {
    let float = ty == "float" || ty == "double";
    match c {
        Combiner::Sum | Combiner::Mean => format!("{acc} + {x}"),
        Combiner::Prod => format!("{acc} * {x}"),
        Combiner::Max if float => format!("dm_max({acc}, {x})"),
        Combiner::Min if float => format!("dm_min({acc}, {x})"),
        Combiner::Max => format!("({acc} > {x} ? {acc} : {x})"),
        Combiner::Min => format!("({acc} < {x} ? {acc} : {x})"),
    }
}

fn unary(op: UnaryOp, a: &str, ty: &str) -> Result<String, String> {
    let float = ty == "float" || ty == "double";
    let f = |name: &str| format!("dm_{name}({a})");
    let lit = |x: f64| literal(x, ty);
    Ok(match op {
        UnaryOp::Identity => a.to_string(),
        UnaryOp::Neg => format!("(-{a})"),
        UnaryOp::Abs if !float => format!("({a} < 0 ? -{a} : {a})"),
        UnaryOp::Not => format!("(!{a})"),
        UnaryOp::IsNaN => format!("dm_isnan({a})"),
        _ if !float => return Err(format!("{op:?} on {ty}")),
        UnaryOp::Abs => f("abs"),
        UnaryOp::Sign => f("sign"),
        UnaryOp::Ceil => f("ceil"),
        UnaryOp::Floor => f("floor"),
        UnaryOp::Round => f("round"),
        UnaryOp::Sqrt => f("sqrt"),
        UnaryOp::Reciprocal => format!("({} / {a})", lit(1.0)),
        UnaryOp::Square => format!("({a} * {a})"),
        UnaryOp::Exp => f("exp"),
        UnaryOp::Log => f("log"),
        UnaryOp::Sin => f("sin"),
        UnaryOp::Cos => f("cos"),
        UnaryOp::Tan => f("tan"),
        UnaryOp::Tanh => f("tanh"),
        UnaryOp::Erf => f("erf"),
        UnaryOp::Relu => format!("({a} < {z} ? {z} : {a})", z = lit(0.0)),
        UnaryOp::Sigmoid => f("sigmoid"),
        UnaryOp::Softsign => format!("({a} / ({} + dm_abs({a})))", lit(1.0)),
        UnaryOp::Softplus => f("softplus"),
        UnaryOp::Gelu => f("gelu"),
        UnaryOp::GeluTanh => f("gelu_tanh"),
        UnaryOp::HardSwish => {
            format!("({a} * dm_clamp({a} / {} + {}, {}, {}))", lit(6.0), lit(0.5), lit(0.0), lit(1.0))
        }
        UnaryOp::LeakyRelu(s) => format!("({a} < {z} ? {} * {a} : {a})", lit(s), z = lit(0.0)),
        UnaryOp::Elu(al) => format!("({a} < {z} ? {} * dm_expm1({a}) : {a})", lit(al), z = lit(0.0)),
        UnaryOp::Selu { alpha, gamma } => format!(
            "({a} <= {z} ? {g} * ({al} * dm_exp({a}) - {al}) : {g} * {a})",
            z = lit(0.0),
            g = lit(gamma),
            al = lit(alpha)
        ),
        UnaryOp::HardSigmoid { alpha, beta } => {
            format!("dm_clamp({} * {a} + {}, {}, {})", lit(alpha), lit(beta), lit(0.0), lit(1.0))
        }
        UnaryOp::ThresholdedRelu(t) => format!("({a} > {} ? {a} : {})", lit(t), lit(0.0)),
        UnaryOp::Clip { min, max } => format!("dm_clip({a}, {}, {})", lit(min), lit(max)),
        UnaryOp::PowConst(e) => format!("dm_pow({a}, {})", lit(e)),
    })
}

fn binary(op: BinaryOp, a: &str, b: &str, ty: &str) -> Result<String, String> {
    let float = ty == "float" || ty == "double";
    Ok(match op {
        BinaryOp::Add => format!("({a} + {b})"),
        BinaryOp::Sub => format!("({a} - {b})"),
        BinaryOp::Mul => format!("({a} * {b})"),
        BinaryOp::Div if float => format!("({a} / {b})"),
        BinaryOp::Div => format!("({b} == 0 ? 0 : {a} / {b})"),
        BinaryOp::Max if float => format!("dm_max({a}, {b})"),
        BinaryOp::Min if float => format!("dm_min({a}, {b})"),
        BinaryOp::Max => format!("({a} > {b} ? {a} : {b})"),
        BinaryOp::Min => format!("({a} < {b} ? {a} : {b})"),
        BinaryOp::Pow if float => format!("dm_pow({a}, {b})"),
        BinaryOp::Pow => format!("({ty})dm_pow((double){a}, (double){b})"),
        BinaryOp::PRelu => format!("({a} < 0 ? {b} * {a} : {a})"),
        BinaryOp::Equal => format!("({a} == {b})"),
        BinaryOp::Less => format!("({a} < {b})"),
        BinaryOp::LessOrEqual => format!("({a} <= {b})"),
        BinaryOp::Greater => format!("({a} > {b})"),
        BinaryOp::GreaterOrEqual => format!("({a} >= {b})"),
        BinaryOp::And => format!("({a} && {b})"),
        BinaryOp::Or => format!("({a} || {b})"),
        BinaryOp::Xor => format!("({a} != {b})"),
    })
}
