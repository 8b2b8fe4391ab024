//! The verifier: a program's views fit its space, its instructions read
//! earlier ones with the types they need, and each output is written once
//! per point of the axes its value varies with.

use super::expr::{BinaryOp, Inst, Level, UnaryOp};
use super::program::{Extent, Program, View};
use diamond_ir::ElemType;

/// The first inconsistency of `p`, described.
pub fn verify(p: &Program) -> Result<(), String> {
    let n = p.axes.len();
    if p.reduce.windows(2).any(|w| w[0] >= w[1]) || p.reduce.iter().any(|&a| a >= n) {
        return Err(format!("reduction axes {:?} are not increasing axes of a {n}-axis space", p.reduce));
    }
    for (k, op) in p.operands.iter().enumerate() {
        check_view(op, n).map_err(|e| format!("in{k} ('{}'): {e}", op.value))?;
    }
    let levels = p.levels();
    for (i, ins) in p.body.iter().enumerate() {
        let at = |e: String| format!("%{i}: {e}");
        let args = ins.inst.args();
        if let Some(&a) = args.iter().find(|&&a| a >= i) {
            return Err(at(format!("reads %{a}, which is not an earlier instruction")));
        }
        let ty = |a: usize| p.body[a].ty;
        let want = |a: usize, t: ElemType| {
            if ty(a) == t {
                Ok(())
            } else {
                Err(at(format!("%{a} is {}, {t} is needed", ty(a))))
            }
        };
        match ins.inst {
            Inst::Load(k) => match p.operands.get(k) {
                None => return Err(at(format!("loads in{k}, which does not exist"))),
                Some(op) if op.elem != ins.ty => return Err(at(format!("loads {} from in{k} as {}", op.elem, ins.ty))),
                Some(_) => {}
            },
            Inst::Const(_) | Inst::Cast(_) => {}
            Inst::Unary(op, a) => match op {
                UnaryOp::Not => {
                    want(a, ElemType::Bool)?;
                    if ins.ty != ElemType::Bool {
                        return Err(at("not yields bool".into()));
                    }
                }
                UnaryOp::IsNaN => {
                    if ins.ty != ElemType::Bool {
                        return Err(at("isnan yields bool".into()));
                    }
                }
                _ => want(a, ins.ty)?,
            },
            Inst::Binary(op, a, b) => {
                if ty(a) != ty(b) {
                    return Err(at(format!("operands of {op:?} are {} and {}", ty(a), ty(b))));
                }
                if op.is_logical() {
                    want(a, ElemType::Bool)?;
                }
                if op.is_comparison() {
                    if ins.ty != ElemType::Bool {
                        return Err(at(format!("{op:?} yields bool")));
                    }
                } else if op != BinaryOp::PRelu || ty(a) != ins.ty {
                    want(a, ins.ty)?;
                }
            }
            Inst::Select(c, a, b) => {
                want(c, ElemType::Bool)?;
                want(a, ins.ty)?;
                want(b, ins.ty)?;
            }
            Inst::Reduce(_, a) => {
                if p.reduce.is_empty() {
                    return Err(at("a reduction in a program without reduction axes".into()));
                }
                want(a, ins.ty)?;
            }
        }
    }
    for (k, out) in p.outputs.iter().enumerate() {
        let at = |e: String| format!("output {k} ('{}'): {e}", out.view.value);
        check_view(&out.view, n).map_err(at)?;
        let Some(src) = p.body.get(out.source) else {
            return Err(at(format!("writes %{}, which does not exist", out.source)));
        };
        if src.ty != out.view.elem {
            return Err(at(format!("writes {} values as {}", src.ty, out.view.elem)));
        }
        // An output following a reduction axis is written in the last
        // sweep (its value may be constant along it: a broadcast); one
        // that follows none is written per outer point, so its value must
        // not vary along them.
        let full = p.reduce.is_empty() || out.view.axes().any(|a| p.reduce.contains(&a));
        if !full && levels[out.source] == Level::Full {
            return Err(at("a value varying along the reduction axes is written per outer point".into()));
        }
        let mut want: Vec<usize> = (0..n).filter(|a| full || !p.reduce.contains(a)).collect();
        let mut got: Vec<usize> = out.view.axes().collect();
        got.sort_unstable();
        want.sort_unstable();
        if got != want {
            return Err(at(format!("follows axes {got:?}, its value varies with {want:?}")));
        }
        for (d, vd) in out.view.dims.iter().zip(&out.view.view) {
            if vd.start != 0 || vd.step != 1 || (vd.axis.is_none() && *d != Extent::Known(1)) {
                return Err(at("outputs are written densely: dims follow an axis from 0 by 1, or have size 1".into()));
            }
        }
    }
    Ok(())
}

fn check_view(v: &View, n: usize) -> Result<(), String> {
    if v.view.len() != v.dims.len() {
        return Err(format!("{} dims but {} view entries", v.dims.len(), v.view.len()));
    }
    let mut seen = vec![false; n];
    for a in v.axes() {
        if a >= n {
            return Err(format!("follows axis {a} of a {n}-axis space"));
        }
        if std::mem::replace(&mut seen[a], true) {
            return Err(format!("follows axis {a} twice"));
        }
    }
    if v.view.iter().any(|d| d.step == 0) {
        return Err("a dim with step 0".into());
    }
    Ok(())
}
