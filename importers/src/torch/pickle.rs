//! A reader for the pickles TorchScript archives hold (`data.pkl`,
//! `constants.pkl`, `traced_inputs.pkl`): protocol 2 as torch writes it, plus
//! the cheap opcodes of protocols 3 to 5 (framing, `MEMOIZE`, `STACK_GLOBAL`,
//! bytes, 8-byte strings). Nothing is imported or called: a pickle becomes a
//! [`PyValue`] tree in which globals, calls (`REDUCE`, `NEWOBJ`), `BUILD`
//! states and persistent ids are kept as data, for the caller to interpret.
//!
//! The input is hostile. Every length is checked against the bytes that
//! remain, and the stack, the memo, the mark stack, the objects created and
//! the expanded tree are bounded (see the `MAX_*` constants); breaking a rule
//! gives a [`PickleError`] naming the byte offset, never a panic.

use std::collections::HashMap;
use std::rc::Rc;

/// Most values the stack may hold at once.
pub const MAX_STACK: usize = 1 << 20;
/// Most memo entries.
pub const MAX_MEMO: usize = 1 << 20;
/// Most `MARK`s open at once.
pub const MAX_MARK_DEPTH: usize = 256;
/// Deepest nesting of containers and calls in the result.
pub const MAX_VALUE_DEPTH: usize = 256;
/// Most containers, calls and container elements the pickle may create.
pub const MAX_OBJECTS: usize = 4 << 20;
/// Most values in the result, once shared references are expanded.
pub const MAX_RESULT_VALUES: usize = 4 << 20;
/// Most string and bytes content in the result, once shared references are expanded.
pub const MAX_RESULT_STRING_BYTES: usize = 64 << 20;
/// The highest protocol accepted by `PROTO`.
pub const MAX_PROTOCOL: u8 = 5;

/// A value a pickle builds, with Python's calls left unevaluated.
#[derive(Clone, Debug, PartialEq)]
pub enum PyValue {
    /// `None`.
    None,
    /// A bool.
    Bool(bool),
    /// An int that fits 64 bits.
    Int(i64),
    /// A float.
    Float(f64),
    /// A str.
    Str(String),
    /// A bytes.
    Bytes(Vec<u8>),
    /// A tuple.
    Tuple(Vec<PyValue>),
    /// A list.
    List(Vec<PyValue>),
    /// A dict, entries in insertion order (repeated keys are kept).
    Dict(Vec<(PyValue, PyValue)>),
    /// A global named by `GLOBAL module name` or `STACK_GLOBAL`.
    Global {
        /// The module, `torch._utils`.
        module: String,
        /// The name in it, `_rebuild_tensor_v2`.
        name: String,
    },
    /// `BINPERSID`: a reference to data kept outside the pickle.
    PersistentId(Box<PyValue>),
    /// The result of a `REDUCE` or `NEWOBJ`, with what was applied to it later.
    Call(Box<Call>),
}

/// How a [`Call`] was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallKind {
    /// `REDUCE`: `callable(*args)`.
    Reduce,
    /// `NEWOBJ`: `cls.__new__(cls, *args)`.
    NewObj,
}

/// A call the pickle asked for: what was called, with which arguments, and
/// the `BUILD` state, `APPEND`s and `SETITEM`s later applied to its result.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    /// `REDUCE` or `NEWOBJ`.
    pub kind: CallKind,
    /// The callable or class (usually a [`PyValue::Global`]).
    pub callable: PyValue,
    /// The positional arguments.
    pub args: Vec<PyValue>,
    /// The state given by `BUILD`, if any.
    pub state: Option<PyValue>,
    /// Items appended to the result (`APPEND`, `APPENDS`).
    pub appended: Vec<PyValue>,
    /// Items set on the result (`SETITEM`, `SETITEMS`).
    pub set_items: Vec<(PyValue, PyValue)>,
}

impl Call {
    /// `(module, name)` when the callable is a global.
    pub fn global(&self) -> Option<(&str, &str)> {
        match &self.callable {
            PyValue::Global { module, name } => Some((module, name)),
            _ => None,
        }
    }
}

/// Why a pickle could not be read; every variant names a byte offset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PickleError {
    /// The input ends before the pickle does.
    #[error("truncated pickle at byte {offset}: {what}")]
    Truncated {
        /// Where the input ends (its length).
        offset: usize,
        /// What was being read.
        what: String,
    },
    /// A byte that is no pickle opcode.
    #[error("unknown pickle opcode 0x{opcode:02x} at byte {offset}")]
    UnknownOpcode {
        /// The byte.
        opcode: u8,
        /// Where it is.
        offset: usize,
    },
    /// A pickle opcode this reader does not implement.
    #[error("unsupported pickle opcode {name} (0x{opcode:02x}) at byte {offset}")]
    UnsupportedOpcode {
        /// The byte.
        opcode: u8,
        /// Its name in Python's `pickletools`.
        name: &'static str,
        /// Where it is.
        offset: usize,
    },
    /// The opcodes do not make sense together (an empty stack, a bad argument).
    #[error("invalid pickle at byte {offset}: {problem}")]
    Invalid {
        /// The opcode's offset.
        offset: usize,
        /// What is wrong.
        problem: String,
    },
    /// A limit on size or depth was reached.
    #[error("pickle exceeds a limit at byte {offset}: {limit}")]
    Limit {
        /// The opcode's offset.
        offset: usize,
        /// Which limit.
        limit: String,
    },
}

