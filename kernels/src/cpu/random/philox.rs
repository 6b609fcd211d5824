//! The Philox4x32-10 counter-based generator (Salmon et al., "Parallel random
//! numbers: as easy as 1, 2, 3", SC 2011) exactly as TensorFlow's
//! `random::PhiloxRandom` runs it, and [`GuardedPhilox`], the stream a stateful
//! random kernel draws from (TensorFlow's `GuardedPhiloxRandom`).
//!
//! A generator is a 128-bit counter and a 64-bit key; each call of
//! [`Philox4x32::next_block`] returns four `u32`s and advances the counter by one.
//! `seed` becomes the key and `seed2` the upper half of the counter.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};

use rendezvous::sync::Mutex;

const W32A: u32 = 0x9E37_79B9;
const W32B: u32 = 0xBB67_AE85;
const M4X32A: u32 = 0xD251_1F53;
const M4X32B: u32 = 0xCD9E_8D57;

/// A Philox4x32-10 generator; see the module docs. Copying it forks the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Philox4x32 {
    counter: [u32; 4],
    key: [u32; 2],
}

impl Philox4x32 {
    /// The generator TensorFlow builds from `(seed, seed2)`: key = `seed`,
    /// counter = `seed2 << 64`.
    pub fn new(seed: u64, seed2: u64) -> Philox4x32 {
        Philox4x32 {
            counter: [0, 0, seed2 as u32, (seed2 >> 32) as u32],
            key: [seed as u32, (seed >> 32) as u32],
        }
    }

    /// A generator at this counter and key.
    pub fn from_parts(counter: [u32; 4], key: [u32; 2]) -> Philox4x32 {
        Philox4x32 { counter, key }
    }

    /// The counter (least significant word first).
    pub fn counter(&self) -> [u32; 4] {
        self.counter
    }

    /// The key.
    pub fn key(&self) -> [u32; 2] {
        self.key
    }

    /// Skips `count` blocks of 128 bits: adds `count` to the low 64 bits of the
    /// counter, carrying into the high 64 bits.
    pub fn skip(&mut self, count: u64) {
        let lo = count as u32;
        let mut hi = (count >> 32) as u32;
        self.counter[0] = self.counter[0].wrapping_add(lo);
        if self.counter[0] < lo {
            hi = hi.wrapping_add(1);
        }
        self.counter[1] = self.counter[1].wrapping_add(hi);
        if self.counter[1] < hi {
            self.counter[2] = self.counter[2].wrapping_add(1);
            if self.counter[2] == 0 {
                self.counter[3] = self.counter[3].wrapping_add(1);
            }
        }
    }

    /// The next 128 random bits, as four `u32`s.
    pub fn next_block(&mut self) -> [u32; 4] {
        let mut ctr = self.counter;
        let mut key = self.key;
        for i in 0..10 {
            if i > 0 {
                key[0] = key[0].wrapping_add(W32A);
                key[1] = key[1].wrapping_add(W32B);
            }
            ctr = round(ctr, key);
        }
        self.skip_one();
        ctr
    }

    fn skip_one(&mut self) {
        for w in &mut self.counter {
            *w = w.wrapping_add(1);
            if *w != 0 {
                break;
            }
        }
    }
}

#[inline(always)]
fn mul_hi_lo(a: u32, b: u32) -> (u32, u32) {
    let p = a as u64 * b as u64;
    (p as u32, (p >> 32) as u32)
}

#[inline(always)]
fn round(ctr: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (lo0, hi0) = mul_hi_lo(M4X32A, ctr[0]);
    let (lo1, hi1) = mul_hi_lo(M4X32B, ctr[2]);
    [hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0]
}

/// Hands out the 32-bit words of a generator one at a time (TensorFlow's
/// `SingleSampleAdapter`), for distributions that need a variable number of them.
pub struct SingleSample<'a> {
    gen: &'a mut Philox4x32,
    block: [u32; 4],
    used: usize,
}

