//! TorchScript IR text: the committed dumps of `fixtures/torch/` parse into
//! the expected structure, each construct of the printed format reads as
//! it should, and bad text is refused with a position, never a panic.

use diamond_importers::torch::irtext::{
    parse_ir, IrAttr, IrGraph, IrNode, IrTextError, IrType, MAX_BLOCK_DEPTH, MAX_TYPE_DEPTH, PYTHON_OP_SCALARS,
};

/// The text of a committed fixture.
fn fixture(name: &str) -> String {
    let path = format!("{}/../fixtures/torch/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Parses text that must be valid.
fn parse_ok(text: &str) -> IrGraph {
    parse_ir("test.ir", text).unwrap_or_else(|e| panic!("{e}"))
}

/// Parses text that must be refused.
fn parse_err(text: &str) -> IrTextError {
    match parse_ir("test.ir", text) {
        Ok(graph) => panic!("parsed, but should not have: {graph:?}"),
        Err(e) => e,
    }
}

/// The first node of `kind`, blocks included.
fn first_of<'g>(graph: &'g IrGraph, kind: &str) -> &'g IrNode {
    graph.all_nodes().into_iter().find(|n| n.kind == kind).unwrap_or_else(|| panic!("no {kind} node"))
}

/// A tensor type with only element type and sizes given.
fn tensor(elem: Option<&str>, sizes: Option<Vec<Option<u64>>>) -> IrType {
    IrType::Tensor { elem: elem.map(str::to_string), sizes, requires_grad: None, device: None }
}

/// The type of the single output of the first node in `text`'s graph.
fn first_output_type(ty: &str) -> IrType {
    let text = format!("graph(%x : Tensor):\n  %y : {ty} = aten::foo(%x)\n  return (%y)\n");
    parse_ok(&text).nodes[0].outputs[0].ty.clone()
}

/// The single attribute of a one-constant graph.
fn constant_attr(ty: &str, value: &str) -> IrAttr {
    let text = format!("graph():\n  %c : {ty} = prim::Constant[value={value}]()\n  return (%c)\n");
    let graph = parse_ok(&text);
    graph.nodes[0].attr("value").cloned().unwrap_or_else(|| panic!("no value in {graph:?}"))
}

/// `levels` `prim::If` nodes, each the only node of the block above it.
fn nested_ifs(levels: usize) -> String {
    let mut text = String::from("graph(%c : bool):\n");
    for level in 0..levels {
        let pad = "  ".repeat(2 * level + 1);
        text += &format!("{pad}%o{level} : int = prim::If(%c)\n{pad}  block0():\n");
    }
    let pad = "  ".repeat(2 * levels + 1);
    text += &format!("{pad}%o{levels} : int = prim::Constant[value=1]()\n");
    for level in (0..levels).rev() {
        let pad = "  ".repeat(2 * level + 1);
        text += &format!("{pad}    -> (%o{})\n", level + 1);
    }
    text + "  return (%o0)\n"
}

#[test]
fn resnet_tiny_dump() {
    let graph = parse_ok(&fixture("resnet_tiny.ir.txt"));
    assert_eq!(graph.inputs.len(), 2);
    assert_eq!(graph.inputs[0].name, "self.1");
    assert_eq!(graph.inputs[0].ty, IrType::Class("__torch__.TinyResNet".into()));
    assert_eq!(graph.inputs[1].name, "x");
    assert_eq!(
        graph.inputs[1].ty,
        IrType::Tensor {
            elem: Some("Float".into()),
            sizes: Some(vec![Some(2), Some(3), Some(32), Some(32)]),
            requires_grad: Some(false),
            device: Some("cpu".into()),
        }
    );
    let conv = first_of(&graph, "aten::_convolution");
    assert_eq!(conv.scope.as_deref(), Some("__module.conv1"));
    assert!(conv.source.as_deref().is_some_and(|s| s.ends_with("torch/nn/modules/conv.py:560:0")));
    assert_eq!(conv.inputs.len(), 13);
    assert_eq!(conv.outputs[0].name, "input.1");
    assert!(graph.all_nodes().iter().any(|n| n.kind == "aten::batch_norm"));
    let get_attr = first_of(&graph, "prim::GetAttr");
    assert_eq!(get_attr.attr("name"), Some(&IrAttr::Str("fc".into())));
    assert_eq!(graph.returns, ["211"]);
}

