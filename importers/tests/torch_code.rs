//! The TorchScript code parser against the printed code of the committed
//! archives (`fixtures/torch/*.pt`), and on small hand-written cases:
//! precedence, slices, assignment forms, the printer's literals, and
//! hostile input (error positions, deep nesting, truncated files).

use std::io::Read;

use diamond_importers::torch::code::ast::{Class, Expr, ExprKind, File, Function, Stmt, StmtKind, TypeExpr};
use diamond_importers::torch::code::parse_file;

/// The `code/**.py` entries of a fixture archive: (entry name, text).
fn code_entries(archive: &str) -> Vec<(String, String)> {
    let path = format!("{}/../fixtures/torch/{archive}.pt", env!("CARGO_MANIFEST_DIR"));
    let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut zip = zip::ZipArchive::new(file).unwrap();
    let mut entries = Vec::new();
    for index in 0..zip.len() {
        let mut entry = zip.by_index(index).unwrap();
        let name = entry.name().unwrap().to_string();
        if name.contains("/code/") && name.ends_with(".py") {
            let mut text = String::new();
            entry.read_to_string(&mut text).unwrap();
            entries.push((name, text));
        }
    }
    assert!(!entries.is_empty(), "{archive} has no code entries");
    entries
}

/// Every code entry of the archive, parsed.
fn parsed_archive(archive: &str) -> Vec<(String, File)> {
    let parse = |(name, text): (String, String)| {
        let file = parse_file(&name, &text).unwrap_or_else(|e| panic!("{e}"));
        (name, file)
    };
    code_entries(archive).into_iter().map(parse).collect()
}

/// The parsed entry whose name ends with `suffix`.
fn entry<'a>(files: &'a [(String, File)], suffix: &str) -> &'a File {
    let found = files.iter().find(|(name, _)| name.ends_with(suffix));
    &found.unwrap_or_else(|| panic!("no entry ending with {suffix}")).1
}

fn class<'a>(file: &'a File, name: &str) -> &'a Class {
    file.classes.iter().find(|c| c.name == name).unwrap_or_else(|| panic!("no class {name}"))
}

fn method<'a>(class: &'a Class, name: &str) -> &'a Function {
    class.methods.iter().find(|m| m.name == name).unwrap_or_else(|| panic!("no method {name} in {}", class.name))
}

/// An expression written compactly, with every operation parenthesized.
fn show(e: &Expr) -> String {
    let list = |items: &[Expr]| items.iter().map(show).collect::<Vec<_>>().join(", ");
    let part = |p: &Option<Box<Expr>>| p.as_deref().map(show).unwrap_or_default();
    match &e.kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::Attribute(value, attr) => format!("{}.{attr}", show(value)),
        ExprKind::Call { func, args, kwargs } => {
            let mut all: Vec<String> = args.iter().map(show).collect();
            all.extend(kwargs.iter().map(|(k, v)| format!("{k}={}", show(v))));
            format!("{}({})", show(func), all.join(", "))
        }
        ExprKind::Subscript(value, index) => format!("{}[{}]", show(value), show(index)),
        ExprKind::Slice(lower, upper, None) => format!("{}:{}", part(lower), part(upper)),
        ExprKind::Slice(lower, upper, step) => format!("{}:{}:{}", part(lower), part(upper), part(step)),
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Float(v) => format!("{v:?}"),
        ExprKind::Str(s) => format!("{s:?}"),
        ExprKind::Bool(b) => if *b { "True" } else { "False" }.to_string(),
        ExprKind::None => "None".to_string(),
        ExprKind::Ellipsis => "...".to_string(),
        ExprKind::Tuple(items) if items.len() == 1 => format!("({},)", show(&items[0])),
        ExprKind::Tuple(items) => format!("({})", list(items)),
        ExprKind::List(items) => format!("[{}]", list(items)),
        ExprKind::Dict(entries) => {
            let shown: Vec<String> = entries.iter().map(|(k, v)| format!("{}: {}", show(k), show(v))).collect();
            format!("{{{}}}", shown.join(", "))
        }
        ExprKind::BinOp(left, op, right) => format!("({} {op} {})", show(left), show(right)),
        ExprKind::Unary(op, operand) if op == "not" => format!("(not {})", show(operand)),
        ExprKind::Unary(op, operand) => format!("({op}{})", show(operand)),
        ExprKind::Compare(left, rest) => {
            let tail: String = rest.iter().map(|(op, right)| format!(" {op} {}", show(right))).collect();
            format!("({}{tail})", show(left))
        }
        ExprKind::BoolOp(op, operands) => {
            let shown: Vec<String> = operands.iter().map(show).collect();
            format!("({})", shown.join(&format!(" {op} ")))
        }
        ExprKind::IfExp { cond, then, orelse } => format!("({} if {} else {})", show(then), show(cond), show(orelse)),
    }
}

