//! A TensorFlow `GraphDef` in protobuf text format (`.pbtxt`): parse, import and
//! build the graph. Any input may fail, with a status; none may panic, abort or
//! hang.

#![no_main]

use graph::import::{graph_def_from_tf_text, ImportOptions};
use graph::{Graph, OpRegistry};
use libfuzzer_sys::fuzz_target;

/// Constants may decode to at most 64 MiB (the default, 2 GiB, would trip
/// libFuzzer's RSS limit on inputs that are merely large, not wrong).
fn options() -> ImportOptions {
    ImportOptions::default().with_max_tensor_bytes(64 << 20)
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(g) = graph_def_from_tf_text(text, &options()) {
        let _ = Graph::from_graph_def(&g, OpRegistry::global());
    }
});
