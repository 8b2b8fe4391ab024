//! What a declared dim in `value_info` or a graph output claims.
//!
//! A `dim_param` on a graph input is a rigid symbol: the caller fixes it.
//! Elsewhere a `dim_param` is only a claim when it is a size expression over
//! those input symbols (`4*batch`, `((seq**2)//seq)`, `Max(1, s0)`), compared
//! with the inferred size by normal form. Any other name (`Flattenout0_dim_0`,
//! `unk__3`, `Reshape_out0_dim_2`) is an exporter saying it did not know the
//! size: an unknown, the same size wherever the same name appears, that
//! inference fills in.

use super::report::{at_producer, DimReport, ValueReport};
use crate::diagnostic::{Assumption, Code, Diagnostic, Severity};
use diamond_ir::entity::EntityId;
use diamond_ir::term::{size_text_symbols, SizeExpr};
use diamond_ir::types::{DimValue, TypeValue};
use diamond_ir::Graph;
use std::collections::{HashMap, HashSet};

/// One declared dim, read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeclaredDim {
    /// A `dim_value`, or an expression that folds to a number.
    Size(u64),
    /// An expression over the input symbols.
    Expr(SizeExpr),
    /// A name the exporter made up: an unknown.
    Unknown(String),
}

/// The symbols of the graph inputs (initializers excluded): their
/// `dim_param`s and the names of their open axes ([`diamond_ir::InputDims`],
/// `x.2`), the rigid symbols a declaration may state sizes in.
pub fn input_symbols(graph: &Graph) -> HashSet<String> {
    diamond_ir::InputDims::of(graph).symbols().map(str::to_string).collect()
}

/// Reads a declared `dim_param` against the input symbols.
pub fn classify(param: &str, symbols: &HashSet<String>) -> DeclaredDim {
    let param = param.trim();
    // An input symbol itself, whatever characters its name has.
    if symbols.contains(param) {
        return DeclaredDim::Expr(SizeExpr::symbol(param));
    }
    let names = size_text_symbols(param);
    if names.iter().any(|n| !symbols.contains(*n)) {
        return DeclaredDim::Unknown(param.to_string());
    }
    match SizeExpr::parse(param) {
        Ok(e) => match e.as_constant() {
            Some(n) if n >= 0 => DeclaredDim::Size(n as u64),
            Some(_) => DeclaredDim::Unknown(param.to_string()),
            None => DeclaredDim::Expr(e),
        },
        Err(_) => DeclaredDim::Unknown(param.to_string()),
    }
}

/// Whether a declared `dim_param` is a claim (a size over the input
/// symbols) rather than a name an exporter made up.
pub fn is_claim(param: &str, symbols: &HashSet<String>) -> bool {
    !matches!(classify(param, symbols), DeclaredDim::Unknown(_))
}

/// The condition under which `declared` and `inferred` are the same size,
/// when they differ only through a `min`/`max` (`seq` against
/// `min(512, seq)`: `seq ≤ 512`); `None` when no such condition makes them
/// agree.
pub fn agreement_condition(declared: &SizeExpr, inferred: &SizeExpr) -> Option<String> {
    agreement_assumptions(declared, inferred).map(|(text, _)| text)
}

/// [`agreement_condition`] as text and as the conditions to check once the
/// symbols are bound.
pub fn agreement_assumptions(declared: &SizeExpr, inferred: &SizeExpr) -> Option<(String, Vec<Assumption>)> {
    one_sided(declared, inferred).or_else(|| one_sided(inferred, declared))
}

/// `plain` equals `extremum` when `extremum` is `min(plain, c)` (then
/// `plain ≤ c`) or `max(plain, c)` (then `plain ≥ c`).
fn one_sided(plain: &SizeExpr, extremum: &SizeExpr) -> Option<(String, Vec<Assumption>)> {
    let (operands, at_most) = match (extremum.min_operands(), extremum.max_operands()) {
        (Some(ops), _) => (ops, true),
        (None, Some(ops)) => (ops, false),
        _ => return None,
    };
    let at = operands.iter().position(|o| o == plain)?;
    let others: Vec<&SizeExpr> = operands.iter().enumerate().filter(|(i, _)| *i != at).map(|(_, o)| o).collect();
    let text: Vec<String> = others.iter().map(|o| o.to_string()).collect();
    let relation = if at_most { "≤" } else { "≥" };
    let assumes = others
        .into_iter()
        .map(|o| {
            if at_most {
                Assumption::AtMost(plain.clone(), o.clone())
            } else {
                Assumption::AtLeast(plain.clone(), o.clone())
            }
        })
        .collect();
    Some((format!("{plain} {relation} {}", text.join(", ")), assumes))
}