#[test]
fn gpt_tiny_dump() {
    let graph = parse_ok(&fixture("gpt_tiny.ir.txt"));
    let ids = &graph.inputs[1];
    assert_eq!(ids.name, "ids");
    assert!(matches!(&ids.ty, IrType::Tensor { elem: Some(e), sizes: Some(s), .. }
        if e == "Long" && s == &[Some(2), Some(8)]));
    for kind in ["aten::embedding", "aten::scaled_dot_product_attention", "aten::layer_norm", "aten::gelu"] {
        first_of(&graph, kind);
    }
    let unpack = first_of(&graph, "prim::ListUnpack");
    assert_eq!(unpack.outputs.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["q.1", "k.1", "v.1"]);
    let to_tensor = first_of(&graph, "prim::NumToTensor");
    assert_eq!(
        to_tensor.outputs[0].ty,
        IrType::Tensor {
            elem: Some("Long".into()),
            sizes: Some(vec![]),
            requires_grad: None,
            device: Some("cpu".into())
        }
    );
    let constants: Vec<&IrAttr> =
        graph.all_nodes().into_iter().filter(|n| n.kind == "prim::Constant").filter_map(|n| n.attr("value")).collect();
    for expected in [
        IrAttr::Tensor("{4}".into()),
        IrAttr::Str("none".into()),
        IrAttr::Str("cpu".into()),
        IrAttr::Float(0.1),
        IrAttr::Float(1e-5),
        IrAttr::Int(-1),
    ] {
        assert!(constants.contains(&&expected), "no constant {expected:?}");
    }
    assert_eq!(graph.returns, ["192"]);
}

#[test]
fn scripted_control_dump() {
    let graph = parse_ok(&fixture("scripted_control.ir.txt"));
    assert_eq!(graph.inputs[1].ty, tensor(None, None));
    let looped = first_of(&graph, "prim::Loop");
    assert_eq!(looped.inputs, ["6", "5", "x.1"]);
    assert_eq!(looped.blocks.len(), 1);
    let body = &looped.blocks[0];
    assert_eq!(body.params.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["9", "y.31"]);
    assert_eq!(body.params[0].ty, IrType::Int);
    assert_eq!(body.returns, ["5", "y.3"]);
    assert!(body.nodes.iter().any(|n| n.kind == "aten::linear"));
    let branch = first_of(&graph, "prim::If");
    assert_eq!(branch.blocks.len(), 2);
    assert_eq!(branch.blocks[0].nodes[0].kind, "aten::add");
    assert_eq!(branch.blocks[1].returns, ["y.15"]);
    assert_eq!(branch.outputs[0].name, "y");
    let none = &graph.nodes[0];
    assert_eq!((none.kind.as_str(), none.attrs.len()), ("prim::Constant", 0));
    assert_eq!(none.outputs[0].ty, IrType::NoneType);
    assert_eq!(first_of(&graph, "aten::softmax").line, 25);
    assert_eq!(graph.returns, ["18"]);
}

