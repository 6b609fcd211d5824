//! The message parsers of the text format: one function per message of
//! [`crate::proto`], each reading its fields by name with a [`Reader`]. Fields
//! TensorFlow defines but actorflow's messages omit (debug info, experimental types)
//! are skipped; any other unknown field is an error,
//! as in TensorFlow's own parser. A singular field given twice keeps its last value.

use std::collections::BTreeMap;

use super::reader::{BodyFn, Reader};
use crate::proto::attr::{AttrValue, AttrValueKind, ListValue, NameAttrList};
use crate::proto::graph::{
    ArgDef, AttrDef, FunctionDef, FunctionDefLibrary, GradientDef, GraphDef, NodeDef, OpDef,
    VersionDef,
};
use crate::proto::tensor::{
    Dim, DtypeAndShape, ResourceHandleProto, TensorProto, TensorShapeProto, VariantTensorDataProto,
};
use crate::proto::tf::function_def::ArgAttrs;
use crate::proto::tf::{OpDeprecation, RegisteredGradient};
use crate::Result;

/// Parses a whole `GraphDef` in text format.
pub(crate) fn graph_def(r: &mut Reader<'_>, close: Option<u8>) -> Result<GraphDef> {
    let mut g = GraphDef::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "node" => r.messages(&mut g.node, node_def)?,
            "library" => g.library = Some(r.message(library)?),
            "version" => g.version = r.scalar(Reader::int::<i32>)?,
            "versions" => g.versions = Some(r.message(version_def)?),
            "debug_info" => r.skip_field()?,
            other => return Err(r.unknown_field("GraphDef", other)),
        }
    }
    Ok(g)
}

fn node_def(r: &mut Reader<'_>, close: Option<u8>) -> Result<NodeDef> {
    let mut n = NodeDef::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "name" => n.name = r.scalar(Reader::string)?,
            "op" => n.op = r.scalar(Reader::string)?,
            "input" => r.repeated(&mut n.input, Reader::string)?,
            "device" => n.device = r.scalar(Reader::string)?,
            "attr" => map_entries(r, &mut n.attr)?,
            "experimental_debug_info" | "experimental_type" => r.skip_field()?,
            other => return Err(r.unknown_field("NodeDef", other)),
        }
    }
    Ok(n)
}

/// Reads `attr { key: "k" value { … } }` entries into `map`.
fn map_entries(r: &mut Reader<'_>, map: &mut BTreeMap<String, AttrValue>) -> Result<()> {
    let mut entries = Vec::new();
    r.messages(&mut entries, attr_entry)?;
    map.extend(entries);
    Ok(())
}

fn attr_entry(r: &mut Reader<'_>, close: Option<u8>) -> Result<(String, AttrValue)> {
    let mut key = String::new();
    let mut value = AttrValue::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "key" => key = r.scalar(Reader::string)?,
            "value" => value = r.message(attr_value)?,
            other => return Err(r.unknown_field("AttrEntry", other)),
        }
    }
    Ok((key, value))
}

fn boxed_tensor(r: &mut Reader<'_>, close: Option<u8>) -> Result<Box<TensorProto>> {
    tensor(r, close).map(Box::new)
}

fn attr_value(r: &mut Reader<'_>, close: Option<u8>) -> Result<AttrValue> {
    let mut a = AttrValue::default();
    while let Some(f) = r.next_field(close)? {
        let v = match f.as_str() {
            "list" => AttrValueKind::List(r.message(list_value)?),
            "s" => AttrValueKind::S(r.scalar(Reader::bytes)?),
            "i" => AttrValueKind::I(r.scalar(Reader::int::<i64>)?),
            "f" => AttrValueKind::F(r.scalar(Reader::float32)?),
            "b" => AttrValueKind::B(r.scalar(Reader::boolean)?),
            "type" => AttrValueKind::Type(r.scalar(Reader::dtype)?),
            "shape" => AttrValueKind::Shape(r.message(shape)?),
            "tensor" => AttrValueKind::Tensor(r.message(boxed_tensor)?),
            "placeholder" => AttrValueKind::Placeholder(r.scalar(Reader::string)?),
            "func" => AttrValueKind::Func(r.message(name_attr_list)?),
            other => return Err(r.unknown_field("AttrValue", other)),
        };
        a.value = Some(v);
    }
    Ok(a)
}

