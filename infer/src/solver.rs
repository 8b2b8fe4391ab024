//! The solver: constraint intake, the worklist loop, variable binding, and
//! the public result.
//!
//! Constraints are processed from a queue. A rule either discharges its
//! constraint (possibly binding variables and emitting derived constraints),
//! reports a conflict, or parks it until a variable it lacks facts about is
//! solved (a *watch*). Binding or merging a variable wakes the constraints
//! watching it. This is the staged fixpoint of seed 000 without any pass that
//! re-substitutes the whole constraint set: terms are resolved lazily against
//! the union-find `Store`.

use crate::cause::{CauseId, Causes, Origin};
use crate::constraint::{Affine, Constraint, Item, Sum};
use crate::diagnostic::{Code, Diagnostic};
use crate::interned::{Flat, D, R};
use crate::names::Names;
use crate::store::{DimState, RowState, Store};
use diamond_ir::term::{DimTerm, DimVar, RowTerm, RowVar};
use smallvec::SmallVec;
use std::collections::VecDeque;

/// How a tensor's shape closes when the solver leaves it open.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// Data or a graph input: closes upward to what its uses require; holes become `1`/empty.
    Leaf,
    /// A weight: closes upward, and a hole is an `undetermined-parameter` error.
    Param,
    /// Computed inside the graph: free variables close downward.
    Interior,
}

/// A tensor registered with the solver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorId(pub u32);

#[derive(Clone, Debug)]
pub(crate) struct TensorEntry {
    pub(crate) name: Box<str>,
    pub(crate) kind: TensorKind,
    pub(crate) row: R,
    pub(crate) declared: Option<CauseId>,
}

/// A variable a parked constraint waits on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Watch {
    Dim(DimVar),
    Row(RowVar),
}

/// Parked-constraint slots per variable representative, indexed by id: one
/// singly linked list per variable, threaded through a single arena of
/// nodes, so that a million watched variables cost no million small vectors
/// to grow and to free. Lists keep insertion order (they are woken in it).
#[derive(Debug, Default)]
struct Watchers {
    /// First and last node of each variable's list (`NONE` when empty).
    ends: Vec<(u32, u32)>,
    /// `(slot, next node)`.
    nodes: Vec<(u32, u32)>,
}

/// No node.
const NONE: u32 = u32::MAX;

impl Watchers {
    fn ends_mut(&mut self, var: u32) -> &mut (u32, u32) {
        let i = var as usize;
        if self.ends.len() <= i {
            self.ends.resize(i + 1, (NONE, NONE));
        }
        &mut self.ends[i]
    }

    fn add(&mut self, var: u32, slot: usize) {
        let node = self.nodes.len() as u32;
        self.nodes.push((slot as u32, NONE));
        let (head, tail) = *self.ends_mut(var);
        if head == NONE {
            *self.ends_mut(var) = (node, node);
        } else {
            self.nodes[tail as usize].1 = node;
            self.ends_mut(var).1 = node;
        }
    }

    /// Detaches `var`'s list; returns its first and last node.
    fn take(&mut self, var: u32) -> (u32, u32) {
        match self.ends.get_mut(var as usize) {
            Some(ends) => std::mem::replace(ends, (NONE, NONE)),
            None => (NONE, NONE),
        }
    }

    /// Appends the detached list `list` to `var`'s.
    fn append(&mut self, var: u32, list: (u32, u32)) {
        if list.0 == NONE {
            return;
        }
        let (head, tail) = *self.ends_mut(var);
        if head == NONE {
            *self.ends_mut(var) = list;
        } else {
            self.nodes[tail as usize].1 = list.0;
            self.ends_mut(var).1 = list.1;
        }
    }
}

/// What a rule did with its constraint.
pub(crate) enum Step {
    /// Discharged (satisfied, reported, or replaced by derived constraints).
    Done,
    /// Needs more facts about these variables.
    Wait(SmallVec<[Watch; 2]>),
    /// Made progress (grew a row variable) and must run again: queued at the
    /// back, as it is, without being rebuilt.
    Again,
}

