//! Standard 5-field cron expressions (`minute hour day-of-month month day-of-week`) evaluated
//! in an IANA time zone, with the semantics of the cron library KEDA uses (robfig/cron's
//! standard parser):
//!
//! - fields accept `*`, `?` (same as `*`), numbers, `a-b` ranges, `/step` (`*/15`, `5/15` =
//!   `5-59/15`), and comma lists; months and weekdays also accept `JAN`..`DEC`, `SUN`..`SAT`;
//!   weekdays are 0-6 with 0 = Sunday;
//! - if day-of-month or day-of-week is `*`/`?`, both must match; otherwise either may;
//! - descriptors `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`,
//!   `@hourly`.
//!
//! Daylight-saving time: a local time skipped by a spring-forward transition fires at the
//! same offset after the gap (02:30 -> 03:30); a local time repeated by a fall-back transition
//! fires once, at its first occurrence.

use jiff::civil::{Date, DateTime, Time};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

/// A parsed schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Schedule {
    minutes: u64,
    hours: u64,
    days: u64,
    months: u64,
    weekdays: u64,
    /// Day-of-month or day-of-week was `*`/`?`: both must match.
    day_star: bool,
}

struct Field {
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTE: Field = Field {
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Field = Field {
    min: 0,
    max: 23,
    names: &[],
};
const DAY: Field = Field {
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Field = Field {
    min: 1,
    max: 12,
    names: &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ],
};
const WEEKDAY: Field = Field {
    min: 0,
    max: 6,
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
};

/// How far ahead `next_after` looks: eight years covers every leap day (2096 -> 2104).
const SEARCH_DAYS: i32 = 366 * 8 + 2;

impl Schedule {
    /// Parses an expression.
    ///
    /// # Errors
    /// A message saying which field is wrong.
    pub fn parse(expr: &str) -> Result<Self, String> {
        let expr = expr.trim();
        let expanded = match expr {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other if other.starts_with('@') => {
                return Err(format!("unsupported descriptor \"{other}\""));
            }
            other => other,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let [minute, hour, day, month, weekday] = fields.as_slice() else {
            return Err(format!(
                "expected 5 fields (minute hour day-of-month month day-of-week), got {}",
                fields.len()
            ));
        };
        let (minutes, _) = parse_field(minute, &MINUTE).map_err(|e| format!("minute: {e}"))?;
        let (hours, _) = parse_field(hour, &HOUR).map_err(|e| format!("hour: {e}"))?;
        let (days, day_star) = parse_field(day, &DAY).map_err(|e| format!("day of month: {e}"))?;
        let (months, _) = parse_field(month, &MONTH).map_err(|e| format!("month: {e}"))?;
        let (weekdays, weekday_star) =
            parse_field(weekday, &WEEKDAY).map_err(|e| format!("day of week: {e}"))?;
        Ok(Self {
            minutes,
            hours,
            days,
            months,
            weekdays,
            day_star: day_star || weekday_star,
        })
    }

    fn date_matches(&self, date: Date) -> bool {
        if !bit(self.months, u32::from(date.month().unsigned_abs())) {
            return false;
        }
        let day = bit(self.days, u32::from(date.day().unsigned_abs()));
        let weekday = bit(
            self.weekdays,
            u32::from(date.weekday().to_sunday_zero_offset().unsigned_abs()),
        );
        if self.day_star {
            day && weekday
        } else {
            day || weekday
        }
    }

    /// The first occurrence strictly after `after`, in `tz`. `None` if the schedule never
    /// fires (e.g. `0 0 30 2 *`).
    pub fn next_after(&self, after: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let start = after.to_zoned(tz.clone()).date();
        for offset in 0..SEARCH_DAYS {
            let date = start.checked_add(offset.days()).ok()?;
            if !self.date_matches(date) {
                continue;
            }
            // Candidates of one day in local order can be out of instant order around a
            // DST gap, so take the earliest one after `after`.
            let mut best: Option<Timestamp> = None;
            for hour in (0..24).filter(|h| bit(self.hours, *h)) {
                for minute in (0..60).filter(|m| bit(self.minutes, *m)) {
                    let local = DateTime::from_parts(
                        date,
                        Time::new(i8::try_from(hour).ok()?, i8::try_from(minute).ok()?, 0, 0)
                            .ok()?,
                    );
                    let Ok(zoned) = tz.to_ambiguous_zoned(local).compatible() else {
                        continue;
                    };
                    let instant = zoned.timestamp();
                    if instant > after && best.is_none_or(|b| instant < b) {
                        best = Some(instant);
                    }
                }
            }
            if best.is_some() {
                return best;
            }
        }
        None
    }
}

fn bit(set: u64, n: u32) -> bool {
    set & (1 << n) != 0
}

/// Parses one field into a bit set; the flag says whether it was `*` or `?` without a step.
fn parse_field(text: &str, field: &Field) -> Result<(u64, bool), String> {
    let mut set = 0u64;
    let mut star = false;
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let step: u32 = s
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("invalid step \"{s}\""))?;
                (r, Some(step))
            }
            None => (part, None),
        };
        let (low, high) = if range == "*" || range == "?" {
            if step.is_none_or(|s| s == 1) {
                star = true;
            }
            (field.min, field.max)
        } else if let Some((a, b)) = range.split_once('-') {
            (value(a, field)?, value(b, field)?)
        } else {
            let v = value(range, field)?;
            // `5/15` means `5-max/15`.
            (v, if step.is_some() { field.max } else { v })
        };
        if low > high {
            return Err(format!("range \"{range}\" is backwards"));
        }
        // A step longer than the field keeps only `low` (`*/4294967293` is minute 0); stepping
        // by it would overflow.
        let step = step.unwrap_or(1);
        let mut v = Some(low);
        while let Some(n) = v.filter(|n| *n <= high) {
            set |= 1 << n;
            v = n.checked_add(step);
        }
    }
    Ok((set, star))
}