#[test]
fn tensor_types() {
    let full = first_output_type("Float(2, 3, strides=[3, 1], requires_grad=1, device=cuda:0)");
    let expected = IrType::Tensor {
        elem: Some("Float".into()),
        sizes: Some(vec![Some(2), Some(3)]),
        requires_grad: Some(true),
        device: Some("cuda:0".into()),
    };
    assert_eq!(full, expected);
    let unknown_dim = first_output_type("Float(*, 3, strides=[3, 1], requires_grad=0, device=cpu)");
    assert!(matches!(unknown_dim, IrType::Tensor { sizes: Some(s), .. } if s == [None, Some(3)]));
    assert_eq!(first_output_type("Float(*, *)"), tensor(Some("Float"), Some(vec![None, None])));
    assert_eq!(first_output_type("Tensor(2, *)"), tensor(None, Some(vec![Some(2), None])));
    assert_eq!(first_output_type("Long()"), tensor(Some("Long"), Some(vec![])));
    assert_eq!(first_output_type("FloatTensor"), tensor(Some("Float"), None));
    assert_eq!(first_output_type("Tensor"), tensor(None, None));
    assert_eq!(first_output_type("Tensor(a)"), tensor(None, None));
    assert_eq!(first_output_type("BFloat16(4)"), tensor(Some("BFloat16"), Some(vec![Some(4)])));
    let rank_zero = first_output_type("Float(requires_grad=0, device=cpu)");
    assert!(matches!(rank_zero, IrType::Tensor { sizes: Some(s), requires_grad: Some(false), .. } if s.is_empty()));
}

#[test]
fn other_types() {
    let boxed = |t: IrType| Box::new(t);
    assert_eq!(first_output_type("int[]"), IrType::List(boxed(IrType::Int)));
    assert_eq!(first_output_type("Tensor?[]"), IrType::List(boxed(IrType::Optional(boxed(tensor(None, None))))));
    assert_eq!(first_output_type("float[]?"), IrType::Optional(boxed(IrType::List(boxed(IrType::Float)))));
    assert_eq!(first_output_type("Optional[Tensor]"), IrType::Optional(boxed(tensor(None, None))));
    assert_eq!(
        first_output_type("(Tensor, (int, str), NoneType)"),
        IrType::Tuple(vec![tensor(None, None), IrType::Tuple(vec![IrType::Int, IrType::Str]), IrType::NoneType])
    );
    assert_eq!(first_output_type("()"), IrType::Tuple(vec![]));
    assert_eq!(
        first_output_type("NamedTuple(a : Tensor, b : int)"),
        IrType::Tuple(vec![tensor(None, None), IrType::Int])
    );
    assert_eq!(first_output_type("Device"), IrType::Device);
    assert_eq!(first_output_type("bool"), IrType::Bool);
    assert_eq!(
        first_output_type("__torch__.torch.nn.modules.linear.___torch_mangle_5.Linear"),
        IrType::Class("__torch__.torch.nn.modules.linear.___torch_mangle_5.Linear".into())
    );
    for other in ["Scalar", "Dict(str, Tensor)", "Union(Tensor, int)", "Future[int]", "Enum<__torch__.Color>"] {
        assert_eq!(first_output_type(other), IrType::Other(other.into()), "{other}");
    }
    assert_eq!(first_output_type("Dict(str, int[])[]"), IrType::List(boxed(IrType::Other("Dict(str, int[])".into()))));
}