/// The constraint solver. See the module documentation.
#[derive(Debug, Default)]
pub struct Solver {
    pub(crate) store: Store,
    pub(crate) causes: Causes,
    queue: VecDeque<Item>,
    pub(crate) pending: Vec<Option<Item>>,
    free_slots: Vec<usize>,
    dim_watch: Watchers,
    row_watch: Watchers,
    pub(crate) diagnostics: Vec<Diagnostic>,
    pub(crate) tensors: Vec<TensorEntry>,
    pub(crate) names: Names,
    /// Variables that stand for what is unknowable from the constraints (an
    /// unsupported operator's output, a data-dependent size, an unstated
    /// input axis): closing never invents a value for them.
    pub(crate) opaque_dims: Vec<DimVar>,
    pub(crate) opaque_rows: Vec<RowVar>,
    /// Whether a size 1 the arithmetic rules compute is the claim-free unit
    /// (`_`) rather than a claimed `1` (see [`Solver::set_computed_units_claim_free`]).
    pub(crate) computed_units_claim_free: bool,
    /// `--strict-units`: widening a stated unit is a warning, not a conflict.
    pub(crate) unit_widening_warns: bool,
    /// Stated units that bounded a variable from below, to check once solved.
    pub(crate) unit_claims: Vec<(DimVar, CauseId)>,
    /// Whether a size with the default basis fits a named basis of the same
    /// size (see [`Solver::set_default_basis_unnamed`]).
    pub(crate) default_basis_unnamed: bool,
}

/// One tensor's shapes in a solution.
#[derive(Clone, Debug)]
pub struct SolvedTensor {
    /// The tensor's name.
    pub name: String,
    /// The principal shape: what solving forced, before closing.
    pub principal: RowTerm,
    /// The closed shape: every variable committed.
    pub closed: RowTerm,
}

/// The outcome of solving and closing.
#[derive(Clone, Debug)]
pub struct Solution {
    /// Each tensor, in registration order.
    pub tensors: Vec<SolvedTensor>,
    /// Conflicts and warnings, by line, then in the order found.
    pub diagnostics: Vec<Diagnostic>,
    /// How to print the variables of the principal shapes.
    pub names: Names,
}

impl Solver {
    /// An empty solver.
    pub fn new() -> Solver {
        Solver::default()
    }

    /// Makes room for `additional` more tensors (a caller that knows how
    /// many it registers spares the list its regrowth).
    pub fn reserve_tensors(&mut self, additional: usize) {
        self.tensors.reserve_exact(additional);
    }

    /// A fresh dimension variable; `name` is used when printing it.
    pub fn fresh_dim(&mut self, name: Option<&str>) -> DimVar {
        let v = self.store.fresh_dim();
        if let Some(name) = name {
            self.names.dims.insert(v.0, name.to_string());
        }
        v
    }

    /// A fresh row variable; `name` is used when printing it.
    pub fn fresh_row(&mut self, name: Option<&str>) -> RowVar {
        let v = self.store.fresh_row();
        if let Some(name) = name {
            self.names.rows.insert(v.0, name.to_string());
        }
        v
    }

    /// Makes a size 1 computed by the arithmetic rules (element counts, sums,
    /// windows) the claim-free unit `_`. ONNX checking without
    /// `--strict-units` sets this: there, no size 1 is a claim unless stated.
    pub fn set_computed_units_claim_free(&mut self, on: bool) {
        self.computed_units_claim_free = on;
    }

    /// `--strict-units`: a stated unit (`1`, a claim) broadcast to a larger
    /// size is reported as a `unit-axis-widened` warning, and solving goes on
    /// as NumPy would.
    pub fn set_unit_widening_warns(&mut self, on: bool) {
        self.unit_widening_warns = on;
    }

    /// Reads the default basis as "meaning not stated": `3` then fits
    /// `3@DATA_CHANNEL` (either way), while two different named bases of the
    /// same size still clash. ONNX checking sets this, since a model's
    /// weights and constants never carry denotations; `.rows` solving keeps
    /// the seed's order, where every basis is its own atom.
    pub fn set_default_basis_unnamed(&mut self, on: bool) {
        self.default_basis_unnamed = on;
    }

    /// A fresh dimension variable that closing never commits without a bound:
    /// a size nothing in the constraints can determine.
    pub fn fresh_opaque_dim(&mut self) -> DimVar {
        let v = self.store.fresh_dim();
        self.opaque_dims.push(v);
        v
    }

