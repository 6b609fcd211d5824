//! The masked CRC-32C values TFRecord stores. The CRC and its masking are the
//! checkpoint format's (`kernels::cpu::checkpoint::crc32c`, hardware CRC-32C),
//! re-exported here.

pub use kernels::cpu::checkpoint::crc32c::{crc32c, mask, unmask};
pub use kernels::record::masked_crc32c;

#[cfg(test)]
mod tests {
    use super::*;

    /// LevelDB's and TFRecord's masking constant.
    const MASK_DELTA: u32 = 0xa282_ead8;

    #[test]
    fn masked_check_value() {
        // The CRC-32C check value 0xE3069283, rotated right by 15 plus the delta.
        assert_eq!(
            masked_crc32c(b"123456789"),
            0x2507_C60D_u32.wrapping_add(MASK_DELTA)
        );
    }

    #[test]
    fn mask_round_trips() {
        for c in [0u32, 1, 0xE306_9283, u32::MAX] {
            assert_eq!(unmask(mask(c)), c);
            assert_ne!(mask(c), c);
        }
        assert_eq!(mask(0), MASK_DELTA);
        assert_eq!(mask(1 << 15), 1 + MASK_DELTA);
    }
}
