//! The proto3 JSON mapping as TensorFlow Serving prints its status and
//! metadata responses: protobuf's `MessageToJsonString` with
//! `add_whitespace` and `always_print_fields_with_no_presence`, by
//! reflection over [`proto::text::descriptor_pool`]:
//!
//! - one space of indent per level, `"name": value`, a newline at the end;
//! - fields in field-number order; a field without presence (a proto3
//!   scalar, enum, repeated or map field) always, a field with presence (a
//!   message, a oneof member) when set;
//! - 64-bit integers as strings, enums by name, bytes in base64, floats with
//!   `%.6g` (`%.9g` when that does not read back; doubles `%.15g`/`%.17g`),
//!   `"NaN"`, `"Infinity"`, `"-Infinity"`;
//! - map keys as strings (sorted here; protobuf leaves the order open);
//! - the wrapper types as their value, `google.protobuf.Any` as `"@type"`
//!   and the fields of the message it holds (or `"value"` for a well-known
//!   type). Timestamp, Duration, FieldMask and Struct are printed as plain
//!   messages: no message of the serving APIs holds one.

use graph::{Result, Status};
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MapKey, ReflectMessage, Value};

/// Which field names to print.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Names {
    /// Each field's `json_name` (lowerCamelCase unless the `.proto` sets one).
    Json,
    /// The names in the `.proto` (`preserve_proto_field_names`).
    Proto,
}

const WRAPPERS: [&str; 9] = [
    "google.protobuf.DoubleValue",
    "google.protobuf.FloatValue",
    "google.protobuf.Int64Value",
    "google.protobuf.UInt64Value",
    "google.protobuf.Int32Value",
    "google.protobuf.UInt32Value",
    "google.protobuf.BoolValue",
    "google.protobuf.StringValue",
    "google.protobuf.BytesValue",
];

/// `message` in the proto3 JSON mapping; see the module docs.
pub fn to_json<M: prost::Message + prost::Name>(message: &M, names: Names) -> Result<String> {
    let pool = proto::text::descriptor_pool();
    let desc = pool
        .get_message_by_name(&M::full_name())
        .ok_or_else(|| Status::internal(format!("no descriptor of {}", M::full_name())))?;
    let dynamic = DynamicMessage::decode(desc, message.encode_to_vec().as_slice())
        .map_err(|e| Status::internal(format!("Failed to convert proto to json. Error: {e}")))?;
    let mut p = Printer {
        out: String::new(),
        indent: 0,
        names,
    };
    p.message(&dynamic)?;
    p.newline();
    Ok(p.out)
}

struct Printer {
    out: String,
    indent: usize,
    names: Names,
}

impl Printer {
    fn newline(&mut self) {
        self.out.push('\n');
        self.out.extend(std::iter::repeat_n(' ', self.indent));
    }

    fn comma(&mut self, first: &mut bool) {
        if *first {
            *first = false;
        } else {
            self.out.push(',');
        }
    }

    fn message(&mut self, m: &DynamicMessage) -> Result<()> {
        let desc = m.descriptor();
        let name = desc.full_name();
        if name == "google.protobuf.Any" {
            return self.any(m);
        }
        if WRAPPERS.contains(&name) {
            let f = desc
                .get_field(1)
                .ok_or_else(|| Status::internal(format!("{name} has no field 1")))?;
            return self.value(&m.get_field(&f), &f.kind());
        }
        self.out.push('{');
        self.indent += 1;
        let mut first = true;
        self.fields(m, &mut first)?;
        self.indent -= 1;
        if !first {
            self.newline();
        }
        self.out.push('}');
        Ok(())
    }

    fn fields(&mut self, m: &DynamicMessage, first: &mut bool) -> Result<()> {
        let mut fields: Vec<FieldDescriptor> = m
            .descriptor()
            .fields()
            .filter(|f| f.is_list() || f.is_map() || !f.supports_presence() || m.has_field(f))
            .collect();
        fields.sort_by_key(|f| f.number());
        for f in fields {
            self.comma(first);
            self.newline();
            let name = match self.names {
                Names::Json => f.json_name().to_owned(),
                Names::Proto => f.name().to_owned(),
            };
            self.quoted(&name);
            self.out.push_str(": ");
            self.value(&m.get_field(&f), &f.kind())?;
        }
        Ok(())
    }