    /// A fresh row variable that closing never commits without a bound.
    pub fn fresh_opaque_row(&mut self) -> RowVar {
        let v = self.store.fresh_row();
        self.opaque_rows.push(v);
        v
    }

    /// `row` as far as the constraints so far determine it (solving first).
    pub fn resolve_row(&mut self, row: &RowTerm) -> RowTerm {
        self.solve();
        let r = self.store.intern_row(row);
        let resolved = self.store.row(r);
        self.store.flat_term(&resolved)
    }

    /// `dim` as far as the constraints so far determine it (solving first).
    pub fn resolve_dim(&mut self, dim: &DimTerm) -> DimTerm {
        self.solve();
        let d = self.store.table.term(dim);
        let resolved = self.store.dim(d);
        self.store.table.to_term(resolved)
    }

    /// Records a diagnostic that no single constraint produced (an invalid
    /// attribute, an unsupported operator) with the chain of `cause`.
    pub fn report_fact(&mut self, code: Code, message: String, cause: CauseId, notes: Vec<String>) {
        self.report_fact_assuming(code, message, cause, notes, Vec::new());
    }

    /// [`Solver::report_fact`] for a warning that holds under `assumes`
    /// (see [`crate::diagnostic::Diagnostic::assumes`]).
    pub fn report_fact_assuming(
        &mut self,
        code: Code,
        message: String,
        cause: CauseId,
        notes: Vec<String>,
        assumes: Vec<crate::diagnostic::Assumption>,
    ) {
        let mut diagnostic = self.located(code, message, cause, notes);
        diagnostic.assumes = assumes;
        self.diagnostics.push(diagnostic);
    }

    /// A root cause.
    pub fn cause(&mut self, origin: Origin, rule: impl Into<crate::cause::Rule>) -> CauseId {
        self.causes.root(origin, rule)
    }

    /// A cause derived from `parent` that names axis `n` of its operand.
    pub fn axis_cause(&mut self, parent: CauseId, n: usize) -> CauseId {
        self.causes.axis_of(parent, n)
    }

    /// Registers a named tensor whose shape is `row`, declared by `declared`.
    pub fn add_tensor(&mut self, name: &str, kind: TensorKind, row: RowTerm, declared: Option<CauseId>) -> TensorId {
        self.add_tensor_of(name, kind, &row, declared)
    }

    /// [`Solver::add_tensor`] with the row borrowed. Closing names leaf and
    /// parameter tensors in its messages; an interior tensor's name is only
    /// handed back in [`Solution::tensors`], so a caller that keeps its own
    /// names (the graph check) may pass `""`.
    pub fn add_tensor_of(
        &mut self,
        name: &str,
        kind: TensorKind,
        row: &RowTerm,
        declared: Option<CauseId>,
    ) -> TensorId {
        let row = self.store.intern_row(row);
        self.tensors.push(TensorEntry { name: name.into(), kind, row, declared });
        TensorId(self.tensors.len() as u32 - 1)
    }

    /// Adds a constraint (processed by the next [`Solver::solve`]).
    pub fn add(&mut self, constraint: Constraint) {
        let item = self.intern(&constraint);
        self.queue.push_back(item);
    }

    /// The internal form of a constraint.
    fn intern(&mut self, c: &Constraint) -> Item {
        let store = &mut self.store;
        match c {
            Constraint::DimEq(a, b, cause) => Item::DimEq(store.table.term(a), store.table.term(b), *cause),
            Constraint::DimLe(a, b, cause) => Item::DimLe(store.table.term(a), store.table.term(b), *cause),
            Constraint::RowEq(a, b, cause) => Item::RowEq(store.intern_row(a), store.intern_row(b), *cause),
            Constraint::RowLe(a, b, cause) => Item::RowLe(store.intern_row(a), store.intern_row(b), *cause),
            Constraint::Numel(a, b, cause) => Item::Numel(store.intern_row(a), store.intern_row(b), *cause),
            Constraint::Affine(a) => Item::Affine(Box::new(Affine {
                out: store.table.term(&a.out),
                input: store.table.term(&a.input),
                kernel: store.table.term(&a.kernel),
                pads: a.pads,
                stride: a.stride,
                dilation: a.dilation,
                ceil: a.ceil,
                cause: a.cause,
            })),
            Constraint::Sum(s) => Item::Sum(Box::new(Sum {
                total: store.table.term(&s.total),
                parts: s.parts.iter().map(|p| store.table.term(p)).collect(),
                cause: s.cause,
            })),
        }
    }