fn list_value(r: &mut Reader<'_>, close: Option<u8>) -> Result<ListValue> {
    let mut l = ListValue::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "s" => r.repeated(&mut l.s, Reader::bytes)?,
            "i" => r.repeated(&mut l.i, Reader::int::<i64>)?,
            "f" => r.repeated(&mut l.f, Reader::float32)?,
            "b" => r.repeated(&mut l.b, Reader::boolean)?,
            "type" => r.repeated(&mut l.r#type, Reader::dtype)?,
            "shape" => r.messages(&mut l.shape, shape)?,
            "tensor" => r.messages(&mut l.tensor, tensor)?,
            "func" => r.messages(&mut l.func, name_attr_list)?,
            other => return Err(r.unknown_field("ListValue", other)),
        }
    }
    Ok(l)
}

fn name_attr_list(r: &mut Reader<'_>, close: Option<u8>) -> Result<NameAttrList> {
    let mut n = NameAttrList::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "name" => n.name = r.scalar(Reader::string)?,
            "attr" => map_entries(r, &mut n.attr)?,
            other => return Err(r.unknown_field("NameAttrList", other)),
        }
    }
    Ok(n)
}

fn shape(r: &mut Reader<'_>, close: Option<u8>) -> Result<TensorShapeProto> {
    let mut s = TensorShapeProto::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "dim" => r.messages(&mut s.dim, dim)?,
            "unknown_rank" => s.unknown_rank = r.scalar(Reader::boolean)?,
            other => return Err(r.unknown_field("TensorShapeProto", other)),
        }
    }
    Ok(s)
}

fn dim(r: &mut Reader<'_>, close: Option<u8>) -> Result<Dim> {
    let mut d = Dim::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "size" => d.size = r.scalar(Reader::int::<i64>)?,
            "name" => d.name = r.scalar(Reader::string)?,
            other => return Err(r.unknown_field("TensorShapeProto.Dim", other)),
        }
    }
    Ok(d)
}

fn tensor(r: &mut Reader<'_>, close: Option<u8>) -> Result<TensorProto> {
    let mut t = TensorProto::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "dtype" => t.dtype = r.scalar(Reader::dtype)?,
            "tensor_shape" => t.tensor_shape = Some(r.message(shape)?),
            "version_number" => t.version_number = r.scalar(Reader::int::<i32>)?,
            "tensor_content" => t.tensor_content = r.scalar(Reader::bytes)?.into(),
            "float_val" => r.repeated(&mut t.float_val, Reader::float32)?,
            "double_val" => r.repeated(&mut t.double_val, Reader::float64)?,
            "int_val" => r.repeated(&mut t.int_val, Reader::int::<i32>)?,
            "string_val" => r.repeated(&mut t.string_val, Reader::shared_bytes)?,
            "scomplex_val" => r.repeated(&mut t.scomplex_val, Reader::float32)?,
            "int64_val" => r.repeated(&mut t.int64_val, Reader::int::<i64>)?,
            "bool_val" => r.repeated(&mut t.bool_val, Reader::boolean)?,
            "dcomplex_val" => r.repeated(&mut t.dcomplex_val, Reader::float64)?,
            "half_val" => r.repeated(&mut t.half_val, Reader::int::<i32>)?,
            "resource_handle_val" => r.messages(&mut t.resource_handle_val, resource_handle)?,
            "variant_val" => r.messages(&mut t.variant_val, variant)?,
            "uint32_val" => r.repeated(&mut t.uint32_val, Reader::int::<u32>)?,
            "uint64_val" => r.repeated(&mut t.uint64_val, Reader::int::<u64>)?,
            "float8_val" => t.float8_val = r.scalar(Reader::bytes)?,
            other => return Err(r.unknown_field("TensorProto", other)),
        }
    }
    Ok(t)
}

fn resource_handle(r: &mut Reader<'_>, close: Option<u8>) -> Result<ResourceHandleProto> {
    let mut h = ResourceHandleProto::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "device" => h.device = r.scalar(Reader::string)?,
            "container" => h.container = r.scalar(Reader::string)?,
            "name" => h.name = r.scalar(Reader::string)?,
            "hash_code" => h.hash_code = r.scalar(Reader::int::<u64>)?,
            "maybe_type_name" => h.maybe_type_name = r.scalar(Reader::string)?,
            "dtypes_and_shapes" => r.messages(&mut h.dtypes_and_shapes, dtype_and_shape)?,
            other => return Err(r.unknown_field("ResourceHandleProto", other)),
        }
    }
    Ok(h)
}

