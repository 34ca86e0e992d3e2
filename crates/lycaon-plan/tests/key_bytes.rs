//! The planner prices keys by formula alone (src/keyset/key_bytes.rs); this test, which is allowed
//! to make keys, checks each formula against keys lycaon-rlwe really generates and serialises:
//! relinearisation keys and Galois keys at several levels, ring degrees and digit counts, seeded
//! and unseeded, on their own and in sets whose keys sit at one level or at several.

use lycaon_math::Sampler;
use lycaon_plan::keyset::{ChainParams, KeyLayout, Keyset, Phase, Rotation, RotationTable};
use lycaon_rlwe::{GaloisKeys, Parameters, RelinKey, SecretKey};

/// Secure sets (128-bit per rlwe's table) covering: one digit, digits of one prime, digits of
/// two with a shorter last one, uneven prime sizes, several special primes, n from 2^11 to 2^14.
fn chains() -> Vec<ChainParams> {
    vec![
        ChainParams { log_n: 11, q_bits: vec![18, 18], p_bits: vec![17], digits: 1 },
        ChainParams { log_n: 12, q_bits: vec![30, 25, 25], p_bits: vec![28], digits: 2 },
        ChainParams { log_n: 13, q_bits: vec![45, 37, 37, 37], p_bits: vec![50], digits: 4 },
        ChainParams { log_n: 13, q_bits: vec![40, 35, 35, 35, 30], p_bits: vec![20, 21], digits: 2 },
        ChainParams { log_n: 14, q_bits: vec![50, 40, 40, 40, 40, 40, 40], p_bits: vec![50, 50], digits: 3 },
    ]
}

fn rotations(slots: usize) -> Vec<Rotation> {
    vec![Rotation::Step(1), Rotation::step(-3, slots).unwrap(), Rotation::Conjugate, Rotation::ConjugateStep(5), Rotation::Step(16)]
}

#[test]
fn relinearisation_key_bytes_equal_rlwe_serialised_sizes_at_every_level() {
    for chain in chains() {
        let params = Parameters::new(chain.rlwe_literal().unwrap()).unwrap();
        let mut sampler = Sampler::from_os().unwrap();
        let sk = SecretKey::generate(&params, &mut sampler).unwrap();
        for level in 0..=chain.max_level() {
            let key = RelinKey::generate_at(&sk, level, &mut sampler).unwrap();
            let want = key.byte_sizes();
            assert_eq!(chain.relin_key_bytes(level).unwrap(), want, "{chain:?} level {level}");
            assert_eq!(want.seeded, key.to_bytes().len(), "{chain:?} level {level}: rlwe's own length");
            assert_eq!(want.unseeded, key.to_bytes_unseeded().len(), "{chain:?} level {level}");
            let layout = if level == chain.max_level() { KeyLayout::SeededFullLevel } else { KeyLayout::SeededWithLevel };
            assert_eq!(chain.key_payload_bytes(level, layout).unwrap() + 64, key.to_bytes().len() as u64);
        }
    }
}

#[test]
fn galois_key_bytes_equal_rlwe_serialised_sizes_for_sets_at_one_level_and_at_several() {
    for chain in chains() {
        let params = Parameters::new(chain.rlwe_literal().unwrap()).unwrap();
        let n = params.n();
        let mut sampler = Sampler::from_os().unwrap();
        let sk = SecretKey::generate(&params, &mut sampler).unwrap();
        let top = chain.max_level();
        let rots = rotations(chain.slots());
        // Every key at the top (version 1 when seeded), then each at its own level (version 2).
        let mixed: Vec<usize> = (0..rots.len()).map(|i| [top, 0, top / 2, top, 1.min(top)][i]).collect();
        for levels in [vec![top; rots.len()], mixed] {
            let pairs: Vec<(u64, usize)> = rots.iter().zip(&levels).map(|(r, &l)| (r.galois_element(n), l)).collect();
            let keys = GaloisKeys::generate_at(&sk, &pairs, &mut sampler).unwrap();
            assert_eq!(keys.len(), rots.len());
            let what = format!("{chain:?} levels {levels:?}");
            assert_eq!(chain.galois_keys_bytes(&levels, true).unwrap(), keys.to_bytes().len() as u64, "{what} seeded");
            assert_eq!(chain.galois_keys_bytes(&levels, false).unwrap(), keys.to_bytes_unseeded().len() as u64, "{what} unseeded");
            assert_eq!(chain.galois_keys_memory_bytes(&levels).unwrap(), keys.memory_bytes() as u64, "{what} memory");
            // The streaming writer produces the same layout.
            let mut streamed = Vec::new();
            GaloisKeys::generate_serialized_into(&sk, &pairs, &mut sampler, &mut streamed).unwrap();
            assert_eq!(chain.galois_keys_wire_bytes(&levels).unwrap(), streamed.len() as u64, "{what} streamed");
            // Each key on its own (`byte_sizes` lists them in Galois-element order).
            let listed = keys.byte_sizes();
            for (r, &level) in rots.iter().zip(&levels) {
                let g = r.galois_element(n);
                let key = keys.get(g).unwrap();
                let want = key.byte_sizes(Some(g));
                assert_eq!(chain.key_bytes(level, Some(g)).unwrap(), want, "{what}: {r}");
                assert_eq!(want.seeded, key.to_bytes().len(), "{what}: {r}");
                assert!(listed.contains(&want), "{what}: {r}");
            }
            // A keyset of these rotations at these levels prices to the same bytes.
            let mut table = RotationTable::new(chain.slots(), top);
            for (&r, &level) in rots.iter().zip(&levels) {
                table.push("layer", Phase::Network, r, level, 1).unwrap();
            }
            let keyset = Keyset::level_aware(&table);
            assert_eq!(keyset.wire_bytes(&chain).unwrap(), keys.to_bytes().len() as u64, "{what}");
            assert_eq!(keyset.memory_bytes(&chain).unwrap(), keys.memory_bytes() as u64, "{what}");
        }
    }
}
