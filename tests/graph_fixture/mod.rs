//! A TensorFlow-built graph fixture of `kernels/tests/fixtures/`: `NAME.pb` (the
//! GraphDef) and `NAME.json` (feeds, fetches and TensorFlow's outputs; string
//! values hex), as the `gen_*.py` scripts there write them, run in a session and
//! compared with TensorFlow's answers (`mod graph_fixture;`).

use std::path::PathBuf;

use actorflow::graph::import::{load_graph_def, ImportOptions};
use actorflow::{Session, SessionOptions, Tensor};
use serde_json::Value;

/// A loaded fixture, its session open.
pub struct GraphFixture {
    /// The whole JSON document (for what a test keeps besides the run).
    pub doc: Value,
    pub session: Session,
    pub feeds: Vec<(String, Tensor)>,
    pub fetches: Vec<String>,
}

impl GraphFixture {
    /// Imports `NAME.pb` into a session and reads `NAME.json`.
    pub fn load(name: &str) -> GraphFixture {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("kernels/tests/fixtures");
        let text = std::fs::read_to_string(dir.join(format!("{name}.json"))).expect("json");
        let doc: Value = serde_json::from_str(&text).expect("fixture JSON");
        let graph = load_graph_def(&dir.join(format!("{name}.pb")), &ImportOptions::default())
            .expect("import");
        let session = Session::new(&graph, SessionOptions::default()).expect("session");
        let feeds = doc["feeds"]
            .as_object()
            .expect("feeds")
            .iter()
            .map(|(k, v)| (k.clone(), tensor(v)))
            .collect();
        // a fixture that drives its own runs (training steps) may have none
        let fetches = doc["fetches"]
            .as_array()
            .map_or(&[][..], Vec::as_slice)
            .iter()
            .map(|f| f.as_str().expect("fetch").to_owned())
            .collect();
        GraphFixture {
            doc,
            session,
            feeds,
            fetches,
        }
    }

    /// The feeds as `Session::run` takes them.
    pub fn feed_refs(&self) -> Vec<(&str, Tensor)> {
        self.feeds
            .iter()
            .map(|(n, t)| (n.as_str(), t.clone()))
            .collect()
    }

    /// Runs the fetches and compares them with TensorFlow's outputs: equal, or
    /// within `rtol` and `atol` element by element when `tolerance` is given.
    pub fn check(&self, tolerance: Option<(f64, f64)>) {
        let fetches: Vec<&str> = self.fetches.iter().map(String::as_str).collect();
        let got = self
            .session
            .run(&self.feed_refs(), &fetches, &[])
            .expect("run");
        let want: Vec<Tensor> = self.doc["outputs"]
            .as_array()
            .expect("outputs")
            .iter()
            .map(tensor)
            .collect();
        assert_eq!(got.len(), want.len());
        for ((name, g), w) in fetches.iter().zip(&got).zip(&want) {
            let Some((rtol, atol)) = tolerance else {
                assert_eq!(g, w, "{name}");
                continue;
            };
            assert_eq!(g.dims(), w.dims(), "{name}");
            let (g, w) = (
                g.to_f64_vec().expect("floats"),
                w.to_f64_vec().expect("floats"),
            );
            for (i, (a, b)) in g.iter().zip(&w).enumerate() {
                assert!(
                    (a - b).abs() <= atol + rtol * b.abs(),
                    "{name}[{i}]: actorflow {a}, TensorFlow {b}"
                );
            }
        }
    }
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex"))
        .collect()
}

/// A fixture tensor: float32, float64, int32, int64 or (hex) string.
pub fn tensor(v: &Value) -> Tensor {
    let shape: Vec<usize> = v["shape"]
        .as_array()
        .expect("shape")
        .iter()
        .map(|d| d.as_u64().expect("dim") as usize)
        .collect();
    let vals = v["values"].as_array().expect("values");
    match v["dtype"].as_str().expect("dtype") {
        "string" => Tensor::from_strings(
            &shape,
            vals.iter()
                .map(|x| unhex(x.as_str().expect("hex")))
                .collect(),
        ),
        "float32" => Tensor::new(
            &shape,
            vals.iter()
                .map(|x| x.as_f64().expect("float") as f32)
                .collect(),
        ),
        "float64" => Tensor::new(
            &shape,
            vals.iter().map(|x| x.as_f64().expect("float")).collect(),
        ),
        "int32" => Tensor::new(
            &shape,
            vals.iter()
                .map(|x| x.as_i64().expect("int") as i32)
                .collect(),
        ),
        "int64" => Tensor::new(
            &shape,
            vals.iter().map(|x| x.as_i64().expect("int")).collect(),
        ),
        other => panic!("dtype {other}"),
    }
    .expect("fixture tensor")
}
