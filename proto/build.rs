//! Compiles the `.proto` files under `protos/` into Rust: protox (a protobuf
//! compiler written in Rust, so no system `protoc`) parses them into a
//! `FileDescriptorSet`, and tonic-prost-build turns that into prost messages and
//! tonic clients and servers, written to `OUT_DIR` and included by `src/lib.rs`.
//! The same descriptors, without their source comments, are written to
//! `OUT_DIR/descriptors.bin` for `src/text/`: the text format reads and writes
//! every message by reflection over them, so the two can never disagree. The
//! one difference is [`NOT_GENERATED`]: fields declared for the text format that
//! the generated structs leave out.

use std::path::Path;

/// Every file to compile; the files they import are found under `protos/`.
const PROTOS: &[&str] = &[
    "actorflow/transport.proto",
    "tensorflow/core/example/example.proto",
    "tensorflow/core/example/feature.proto",
    "tensorflow/core/framework/allocation_description.proto",
    "tensorflow/core/framework/attr_value.proto",
    "tensorflow/core/framework/cost_graph.proto",
    "tensorflow/core/framework/device_attributes.proto",
    "tensorflow/core/framework/full_type.proto",
    "tensorflow/core/framework/function.proto",
    "tensorflow/core/framework/graph.proto",
    "tensorflow/core/framework/graph_debug_info.proto",
    "tensorflow/core/framework/node_def.proto",
    "tensorflow/core/framework/op_def.proto",
    "tensorflow/core/framework/resource_handle.proto",
    "tensorflow/core/framework/step_stats.proto",
    "tensorflow/core/framework/summary.proto",
    "tensorflow/core/framework/tensor.proto",
    "tensorflow/core/framework/tensor_description.proto",
    "tensorflow/core/framework/tensor_shape.proto",
    "tensorflow/core/framework/tensor_slice.proto",
    "tensorflow/core/framework/types.proto",
    "tensorflow/core/framework/versions.proto",
    "tensorflow/core/protobuf/checkpoint_state.proto",
    "tensorflow/core/protobuf/cluster.proto",
    "tensorflow/core/protobuf/config.proto",
    "tensorflow/core/protobuf/debug.proto",
    "tensorflow/core/protobuf/master.proto",
    "tensorflow/core/protobuf/master_service.proto",
    "tensorflow/core/protobuf/meta_graph.proto",
    "tensorflow/core/protobuf/named_tensor.proto",
    "tensorflow/core/protobuf/rewriter_config.proto",
    "tensorflow/core/protobuf/saved_model.proto",
    "tensorflow/core/protobuf/saver.proto",
    "tensorflow/core/protobuf/tensor_bundle.proto",
    "tensorflow/core/protobuf/tensorflow_server.proto",
    "tensorflow/core/protobuf/worker.proto",
    "tensorflow/core/protobuf/worker_service.proto",
    "tensorflow/core/util/event.proto",
    "tensorflow_serving/apis/classification.proto",
    "tensorflow_serving/apis/get_model_metadata.proto",
    "tensorflow_serving/apis/get_model_status.proto",
    "tensorflow_serving/apis/inference.proto",
    "tensorflow_serving/apis/input.proto",
    "tensorflow_serving/apis/logging.proto",
    "tensorflow_serving/apis/model.proto",
    "tensorflow_serving/apis/model_management.proto",
    "tensorflow_serving/apis/model_service.proto",
    "tensorflow_serving/apis/predict.proto",
    "tensorflow_serving/apis/prediction_log.proto",
    "tensorflow_serving/apis/prediction_service.proto",
    "tensorflow_serving/apis/regression.proto",
    "tensorflow_serving/apis/session_service.proto",
    "tensorflow_serving/apis/status.proto",
    "tensorflow_serving/config/file_system_storage_path_source.proto",
    "tensorflow_serving/config/log_collector_config.proto",
    "tensorflow_serving/config/logging_config.proto",
    "tensorflow_serving/config/model_server_config.proto",
    "tensorflow_serving/servables/tensorflow/session_bundle_config.proto",
    "xla/tsl/protobuf/error_codes.proto",
    "xla/tsl/protobuf/histogram.proto",
    "xla/tsl/protobuf/rpc_options.proto",
];