    /// Runs the rules to a fixpoint.
    pub fn solve(&mut self) {
        while let Some(constraint) = self.queue.pop_front() {
            match self.apply(&constraint) {
                Step::Done => {}
                Step::Wait(watches) => self.park(constraint, watches),
                Step::Again => self.queue.push_back(constraint),
            }
        }
    }

    /// Solves, records principal shapes, closes, and returns the result.
    pub fn finish(mut self) -> Solution {
        self.solve();
        let (store, tensors) = (&mut self.store, &self.tensors);
        let principal: Vec<RowTerm> = tensors
            .iter()
            .map(|t| {
                let resolved = store.row(t.row);
                store.flat_term(&resolved)
            })
            .collect();
        self.close_and_order();
        let entries = std::mem::take(&mut self.tensors);
        let tensors = entries
            .into_iter()
            .zip(principal)
            .map(|(entry, principal)| {
                let closed = self.store.row(entry.row);
                SolvedTensor { closed: self.store.flat_term(&closed), name: entry.name.into(), principal }
            })
            .collect();
        Solution { tensors, diagnostics: self.diagnostics, names: self.names }
    }

    /// Closes, checks the stated units, and puts the diagnostics in
    /// source order (within a line, in the order found).
    pub(crate) fn close_and_order(&mut self) {
        self.close();
        self.check_unit_claims();
        self.diagnostics.sort_by_key(|d| d.line.unwrap_or(u32::MAX));
    }

    fn apply(&mut self, c: &Item) -> Step {
        match c {
            Item::DimEq(a, b, cause) => self.dim_eq(*a, *b, *cause),
            Item::DimLe(a, b, cause) => self.dim_le(*a, *b, *cause),
            Item::RowEq(a, b, cause) => self.row_eq(*a, *b, *cause),
            Item::RowLe(a, b, cause) => self.row_le(*a, *b, *cause),
            Item::Numel(a, b, cause) => self.numel(*a, *b, *cause),
            Item::Affine(a) => self.affine(a),
            Item::Sum(s) => self.sum(s.total, &s.parts, s.cause),
        }
    }

    /// Parks `constraint` until one of `watches` is bound. Slots of woken
    /// constraints are reused; a watcher left behind on the other variable of
    /// a reused slot can only wake an unrelated constraint early, which then
    /// finds it still lacks facts and parks again.
    fn park(&mut self, constraint: Item, watches: SmallVec<[Watch; 2]>) {
        let slot = match self.free_slots.pop() {
            Some(slot) => {
                self.pending[slot] = Some(constraint);
                slot
            }
            None => {
                self.pending.push(Some(constraint));
                self.pending.len() - 1
            }
        };
        for w in watches {
            match w {
                Watch::Dim(v) => {
                    let root = self.store.find_dim(v);
                    self.dim_watch.add(root.0, slot);
                }
                Watch::Row(v) => {
                    let root = self.store.find_row(v);
                    self.row_watch.add(root.0, slot);
                }
            }
        }
    }

    fn wake_dims(&mut self, list: (u32, u32)) {
        let mut at = list.0;
        while at != NONE {
            let (slot, next) = self.dim_watch.nodes[at as usize];
            self.wake(slot as usize);
            at = next;
        }
    }

    fn wake_rows(&mut self, list: (u32, u32)) {
        let mut at = list.0;
        while at != NONE {
            let (slot, next) = self.row_watch.nodes[at as usize];
            self.wake(slot as usize);
            at = next;
        }
    }

    fn wake(&mut self, slot: usize) {
        if let Some(c) = self.pending.get_mut(slot).and_then(Option::take) {
            self.free_slots.push(slot);
            self.queue.push_back(c);
        }
    }

    /// Parked constraints that are still waiting.
    pub(crate) fn parked(&self) -> impl Iterator<Item = &Item> {
        self.pending.iter().flatten()
    }

    /// Every constraint not yet settled: the parked ones and those a binding
    /// woke that have not run again. Which of the two holds a constraint
    /// depends on the order bindings happened in, so a question about what
    /// still waits asks both.
    pub(crate) fn unsettled(&self) -> impl Iterator<Item = &Item> {
        self.parked().chain(self.queue.iter())
    }