/// `body` (lines without indentation) as the body of a function.
fn body_of(body: &str) -> Vec<Stmt> {
    let indented: String = body.lines().map(|line| format!("  {line}\n")).collect();
    let text = format!("def f(x: Tensor) -> Tensor:\n{indented}");
    let file = parse_file("test.py", &text).unwrap_or_else(|e| panic!("{e}"));
    file.functions.into_iter().next().unwrap().body
}

/// The expression `source`, parsed as a returned value.
fn parse_expr(source: &str) -> Expr {
    let body = body_of(&format!("return {source}"));
    match body.into_iter().next().map(|s| s.kind) {
        Some(StmtKind::Return(Some(value))) => value,
        other => panic!("not a return: {other:?}"),
    }
}

fn shown(source: &str) -> String {
    show(&parse_expr(source))
}

/// The error message of parsing `text` as `test.py`.
fn error_of(text: &str) -> String {
    match parse_file("test.py", text) {
        Ok(file) => panic!("parsed, expected an error: {file:?}"),
        Err(e) => e.to_string(),
    }
}

/// Every statement of a body, nested blocks included, depth first.
fn all_statements(body: &[Stmt]) -> Vec<&Stmt> {
    let mut out = Vec::new();
    for stmt in body {
        out.push(stmt);
        match &stmt.kind {
            StmtKind::If { body, orelse, .. } => {
                out.extend(all_statements(body));
                out.extend(all_statements(orelse));
            }
            StmtKind::For { body, .. } | StmtKind::While { body, .. } | StmtKind::With { body, .. } => {
                out.extend(all_statements(body))
            }
            _ => {}
        }
    }
    out
}

/// The value assigned to `name` in `body`.
fn assigned<'a>(body: &'a [Stmt], name: &str) -> &'a Expr {
    let found = all_statements(body).into_iter().find_map(|s| match &s.kind {
        StmtKind::Assign { targets, value } if targets.iter().any(|t| t.kind == ExprKind::Name(name.into())) => {
            Some(value)
        }
        _ => None,
    });
    found.unwrap_or_else(|| panic!("nothing assigned to {name}"))
}

fn type_name(name: &str) -> TypeExpr {
    TypeExpr::Name(name.to_string())
}

// The fixture archives.

#[test]
fn every_fixture_code_entry_parses_into_classes() {
    for archive in ["resnet_tiny", "gpt_tiny", "scripted_control"] {
        for (name, file) in parsed_archive(archive) {
            assert!(!file.classes.is_empty(), "{name}: no classes");
            for class in &file.classes {
                assert!(class.attributes.iter().any(|(a, _)| a == "training"), "{name}: {} lacks training", class.name);
            }
        }
    }
}

