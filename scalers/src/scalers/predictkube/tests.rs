use std::time::Duration;

use super::*;
use crate::context::test_context;

/// KEDA's test key (`predictkube_scaler_test.go`): a JWT.
const KEY: &str = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJhdWQiOiJ0ZXN0IENyZWF0ZUNsaWVudCIsImV4cCI6MTY0NjkxNzI3Nywic3ViIjoiODM4NjY5ODAtM2UzNS0xMWVjLTlmMjQtYWNkZTQ4MDAxMTIyIn0.5QEuO6_ysdk2abGvk3Xp7Q25M4H4pIFXeqP2E7n9rKI";

const BASE: &[(&str, &str)] = &[
    ("predictHorizon", "2h"),
    ("historyTimeWindow", "7d"),
    ("prometheusAddress", "http://prometheus.monitoring:9090"),
    ("queryStep", "2m"),
    ("threshold", "2000"),
    ("query", "up"),
];

fn with(changes: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut metadata: std::collections::BTreeMap<&str, &str> = BASE.iter().copied().collect();
    for &(k, v) in changes {
        metadata.insert(k, v);
    }
    metadata.into_iter().collect()
}

fn parse(
    metadata: &[(&str, &str)],
    auth: &[(&str, &str)],
) -> Result<PredictKubeConfig, ScalerError> {
    PredictKubeConfig::parse(&test_context("predictkube", 1, metadata, &[], auth))
}

#[test]
fn keda_example_parses_with_its_defaults() {
    let config = parse(BASE, &[("apiKey", KEY)]).expect("KEDA's well-formed case");
    assert_eq!(config.predict_horizon, Duration::from_secs(7200));
    assert_eq!(config.history_time_window, Duration::from_secs(7 * 86_400));
    assert_eq!(config.step, Duration::from_secs(120));
    assert_eq!(config.forecast_horizon(), 60);
    assert_eq!(config.threshold, 2000.0);
    assert_eq!(config.activation_threshold, 0.0);
    assert_eq!(config.metric_name, "s1-predictkube-predictkube_metric");
    assert_eq!(
        config.prometheus.range_url.as_str(),
        "http://prometheus.monitoring:9090/api/v1/query_range"
    );
    assert_eq!(config.engine.address(), "api.predictkube.com:443");
    let target = metric_target_milli(config.metric_type, config.threshold);
    assert_eq!(target.average_value.map(|q| q.0), Some("2k".into()));
}