impl<'a> SingleSample<'a> {
    /// An adapter that draws blocks from `gen` as needed.
    pub fn new(gen: &'a mut Philox4x32) -> SingleSample<'a> {
        SingleSample {
            gen,
            block: [0; 4],
            used: 4,
        }
    }

    /// The next word.
    pub fn next_u32(&mut self) -> u32 {
        if self.used == 4 {
            self.block = self.gen.next_block();
            self.used = 0;
        }
        let v = self.block[self.used];
        self.used += 1;
        v
    }
}

/// TensorFlow's `SimplePhilox`: an imperative interface to a generator, word by
/// word (through [`SingleSample`]), for the kernels that draw a variable number
/// of values (multinomial and candidate sampling).
pub struct SimplePhilox<'a> {
    single: SingleSample<'a>,
}

impl<'a> SimplePhilox<'a> {
    /// Draws from `gen`, advancing it.
    pub fn new(gen: &'a mut Philox4x32) -> SimplePhilox<'a> {
        SimplePhilox {
            single: SingleSample::new(gen),
        }
    }

    /// 32 random bits.
    pub fn rand32(&mut self) -> u32 {
        self.single.next_u32()
    }

    /// 64 random bits: the first word low, the second high.
    pub fn rand64(&mut self) -> u64 {
        let lo = self.single.next_u32();
        let hi = self.single.next_u32();
        u64::from(lo) | (u64::from(hi) << 32)
    }

    /// A double uniform in `[0, 1)` from two words (52 mantissa bits).
    pub fn rand_double(&mut self) -> f64 {
        let x0 = self.single.next_u32();
        let x1 = self.single.next_u32();
        crate::cpu::random::distributions::u64_to_f64(x0, x1)
    }

    /// An integer uniform in `[0, n)` by rejection (TensorFlow's
    /// `ExactUniformInt`: a power of two masks one draw; otherwise draws below
    /// `(2^64 - 1) % n + 1` are rejected). `n == 0` draws once and gives 0.
    pub fn uniform64(&mut self, n: u64) -> u64 {
        if n == 0 {
            return self.rand64().wrapping_mul(n);
        }
        if n & (n - 1) == 0 {
            return self.rand64() & (n - 1);
        }
        let rem = (u64::MAX % n) + 1;
        loop {
            let r = self.rand64();
            if r >= rem {
                return r % n;
            }
        }
    }
}

/// A fresh random `u64` (TensorFlow's `random::New64`), from the process's
/// randomly keyed hasher, a counter and the clock.
pub fn new64() -> u64 {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u64(CALLS.fetch_add(1, Ordering::Relaxed));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    h.write_u128(now);
    h.finish()
}

/// The generator of one stateful random kernel (TensorFlow's
/// `GuardedPhiloxRandom`): each run reserves a disjoint stretch of the stream under
/// a lock, so runs continue the stream and concurrent runs never overlap.
pub struct GuardedPhilox {
    gen: Mutex<Philox4x32>,
}

impl GuardedPhilox {
    /// A stream seeded by the op's `seed` and `seed2` attributes; when both are 0
    /// it is seeded at random, making the op nondeterministic, as in TensorFlow.
    pub fn new(seed: i64, seed2: i64) -> GuardedPhilox {
        let (seed, seed2) = if seed == 0 && seed2 == 0 {
            (new64(), new64())
        } else {
            (seed as u64, seed2 as u64)
        };
        GuardedPhilox {
            gen: Mutex::new(Philox4x32::new(seed, seed2)),
        }
    }

    /// The generator at the current position, then skips `samples` 128-bit blocks.
    pub fn reserve_samples128(&self, samples: u64) -> Philox4x32 {
        let mut g = self.gen.lock();
        let local = *g;
        g.skip(samples);
        local
    }

    /// Reserves blocks for `samples` 32-bit words (rounded up to whole blocks), as
    /// TensorFlow's `ReserveSamples32`.
    pub fn reserve_samples32(&self, samples: u64) -> Philox4x32 {
        self.reserve_samples128(samples.wrapping_add(3) / 4)
    }

