//! A JSON reader that accepts what TensorFlow Serving's rapidjson reader
//! accepts (`kParseIterativeFlag | kParseNanAndInfFlag |
//! kParseStopWhenDoneFlag`) and reports its errors with rapidjson's
//! messages and byte offsets:
//!
//! - `NaN`, `Inf`, `Infinity` (signed or not) are numbers;
//! - anything after the first complete value is ignored, and a NUL byte
//!   ends the input, as rapidjson's stream does;
//! - strings are bytes: invalid UTF-8 passes through, `\u` escapes become
//!   UTF-8 (a high surrogate must be followed by a low one);
//! - an integer that fits 64 bits is an integer (signed when it fits
//!   `i64`), any other number a double (correctly rounded);
//! - an object keeps duplicate keys; [`Value::find`] returns the first.
//!
//! Parsing is iterative and the document is a flat arena (values, list
//! items and object members in three vectors, linked by index), so no
//! nesting depth overflows the stack, in parsing or in dropping.

use graph::{Result, Status};

/// Index of a value in its document.
type Id = u32;

/// A range of a document's pool (bytes, items or members).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Span {
    start: u32,
    len: u32,
}

impl Span {
    fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.start as usize + self.len as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Node {
    Null,
    Bool(bool),
    /// An integer that fits `i64`.
    Int(i64),
    /// An integer above `i64::MAX` that fits `u64`.
    Uint(u64),
    Double(f64),
    /// Bytes of `Document::text`.
    Str(Span),
    /// Ids in `Document::items`.
    Array(Span),
    /// Pairs in `Document::members`.
    Object(Span),
}

/// The JSON type of a value, as rapidjson names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonType {
    /// `null`.
    Null,
    /// `false`.
    False,
    /// `true`.
    True,
    /// `{…}`.
    Object,
    /// `[…]`.
    Array,
    /// `"…"`.
    String,
    /// A number.
    Number,
}

impl JsonType {
    /// rapidjson's name of the type (TensorFlow Serving's `JsonTypeString`).
    pub fn name(self) -> &'static str {
        match self {
            JsonType::Null => "Null",
            JsonType::False => "False",
            JsonType::True => "True",
            JsonType::Object => "Object",
            JsonType::Array => "Array",
            JsonType::String => "String",
            JsonType::Number => "Number",
        }
    }
}

/// A parsed JSON document; see the module docs.
#[derive(Debug)]
pub struct Document {
    nodes: Vec<Node>,
    items: Vec<Id>,
    members: Vec<(Span, Id)>,
    text: Vec<u8>,
    root: Id,
}

/// A value of a document.
#[derive(Clone, Copy, Debug)]
pub struct Value<'a> {
    doc: &'a Document,
    id: Id,
}

impl Document {
    /// Parses `json`. Errors are `InvalidArgument`: "JSON Parse error:
    /// MESSAGE at offset: OFFSET" with rapidjson's message and the byte offset.
    pub fn parse(json: &[u8]) -> Result<Document> {
        if json.is_empty() {
            return Err(Status::invalid_argument(
                "JSON Parse error: The document is empty",
            ));
        }
        if json.len() >= u32::MAX as usize {
            return Err(Status::invalid_argument(
                "JSON Parse error: the document is larger than 4 GiB",
            ));
        }
        Parser::new(json).run().map_err(|e| {
            Status::invalid_argument(format!(
                "JSON Parse error: {} at offset: {}",
                e.kind.message(),
                e.offset
            ))
        })
    }

    /// The document's top-level value.
    pub fn root(&self) -> Value<'_> {
        Value {
            doc: self,
            id: self.root,
        }
    }
}

impl<'a> Value<'a> {
    fn node(self) -> Node {
        self.doc.nodes[self.id as usize]
    }

    /// Its JSON type.
    pub fn json_type(self) -> JsonType {
        match self.node() {
            Node::Null => JsonType::Null,
            Node::Bool(false) => JsonType::False,
            Node::Bool(true) => JsonType::True,
            Node::Int(_) | Node::Uint(_) | Node::Double(_) => JsonType::Number,
            Node::Str(_) => JsonType::String,
            Node::Array(_) => JsonType::Array,
            Node::Object(_) => JsonType::Object,
        }
    }

