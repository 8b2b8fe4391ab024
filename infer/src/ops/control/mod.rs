//! Operator rules: control flow (`If`, `Loop`, `Scan`, whose subgraphs are
//! lowered as part of the node), sequences and optionals.

use super::{OpTable, ONNX};

mod branch;
mod facts;
mod loops;
mod optional;
mod sequence;

pub(crate) fn register(t: &mut OpTable) {
    t.add(ONNX, "If", 1, branch::if_rule);
    t.add(ONNX, "Loop", 1, loops::loop_rule);
    t.add(ONNX, "Scan", 8, loops::scan_rule);
    t.add(ONNX, "SequenceEmpty", 11, sequence::sequence_empty);
    t.add(ONNX, "SequenceConstruct", 11, sequence::sequence_construct);
    t.add(ONNX, "SequenceInsert", 11, sequence::sequence_insert);
    t.add(ONNX, "SequenceErase", 11, sequence::sequence_erase);
    t.add(ONNX, "SequenceAt", 11, sequence::sequence_at);
    t.add(ONNX, "SequenceLength", 11, sequence::sequence_length);
    t.add(ONNX, "SplitToSequence", 11, sequence::split_to_sequence);
    t.add(ONNX, "ConcatFromSequence", 11, sequence::concat_from_sequence);
    t.add(ONNX, "SequenceMap", 17, sequence::sequence_map);
    t.add(ONNX, "Optional", 15, optional::optional);
    t.add(ONNX, "OptionalHasElement", 15, optional::optional_has_element);
    t.add(ONNX, "OptionalGetElement", 15, optional::optional_get_element);
}