#[test]
fn resnet_conv_class() {
    let files = parsed_archive("resnet_tiny");
    let conv = class(entry(&files, "/torch/nn/modules/conv.py"), "Conv2d");
    assert_eq!(conv.bases, vec!["Module"]);
    assert_eq!(conv.parameters, vec!["weight"]);
    assert!(conv.buffers.is_empty());
    assert_eq!(conv.attributes[0], ("weight".to_string(), type_name("Tensor")));
    let optional_bool = TypeExpr::Generic("Optional".into(), vec![type_name("bool")]);
    assert!(conv.attributes.contains(&("_is_full_backward_hook".to_string(), optional_bool)));
    assert_eq!(conv.line, 1);

    let forward = method(conv, "forward");
    assert_eq!(forward.params.len(), 2);
    assert_eq!(forward.params[0].ty, Some(type_name("__torch__.torch.nn.modules.conv.Conv2d")));
    assert_eq!((forward.params[1].name.as_str(), &forward.params[1].ty), ("x", &Some(type_name("Tensor"))));
    assert_eq!(forward.returns, Some(type_name("Tensor")));
    let last = forward.body.last().unwrap();
    assert_eq!(last.kind, StmtKind::Return(Some(Expr { kind: ExprKind::Name("input".into()), line: 11 })));
    assert_eq!(
        show(assigned(&forward.body, "input")),
        "torch._convolution(x, weight, None, [2, 2], [3, 3], [1, 1], False, [0, 0], 1, False, False, True, True)"
    );
}

#[test]
fn resnet_batchnorm_buffers_and_float_literals() {
    let files = parsed_archive("resnet_tiny");
    let bn = class(entry(&files, "/torch/nn/modules/batchnorm.py"), "BatchNorm2d");
    assert_eq!(bn.parameters, vec!["weight", "bias"]);
    assert_eq!(bn.buffers, vec!["running_mean", "running_var", "num_batches_tracked"]);
    let ExprKind::Call { args, .. } = &assigned(&method(bn, "forward").body, "input").kind else { panic!() };
    assert_eq!(args[6].kind, ExprKind::Float(0.1));
    assert_eq!(args[7].kind, ExprKind::Float(1e-05));
}

#[test]
fn resnet_top_module_calls_its_children() {
    let files = parsed_archive("resnet_tiny");
    let top = entry(&files, "resnet_tiny/code/__torch__.py");
    let model = class(top, "TinyResNet");
    assert!(model.attributes.contains(&("conv1".into(), type_name("__torch__.torch.nn.modules.conv.Conv2d"))));
    let forward = method(model, "forward");
    let call = assigned(&forward.body, "_0");
    assert_eq!(show(call), "bn1.forward(conv1.forward(x))");
    let ExprKind::Call { func, args, kwargs } = &call.kind else { panic!() };
    assert!(kwargs.is_empty());
    assert_eq!(
        func.kind,
        ExprKind::Attribute(Box::new(Expr { kind: ExprKind::Name("bn1".into()), line: 24 }), "forward".into())
    );
    assert_eq!(call.line, 24);
    assert_eq!(args.len(), 1);
    assert_eq!(show(assigned(&forward.body, "conv1")), "self.conv1");
    assert_eq!(show(assigned(&forward.body, "input")), "torch.flatten(avgpool.forward(_2), 1)");
    assert!(top.classes.iter().any(|c| c.name == "BasicBlock"));
}

#[test]
fn resnet_sequential_attributes_from_annotations() {
    let files = parsed_archive("resnet_tiny");
    let seq = class(entry(&files, "/torch/nn/modules/container.py"), "Sequential");
    assert!(seq.attributes.contains(&("0".into(), type_name("__torch__.BasicBlock"))));
    assert!(seq.attributes.contains(&("1".into(), type_name("__torch__.___torch_mangle_10.BasicBlock"))));
    assert_eq!(show(assigned(&method(seq, "forward").body, "_1")), "getattr(self, \"1\")");
}

