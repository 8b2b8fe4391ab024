//! What each diagnostic code means, for SARIF's rule table: a one-line
//! description and how to address it.

use diamond::check::Code;

/// A one-line description of `code`.
pub fn short_description(code: Code) -> &'static str {
    match code {
        Code::BroadcastConflict => "Two dimensions cannot broadcast to each other.",
        Code::RankConflict => "A tensor has too few or too many axes for what is required of it.",
        Code::DimMismatch => "Two dimensions that must be equal differ.",
        Code::ElementCountMismatch => "Two shapes that must hold the same number of elements do not.",
        Code::DynamicAxisSpecialized => "A dynamic axis is forced to a constant or another symbol.",
        Code::UndeterminedParameter => "Nothing determines an axis of a parameter.",
        Code::DtypeMismatch => "Operands' element types break the operator's type constraints.",
        Code::DeclaredShapeMismatch => "A value_info or graph-output shape disagrees with what the graph implies.",
        Code::InvalidAttribute => "An attribute or constant operand is out of range or malformed.",
        Code::InvalidGraph => "The graph is malformed: a dangling name, a cycle, a value produced twice.",
        Code::UnsupportedOp => "An operator diamond has no rule for; its outputs stay unknown.",
        Code::ImpliedBound => "The graph is valid only under a bound on a dynamic axis.",
        Code::Divisibility => "The graph is valid only when a dynamic size is divisible by a constant.",
        Code::UnitAxisWidened => "A stated unit axis is widened by broadcasting.",
        Code::SizeOverflow => "A value holds more elements than 64 bits can count.",
        Code::DeclaredDimResolved => "A dim name the exporter invented (unk__3) is a size the graph determines.",
        Code::OnesVector => "A uniform tensor (a ones-vector) only sums out an axis.",
    }
}

/// How to address a finding of `code`.
pub fn help(code: Code) -> &'static str {
    match code {
        Code::BroadcastConflict => {
            "Make the sizes equal, or make one of them 1 so that it broadcasts; the notes say where each size comes from."
        }
        Code::RankConflict => "Reshape or unsqueeze the operand so that its rank fits the operator.",
        Code::DimMismatch => "Make the two sizes equal; the notes say where each comes from.",
        Code::ElementCountMismatch => "Fix the target shape so that it holds as many elements as the input.",
        Code::DynamicAxisSpecialized => {
            "Check that the model is meant to run only at this size, or make the other operand dynamic too."
        }
        Code::UndeterminedParameter => "Give the parameter a concrete shape.",
        Code::DtypeMismatch => "Insert a Cast so that the operands have the types the operator allows.",
        Code::DeclaredShapeMismatch => "Fix or remove the declared shape (value_info or graph output).",
        Code::InvalidAttribute => "Fix the attribute or constant operand so that it is in range for the operand's shape.",
        Code::InvalidGraph => "Fix the graph's wiring: every input must be produced once, before its use.",
        Code::UnsupportedOp => "Values downstream of this node are not checked; declare its output shapes if known.",
        Code::ImpliedBound => "Check that the dynamic axis never exceeds the bound at run time.",
        Code::Divisibility => "Check that the dynamic sizes are always multiples of the constant at run time.",
        Code::UnitAxisWidened => "Make the broadcast explicit (Expand) if widening the unit axis is intended.",
        Code::SizeOverflow => "Fix the shape computation: no tensor can hold this many elements.",
        Code::DeclaredDimResolved => "Nothing to fix; `diamond convert` writes the size into value_info.",
        Code::OnesVector => "`diamond optimize` folds it into a reduction; the tensor is never materialized.",
    }
}