/// Large `bytes` fields decoded as `bytes::Bytes`, so that a tensor's buffer is
/// shared with the message it came from instead of copied.
const SHARED_BYTES: &[&str] = &[
    ".tensorflow.TensorProto.tensor_content",
    ".tensorflow.TensorProto.string_val",
];

/// Oneof members boxed to keep their enums small (a `TensorProto` is a few hundred
/// bytes, a `SessionRunLog`, with its `RunOptions`, about 500; the other members
/// are at most half that).
const BOXED: &[&str] = &[
    ".tensorflow.AttrValue.value.tensor",
    ".tensorflow.Summary.Value.value.tensor",
    ".tensorflow.serving.PredictionLog.log_type.session_run_log",
];

/// Fields TensorFlow writes that actorflow neither reads nor writes (debug
/// information, full types): declared, so that the text format accepts
/// TensorFlow's files (it refuses undeclared fields, as TensorFlow does), but
/// left out of the generated structs, so that decoding drops them, binary and
/// text alike, and the code that builds these messages need not know them.
const NOT_GENERATED: &[&str] = &[
    ".tensorflow.GraphDef.debug_info",
    ".tensorflow.NodeDef.experimental_debug_info",
    ".tensorflow.NodeDef.experimental_type",
    ".tensorflow.OpDef.ArgDef.experimental_full_type",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new("protos");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut fds = protox::compile(PROTOS, [root])?;
    write_descriptors(&fds)?;
    for path in NOT_GENERATED {
        remove_field(&mut fds, path)?;
    }
    let mut builder = tonic_prost_build::configure()
        // The servers and clients use only tonic's codegen, not its transport:
        // the crates that serve or call enable that themselves.
        .build_transport(false)
        // Maps as BTreeMap: encoding is deterministic (keys sorted).
        .btree_map(".");
    for path in SHARED_BYTES {
        builder = builder.bytes(path);
    }
    for path in BOXED {
        builder = builder.boxed(path);
    }
    // Every message implements `prost::Name` (its full name is how the text
    // format finds its descriptor), with TensorFlow's type URL prefix.
    let mut config = tonic_prost_build::Config::new();
    config
        .enable_type_names()
        .type_name_domain(["."], "type.googleapis.com");
    builder.compile_fds_with_config(fds, config)?;
    Ok(())
}

/// Removes the field `path` (`.package.Message.field`, nested messages
/// included) from the descriptors; an error if there is none, so that
/// [`NOT_GENERATED`] names only fields that exist.
fn remove_field(fds: &mut tonic_prost_build::FileDescriptorSet, path: &str) -> Result<(), String> {
    let missing = || format!("NOT_GENERATED names {path}, which no .proto file declares");
    let (message, field) = path.rsplit_once('.').ok_or_else(missing)?;
    for file in &mut fds.file {
        let package = format!(".{}.", file.package());
        let Some(names) = message.strip_prefix(&package) else {
            continue;
        };
        let mut names = names.split('.');
        let first = names.next().ok_or_else(missing)?;
        let mut m = file.message_type.iter_mut().find(|m| m.name() == first);
        for name in names {
            m = m.and_then(|m| m.nested_type.iter_mut().find(|n| n.name() == name));
        }
        if let Some(m) = m {
            let before = m.field.len();
            m.field.retain(|f| f.name() != field);
            if m.field.len() < before {
                return Ok(());
            }
        }
    }
    Err(missing())
}

/// Writes the descriptors for `src/text/`, without source comments (they
/// would triple the size of what the library embeds).
fn write_descriptors(fds: &tonic_prost_build::FileDescriptorSet) -> std::io::Result<()> {
    use prost::Message;
    let mut fds = fds.clone();
    for file in &mut fds.file {
        file.source_code_info = None;
    }
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_default());
    std::fs::write(out.join("descriptors.bin"), fds.encode_to_vec())
}
