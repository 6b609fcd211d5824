//! The text-format writer: the layout TensorFlow's Python `text_format` prints
//! (two-space indentation, one field per line, fields in number order, map entries
//! sorted by key, proto3 defaults left out, data types by enum name, bytes
//! C-escaped), so its output reads back in TensorFlow and in [`super::parse`].

use std::fmt::Write as _;

use crate::proto::attr::{AttrValue, AttrValueKind, ListValue, NameAttrList};
use std::collections::BTreeMap;

use crate::proto::graph::{
    ArgDef, AttrDef, FunctionDef, FunctionDefLibrary, GraphDef, NodeDef, OpDef, VersionDef,
};
use crate::proto::tensor::{
    DtypeAndShape, ResourceHandleProto, TensorProto, TensorShapeProto, VariantTensorDataProto,
};
use crate::proto::types::TfDataType;

/// Escapes bytes for a double-quoted literal: `\n \r \t \" \' \\` by name, other
/// bytes outside printable ASCII as three-digit octal.
pub fn escape_bytes(b: &[u8]) -> String {
    let mut s = String::with_capacity(b.len() + 2);
    for &c in b {
        match c {
            b'\n' => s.push_str("\\n"),
            b'\r' => s.push_str("\\r"),
            b'\t' => s.push_str("\\t"),
            b'"' => s.push_str("\\\""),
            b'\'' => s.push_str("\\'"),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(c as char),
            _ => {
                let _ = write!(s, "\\{c:03o}");
            }
        }
    }
    s
}

/// A `float` or `double` as the text format spells it: shortest round-trip digits,
/// `inf`, `-inf`, `nan`.
fn float_text(v: f64, text: String) -> String {
    if v.is_nan() {
        "nan".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        text
    }
}

fn f32_text(v: f32) -> String {
    float_text(f64::from(v), format!("{v:?}"))
}

fn f64_text(v: f64) -> String {
    float_text(v, format!("{v:?}"))
}

fn dtype_text(v: i32) -> String {
    match TfDataType::try_from(v) {
        Ok(t) => t.as_str_name().to_owned(),
        Err(_) => v.to_string(),
    }
}

struct Writer {
    out: String,
    indent: usize,
}

impl Writer {
    fn line(&mut self, text: std::fmt::Arguments<'_>) {
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
        let _ = self.out.write_fmt(text);
        self.out.push('\n');
    }

    fn field(&mut self, name: &str, v: impl std::fmt::Display) {
        self.line(format_args!("{name}: {v}"));
    }

    fn string(&mut self, name: &str, b: &[u8]) {
        self.line(format_args!("{name}: \"{}\"", escape_bytes(b)));
    }

    fn nonempty(&mut self, name: &str, s: &str) {
        if !s.is_empty() {
            self.string(name, s.as_bytes());
        }
    }

    fn nonzero<T: PartialEq + Default + std::fmt::Display>(&mut self, name: &str, v: T) {
        if v != T::default() {
            self.field(name, v);
        }
    }

    fn message(&mut self, name: &str, body: impl FnOnce(&mut Writer)) {
        self.line(format_args!("{name} {{"));
        self.indent += 1;
        body(self);
        self.indent -= 1;
        self.line(format_args!("}}"));
    }

    fn graph_def(&mut self, g: &GraphDef) {
        for n in &g.node {
            self.message("node", |w| w.node_def(n));
        }
        if let Some(l) = &g.library {
            self.message("library", |w| w.library(l));
        }
        self.nonzero("version", g.version);
        if let Some(v) = &g.versions {
            self.message("versions", |w| w.version_def(v));
        }
    }

    fn node_def(&mut self, n: &NodeDef) {
        self.nonempty("name", &n.name);
        self.nonempty("op", &n.op);
        for i in &n.input {
            self.string("input", i.as_bytes());
        }
        self.nonempty("device", &n.device);
        self.attr_map(&n.attr);
    }

    fn attr_map(&mut self, m: &BTreeMap<String, AttrValue>) {
        for (k, v) in m {
            self.message("attr", |w| {
                w.string("key", k.as_bytes());
                w.message("value", |w| w.attr_value(v));
            });
        }
    }

