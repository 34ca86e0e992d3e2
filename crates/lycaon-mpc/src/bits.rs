//! Bit vectors packed 64 to a word, least significant bit first: the boolean shares of the
//! comparison's AND tree, worked on a word (64 gates) at a time. Their wire form is the
//! channel's `pack_bits` layout, so a packed vector costs the same bytes as a `[bool]`.

/// `len` bits in `len.div_ceil(64)` words; the bits past `len` in the last word are zero.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bits {
    words: Vec<u64>,
    len: usize,
}

impl Bits {
    /// An empty vector with room for `bits` bits.
    pub fn with_capacity(bits: usize) -> Self {
        Bits { words: Vec::with_capacity(bits.div_ceil(64)), len: 0 }
    }

    pub fn zeros(len: usize) -> Self {
        Bits { words: vec![0; len.div_ceil(64)], len }
    }

    /// Bit i is `bit(i)`.
    pub fn from_fn(len: usize, mut bit: impl FnMut(usize) -> bool) -> Self {
        Self::from_word_fn(len, |w| {
            let start = w * 64;
            (start..(start + 64).min(len)).fold(0u64, |acc, i| acc | (bit(i) as u64) << (i - start))
        })
    }

    /// Word w is `word(w)` (bits past `len` are cleared).
    pub fn from_word_fn(len: usize, word: impl FnMut(usize) -> u64) -> Self {
        Self::from_words((0..len.div_ceil(64)).map(word).collect(), len)
    }

    /// The first `len` bits of `words`, which must hold exactly `len.div_ceil(64)` words.
    pub fn from_words(mut words: Vec<u64>, len: usize) -> Self {
        assert_eq!(words.len(), len.div_ceil(64), "{} words for {len} bits", words.len());
        if !len.is_multiple_of(64) {
            if let Some(last) = words.last_mut() {
                *last &= (1u64 << (len % 64)) - 1;
            }
        }
        Bits { words, len }
    }

    pub fn from_bools(bits: &[bool]) -> Self {
        Self::from_fn(bits.len(), |i| bits[i])
    }

    pub fn to_bools(&self) -> Vec<bool> {
        (0..self.len).map(|i| self.get(i)).collect()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, i: usize) -> bool {
        assert!(i < self.len, "bit {i} of {}", self.len);
        (self.words[i / 64] >> (i % 64)) & 1 == 1
    }

    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// The 64 bits from bit `start` (zeros past the end).
    fn word_at(&self, start: usize) -> u64 {
        let (w, shift) = (start / 64, start % 64);
        let low = self.words.get(w).map_or(0, |&x| x >> shift);
        if shift == 0 {
            low
        } else {
            low | self.words.get(w + 1).map_or(0, |&x| x << (64 - shift))
        }
    }

    /// Bits `start..start + len`.
    pub fn range(&self, start: usize, len: usize) -> Bits {
        assert!(start + len <= self.len, "bits {start}..{} of {}", start + len, self.len);
        if start.is_multiple_of(64) {
            let words = self.words[start / 64..][..len.div_ceil(64)].to_vec();
            return Self::from_words(words, len);
        }
        Self::from_word_fn(len, |w| self.word_at(start + 64 * w))
    }

    /// Appends `other`'s bits after this vector's.
    pub fn append(&mut self, other: &Bits) {
        let shift = self.len % 64;
        if shift == 0 {
            self.words.extend_from_slice(&other.words);
        } else {
            for &w in &other.words {
                let last = self.words.len() - 1;
                self.words[last] |= w << shift;
                self.words.push(w >> (64 - shift));
            }
        }
        self.len += other.len;
        // The last push may be a word of zeros past the new end.
        self.words.truncate(self.len.div_ceil(64));
    }

    /// The bitwise combination `f(self, other)` of two vectors of one length, a word at a time.
    pub fn zip_words(&self, other: &Bits, f: impl Fn(u64, u64) -> u64) -> Bits {
        assert_eq!(self.len, other.len, "bit vectors of {} and {} bits", self.len, other.len);
        Self::from_word_fn(self.len, |w| f(self.words[w], other.words[w]))
    }

    pub fn xor(&self, other: &Bits) -> Bits {
        self.zip_words(other, |a, b| a ^ b)
    }

    pub fn and(&self, other: &Bits) -> Bits {
        self.zip_words(other, |a, b| a & b)
    }

    /// The wire form: `len.div_ceil(8)` bytes, least significant bit first.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut bytes: Vec<u8> = self.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        bytes.truncate(self.len.div_ceil(8));
        bytes
    }

    /// `len` bits from their wire form (`len.div_ceil(8)` bytes; bits past `len` are ignored).
    pub fn from_bytes(bytes: &[u8], len: usize) -> Bits {
        assert_eq!(bytes.len(), len.div_ceil(8), "{} bytes for {len} bits", bytes.len());
        let words = bytes
            .chunks(8)
            .map(|c| {
                let mut word = [0u8; 8];
                word[..c.len()].copy_from_slice(c);
                u64::from_le_bytes(word)
            })
            .collect();
        Self::from_words(words, len)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::Bits;
    use crate::channel::{pack_bits, unpack_bits};

    fn bools() -> impl Strategy<Value = Vec<bool>> {
        prop::collection::vec(any::<bool>(), 0..300)
    }

    proptest! {
        #[test]
        fn packing_round_trips_and_matches_the_channels_bytes(bits in bools()) {
            let packed = Bits::from_bools(&bits);
            prop_assert_eq!(packed.to_bools(), bits.clone());
            prop_assert_eq!(packed.to_bytes(), pack_bits(&bits));
            prop_assert_eq!(unpack_bits(&packed.to_bytes(), bits.len()), bits.clone());
            prop_assert_eq!(Bits::from_bytes(&pack_bits(&bits), bits.len()), packed);
        }

        #[test]
        fn ranges_and_appends_match_the_unpacked_ones(a in bools(), b in bools(), cut in 0usize..300, take in 0usize..300) {
            let mut joined = Bits::from_bools(&a);
            joined.append(&Bits::from_bools(&b));
            let both: Vec<bool> = a.iter().chain(&b).copied().collect();
            prop_assert_eq!(&joined, &Bits::from_bools(&both));
            let start = cut.min(both.len());
            let len = take.min(both.len() - start);
            prop_assert_eq!(joined.range(start, len), Bits::from_bools(&both[start..start + len]));
        }

        #[test]
        fn word_operations_match_the_bitwise_ones(pairs in prop::collection::vec(any::<(bool, bool)>(), 0..300)) {
            let (a, b): (Vec<bool>, Vec<bool>) = pairs.into_iter().unzip();
            let (pa, pb) = (Bits::from_bools(&a), Bits::from_bools(&b));
            prop_assert_eq!(pa.xor(&pb).to_bools(), a.iter().zip(&b).map(|(x, y)| x ^ y).collect::<Vec<_>>());
            prop_assert_eq!(pa.and(&pb).to_bools(), a.iter().zip(&b).map(|(x, y)| x & y).collect::<Vec<_>>());
        }
    }

    #[test]
    fn bits_past_the_end_are_cleared() {
        let packed = Bits::from_words(vec![u64::MAX, u64::MAX], 70);
        assert_eq!(packed.words()[1], 0b11_1111);
        assert_eq!(Bits::from_bytes(&[0xff], 3).words(), &[0b111]);
        assert!(Bits::zeros(0).is_empty());
    }
}
