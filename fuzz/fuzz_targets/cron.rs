//! The cron parser (`cron` trigger's `start` and `end`) and the search for the next
//! occurrence, in a time zone, from an instant.
//!
//! The input is the expression, then optionally a line with an IANA time zone and a line with
//! Unix seconds.
#![no_main]

use jiff::Timestamp;
use jiff::tz::TimeZone;
use keda_scalers::scalers::cron::schedule::Schedule;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut lines = text.split('\n');
    let expression = lines.next().unwrap_or_default();
    let schedule = match Schedule::parse(expression) {
        Ok(schedule) => schedule,
        Err(error) => {
            assert!(!error.is_empty());
            return;
        }
    };
    let tz = lines
        .next()
        .and_then(|name| TimeZone::get(name).ok())
        .unwrap_or(TimeZone::UTC);
    let seconds = lines
        .next()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .unwrap_or(1_764_000_000);
    let after = Timestamp::from_second(seconds).unwrap_or(Timestamp::MAX);
    if let Some(next) = schedule.next_after(after, &tz) {
        assert!(next > after, "{expression:?}: {next} is not after {after}");
    }
});