#[test]
fn gpt_tuple_targets_constants_and_shapes() {
    let files = parsed_archive("gpt_tiny");
    let layer = class(entry(&files, "gpt_tiny/code/__torch__.py"), "EncoderLayer");
    let body = &method(layer, "forward").body;
    let unpack = all_statements(body).into_iter().find_map(|s| match &s.kind {
        StmtKind::Assign { targets, value } if matches!(targets[0].kind, ExprKind::Tuple(_)) => Some((targets, value)),
        _ => None,
    });
    let (targets, value) = unpack.expect("a tuple assignment");
    assert_eq!(targets.len(), 1);
    assert_eq!(show(&targets[0]), "(q, k, v)");
    assert_eq!(show(value), "_12");
    assert_eq!(show(assigned(body, "b")), "ops.prim.NumToTensor(torch.size(x, 0))");
    assert_eq!(show(assigned(body, "_12")), "torch.chunk(qkv.forward(ln1.forward(x)), 3, -1)");
    assert_eq!(show(assigned(body, "_13")), "int(torch.floor_divide(d, CONSTANTS.c0))");
    assert_eq!(show(assigned(body, "a")), "torch.scaled_dot_product_attention(q0, k0, v0, None, 0.0, True)");
}

#[test]
fn scripted_control_flow() {
    let files = parsed_archive("scripted_control");
    let scripted = class(entry(&files, "scripted_control/code/__torch__.py"), "Scripted");
    let body = &method(scripted, "forward").body;
    let for_loop = body.iter().find_map(|s| match &s.kind {
        StmtKind::For { target, iter, body } => Some((target, iter, body)),
        _ => None,
    });
    let (target, iter, loop_body) = for_loop.expect("a for loop");
    assert_eq!(show(target), "_0");
    assert_eq!(show(iter), "range(3)");
    assert_eq!(loop_body.len(), 2);
    assert_eq!(show(assigned(loop_body, "y")), "torch.relu(lin.forward(y))");

    let branch = body.iter().find_map(|s| match &s.kind {
        StmtKind::If { cond, body, orelse } => Some((cond, body, orelse)),
        _ => None,
    });
    let (cond, then, orelse) = branch.expect("an if");
    assert_eq!(show(cond), "use_bias");
    assert_eq!(show(assigned(then, "y0")), "torch.add(y, 1.0)");
    assert_eq!(show(assigned(orelse, "y0")), "torch.sub(y, 1.0)");
    let last = body.last().unwrap();
    assert!(matches!(&last.kind, StmtKind::Return(Some(e)) if show(e) == "torch.softmax(y0, -1)"));

    // The scripted Linear's file is mangled (`linear/___torch_mangle_N.py`, N varies with what torch compiled before).
    let linear_file = files
        .iter()
        .find(|(path, _)| path.contains("modules/linear/___torch_mangle_"))
        .map(|(path, _)| path.as_str())
        .expect("a mangled linear.py");
    let linear = class(entry(&files, linear_file), "Linear");
    // torch prints the Final constants in no fixed order: look the constant up by name.
    assert!(linear.constants.iter().any(|(name, e)| name == "in_features" && e.kind == ExprKind::Int(6)));
    assert!(linear.attributes.contains(&("_is_full_backward_hook".into(), type_name("NoneType"))));
    assert!(!linear.attributes.iter().any(|(name, _)| name == "in_features"));
}

#[test]
fn truncated_and_damaged_fixture_code_never_panics() {
    let (name, text) = code_entries("gpt_tiny").into_iter().find(|(n, _)| n.ends_with("code/__torch__.py")).unwrap();
    for cut in (0..text.len()).filter(|&i| text.is_char_boundary(i)) {
        let _ = parse_file(&name, &text[..cut]);
    }
    for (index, replacement) in (0..text.len()).step_by(7).zip([")", "(", ":", "\"", "\n  ", "[", "-"].iter().cycle()) {
        let mut damaged = text.clone();
        damaged.replace_range(index..index + 1, replacement);
        let _ = parse_file(&name, &damaged);
    }
}

// Expressions.

#[test]
fn arithmetic_precedence_and_associativity() {
    assert_eq!(shown("a + b * c ** -d"), "(a + (b * (c ** (-d))))");
    assert_eq!(shown("a - b - c"), "((a - b) - c)");
    assert_eq!(shown("a ** b ** c"), "(a ** (b ** c))");
    assert_eq!(shown("-a ** 2"), "(-(a ** 2))");
    assert_eq!(shown("-2 ** 2"), "(-(2 ** 2))");
    assert_eq!(shown("a // b % c @ d / e"), "((((a // b) % c) @ d) / e)");
    assert_eq!(shown("a | b ^ c & d << e + f"), "(a | (b ^ (c & (d << (e + f)))))");
    assert_eq!(shown("~a >> 1"), "((~a) >> 1)");
    assert_eq!(shown("(a + b) * c"), "((a + b) * c)");
}

