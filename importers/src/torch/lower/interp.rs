//! Running a module's TorchScript `forward` at import time: submodule calls
//! are inlined (the module path becomes the node-name prefix), parameters
//! become initializers, integer and boolean arithmetic on values known at
//! import is folded, `if` on a known condition takes its branch and
//! `for` over a known range is unrolled. Each tensor operation becomes ONNX
//! nodes through [`super::aten`]. Anything that depends on tensor data (an
//! `if` on a tensor) is a located error.

use super::builder::{GraphBuilder, Origin};
use super::value::{Val, T};
use crate::torch::archive::Archive;
use crate::torch::code::ast::{Class, Expr, ExprKind, File, Function, Stmt, StmtKind};
use crate::torch::values::{StoredTensor, TsObject, TsValue};
use std::collections::{BTreeMap, HashMap};

/// How deep module calls may nest.
const MAX_CALL_DEPTH: usize = 64;
/// How many loop iterations are unrolled in all.
const MAX_UNROLL: usize = 100_000;

/// A failure at a place in the code.
#[derive(Debug)]
pub struct Located {
    /// `code/__torch__/x.py:12`.
    pub at: String,
    /// What is wrong.
    pub message: String,
}

/// An operator with no lowering, counted.
#[derive(Debug, Default)]
pub struct Unsupported {
    /// Operator → (uses, first location).
    pub ops: BTreeMap<String, (usize, String)>,
}

/// Control flow out of a statement list.
enum Flow<'a> {
    Next,
    Return(Val<'a>),
    Break,
    Continue,
}

/// The interpreter's state.
pub struct Interp<'a> {
    pub(super) archive: Option<&'a Archive>,
    pub(super) files: &'a HashMap<String, File>,
    pub(super) b: GraphBuilder,
    pub(super) unsupported: Unsupported,
    /// Parameter tensors already made initializers, by storage key and view.
    params: HashMap<String, T>,
    unrolled: usize,
    depth: usize,
    /// The current code file and module path.
    pub(super) file: String,
    pub(super) origin: Origin,
}

type Env<'a> = HashMap<String, Val<'a>>;

