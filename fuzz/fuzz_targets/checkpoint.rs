//! A tensor bundle's index (TensorFlow's checkpoint V2 `.index` file): the
//! reader of its sorted string table, header and entries. Inputs whose first
//! byte is odd are taken as entries and built into a table with valid block
//! checksums first, so that mutations reach the entry decoding behind the CRCs
//! instead of stopping at the first checksum.

#![no_main]

use std::path::Path;

use kernels::cpu::checkpoint::table::{read_table, TableBuilder};
use kernels::cpu::checkpoint::CheckpointReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let path = Path::new("fuzz.ckpt");
    let index = if mode & 1 == 1 {
        // Key-value pairs: a length byte, the key, a length byte, the value.
        let mut t = TableBuilder::new();
        let mut rest = rest;
        let mut take = |rest: &mut &[u8]| -> Option<Vec<u8>> {
            let (&n, r) = rest.split_first()?;
            let n = (n as usize).min(r.len());
            let (v, r) = r.split_at(n);
            *rest = r;
            Some(v.to_vec())
        };
        let mut pairs = Vec::new();
        while let (Some(k), Some(v)) = (take(&mut rest), take(&mut rest)) {
            pairs.push((k, v));
        }
        pairs.sort();
        pairs.dedup_by(|a, b| a.0 == b.0);
        for (k, v) in &pairs {
            t.add(k, v).expect("sorted, unique keys");
        }
        t.finish()
    } else {
        rest.to_vec()
    };
    if let Ok(entries) = read_table(path, &index) {
        // Whatever reads as a table reads as a bundle or fails with a status.
        let _ = entries;
        if let Ok(r) = CheckpointReader::parse(path, &index) {
            for info in r.tensors() {
                // No data shard here: every read is an error, never a panic.
                assert!(r.tensor(&info.name).is_err());
            }
        }
    }
});