    /// True for an object.
    pub fn is_object(self) -> bool {
        matches!(self.node(), Node::Object(_))
    }

    /// True for an array.
    pub fn is_array(self) -> bool {
        matches!(self.node(), Node::Array(_))
    }

    /// True for a string.
    pub fn is_string(self) -> bool {
        matches!(self.node(), Node::Str(_))
    }

    /// The items of an array or members of an object; 0 for others.
    pub fn len(self) -> usize {
        match self.node() {
            Node::Array(s) | Node::Object(s) => s.len as usize,
            _ => 0,
        }
    }

    /// True for an empty array or object, or a value that is neither.
    pub fn is_empty(self) -> bool {
        self.len() == 0
    }

    /// Item `i` of an array.
    pub fn item(self, i: usize) -> Option<Value<'a>> {
        match self.node() {
            Node::Array(s) if i < s.len as usize => Some(Value {
                doc: self.doc,
                id: self.doc.items[s.start as usize + i],
            }),
            _ => None,
        }
    }

    /// The items of an array (none for others).
    pub fn items(self) -> impl Iterator<Item = Value<'a>> + 'a {
        let ids: &'a [Id] = match self.node() {
            Node::Array(s) => &self.doc.items[s.range()],
            _ => &[],
        };
        let doc = self.doc;
        ids.iter().map(move |&id| Value { doc, id })
    }

    /// The members of an object in document order, duplicates included
    /// (none for others).
    pub fn members(self) -> impl Iterator<Item = (&'a [u8], Value<'a>)> + 'a {
        let m: &'a [(Span, Id)] = match self.node() {
            Node::Object(s) => &self.doc.members[s.range()],
            _ => &[],
        };
        let doc = self.doc;
        m.iter()
            .map(move |&(k, id)| (&doc.text[k.range()], Value { doc, id }))
    }

    /// The first member of an object named `key`.
    pub fn find(self, key: &str) -> Option<Value<'a>> {
        self.members()
            .find(|(k, _)| *k == key.as_bytes())
            .map(|(_, v)| v)
    }

    /// A string's bytes.
    pub fn as_bytes(self) -> Option<&'a [u8]> {
        match self.node() {
            Node::Str(s) => Some(&self.doc.text[s.range()]),
            _ => None,
        }
    }

    /// `true` or `false`.
    pub fn as_bool(self) -> Option<bool> {
        match self.node() {
            Node::Bool(b) => Some(b),
            _ => None,
        }
    }

    /// A number as a double (rapidjson's `GetDouble`; integers convert).
    pub fn as_f64(self) -> Option<f64> {
        match self.node() {
            Node::Int(i) => Some(i as f64),
            Node::Uint(u) => Some(u as f64),
            Node::Double(d) => Some(d),
            _ => None,
        }
    }

    /// A number written as a double (with a fraction, an exponent, or too
    /// large for 64 bits; rapidjson's `IsDouble`).
    pub fn as_double(self) -> Option<f64> {
        match self.node() {
            Node::Double(d) => Some(d),
            _ => None,
        }
    }

    /// An integer that fits `i32` (rapidjson's `IsInt`).
    pub fn as_i32(self) -> Option<i32> {
        match self.node() {
            Node::Int(i) => i32::try_from(i).ok(),
            _ => None,
        }
    }

    /// An integer that fits `u32` (rapidjson's `IsUint`).
    pub fn as_u32(self) -> Option<u32> {
        match self.node() {
            Node::Int(i) => u32::try_from(i).ok(),
            _ => None,
        }
    }

    /// An integer that fits `i64` (rapidjson's `IsInt64`).
    pub fn as_i64(self) -> Option<i64> {
        match self.node() {
            Node::Int(i) => Some(i),
            _ => None,
        }
    }

    /// An integer that fits `u64` (rapidjson's `IsUint64`).
    pub fn as_u64(self) -> Option<u64> {
        match self.node() {
            Node::Int(i) => u64::try_from(i).ok(),
            Node::Uint(u) => Some(u),
            _ => None,
        }
    }

    /// A number as it was parsed: an integer (signed or not) or a double.
    pub(super) fn number(self) -> Option<Number> {
        match self.node() {
            Node::Int(i) => Some(Number::Int(i)),
            Node::Uint(u) => Some(Number::Uint(u)),
            Node::Double(d) => Some(Number::Double(d)),
            _ => None,
        }
    }
}