/// Reads one pickle from `input` (bytes after its `STOP` are ignored).
pub fn parse(input: &[u8]) -> Result<PyValue, PickleError> {
    let mut machine = Machine::new(input);
    let top = machine.run()?;
    let mut expander = Expander { objects: &machine.objects, values: 0, string_bytes: 0, offset: machine.op_start };
    expander.expand(&top, 0)
}

/// A value on the machine's stack or in its memo. Containers and calls live
/// in the object table and are referred to by index, so that mutating one
/// (`APPENDS` after `BINPUT`, as Python's pickler writes) is seen through
/// every reference; strings are shared, so `BINGET` copies nothing.
#[derive(Clone, Debug)]
enum Node {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    Bytes(Rc<[u8]>),
    Global(Rc<(String, String)>),
    Object(usize),
}

/// A container or call in the object table.
#[derive(Debug)]
enum Object {
    Tuple(Vec<Node>),
    List(Vec<Node>),
    Dict(Vec<(Node, Node)>),
    PersistentId(Node),
    Call(CallNode),
}

#[derive(Debug)]
struct CallNode {
    kind: CallKind,
    callable: Node,
    args: Vec<Node>,
    state: Option<Node>,
    appended: Vec<Node>,
    set_items: Vec<(Node, Node)>,
}

/// The pickle virtual machine: the input, the stack with its marks, the memo
/// and the object table.
struct Machine<'a> {
    input: &'a [u8],
    pos: usize,
    op_start: usize,
    stack: Vec<Node>,
    marks: Vec<usize>,
    memo: HashMap<u32, Node>,
    objects: Vec<Object>,
    /// Objects and container elements created so far (bounded by [`MAX_OBJECTS`]).
    created: usize,
}

impl<'a> Machine<'a> {
    fn new(input: &'a [u8]) -> Machine<'a> {
        Machine {
            input,
            pos: 0,
            op_start: 0,
            stack: Vec::new(),
            marks: Vec::new(),
            memo: HashMap::new(),
            objects: Vec::new(),
            created: 0,
        }
    }

    /// Executes opcodes up to `STOP`, returning the value it pops.
    fn run(&mut self) -> Result<Node, PickleError> {
        loop {
            self.op_start = self.pos;
            let Some(&opcode) = self.input.get(self.pos) else {
                return Err(self.truncated("the pickle ends without a STOP opcode"));
            };
            self.pos += 1;
            if opcode == b'.' {
                return self.pop();
            }
            self.step(opcode)?;
        }
    }

    /// Executes one opcode other than `STOP`.
    fn step(&mut self, opcode: u8) -> Result<(), PickleError> {
        match opcode {
            0x80 => self.protocol(),
            0x95 => self.read_u64_le().map(|_| ()),
            b'(' => self.mark(),
            b'0' => self.pop().map(|_| ()),
            b'1' => self.pop_mark().map(|_| ()),
            b'2' => self.dup(),
            b'N' => self.push(Node::None),
            0x88 => self.push(Node::Bool(true)),
            0x89 => self.push(Node::Bool(false)),
            b'J' => self.binint(),
            b'K' => {
                let value = self.read_u8()?;
                self.push(Node::Int(i64::from(value)))
            }
            b'M' => {
                let value = self.read_u16_le()?;
                self.push(Node::Int(i64::from(value)))
            }
            0x8a => {
                let len = usize::from(self.read_u8()?);
                self.long(len)
            }
            0x8b => {
                let len = self.read_i32_le()?;
                let len = usize::try_from(len).map_err(|_| self.invalid(format!("LONG4 length {len} is negative")))?;
                self.long(len)
            }
            b'G' => self.binfloat(),
            b'X' => self.unicode_with_len(4),
            0x8c => self.unicode_with_len(1),
            0x8d => self.unicode_with_len(8),
            b'U' => self.unicode_with_len(1),
            b'T' => self.binstring(),
            b'B' => self.bytes_with_len(4),
            b'C' => self.bytes_with_len(1),
            0x8e => self.bytes_with_len(8),
            b')' => self.push_object(Object::Tuple(Vec::new())),
            b't' => {
                let items = self.pop_mark()?;
                self.push_object(Object::Tuple(items))
            }
            0x85 => self.tuple_of(1),
            0x86 => self.tuple_of(2),
            0x87 => self.tuple_of(3),
            b']' => self.push_object(Object::List(Vec::new())),
            b'l' => {
                let items = self.pop_mark()?;
                self.push_object(Object::List(items))
            }
            b'}' => self.push_object(Object::Dict(Vec::new())),
            b'd' => {
                let items = self.pop_mark()?;
                let pairs = self.pairs(items)?;
                self.push_object(Object::Dict(pairs))
            }
            b'a' => {
                let item = self.pop()?;
                self.append(vec![item])
            }
            b'e' => {
                let items = self.pop_mark()?;
                self.append(items)
            }
            b's' => {
                let value = self.pop()?;
                let key = self.pop()?;
                self.set_items(vec![(key, value)])
            }
            b'u' => {
                let items = self.pop_mark()?;
                let pairs = self.pairs(items)?;
                self.set_items(pairs)
            }
            b'c' => self.global(),
            0x93 => self.stack_global(),
            b'R' => self.call(CallKind::Reduce),
            0x81 => self.call(CallKind::NewObj),
            b'b' => self.build(),
            b'Q' => {
                let pid = self.pop()?;
                self.push_object(Object::PersistentId(pid))
            }
            b'h' => {
                let index = self.read_u8()?;
                self.memo_get(u32::from(index))
            }
            b'j' => {
                let index = self.read_u32_le()?;
                self.memo_get(index)
            }
            b'q' => {
                let index = self.read_u8()?;
                self.memo_put(u32::from(index))
            }
            b'r' => {
                let index = self.read_u32_le()?;
                self.memo_put(index)
            }
            0x94 => {
                let index = u32::try_from(self.memo.len()).map_err(|_| self.limit("memo index overflow".into()))?;
                self.memo_put(index)
            }
            other => Err(unsupported_or_unknown(other, self.op_start)),
        }
    }

    // ---- reading arguments ----

    fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], PickleError> {
        let remaining = self.input.len() - self.pos;
        if len > remaining {
            return Err(self.truncated(&format!("{what} needs {len} bytes but {remaining} remain")));
        }
        let slice = &self.input[self.pos..self.pos + len];
        self.pos += len;
        Ok(slice)
    }

