use super::*;
use crate::context::test_context;

/// (metadata, TriggerAuthentication parameters, what the error names).
type Case<'a> = (&'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], &'a str);

const AUTH_PARAMS: &[(&str, &str)] =
    &[("accessID", "fakeAccessID"), ("accessKey", "fakeAccessKey")];

fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<SumologicConfig, String> {
    SumologicConfig::parse(&test_context("sumologic", 0, metadata, &[], auth))
        .map_err(|e| e.to_string())
}

const LOGS: &[(&str, &str)] = &[
    ("host", "https://api.sumologic.com"),
    ("unsafeSsl", "false"),
    ("query", "fakeQuery"),
    ("queryType", "logs"),
    ("timerange", "5"),
    ("resultField", "fakeResultField"),
    ("timezone", "UTC"),
    ("quantization", "1"),
    ("activationThreshold", "5"),
    ("threshold", "1"),
    ("queryAggregator", "Avg"),
    ("logsPollingInterval", "5s"),
];

const MULTI: &[(&str, &str)] = &[
    ("host", "https://api.sumologic.com"),
    ("queryType", "metrics"),
    ("timerange", "5m"),
    ("timezone", "Asia/Kolkata"),
    ("quantization", "60s"),
    ("activationThreshold", "5"),
    ("threshold", "1"),
    ("rollup", "Sum"),
    ("query.A", "fakeQueryA"),
    ("query.B", "fakeQueryB"),
    ("query.C", "fakeQueryC"),
    ("resultQueryRowID", "C"),
];

/// KEDA's `testSumologicMetadata` and `sumologicMetricIdentifiers`
/// (`pkg/scalers/sumologic_scaler_test.go`).
#[test]
fn keda_s_metadata_cases() {
    let logs = parse(LOGS, AUTH_PARAMS).unwrap();
    assert_eq!(logs.metric_name, "s0-sumologic-logs");
    // "5" is 5 milliseconds, as KEDA reads a bare number for a duration.
    assert_eq!(logs.timerange, Duration::from_millis(5));
    assert_eq!(
        logs.search,
        Search::Logs {
            query: "fakeQuery".into(),
            result_field: "fakeResultField".into(),
            polling_interval: Duration::from_secs(5),
        }
    );
    let mut metrics: Vec<_> = LOGS
        .iter()
        .copied()
        .filter(|(k, _)| !matches!(*k, "resultField" | "logsPollingInterval" | "queryType"))
        .collect();
    metrics.extend([("queryType", "metrics"), ("rollup", "Sum")]);
    let config = parse(&metrics, AUTH_PARAMS).unwrap();
    assert_eq!(config.metric_name, "s0-sumologic-metrics");
    let multi = parse(MULTI, AUTH_PARAMS).unwrap();
    let Search::Metrics {
        queries,
        row,
        quantization_ms,
        rollup,
    } = &multi.search
    else {
        panic!("metrics");
    };
    assert_eq!(
        (row.as_str(), *quantization_ms, rollup.as_str()),
        ("C", 60_000, "Sum")
    );
    assert_eq!(queries.len(), 3);

    let host = ("host", "https://api.sumologic.com");
    let failing: &[Case<'_>] = &[
        (&[("query", "fakeQuery")], AUTH_PARAMS, "\"host\""),
        (LOGS, &[("accessKey", "k")], "\"accessID\""),
        (LOGS, &[("accessID", "i")], "\"accessKey\""),
        (
            &[host, ("query", "q"), ("queryType", "invalid")],
            AUTH_PARAMS,
            "queryType",
        ),
        (
            &[
                host,
                ("queryType", "logs"),
                ("timerange", "5"),
                ("threshold", "1"),
                ("resultField", "f"),
            ],
            AUTH_PARAMS,
            "\"query\"",
        ),
        (
            &[
                host,
                ("query", "q"),
                ("queryType", "logs"),
                ("threshold", "1"),
            ],
            AUTH_PARAMS,
            "\"timerange\"",
        ),
        (
            &[
                host,
                ("query", "q"),
                ("queryType", "logs"),
                ("timerange", "invalid"),
                ("threshold", "1"),
            ],
            AUTH_PARAMS,
            "\"timerange\"",
        ),
        (
            &[
                host,
                ("query", "q"),
                ("queryType", "logs"),
                ("timerange", "5"),
                ("threshold", "1"),
            ],
            AUTH_PARAMS,
            "\"resultField\"",
        ),
        (
            &[
                host,
                ("query", "q"),
                ("queryType", "metrics"),
                ("timerange", "5"),
                ("threshold", "1"),
            ],
            AUTH_PARAMS,
            "\"quantization\"",
        ),
        (
            &[
                host,
                ("query", "q"),
                ("queryType", "metrics"),
                ("quantization", "1"),
                ("timerange", "5"),
                ("rollup", "fake"),
                ("threshold", "1"),
            ],
            AUTH_PARAMS,
            "rollup",
        ),
    ];
    for (metadata, auth, named) in failing {
        let err = parse(metadata, auth).unwrap_err();
        assert!(err.contains(named), "{named}: {err}");
    }
    // Multi-metrics rules.
    let mut both = MULTI.to_vec();
    both.push(("query", "q"));
    assert!(
        parse(&both, AUTH_PARAMS)
            .unwrap_err()
            .contains("only one of")
    );
    let mut unknown_row = MULTI.to_vec();
    unknown_row.retain(|(k, _)| *k != "resultQueryRowID");
    unknown_row.push(("resultQueryRowID", "Z"));
    assert!(
        parse(&unknown_row, AUTH_PARAMS)
            .unwrap_err()
            .contains("query.Z")
    );
    let mut logs_multi = LOGS.to_vec();
    logs_multi.push(("query.A", "a"));
    assert!(
        parse(&logs_multi, AUTH_PARAMS)
            .unwrap_err()
            .contains("query.<rowId>")
    );
    // A time zone that does not exist fails every read, naming it.
    let mut bad_tz = LOGS.to_vec();
    bad_tz.retain(|(k, _)| *k != "timezone");
    bad_tz.push(("timezone", "Mars/Olympus"));
    let config = parse(&bad_tz, AUTH_PARAMS).unwrap();
    let err = config
        .time_range(jiff::Timestamp::UNIX_EPOCH)
        .unwrap_err()
        .to_string();
    assert!(err.contains("\"timezone\""), "{err}");
}