fn dtype_and_shape(r: &mut Reader<'_>, close: Option<u8>) -> Result<DtypeAndShape> {
    let mut d = DtypeAndShape::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "dtype" => d.dtype = r.scalar(Reader::dtype)?,
            "shape" => d.shape = Some(r.message(shape)?),
            other => return Err(r.unknown_field("DtypeAndShape", other)),
        }
    }
    Ok(d)
}

fn variant(r: &mut Reader<'_>, close: Option<u8>) -> Result<VariantTensorDataProto> {
    let mut v = VariantTensorDataProto::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "type_name" => v.type_name = r.scalar(Reader::string)?,
            "metadata" => v.metadata = r.scalar(Reader::bytes)?,
            "tensors" => r.messages(&mut v.tensors, tensor)?,
            other => return Err(r.unknown_field("VariantTensorDataProto", other)),
        }
    }
    Ok(v)
}

fn version_def(r: &mut Reader<'_>, close: Option<u8>) -> Result<VersionDef> {
    let mut v = VersionDef::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "producer" => v.producer = r.scalar(Reader::int::<i32>)?,
            "min_consumer" => v.min_consumer = r.scalar(Reader::int::<i32>)?,
            "bad_consumers" => r.repeated(&mut v.bad_consumers, Reader::int::<i32>)?,
            other => return Err(r.unknown_field("VersionDef", other)),
        }
    }
    Ok(v)
}

fn library(r: &mut Reader<'_>, close: Option<u8>) -> Result<FunctionDefLibrary> {
    let mut l = FunctionDefLibrary::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "function" => r.messages(&mut l.function, function_def)?,
            "gradient" => r.messages(&mut l.gradient, gradient_def)?,
            "registered_gradients" => {
                r.messages(&mut l.registered_gradients, registered_gradient)?
            }
            other => return Err(r.unknown_field("FunctionDefLibrary", other)),
        }
    }
    Ok(l)
}

fn function_def(r: &mut Reader<'_>, close: Option<u8>) -> Result<FunctionDef> {
    let mut d = FunctionDef::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "signature" => d.signature = Some(r.message(op_def)?),
            "attr" => map_entries(r, &mut d.attr)?,
            "arg_attr" => {
                let mut entries = Vec::new();
                r.messages(&mut entries, arg_attr_entry)?;
                d.arg_attr.extend(entries);
            }
            "resource_arg_unique_id" => {
                let mut entries = Vec::new();
                r.messages(&mut entries, unique_id_entry)?;
                d.resource_arg_unique_id.extend(entries);
            }
            "node_def" => r.messages(&mut d.node_def, node_def)?,
            "ret" => string_map_entries(r, &mut d.ret)?,
            "control_ret" => string_map_entries(r, &mut d.control_ret)?,
            other => return Err(r.unknown_field("FunctionDef", other)),
        }
    }
    Ok(d)
}

/// Reads `ret { key: "k" value: "v" }` entries into `map`.
fn string_map_entries(r: &mut Reader<'_>, map: &mut BTreeMap<String, String>) -> Result<()> {
    let entry: BodyFn<'_, (String, String)> = |r, close| {
        let (mut key, mut value) = (String::new(), String::new());
        while let Some(f) = r.next_field(close)? {
            match f.as_str() {
                "key" => key = r.scalar(Reader::string)?,
                "value" => value = r.scalar(Reader::string)?,
                other => return Err(r.unknown_field("map entry", other)),
            }
        }
        Ok((key, value))
    };
    let mut entries = Vec::new();
    r.messages(&mut entries, entry)?;
    map.extend(entries);
    Ok(())
}

fn arg_attr_entry(r: &mut Reader<'_>, close: Option<u8>) -> Result<(u32, ArgAttrs)> {
    let arg_attrs: BodyFn<'_, ArgAttrs> = |r, close| {
        let mut a = ArgAttrs::default();
        while let Some(f) = r.next_field(close)? {
            match f.as_str() {
                "attr" => map_entries(r, &mut a.attr)?,
                other => return Err(r.unknown_field("FunctionDef.ArgAttrs", other)),
            }
        }
        Ok(a)
    };
    let (mut key, mut value) = (0, ArgAttrs::default());
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "key" => key = r.scalar(Reader::int::<u32>)?,
            "value" => value = r.message(arg_attrs)?,
            other => return Err(r.unknown_field("ArgAttrEntry", other)),
        }
    }
    Ok((key, value))
}

