//! Every wire object round-trips, and each kind of corruption is refused with an error that
//! names it. Wire bytes are pinned for deterministic seeds.

use std::sync::Arc;

use lycaon_math::Sampler;
use lycaon_rlwe::wire::{WireError, HEADER_LEN};
use lycaon_rlwe::{
    encrypt_zero_public, encrypt_zero_symmetric, Ciphertext, GaloisKeys, KeySwitchKey, Parameters, ParametersLiteral, PublicKey, RelinKey, RlweError,
    SecretKey, Security, SeededCiphertext,
};

fn toy_params() -> Arc<Parameters> {
    let mut lit = ParametersLiteral::bfv_from_bits(64, &[40, 40, 41], &[45], 17).unwrap();
    lit.key_switch_digits = 2;
    lit.security = Security::InsecureTestOnly;
    Parameters::new(lit).unwrap()
}

struct Objects {
    params: Arc<Parameters>,
    encodings: Vec<(&'static str, Vec<u8>)>,
}

fn objects(params: &Arc<Parameters>, seed: u8) -> Objects {
    let mut s = Sampler::from_seed([seed; 32]);
    let sk = SecretKey::generate(params, &mut s).unwrap();
    let pk = PublicKey::generate(&sk, &mut s).unwrap();
    let rk = RelinKey::generate(&sk, &mut s).unwrap();
    let gk = GaloisKeys::for_rotations(&sk, &[1, -3], true, &mut s).unwrap();
    let seeded = encrypt_zero_symmetric(&sk, params.max_level(), &mut s).unwrap();
    let ct = encrypt_zero_public(params, &pk, 1, &mut s).unwrap();
    let encodings = vec![
        ("parameters", params.to_bytes()),
        ("secret key", sk.to_bytes()),
        ("public key", pk.to_bytes()),
        ("relinearisation key", rk.to_bytes()),
        ("key-switching key", rk.key().to_bytes()),
        ("Galois keys", gk.to_bytes()),
        ("seeded ciphertext", seeded.to_bytes()),
        ("ciphertext", ct.to_bytes()),
    ];
    Objects { params: params.clone(), encodings }
}

/// Parses bytes as the named object and serialises it again.
fn reparse(params: &Arc<Parameters>, name: &str, bytes: &[u8]) -> Result<Vec<u8>, RlweError> {
    Ok(match name {
        "parameters" => Parameters::from_bytes(bytes)?.to_bytes(),
        "secret key" => SecretKey::from_bytes(params, bytes)?.to_bytes(),
        "public key" => PublicKey::from_bytes(params, bytes)?.to_bytes(),
        "relinearisation key" => RelinKey::from_bytes(params, bytes)?.to_bytes(),
        "key-switching key" => KeySwitchKey::from_bytes(params, bytes)?.to_bytes(),
        "Galois keys" => GaloisKeys::from_bytes(params, bytes)?.to_bytes(),
        "seeded ciphertext" => SeededCiphertext::from_bytes(params, bytes)?.to_bytes(),
        "ciphertext" => Ciphertext::from_bytes(params, bytes)?.to_bytes(),
        other => panic!("unknown object {other}"),
    })
}

#[test]
fn every_object_round_trips() {
    let o = objects(&toy_params(), 1);
    for (name, bytes) in &o.encodings {
        assert_eq!(&reparse(&o.params, name, bytes).unwrap(), bytes, "{name}");
    }
    // A seeded ciphertext expands to the same ciphertext on both sides.
    let mut s = Sampler::from_seed([9; 32]);
    let sk = SecretKey::generate(&o.params, &mut s).unwrap();
    let seeded = encrypt_zero_symmetric(&sk, 2, &mut s).unwrap();
    let back = SeededCiphertext::from_bytes(&o.params, &seeded.to_bytes()).unwrap();
    assert_eq!(back.expand(&o.params).unwrap(), seeded.expand(&o.params).unwrap());
    assert!(seeded.to_bytes().len() * 2 < seeded.expand(&o.params).unwrap().to_bytes().len() + 200, "seeding halves the size");
}

#[test]
fn each_corruption_is_refused_with_a_clear_error() {
    let o = objects(&toy_params(), 2);
    let other = {
        let mut lit = ParametersLiteral::bfv_from_bits(64, &[40, 40, 41], &[45], 17).unwrap();
        lit.key_switch_digits = 3;
        lit.security = Security::InsecureTestOnly;
        Parameters::new(lit).unwrap()
    };
    for (name, bytes) in &o.encodings {
        // Truncation at several points.
        for cut in [0, 10, HEADER_LEN, bytes.len() / 2, bytes.len() - 1] {
            let err = reparse(&o.params, name, &bytes[..cut]).unwrap_err();
            assert!(matches!(err, RlweError::Wire(WireError::Truncated { .. })), "{name} cut {cut}: {err}");
            assert!(err.to_string().contains("truncated"));
        }
        // Wrong version.
        let mut v = bytes.clone();
        v[4] = 2;
        let err = reparse(&o.params, name, &v).unwrap_err();
        assert!(err.to_string().contains("unsupported format version 2"), "{name}: {err}");
        // A flipped byte anywhere in the payload or checksum.
        for pos in [HEADER_LEN, HEADER_LEN + (bytes.len() - HEADER_LEN) / 2, bytes.len() - 1] {
            let mut f = bytes.clone();
            f[pos] ^= 0x40;
            let err = reparse(&o.params, name, &f).unwrap_err();
            assert!(matches!(err, RlweError::Wire(WireError::ChecksumMismatch)), "{name} flip {pos}: {err}");
        }
        // Wrong parameters.
        if *name != "parameters" {
            let err = reparse(&other, name, bytes).unwrap_err();
            assert!(err.to_string().contains("different parameters"), "{name}: {err}");
        }
    }
    // The wrong kind of object.
    let pk = &o.encodings[2].1;
    let err = Ciphertext::from_bytes(&o.params, pk).unwrap_err();
    assert!(err.to_string().contains("expected a ciphertext, found a public key"), "{err}");
}

#[test]
fn payload_validation_catches_what_checksums_cannot() {
    // A well-formed envelope around a payload that lies (level too high, residue too large).
    let params = toy_params();
    let mut w = lycaon_rlwe::wire::WireWriter::new();
    w.put_u8(2);
    w.put_u32(7);
    let bytes = lycaon_rlwe::wire::seal_envelope(lycaon_rlwe::wire::ObjectKind::Ciphertext, params.id(), &w.into_bytes());
    let err = Ciphertext::from_bytes(&params, &bytes).unwrap_err();
    assert!(err.to_string().contains("level 7 exceeds the top level 2"), "{err}");
    let mut w = lycaon_rlwe::wire::WireWriter::new();
    w.put_u8(2);
    w.put_u32(0);
    w.put_packed(&vec![(1u64 << 40) - 1; 128], 40);
    let bytes = lycaon_rlwe::wire::seal_envelope(lycaon_rlwe::wire::ObjectKind::Ciphertext, params.id(), &w.into_bytes());
    let err = Ciphertext::from_bytes(&params, &bytes).unwrap_err();
    assert!(err.to_string().contains("not below its modulus"), "{err}");
}

/// Pinned wire bytes: deterministic seeds must give these hashes. If this fails after a deliberate
/// format change, bump wire::FORMAT_VERSION and update the constants; if it fails otherwise, the
/// change broke compatibility with every stored or in-flight object.
#[test]
fn wire_bytes_are_pinned() {
    let o = objects(&toy_params(), 3);
    let digest = |b: &[u8]| blake3::hash(b).to_hex()[..16].to_string();
    let got: Vec<String> = o.encodings.iter().map(|(name, b)| format!("{name}={}", digest(b))).collect();
    let pinned = PINNED.join(",");
    assert_eq!(got.join(","), pinned);
}

const PINNED: [&str; 8] = [
    "parameters=3795d5955b8de133",
    "secret key=b13dd50a3e6f2f0a",
    "public key=1b87fad92fef954e",
    "relinearisation key=9373d00d4171fc43",
    "key-switching key=c3d0726cc087f799",
    "Galois keys=caa782fb8a7669b4",
    "seeded ciphertext=0d17baaec5ab5b23",
    "ciphertext=720f213b4081ba92",
];