    fn any(&mut self, m: &DynamicMessage) -> Result<()> {
        let url = m
            .get_field_by_number(1)
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let bytes = m
            .get_field_by_number(2)
            .and_then(|v| v.as_bytes().cloned())
            .unwrap_or_default();
        if url.is_empty() && bytes.is_empty() {
            self.out.push_str("{}");
            return Ok(());
        }
        if url.is_empty() {
            return Err(Status::internal("broken Any: missing type URL"));
        }
        let type_name = url.rsplit('/').next().unwrap_or_default();
        let desc = proto::text::descriptor_pool()
            .get_message_by_name(type_name)
            .ok_or_else(|| Status::internal(format!("Any of unknown type {url}")))?;
        let inner = DynamicMessage::decode(desc, bytes)
            .map_err(|e| Status::internal(format!("Any of type {url} does not decode: {e}")))?;
        self.out.push('{');
        self.indent += 1;
        self.newline();
        self.out.push_str("\"@type\": ");
        self.quoted(&url);
        let mut first = false;
        let inner_name = inner.descriptor().full_name().to_owned();
        if inner_name.starts_with("google.protobuf.") {
            self.comma(&mut first);
            self.newline();
            self.out.push_str("\"value\": ");
            self.message(&inner)?;
        } else {
            self.fields(&inner, &mut first)?;
        }
        self.indent -= 1;
        self.newline();
        self.out.push('}');
        Ok(())
    }

    fn value(&mut self, v: &Value, kind: &Kind) -> Result<()> {
        match v {
            Value::Bool(b) => self.out.push_str(if *b { "true" } else { "false" }),
            Value::I32(i) => self.out.push_str(&i.to_string()),
            Value::U32(u) => self.out.push_str(&u.to_string()),
            Value::I64(i) => self.quoted(&i.to_string()),
            Value::U64(u) => self.quoted(&u.to_string()),
            Value::F32(x) => self.float(
                f64::from(*x),
                |s| s.parse::<f32>().ok().map(f64::from),
                6,
                9,
            ),
            Value::F64(x) => self.float(*x, |s| s.parse::<f64>().ok(), 15, 17),
            Value::String(s) => self.quoted(s),
            Value::Bytes(b) => {
                use base64::Engine;
                let s = base64::engine::general_purpose::STANDARD.encode(b);
                self.out.push('"');
                self.out.push_str(&s);
                self.out.push('"');
            }
            Value::EnumNumber(n) => match kind {
                Kind::Enum(e) if e.full_name() == "google.protobuf.NullValue" => {
                    self.out.push_str("null")
                }
                Kind::Enum(e) => match e.get_value(*n) {
                    Some(ev) => self.quoted(ev.name()),
                    None => self.out.push_str(&n.to_string()),
                },
                _ => self.out.push_str(&n.to_string()),
            },
            Value::Message(m) => self.message(m)?,
            Value::List(items) => {
                self.out.push('[');
                self.indent += 1;
                let mut first = true;
                for item in items {
                    self.comma(&mut first);
                    self.newline();
                    self.value(item, kind)?;
                }
                self.indent -= 1;
                if !first {
                    self.newline();
                }
                self.out.push(']');
            }
            Value::Map(map) => {
                let value_kind = match kind {
                    Kind::Message(entry) if entry.is_map_entry() => {
                        entry.map_entry_value_field().kind()
                    }
                    _ => return Err(Status::internal("a map field of a non-map kind")),
                };
                let mut entries: Vec<(&MapKey, &Value)> = map.iter().collect();
                entries.sort_by(|a, b| a.0.cmp(b.0));
                self.out.push('{');
                self.indent += 1;
                let mut first = true;
                for (k, v) in entries {
                    self.comma(&mut first);
                    self.newline();
                    match k {
                        MapKey::Bool(b) => self.quoted(if *b { "true" } else { "false" }),
                        MapKey::I32(i) => self.quoted(&i.to_string()),
                        MapKey::I64(i) => self.quoted(&i.to_string()),
                        MapKey::U32(u) => self.quoted(&u.to_string()),
                        MapKey::U64(u) => self.quoted(&u.to_string()),
                        MapKey::String(s) => self.quoted(s),
                    }
                    self.out.push_str(": ");
                    self.value(v, &value_kind)?;
                }
                self.indent -= 1;
                if !first {
                    self.newline();
                }
                self.out.push('}');
            }
        }
        Ok(())
    }

    /// protobuf's `SimpleFtoa`/`SimpleDtoa`: `digits` significant digits
    /// when they read back, else `max_digits`.
    fn float(
        &mut self,
        v: f64,
        read: impl Fn(&str) -> Option<f64>,
        digits: usize,
        max_digits: usize,
    ) {
        if v.is_nan() {
            self.out.push_str("\"NaN\"");
        } else if v.is_infinite() {
            self.out.push_str(if v > 0.0 {
                "\"Infinity\""
            } else {
                "\"-Infinity\""
            });
        } else {
            let mut s = super::writer::format_g(v, digits);
            if read(&s) != Some(v) {
                s = super::writer::format_g(v, max_digits);
            }
            self.out.push_str(&s);
        }
    }