#[test]
fn constants_of_each_kind() {
    assert_eq!(constant_attr("int", "1"), IrAttr::Int(1));
    assert_eq!(constant_attr("bool", "1"), IrAttr::Int(1));
    assert_eq!(constant_attr("int", "9223372036854775807"), IrAttr::Int(i64::MAX));
    assert_eq!(constant_attr("float", "0.10000000000000001"), IrAttr::Float(0.1));
    assert_eq!(constant_attr("float", "1."), IrAttr::Float(1.0));
    assert_eq!(constant_attr("float", "-inf"), IrAttr::Float(f64::NEG_INFINITY));
    assert_eq!(constant_attr("str", r#""a \"b\" [c], d=e""#), IrAttr::Str(r#"a "b" [c], d=e"#.into()));
    assert_eq!(constant_attr("str", r#""\0)+\/.)""#), IrAttr::Str("é".into()));
    assert_eq!(constant_attr("Device", r#""cpu""#), IrAttr::Str("cpu".into()));
    assert_eq!(constant_attr("int[]", "[1, 2]"), IrAttr::Ints(vec![1, 2]));
    assert_eq!(constant_attr("float[]", "[1.5, 2.]"), IrAttr::Floats(vec![1.5, 2.0]));
    assert_eq!(constant_attr("bool[]", "[True, False]"), IrAttr::Ints(vec![1, 0]));
    assert_eq!(constant_attr("(int, str)", r#"(1, "x")"#), IrAttr::Other(r#"(1, "x")"#.into()));
    assert_eq!(constant_attr("Float()", "{0.5}"), IrAttr::Tensor("{0.5}".into()));
    assert_eq!(constant_attr("Float(20)", "<Tensor>"), IrAttr::Tensor("<Tensor>".into()));
    assert_eq!(
        constant_attr("Float(2, strides=[1], requires_grad=0, device=cpu)", " 0.5000  0.2500 [ CPUFloatType{2} ]"),
        IrAttr::Tensor("0.5000  0.2500 [ CPUFloatType{2} ]".into())
    );
    assert_eq!(constant_attr("complex", "1.+2.j"), IrAttr::Other("1.+2.j".into()));
    let none = parse_ok("graph():\n  %n : NoneType = prim::Constant()\n  return (%n)\n");
    assert!(none.nodes[0].attrs.is_empty());
}

#[test]
fn several_attributes_and_python_ops() {
    let text = "graph(%x : Float(2)):\n  \
        %y : Float(2) = ^Fn[inplace=0, module=\"__main__\", Subgraph=<Graph>](3, None)(%x) # t.py:32:0\n  \
        %z : Tensor = my::op[a=[1, 2], b=\"s, t=u\", c=1.5](%y)\n  \
        return (%z)\n";
    let graph = parse_ok(text);
    let python = &graph.nodes[0];
    assert_eq!(python.kind, "^Fn");
    assert_eq!(python.attr("inplace"), Some(&IrAttr::Int(0)));
    assert_eq!(python.attr("module"), Some(&IrAttr::Str("__main__".into())));
    assert_eq!(python.attr("Subgraph"), Some(&IrAttr::Other("<Graph>".into())));
    assert_eq!(python.attr(PYTHON_OP_SCALARS), Some(&IrAttr::Other("3, None".into())));
    assert_eq!(python.source.as_deref(), Some("t.py:32:0"));
    let custom = &graph.nodes[1];
    assert_eq!(custom.attrs.len(), 3);
    assert_eq!(custom.attr("a"), Some(&IrAttr::Ints(vec![1, 2])));
    assert_eq!(custom.attr("b"), Some(&IrAttr::Str("s, t=u".into())));
    assert_eq!(custom.attr("c"), Some(&IrAttr::Float(1.5)));
}

#[test]
fn tuple_outputs_scopes_and_sources() {
    let text = "graph(%t : (Tensor, Tensor)):\n  \
        %a : Tensor, %b : Tensor = prim::TupleUnpack(%t), scope: __module.layer1/__module.layer1.0 # <stdin>:6:0\n  \
        %c : Tensor = aten::add(%a, %b), scope: __module.fc\n  \
        %d : Tensor = aten::relu(%c) # /a path/with # hash.py:1:2\n  \
        %e : (Tensor, Tensor) = prim::TupleConstruct(%c, %d)\n  \
        return (%e, %a)\n";
    let graph = parse_ok(text);
    let unpack = &graph.nodes[0];
    assert_eq!(unpack.outputs.iter().map(|v| v.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    assert_eq!(unpack.scope.as_deref(), Some("__module.layer1/__module.layer1.0"));
    assert_eq!(unpack.source.as_deref(), Some("<stdin>:6:0"));
    assert_eq!(unpack.line, 2);
    assert_eq!((graph.nodes[1].scope.as_deref(), graph.nodes[1].source.as_deref()), (Some("__module.fc"), None));
    assert_eq!(graph.nodes[2].source.as_deref(), Some("/a path/with # hash.py:1:2"));
    assert_eq!(graph.returns, ["e", "a"]);
}

#[test]
fn nested_blocks_and_node_without_outputs() {
    let text = "graph(%n : int, %x : Tensor):\n  \
        %t : bool = prim::Constant[value=1]()\n  \
        %out : Tensor = prim::Loop(%n, %t, %x)\n    \
          block0(%i : int, %acc : Tensor):\n      \
            %c : bool = aten::gt(%i, %n)\n      \
            %next : Tensor = prim::If(%c)\n        \
              block0():\n          \
                 = prim::RaiseException(%x)\n          \
                -> (%acc)\n        \
              block1():\n          \
                %z : Tensor = aten::neg(%acc)\n          \
                -> (%z)\n      \
            -> (%t, %next)\n  \
        return (%out)\n";
    let graph = parse_ok(text);
    let looped = &graph.nodes[1];
    let branch = &looped.blocks[0].nodes[1];
    assert_eq!(branch.kind, "prim::If");
    assert_eq!(branch.blocks.len(), 2);
    let raise = &branch.blocks[0].nodes[0];
    assert_eq!((raise.kind.as_str(), raise.outputs.len(), raise.line), ("prim::RaiseException", 0, 8));
    assert_eq!(branch.blocks[1].returns, ["z"]);
    assert_eq!(looped.blocks[0].returns, ["t", "next"]);
    let kinds: Vec<&str> = graph.all_nodes().iter().map(|n| n.kind.as_str()).collect();
    assert_eq!(kinds, ["prim::Constant", "prim::Loop", "aten::gt", "prim::If", "prim::RaiseException", "aten::neg"]);
}

#[test]
fn windows_line_endings() {
    let graph = parse_ok("graph(%x : Tensor):\r\n  %y : Tensor = aten::relu(%x) # a.py:1:0\r\n  return (%y)\r\n");
    assert_eq!(graph.nodes[0].source.as_deref(), Some("a.py:1:0"));
}

#[test]
fn undefined_value_is_an_error_at_its_use() {
    let e = parse_err("graph(%x : Tensor):\n  %y : Tensor = aten::add(%x, %w)\n  return (%y)\n");
    assert_eq!((e.line, e.col), (2, 31));
    assert!(e.what.contains("%w"), "{e}");
    let e = parse_err("graph(%x : Tensor):\n  return (%nope)\n");
    assert_eq!((e.line, e.col), (2, 11));
    let own_output = parse_err("graph(%x : Tensor):\n  %y : Tensor = aten::relu(%y)\n  return (%y)\n");
    assert_eq!(own_output.line, 2);
}

#[test]
fn values_of_an_ended_block_are_out_of_scope() {
    let text = "graph(%c : bool):\n  \
        %y : int = prim::If(%c)\n    \
          block0():\n      \
            %inner : int = prim::Constant[value=1]()\n      \
            -> (%inner)\n  \
        %z : int = aten::add(%y, %inner)\n  \
        return (%z)\n";
    let e = parse_err(text);
    assert_eq!(e.line, 6);
    assert!(e.what.contains("out of scope"), "{e}");
}

#[test]
fn duplicate_definition_is_an_error() {
    let e = parse_err("graph(%x : Tensor):\n  %x : Tensor = aten::relu(%x)\n  return (%x)\n");
    assert_eq!(e.line, 2);
    assert!(e.what.contains("defined twice"), "{e}");
    let e = parse_err("graph(%x : Tensor, %x : int):\n  return (%x)\n");
    assert!(e.what.contains("defined twice"), "{e}");
}

#[test]
fn nesting_is_bounded() {
    let deepest_allowed = parse_ok(&nested_ifs(MAX_BLOCK_DEPTH));
    assert_eq!(deepest_allowed.all_nodes().len(), MAX_BLOCK_DEPTH + 1);
    let e = parse_err(&nested_ifs(MAX_BLOCK_DEPTH + 1));
    assert_eq!(e.what, format!("blocks nested deeper than {MAX_BLOCK_DEPTH}"));
    assert_eq!(e.line, 2 * MAX_BLOCK_DEPTH as u32 + 3);

    let deep_tuple = "(".repeat(100_000);
    let e = parse_err(&format!("graph(%x : {deep_tuple}int{}):\n  return (%x)\n", ")".repeat(100_000)));
    assert_eq!(e.what, format!("types nested deeper than {MAX_TYPE_DEPTH}"));
    let long_suffix = "[]".repeat(100_000);
    let e = parse_err(&format!("graph(%x : int{long_suffix}):\n  return (%x)\n"));
    assert_eq!(e.what, format!("types nested deeper than {MAX_TYPE_DEPTH}"));
}

#[test]
fn garbage_is_refused_with_a_position() {
    let e = parse_err("hello world");
    assert_eq!((e.line, e.col), (1, 1));
    assert_eq!(e.to_string(), "test.ir:1:1: expected `graph(`, found `hello world`");
    assert_eq!(parse_err("").what, "expected `graph(`, found end of input");
    let cases = [
        ("graph(%x : Tensor):\n  %y : Tensor = relu(%x)\n  return (%y)\n", 2, 17),
        ("graph(%x : Tensor):\n  %y : Tensor = aten::relu(%x) trailing\n  return (%y)\n", 2, 32),
        ("graph(%x : Tensor):\n  %y : Tensor = aten::relu(%x)\n", 3, 1),
        ("graph(%x : Tensor):\n  %y : Wat(1 = aten::relu(%x)\n  return (%y)\n", 2, 11),
        ("graph(%x : Float(2, @)):\n  return (%x)\n", 1, 21),
        ("graph(%x : Float(99999999999999999999)):\n  return (%x)\n", 1, 18),
        ("graph(%x : Tensor):\n  %c : str = prim::Constant[value=\"open]()\n  return (%c)\n", 2, 35),
        ("graph(%x : Tensor):\n  %c : str = prim::Constant[value=\"\\q\"]()\n  return (%c)\n", 2, 35),
        ("graph(%x : Tensor):\n  %y : Tensor = aten::relu(%x)\n    block3():\n      -> ()\n  return (%y)\n", 3, 5),
        ("graph(%x : Tensor):\n  -> (%x)\n  return (%x)\n", 2, 3),
        ("graph(%x : Tensor):\n  return (%x)\nwith prim::DifferentiableGraph_0 = graph():\n", 3, 1),
        ("graph(%x : Tensor):\n  return (%x)\n  return (%x)\n", 3, 3),
    ];
    for (text, line, col) in cases {
        let e = parse_err(text);
        assert_eq!((e.line, e.col), (line, col), "{text:?}: {e}");
    }
}

#[test]
fn truncated_and_corrupted_text_never_panics() {
    let text = fixture("scripted_control.ir.txt");
    for (cut, _) in text.char_indices() {
        let _ = parse_ir("cut.ir", &text[..cut]);
    }
    const ALPHABET: &[u8] = b"%():,=[]{}<>\"\\#-> \nblock0return*?";
    let bytes = text.as_bytes();
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for _ in 0..2000 {
        let mut mutated = bytes.to_vec();
        for _ in 0..(1 + next() % 4) {
            let at = (next() as usize) % mutated.len();
            mutated[at] = ALPHABET[(next() % ALPHABET.len() as u64) as usize];
        }
        let _ = parse_ir("mutated.ir", &String::from_utf8_lossy(&mutated));
    }
}
