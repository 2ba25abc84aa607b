//! `--prometheus URL --range 7d --step 30s`: the history of every `prometheus` trigger is the
//! trigger's own query as a range query (`/api/v1/query_range`) on the Prometheus at URL (the
//! one the operator reaches may not be reachable from where `simulate` runs).
//!
//! Each step's value follows the scaler ([`keda_scalers`]' `prometheus`, as KEDA): one series
//! is its value; no series is 0 with `ignoreNullValues` (the default) and a failed read
//! without; NaN and ±Inf likewise; more than one series is a failed read. A failed read is the
//! CSV value `error`, which counts towards `fallback`.
//!
//! Bounds: the range is split into requests of at most [`MAX_STEPS_PER_REQUEST`] steps
//! (Prometheus refuses more than 11,000 points per series), each read through the scalers'
//! pooled HTTP client (a body of at most 8 MiB, [`REQUEST_TIMEOUT`] per request); a range holds
//! at most [`MAX_STEPS`] steps. Nothing the server says reaches a message: the status, the
//! size and the kind of failure do.

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use keda_scalers::authentication::HttpAuth;
use keda_scalers::http_client::{HttpClient, HttpClientKey, origin};

use super::{Point, SimObject, SimulateError};

/// The most steps asked in one range query.
pub const MAX_STEPS_PER_REQUEST: i64 = 10_000;
/// The most steps of one history (two years of 15 s steps).
pub const MAX_STEPS: i64 = 4_300_000;
/// How long one range query may take, body included.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// What a `prometheus` trigger asks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PromQuery {
    pub query: String,
    /// `ignoreNullValues` (default `true`).
    pub ignore_null_values: bool,
}

impl PromQuery {
    /// The query of a `prometheus` trigger.
    ///
    /// # Errors
    /// No `query`, or an `ignoreNullValues` that is not a boolean; the message names the key.
    pub fn of(trigger: &keda_api::trigger::ScaleTrigger) -> Result<PromQuery, String> {
        let query = trigger
            .metadata
            .get("query")
            .filter(|q| !q.trim().is_empty())
            .ok_or("missing required parameter `metadata.query`")?
            .clone();
        let ignore_null_values = match trigger.metadata.get("ignoreNullValues").map(|v| v.trim()) {
            None | Some("") => true,
            Some(v) if v.eq_ignore_ascii_case("true") => true,
            Some(v) if v.eq_ignore_ascii_case("false") => false,
            Some(_) => return Err("metadata.ignoreNullValues is not true or false".to_string()),
        };
        Ok(PromQuery {
            query,
            ignore_null_values,
        })
    }
}

/// Which range is asked: every `step` from `start` to `end` (both included).
#[derive(Clone, Debug, PartialEq)]
pub struct RangeSpec {
    /// The Prometheus URL (`/api/v1/query_range` is appended to its path).
    pub base: url::Url,
    pub start: Timestamp,
    pub end: Timestamp,
    pub step: SignedDuration,
}

impl RangeSpec {
    /// The `range` that ends at `end`, every `step`.
    ///
    /// # Errors
    /// A URL that is not http(s), a step under 1 s, a range over [`super::MAX_HISTORY`] or of
    /// more than [`MAX_STEPS`] steps; the message names the flag.
    pub fn ending(
        base: &str,
        end: Timestamp,
        range: SignedDuration,
        step: SignedDuration,
    ) -> Result<RangeSpec, String> {
        let base = url::Url::parse(base)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
            .ok_or("--prometheus: not an http(s) URL")?;
        if step < SignedDuration::from_secs(1) {
            return Err("--step: less than 1s".to_string());
        }
        if range <= SignedDuration::ZERO || range > super::MAX_HISTORY {
            return Err(format!(
                "--range: not more than zero, or more than {} days",
                super::MAX_HISTORY.as_secs() / 86_400
            ));
        }
        if range.as_secs() / step.as_secs() > MAX_STEPS {
            return Err(format!(
                "--range / --step: more than {MAX_STEPS} steps; take a longer step"
            ));
        }
        // Whole seconds, so every step's time is exact in Prometheus' float seconds.
        let end = Timestamp::from_second(end.as_second()).unwrap_or(end);
        Ok(RangeSpec {
            base,
            start: end - range,
            end,
            step,
        })
    }

    /// The `(start, end)` of each request, in order: consecutive, at most
    /// [`MAX_STEPS_PER_REQUEST`] steps each.
    pub fn chunks(&self) -> Vec<(Timestamp, Timestamp)> {
        let mut out = Vec::new();
        let mut from = self.start;
        let span = self.step * i32::try_from(MAX_STEPS_PER_REQUEST - 1).unwrap_or(i32::MAX);
        while from <= self.end {
            let to = (from + span).min(self.end);
            out.push((from, to));
            from = to + self.step;
        }
        out
    }