#[test]
fn errors_name_the_parameter_and_never_show_the_api_key() {
    // (metadata changes, auth, error)
    type Row<'a> = (&'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], &'a str);
    let rows: &[Row<'_>] = &[
        (
            &[("prometheusAddress", "")],
            &[("apiKey", KEY)],
            r#"trigger 1 (predictkube): missing required parameter "prometheusAddress""#,
        ),
        (
            &[("prometheusAddress", "prometheus:9090")],
            &[("apiKey", KEY)],
            r#"trigger 1 (predictkube): parameter "prometheusAddress" must be an http:// or https:// URL, not prometheus:"#,
        ),
        (
            &[("threshold", "one")],
            &[("apiKey", KEY)],
            r#"trigger 1 (predictkube): parameter "threshold": "one" is not a valid number"#,
        ),
        (
            &[("threshold", "NaN")],
            &[("apiKey", KEY)],
            r#"trigger 1 (predictkube): parameter "threshold": "NaN" is not a valid number"#,
        ),
        (
            &[("threshold", "0")],
            &[("apiKey", KEY)],
            r#"trigger 1 (predictkube): parameter "threshold" must be given and not 0 (it is the target)"#,
        ),
        (
            &[("activationThreshold", "one")],
            &[("apiKey", KEY)],
            r#"trigger 1 (predictkube): parameter "activationThreshold": "one" is not a valid number"#,
        ),
        (
            &[("query", "")],
            &[("apiKey", KEY)],
            r#"trigger 1 (predictkube): missing required parameter "query""#,
        ),
        (
            &[("queryStep", "")],
            &[("apiKey", KEY)],
            r#"trigger 1 (predictkube): missing required parameter "queryStep""#,
        ),
        (
            &[("predictHorizon", "2 hours")],
            &[("apiKey", KEY)],
            r#"trigger 1 (predictkube): parameter "predictHorizon": "2 hours" is not a duration of at least 0 with a unit (ns, us, ms, s, m, h, d, w), e.g. 2m, 2h or 7d"#,
        ),
        (
            &[("historyTimeWindow", "-7d")],
            &[("apiKey", KEY)],
            r#"trigger 1 (predictkube): parameter "historyTimeWindow": "-7d" is not a duration of at least 0 with a unit (ns, us, ms, s, m, h, d, w), e.g. 2m, 2h or 7d"#,
        ),
        (
            &[],
            &[],
            r#"trigger 1 (predictkube): missing required parameter "apiKey""#,
        ),
        (
            &[],
            &[("apiKey", "not-a-jwt-s3cret")],
            "trigger 1 (predictkube): parameter \"apiKey\" (TriggerAuthentication) is not a JWT (three base64url parts separated by dots), the form of PredictKube's API keys",
        ),
        (
            &[("authModes", "basic")],
            &[("apiKey", KEY)],
            r#"trigger 1 (predictkube): missing required parameter "username" (TriggerAuthentication) for authModes basic"#,
        ),
    ];
    for (i, (changes, auth, expected)) in rows.iter().enumerate() {
        let err = parse(&with(changes), auth).expect_err("invalid");
        assert_eq!(err.to_string(), *expected, "row {i}");
        assert!(!err.to_string().contains("s3cret"), "row {i}");
    }
    // The engine's key is read from the TriggerAuthentication only, as in KEDA.
    let mut metadata = with(&[]);
    metadata.push(("apiKey", KEY));
    let err = parse(&metadata, &[]).expect_err("apiKey in metadata");
    assert_eq!(
        err.to_string(),
        r#"trigger 1 (predictkube): missing required parameter "apiKey""#
    );
}

#[test]
fn threshold_is_optional_for_scaling_modifiers_and_a_zero_step_is_five_minutes() {
    let mut ctx = test_context(
        "predictkube",
        0,
        &with(&[("threshold", ""), ("queryStep", "0")]),
        &[],
        &[("apiKey", KEY)],
    );
    ctx.as_metric_source = true;
    let config = PredictKubeConfig::parse(&ctx).expect("a metric source needs no threshold");
    assert_eq!(config.threshold, 0.0);
    assert_eq!(config.step, DEFAULT_STEP);
    assert_eq!(config.forecast_horizon(), 24, "2h / 5m");
}

#[test]
fn durations_read_as_str2duration_reads_them() {
    // (text, duration)
    let rows = [
        ("2m", Some(Duration::from_secs(120))),
        ("7d", Some(Duration::from_secs(7 * 86_400))),
        ("2w", Some(Duration::from_secs(14 * 86_400))),
        ("1d12h", Some(Duration::from_secs(36 * 3600))),
        ("1.5h", Some(Duration::from_secs(5400))),
        ("500ms", Some(Duration::from_millis(500))),
        ("+30s", Some(Duration::from_secs(30))),
        ("0", Some(Duration::ZERO)),
        ("0s", Some(Duration::ZERO)),
        ("", None),
        ("5", None),
        ("5x", None),
        ("m", None),
        (".h", None),
        ("-1h", None),
        ("300y", None),
        ("15000w", Some(Duration::from_secs(15_000 * 604_800))),
        // Beyond Go's i64 nanoseconds (about 15250 weeks).
        ("16000w", None),
    ];
    for (text, expected) in rows {
        assert_eq!(parse_duration(text), expected, "{text:?}");
    }
}

#[test]
fn the_horizon_is_whole_steps_as_go_divides_durations() {
    let mut config = parse(BASE, &[("apiKey", KEY)]).expect("valid");
    config.predict_horizon = Duration::from_secs(300);
    config.step = Duration::from_secs(120);
    assert_eq!(config.forecast_horizon(), 2, "5m / 2m");
    config.predict_horizon = Duration::ZERO;
    assert_eq!(config.forecast_horizon(), 0);
}