    pub(crate) fn enqueue(&mut self, c: Item) {
        self.queue.push_back(c);
    }

    /// Applies a derived constraint at once instead of queueing it (parking
    /// it if it lacks facts). Only for dimension constraints, whose rules
    /// never apply further constraints themselves, so this never recurses.
    pub(crate) fn apply_now(&mut self, c: Item) {
        match self.apply(&c) {
            Step::Done => {}
            Step::Wait(watches) => self.park(c, watches),
            Step::Again => self.queue.push_back(c),
        }
    }

    /// Binds the free dimension variable `v` to `value`.
    pub(crate) fn bind_dim(&mut self, v: DimVar, value: D, cause: CauseId) {
        let root = self.store.find_dim(v);
        let upper = match *self.store.dim_state(root) {
            DimState::Free { upper } => upper,
            DimState::Solved { .. } => return,
        };
        self.store.set_dim(root, DimState::Solved { value, cause });
        if let Some((bound, bound_cause)) = upper {
            let c = self.causes.derived(bound_cause, "the variable was bounded above here");
            self.enqueue(Item::DimLe(value, bound, c));
        }
        let woken = self.dim_watch.take(root.0);
        self.wake_dims(woken);
    }

    /// Merges two free dimension variables.
    pub(crate) fn union_dim(&mut self, a: DimVar, b: DimVar, cause: CauseId) {
        let (ra, rb) = (self.store.find_dim(a), self.store.find_dim(b));
        let (upper_a, upper_b) = (self.dim_upper(ra), self.dim_upper(rb));
        let (root, _) = self.store.union_dims(ra, rb);
        let child = if root == ra { rb } else { ra };
        self.inherit_name(root.0, child.0, true);
        let merged = match (upper_a, upper_b) {
            (Some(x), Some(y)) if x.0 != y.0 => {
                let (bx, by) = (self.store.table.dim(x.0), self.store.table.dim(y.0));
                let c = self.causes.derived(cause, format!("upper bounds {bx} and {by} meet at _"));
                self.store.set_dim(root, DimState::Free { upper: None });
                self.merge_dim_watchers(ra, rb, root);
                self.bind_dim(root, D::UNIT, c);
                return;
            }
            (Some(x), _) | (None, Some(x)) => Some(x),
            (None, None) => None,
        };
        self.store.set_dim(root, DimState::Free { upper: merged });
        self.merge_dim_watchers(ra, rb, root);
    }

    /// Moves the watchers of two merged classes to the new root. They are not
    /// woken: merging adds no ground fact, and whatever binds the class later
    /// wakes them all.
    fn merge_dim_watchers(&mut self, a: DimVar, b: DimVar, root: DimVar) {
        let (la, lb) = (self.dim_watch.take(a.0), self.dim_watch.take(b.0));
        self.dim_watch.append(root.0, la);
        self.dim_watch.append(root.0, lb);
    }

    fn dim_upper(&mut self, v: DimVar) -> Option<(D, CauseId)> {
        match *self.store.dim_state(v) {
            DimState::Free { upper } => upper,
            DimState::Solved { .. } => None,
        }
    }

    /// Records `v ⊑ bound`; a second, different bound collapses `v` to `_`.
    pub(crate) fn bound_dim(&mut self, v: DimVar, bound: D, cause: CauseId) {
        if self.store.table.is_unit(bound) {
            self.bind_dim(v, D::UNIT, cause);
            return;
        }
        match self.dim_upper(v) {
            None => self.store.set_dim(v, DimState::Free { upper: Some((bound, cause)) }),
            Some((old, _)) if old == bound => {}
            Some((old, _)) => {
                let (old, bound) = (self.store.table.dim(old), self.store.table.dim(bound));
                let c = self.causes.derived(cause, format!("upper bounds {old} and {bound} meet at _"));
                self.bind_dim(v, D::UNIT, c);
            }
        }
    }