    fn attr_value(&mut self, a: &AttrValue) {
        match &a.value {
            None => {}
            Some(AttrValueKind::List(l)) => self.message("list", |w| w.list_value(l)),
            Some(AttrValueKind::S(s)) => self.string("s", s),
            Some(AttrValueKind::I(i)) => self.field("i", i),
            Some(AttrValueKind::F(f)) => self.field("f", f32_text(*f)),
            Some(AttrValueKind::B(b)) => self.field("b", b),
            Some(AttrValueKind::Type(t)) => self.field("type", dtype_text(*t)),
            Some(AttrValueKind::Shape(s)) => self.message("shape", |w| w.shape(s)),
            Some(AttrValueKind::Tensor(t)) => self.message("tensor", |w| w.tensor(t)),
            Some(AttrValueKind::Placeholder(p)) => self.string("placeholder", p.as_bytes()),
            Some(AttrValueKind::Func(f)) => self.message("func", |w| w.name_attr_list(f)),
        }
    }

    fn list_value(&mut self, l: &ListValue) {
        for s in &l.s {
            self.string("s", s);
        }
        for i in &l.i {
            self.field("i", i);
        }
        for f in &l.f {
            self.field("f", f32_text(*f));
        }
        for b in &l.b {
            self.field("b", b);
        }
        for t in &l.r#type {
            self.field("type", dtype_text(*t));
        }
        for s in &l.shape {
            self.message("shape", |w| w.shape(s));
        }
        for t in &l.tensor {
            self.message("tensor", |w| w.tensor(t));
        }
        for f in &l.func {
            self.message("func", |w| w.name_attr_list(f));
        }
    }

    fn name_attr_list(&mut self, f: &NameAttrList) {
        self.nonempty("name", &f.name);
        self.attr_map(&f.attr);
    }

    fn shape(&mut self, s: &TensorShapeProto) {
        for d in &s.dim {
            self.message("dim", |w| {
                w.nonzero("size", d.size);
                w.nonempty("name", &d.name);
            });
        }
        if s.unknown_rank {
            self.field("unknown_rank", true);
        }
    }

    fn tensor(&mut self, t: &TensorProto) {
        if t.dtype != 0 {
            self.field("dtype", dtype_text(t.dtype));
        }
        if let Some(s) = &t.tensor_shape {
            self.message("tensor_shape", |w| w.shape(s));
        }
        self.nonzero("version_number", t.version_number);
        if !t.tensor_content.is_empty() {
            self.string("tensor_content", &t.tensor_content);
        }
        t.float_val
            .iter()
            .for_each(|v| self.field("float_val", f32_text(*v)));
        t.double_val
            .iter()
            .for_each(|v| self.field("double_val", f64_text(*v)));
        t.int_val.iter().for_each(|v| self.field("int_val", v));
        t.string_val
            .iter()
            .for_each(|v| self.string("string_val", v));
        t.scomplex_val
            .iter()
            .for_each(|v| self.field("scomplex_val", f32_text(*v)));
        t.int64_val.iter().for_each(|v| self.field("int64_val", v));
        t.bool_val.iter().for_each(|v| self.field("bool_val", v));
        t.dcomplex_val
            .iter()
            .for_each(|v| self.field("dcomplex_val", f64_text(*v)));
        t.half_val.iter().for_each(|v| self.field("half_val", v));
        for h in &t.resource_handle_val {
            self.message("resource_handle_val", |w| w.resource_handle(h));
        }
        for v in &t.variant_val {
            self.message("variant_val", |w| w.variant(v));
        }
        t.uint32_val
            .iter()
            .for_each(|v| self.field("uint32_val", v));
        t.uint64_val
            .iter()
            .for_each(|v| self.field("uint64_val", v));
        if !t.float8_val.is_empty() {
            self.string("float8_val", &t.float8_val);
        }
    }

    fn resource_handle(&mut self, h: &ResourceHandleProto) {
        self.nonempty("device", &h.device);
        self.nonempty("container", &h.container);
        self.nonempty("name", &h.name);
        self.nonzero("hash_code", h.hash_code);
        self.nonempty("maybe_type_name", &h.maybe_type_name);
        for d in &h.dtypes_and_shapes {
            self.message("dtypes_and_shapes", |w| w.dtype_and_shape(d));
        }
    }

    fn dtype_and_shape(&mut self, d: &DtypeAndShape) {
        if d.dtype != 0 {
            self.field("dtype", dtype_text(d.dtype));
        }
        if let Some(s) = &d.shape {
            self.message("shape", |w| w.shape(s));
        }
    }

    fn variant(&mut self, v: &VariantTensorDataProto) {
        self.nonempty("type_name", &v.type_name);
        if !v.metadata.is_empty() {
            self.string("metadata", &v.metadata);
        }
        for t in &v.tensors {
            self.message("tensors", |w| w.tensor(t));
        }
    }

    fn version_def(&mut self, v: &VersionDef) {
        self.nonzero("producer", v.producer);
        self.nonzero("min_consumer", v.min_consumer);
        for b in &v.bad_consumers {
            self.field("bad_consumers", b);
        }
    }

    fn library(&mut self, l: &FunctionDefLibrary) {
        for f in &l.function {
            self.message("function", |w| w.function_def(f));
        }
        for g in &l.gradient {
            self.message("gradient", |w| {
                w.nonempty("function_name", &g.function_name);
                w.nonempty("gradient_func", &g.gradient_func);
            });
        }
        for g in &l.registered_gradients {
            self.message("registered_gradients", |w| {
                w.nonempty("gradient_func", &g.gradient_func);
                w.nonempty("registered_op_type", &g.registered_op_type);
            });
        }
    }

    fn function_def(&mut self, f: &FunctionDef) {
        if let Some(s) = &f.signature {
            self.message("signature", |w| w.op_def(s));
        }
        for n in &f.node_def {
            self.message("node_def", |w| w.node_def(n));
        }
        self.string_map("ret", &f.ret);
        self.attr_map(&f.attr);
        self.string_map("control_ret", &f.control_ret);
        for (k, a) in &f.arg_attr {
            self.message("arg_attr", |w| {
                w.field("key", k);
                w.message("value", |w| w.attr_map(&a.attr));
            });
        }
        for (k, v) in &f.resource_arg_unique_id {
            self.message("resource_arg_unique_id", |w| {
                w.field("key", k);
                w.field("value", v);
            });
        }
    }

    fn string_map(&mut self, name: &str, m: &BTreeMap<String, String>) {
        for (k, v) in m {
            self.message(name, |w| {
                w.string("key", k.as_bytes());
                w.string("value", v.as_bytes());
            });
        }
    }

    fn op_def(&mut self, d: &OpDef) {
        self.nonempty("name", &d.name);
        for a in &d.input_arg {
            self.message("input_arg", |w| w.arg_def(a));
        }
        for a in &d.output_arg {
            self.message("output_arg", |w| w.arg_def(a));
        }
        for a in &d.attr {
            self.message("attr", |w| w.attr_def(a));
        }
        self.nonempty("summary", &d.summary);
        self.nonempty("description", &d.description);
        if let Some(dep) = &d.deprecation {
            self.message("deprecation", |w| {
                w.nonzero("version", dep.version);
                w.nonempty("explanation", &dep.explanation);
            });
        }
        self.nonzero("is_aggregate", d.is_aggregate);
        self.nonzero("is_stateful", d.is_stateful);
        self.nonzero("is_commutative", d.is_commutative);
        self.nonzero("allows_uninitialized_input", d.allows_uninitialized_input);
        for c in &d.control_output {
            self.string("control_output", c.as_bytes());
        }
        self.nonzero(
            "is_distributed_communication",
            d.is_distributed_communication,
        );
    }

    fn arg_def(&mut self, a: &ArgDef) {
        self.nonempty("name", &a.name);
        self.nonempty("description", &a.description);
        if a.r#type != 0 {
            self.field("type", dtype_text(a.r#type));
        }
        self.nonempty("type_attr", &a.type_attr);
        self.nonempty("number_attr", &a.number_attr);
        self.nonempty("type_list_attr", &a.type_list_attr);
        for d in &a.handle_data {
            self.message("handle_data", |w| w.dtype_and_shape(d));
        }
        self.nonzero("is_ref", a.is_ref);
    }

    fn attr_def(&mut self, a: &AttrDef) {
        self.nonempty("name", &a.name);
        self.nonempty("type", &a.r#type);
        if let Some(v) = &a.default_value {
            self.message("default_value", |w| w.attr_value(v));
        }
        self.nonempty("description", &a.description);
        self.nonzero("has_minimum", a.has_minimum);
        self.nonzero("minimum", a.minimum);
        if let Some(v) = &a.allowed_values {
            self.message("allowed_values", |w| w.attr_value(v));
        }
    }
}

/// A `GraphDef` in text format.
pub fn graph_def(g: &GraphDef) -> String {
    let mut w = Writer {
        out: String::new(),
        indent: 0,
    };
    w.graph_def(g);
    w.out
}