    /// Reserves `output_count * multiplier` blocks, the conservative amount
    /// TensorFlow's kernels reserve for `output_count` outputs (multiplier 256).
    pub fn reserve_random_outputs(&self, output_count: u64, multiplier: u64) -> Philox4x32 {
        self.reserve_samples128(output_count.wrapping_mul(multiplier))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer_vectors() {
        // The Random123 known-answer tests for philox4x32_10.
        let mut g = Philox4x32::from_parts([0; 4], [0; 2]);
        assert_eq!(
            g.next_block(),
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8]
        );
        let mut g = Philox4x32::from_parts([u32::MAX; 4], [u32::MAX; 2]);
        assert_eq!(
            g.next_block(),
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd]
        );
        let mut g = Philox4x32::from_parts(
            [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
            [0xa409_3822, 0x299f_31d0],
        );
        assert_eq!(
            g.next_block(),
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1]
        );
    }

    #[test]
    fn simple_philox_words() {
        let base = Philox4x32::new(5, 6);
        let mut g = base;
        let b = g.next_block();
        let mut g = base;
        let mut s = SimplePhilox::new(&mut g);
        assert_eq!(s.rand64(), u64::from(b[0]) | (u64::from(b[1]) << 32));
        assert_eq!(s.rand32(), b[2]);
        // Powers of two mask; other bounds reject the low end.
        let mut g = base;
        let mut s = SimplePhilox::new(&mut g);
        assert_eq!(
            s.uniform64(8),
            (u64::from(b[0]) | (u64::from(b[1]) << 32)) & 7
        );
        for n in [1u64, 3, 10, 1 << 40] {
            assert!(s.uniform64(n) < n);
        }
        let x = s.rand_double();
        assert!((0.0..1.0).contains(&x));
        let g = GuardedPhilox::new(1, 1);
        assert_eq!(g.reserve_samples32(5), Philox4x32::new(1, 1));
        let mut two = Philox4x32::new(1, 1);
        two.skip(2);
        assert_eq!(g.reserve_samples32(0), two);
    }

    #[test]
    fn counter_arithmetic() {
        let mut g = Philox4x32::new(0x1_0000_0002, 0x3_0000_0004);
        assert_eq!(g.key(), [2, 1]);
        assert_eq!(g.counter(), [0, 0, 4, 3]);
        g.skip(0x1_0000_0005);
        assert_eq!(g.counter(), [5, 1, 4, 3]);
        // Carries out of the low 64 bits reach the high half.
        let mut g = Philox4x32::from_parts([u32::MAX, u32::MAX, u32::MAX, 0], [0; 2]);
        g.skip(1);
        assert_eq!(g.counter(), [0, 0, 0, 1]);
        let mut g = Philox4x32::from_parts([u32::MAX, u32::MAX, 7, 0], [0; 2]);
        g.next_block();
        assert_eq!(g.counter(), [0, 0, 8, 0]);
        // next_block then skip(n) equals skip(n + 1).
        let mut a = Philox4x32::new(9, 9);
        let mut b = a;
        a.next_block();
        a.skip(10);
        b.skip(11);
        assert_eq!(a, b);
    }

    #[test]
    fn single_sample_and_reservations() {
        let base = Philox4x32::new(1, 2);
        let mut g = base;
        let (b0, b1) = (g.next_block(), g.next_block());
        let mut g = base;
        let mut s = SingleSample::new(&mut g);
        let words: Vec<u32> = (0..8).map(|_| s.next_u32()).collect();
        assert_eq!(words, [b0, b1].concat());
        let guarded = GuardedPhilox::new(1, 2);
        assert_eq!(guarded.reserve_random_outputs(3, 256), base);
        let mut next = base;
        next.skip(768);
        assert_eq!(guarded.reserve_samples128(0), next);
        // Unseeded streams differ.
        let (x, y) = (GuardedPhilox::new(0, 0), GuardedPhilox::new(0, 0));
        assert_ne!(x.reserve_samples128(0), y.reserve_samples128(0));
    }
}