fn unique_id_entry(r: &mut Reader<'_>, close: Option<u8>) -> Result<(u32, u32)> {
    let (mut key, mut value) = (0, 0);
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "key" => key = r.scalar(Reader::int::<u32>)?,
            "value" => value = r.scalar(Reader::int::<u32>)?,
            other => return Err(r.unknown_field("ResourceArgUniqueIdEntry", other)),
        }
    }
    Ok((key, value))
}

fn op_def(r: &mut Reader<'_>, close: Option<u8>) -> Result<OpDef> {
    let mut d = OpDef::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "name" => d.name = r.scalar(Reader::string)?,
            "input_arg" => r.messages(&mut d.input_arg, arg_def)?,
            "output_arg" => r.messages(&mut d.output_arg, arg_def)?,
            "control_output" => r.repeated(&mut d.control_output, Reader::string)?,
            "attr" => r.messages(&mut d.attr, attr_def)?,
            "deprecation" => d.deprecation = Some(r.message(op_deprecation)?),
            "summary" => d.summary = r.scalar(Reader::string)?,
            "description" => d.description = r.scalar(Reader::string)?,
            "is_commutative" => d.is_commutative = r.scalar(Reader::boolean)?,
            "is_aggregate" => d.is_aggregate = r.scalar(Reader::boolean)?,
            "is_stateful" => d.is_stateful = r.scalar(Reader::boolean)?,
            "allows_uninitialized_input" => {
                d.allows_uninitialized_input = r.scalar(Reader::boolean)?
            }
            "is_distributed_communication" => {
                d.is_distributed_communication = r.scalar(Reader::boolean)?
            }
            other => return Err(r.unknown_field("OpDef", other)),
        }
    }
    Ok(d)
}

fn arg_def(r: &mut Reader<'_>, close: Option<u8>) -> Result<ArgDef> {
    let mut a = ArgDef::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "name" => a.name = r.scalar(Reader::string)?,
            "description" => a.description = r.scalar(Reader::string)?,
            "type" => a.r#type = r.scalar(Reader::dtype)?,
            "type_attr" => a.type_attr = r.scalar(Reader::string)?,
            "number_attr" => a.number_attr = r.scalar(Reader::string)?,
            "type_list_attr" => a.type_list_attr = r.scalar(Reader::string)?,
            "handle_data" => r.messages(&mut a.handle_data, dtype_and_shape)?,
            "is_ref" => a.is_ref = r.scalar(Reader::boolean)?,
            "experimental_full_type" => r.skip_field()?,
            other => return Err(r.unknown_field("OpDef.ArgDef", other)),
        }
    }
    Ok(a)
}

fn attr_def(r: &mut Reader<'_>, close: Option<u8>) -> Result<AttrDef> {
    let mut a = AttrDef::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "name" => a.name = r.scalar(Reader::string)?,
            "type" => a.r#type = r.scalar(Reader::string)?,
            "default_value" => a.default_value = Some(r.message(attr_value)?),
            "description" => a.description = r.scalar(Reader::string)?,
            "has_minimum" => a.has_minimum = r.scalar(Reader::boolean)?,
            "minimum" => a.minimum = r.scalar(Reader::int::<i64>)?,
            "allowed_values" => a.allowed_values = Some(r.message(attr_value)?),
            other => return Err(r.unknown_field("OpDef.AttrDef", other)),
        }
    }
    Ok(a)
}

fn op_deprecation(r: &mut Reader<'_>, close: Option<u8>) -> Result<OpDeprecation> {
    let mut d = OpDeprecation::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "version" => d.version = r.scalar(Reader::int::<i32>)?,
            "explanation" => d.explanation = r.scalar(Reader::string)?,
            other => return Err(r.unknown_field("OpDeprecation", other)),
        }
    }
    Ok(d)
}

fn registered_gradient(r: &mut Reader<'_>, close: Option<u8>) -> Result<RegisteredGradient> {
    let mut g = RegisteredGradient::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "gradient_func" => g.gradient_func = r.scalar(Reader::string)?,
            "registered_op_type" => g.registered_op_type = r.scalar(Reader::string)?,
            other => return Err(r.unknown_field("RegisteredGradient", other)),
        }
    }
    Ok(g)
}

fn gradient_def(r: &mut Reader<'_>, close: Option<u8>) -> Result<GradientDef> {
    let mut g = GradientDef::default();
    while let Some(f) = r.next_field(close)? {
        match f.as_str() {
            "function_name" => g.function_name = r.scalar(Reader::string)?,
            "gradient_func" => g.gradient_func = r.scalar(Reader::string)?,
            other => return Err(r.unknown_field("GradientDef", other)),
        }
    }
    Ok(g)
}
