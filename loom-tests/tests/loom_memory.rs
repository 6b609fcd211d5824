//! The real memory counter (graph's `tensor::memory`) under concurrent
//! allocations and releases: the bytes in use return to zero, the peak is one
//! that some interleaving reached (exact: never more than was ever live at once,
//! never less than one allocation), and the largest allocation and counts add up.
#![cfg(loom)]

use std::sync::Arc;

use graph::tensor::memory::MemoryCounter;
use loom::thread;

#[test]
fn concurrent_charges_and_releases_keep_exact_counts() {
    loom::model(|| {
        let c = Arc::new(MemoryCounter::new());
        let threads: Vec<_> = [10usize, 20]
            .into_iter()
            .map(|bytes| {
                let c = Arc::clone(&c);
                thread::spawn(move || {
                    c.charge(bytes);
                    c.release(bytes);
                })
            })
            .collect();
        c.charge(5);
        let seen = c.peak_bytes_in_use();
        for t in threads {
            t.join().unwrap();
        }
        let s = c.stats();
        assert_eq!(s.bytes_in_use, 5);
        assert_eq!(
            (s.num_allocs, s.total_bytes, s.largest_alloc_size),
            (3, 35, 20)
        );
        // Some interleaving held 20 (alone) … 35 (all three) at its peak.
        assert!([20, 25, 30, 35].contains(&s.peak_bytes_in_use), "{s:?}");
        assert!(s.peak_bytes_in_use >= seen, "the peak never falls");
        c.reset_peak();
        assert_eq!(c.peak_bytes_in_use(), 5);
    });
}