    fn url(&self, query: &str, from: Timestamp, to: Timestamp) -> url::Url {
        let mut url = self.base.clone();
        let path = format!("{}/api/v1/query_range", url.path().trim_end_matches('/'));
        url.set_path(&path);
        url.query_pairs_mut()
            .append_pair("query", query)
            .append_pair("start", &from.as_second().to_string())
            .append_pair("end", &to.as_second().to_string())
            .append_pair("step", &self.step.as_secs().to_string());
        url
    }
}

/// The client every range query of a run goes through.
///
/// # Errors
/// The client cannot be built (TLS set-up).
pub fn client(spec: &RangeSpec) -> Result<HttpClient, SimulateError> {
    HttpClient::new(&HttpClientKey {
        origin: origin(&spec.base),
        auth: HttpAuth::default(),
        timeout: REQUEST_TIMEOUT,
    })
    .map_err(|e| SimulateError::Prometheus {
        trigger: "(all)".to_string(),
        message: e.to_string(),
    })
}

/// The history of every `prometheus` trigger of `object` over `spec`: one point per step per
/// trigger, sorted by time.
///
/// # Errors
/// A request that fails (status, timeout, size) or an answer that is not a range-query
/// result; the message names the trigger and the kind of failure, never the server's text.
pub async fn fetch(
    object: &SimObject,
    spec: &RangeSpec,
    client: &HttpClient,
) -> Result<Vec<Point>, SimulateError> {
    let mut points = Vec::new();
    for (index, trigger) in object.triggers.iter().enumerate() {
        let Some(query) = &trigger.prometheus else {
            continue;
        };
        let fail = |message: String| SimulateError::Prometheus {
            trigger: format!("{}/{} {}", object.namespace, object.name, trigger.name),
            message,
        };
        for (from, to) in spec.chunks() {
            let body = client
                .get(spec.url(&query.query, from, to), &http::HeaderMap::new())
                .await
                .map_err(|e| fail(format!("range query failed: {e}")))?;
            let steps = steps_of(&body, query, from, to, spec.step).map_err(fail)?;
            points.extend(steps.into_iter().map(|(time, value)| Point {
                time,
                trigger: index,
                value,
            }));
        }
    }
    points.sort_by_key(|p| p.time);
    Ok(points)
}

/// The value of every step from `from` to `to` in a range-query answer.
///
/// # Errors
/// The answer is not a successful matrix result (the message says which part, not what the
/// server sent).
pub fn steps_of(
    body: &[u8],
    query: &PromQuery,
    from: Timestamp,
    to: Timestamp,
    step: SignedDuration,
) -> Result<Vec<(Timestamp, Option<f64>)>, String> {
    use std::collections::BTreeMap;
    let bad = |what: &str| format!("the answer is not a Prometheus range-query result ({what})");
    let answer: serde_json::Value = serde_json::from_slice(body).map_err(|_| bad("not JSON"))?;
    if answer.get("status").and_then(|s| s.as_str()) != Some("success") {
        return Err(bad("status is not success"));
    }
    let data = answer.get("data").ok_or_else(|| bad("no data"))?;
    if data.get("resultType").and_then(|t| t.as_str()) != Some("matrix") {
        return Err(bad("resultType is not matrix"));
    }
    let series = data
        .get("result")
        .and_then(|r| r.as_array())
        .ok_or_else(|| bad("no result"))?;
    // Per step (milliseconds since the epoch): how many series answered, and the value.
    let mut at: BTreeMap<i64, (usize, Option<f64>)> = BTreeMap::new();
    for s in series {
        let values = s
            .get("values")
            .and_then(|v| v.as_array())
            .ok_or_else(|| bad("a series without values"))?;
        for pair in values {
            let (Some(t), Some(v)) = (
                pair.get(0).and_then(serde_json::Value::as_f64),
                pair.get(1).and_then(|v| v.as_str()),
            ) else {
                return Err(bad("a value is not [time, \"number\"]"));
            };
            let ms = keda_api::num::f64_to_i64_saturating((t * 1000.0).round());
            // Go's float syntax: NaN, +Inf, -Inf; `str::parse` reads them too.
            let value = v
                .parse::<f64>()
                .map_err(|_| bad("a value is not a number"))?;
            let entry = at.entry(ms).or_insert((0, None));
            entry.0 += 1;
            entry.1 = Some(value);
        }
    }
    let mut out = Vec::new();
    let mut t = from;
    while t <= to {
        let value = match at.get(&t.as_millisecond()) {
            // No series at this step: an empty result.
            None => query.ignore_null_values.then_some(0.0),
            Some((1, Some(v))) if v.is_finite() => Some(*v),
            Some((1, _)) => query.ignore_null_values.then_some(0.0),
            // More than one series: the scaler refuses the answer.
            Some(_) => None,
        };
        out.push((t, value));
        t += step;
    }
    Ok(out)
}

