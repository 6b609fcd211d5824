//! The text-format writer, over reflection: the layout TensorFlow's Python
//! `text_format` prints — two-space indentation, one field per line in field
//! number order, every value of a repeated field on its own line (never a
//! `[…]` list), map entries as `key`/`value` messages sorted by key, proto3
//! defaults left out (a map entry's default key or scalar value too), enum
//! values by name, bytes C-escaped (strings too, but for their characters
//! beyond ASCII), floats in their shortest round-trip form as Python's `repr`
//! spells them (`inf`, `-inf`, `nan`, `1e+20`), and a
//! `google.protobuf.Any` whose type the descriptors know expanded
//! (`[type.googleapis.com/tensorflow.X] { … }`).
//!
//! prost-reflect has a writer too, but it prints repeated fields as lists:
//! valid, yet not what TensorFlow writes, and the `checkpoint` state file must
//! be byte for byte what TensorFlow's Saver writes.

use std::fmt::Write as _;

use prost_reflect::{DynamicMessage, Kind, Value};

/// Escapes bytes for a double-quoted literal as TensorFlow's writers do: `\n`,
/// `\r`, `\t`, `\"`, `\'` and `\\` by name, other bytes outside printable ASCII
/// as three octal digits.
pub fn escape_bytes(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len());
    for &c in b {
        push_escaped(&mut s, c);
    }
    s
}

/// Appends a `string` field's text escaped as TensorFlow's Python does: as
/// [`escape_bytes`], but characters beyond ASCII stay as they are.
fn push_escaped_str(out: &mut String, s: &str) {
    for c in s.chars() {
        match u8::try_from(c) {
            Ok(b) if b.is_ascii() => push_escaped(out, b),
            _ => out.push(c),
        }
    }
}

/// Appends byte `c` as [`escape_bytes`] writes it.
fn push_escaped(s: &mut String, c: u8) {
    match c {
        b'\n' => s.push_str("\\n"),
        b'\r' => s.push_str("\\r"),
        b'\t' => s.push_str("\\t"),
        b'"' => s.push_str("\\\""),
        b'\'' => s.push_str("\\'"),
        b'\\' => s.push_str("\\\\"),
        0x20..=0x7e => s.push(char::from(c)),
        _ => {
            let _ = write!(s, "\\{c:03o}");
        }
    }
}

/// The fields of `m`, one a line, at the top level.
pub(super) fn message(m: &DynamicMessage) -> String {
    let mut w = Writer { out: String::new() };
    w.fields(m, 0);
    w.out
}

struct Writer {
    out: String,
}

impl Writer {
    fn indent(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out.push_str("  ");
        }
    }

    fn fields(&mut self, m: &DynamicMessage, depth: usize) {
        if let Some((type_url, body)) = expand_any(m) {
            self.open(&format!("[{type_url}]"), depth);
            self.fields(&body, depth + 1);
            self.close(depth);
            return;
        }
        for (field, value) in m.fields() {
            let kind = field.kind();
            match value {
                Value::List(items) => {
                    for v in items {
                        self.field(field.name(), &kind, v, depth);
                    }
                }
                Value::Map(map) => {
                    let Some(entry) = kind.as_message() else {
                        continue;
                    };
                    let (key, val) = (entry.map_entry_key_field(), entry.map_entry_value_field());
                    let mut entries: Vec<_> = map.iter().collect();
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                    for (k, v) in entries {
                        // an entry is a message: a default key or scalar value
                        // is left out, a message value is always there
                        self.open(field.name(), depth);
                        let k = Value::from(k.clone());
                        if !k.is_default(&key.kind()) {
                            self.field(key.name(), &key.kind(), &k, depth + 1);
                        }
                        if val.kind().as_message().is_some() || !v.is_default(&val.kind()) {
                            self.field(val.name(), &val.kind(), v, depth + 1);
                        }
                        self.close(depth);
                    }
                }
                v => self.field(field.name(), &kind, v, depth),
            }
        }
    }

    fn open(&mut self, name: &str, depth: usize) {
        self.indent(depth);
        self.out.push_str(name);
        self.out.push_str(" {\n");
    }

    fn close(&mut self, depth: usize) {
        self.indent(depth);
        self.out.push_str("}\n");
    }

    /// One `name: value` line, or a nested message.
    fn field(&mut self, name: &str, kind: &Kind, v: &Value, depth: usize) {
        if let Value::Message(m) = v {
            self.open(name, depth);
            self.fields(m, depth + 1);
            self.close(depth);
            return;
        }
        self.indent(depth);
        self.out.push_str(name);
        self.out.push_str(": ");
        let o = &mut self.out;
        let _ = match v {
            Value::Bool(b) => write!(o, "{b}"),
            Value::I32(i) => write!(o, "{i}"),
            Value::I64(i) => write!(o, "{i}"),
            Value::U32(i) => write!(o, "{i}"),
            Value::U64(i) => write!(o, "{i}"),
            Value::F32(f) => write!(o, "{}", float(f64::from(*f), format!("{f:?}"))),
            Value::F64(f) => write!(o, "{}", float(*f, format!("{f:?}"))),
            Value::String(s) => {
                o.push('"');
                push_escaped_str(o, s);
                o.push('"');
                Ok(())
            }
            Value::Bytes(b) => {
                o.push('"');
                b.iter().for_each(|&c| push_escaped(o, c));
                o.push('"');
                Ok(())
            }
            Value::EnumNumber(n) => match kind.as_enum().and_then(|e| e.get_value(*n)) {
                Some(value) => write!(o, "{}", value.name()),
                None => write!(o, "{n}"),
            },
            // a list or map inside a list or map cannot be declared
            Value::Message(_) | Value::List(_) | Value::Map(_) => Ok(()),
        };
        self.out.push('\n');
    }
}

/// A `google.protobuf.Any`'s type URL and contents, when `m` is one whose
/// type the descriptors know and whose contents decode.
fn expand_any(m: &DynamicMessage) -> Option<(String, DynamicMessage)> {
    use prost_reflect::ReflectMessage;
    if m.descriptor().full_name() != "google.protobuf.Any" {
        return None;
    }
    let type_url = m.get_field_by_number(1)?.as_str()?.to_owned();
    let name = type_url.rsplit_once('/')?.1;
    let desc = m.descriptor().parent_pool().get_message_by_name(name)?;
    let value = m.get_field_by_number(2)?;
    let body = DynamicMessage::decode(desc, value.as_bytes()?.clone()).ok()?;
    Some((type_url, body))
}

/// A float as the text format spells it: `text` (Rust's shortest round-trip
/// digits, in exponent form below 1e-4 and from 1e16 on, as Python's `repr`)
/// with the exponent's sign written as Python writes it (`1e+20`), or `inf`,
/// `-inf`, `nan`.
fn float(v: f64, text: String) -> String {
    if v.is_nan() {
        "nan".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else if text.contains("e-") {
        text
    } else {
        text.replacen('e', "e+", 1)
    }
}