impl<'a> Interp<'a> {
    /// An interpreter building `b` from `archive`'s parsed code `files`.
    pub fn new(archive: Option<&'a Archive>, files: &'a HashMap<String, File>, b: GraphBuilder) -> Interp<'a> {
        Interp {
            archive,
            files,
            b,
            unsupported: Unsupported::default(),
            params: HashMap::new(),
            unrolled: 0,
            depth: 0,
            file: String::new(),
            origin: Origin::default(),
        }
    }

    /// The class definition of `qualified` (`__torch__.torch.nn.modules.conv.Conv2d`).
    pub fn class(&self, qualified: &str) -> Option<(&'a str, &'a Class)> {
        let (path, _) = self.archive?.code_for_class(qualified)?;
        let name = qualified.rsplit('.').next()?;
        let file = self.files.get(path)?;
        file.classes.iter().find(|c| c.name == name).map(|c| (path.as_str(), c))
    }

    /// Calls `method` of `object` (at module `path`) with `args` (without `self`).
    pub fn call_method(
        &mut self,
        object: &'a TsObject,
        path: &str,
        method: &str,
        args: Vec<Val<'a>>,
        line: u32,
    ) -> Result<Val<'a>, Located> {
        let Some((file, class)) = self.class(&object.class) else {
            return Err(self.error(line, format!("no code for class {} (module '{path}')", object.class)));
        };
        let Some(function) = class.methods.iter().find(|f| f.name == method) else {
            return Err(self.error(line, format!("class {} has no method {method}", object.class)));
        };
        if self.depth >= MAX_CALL_DEPTH {
            return Err(self.error(line, format!("module calls nest deeper than {MAX_CALL_DEPTH}")));
        }
        let saved = (std::mem::replace(&mut self.file, file.to_string()), self.origin.clone());
        self.origin.path = path.to_string();
        self.depth += 1;
        let result = self.run_function(function, Val::Module(object, path.to_string()), args);
        self.depth -= 1;
        self.file = saved.0;
        self.origin = saved.1;
        result
    }

    fn run_function(&mut self, f: &'a Function, this: Val<'a>, args: Vec<Val<'a>>) -> Result<Val<'a>, Located> {
        let mut env: Env<'a> = HashMap::new();
        let mut params = f.params.iter();
        if let Some(first) = params.next() {
            env.insert(first.name.clone(), this);
        }
        let mut args = args.into_iter();
        for p in params {
            let v = match (args.next(), &p.default) {
                (Some(v), _) => v,
                (None, Some(d)) => self.eval(d, &mut env)?,
                (None, None) => return Err(self.error(f.line, format!("{}: missing argument '{}'", f.name, p.name))),
            };
            env.insert(p.name.clone(), v);
        }
        match self.exec_block(&f.body, &mut env)? {
            Flow::Return(v) => Ok(v),
            _ => Ok(Val::None),
        }
    }

    fn exec_block(&mut self, body: &'a [Stmt], env: &mut Env<'a>) -> Result<Flow<'a>, Located> {
        for stmt in body {
            match self.exec(stmt, env)? {
                Flow::Next => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Next)
    }

    fn exec(&mut self, stmt: &'a Stmt, env: &mut Env<'a>) -> Result<Flow<'a>, Located> {
        self.origin.source = format!("{}:{}", self.file, stmt.line);
        match &stmt.kind {
            StmtKind::Assign { targets, value } => {
                let v = self.eval(value, env)?;
                for t in targets {
                    self.assign(t, v.clone(), env)?;
                }
            }
            StmtKind::AugAssign { target, op, value } => {
                let current = self.eval(target, env)?;
                let rhs = self.eval(value, env)?;
                let v = self.binop(&current, op, &rhs, stmt.line)?;
                self.assign(target, v, env)?;
            }
            StmtKind::Expr(e) => {
                self.eval(e, env)?;
            }
            StmtKind::Return(e) => {
                let v = match e {
                    Some(e) => self.eval(e, env)?,
                    None => Val::None,
                };
                return Ok(Flow::Return(v));
            }
            StmtKind::If { cond, body, orelse } => {
                let c = self.eval(cond, env)?;
                let taken = self.known_bool(&c, stmt.line, "an `if` condition")?;
                return self.exec_block(if taken { body } else { orelse }, env);
            }
            StmtKind::For { target, iter, body } => return self.exec_for(target, iter, body, env, stmt.line),
            StmtKind::While { cond, body } => loop {
                let c = self.eval(cond, env)?;
                if !self.known_bool(&c, stmt.line, "a `while` condition")? {
                    break;
                }
                self.count_iteration(stmt.line)?;
                match self.exec_block(body, env)? {
                    Flow::Break => break,
                    Flow::Return(v) => return Ok(Flow::Return(v)),
                    _ => {}
                }
            },
            StmtKind::Pass | StmtKind::Other(_) => {}
            StmtKind::Break => return Ok(Flow::Break),
            StmtKind::Continue => return Ok(Flow::Continue),
            StmtKind::Assert { cond, .. } => {
                // An assertion on data cannot be checked at import; a known false one is an error.
                if let Ok(Val::Bool(false)) = self.eval(cond, env) {
                    return Err(self.error(stmt.line, "an assertion fails for these inputs".into()));
                }
            }
            StmtKind::Raise(_) => {
                return Err(self.error(stmt.line, "the code raises an exception on this path".into()));
            }
            StmtKind::With { body, .. } => return self.exec_block(body, env),
            StmtKind::FunctionDef(f) => {
                return Err(
                    self.error(f.line, format!("a nested function '{}' (torch.jit.fork) is not supported", f.name))
                )
            }
        }
        Ok(Flow::Next)
    }

    fn exec_for(
        &mut self,
        target: &'a Expr,
        iter: &'a Expr,
        body: &'a [Stmt],
        env: &mut Env<'a>,
        line: u32,
    ) -> Result<Flow<'a>, Located> {
        let items: Vec<Val<'a>> = match self.eval(iter, env)? {
            Val::List(items) | Val::Tuple(items) => items,
            other => {
                return Err(self.error(line, format!("a `for` over {} (only known ranges and lists)", other.describe())))
            }
        };
        for item in items {
            self.count_iteration(line)?;
            self.assign(target, item, env)?;
            match self.exec_block(body, env)? {
                Flow::Break => break,
                Flow::Return(v) => return Ok(Flow::Return(v)),
                _ => {}
            }
        }
        Ok(Flow::Next)
    }

    fn count_iteration(&mut self, line: u32) -> Result<(), Located> {
        self.unrolled += 1;
        if self.unrolled > MAX_UNROLL {
            return Err(self.error(line, format!("loops unroll to more than {MAX_UNROLL} iterations")));
        }
        Ok(())
    }

    fn known_bool(&mut self, v: &Val<'a>, line: u32, what: &str) -> Result<bool, Located> {
        match v {
            Val::Bool(b) => Ok(*b),
            Val::Int(n) => Ok(*n != 0),
            Val::None => Ok(false),
            other => Err(self.error(
                line,
                format!(
                    "{what} depends on data ({}): only conditions known at import can be lowered",
                    other.describe()
                ),
            )),
        }
    }

    fn assign(&mut self, target: &'a Expr, v: Val<'a>, env: &mut Env<'a>) -> Result<(), Located> {
        match &target.kind {
            ExprKind::Name(n) => {
                env.insert(n.clone(), v);
                Ok(())
            }
            ExprKind::Tuple(targets) | ExprKind::List(targets) => {
                let items = match v {
                    Val::Tuple(items) | Val::List(items) => items,
                    Val::Chunks(x, size, dim) => (0..targets.len() as i64)
                        .map(|i| self.chunk(x, size, dim, i).map(Val::Tensor))
                        .collect::<Result<_, String>>()
                        .map_err(|m| self.error(target.line, m))?,
                    other => return Err(self.error(target.line, format!("cannot unpack {}", other.describe()))),
                };
                if items.len() != targets.len() {
                    return Err(self
                        .error(target.line, format!("unpacking {} values into {} names", items.len(), targets.len())));
                }
                for (t, item) in targets.iter().zip(items) {
                    self.assign(t, item, env)?;
                }
                Ok(())
            }
            _ => Err(self.error(target.line, "assignment to something other than names".into())),
        }
    }

    /// Evaluates an expression.
    pub fn eval(&mut self, e: &'a Expr, env: &mut Env<'a>) -> Result<Val<'a>, Located> {
        Ok(match &e.kind {
            ExprKind::Name(n) => match n.as_str() {
                "inf" => Val::Float(f64::INFINITY),
                "nan" => Val::Float(f64::NAN),
                _ => env.get(n).cloned().ok_or_else(|| self.error(e.line, format!("'{n}' is not defined")))?,
            },
            ExprKind::Int(n) => Val::Int(*n),
            ExprKind::Float(x) => Val::Float(*x),
            ExprKind::Str(s) => Val::Str(s.clone()),
            ExprKind::Bool(b) => Val::Bool(*b),
            ExprKind::None | ExprKind::Ellipsis => Val::None,
            ExprKind::Tuple(items) => Val::Tuple(self.eval_all(items, env)?),
            ExprKind::List(items) => Val::List(self.eval_all(items, env)?),
            ExprKind::Dict(_) => return Err(self.error(e.line, "dict values are not supported".into())),
            ExprKind::Attribute(base, name) => self.attribute(base, name, env, e.line)?,
            ExprKind::Call { func, args, kwargs } => self.call(func, args, kwargs, env, e.line)?,
            ExprKind::Subscript(base, index) => {
                let b = self.eval(base, env)?;
                let i = self.eval(index, env)?;
                self.subscript(b, i, e.line)?
            }
            ExprKind::Slice(..) => return Err(self.error(e.line, "a slice outside a subscript".into())),
            ExprKind::BinOp(l, op, r) => {
                let (a, b) = (self.eval(l, env)?, self.eval(r, env)?);
                self.binop(&a, op, &b, e.line)?
            }
            ExprKind::Unary(op, x) => {
                let v = self.eval(x, env)?;
                self.unary(op, v, e.line)?
            }
            ExprKind::Compare(first, rest) => self.compare(first, rest, env, e.line)?,
            ExprKind::BoolOp(op, items) => {
                let mut result = op == "and";
                for item in items {
                    let v = self.eval(item, env)?;
                    let b = self.known_bool(&v, e.line, "a boolean operand")?;
                    result = if op == "and" { result && b } else { result || b };
                }
                Val::Bool(result)
            }
            ExprKind::IfExp { cond, then, orelse } => {
                let c = self.eval(cond, env)?;
                if self.known_bool(&c, e.line, "a conditional expression")? {
                    self.eval(then, env)?
                } else {
                    self.eval(orelse, env)?
                }
            }
        })
    }

    fn eval_all(&mut self, items: &'a [Expr], env: &mut Env<'a>) -> Result<Vec<Val<'a>>, Located> {
        items.iter().map(|i| self.eval(i, env)).collect()
    }

    fn attribute(&mut self, base: &'a Expr, name: &str, env: &mut Env<'a>, line: u32) -> Result<Val<'a>, Located> {
        if let ExprKind::Name(n) = &base.kind {
            if n == "CONSTANTS" {
                return self.constant(name, line);
            }
        }
        match self.eval(base, env)? {
            Val::Module(object, path) => self.module_attr(object, &path, name, line),
            other => Err(self.error(line, format!("attribute '{name}' of {}", other.describe()))),
        }
    }

    /// `CONSTANTS.cN`: entry N of constants.pkl.
    fn constant(&mut self, name: &str, line: u32) -> Result<Val<'a>, Located> {
        let index: usize = name
            .strip_prefix('c')
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| self.error(line, format!("unknown constant CONSTANTS.{name}")))?;
        let archive = self.archive.ok_or_else(|| self.error(line, format!("CONSTANTS.{name} without an archive")))?;
        let value = archive
            .constants()
            .get(index)
            .ok_or_else(|| self.error(line, format!("CONSTANTS.{name}: constants.pkl has no entry {index}")))?;
        // A 0-d constant tensor is a number torch wrapped (`x * 0.5`): as a
        // number it takes the other operand's type, as torch's promotion does.
        if let TsValue::Tensor(t) = value {
            if t.sizes.is_empty() {
                let bytes = archive.storage(t).map_err(|e| self.error(line, format!("CONSTANTS.{name}: {e}")))?;
                if let Some(v) = scalar_of(t.elem, &bytes) {
                    return Ok(v);
                }
            }
        }
        self.pickled_value(value, &format!("CONSTANTS.{name}"), line)
    }

    pub(super) fn module_attr(
        &mut self,
        object: &'a TsObject,
        path: &str,
        name: &str,
        line: u32,
    ) -> Result<Val<'a>, Located> {
        let value = object
            .attr(name)
            .ok_or_else(|| self.error(line, format!("module '{path}' ({}) has no attribute '{name}'", object.class)))?;
        let child = if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
        self.pickled_value(value, &child, line)
    }

    /// A pickled value as an interpreter value; tensors become initializers named `path`.
    fn pickled_value(&mut self, value: &'a TsValue, path: &str, line: u32) -> Result<Val<'a>, Located> {
        Ok(match value {
            TsValue::None => Val::None,
            TsValue::Bool(b) => Val::Bool(*b),
            TsValue::Int(n) => Val::Int(*n),
            TsValue::Float(x) => Val::Float(*x),
            TsValue::Str(s) => Val::Str(s.clone()),
            TsValue::Tuple(items) => Val::Tuple(self.pickled_values(items, path, line)?),
            TsValue::List(items) => Val::List(self.pickled_values(items, path, line)?),
            TsValue::Dict(_) => return Err(self.error(line, format!("'{path}' is a dict, which is not supported"))),
            TsValue::Tensor(t) => Val::Tensor(self.parameter(t, path, line)?),
            TsValue::Object(o) => Val::Module(o, path.to_string()),
        })
    }

    fn pickled_values(&mut self, items: &'a [TsValue], path: &str, line: u32) -> Result<Vec<Val<'a>>, Located> {
        items.iter().enumerate().map(|(i, v)| self.pickled_value(v, &format!("{path}.{i}"), line)).collect()
    }

    /// The initializer of a stored tensor (made once per storage view).
    fn parameter(&mut self, t: &StoredTensor, path: &str, line: u32) -> Result<T, Located> {
        let key = format!("{}:{}:{}:{:?}:{:?}", t.constant, t.key, t.offset, t.sizes, t.strides);
        if let Some(&known) = self.params.get(&key) {
            return Ok(known);
        }
        let archive =
            self.archive.ok_or_else(|| self.error(line, format!("'{path}': a stored tensor without an archive")))?;
        let bytes = archive.storage(t).map_err(|e| self.error(line, format!("'{path}': {e}")))?;
        let id = self.b.initializer(path, t.elem, &t.sizes, bytes);
        let tensor = T { id, elem: Some(t.elem), rank: Some(t.sizes.len()) };
        self.params.insert(key, tensor);
        Ok(tensor)
    }

    fn subscript(&mut self, base: Val<'a>, index: Val<'a>, line: u32) -> Result<Val<'a>, Located> {
        match (base, index) {
            (Val::Chunks(x, size, dim), Val::Int(i)) => {
                self.chunk(x, size, dim, i).map(Val::Tensor).map_err(|m| self.error(line, m))
            }
            (Val::List(items) | Val::Tuple(items), Val::Int(i)) => {
                let n = items.len() as i64;
                let at = if i < 0 { i + n } else { i };
                items
                    .into_iter()
                    .nth(usize::try_from(at).unwrap_or(usize::MAX))
                    .ok_or_else(|| self.error(line, format!("index {i} out of range for {n} items")))
            }
            (b, i) => Err(self.error(line, format!("indexing {} with {}", b.describe(), i.describe()))),
        }
    }

    fn compare(
        &mut self,
        first: &'a Expr,
        rest: &'a [(String, Expr)],
        env: &mut Env<'a>,
        line: u32,
    ) -> Result<Val<'a>, Located> {
        let mut left = self.eval(first, env)?;
        for (op, right) in rest {
            let r = self.eval(right, env)?;
            let holds = match op.as_str() {
                "is" => matches!((&left, &r), (Val::None, Val::None)),
                "is not" => !matches!((&left, &r), (Val::None, Val::None)),
                _ => match (left.as_f64(), r.as_f64()) {
                    (Some(a), Some(b)) => match op.as_str() {
                        "<" => a < b,
                        "<=" => a <= b,
                        ">" => a > b,
                        ">=" => a >= b,
                        "==" => a == b,
                        "!=" => a != b,
                        _ => return Err(self.error(line, format!("comparison '{op}' is not supported"))),
                    },
                    _ => {
                        return Err(
                            self.error(line, format!("comparing {} with {} needs data", left.describe(), r.describe()))
                        )
                    }
                },
            };
            if !holds {
                return Ok(Val::Bool(false));
            }
            left = r;
        }
        Ok(Val::Bool(true))
    }

    /// A failure at `line` of the current file.
    pub fn error(&self, line: u32, message: String) -> Located {
        Located { at: format!("{}:{line}", self.file), message }
    }

    /// Records an operator with no lowering.
    pub fn unsupported(&mut self, op: &str, line: u32) {
        let at = format!("{}:{line}", self.file);
        let entry = self.unsupported.ops.entry(op.to_string()).or_insert((0, at));
        entry.0 += 1;
    }

    /// Calls a builtin or an operator.
    fn call(
        &mut self,
        func: &'a Expr,
        args: &'a [Expr],
        kwargs: &'a [(String, Expr)],
        env: &mut Env<'a>,
        line: u32,
    ) -> Result<Val<'a>, Located> {
        // `(self.conv1).forward(x, )`: a submodule call.
        if let ExprKind::Attribute(target, method) = &func.kind {
            if let Some(qualified) = dotted(target) {
                if qualified == "torch" || qualified.starts_with("ops.") || qualified.starts_with("torch.") {
                    let op = format!("{qualified}.{method}");
                    let argv = self.eval_all(args, env)?;
                    let kw: Vec<(&'a str, Val<'a>)> = kwargs
                        .iter()
                        .map(|(k, v)| Ok((k.as_str(), self.eval(v, env)?)))
                        .collect::<Result<_, Located>>()?;
                    return self.operator(&op, argv, kw, line);
                }
            }
            let receiver = self.eval(target, env)?;
            if let Val::Module(object, path) = receiver {
                let argv = self.eval_all(args, env)?;
                return self.call_method(object, &path, method, argv, line);
            }
            return Err(self.error(line, format!("method '{method}' called on {}", receiver.describe())));
        }
        let ExprKind::Name(name) = &func.kind else {
            return Err(self.error(line, "a call of something other than a name or method".into()));
        };
        match name.as_str() {
            "annotate" => match args.get(1) {
                Some(v) => self.eval(v, env),
                None => Err(self.error(line, "annotate without a value".into())),
            },
            "uninitialized" => Ok(Val::None),
            "getattr" => {
                let (Some(target), Some(attr)) = (args.first(), args.get(1)) else {
                    return Err(self.error(line, "getattr needs two arguments".into()));
                };
                let (object, path) = match self.eval(target, env)? {
                    Val::Module(o, p) => (o, p),
                    other => return Err(self.error(line, format!("getattr on {}", other.describe()))),
                };
                let Val::Str(attr) = self.eval(attr, env)? else {
                    return Err(self.error(line, "getattr with a name that is not a string".into()));
                };
                self.module_attr(object, &path, &attr, line)
            }
            "range" => {
                let argv = self.eval_all(args, env)?;
                let ints: Option<Vec<i64>> = argv.iter().map(Val::as_int).collect();
                let Some(ints) = ints else {
                    return Err(self.error(line, "range() over a size known only at run time".into()));
                };
                let (start, stop, step) = match ints[..] {
                    [stop] => (0, stop, 1),
                    [start, stop] => (start, stop, 1),
                    [start, stop, step] if step != 0 => (start, stop, step),
                    _ => return Err(self.error(line, "range() with these arguments".into())),
                };
                let count = if step > 0 { (stop - start).max(0) / step } else { (start - stop).max(0) / -step };
                if count as usize > MAX_UNROLL {
                    return Err(self.error(line, format!("range() of {count} items")));
                }
                Ok(Val::List((0..count).map(|i| Val::Int(start + i * step)).collect()))
            }
            "len" => {
                let v = self.eval(args.first().ok_or_else(|| self.error(line, "len()".into()))?, env)?;
                match v.items() {
                    Some(items) => Ok(Val::Int(items.len() as i64)),
                    None => Err(self.error(line, format!("len() of {}", v.describe()))),
                }
            }
            "int" | "float" | "bool" => {
                let v = self.eval(args.first().ok_or_else(|| self.error(line, format!("{name}()")))?, env)?;
                self.convert_scalar(name, v, line)
            }
            "isinstance" => Err(self.error(line, "isinstance() is not supported".into())),
            other => {
                let argv = self.eval_all(args, env)?;
                let kw: Vec<(&'a str, Val<'a>)> =
                    kwargs.iter().map(|(k, v)| Ok((k.as_str(), self.eval(v, env)?))).collect::<Result<_, Located>>()?;
                self.operator(other, argv, kw, line)
            }
        }
    }

    fn convert_scalar(&mut self, to: &str, v: Val<'a>, line: u32) -> Result<Val<'a>, Located> {
        Ok(match (to, v) {
            ("int", Val::Int(n)) => Val::Int(n),
            ("int", Val::Float(x)) => Val::Int(x.trunc() as i64),
            ("int", Val::Bool(b)) => Val::Int(i64::from(b)),
            ("int", Val::RuntimeInt(id)) => Val::RuntimeInt(id),
            ("int", Val::Tensor(t)) => Val::RuntimeInt(self.int64_of(t)),
            ("float", v) if v.as_f64().is_some() => Val::Float(v.as_f64().unwrap_or_default()),
            ("bool", v) if v.as_f64().is_some() => Val::Bool(v.as_f64() != Some(0.0)),
            (to, v) => return Err(self.error(line, format!("{to}() of {}", v.describe()))),
        })
    }

    /// A tensor as a 0-d int64 value.
    pub(super) fn int64_of(&mut self, t: T) -> diamond_ir::ValueId {
        if t.elem == Some(diamond_ir::ElemType::Int64) {
            return t.id;
        }
        let origin = self.origin.clone();
        let attr = super::builder::attr_int("to", diamond_ir::ElemType::Int64.code() as i64);
        self.b.op("Cast", &[t.id], vec![attr], &origin)
    }
}

/// The number a 0-d tensor's bytes hold.
fn scalar_of<'a>(elem: diamond_ir::ElemType, bytes: &[u8]) -> Option<Val<'a>> {
    use diamond_ir::ElemType as E;
    Some(match elem {
        E::Double => Val::Float(f64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)),
        E::Float => Val::Float(f64::from(f32::from_le_bytes(bytes.get(..4)?.try_into().ok()?))),
        E::Int64 => Val::Int(i64::from_le_bytes(bytes.get(..8)?.try_into().ok()?)),
        E::Int32 => Val::Int(i64::from(i32::from_le_bytes(bytes.get(..4)?.try_into().ok()?))),
        E::Bool => Val::Bool(*bytes.first()? != 0),
        _ => return None,
    })
}

/// `a.b.c` as a string, for names and attribute chains of names.
fn dotted(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Name(n) => Some(n.clone()),
        ExprKind::Attribute(base, name) => Some(format!("{}.{name}", dotted(base)?)),
        _ => None,
    }
}