#[test]
fn the_metrics_request_is_keda_s() {
    let config = parse(MULTI, AUTH_PARAMS).unwrap();
    let now: jiff::Timestamp = "2026-01-01T12:00:00Z".parse().unwrap();
    let (from, to, tz) = config.time_range(now).unwrap();
    assert_eq!(
        (from.as_str(), to.as_str(), tz.as_str()),
        (
            "2026-01-01T17:25:00+05:30",
            "2026-01-01T17:30:00+05:30",
            "Asia/Kolkata"
        )
    );
    let body: serde_json::Value = serde_json::from_str(&config.metrics_body(now).unwrap()).unwrap();
    assert_eq!(
        body["queries"][2],
        serde_json::json!({"rowId": "C", "query": "fakeQueryC", "quantization": 60000, "rollup": "Sum"})
    );
    assert_eq!(body["timeRange"]["type"], "BeginBoundedTimeRange");
    assert_eq!(
        body["timeRange"]["to"],
        serde_json::json!({"type": "Iso8601TimeRangeBoundary", "iso8601Time": "2026-01-01T17:30:00+05:30"})
    );
    let utc = parse(LOGS, AUTH_PARAMS).unwrap();
    assert_eq!(utc.time_range(now).unwrap().1, "2026-01-01T12:00:00Z");
}

#[test]
fn answers_are_read_as_keda_does_and_never_quoted() {
    let answer = br#"{"queryResult":[{"rowId":"A","timeSeriesList":{"timeSeries":[{"metricDefinition":{"metric":"cpu"},"points":{"timestamps":[1,2,3],"values":[1.0,null,5.0]}}],"unit":""}}],"errors":null}"#;
    let values = metrics_values(answer, "A").unwrap();
    assert_eq!(values, [1.0, 0.0, 5.0]);
    assert_eq!(aggregate(&values, Aggregator::Avg), Ok(2.0));
    assert_eq!(aggregate(&values, Aggregator::Latest), Ok(5.0));
    assert_eq!(aggregate(&values, Aggregator::Sum), Ok(6.0));
    assert_eq!(aggregate(&values, Aggregator::Count), Ok(3.0));
    assert_eq!(aggregate(&values, Aggregator::Min), Ok(0.0));
    assert_eq!(aggregate(&values, Aggregator::Max), Ok(5.0));
    assert!(aggregate(&[], Aggregator::Avg).is_err());
    assert!(
        metrics_values(answer, "B")
            .unwrap_err()
            .contains("resultQueryRowID")
    );
    let failed = br#"{"queryResult":[],"errors":{"id":"x","errors":[{"code":"SECRETSECRET","message":"SECRETSECRET"}]}}"#;
    let err = metrics_values(failed, "A").unwrap_err();
    assert!(
        !err.contains("SECRETSECRET") && err.contains("1 error"),
        "{err}"
    );
    assert_eq!(
        job_id(br#"{"id":"IUUQI-DG3S2-QIU","link":{"rel":"self"}}"#),
        Ok("IUUQI-DG3S2-QIU".into())
    );
    assert!(job_id(br#"{"id":"../x"}"#).is_err());
    assert_eq!(
        job_state(br#"{"state":"DONE GATHERING RESULTS","messageCount":90,"recordCount":1,"histogramBuckets":[]}"#),
        Ok(response::JobState::Done { records: 1, messages: 90 })
    );
    assert_eq!(
        job_state(br#"{"state":"GATHERING RESULTS"}"#),
        Ok(response::JobState::Running)
    );
    assert_eq!(
        job_state(br#"{"state":"CANCELLED"}"#),
        Ok(response::JobState::Failed("CANCELLED"))
    );
    assert_eq!(
        record_values(
            br#"{"fields":[],"records":[{"map":{"_count":"90","x":"y"}},{"map":{"x":"y"}}]}"#,
            "_count"
        ),
        Ok(Some(vec![90.0]))
    );
    assert_eq!(record_values(br#"{"records":[]}"#, "_count"), Ok(None));
    let err = record_values(
        br#"{"records":[{"map":{"_count":"SECRETSECRET"}}]}"#,
        "_count",
    )
    .unwrap_err();
    assert!(!err.contains("SECRETSECRET"), "{err}");
    for garbage in ["", "SECRETSECRET", "[1]"] {
        for err in [
            metrics_values(garbage.as_bytes(), "A").unwrap_err(),
            job_id(garbage.as_bytes()).unwrap_err(),
            job_state(garbage.as_bytes()).map(drop).unwrap_err(),
        ] {
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
}