fn value(text: &str, field: &Field) -> Result<u32, String> {
    let upper = text.to_ascii_uppercase();
    if let Some((_, v)) = field
        .names
        .iter()
        .zip(field.min..)
        .find(|(n, _)| **n == upper)
    {
        return Ok(v);
    }
    let v: u32 = text
        .parse()
        .map_err(|_| format!("\"{text}\" is not a number"))?;
    if v < field.min || v > field.max {
        return Err(format!("{v} is out of range {}-{}", field.min, field.max));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn next(expr: &str, tz: &str, after: &str) -> Option<String> {
        let tz = TimeZone::get(tz).unwrap();
        Schedule::parse(expr)
            .unwrap()
            .next_after(ts(after), &tz)
            .map(|t| t.to_string())
    }

    #[test]
    fn next_occurrences() {
        // (expression, zone, after, expected next, as UTC)
        let rows = [
            (
                "30 * * * *",
                "UTC",
                "2024-01-01T10:00:00Z",
                Some("2024-01-01T10:30:00Z"),
            ),
            // strictly after: at the instant itself, the next one is a day later
            (
                "0 10 * * *",
                "UTC",
                "2024-01-01T10:00:00Z",
                Some("2024-01-02T10:00:00Z"),
            ),
            (
                "*/15 * * * *",
                "UTC",
                "2024-01-01T10:16:00Z",
                Some("2024-01-01T10:30:00Z"),
            ),
            (
                "5/20 * * * *",
                "UTC",
                "2024-01-01T10:26:00Z",
                Some("2024-01-01T10:45:00Z"),
            ),
            (
                "0 9 * * MON-FRI",
                "UTC",
                "2024-01-05T10:00:00Z",
                Some("2024-01-08T09:00:00Z"),
            ),
            (
                "0 0 1 JAN ?",
                "UTC",
                "2024-06-01T00:00:00Z",
                Some("2025-01-01T00:00:00Z"),
            ),
            // day-of-month OR day-of-week when neither is *
            (
                "0 0 13 * 5",
                "UTC",
                "2024-01-01T00:00:00Z",
                Some("2024-01-05T00:00:00Z"),
            ),
            (
                "0 0 29 2 *",
                "UTC",
                "2024-03-01T00:00:00Z",
                Some("2028-02-29T00:00:00Z"),
            ),
            (
                "@hourly",
                "UTC",
                "2024-01-01T10:59:59Z",
                Some("2024-01-01T11:00:00Z"),
            ),
            ("0 0 30 2 *", "UTC", "2024-01-01T00:00:00Z", None),
            // zone offsets: 09:00 in Tokyo is 00:00 UTC
            (
                "0 9 * * *",
                "Asia/Tokyo",
                "2024-01-01T01:00:00Z",
                Some("2024-01-02T00:00:00Z"),
            ),
            // DST spring forward (America/New_York 2024-03-10 02:00 -> 03:00): 02:30 does not
            // exist and fires at 03:30 EDT (07:30Z)
            (
                "30 2 * * *",
                "America/New_York",
                "2024-03-10T05:00:00Z",
                Some("2024-03-10T07:30:00Z"),
            ),
            // the day after, 02:30 EDT again
            (
                "30 2 * * *",
                "America/New_York",
                "2024-03-10T08:00:00Z",
                Some("2024-03-11T06:30:00Z"),
            ),
            // DST fall back (2024-11-03 02:00 EDT -> 01:00 EST): 01:30 fires once, at 01:30 EDT
            (
                "30 1 * * *",
                "America/New_York",
                "2024-11-03T04:00:00Z",
                Some("2024-11-03T05:30:00Z"),
            ),
            (
                "30 1 * * *",
                "America/New_York",
                "2024-11-03T05:31:00Z",
                Some("2024-11-04T06:30:00Z"),
            ),
        ];
        for (expr, tz, after, expected) in rows {
            assert_eq!(
                next(expr, tz, after).as_deref(),
                expected,
                "{expr} in {tz} after {after}"
            );
        }
    }

    #[test]
    fn a_step_longer_than_the_field_keeps_only_the_start() {
        // Stepping past u32::MAX overflowed before (a panic in debug builds, a wrap in release).
        for (expr, minute, day) in [
            ("*/4294967293 * * * *", 0, None),
            ("3/4294967293 * * * *", 3, None),
            ("59/4294967295 * * * *", 59, None),
            ("0 0 */4294967295 * *", 0, Some(1)),
            ("0 0 5-31/4294967295 * *", 0, Some(5)),
        ] {
            let schedule = Schedule::parse(expr).unwrap();
            assert_eq!(schedule.minutes, 1 << minute, "{expr}");
            if let Some(day) = day {
                assert_eq!(schedule.days, 1 << day, "{expr}");
            }
        }
        assert_eq!(
            Schedule::parse("*/4294967296 * * * *").unwrap_err(),
            "minute: invalid step \"4294967296\""
        );
    }

    #[test]
    fn parse_errors_name_the_field() {
        for (expr, expected) in [
            (
                "* * * *",
                "expected 5 fields (minute hour day-of-month month day-of-week), got 4",
            ),
            ("60 * * * *", "minute: 60 is out of range 0-59"),
            ("* 5-2 * * *", "hour: range \"5-2\" is backwards"),
            ("* * 0 * *", "day of month: 0 is out of range 1-31"),
            ("* * * FOO *", "month: \"FOO\" is not a number"),
            ("* * * * 7", "day of week: 7 is out of range 0-6"),
            ("*/0 * * * *", "minute: invalid step \"0\""),
            ("@every 5m", "unsupported descriptor \"@every 5m\""),
        ] {
            assert_eq!(Schedule::parse(expr).unwrap_err(), expected, "{expr}");
        }
    }
}
