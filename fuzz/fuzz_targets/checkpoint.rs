//! actorflow's checkpoint file: the verifying reader (every tensor read back) and
//! the index reader. Inputs whose first byte is odd are resealed first (their
//! checksums recomputed), so that mutations reach the structural checks behind
//! the CRCs instead of stopping at the first checksum.

#![no_main]

use std::path::Path;

use bytes::Bytes;
use kernels::cpu::checkpoint::format::{read_index_from, reseal};
use kernels::cpu::checkpoint::CheckpointReader;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if mode & 1 == 1 {
        reseal(&mut bytes);
    }
    let path = Path::new("fuzz.ckpt");
    let index = read_index_from(path, std::io::Cursor::new(&bytes), bytes.len() as u64);
    if let Ok(r) = CheckpointReader::parse(path, Bytes::from(bytes)) {
        let names: Vec<String> = r.tensors().map(|i| i.name.clone()).collect();
        for name in &names {
            let t = r
                .tensor(name)
                .expect("a verified checkpoint's tensor decodes");
            let info = r.info(name).expect("listed");
            assert_eq!((t.dtype(), t.shape()), (info.dtype, &info.shape));
        }
        // A file the full reader accepts, the index reader lists the same way.
        let listed = index.expect("the index reads a verified file");
        assert_eq!(listed, r.tensors().cloned().collect::<Vec<_>>());
    }
});