/// One declaration of a dim that the exporter named without knowing it.
struct UnknownPlace {
    value: usize,
    axis: usize,
}

/// Compares what `value_info` and the graph outputs of the main graph state
/// with the inferred shapes in `values`: a contradicted size or expression is
/// a `declared-shape-mismatch` error (a warning where the graph's size is
/// over input axes the file left open, which the exporter could not know); one that agrees only under a condition
/// on the symbols is an `implied-bound` assumption; an invented name takes
/// the size inference finds for it (an `info` note says which), and one name
/// found to be two different sizes is a `declared-shape-mismatch` warning.
/// Dims only the declaration knows are filled into `values`. Returns the
/// size each invented name resolved to.
pub(crate) fn check_declarations(
    graph: &Graph,
    symbols: &HashSet<String>,
    values: &mut [ValueReport],
    diagnostics: &mut Vec<Diagnostic>,
) -> HashMap<String, DimReport> {
    let open = diamond_ir::InputDims::of(graph);
    // Per main-graph value id, its entry in `values`.
    let mut index: Vec<Option<u32>> = vec![None; graph.values.len()];
    for (i, v) in values.iter().enumerate() {
        if let Some(id) = v.value {
            index[id.index()] = Some(i as u32);
        }
    }
    let mut unknowns: Vec<(String, Vec<UnknownPlace>)> = Vec::new();
    for vi in graph.value_info.iter().chain(&graph.outputs) {
        let Some(id) = vi.value else { continue };
        let name = graph.value_name(id);
        let Some(declared) = declared_dims(vi.ty.as_ref().and_then(|t| t.value.as_ref()), symbols) else { continue };
        let Some(at) = index[id.index()].map(|i| i as usize) else { continue };
        let v = &mut values[at];
        let Some(shape) = v.shape.clone() else {
            // Inference left even the rank open: the declaration is all there is.
            v.shape = Some(declared.iter().map(|d| as_report(d.as_ref())).collect());
            for (axis, d) in declared.iter().enumerate() {
                if let Some(DeclaredDim::Unknown(n)) = d {
                    place(&mut unknowns, n, UnknownPlace { value: at, axis });
                }
            }
            continue;
        };
        if declared.len() != shape.len() {
            let what = format!("rank {} is stated but the graph implies rank {}", declared.len(), shape.len());
            diagnostics.push(mismatch(graph, id, name, None, what, &declared, &v.shape_text()));
            continue;
        }
        let mut error: Option<(usize, String)> = None;
        for (axis, (d, s)) in declared.iter().zip(&shape).enumerate() {
            let Some(d) = d else { continue };
            match (d, s) {
                (DeclaredDim::Unknown(n), _) => place(&mut unknowns, n, UnknownPlace { value: at, axis }),
                (_, DimReport::Unknown) => v.shape.as_mut().expect("shape")[axis] = as_report(Some(d)),
                (DeclaredDim::Size(n), DimReport::Known(m)) if n == m => {}
                (DeclaredDim::Expr(e), DimReport::Symbolic(t)) => {
                    let Ok(inferred) = SizeExpr::parse(t) else { continue };
                    if *e == inferred {
                        continue;
                    }
                    match agreement_assumptions(e, &inferred) {
                        Some((condition, assumes)) => {
                            let message = format!(
                                "'{name}' axis {axis} is declared as {e} where the graph implies {inferred}: \
                                 they agree only when {condition}"
                            );
                            let help = format!("the model assumes {condition}; check it holds for every input");
                            let mut d =
                                at_producer(graph, id, Code::ImpliedBound, message, Some(axis), help, Vec::new());
                            d.severity = Severity::Warning;
                            d.assumes = assumes;
                            diagnostics.push(d);
                        }
                        None => {
                            error.get_or_insert((
                                axis,
                                format!("axis {axis} is stated as {e} but the graph implies {t}"),
                            ));
                        }
                    }
                }
                (d, s) => {
                    error.get_or_insert((
                        axis,
                        format!("axis {axis} is stated as {} but the graph implies {s}", show_one(d)),
                    ));
                }
            }
        }
        if let Some((axis, what)) = error {
            let inferred = values[at].shape_text();
            let mut d = mismatch(graph, id, name, Some(axis), what, &declared, &inferred);
            // A size the exporter wrote where the graph carries an axis the file
            // left open (onnxmltools' LightGBM writes [1] for a label over
            // [None, 4] rows) is its guess at an unknown size: a warning.
            if let Some(DimReport::Symbolic(t)) = values[at].shape.as_ref().and_then(|s| s.get(axis)) {
                let symbols = size_text_symbols(t);
                if !symbols.is_empty() && symbols.iter().all(|s| open.is_generated(s)) {
                    d.severity = Severity::Warning;
                }
            }
            diagnostics.push(d);
        }
    }
    resolve_unknowns(graph, unknowns, values, diagnostics)
}