/// A number as parsed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Number {
    Int(i64),
    Uint(u64),
    Double(f64),
}

/// rapidjson's parse error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ErrorKind {
    DocumentEmpty,
    ValueInvalid,
    ObjectMissName,
    ObjectMissColon,
    ObjectMissCommaOrCurlyBracket,
    ArrayMissCommaOrSquareBracket,
    StringUnicodeEscapeInvalidHex,
    StringUnicodeSurrogateInvalid,
    StringEscapeInvalid,
    StringMissQuotationMark,
    StringInvalidEncoding,
    NumberTooBig,
    NumberMissFraction,
    NumberMissExponent,
}

impl ErrorKind {
    /// rapidjson's `GetParseError_En`.
    fn message(self) -> &'static str {
        match self {
            ErrorKind::DocumentEmpty => "The document is empty.",
            ErrorKind::ValueInvalid => "Invalid value.",
            ErrorKind::ObjectMissName => "Missing a name for object member.",
            ErrorKind::ObjectMissColon => "Missing a colon after a name of object member.",
            ErrorKind::ObjectMissCommaOrCurlyBracket => {
                "Missing a comma or '}' after an object member."
            }
            ErrorKind::ArrayMissCommaOrSquareBracket => {
                "Missing a comma or ']' after an array element."
            }
            ErrorKind::StringUnicodeEscapeInvalidHex => {
                "Incorrect hex digit after \\u escape in string."
            }
            ErrorKind::StringUnicodeSurrogateInvalid => "The surrogate pair in string is invalid.",
            ErrorKind::StringEscapeInvalid => "Invalid escape character in string.",
            ErrorKind::StringMissQuotationMark => "Missing a closing quotation mark in string.",
            ErrorKind::StringInvalidEncoding => "Invalid encoding in string.",
            ErrorKind::NumberTooBig => "Number too big to be stored in double.",
            ErrorKind::NumberMissFraction => "Miss fraction part in number.",
            ErrorKind::NumberMissExponent => "Miss exponent in number.",
        }
    }
}

#[derive(Debug)]
struct ParseError {
    kind: ErrorKind,
    offset: usize,
}

type Parsed<T> = std::result::Result<T, ParseError>;

/// rapidjson's iterative parser's states (those it can be in between
/// tokens).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Start,
    ObjectInitial,
    MemberKey,
    KeyValueDelimiter,
    MemberValue,
    MemberDelimiter,
    ArrayInitial,
    Element,
    ElementDelimiter,
    Finish,
}

/// An array or object being parsed: where its children start on the
/// pending stacks.
#[derive(Clone, Copy, Debug)]
struct Frame {
    object: bool,
    start: u32,
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
    doc: Document,
    frames: Vec<Frame>,
    /// Values of the open arrays, innermost last.
    pending_items: Vec<Id>,
    /// Members of the open objects, innermost last.
    pending_members: Vec<(Span, Id)>,
    /// The key of the member whose value is being parsed, per open object.
    keys: Vec<Span>,
}

