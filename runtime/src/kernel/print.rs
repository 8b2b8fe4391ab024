//! The text form of kernel programs (`diamond lower --emit kernels`):
//! one header line, the space, one line per operand, instruction and
//! output. Stable: it depends only on the program.

use super::expr::{Inst, UnaryOp};
use super::program::{Program, View};
use super::{LoweredModel, Step};
use diamond_ir::NodeId;
use std::fmt::Write;

/// A whole lowered graph: each step, programs in full; `label` names a node.
pub fn lowered(l: &LoweredModel, label: &dyn Fn(NodeId) -> String) -> String {
    let mut s = String::new();
    for step in &l.steps {
        match step {
            Step::Program(p) => s.push_str(&program(p, label)),
            Step::Contraction(c) => {
                writeln!(s, "contraction {:?} {}", c.op, label(c.node)).unwrap();
                if let Some(p) = &c.epilogue {
                    for line in program(p, label).lines() {
                        writeln!(s, "  {line}").unwrap();
                    }
                }
            }
            Step::Node(n) => writeln!(s, "node {}", label(*n)).unwrap(),
        }
    }
    s
}

/// One program.
pub fn program(p: &Program, label: &dyn Fn(NodeId) -> String) -> String {
    let mut s = String::new();
    let nodes: Vec<String> = p.nodes.iter().map(|&n| label(n)).collect();
    writeln!(s, "kernel {} ({})", p.name, nodes.join(", ")).unwrap();
    let axes: Vec<String> = p.axes.iter().enumerate().map(|(i, e)| format!("d{i}={e}")).collect();
    write!(s, "  space [{}]", axes.join(", ")).unwrap();
    if !p.reduce.is_empty() {
        let r: Vec<String> = p.reduce.iter().map(|a| format!("d{a}")).collect();
        write!(s, " reduce [{}]", r.join(", ")).unwrap();
    }
    s.push('\n');
    for (k, op) in p.operands.iter().enumerate() {
        writeln!(s, "  in{k} = {}", view(op)).unwrap();
    }
    for (i, ins) in p.body.iter().enumerate() {
        let body = match &ins.inst {
            Inst::Load(k) => format!("load in{k}"),
            Inst::Const(c) if ins.ty == diamond_ir::ElemType::Float => format!("const {:?}", *c as f32),
            Inst::Const(c) => format!("const {c:?}"),
            Inst::Unary(op, a) => format!("{} %{a}", unary_name(op)),
            Inst::Binary(op, a, b) => format!("{} %{a}, %{b}", format!("{op:?}").to_lowercase()),
            Inst::Select(c, a, b) => format!("select %{c}, %{a}, %{b}"),
            Inst::Cast(a) => format!("cast %{a}"),
            Inst::Reduce(c, a) => format!("reduce.{} %{a}", c.name()),
        };
        writeln!(s, "  %{i} = {body} : {}", ins.ty).unwrap();
    }
    for out in &p.outputs {
        writeln!(s, "  out {} <- %{}", view(&out.view), out.source).unwrap();
    }
    s
}

fn unary_name(op: &UnaryOp) -> String {
    match op {
        UnaryOp::LeakyRelu(a) => format!("leakyrelu[{a}]"),
        UnaryOp::Elu(a) => format!("elu[{a}]"),
        UnaryOp::Selu { alpha, gamma } => format!("selu[{alpha}, {gamma}]"),
        UnaryOp::HardSigmoid { alpha, beta } => format!("hardsigmoid[{alpha}, {beta}]"),
        UnaryOp::ThresholdedRelu(a) => format!("thresholdedrelu[{a}]"),
        UnaryOp::Clip { min, max } => format!("clip[{min}, {max}]"),
        UnaryOp::PowConst(p) => format!("pow[{p}]"),
        other => format!("{other:?}").to_lowercase(),
    }
}

/// `x: f32[batch, 64] at [d0, 2+3*d1]`.
fn view(v: &View) -> String {
    let dims: Vec<String> = v.dims.iter().map(ToString::to_string).collect();
    let idx: Vec<String> = v
        .view
        .iter()
        .map(|d| match (d.axis, d.start, d.step) {
            (None, 0, _) => "_".to_string(),
            (None, s, _) => s.to_string(),
            (Some(a), 0, 1) => format!("d{a}"),
            (Some(a), 0, k) => format!("{k}*d{a}"),
            (Some(a), s, 1) => format!("{s}+d{a}"),
            (Some(a), s, k) => format!("{s}+{k}*d{a}"),
        })
        .collect();
    format!("'{}': {}[{}] at [{}]", v.value, v.elem, dims.join(", "), idx.join(", "))
}
