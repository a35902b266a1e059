//! A stable 64-bit hash (FNV-1a, finished with the splitmix64 mixer): the same on every run,
//! version and platform, unlike the std hasher. Used for fingerprints and the simulator's
//! deterministic draws; not for security.

#[derive(Debug, Clone, Copy)]
pub struct StableHasher(u64);

impl Default for StableHasher {
    fn default() -> Self {
        StableHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl StableHasher {
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    /// FNV alone barely moves its high bits for a change in the last byte; the mixer
    /// spreads every input bit over the whole output.
    pub fn finish(self) -> u64 {
        let mut h = self.0;
        h ^= h >> 30;
        h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
        h ^= h >> 27;
        h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
        h ^ (h >> 31)
    }
}

/// Lets `serde_json::to_writer` stream a value into the hash.
impl std::io::Write for StableHasher {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        StableHasher::write(self, bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Hashes parts with a separator between them, so ("ab", "c") and ("a", "bc") differ.
pub fn hash_parts(parts: &[&str]) -> u64 {
    let mut h = StableHasher::default();
    for part in parts {
        h.write(part.as_bytes());
        h.write(&[0xff]);
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_and_separated() {
        assert_eq!(hash_parts(&["a", "b"]), hash_parts(&["a", "b"]));
        assert_ne!(hash_parts(&["ab", "c"]), hash_parts(&["a", "bc"]));
        // A one-byte change moves the high bits too.
        let (x, y) = (hash_parts(&["k", "1"]), hash_parts(&["k", "2"]));
        assert_ne!(x >> 53, y >> 53);
    }
}