#[test]
fn the_range_query_covers_the_window_at_the_step() {
    let config = parse(
        &with(&[("historyTimeWindow", "1h"), ("queryStep", "30s")]),
        &[("apiKey", KEY)],
    )
    .expect("valid");
    let now: jiff::Timestamp = "2024-03-10T12:00:00.25Z".parse().expect("time");
    let parameters = config.range_parameters(now).expect("in range");
    let expected = [
        ("query", "up"),
        ("start", "1710068400.25"),
        ("end", "1710072000.25"),
        ("step", "30"),
    ];
    let got: Vec<(&str, &str)> = parameters
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(got, expected);
}

#[test]
fn the_engine_request_carries_the_horizon_and_every_sample_with_the_metric_name() {
    let config = parse(BASE, &[("apiKey", KEY)]).expect("valid");
    let history = [
        Sample {
            millis: 1_700_000_000_000,
            value: 1.5,
        },
        Sample {
            millis: 1_700_000_120_500,
            value: 2.0,
        },
    ];
    let request = config.engine_request(&history);
    assert_eq!(request.forecast_horizon, 60);
    assert_eq!(request.observations.len(), 2);
    let second = &request.observations[1];
    assert_eq!(
        second.timestamp,
        Some(proto::Timestamp {
            seconds: 1_700_000_120,
            nanos: 500_000_000
        })
    );
    assert_eq!(second.value, 2.0);
    assert_eq!(second.metric_name, "s1-predictkube-predictkube_metric");
}

#[test]
fn the_value_is_the_larger_of_forecast_and_last_sample_and_activity_follows_the_last_sample() {
    let samples = |values: &[f64]| -> Vec<Sample> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| Sample {
                millis: i64::try_from(i).expect("small") * 1000,
                value: *v,
            })
            .collect()
    };
    // (forecast, history, activation threshold, value, active)
    type Row<'a> = (i64, &'a [f64], f64, Option<f64>, bool);
    let rows: &[Row<'_>] = &[
        // The forecast is above the last sample: the forecast.
        (30, &[1.0, 5.0], 0.0, Some(30.0), true),
        // The last sample is above the forecast: the last sample.
        (3, &[9.0, 7.5], 0.0, Some(7.5), true),
        // Activity is the last sample's, not the forecast's.
        (500, &[10.0, 2.0], 2.0, Some(500.0), false),
        (500, &[10.0, 2.5], 2.0, Some(500.0), true),
        // No history: the forecast, inactive (last sample 0).
        (12, &[], 0.0, Some(12.0), false),
        // Zero: no value at all, inactive, as KEDA answers.
        (0, &[0.0], -1.0, None, false),
        (0, &[], 0.0, None, false),
        // A negative forecast below a positive last sample.
        (-4, &[1.0], 0.0, Some(1.0), true),
    ];
    for (i, (forecast, history, activation, value, active)) in rows.iter().enumerate() {
        let got = report("s0-m", *forecast, &samples(history), *activation);
        assert_eq!(
            got.values.first().map(|v| v.value),
            *value,
            "row {i}: value"
        );
        assert_eq!(got.active, *active, "row {i}: active");
    }
}

#[test]
fn api_keys_are_checked_for_the_jwt_form() {
    assert!(is_jwt(KEY));
    assert!(is_jwt("a.b."));
    assert!(is_jwt("a-_.b.c"));
    for bad in [
        "", "a", "a.b", ".b.c", "a..c", "a.b.c.d", "a.b.c d", "a.b+.c", "a.b.c=",
    ] {
        assert!(!is_jwt(bad), "{bad:?}");
    }
}

#[tokio::test]
async fn polls_keep_to_the_polling_interval_as_the_engine_is_billed_per_call() {
    use crate::scaler::Scaler;
    let ctx = test_context("predictkube", 0, BASE, &[], &[("apiKey", KEY)]);
    let scaler = PredictKubeScaler::build(&ctx)
        .await
        .expect("builds without connecting");
    assert!(!scaler.adaptive_polling());
    assert_eq!(scaler.metric_specs().len(), 1);
    scaler.close().await;
}
