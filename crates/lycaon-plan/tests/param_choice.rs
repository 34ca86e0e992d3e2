//! Parameter records: a shared plaintext modulus across ring degrees (`t_n`).

use lycaon_plan::hybrid::ParamChoice;

#[test]
fn layers_of_different_degrees_share_one_plaintext_modulus_through_t_n() {
    let small = ParamChoice { n: 4096, q_bits: vec![60, 49], p_bits: vec![], t_bits: 21, digits: 1, t_n: None };
    let large = ParamChoice { n: 8192, q_bits: vec![60, 60], p_bits: vec![], t_bits: 21, digits: 1, t_n: None };
    let t = |c: &ParamChoice| c.parameters().unwrap().plaintext_modulus().unwrap().value();
    // Each degree's own largest prime t = 1 mod 2n below 2^21 differs...
    assert_ne!(t(&small), t(&large));
    // ... and one chosen for the larger degree serves both.
    let shared = |c: &ParamChoice| ParamChoice { t_n: Some(8192), ..c.clone() };
    assert_eq!(t(&shared(&small)), t(&large));
    assert_eq!(t(&shared(&large)), t(&large));
    assert_eq!(t(&large) % (2 * 8192), 1);
    assert!(t(&large) >= 1 << 20);
    // The record round-trips, and leaves the field out when it is not set.
    let json = serde_json::to_string(&shared(&small)).unwrap();
    assert_eq!(serde_json::from_str::<ParamChoice>(&json).unwrap(), shared(&small));
    assert!(!serde_json::to_string(&small).unwrap().contains("t_n"));
    assert!(shared(&small).label().ends_with("t_n=8192"));
    // A degree below n, or not a power of two, is refused by name.
    for bad in [2048, 12288] {
        let err = ParamChoice { t_n: Some(bad), ..large.clone() }.parameters().unwrap_err().to_string();
        assert!(err.contains("t_n"), "{err}");
    }
}
