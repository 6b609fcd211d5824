//! A NumPy `.npy` file (the CLI's feeds): decode, and write back what decodes.

#![no_main]

use actorflow::npy::{from_npy_bytes, to_npy_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = from_npy_bytes(data) {
        // What was read can be written and reads back the same.
        let again = to_npy_bytes(&t).expect("a decoded tensor encodes");
        let back = from_npy_bytes(&again).expect("an encoded tensor decodes");
        assert_eq!(back, t, "npy round trip");
    }
});