impl<'a> Parser<'a> {
    fn new(src: &'a [u8]) -> Parser<'a> {
        // rapidjson's UTF-8 memory stream skips a byte order mark, byte by
        // byte; offsets still count from the first byte.
        let mut pos = 0;
        for b in [0xEF, 0xBB, 0xBF] {
            if src.get(pos) == Some(&b) {
                pos += 1;
            }
        }
        Parser {
            src,
            pos,
            doc: Document {
                nodes: Vec::new(),
                items: Vec::new(),
                members: Vec::new(),
                text: Vec::new(),
                root: 0,
            },
            frames: Vec::new(),
            pending_items: Vec::new(),
            pending_members: Vec::new(),
            keys: Vec::new(),
        }
    }

    /// The next byte; 0 at the end (a NUL byte ends the input too).
    fn peek(&self) -> u8 {
        self.src.get(self.pos).copied().unwrap_or(0)
    }

    fn consume(&mut self, b: u8) -> bool {
        if self.peek() == b && b != 0 {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn error<T>(&self, kind: ErrorKind, offset: usize) -> Parsed<T> {
        Err(ParseError { kind, offset })
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), b' ' | b'\n' | b'\r' | b'\t') {
            self.pos += 1;
        }
    }

    fn add(&mut self, node: Node) -> Id {
        let id = self.doc.nodes.len() as Id;
        self.doc.nodes.push(node);
        id
    }

    fn run(mut self) -> Parsed<Document> {
        let mut state = State::Start;
        self.skip_whitespace();
        loop {
            let c = self.peek();
            if c == 0 {
                break;
            }
            state = self.step(state, c)?;
            if state == State::Finish {
                return Ok(self.doc);
            }
            self.skip_whitespace();
        }
        // The input ended before the document did.
        let kind = match state {
            State::Start => ErrorKind::DocumentEmpty,
            State::ObjectInitial | State::MemberDelimiter => ErrorKind::ObjectMissName,
            State::MemberKey => ErrorKind::ObjectMissColon,
            State::MemberValue => ErrorKind::ObjectMissCommaOrCurlyBracket,
            State::KeyValueDelimiter | State::ArrayInitial | State::ElementDelimiter => {
                ErrorKind::ValueInvalid
            }
            State::Element => ErrorKind::ArrayMissCommaOrSquareBracket,
            State::Finish => return Ok(self.doc),
        };
        self.error(kind, self.pos)
    }

    /// One token in `state` (rapidjson's `Predict` and `Transit`).
    fn step(&mut self, state: State, c: u8) -> Parsed<State> {
        let value_expected = matches!(
            state,
            State::Start | State::KeyValueDelimiter | State::ArrayInitial | State::ElementDelimiter
        );
        if value_expected {
            return match c {
                b'[' | b'{' => {
                    self.pos += 1;
                    self.frames.push(Frame {
                        object: c == b'{',
                        start: if c == b'{' {
                            self.pending_members.len() as u32
                        } else {
                            self.pending_items.len() as u32
                        },
                    });
                    Ok(if c == b'{' {
                        State::ObjectInitial
                    } else {
                        State::ArrayInitial
                    })
                }
                b']' if state == State::ArrayInitial => self.close(),
                b']' | b'}' | b',' | b':' => {
                    let kind = if state == State::Start {
                        ErrorKind::DocumentEmpty
                    } else {
                        ErrorKind::ValueInvalid
                    };
                    self.error(kind, self.pos)
                }
                _ => {
                    let node = self.scalar(c)?;
                    let id = self.add(node);
                    Ok(self.completed(id))
                }
            };
        }
        match (state, c) {
            (State::ObjectInitial | State::MemberDelimiter, b'"') => {
                self.pos += 1;
                let key = self.string()?;
                self.keys.push(key);
                Ok(State::MemberKey)
            }
            (State::ObjectInitial, b'}') => self.close(),
            (State::ObjectInitial | State::MemberDelimiter, _) => {
                self.error(ErrorKind::ObjectMissName, self.pos)
            }
            (State::MemberKey, b':') => {
                self.pos += 1;
                Ok(State::KeyValueDelimiter)
            }
            (State::MemberKey, _) => self.error(ErrorKind::ObjectMissColon, self.pos),
            (State::MemberValue, b',') => {
                self.pos += 1;
                Ok(State::MemberDelimiter)
            }
            (State::MemberValue, b'}') => self.close(),
            (State::MemberValue, _) => {
                self.error(ErrorKind::ObjectMissCommaOrCurlyBracket, self.pos)
            }
            (State::Element, b',') => {
                self.pos += 1;
                Ok(State::ElementDelimiter)
            }
            (State::Element, b']') => self.close(),
            (State::Element, _) => self.error(ErrorKind::ArrayMissCommaOrSquareBracket, self.pos),
            // Value states are handled above; Finish ends the loop.
            _ => self.error(ErrorKind::ValueInvalid, self.pos),
        }
    }

    /// Closes the innermost array or object at its `]` or `}`.
    fn close(&mut self) -> Parsed<State> {
        self.pos += 1;
        let Some(frame) = self.frames.pop() else {
            return self.error(ErrorKind::ValueInvalid, self.pos);
        };
        let node = if frame.object {
            let start = self.doc.members.len() as u32;
            let children = self.pending_members.drain(frame.start as usize..);
            let len = children.len() as u32;
            self.doc.members.extend(children);
            Node::Object(Span { start, len })
        } else {
            let start = self.doc.items.len() as u32;
            let children = self.pending_items.drain(frame.start as usize..);
            let len = children.len() as u32;
            self.doc.items.extend(children);
            Node::Array(Span { start, len })
        };
        let id = self.add(node);
        Ok(self.completed(id))
    }

    /// A value is complete: it joins its parent, or ends the document.
    fn completed(&mut self, id: Id) -> State {
        match self.frames.last() {
            None => {
                self.doc.root = id;
                State::Finish
            }
            Some(f) if f.object => {
                let key = self.keys.pop().unwrap_or(Span { start: 0, len: 0 });
                self.pending_members.push((key, id));
                State::MemberValue
            }
            Some(_) => {
                self.pending_items.push(id);
                State::Element
            }
        }
    }

    /// A string, number or literal starting with `c`.
    fn scalar(&mut self, c: u8) -> Parsed<Node> {
        match c {
            b'"' => {
                self.pos += 1;
                Ok(Node::Str(self.string()?))
            }
            b'n' => self.literal(b"null", Node::Null),
            b't' => self.literal(b"true", Node::Bool(true)),
            b'f' => self.literal(b"false", Node::Bool(false)),
            _ => self.number(),
        }
    }

    fn literal(&mut self, word: &[u8], node: Node) -> Parsed<Node> {
        self.pos += 1;
        for &b in &word[1..] {
            if !self.consume(b) {
                return self.error(ErrorKind::ValueInvalid, self.pos);
            }
        }
        Ok(node)
    }

    /// The rest of a string after its opening quote, decoded into the
    /// document's text.
    fn string(&mut self) -> Parsed<Span> {
        let start = self.doc.text.len();
        loop {
            let c = self.peek();
            match c {
                b'\\' => {
                    let escape = self.pos;
                    self.pos += 1;
                    let e = self.peek();
                    let simple = match e {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(0x08),
                        b'f' => Some(0x0C),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        _ => None,
                    };
                    if let Some(s) = simple {
                        self.pos += 1;
                        self.doc.text.push(s);
                    } else if e == b'u' {
                        self.pos += 1;
                        let mut cp = self.hex4(escape)?;
                        if (0xD800..=0xDBFF).contains(&cp) {
                            if !(self.consume(b'\\') && self.consume(b'u')) {
                                return self
                                    .error(ErrorKind::StringUnicodeSurrogateInvalid, escape);
                            }
                            let low = self.hex4(escape)?;
                            if !(0xDC00..=0xDFFF).contains(&low) {
                                return self
                                    .error(ErrorKind::StringUnicodeSurrogateInvalid, escape);
                            }
                            cp = (((cp - 0xD800) << 10) | (low - 0xDC00)) + 0x10000;
                        }
                        push_utf8(&mut self.doc.text, cp);
                    } else {
                        return self.error(ErrorKind::StringEscapeInvalid, escape);
                    }
                }
                b'"' => {
                    self.pos += 1;
                    let len = self.doc.text.len() - start;
                    return Ok(Span {
                        start: start as u32,
                        len: len as u32,
                    });
                }
                0 => return self.error(ErrorKind::StringMissQuotationMark, self.pos),
                c if c < 0x20 => return self.error(ErrorKind::StringInvalidEncoding, self.pos),
                _ => {
                    // Copy the run of plain bytes at once.
                    let run = self.src[self.pos..]
                        .iter()
                        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
                        .unwrap_or(self.src.len() - self.pos);
                    self.doc
                        .text
                        .extend_from_slice(&self.src[self.pos..self.pos + run]);
                    self.pos += run;
                }
            }
        }
    }

    fn hex4(&mut self, escape: usize) -> Parsed<u32> {
        let mut v = 0u32;
        for _ in 0..4 {
            let d = match self.peek() {
                c @ b'0'..=b'9' => c - b'0',
                c @ b'a'..=b'f' => c - b'a' + 10,
                c @ b'A'..=b'F' => c - b'A' + 10,
                _ => return self.error(ErrorKind::StringUnicodeEscapeInvalidHex, escape),
            };
            self.pos += 1;
            v = (v << 4) | u32::from(d);
        }
        Ok(v)
    }

    /// A number (or `NaN`, `Inf`, `Infinity`), as rapidjson's
    /// `ParseNumber` delimits it.
    fn number(&mut self) -> Parsed<Node> {
        let start = self.pos;
        let minus = self.consume(b'-');
        let digits_start = self.pos;
        match self.peek() {
            b'0' => self.pos += 1,
            b'1'..=b'9' => {
                while self.peek().is_ascii_digit() {
                    self.pos += 1;
                }
            }
            b'N' | b'I' => {
                if self.consume(b'N') {
                    if self.consume(b'a') && self.consume(b'N') {
                        return Ok(Node::Double(f64::NAN));
                    }
                    return self.error(ErrorKind::ValueInvalid, self.pos);
                }
                self.pos += 1;
                if !(self.consume(b'n') && self.consume(b'f')) {
                    return self.error(ErrorKind::ValueInvalid, self.pos);
                }
                if self.peek() == b'i' {
                    for b in *b"inity" {
                        if !self.consume(b) {
                            return self.error(ErrorKind::ValueInvalid, self.pos);
                        }
                    }
                }
                return Ok(Node::Double(if minus {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }));
            }
            _ => return self.error(ErrorKind::ValueInvalid, self.pos),
        }
        let int_end = self.pos;
        let mut is_double = false;
        if self.consume(b'.') {
            is_double = true;
            if !self.peek().is_ascii_digit() {
                return self.error(ErrorKind::NumberMissFraction, self.pos);
            }
            while self.peek().is_ascii_digit() {
                self.pos += 1;
            }
        }
        if self.consume(b'e') || self.consume(b'E') {
            is_double = true;
            if !self.consume(b'+') {
                self.consume(b'-');
            }
            if !self.peek().is_ascii_digit() {
                return self.error(ErrorKind::NumberMissExponent, self.pos);
            }
            while self.peek().is_ascii_digit() {
                self.pos += 1;
            }
        }
        if !is_double {
            // Digits only; they are ASCII.
            let digits = std::str::from_utf8(&self.src[digits_start..int_end]).unwrap_or("");
            if let Ok(u) = digits.parse::<u64>() {
                if !minus {
                    return Ok(match i64::try_from(u) {
                        Ok(i) => Node::Int(i),
                        Err(_) => Node::Uint(u),
                    });
                }
                if u <= 1u64 << 63 {
                    return Ok(Node::Int((u as i64).wrapping_neg()));
                }
            }
        }
        let text = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("");
        match text.parse::<f64>() {
            Ok(d) if d.is_finite() => Ok(Node::Double(d)),
            _ => self.error(ErrorKind::NumberTooBig, start),
        }
    }
}

/// Appends code point `cp` (any value below 0x110000, surrogates included,
/// as rapidjson's encoder writes them) in UTF-8.
fn push_utf8(out: &mut Vec<u8>, cp: u32) {
    if cp < 0x80 {
        out.push(cp as u8);
    } else if cp < 0x800 {
        out.push(0xC0 | (cp >> 6) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else if cp < 0x10000 {
        out.push(0xE0 | (cp >> 12) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else {
        out.push(0xF0 | (cp >> 18) as u8);
        out.push(0x80 | ((cp >> 12) & 0x3F) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    }
}

#[cfg(test)]
mod tests;