fn place(unknowns: &mut Vec<(String, Vec<UnknownPlace>)>, name: &str, p: UnknownPlace) {
    match unknowns.iter_mut().find(|(n, _)| n == name) {
        Some((_, places)) => places.push(p),
        None => unknowns.push((name.to_string(), vec![p])),
    }
}

/// Each invented name takes the one size inference gives its places; the
/// places inference left open take it too.
fn resolve_unknowns(
    graph: &Graph,
    unknowns: Vec<(String, Vec<UnknownPlace>)>,
    values: &mut [ValueReport],
    diagnostics: &mut Vec<Diagnostic>,
) -> HashMap<String, DimReport> {
    let mut resolved = HashMap::new();
    for (name, places) in unknowns {
        let dim_at = |p: &UnknownPlace| values[p.value].shape.as_ref().and_then(|s| s.get(p.axis)).cloned();
        let mut sizes: Vec<(DimReport, &UnknownPlace)> = Vec::new();
        for p in &places {
            match dim_at(p) {
                Some(DimReport::Unknown) | None => {}
                Some(d) => {
                    if !sizes.iter().any(|(s, _)| *s == d) {
                        sizes.push((d, p));
                    }
                }
            }
        }
        match sizes.as_slice() {
            [] => {}
            [(size, first)] => {
                let size = size.clone();
                let others = places.len() - 1;
                let elsewhere = match others {
                    0 => String::new(),
                    1 => " (and at 1 other place)".to_string(),
                    n => format!(" (and at {n} other places)"),
                };
                let message =
                    format!("'{}' axis {} ({name}) is {size}{elsewhere}", values[first.value].name, first.axis);
                let id = graph.value_named(&values[first.value].name);
                diagnostics.push(info(graph, id, message, first.axis));
                for p in &places {
                    if let Some(d) = values[p.value].shape.as_mut().and_then(|s| s.get_mut(p.axis)) {
                        if *d == DimReport::Unknown {
                            *d = size.clone();
                        }
                    }
                }
                resolved.insert(name, size);
            }
            [(a, pa), (b, pb), ..] => {
                let message = format!(
                    "the declared dim '{name}' names one size, but the graph implies {a} at '{}' axis {} and {b} at '{}' axis {}",
                    values[pa.value].name, pa.axis, values[pb.value].name, pb.axis
                );
                let help = format!("'{name}' is a name the exporter gave an axis it could not size; give the two axes different names or none");
                if let Some(id) = graph.value_named(&values[pb.value].name) {
                    let mut d =
                        at_producer(graph, id, Code::DeclaredShapeMismatch, message, Some(pb.axis), help, Vec::new());
                    d.severity = Severity::Warning;
                    diagnostics.push(d);
                }
            }
        }
    }
    resolved
}

fn info(graph: &Graph, id: Option<diamond_ir::ValueId>, message: String, axis: usize) -> Diagnostic {
    let mut d = match id {
        Some(id) => at_producer(graph, id, Code::DeclaredDimResolved, message, Some(axis), String::new(), Vec::new()),
        None => Diagnostic {
            severity: Severity::Info,
            code: Code::DeclaredDimResolved,
            message,
            line: None,
            node: None,
            op: None,
            node_index: None,
            graph: None,
            operand: None,
            axis: Some(axis),
            help: None,
            notes: Vec::new(),
            clash: None,
            assumes: Vec::new(),
        },
    };
    d.severity = Severity::Info;
    d.help = None;
    d
}