    /// A string in quotes, escaped as protobuf's JSON writer escapes.
    fn quoted(&mut self, s: &str) {
        self.out.push('"');
        for c in s.chars() {
            match c {
                '\n' => self.out.push_str("\\n"),
                '\r' => self.out.push_str("\\r"),
                '\t' => self.out.push_str("\\t"),
                '"' => self.out.push_str("\\\""),
                '\u{0C}' => self.out.push_str("\\f"),
                '\u{08}' => self.out.push_str("\\b"),
                '\\' => self.out.push_str("\\\\"),
                c if must_escape(c) => {
                    let mut units = [0u16; 2];
                    for u in c.encode_utf16(&mut units) {
                        self.out.push_str(&format!("\\u{u:04x}"));
                    }
                }
                c => self.out.push(c),
            }
        }
        self.out.push('"');
    }
}

/// The characters protobuf's JSON writer writes as `\u` escapes.
fn must_escape(c: char) -> bool {
    let u = u32::from(c);
    matches!(
        u,
        0x3C | 0x3E
            | 0xFEFF
            | 0xFFF9
            | 0xFFFA
            | 0xFFFB
            | 0x00AD
            | 0x06DD
            | 0x070F
            | 0x17B4
            | 0x17B5
            | 0xE0001
    ) || [
        (0x0000, 0x001F),
        (0x007F, 0x009F),
        (0x0600, 0x0603),
        (0x200B, 0x200F),
        (0x2028, 0x202E),
        (0x2060, 0x2064),
        (0x206A, 0x206F),
        (0x1D173, 0x1D17A),
        (0xE0020, 0xE007F),
    ]
    .iter()
    .any(|&(lo, hi)| (lo..=hi).contains(&u))
}

#[cfg(test)]
mod tests {
    use crate::json::proto_json;
    use graph::DType;
    use proto::tensorflow::serving as pb;

    #[test]
    fn proto_json_prints_any_wrappers_bytes_and_floats() {
        use graph::proto::tf::{TensorProto, TensorShapeProto};
        let t = TensorProto {
            dtype: DType::F32.tf_enum(),
            tensor_shape: Some(TensorShapeProto::default()),
            float_val: vec![0.1, f32::NAN, 1e10],
            double_val: vec![0.1, -0.0],
            tensor_content: b"\x00\xff".to_vec().into(),
            int64_val: vec![-5],
            ..TensorProto::default()
        };
        let s = proto_json::to_json(&t, proto_json::Names::Proto).unwrap();
        assert!(
            s.contains("\n \"float_val\": [\n  0.1,\n  \"NaN\",\n  1e+10\n ],"),
            "{s}"
        );
        assert!(s.contains("\n \"double_val\": [\n  0.1,\n  -0\n ],"), "{s}");
        assert!(s.contains("\n \"tensor_content\": \"AP8=\","), "{s}");
        assert!(s.contains("\n \"int64_val\": [\n  \"-5\"\n ],"), "{s}");
        assert!(
            s.contains("\n \"tensor_shape\": {\n  \"dim\": [],\n  \"unknown_rank\": false\n },"),
            "{s}"
        );
        let s = proto_json::to_json(&t, proto_json::Names::Json).unwrap();
        assert!(s.contains("\"floatVal\""), "{s}");
        let any = prost_types::Any {
            type_url: "type.googleapis.com/tensorflow.serving.ModelSpec".to_owned(),
            value: prost::Message::encode_to_vec(&pb::ModelSpec {
                name: "m".to_owned(),
                version_choice: Some(pb::model_spec::VersionChoice::VersionLabel(
                    "stable".to_owned(),
                )),
                signature_name: "s".to_owned(),
            }),
        };
        let response = pb::GetModelMetadataResponse {
            model_spec: None,
            metadata: [("x".to_owned(), any)].into_iter().collect(),
        };
        assert_eq!(
            proto_json::to_json(&response, proto_json::Names::Proto).unwrap(),
            "{\n \"metadata\": {\n  \"x\": {\n   \"@type\": \"type.googleapis.com/tensorflow.serving.ModelSpec\",\n   \"name\": \"m\",\n   \"signature_name\": \"s\",\n   \"version_label\": \"stable\"\n  }\n }\n}\n"
        );
    }
}