#[test]
fn boolean_comparison_and_conditional_precedence() {
    assert_eq!(shown("not a == b and c or d"), "(((not (a == b)) and c) or d)");
    assert_eq!(shown("a and b and c"), "(a and b and c)");
    assert_eq!(shown("a < b <= c"), "(a < b <= c)");
    assert_eq!(shown("a is not None"), "(a is not None)");
    assert_eq!(shown("a is None"), "(a is None)");
    assert_eq!(shown("a not in b"), "(a not in b)");
    assert_eq!(shown("a in [1, 2]"), "(a in [1, 2])");
    assert_eq!(shown("a + 1 if c or d else b"), "((a + 1) if (c or d) else b)");
    assert_eq!(shown("a if b else c if d else e"), "(a if b else (c if d else e))");
    assert_eq!(shown("x | y == z"), "((x | y) == z)");
}

#[test]
fn literals_as_the_printer_writes_them() {
    assert_eq!(shown("[0.10000000000000001, 1.0000000000000001e-05, 0., 1e+301]"), "[0.1, 1e-5, 0.0, 1e301]");
    assert_eq!(shown("(inf, -inf, -1, -0.5)"), "(inf, -inf, -1, -0.5)");
    assert!(matches!(parse_expr("nan").kind, ExprKind::Float(v) if v.is_nan()));
    assert_eq!(shown("-9223372036854775808"), "-9223372036854775808");
    assert_eq!(shown("9223372036854775807"), "9223372036854775807");
    assert_eq!(shown("0x10"), "16");
    assert_eq!(shown(r#"("a\"b\'\n\t\\", 'it\'s', "x" 'y', "\177")"#), r#"("a\"b'\n\t\\", "it's", "xy", "\u{7f}")"#);
    assert_eq!(shown("(True, False, None, ...)"), "(True, False, None, ...)");
    assert_eq!(shown("((), (a,), (a, b,))"), "((), (a,), (a, b))");
    assert_eq!(shown("{\"x\": 1, 'y': 2,}"), "{\"x\": 1, \"y\": 2}");
    assert_eq!(shown("{}"), "{}");
}

#[test]
fn calls_attributes_and_keyword_arguments() {
    assert_eq!(shown("torch.softmax(x, dim=-1)"), "torch.softmax(x, dim=-1)");
    assert_eq!(shown("torch.to(x, 6, False, False, None)"), "torch.to(x, 6, False, False, None)");
    assert_eq!(shown("annotate(List[int], [])"), "annotate(List[int], [])");
    assert_eq!(shown("uninitialized(Tensor)"), "uninitialized(Tensor)");
    assert_eq!(shown("(torch.size(x))[0]"), "torch.size(x)[0]");
    assert_eq!(shown("__torch__.Acc.__new__(__torch__.Acc)"), "__torch__.Acc.__new__(__torch__.Acc)");
    assert_eq!(shown("torch.view(_2, [int(_3), -1])"), "torch.view(_2, [int(_3), -1])");
    assert_eq!(shown("f(\n  a,\n    b=2,\n)"), "f(a, b=2)");
    let call = parse_expr("f(a, k=1)");
    let ExprKind::Call { args, kwargs, .. } = call.kind else { panic!() };
    assert_eq!(args.len(), 1);
    assert_eq!(kwargs[0].0, "k");
}

#[test]
fn subscripts_and_slices() {
    assert_eq!(shown("a[1:2:3]"), "a[1:2:3]");
    assert_eq!(shown("a[:, 0]"), "a[(:, 0)]");
    assert_eq!(shown("a[::2]"), "a[::2]");
    assert_eq!(shown("a[1:]"), "a[1:]");
    assert_eq!(shown("a[:-1]"), "a[:-1]");
    assert_eq!(shown("a[..., None]"), "a[(..., None)]");
    assert_eq!(shown("a[0,]"), "a[(0,)]");
    assert_eq!(shown("d[\"x\"][i + 1]"), "d[\"x\"][(i + 1)]");
    let ExprKind::Subscript(_, index) = parse_expr("a[1:2]").kind else { panic!() };
    assert!(matches!(index.kind, ExprKind::Slice(Some(_), Some(_), None)));
}

// Statements.

#[test]
fn assignment_forms() {
    let body = body_of(
        "q, k, v, = torch.chunk(_1, 3, -1)\n_0, i = _2, i0\na = b = 1\ni += 1\ny : Optional[Tensor] = x\nx.a[0] = 2",
    );
    let StmtKind::Assign { targets, value } = &body[0].kind else { panic!() };
    assert_eq!((show(&targets[0]), show(value)), ("(q, k, v)".into(), "torch.chunk(_1, 3, -1)".into()));
    let StmtKind::Assign { targets, value } = &body[1].kind else { panic!() };
    assert_eq!((show(&targets[0]), show(value)), ("(_0, i)".into(), "(_2, i0)".into()));
    let StmtKind::Assign { targets, value } = &body[2].kind else { panic!() };
    assert_eq!((targets.iter().map(show).collect::<Vec<_>>(), show(value)), (vec!["a".into(), "b".into()], "1".into()));
    assert!(
        matches!(&body[3].kind, StmtKind::AugAssign { target, op, value } if (show(target), op.as_str(), show(value)) == ("i".into(), "+", "1".into()))
    );
    let StmtKind::Assign { targets, value } = &body[4].kind else { panic!() };
    assert_eq!((show(&targets[0]), show(value)), ("y".into(), "x".into()));
    assert!(matches!(&body[5].kind, StmtKind::Assign { targets, .. } if show(&targets[0]) == "x.a[0]"));
    assert_eq!(body.iter().map(|s| s.line).collect::<Vec<_>>(), vec![2, 3, 4, 5, 6, 7]);
}

#[test]
fn control_flow_statements() {
    let text = "\
if torch.__is__(x, None):
  pass
elif a:
  b = 1
else:
  while cond:
    break
for _0 in range(3):
  continue
for a, b in zip(xs, ys):
  pass
with _0:
  y = torch.add(x, 1)
assert x, \"empty\"
raise RuntimeError(\"bad\")
return (a, b)";
    let body = body_of(text);
    let StmtKind::If { cond, body: then, orelse } = &body[0].kind else { panic!() };
    assert_eq!(show(cond), "torch.__is__(x, None)");
    assert_eq!(then[0].kind, StmtKind::Pass);
    let StmtKind::If { cond, orelse: inner_else, .. } = &orelse[0].kind else { panic!("elif nests") };
    assert_eq!((show(cond), orelse[0].line), ("a".into(), 4));
    assert!(matches!(&inner_else[0].kind, StmtKind::While { body, .. } if body[0].kind == StmtKind::Break));
    assert!(matches!(&body[1].kind, StmtKind::For { target, .. } if show(target) == "_0"));
    assert!(matches!(&body[2].kind, StmtKind::For { target, .. } if show(target) == "(a, b)"));
    assert!(
        matches!(&body[3].kind, StmtKind::With { item, target: None, body } if show(item) == "_0" && body.len() == 1)
    );
    assert!(matches!(&body[4].kind, StmtKind::Assert { msg: Some(m), .. } if show(m) == "\"empty\""));
    assert!(matches!(&body[5].kind, StmtKind::Raise(Some(e)) if show(e) == "RuntimeError(\"bad\")"));
    assert!(matches!(&body[6].kind, StmtKind::Return(Some(e)) if show(e) == "(a, b)"));
}

#[test]
fn scripted_printer_forms() {
    let text = "\
op_version_set = 1
import torch
from typing import List
class M(Module):
  __parameters__ = []
  __buffers__ = [\"buf\", ]
  __constants__ = [\"k\"]
  buf : Tensor
  k : Final[float] = 0.5
  seq : __torch__.torch.nn.modules.container.ModuleList
  def forward(self: __torch__.M,
    x: Tensor,
    flag: Optional[Tensor]=None,
    s: str=\"a\\\"b\") -> Tuple[Tensor, Tensor]:
    def __forked_function():
      return __torch__.sub(y, )
    fut = fork(__forked_function)
    return (x, x)
class Color(Enum):
  RED = 1
class Acc:
  items : List[Tensor]
  def __len__(self: __torch__.Acc) -> Tuple[()]:
    return ()
def helper(x: Tensor,
    n: int=2) -> Tuple[Tensor, int]:
  return (torch.mul(x, n), torch.add(n, 1))
";
    let file = parse_file("code/__torch__.py", text).unwrap();
    let m = class(&file, "M");
    assert_eq!((m.parameters.len(), m.buffers.clone()), (0, vec!["buf".to_string()]));
    let constant_names: Vec<&str> = m.constants.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(constant_names, vec!["__constants__", "k"]);
    assert_eq!(m.attributes.len(), 2);
    let forward = method(m, "forward");
    assert_eq!(forward.params[2].default.as_ref().map(show), Some("None".into()));
    assert_eq!(forward.params[3].default.as_ref().map(show), Some("\"a\\\"b\"".into()));
    let pair = TypeExpr::Generic("Tuple".into(), vec![type_name("Tensor"), type_name("Tensor")]);
    assert_eq!(forward.returns, Some(pair));
    let StmtKind::FunctionDef(closure) = &forward.body[0].kind else { panic!("nested def") };
    assert_eq!((closure.name.as_str(), closure.params.len(), closure.line), ("__forked_function", 0, 15));
    assert_eq!(class(&file, "Color").constants[0].0, "RED");
    let acc = class(&file, "Acc");
    assert!(acc.bases.is_empty());
    assert_eq!(method(acc, "__len__").returns, Some(TypeExpr::Generic("Tuple".into(), vec![])));
    assert_eq!(file.functions.len(), 1);
    assert_eq!(file.functions[0].params[1].default.as_ref().map(show), Some("2".into()));
}

#[test]
fn comments_blank_lines_tabs_and_backslashes() {
    let text = "# header\n\nclass A(Module):  # trailing\n\n    # inside\n\tx : int\n\tdef f(self):\n\t\treturn a + \\\n\t\t  b\n";
    let file = parse_file("t.py", text).unwrap();
    let a = class(&file, "A");
    assert_eq!(a.attributes, vec![("x".to_string(), type_name("int"))]);
    assert!(matches!(&method(a, "f").body[0].kind, StmtKind::Return(Some(e)) if show(e) == "(a + b)"));
}

// Errors.

#[test]
fn errors_name_file_line_and_column() {
    let text = "def f(x: Tensor) -> Tensor:\n  y = g(x\n    def h():\n";
    let err = parse_file("code/__torch__/foo.py", text).unwrap_err();
    assert_eq!(err.to_string(), "code/__torch__/foo.py:3:5: expected ')' but found 'def'");
    assert_eq!((err.line, err.col), (3, 5));
    assert_eq!(
        error_of("class A(Module):\n  def f(self):\n  return 1\n"),
        "test.py:3:3: expected an indented block but found 'return'"
    );
    assert_eq!(error_of("def f():\n  return 1 +\n"), "test.py:2:13: expected an expression but found end of line");
    assert_eq!(error_of("def f():\n  x = (1, 2\n"), "test.py:3:1: expected ')' but found end of file");
    assert_eq!(error_of("def f():\n  f(a=1, b)\n"), "test.py:2:10: positional argument after keyword argument");
    assert_eq!(error_of("def f():\n  1 = x\n"), "test.py:2:3: cannot assign to this expression");
    assert_eq!(
        error_of("class A(Module):\n  __parameters__ = [1]\n"),
        "test.py:2:20: __parameters__ must be a list of strings"
    );
    assert_eq!(error_of("  x = 1\n"), "test.py:1:3: unexpected indent");
    assert_eq!(error_of("def f():\n  return [x for x in y]\n"), "test.py:2:13: comprehensions are not supported");
}

#[test]
fn unterminated_string_and_bad_numbers() {
    assert_eq!(error_of("def f():\n  return \"abc\n"), "test.py:2:10: unterminated string literal");
    assert_eq!(error_of("x = 'abc"), "test.py:1:5: unterminated string literal");
    assert_eq!(
        error_of("x = 9223372036854775808"),
        "test.py:1:5: integer literal 9223372036854775808 does not fit in 64 bits"
    );
    assert_eq!(
        error_of("x = 99999999999999999999"),
        "test.py:1:5: integer literal 99999999999999999999 does not fit in 64 bits"
    );
    assert_eq!(error_of("x = 1e"), "test.py:1:5: malformed exponent in '1e'");
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let nested = |open: &str, close: &str, n: usize| format!("x = {}a{}\n", open.repeat(n), close.repeat(n));
    for text in [
        nested("(", ")", 300),
        nested("[", "]", 300),
        nested("f(", ")", 300),
        nested("a[", "]", 300),
        nested("-", "", 100_000),
        nested("not ", "", 100_000),
        nested("", ".b", 100_000),
        nested("", "(x)", 100_000),
        nested("", " + a", 100_000),
        nested("", " ** a", 100_000),
        nested("a if b else ", "", 100_000),
        format!("x : {}int{} = 1\n", "List[".repeat(300), "]".repeat(300)),
    ] {
        let err = error_of(&text);
        assert!(err.contains("nesting too deep"), "{err}");
    }
    let blocks: String = (1..=300).map(|depth| format!("{}if a:\n", " ".repeat(depth))).collect();
    let err = error_of(&format!("def f():\n{blocks}{}pass\n", " ".repeat(301)));
    assert!(err.contains("nesting too deep"), "{err}");
}

#[test]
fn nesting_at_the_limit_fits_a_small_stack_even_unoptimized() {
    let run = || {
        let nested = |open: &str, close: &str, n: usize| format!("x = {}a{}\n", open.repeat(n), close.repeat(n));
        for text in [nested("(", ")", 400), nested("a[", "]", 400), nested("[f(-", ")]", 400), nested("{1: ", "}", 400)]
        {
            assert!(error_of(&text).contains("nesting too deep"));
        }
        let blocks: String = (1..=400).map(|depth| format!("{}while a:\n", " ".repeat(depth))).collect();
        assert!(error_of(&format!("def f():\n{blocks}{}pass\n", " ".repeat(401))).contains("nesting too deep"));
        let branches: String =
            (1..=400).map(|depth| format!("{0}if a:\n{0} pass\n{0}else:\n", " ".repeat(depth))).collect();
        assert!(error_of(&format!("def f():\n{branches}{}pass\n", " ".repeat(401))).contains("nesting too deep"));
    };
    let small_stack = std::thread::Builder::new().stack_size(1 << 20).spawn(run).unwrap();
    small_stack.join().unwrap();
}

#[test]
fn moderate_nesting_is_fine() {
    let text = format!("x = {}a{}\n", "(".repeat(60), ")".repeat(60));
    parse_file("t.py", &text).unwrap();
    let text = format!("x = {}a{}\n", "[f(-".repeat(20), ")]".repeat(20));
    parse_file("t.py", &text).unwrap();
    // Right under the limit, on a test thread's small stack, in a debug build.
    for (open, close, n) in [("(", ")", 195), ("-(", ")", 97), ("a[", "]", 97), ("[", "]", 195)] {
        let text = format!("x = {}a{}\n", open.repeat(n), close.repeat(n));
        parse_file("t.py", &text).unwrap_or_else(|e| panic!("{open}: {e}"));
    }
}

#[test]
fn garbage_is_an_error() {
    for text in
        ["\u{0}", "class", "class A(", "def", "def f(:", "x = )", "x = ]]]", "@", "if x", "a b", "$", "x = 'a' 1"]
    {
        assert!(parse_file("g.py", text).is_err(), "{text:?} parsed");
    }
}