    /// Binds the free row variable `v` to `value` (already resolved).
    pub(crate) fn bind_row(&mut self, v: RowVar, value: R, cause: CauseId) {
        let root = self.store.find_row(v);
        let upper = match *self.store.row_state(root) {
            RowState::Free { upper } => upper,
            RowState::Solved { .. } => return,
        };
        self.store.set_row(root, RowState::Solved { value, cause });
        if let Some((bound, bound_cause)) = upper {
            let c = self.causes.derived(bound_cause, "the row variable was bounded above here");
            self.enqueue(Item::RowLe(value, bound, c));
        }
        let woken = self.row_watch.take(root.0);
        self.wake_rows(woken);
    }

    /// Merges two free row variables.
    pub(crate) fn union_row(&mut self, a: RowVar, b: RowVar, cause: CauseId) {
        let (ra, rb) = (self.store.find_row(a), self.store.find_row(b));
        let (upper_a, upper_b) = (self.row_upper(ra), self.row_upper(rb));
        let (root, _) = self.store.union_rows(ra, rb);
        let child = if root == ra { rb } else { ra };
        self.inherit_name(root.0, child.0, false);
        let merged = match (upper_a, upper_b) {
            (Some(x), Some(y)) => Some((self.meet_bounds(x.0, y.0, cause), cause)),
            (Some(x), None) | (None, Some(x)) => Some(x),
            (None, None) => None,
        };
        self.store.set_row(root, RowState::Free { upper: merged });
        let (la, lb) = (self.row_watch.take(ra.0), self.row_watch.take(rb.0));
        self.row_watch.append(root.0, la);
        self.row_watch.append(root.0, lb);
    }

    pub(crate) fn row_upper(&mut self, v: RowVar) -> Option<(R, CauseId)> {
        match *self.store.row_state(v) {
            RowState::Free { upper } => upper,
            RowState::Solved { .. } => None,
        }
    }

    /// Records `v ⊑ bound`; a second bound is met with the first.
    pub(crate) fn bound_row(&mut self, v: RowVar, bound: R, cause: CauseId) {
        let merged = match self.row_upper(v) {
            None => bound,
            Some((old, _)) => self.meet_bounds(old, bound, cause),
        };
        self.store.set_row(v, RowState::Free { upper: Some((merged, cause)) });
    }

    /// The meet of two upper-bound rows. Where two axes differ and one is a
    /// variable, the meet is not known yet (`1 ⊓ 'a` is `1` if `'a` becomes
    /// 1, `_` otherwise): it becomes a fresh variable bounded by both, so the
    /// result does not depend on the order constraints arrive in.
    fn meet_bounds(&mut self, a: R, b: R, cause: CauseId) -> R {
        let (al, bl): (SmallVec<[D; 8]>, SmallVec<[D; 8]>) =
            (self.store.leading(a).iter().copied().collect(), self.store.leading(b).iter().copied().collect());
        let (at, bt): (SmallVec<[D; 8]>, SmallVec<[D; 8]>) =
            (self.store.trailing(a).iter().copied().collect(), self.store.trailing(b).iter().copied().collect());
        let trail = at.len().min(bt.len());
        let mut leading: SmallVec<[D; 8]> = SmallVec::new();
        for (&x, &y) in al.iter().zip(&bl) {
            leading.push(self.meet_dims(x, y, cause));
        }
        let mut trailing: SmallVec<[D; 8]> = SmallVec::new();
        for (&x, &y) in at[at.len() - trail..].iter().zip(&bt[bt.len() - trail..]) {
            trailing.push(self.meet_dims(x, y, cause));
        }
        self.store.alloc(&leading, None, &trailing)
    }

    /// The meet of two dimensions: equal ones stay, two different ground
    /// ones meet at `_`, and a variable's meet waits in a fresh variable.
    fn meet_dims(&mut self, x: D, y: D, cause: CauseId) -> D {
        let (x, y) = (self.store.dim(x), self.store.dim(y));
        if x == y {
            return x;
        }
        if x.as_var().is_none() && y.as_var().is_none() {
            return self.named_of_same_size(x, y).unwrap_or(D::UNIT);
        }
        let m = D::var(self.store.fresh_dim());
        let c = self.causes.derived(cause, "the meet of two upper bounds");
        self.enqueue(Item::DimLe(m, x, c));
        self.enqueue(Item::DimLe(m, y, c));
        m
    }