    fn take_array<const N: usize>(&mut self) -> Result<[u8; N], PickleError> {
        let bytes = self.take(N, "an opcode argument")?;
        let mut array = [0u8; N];
        array.copy_from_slice(bytes);
        Ok(array)
    }

    fn read_u8(&mut self) -> Result<u8, PickleError> {
        Ok(self.take_array::<1>()?[0])
    }

    fn read_u16_le(&mut self) -> Result<u16, PickleError> {
        Ok(u16::from_le_bytes(self.take_array()?))
    }

    fn read_u32_le(&mut self) -> Result<u32, PickleError> {
        Ok(u32::from_le_bytes(self.take_array()?))
    }

    fn read_i32_le(&mut self) -> Result<i32, PickleError> {
        Ok(i32::from_le_bytes(self.take_array()?))
    }

    fn read_u64_le(&mut self) -> Result<u64, PickleError> {
        Ok(u64::from_le_bytes(self.take_array()?))
    }

    /// A little-endian length of `width` bytes (1, 4 or 8), as `usize`.
    fn read_len(&mut self, width: usize) -> Result<usize, PickleError> {
        let len = match width {
            1 => u64::from(self.read_u8()?),
            4 => u64::from(self.read_u32_le()?),
            _ => self.read_u64_le()?,
        };
        usize::try_from(len).map_err(|_| self.truncated(&format!("a length of {len} bytes")))
    }

