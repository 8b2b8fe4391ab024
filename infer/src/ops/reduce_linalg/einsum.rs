//! `Einsum`: the equation is parsed into one label list per operand (letters
//! and at most one ellipsis), every occurrence of a letter is tied to the
//! letter's size (size-1 axes broadcast, as in NumPy), the ellipsis axes of
//! all operands broadcast together, and the output lists the labels of the
//! explicit right-hand side, or — in implicit mode — the ellipsis followed
//! by the letters used once, in alphabetical order.

use super::{broadcast_prefixes, unknown_shape};
use crate::constraint::Constraint;
use crate::rule::{Defer, OpCtx};
use diamond_ir::term::{DimTerm, RowTerm};
use std::collections::BTreeMap;

/// One subscript label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Label {
    /// A letter naming one axis.
    Letter(char),
    /// `...`: the broadcast axes.
    Ellipsis,
}

/// A parsed equation: the operands' labels and the explicit output's, if any.
struct Equation {
    inputs: Vec<Vec<Label>>,
    output: Option<Vec<Label>>,
}

/// Parses one operand's subscripts.
fn parse_term(term: &str) -> Result<Vec<Label>, String> {
    let mut labels = Vec::new();
    let mut rest = term;
    while let Some(c) = rest.chars().next() {
        if let Some(after) = rest.strip_prefix("...") {
            if labels.contains(&Label::Ellipsis) {
                return Err(format!("term '{term}' has two ellipses"));
            }
            labels.push(Label::Ellipsis);
            rest = after;
        } else if c.is_ascii_alphabetic() {
            labels.push(Label::Letter(c));
            rest = &rest[1..];
        } else {
            return Err(format!("term '{term}' has the character '{c}', which is no subscript"));
        }
    }
    Ok(labels)
}

/// Parses the equation (whitespace ignored).
fn parse_equation(equation: &str) -> Result<Equation, String> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let inputs = lhs.split(',').map(parse_term).collect::<Result<Vec<_>, _>>()?;
    let output = rhs.map(parse_term).transpose()?;
    Ok(Equation { inputs, output })
}

/// The implicit output: the ellipsis (when an operand has one), then the
/// letters used exactly once, sorted.
fn implicit_output(inputs: &[Vec<Label>]) -> Vec<Label> {
    let mut counts: BTreeMap<char, usize> = BTreeMap::new();
    let mut ellipsis = false;
    for l in inputs.iter().flatten() {
        match l {
            Label::Letter(c) => *counts.entry(*c).or_default() += 1,
            Label::Ellipsis => ellipsis = true,
        }
    }
    let once = counts.into_iter().filter(|&(_, n)| n == 1).map(|(c, _)| Label::Letter(c));
    ellipsis.then_some(Label::Ellipsis).into_iter().chain(once).collect()
}

/// `Einsum`: see the module documentation.
pub(super) fn einsum(ctx: &mut OpCtx) -> Result<(), Defer> {
    let mut all_dims = Vec::with_capacity(ctx.input_count());
    for i in 0..ctx.input_count() {
        all_dims.push(ctx.need_dims(i)?);
    }
    let t = ctx.same_dtype(&(0..ctx.input_count()).collect::<Vec<_>>());
    let equation = ctx.attr_str("equation").unwrap_or_default();
    let row = parse_equation(&equation).and_then(|eq| {
        if eq.inputs.len() != all_dims.len() {
            return Err(format!(
                "the equation has {} operands but the node {} inputs",
                eq.inputs.len(),
                all_dims.len()
            ));
        }
        output_row(ctx, &eq, &all_dims)
    });
    match row {
        Ok(row) => {
            ctx.set_row(0, row);
            if let Some(t) = t {
                ctx.set_dtype(0, t);
            }
        }
        Err(why) => {
            ctx.invalid(format!("equation '{equation}': {why}"));
            unknown_shape(ctx, 0, t);
        }
    }
    Ok(())
}