fn mismatch(
    graph: &Graph,
    id: diamond_ir::ValueId,
    name: &str,
    axis: Option<usize>,
    what: String,
    declared: &[Option<DeclaredDim>],
    inferred: &str,
) -> Diagnostic {
    let message = format!("declared shape of '{name}' disagrees with the graph: {what}");
    let help = format!("fix or remove the declared shape of '{name}' (value_info or graph output)");
    let shown: Vec<String> = declared.iter().map(|d| d.as_ref().map_or("?".into(), show_one)).collect();
    let notes = vec![format!("declared [{}], inferred {inferred}", shown.join(", "))];
    at_producer(graph, id, Code::DeclaredShapeMismatch, message, axis, help, notes)
}

fn show_one(d: &DeclaredDim) -> String {
    match d {
        DeclaredDim::Size(n) => n.to_string(),
        DeclaredDim::Expr(e) => e.to_string(),
        DeclaredDim::Unknown(n) => n.clone(),
    }
}

/// What a declared dim says as a reported dim: an invented name says nothing.
fn as_report(d: Option<&DeclaredDim>) -> DimReport {
    match d {
        Some(DeclaredDim::Size(n)) => DimReport::Known(*n),
        Some(DeclaredDim::Expr(e)) => DimReport::Symbolic(e.to_string()),
        Some(DeclaredDim::Unknown(_)) | None => DimReport::Unknown,
    }
}

/// A declared tensor shape read against the input symbols (`None` per
/// unstated dim), or `None` with no shape.
pub(crate) fn declared_dims(ty: Option<&TypeValue>, symbols: &HashSet<String>) -> Option<Vec<Option<DeclaredDim>>> {
    let shape = match ty? {
        TypeValue::Tensor { shape, .. } | TypeValue::SparseTensor { shape, .. } => shape.as_ref()?,
        TypeValue::Sequence(i) | TypeValue::Optional(i) => {
            return declared_dims(i.as_deref().and_then(|t| t.value.as_ref()), symbols);
        }
        _ => return None,
    };
    Some(
        shape
            .dims
            .iter()
            .map(|d| match &d.value {
                Some(DimValue::Known(n)) if *n >= 0 => Some(DeclaredDim::Size(*n as u64)),
                Some(DimValue::Param(p)) if !diamond_ir::input_dims::is_open(d.value.as_ref()) => {
                    Some(classify(p, symbols))
                }
                _ => None,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn symbols() -> HashSet<String> {
        ["batch", "seq", "s0"].iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn declared_dims_are_read_against_the_inputs() {
        let s = symbols();
        assert_eq!(classify("batch", &s), DeclaredDim::Expr(SizeExpr::symbol("batch")));
        assert_eq!(classify("((seq**2)//seq)", &s), DeclaredDim::Expr(SizeExpr::symbol("seq")));
        assert_eq!(classify("Flattenout0_dim_0", &s), DeclaredDim::Unknown("Flattenout0_dim_0".into()));
        assert_eq!(classify("unk__3", &s), DeclaredDim::Unknown("unk__3".into()));
        assert_eq!(classify("4*batch*unk__1", &s), DeclaredDim::Unknown("4*batch*unk__1".into()));
        assert_eq!(classify("2*3", &s), DeclaredDim::Size(6));
        assert!(is_claim("Max(1, s0)", &s));
    }

    #[test]
    fn conditions_through_min_and_max() {
        let seq = SizeExpr::symbol("seq");
        let capped = SizeExpr::min(&SizeExpr::constant(512), &seq);
        assert_eq!(agreement_condition(&seq, &capped).as_deref(), Some("seq ≤ 512"));
        assert_eq!(agreement_condition(&capped, &seq).as_deref(), Some("seq ≤ 512"));
        let floor = SizeExpr::max(&SizeExpr::constant(1), &seq);
        assert_eq!(agreement_condition(&seq, &floor).as_deref(), Some("seq ≥ 1"));
        assert_eq!(agreement_condition(&seq, &SizeExpr::symbol("batch")), None);
    }
}