    /// The bytes up to the next newline (consumed, not returned).
    fn read_line(&mut self) -> Result<&'a str, PickleError> {
        let rest = &self.input[self.pos..];
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return Err(self.truncated("a GLOBAL name has no terminating newline"));
        };
        self.pos += end + 1;
        std::str::from_utf8(&rest[..end]).map_err(|_| self.invalid("a GLOBAL name is not UTF-8".into()))
    }

    // ---- opcodes ----

    fn protocol(&mut self) -> Result<(), PickleError> {
        let version = self.read_u8()?;
        if version > MAX_PROTOCOL {
            return Err(self.invalid(format!("protocol {version} is newer than {MAX_PROTOCOL}, the newest known")));
        }
        Ok(())
    }

    fn binint(&mut self) -> Result<(), PickleError> {
        let value = self.read_i32_le()?;
        self.push(Node::Int(i64::from(value)))
    }

    /// `LONG1`/`LONG4`: a little-endian two's-complement integer of `len` bytes.
    fn long(&mut self, len: usize) -> Result<(), PickleError> {
        let bytes = self.take(len, "a LONG integer")?;
        let value =
            long_to_i64(bytes).ok_or_else(|| self.invalid(format!("a {len}-byte integer does not fit 64 bits")))?;
        self.push(Node::Int(value))
    }

    fn binfloat(&mut self) -> Result<(), PickleError> {
        let value = f64::from_be_bytes(self.take_array()?);
        self.push(Node::Float(value))
    }

    /// `BINUNICODE` and its short and 8-byte forms; also `SHORT_BINSTRING`,
    /// read as UTF-8 like Python 3 does for ASCII.
    fn unicode_with_len(&mut self, width: usize) -> Result<(), PickleError> {
        let len = self.read_len(width)?;
        let bytes = self.take(len, "a string")?;
        let text = std::str::from_utf8(bytes).map_err(|_| self.invalid("a string is not valid UTF-8".into()))?;
        self.push(Node::Str(Rc::from(text)))
    }

    /// `BINSTRING`: a signed 4-byte length, then the bytes, read as UTF-8.
    fn binstring(&mut self) -> Result<(), PickleError> {
        let len = self.read_i32_le()?;
        let len = usize::try_from(len).map_err(|_| self.invalid(format!("BINSTRING length {len} is negative")))?;
        let bytes = self.take(len, "a string")?;
        let text = std::str::from_utf8(bytes).map_err(|_| self.invalid("a string is not valid UTF-8".into()))?;
        self.push(Node::Str(Rc::from(text)))
    }

    fn bytes_with_len(&mut self, width: usize) -> Result<(), PickleError> {
        let len = self.read_len(width)?;
        let bytes = self.take(len, "a bytes value")?;
        self.push(Node::Bytes(Rc::from(bytes)))
    }

    fn tuple_of(&mut self, count: usize) -> Result<(), PickleError> {
        if self.stack.len() < count + self.floor() {
            return Err(self.invalid(format!("a {count}-tuple needs {count} values on the stack")));
        }
        let items = self.stack.split_off(self.stack.len() - count);
        self.push_object(Object::Tuple(items))
    }

    fn global(&mut self) -> Result<(), PickleError> {
        let module = self.read_line()?.to_string();
        let name = self.read_line()?.to_string();
        self.push(Node::Global(Rc::new((module, name))))
    }

    fn stack_global(&mut self) -> Result<(), PickleError> {
        let name = self.pop()?;
        let module = self.pop()?;
        match (module, name) {
            (Node::Str(module), Node::Str(name)) => {
                self.push(Node::Global(Rc::new((module.to_string(), name.to_string()))))
            }
            _ => Err(self.invalid("STACK_GLOBAL needs two strings".into())),
        }
    }

    fn call(&mut self, kind: CallKind) -> Result<(), PickleError> {
        let args = self.pop()?;
        let callable = self.pop()?;
        let args = match self.object_of(&args) {
            Some(Object::Tuple(items)) => items.clone(),
            _ => return Err(self.invalid("the arguments of REDUCE or NEWOBJ are not a tuple".into())),
        };
        let call = CallNode { kind, callable, args, state: None, appended: Vec::new(), set_items: Vec::new() };
        self.push_object(Object::Call(call))
    }

    fn build(&mut self) -> Result<(), PickleError> {
        let state = self.pop()?;
        let offset = self.op_start;
        match self.top_object_mut()? {
            Some(Object::Call(call)) if call.state.is_none() => {
                call.state = Some(state);
                Ok(())
            }
            Some(Object::Call(_)) => Err(invalid(offset, "BUILD applied twice to the same object".into())),
            _ => Err(invalid(offset, "BUILD applied to something that is not an object".into())),
        }
    }

    fn append(&mut self, items: Vec<Node>) -> Result<(), PickleError> {
        self.count_created(items.len())?;
        let offset = self.op_start;
        match self.top_object_mut()? {
            Some(Object::List(list)) => list.extend(items),
            Some(Object::Call(call)) => call.appended.extend(items),
            _ => return Err(invalid(offset, "APPEND to something that is not a list".into())),
        }
        Ok(())
    }

    fn set_items(&mut self, pairs: Vec<(Node, Node)>) -> Result<(), PickleError> {
        self.count_created(pairs.len())?;
        let offset = self.op_start;
        match self.top_object_mut()? {
            Some(Object::Dict(dict)) => dict.extend(pairs),
            Some(Object::Call(call)) => call.set_items.extend(pairs),
            _ => return Err(invalid(offset, "SETITEM on something that is not a dict".into())),
        }
        Ok(())
    }

    fn pairs(&self, items: Vec<Node>) -> Result<Vec<(Node, Node)>, PickleError> {
        if items.len() % 2 == 1 {
            return Err(self.invalid(format!("{} values after MARK cannot be key-value pairs", items.len())));
        }
        let mut pairs = Vec::with_capacity(items.len() / 2);
        let mut iter = items.into_iter();
        while let (Some(key), Some(value)) = (iter.next(), iter.next()) {
            pairs.push((key, value));
        }
        Ok(pairs)
    }

    fn memo_get(&mut self, index: u32) -> Result<(), PickleError> {
        let value = self
            .memo
            .get(&index)
            .cloned()
            .ok_or_else(|| self.invalid(format!("memo entry {index} was never stored")))?;
        self.push(value)
    }

    fn memo_put(&mut self, index: u32) -> Result<(), PickleError> {
        let top = self.peek()?.clone();
        if self.memo.len() >= MAX_MEMO && !self.memo.contains_key(&index) {
            return Err(self.limit(format!("more than {MAX_MEMO} memo entries")));
        }
        self.memo.insert(index, top);
        Ok(())
    }

    // ---- the stack ----

    /// The lowest stack index the current mark leaves visible.
    fn floor(&self) -> usize {
        self.marks.last().copied().unwrap_or(0)
    }

    fn push(&mut self, node: Node) -> Result<(), PickleError> {
        if self.stack.len() >= MAX_STACK {
            return Err(self.limit(format!("more than {MAX_STACK} values on the stack")));
        }
        self.stack.push(node);
        Ok(())
    }

    fn push_object(&mut self, object: Object) -> Result<(), PickleError> {
        self.count_created(1)?;
        self.objects.push(object);
        self.push(Node::Object(self.objects.len() - 1))
    }

    fn count_created(&mut self, count: usize) -> Result<(), PickleError> {
        self.created = self.created.saturating_add(count);
        if self.created > MAX_OBJECTS {
            return Err(self.limit(format!("more than {MAX_OBJECTS} objects and container items")));
        }
        Ok(())
    }

    fn pop(&mut self) -> Result<Node, PickleError> {
        if self.stack.len() <= self.floor() {
            return Err(self.invalid("a value is needed but the stack is empty (above the last MARK)".into()));
        }
        self.stack.pop().ok_or_else(|| self.invalid("the stack is empty".into()))
    }

    fn peek(&self) -> Result<&Node, PickleError> {
        if self.stack.len() <= self.floor() {
            return Err(self.invalid("a value is needed but the stack is empty (above the last MARK)".into()));
        }
        self.stack.last().ok_or_else(|| self.invalid("the stack is empty".into()))
    }

    fn dup(&mut self) -> Result<(), PickleError> {
        let top = self.peek()?.clone();
        self.push(top)
    }

    fn mark(&mut self) -> Result<(), PickleError> {
        if self.marks.len() >= MAX_MARK_DEPTH {
            return Err(self.limit(format!("more than {MAX_MARK_DEPTH} MARKs open at once")));
        }
        self.marks.push(self.stack.len());
        Ok(())
    }

    /// Pops the values above the last mark, and the mark.
    fn pop_mark(&mut self) -> Result<Vec<Node>, PickleError> {
        let start = self.marks.pop().ok_or_else(|| self.invalid("no MARK is open".into()))?;
        Ok(self.stack.split_off(start))
    }

    fn object_of(&self, node: &Node) -> Option<&Object> {
        match node {
            Node::Object(index) => self.objects.get(*index),
            _ => None,
        }
    }

    /// The object the top of the stack refers to (`None` for a plain value).
    fn top_object_mut(&mut self) -> Result<Option<&mut Object>, PickleError> {
        match self.peek()? {
            Node::Object(index) => {
                let index = *index;
                Ok(self.objects.get_mut(index))
            }
            _ => Ok(None),
        }
    }

    // ---- errors ----

    fn truncated(&self, what: &str) -> PickleError {
        PickleError::Truncated { offset: self.input.len(), what: format!("{what} (opcode at byte {})", self.op_start) }
    }

    fn invalid(&self, problem: String) -> PickleError {
        invalid(self.op_start, problem)
    }

    fn limit(&self, limit: String) -> PickleError {
        PickleError::Limit { offset: self.op_start, limit }
    }
}