/// The output row: letter sizes joined over their occurrences, ellipsis axes broadcast.
fn output_row(ctx: &mut OpCtx, eq: &Equation, all_dims: &[Vec<DimTerm>]) -> Result<RowTerm, String> {
    let mut occurrences: BTreeMap<char, Vec<(usize, DimTerm)>> = BTreeMap::new();
    let mut ellipses = Vec::new();
    for (i, (labels, dims)) in eq.inputs.iter().zip(all_dims).enumerate() {
        let letters = labels.iter().filter(|l| matches!(l, Label::Letter(_))).count();
        let has_ellipsis = labels.contains(&Label::Ellipsis);
        if dims.len() < letters || (!has_ellipsis && dims.len() != letters) {
            return Err(format!("operand {i} has rank {} but {letters} subscripts", dims.len()));
        }
        let ellipsis_rank = dims.len() - letters;
        let mut axis = 0;
        for l in labels {
            match l {
                Label::Letter(c) => {
                    occurrences.entry(*c).or_default().push((i, dims[axis].clone()));
                    axis += 1;
                }
                Label::Ellipsis => {
                    ellipses.push((format!("input {i}"), RowTerm::closed(dims[axis..axis + ellipsis_rank].to_vec())));
                    axis += ellipsis_rank;
                }
            }
        }
    }
    let output = eq.output.clone().unwrap_or_else(|| implicit_output(&eq.inputs));
    let ellipsis = broadcast_prefixes(ctx, ellipses, "ellipsis axes broadcast together");
    let mut before = Vec::new();
    let mut after = Vec::new();
    let mut seen_ellipsis = false;
    for l in &output {
        match l {
            Label::Ellipsis if seen_ellipsis => return Err("the output has two ellipses".into()),
            Label::Ellipsis => seen_ellipsis = true,
            Label::Letter(c) => {
                let Some(occ) = occurrences.get(c) else {
                    return Err(format!("the output's subscript '{c}' names no input axis"));
                };
                if output.iter().filter(|x| **x == Label::Letter(*c)).count() > 1 {
                    return Err(format!("the output repeats subscript '{c}'"));
                }
                let d = letter_size(ctx, *c, occ);
                if seen_ellipsis {
                    after.push(d)
                } else {
                    before.push(d)
                }
            }
        }
    }
    for (c, occ) in &occurrences {
        if !output.contains(&Label::Letter(*c)) {
            letter_size(ctx, *c, occ);
        }
    }
    let ellipsis = if seen_ellipsis { ellipsis } else { RowTerm::closed(Vec::new()) };
    before.extend(ellipsis.leading);
    let mut trailing = ellipsis.trailing;
    trailing.extend(after);
    if ellipsis.var.is_none() {
        // a closed row holds its dims as trailing ones, which broadcasting aligns from the right
        before.extend(trailing);
        return Ok(RowTerm::closed(before));
    }
    Ok(RowTerm { leading: before, var: ellipsis.var, trailing })
}

/// The size of letter `c`: its one axis, or the join every occurrence broadcasts to.
fn letter_size(ctx: &mut OpCtx, c: char, occ: &[(usize, DimTerm)]) -> DimTerm {
    if let [(_, d)] = occ {
        return d.clone();
    }
    let size = ctx.fresh_dim();
    for (i, d) in occ {
        let cause = ctx.cause(&format!("input {i}"), format!("every axis labelled '{c}' has one size"));
        ctx.constrain(Constraint::DimLe(d.clone(), size.clone(), cause));
    }
    size
}

#[cfg(test)]
mod tests {
    use super::{implicit_output, parse_equation, Label};

    fn letters(s: &str) -> Vec<Label> {
        s.chars().map(|c| if c == '.' { Label::Ellipsis } else { Label::Letter(c) }).collect()
    }

    #[test]
    fn equations_parse_with_ellipses_and_spaces() {
        let eq = parse_equation(" ...ij, ...jk -> ...ik").unwrap();
        assert_eq!(eq.inputs, vec![letters(".ij"), letters(".jk")]);
        assert_eq!(eq.output, Some(letters(".ik")));
        assert!(parse_equation("i..j->ij").is_err());
        assert!(parse_equation("......i").is_err());
    }

    #[test]
    fn implicit_output_is_ellipsis_then_letters_used_once_sorted() {
        assert_eq!(implicit_output(&parse_equation("ij,jk").unwrap().inputs), letters("ik"));
        assert_eq!(implicit_output(&parse_equation("ba").unwrap().inputs), letters("ab"));
        assert_eq!(implicit_output(&parse_equation("...ij,...jk").unwrap().inputs), letters(".ik"));
        assert_eq!(implicit_output(&parse_equation("i,i").unwrap().inputs), Vec::new());
    }
}
