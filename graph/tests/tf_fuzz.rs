//! A deterministic fuzz test of the TensorFlow importers: random bytes, mutated real
//! graphs, random token soup and mutated text go through the binary and text
//! parsers and the import; every call must return (`Ok` or `Err`) without panicking.
//! Inputs that import must also survive validation into a `Graph`, and re-export to
//! the same bytes; text that parses must write and parse back to the same message.

use std::path::PathBuf;

use actorflow_graph::import::{
    graph_def_from_tf_bytes, graph_def_from_tf_text, graph_def_to_tf_bytes, ImportOptions,
};
use actorflow_graph::proto::text::{parse_graph_def, write_graph_def};
use actorflow_graph::{Graph, OpRegistry};
use prost::Message;

/// xorshift64*: small, fast and the same on every platform.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn fixtures(ext: &str) -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    [
        "basic",
        "dtypes",
        "variables",
        "cond",
        "functions",
        "complex",
    ]
    .iter()
    .map(|n| std::fs::read(dir.join(format!("{n}.{ext}"))).unwrap())
    .collect()
}

fn opts() -> ImportOptions {
    ImportOptions::default().with_max_tensor_bytes(1 << 16)
}

/// One random edit: overwrite, flip, insert, delete, truncate or duplicate.
fn mutate(rng: &mut Rng, data: &mut Vec<u8>) {
    let len = data.len();
    let at = rng.below(len + 1);
    match rng.below(6) {
        0 if len > 0 => data[at.min(len - 1)] = rng.next() as u8,
        1 if len > 0 => data[at.min(len - 1)] ^= 1 << rng.below(8),
        2 => data.insert(at, rng.next() as u8),
        3 if at < len => {
            let end = (at + 1 + rng.below(8)).min(len);
            data.drain(at..end);
        }
        4 => data.truncate(at),
        _ => {
            let end = (at + rng.below(16)).min(len);
            let chunk = data[at..end].to_vec();
            let to = rng.below(data.len() + 1);
            data.splice(to..to, chunk);
        }
    }
}

/// Checks one binary input; true when it imported.
fn check_bytes(bytes: &[u8]) -> bool {
    let imported = graph_def_from_tf_bytes(bytes, &opts());
    if let Ok(g) = &imported {
        Graph::from_graph_def(g, OpRegistry::global()).expect("an imported graph must build");
        let out = graph_def_to_tf_bytes(g).unwrap();
        let again = graph_def_from_tf_bytes(&out, &opts()).unwrap();
        assert_eq!(graph_def_to_tf_bytes(&again).unwrap(), out);
    }
    imported.is_ok()
}

/// Checks one text input; true when it parsed.
fn check_text(text: &str) -> bool {
    let parsed = parse_graph_def(text);
    if let Ok(p) = &parsed {
        let written = write_graph_def(p);
        let back = parse_graph_def(&written).unwrap_or_else(|e| panic!("{e}\n{written}"));
        assert_eq!(back.encode_to_vec(), p.encode_to_vec());
    }
    if let Ok(g) = graph_def_from_tf_text(text, &opts()) {
        Graph::from_graph_def(&g, OpRegistry::global()).expect("an imported graph must build");
    }
    parsed.is_ok()
}

#[test]
fn random_bytes() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..5000 {
        let len = rng.below(300);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        check_bytes(&bytes);
    }
}

#[test]
fn mutated_real_graphs() {
    let mut rng = Rng(42);
    let seeds = fixtures("pb");
    let mut imported = 0;
    for i in 0..6000 {
        let mut data = seeds[i % seeds.len()].clone();
        for _ in 0..1 + rng.below(2) {
            mutate(&mut rng, &mut data);
        }
        imported += usize::from(check_bytes(&data));
    }
    eprintln!("mutated binary graphs that imported: {imported}/6000");
    assert!(
        imported > 60,
        "too few mutants import ({imported}) to exercise the graph checks"
    );
}

const TOKENS: &[&str] = &[
    "node",
    "{",
    "}",
    "<",
    ">",
    "[",
    "]",
    ":",
    ",",
    ";",
    "-",
    "name",
    "op",
    "input",
    "device",
    "attr",
    "key",
    "value",
    "\"x\"",
    "'Const'",
    "\"Identity\"",
    "\"x:0\"",
    "\"^x\"",
    "tensor",
    "dtype",
    "DT_FLOAT",
    "DT_STRING",
    "DT_INT32",
    "DT_COMPLEX64",
    "tensor_shape",
    "dim",
    "size",
    "unknown_rank",
    "true",
    "float_val",
    "int_val",
    "string_val",
    "half_val",
    "bool_val",
    "tensor_content",
    "\"\\000\\001\"",
    "1",
    "-1",
    "0x7fffffffffffffff",
    "1.5e9",
    "inf",
    "nan",
    "list",
    "s",
    "i",
    "f",
    "b",
    "type",
    "shape",
    "func",
    "placeholder",
    "versions",
    "producer",
    "library",
    "function",
    "signature",
    "gradient",
    "#c\n",
    "\"\\",
    "'",
    "\"",
    "\\u12",
    "\n",
    " ",
];

#[test]
fn random_text() {
    let mut rng = Rng(7);
    let mut parsed = 0;
    for _ in 0..4000 {
        let n = rng.below(60);
        let text: String = (0..n)
            .map(|_| TOKENS[rng.below(TOKENS.len())])
            .collect::<Vec<_>>()
            .join(" ");
        parsed += usize::from(check_text(&text));
    }
    eprintln!("random texts that parsed: {parsed}/4000");
}

#[test]
fn mutated_real_text() {
    let mut rng = Rng(1234);
    let seeds = fixtures("pbtxt");
    let mut parsed = 0;
    for i in 0..4000 {
        let mut data = seeds[i % seeds.len()].clone();
        for _ in 0..1 + rng.below(2) {
            mutate(&mut rng, &mut data);
        }
        parsed += usize::from(check_text(&String::from_utf8_lossy(&data)));
    }
    eprintln!("mutated texts that parsed: {parsed}/4000");
    assert!(parsed > 200, "too few mutants parse ({parsed})");
}
