//! The masking TFRecord applies to the CRC-32C values it stores. The CRC itself is
//! the checkpoint format's (`kernels::cpu::checkpoint::crc32c`, hardware CRC-32C),
//! re-exported here.

pub use kernels::cpu::checkpoint::crc32c::crc32c;

const MASK_DELTA: u32 = 0xa282_ead8;

/// A CRC as TFRecord stores it: rotated right by 15 bits plus a constant, so that
/// the CRC of data holding embedded CRCs stays well distributed.
pub fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// The inverse of [`mask`].
pub fn unmask(masked: u32) -> u32 {
    masked.wrapping_sub(MASK_DELTA).rotate_left(15)
}

/// The masked CRC-32C of `data`.
pub fn masked_crc32c(data: &[u8]) -> u32 {
    mask(crc32c(data))
}

#[cfg(test)]
mod tests {
    use super::*;

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
