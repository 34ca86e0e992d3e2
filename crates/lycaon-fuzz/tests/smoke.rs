//! A short fuzz run of every target in the test suite; the long runs are `lycaon-fuzz`.

#[test]
fn every_target_survives_a_short_run() {
    for target in lycaon_fuzz::targets::targets() {
        let stats = lycaon_fuzz::fuzz(&target, 5_000, 7, std::time::Duration::from_secs(2));
        assert!(stats.crashes.is_empty(), "{}: {:?}", target.name, stats.crashes.iter().map(|c| &c.1).collect::<Vec<_>>());
        assert!(stats.rejected > 0, "{}: mutations never rejected", target.name);
    }
}