    fn inherit_name(&mut self, root: u32, child: u32, dim: bool) {
        let names = if dim { &mut self.names.dims } else { &mut self.names.rows };
        if !names.contains_key(&root) {
            if let Some(name) = names.get(&child).cloned() {
                names.insert(root, name);
            }
        }
    }

    /// Records a diagnostic for the failed constraint `cause`, with `facts`
    /// explaining each clashing term.
    pub(crate) fn report(&mut self, code: Code, message: String, cause: CauseId, facts: Vec<String>) {
        self.report_assuming(code, message, cause, facts, Vec::new());
    }

    /// [`Solver::report`] for a warning that holds under `assumes`.
    pub(crate) fn report_assuming(
        &mut self,
        code: Code,
        message: String,
        cause: CauseId,
        facts: Vec<String>,
        assumes: Vec<crate::diagnostic::Assumption>,
    ) {
        let mut notes = facts;
        notes.push(format!("required by {}", self.causes.chain_text(cause)));
        let mut diagnostic = self.located(code, message, cause, notes);
        diagnostic.assumes = assumes;
        self.diagnostics.push(diagnostic);
    }

    /// A diagnostic located where `cause`'s chain starts: the `.rows` line,
    /// or the node, operand and axis.
    fn located(&self, code: Code, message: String, cause: CauseId, notes: Vec<String>) -> Diagnostic {
        let mut d = Diagnostic {
            severity: code.severity(),
            code,
            message,
            line: self.causes.line(cause),
            node: None,
            op: None,
            node_index: None,
            graph: None,
            operand: None,
            axis: self.causes.axis(cause),
            help: None,
            notes,
            clash: None,
            assumes: Vec::new(),
        };
        if let Some(Origin::Operand { site, operand }) = self.causes.origin(cause) {
            d.node = Some(if site.name.is_empty() { site.to_string() } else { site.name.to_string() });
            d.op = Some(site.op.to_string());
            d.node_index = Some(site.index);
            d.graph = (!site.graph.is_empty()).then(|| site.graph.to_string());
            d.operand = (&**operand != "node").then(|| operand.to_string());
        }
        d
    }

    /// How a term's value came about, for diagnostics: `'a is 3 because ...`.
    pub(crate) fn explain_dim(&mut self, t: D) -> Option<String> {
        let v = t.as_var()?;
        let name = self.dim_name(v);
        match *self.store.dim_state(v) {
            DimState::Solved { value, cause } => {
                let value = self.store.table.dim(value).readable();
                Some(format!("{name} is {value} because of {}", self.causes.chain_text(cause)))
            }
            DimState::Free { .. } => None,
        }
    }

    /// Names a variable made for `base` (a template's fresh variables are
    /// named after the row variable they grew from: `c.0`, `c.r`).
    pub(crate) fn name_derived(
        &mut self,
        base: RowVar,
        dim: Option<DimVar>,
        row: Option<RowVar>,
        suffix: &dyn std::fmt::Display,
    ) {
        let root = self.store.find_row(base);
        // Unnamed variables print by id; only named ones pass their name on.
        let Some(base) = self.names.rows.get(&root.0).or_else(|| self.names.rows.get(&base.0)).cloned() else {
            return;
        };
        if let Some(d) = dim {
            self.names.dims.insert(d.0, format!("{base}.{suffix}"));
        }
        if let Some(r) = row {
            self.names.rows.insert(r.0, format!("{base}.{suffix}"));
        }
    }

    /// The printed name of a dimension variable.
    pub(crate) fn dim_name(&mut self, v: DimVar) -> String {
        let root = self.store.find_dim(v);
        self.names.dim(root)
    }

    /// A row in row notation, with variable names.
    pub(crate) fn show_row(&mut self, r: R) -> String {
        let resolved = self.store.row(r);
        let mut term = self.store.flat_term(&resolved);
        // Diagnostics print sizes readable: `ceil(H/2)`, not `floor((H-1)/2)+1`.
        for d in term.leading.iter_mut().chain(term.trailing.iter_mut()) {
            if let DimTerm::Dim(dim) = d {
                *dim = dim.readable();
            }
        }
        self.names.row(&term)
    }

    /// A resolved row in row notation, resolved again (what it holds may
    /// have been solved since).
    pub(crate) fn show_flat(&mut self, f: &Flat) -> String {
        let r = self.store.alloc_flat(f);
        self.show_row(r)
    }
}
