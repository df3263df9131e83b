//! The codec tests' random source: seeded, so a failing case reruns.

pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Zero, small, or any width: the edges of varint lengths.
    pub(crate) fn value(&mut self) -> u64 {
        match self.next() % 4 {
            0 => 0,
            1 => self.next() % 300,
            2 => self.next() >> (self.next() % 64),
            _ => self.next(),
        }
    }

    /// Up to two mutations: a flipped bit, a cut, an appended byte, or two
    /// bytes swapped.
    pub(crate) fn mutate(&mut self, bytes: &mut Vec<u8>) {
        for _ in 0..(self.next() % 3) {
            let n = bytes.len().max(1);
            match self.next() % 4 {
                0 if !bytes.is_empty() => {
                    bytes[(self.next() as usize) % n] ^= 1 << (self.next() % 8)
                }
                1 => bytes.truncate((self.next() as usize) % n),
                2 => bytes.push(self.next() as u8),
                _ if bytes.len() > 1 => {
                    bytes.swap((self.next() as usize) % n, (self.next() as usize) % n)
                }
                _ => {}
            }
        }
    }
}