fn invalid(offset: usize, problem: String) -> PickleError {
    PickleError::Invalid { offset, problem }
}

/// A little-endian two's-complement integer, if it fits `i64`.
fn long_to_i64(bytes: &[u8]) -> Option<i64> {
    let Some(&last) = bytes.last() else {
        return Some(0);
    };
    let negative = last & 0x80 != 0;
    let pad = if negative { 0xff } else { 0x00 };
    let (low, high) = bytes.split_at(bytes.len().min(8));
    if high.iter().any(|&b| b != pad) {
        return None;
    }
    let mut buffer = [pad; 8];
    buffer[..low.len()].copy_from_slice(low);
    let value = i64::from_le_bytes(buffer);
    // The sign of the 8 low bytes must agree with the whole number's.
    ((value < 0) == negative).then_some(value)
}

/// The error for an opcode [`Machine::step`] does not execute.
fn unsupported_or_unknown(opcode: u8, offset: usize) -> PickleError {
    match unsupported_opcode_name(opcode) {
        Some(name) => PickleError::UnsupportedOpcode { opcode, name, offset },
        None => PickleError::UnknownOpcode { opcode, offset },
    }
}

/// Names of the pickle opcodes this reader does not implement.
fn unsupported_opcode_name(opcode: u8) -> Option<&'static str> {
    Some(match opcode {
        b'I' => "INT",
        b'L' => "LONG",
        b'S' => "STRING",
        b'V' => "UNICODE",
        b'F' => "FLOAT",
        b'g' => "GET",
        b'p' => "PUT",
        b'i' => "INST",
        b'o' => "OBJ",
        b'P' => "PERSID",
        0x82 => "EXT1",
        0x83 => "EXT2",
        0x84 => "EXT4",
        0x8f => "EMPTY_SET",
        0x90 => "ADDITEMS",
        0x91 => "FROZENSET",
        0x92 => "NEWOBJ_EX",
        0x96 => "BYTEARRAY8",
        0x97 => "NEXT_BUFFER",
        0x98 => "READONLY_BUFFER",
        _ => return None,
    })
}

/// Turns the machine's nodes into a [`PyValue`] tree, copying shared values
/// once per reference, within the depth and size limits.
struct Expander<'m> {
    objects: &'m [Object],
    values: usize,
    string_bytes: usize,
    offset: usize,
}