/// Parses `7d`, `12h`, `30s`, `1h30m`, `2w`: whole numbers with `s`, `m`, `h`, `d` or `w`.
///
/// # Errors
/// Anything else.
pub fn parse_span(raw: &str) -> Result<SignedDuration, String> {
    let bad = || format!("\"{raw}\" is not a duration such as 30s, 12h or 7d");
    let mut total: i64 = 0;
    let mut number = String::new();
    for c in raw.trim().chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3_600,
            'd' => 86_400,
            'w' => 7 * 86_400,
            _ => return Err(bad()),
        };
        let n: i64 = number.parse().map_err(|_| bad())?;
        total = n
            .checked_mul(unit)
            .and_then(|s| total.checked_add(s))
            .ok_or_else(bad)?;
        number.clear();
    }
    if !number.is_empty() || total == 0 {
        return Err(bad());
    }
    Ok(SignedDuration::from_secs(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + s).expect("a time")
    }

    #[test]
    fn spans_read_days_and_weeks() {
        assert_eq!(parse_span("7d"), Ok(SignedDuration::from_secs(604_800)));
        assert_eq!(parse_span("1h30m"), Ok(SignedDuration::from_secs(5_400)));
        assert_eq!(parse_span("2w"), Ok(SignedDuration::from_secs(1_209_600)));
        assert!(parse_span("7").is_err());
        assert!(parse_span("soon").is_err());
        assert!(parse_span("0s").is_err());
    }

    #[test]
    fn a_long_range_is_asked_in_consecutive_requests_of_at_most_ten_thousand_steps() {
        let spec = RangeSpec::ending(
            "http://p:9090/prefix/",
            at(7 * 86_400),
            SignedDuration::from_secs(7 * 86_400),
            SignedDuration::from_secs(30),
        )
        .expect("valid");
        let chunks = spec.chunks();
        // 20,161 steps: 10,000 + 10,000 + 161.
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks[0], (at(0), at(9_999 * 30)));
        assert_eq!(chunks[1].0, at(10_000 * 30));
        assert_eq!(chunks[2], (at(20_000 * 30), at(7 * 86_400)));
        let url = spec.url("sum(x)", chunks[0].0, chunks[0].1);
        assert_eq!(url.path(), "/prefix/api/v1/query_range");
        assert!(url.query().is_some_and(|q| q.contains("step=30")), "{url}");
        assert!(
            RangeSpec::ending("file:///x", at(0), SignedDuration::from_secs(60), spec.step)
                .is_err()
        );
        assert!(
            RangeSpec::ending(
                "http://p",
                at(0),
                SignedDuration::from_secs(700 * 86_400),
                SignedDuration::from_secs(1)
            )
            .is_err()
        );
    }

    #[test]
    fn steps_follow_the_scaler_for_empty_non_finite_and_multiple_series() {
        let query = PromQuery {
            query: "q".to_string(),
            ignore_null_values: true,
        };
        let t0 = at(0).as_second();
        // Step 0: one series, 5. Step 1: none. Step 2: NaN. Step 3: two series.
        let body = format!(
            r#"{{"status":"success","data":{{"resultType":"matrix","result":[
                {{"metric":{{"a":"x"}},"values":[[{t0},"5"],[{},"NaN"],[{},"1"]]}},
                {{"metric":{{"a":"y"}},"values":[[{},"2"]]}}]}}}}"#,
            t0 + 20,
            t0 + 30,
            t0 + 30
        );
        let step = SignedDuration::from_secs(10);
        let got = steps_of(body.as_bytes(), &query, at(0), at(30), step).expect("parses");
        assert_eq!(
            got,
            vec![
                (at(0), Some(5.0)),
                (at(10), Some(0.0)),
                (at(20), Some(0.0)),
                (at(30), None)
            ]
        );
        let strict = PromQuery {
            ignore_null_values: false,
            ..query
        };
        let got = steps_of(body.as_bytes(), &strict, at(0), at(30), step).expect("parses");
        assert_eq!(
            got.iter().map(|(_, v)| *v).collect::<Vec<_>>(),
            [Some(5.0), None, None, None]
        );
        let err = steps_of(
            br#"{"status":"error","error":"secret"}"#,
            &strict,
            at(0),
            at(0),
            step,
        )
        .expect_err("an error answer");
        assert!(!err.contains("secret"), "{err}");
    }
}
