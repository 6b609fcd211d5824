//! A binary TensorFlow `GraphDef` (`.pb`): import, then build the graph (shape
//! inference, op validation). Any input may fail, with a status; none may panic,
//! abort or hang.

#![no_main]

use graph::import::{graph_def_from_tf_bytes, ImportOptions};
use graph::{Graph, OpRegistry};
use libfuzzer_sys::fuzz_target;

/// Constants may decode to at most 64 MiB (the default, 2 GiB, would trip
/// libFuzzer's RSS limit on inputs that are merely large, not wrong).
fn options() -> ImportOptions {
    ImportOptions::default().with_max_tensor_bytes(64 << 20)
}

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = graph_def_from_tf_bytes(data, &options()) {
        let _ = Graph::from_graph_def(&g, OpRegistry::global());
    }
});