impl Expander<'_> {
    fn expand(&mut self, node: &Node, depth: usize) -> Result<PyValue, PickleError> {
        if depth > MAX_VALUE_DEPTH {
            return Err(
                self.limit(format!("values nested more than {MAX_VALUE_DEPTH} deep (or a value that contains itself)"))
            );
        }
        self.count_value()?;
        Ok(match node {
            Node::None => PyValue::None,
            Node::Bool(b) => PyValue::Bool(*b),
            Node::Int(i) => PyValue::Int(*i),
            Node::Float(f) => PyValue::Float(*f),
            Node::Str(s) => {
                self.count_string_bytes(s.len())?;
                PyValue::Str(s.to_string())
            }
            Node::Bytes(b) => {
                self.count_string_bytes(b.len())?;
                PyValue::Bytes(b.to_vec())
            }
            Node::Global(global) => PyValue::Global { module: global.0.clone(), name: global.1.clone() },
            Node::Object(index) => self.expand_object(*index, depth)?,
        })
    }

    fn expand_object(&mut self, index: usize, depth: usize) -> Result<PyValue, PickleError> {
        let objects = self.objects;
        let Some(object) = objects.get(index) else {
            return Err(self.limit(format!("object {index} does not exist")));
        };
        Ok(match object {
            Object::Tuple(items) => PyValue::Tuple(self.expand_all(items, depth)?),
            Object::List(items) => PyValue::List(self.expand_all(items, depth)?),
            Object::Dict(pairs) => PyValue::Dict(self.expand_pairs(pairs, depth)?),
            Object::PersistentId(pid) => PyValue::PersistentId(Box::new(self.expand(pid, depth + 1)?)),
            Object::Call(call) => PyValue::Call(Box::new(Call {
                kind: call.kind,
                callable: self.expand(&call.callable, depth + 1)?,
                args: self.expand_all(&call.args, depth)?,
                state: match &call.state {
                    Some(state) => Some(self.expand(state, depth + 1)?),
                    None => None,
                },
                appended: self.expand_all(&call.appended, depth)?,
                set_items: self.expand_pairs(&call.set_items, depth)?,
            })),
        })
    }

    fn expand_all(&mut self, nodes: &[Node], depth: usize) -> Result<Vec<PyValue>, PickleError> {
        nodes.iter().map(|node| self.expand(node, depth + 1)).collect()
    }

    fn expand_pairs(&mut self, pairs: &[(Node, Node)], depth: usize) -> Result<Vec<(PyValue, PyValue)>, PickleError> {
        pairs.iter().map(|(k, v)| Ok((self.expand(k, depth + 1)?, self.expand(v, depth + 1)?))).collect()
    }

    fn count_value(&mut self) -> Result<(), PickleError> {
        self.values += 1;
        if self.values > MAX_RESULT_VALUES {
            return Err(self.limit(format!("more than {MAX_RESULT_VALUES} values once shared references are expanded")));
        }
        Ok(())
    }

    fn count_string_bytes(&mut self, len: usize) -> Result<(), PickleError> {
        self.string_bytes = self.string_bytes.saturating_add(len);
        if self.string_bytes > MAX_RESULT_STRING_BYTES {
            return Err(self.limit(format!(
                "more than {MAX_RESULT_STRING_BYTES} bytes of strings once shared references are expanded"
            )));
        }
        Ok(())
    }

    fn limit(&self, limit: String) -> PickleError {
        PickleError::Limit { offset: self.offset, limit }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn global(module: &str, name: &str) -> PyValue {
        PyValue::Global { module: module.into(), name: name.into() }
    }

    fn s(text: &str) -> PyValue {
        PyValue::Str(text.into())
    }

    /// `bytes` with the protocol-2 header and `STOP` around them.
    fn proto2(body: &[u8]) -> Vec<u8> {
        let mut out = vec![0x80, 2];
        out.extend_from_slice(body);
        out.push(b'.');
        out
    }

    #[test]
    fn reads_scalars() {
        assert_eq!(parse(&proto2(b"N")), Ok(PyValue::None));
        assert_eq!(parse(&proto2(&[0x88])), Ok(PyValue::Bool(true)));
        assert_eq!(parse(&proto2(&[0x89])), Ok(PyValue::Bool(false)));
        assert_eq!(parse(&proto2(b"K\xff")), Ok(PyValue::Int(255)));
        assert_eq!(parse(&proto2(b"M\x00\x01")), Ok(PyValue::Int(256)));
        assert_eq!(parse(&proto2(b"J\xfe\xff\xff\xff")), Ok(PyValue::Int(-2)));
        assert_eq!(parse(&proto2(b"G\x3f\xf8\x00\x00\x00\x00\x00\x00")), Ok(PyValue::Float(1.5)));
    }

    #[test]
    fn reads_long_integers() {
        assert_eq!(parse(&proto2(b"\x8a\x00")), Ok(PyValue::Int(0)));
        assert_eq!(parse(&proto2(b"\x8a\x01\xff")), Ok(PyValue::Int(-1)));
        assert_eq!(parse(&proto2(b"\x8a\x02\xff\x00")), Ok(PyValue::Int(255)));
        let big = b"\x8a\x08\x00\x00\x00\x00\x00\x00\x00\x80";
        assert_eq!(parse(&proto2(big)), Ok(PyValue::Int(i64::MIN)));
        // 2**63 needs 9 bytes and does not fit.
        let too_big = b"\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x80\x00";
        assert!(matches!(parse(&proto2(too_big)), Err(PickleError::Invalid { .. })));
        assert_eq!(parse(&proto2(b"\x8b\x02\x00\x00\x00\x00\x01")), Ok(PyValue::Int(256)));
    }

    #[test]
    fn reads_strings_and_bytes() {
        assert_eq!(parse(&proto2(b"X\x03\x00\x00\x00abc")), Ok(s("abc")));
        assert_eq!(parse(&proto2(b"\x8c\x02hi")), Ok(s("hi")));
        assert_eq!(parse(&proto2(b"\x8d\x01\x00\x00\x00\x00\x00\x00\x00z")), Ok(s("z")));
        assert_eq!(parse(&proto2(b"U\x02ok")), Ok(s("ok")));
        assert_eq!(parse(&proto2(b"C\x02\x00\x01")), Ok(PyValue::Bytes(vec![0, 1])));
        assert_eq!(parse(&proto2(b"B\x01\x00\x00\x00\x07")), Ok(PyValue::Bytes(vec![7])));
        assert!(matches!(parse(&proto2(b"\x8c\x01\xff")), Err(PickleError::Invalid { .. })));
    }

    #[test]
    fn reads_tuples_lists_and_dicts() {
        let one = PyValue::Int(1);
        let two = PyValue::Int(2);
        assert_eq!(parse(&proto2(b")")), Ok(PyValue::Tuple(vec![])));
        assert_eq!(parse(&proto2(b"K\x01\x85")), Ok(PyValue::Tuple(vec![one.clone()])));
        assert_eq!(parse(&proto2(b"K\x01K\x02\x86")), Ok(PyValue::Tuple(vec![one.clone(), two.clone()])));
        assert_eq!(parse(&proto2(b"NNN\x87")), Ok(PyValue::Tuple(vec![PyValue::None; 3])));
        assert_eq!(parse(&proto2(b"(K\x01K\x02t")), Ok(PyValue::Tuple(vec![one.clone(), two.clone()])));
        assert_eq!(parse(&proto2(b"]K\x01a(K\x02e")), Ok(PyValue::List(vec![one.clone(), two.clone()])));
        assert_eq!(parse(&proto2(b"(K\x01l")), Ok(PyValue::List(vec![one.clone()])));
        let dict = PyValue::Dict(vec![(s("a"), one.clone()), (s("b"), two.clone())]);
        assert_eq!(parse(&proto2(b"}\x8c\x01aK\x01s(\x8c\x01bK\x02u")), Ok(dict.clone()));
        assert_eq!(parse(&proto2(b"(\x8c\x01aK\x01\x8c\x01bK\x02d")), Ok(dict));
    }

    #[test]
    fn memo_references_see_later_mutation() {
        // Python's pickler memoizes a list before filling it: `]q\x00(...e`.
        // BINGET after the APPENDS must see the items.
        let list = PyValue::List(vec![PyValue::Int(1)]);
        assert_eq!(parse(&proto2(b"]q\x00(K\x01eh\x00\x86")), Ok(PyValue::Tuple(vec![list.clone(), list.clone()])));
        assert_eq!(
            parse(&proto2(b"]r\x05\x00\x00\x00(K\x01ej\x05\x00\x00\x00\x86")),
            Ok(PyValue::Tuple(vec![list.clone(), list.clone()]))
        );
        assert_eq!(
            parse(&[0x80, 4, b']', 0x94, b'h', 0, 0x86, b'.']),
            Ok(PyValue::Tuple(vec![PyValue::List(vec![]); 2]))
        );
        assert!(matches!(parse(&proto2(b"h\x03")), Err(PickleError::Invalid { offset: 2, .. })));
    }

    #[test]
    fn stack_opcodes() {
        assert_eq!(parse(&proto2(b"K\x01K\x020")), Ok(PyValue::Int(1)));
        assert_eq!(parse(&proto2(b"K\x01(K\x02K\x031")), Ok(PyValue::Int(1)));
        assert_eq!(parse(&proto2(b"K\x012\x86")), Ok(PyValue::Tuple(vec![PyValue::Int(1); 2])));
    }

    #[test]
    fn reads_globals_calls_and_builds() {
        // GLOBAL __torch__ M, EMPTY_TUPLE, NEWOBJ, EMPTY_DICT, MARK 'x' 1 SETITEMS, BUILD
        let bytes = proto2(b"c__torch__\nM\n)\x81}(X\x01\x00\x00\x00xK\x01ub");
        let Ok(PyValue::Call(call)) = parse(&bytes) else { panic!("not a call") };
        assert_eq!(call.kind, CallKind::NewObj);
        assert_eq!(call.global(), Some(("__torch__", "M")));
        assert_eq!(call.state, Some(PyValue::Dict(vec![(s("x"), PyValue::Int(1))])));
        // collections.OrderedDict() then SETITEMS onto the result.
        let bytes = proto2(b"ccollections\nOrderedDict\n)R(\x8c\x01kK\x07u");
        let Ok(PyValue::Call(call)) = parse(&bytes) else { panic!("not a call") };
        assert_eq!(call.kind, CallKind::Reduce);
        assert_eq!(call.set_items, vec![(s("k"), PyValue::Int(7))]);
        // STACK_GLOBAL
        assert_eq!(parse(&[0x80, 4, 0x8c, 1, b'm', 0x8c, 1, b'n', 0x93, b'.']), Ok(global("m", "n")));
        // REDUCE needs a tuple of arguments.
        assert!(matches!(parse(&proto2(b"cm\nf\nK\x01R")), Err(PickleError::Invalid { .. })));
        // BUILD needs an object.
        assert!(matches!(parse(&proto2(b"]}b")), Err(PickleError::Invalid { .. })));
    }

    #[test]
    fn reads_persistent_ids() {
        let bytes = proto2(b"(X\x07\x00\x00\x00storagectorch\nFloatStorage\nX\x01\x00\x00\x000K\x04tQ");
        let expected = PyValue::PersistentId(Box::new(PyValue::Tuple(vec![
            s("storage"),
            global("torch", "FloatStorage"),
            s("0"),
            PyValue::Int(4),
        ])));
        assert_eq!(parse(&bytes), Ok(expected));
    }

    #[test]
    fn accepts_frames_of_protocol_4() {
        let bytes = [0x80, 4, 0x95, 2, 0, 0, 0, 0, 0, 0, 0, b'K', 9, b'.'];
        assert_eq!(parse(&bytes), Ok(PyValue::Int(9)));
        assert!(matches!(parse(&[0x80, 6, b'N', b'.']), Err(PickleError::Invalid { .. })));
    }

    #[test]
    fn truncation_names_the_end() {
        let err = parse(b"\x80\x02X\xff\x00\x00\x00abc").unwrap_err();
        assert!(matches!(err, PickleError::Truncated { offset: 10, .. }), "{err}");
        assert!(err.to_string().starts_with("truncated pickle at byte 10"), "{err}");
        assert!(matches!(parse(b"\x80\x02N"), Err(PickleError::Truncated { offset: 3, .. })));
        assert!(matches!(parse(b"\x80\x02J\x01"), Err(PickleError::Truncated { .. })));
        assert!(matches!(parse(b"\x80\x02cmodule"), Err(PickleError::Truncated { .. })));
        assert!(matches!(parse(b""), Err(PickleError::Truncated { offset: 0, .. })));
        // A huge declared length is compared with the input, not allocated.
        assert!(matches!(parse(b"\x80\x02\x8d\xff\xff\xff\xff\xff\xff\xff\x7f"), Err(PickleError::Truncated { .. })));
    }

    #[test]
    fn unknown_and_unsupported_opcodes_are_named() {
        let err = parse(b"\x80\x02\xf0.").unwrap_err();
        assert_eq!(err, PickleError::UnknownOpcode { opcode: 0xf0, offset: 2 });
        assert_eq!(err.to_string(), "unknown pickle opcode 0xf0 at byte 2");
        let err = parse(b"\x80\x02I1\n.").unwrap_err();
        assert_eq!(err.to_string(), "unsupported pickle opcode INT (0x49) at byte 2");
    }

    #[test]
    fn stack_misuse_is_an_error() {
        assert!(matches!(parse(b"\x80\x02."), Err(PickleError::Invalid { offset: 2, .. })));
        assert!(matches!(parse(&proto2(b"t")), Err(PickleError::Invalid { .. })));
        assert!(matches!(parse(&proto2(b"K\x01\x86")), Err(PickleError::Invalid { .. })));
        // A tuple cannot take values from below the last MARK.
        assert!(matches!(parse(&proto2(b"K\x01(\x85")), Err(PickleError::Invalid { .. })));
        assert!(matches!(parse(&proto2(b"}(K\x01u")), Err(PickleError::Invalid { .. })));
        assert!(matches!(parse(&proto2(b"K\x01K\x01a")), Err(PickleError::Invalid { .. })));
    }

    #[test]
    fn mark_depth_is_bounded() {
        let mut body = vec![b'('; MAX_MARK_DEPTH + 1];
        body.push(b'N');
        let err = parse(&proto2(&body)).unwrap_err();
        assert!(matches!(err, PickleError::Limit { offset, .. } if offset == 2 + MAX_MARK_DEPTH), "{err}");
        assert!(err.to_string().contains("MARK"), "{err}");
    }

    #[test]
    fn value_depth_is_bounded() {
        // None wrapped in one-tuples, one level too many: N \x85 \x85 ...
        let mut body = vec![b'N'];
        body.extend(std::iter::repeat_n(0x85, MAX_VALUE_DEPTH + 1));
        assert!(parse(&proto2(&body[..MAX_VALUE_DEPTH])).is_ok());
        let err = parse(&proto2(&body)).unwrap_err();
        assert!(matches!(err, PickleError::Limit { .. }), "{err}");
        assert!(err.to_string().contains("nested"), "{err}");
    }

    #[test]
    fn self_containing_values_are_rejected() {
        // A list appended to itself.
        let err = parse(&proto2(b"]q\x00h\x00a")).unwrap_err();
        assert!(matches!(err, PickleError::Limit { .. }), "{err}");
    }

    #[test]
    fn shared_references_cannot_blow_up() {
        // t0 = (1,); t_{k+1} = (t_k, t_k): 2^40 values once expanded.
        let mut body = b"K\x01\x85q\x00".to_vec();
        for k in 0u8..40 {
            body.extend_from_slice(&[b'h', k, b'h', k, 0x86, b'q', k + 1]);
        }
        let err = parse(&proto2(&body)).unwrap_err();
        assert!(err.to_string().contains("shared references"), "{err}");
    }

    #[test]
    fn long_to_i64_checks_sign_extension() {
        assert_eq!(long_to_i64(&[]), Some(0));
        assert_eq!(long_to_i64(&[0x80]), Some(-128));
        assert_eq!(long_to_i64(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x00]), Some(i64::MAX));
        assert_eq!(long_to_i64(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0xff]), None);
        assert_eq!(long_to_i64(&[0, 0, 0, 0, 0, 0, 0, 0x80, 0xff]), Some(i64::MIN));
    }
}
