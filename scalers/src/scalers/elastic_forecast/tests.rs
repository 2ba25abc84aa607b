use super::*;
use crate::context::test_context;

fn parse(
    metadata: &[(&str, &str)],
    auth: &[(&str, &str)],
) -> Result<ElasticForecastConfig, String> {
    ElasticForecastConfig::parse(&test_context("elastic-forecast", 0, metadata, &[], auth))
        .map_err(|e| e.to_string())
}

const ADMIN: &[(&str, &str)] = &[("username", "admin"), ("password", "secret")];

/// KEDA's `elasticForecastTestCases` (`elastic_forecast_scaler_test.go`), errors in its words.
#[test]
fn keda_s_metadata_cases_fail_with_its_messages() {
    type Pairs<'a> = &'a [(&'a str, &'a str)];
    let job = ("jobID", "my-job");
    let target = ("targetValue", "10");
    let address = ("addresses", "http://localhost:9200");
    let rows: &[(Pairs<'_>, Pairs<'_>, &str)] = &[
        (
            &[job, target],
            ADMIN,
            "username and password provided but no addresses specified",
        ),
        (
            &[job, target],
            &[],
            "must provide either cloud config (cloudID + apiKey) or endpoint addresses",
        ),
        (
            &[job, target],
            &[("cloudID", "my-cluster:xxxxxxxxxxx")],
            "cloudID and apiKey must both be provided together",
        ),
        (
            &[address, job, target],
            &[
                ("cloudID", "my-cluster:xxxxxxxxxxx"),
                ("apiKey", "xxxxxxxxx"),
            ],
            "cannot provide both cloud config (cloudID/apiKey) and endpoint addresses",
        ),
        (
            &[address, job, target],
            &[("username", "admin")],
            "username and password must both be provided when addresses is used",
        ),
        (
            &[address, job, target],
            &[("password", "secret")],
            "username and password must both be provided when addresses is used",
        ),
        (
            &[address, ("jobID", ""), target],
            ADMIN,
            "missing required parameter \"jobID\"",
        ),
        (
            &[address, job, ("targetValue", "not-a-number")],
            ADMIN,
            "\"targetValue\"",
        ),
        (
            &[
                address,
                job,
                target,
                ("activationTargetValue", "not-a-number"),
            ],
            ADMIN,
            "\"activationTargetValue\"",
        ),
        (
            &[address, job, ("targetValue", "0")],
            ADMIN,
            "targetValue must be greater than 0",
        ),
        (
            &[address, job, target, ("lookAhead", "0")],
            ADMIN,
            "lookAhead must be positive",
        ),
        (
            &[address, job, target, ("lookAhead", "-5m")],
            ADMIN,
            "\"lookAhead\"",
        ),
        (
            &[("addresses", "localhost:9200"), job, target],
            ADMIN,
            "\"addresses\"",
        ),
    ];
    for (i, (metadata, auth, expected)) in rows.iter().enumerate() {
        let err = parse(metadata, auth)
            .map(|c| c.metric_name)
            .expect_err("refused");
        assert!(err.contains(expected), "row {i}: {err}");
        assert!(
            !err.contains("secret") || expected.contains("secret"),
            "{err}"
        );
    }
}

#[test]
fn keda_s_defaults_and_the_metric_name() {
    let config = parse(
        &[
            ("addresses", "http://localhost:9200"),
            ("jobID", "my-job"),
            ("targetValue", "100"),
        ],
        ADMIN,
    )
    .expect("parses");
    assert_eq!(config.metric_name, "s0-elastic-forecast-my-job");
    assert_eq!(config.look_ahead, Duration::from_secs(600));
    assert_eq!(config.forecast_duration(), Duration::from_secs(1200));
    assert_eq!(config.index, "*");
    assert_eq!((config.target, config.activation), (100.0, 0.0));
    assert_eq!(config.server.1.origin, "http://localhost:9200");
    let (user, _) = config.server.1.auth.basic.clone().expect("basic");
    assert_eq!(user, "admin");

    // A Go duration or whole milliseconds, as KEDA reads a time.Duration.
    for (text, expected) in [("5m", 300_000), ("90s", 90_000), ("1500", 1_500)] {
        let config = parse(
            &[
                ("addresses", "http://es:9200"),
                ("jobID", "j"),
                ("targetValue", "1"),
                ("lookAhead", text),
            ],
            ADMIN,
        )
        .expect("parses");
        assert_eq!(config.look_ahead, Duration::from_millis(expected), "{text}");
    }

    // Elastic Cloud: the Cloud ID's address with the API key.
    use base64::Engine as _;
    let id = format!(
        "my-cluster:{}",
        base64::engine::general_purpose::STANDARD
            .encode("eu-west-1.aws.found.io:443$es-uuid$kb-uuid")
    );
    let config = parse(
        &[("jobID", "j"), ("targetValue", "1")],
        &[("cloudID", &id), ("apiKey", "a2V5")],
    )
    .expect("parses");
    assert_eq!(
        config.server.0.as_str(),
        "https://es-uuid.eu-west-1.aws.found.io/"
    );
    let (header, value) = config.server.1.auth.custom.clone().expect("api key");
    assert_eq!(
        (header.as_str(), value.expose()),
        ("authorization", "ApiKey a2V5")
    );
}

#[test]
fn requests_follow_keda_s_forecast_and_search() {
    let config = parse(
        &[
            ("addresses", "https://es.example:9200/proxy/"),
            ("jobID", "cpu job"),
            ("targetValue", "80"),
            ("lookAhead", "90500ms"),
            ("index", "shared"),
            ("partitionFieldValue", "eu"),
            ("byFieldValue", "web"),
        ],
        ADMIN,
    )
    .expect("parses");
    let forecast = config.forecast_request();
    assert_eq!(
        forecast.url.as_str(),
        "https://es.example:9200/proxy/_ml/anomaly_detectors/cpu%20job/_forecast"
    );
    let body: serde_json::Value =
        serde_json::from_slice(forecast.body.as_deref().expect("body")).expect("json");
    // Twice lookAhead, whole seconds rounded up.
    assert_eq!(
        body,
        serde_json::json!({"duration": "181s", "expires_in": "181s"})
    );

    let now = jiff::Timestamp::from_millisecond(1_700_000_000_000).expect("time");
    let search = config.bucket_request("f-1", now);
    assert_eq!(
        search.url.as_str(),
        "https://es.example:9200/proxy/.ml-anomalies-shared/_search"
    );
    let body: serde_json::Value =
        serde_json::from_slice(search.body.as_deref().expect("body")).expect("json");
    assert_eq!(
        body,
        serde_json::json!({
            "size": 1,
            "query": {"bool": {"filter": [
                {"term": {"job_id": "cpu job"}},
                {"term": {"forecast_id": "f-1"}},
                {"term": {"result_type": "model_forecast"}},
                {"term": {"partition_field_value": "eu"}},
                {"term": {"by_field_value": "web"}},
                {"range": {"timestamp": {"lte": 1_700_000_090_500_i64}}},
            ]}},
            "sort": [{"timestamp": {"order": "desc"}}],
            "_source": ["forecast_prediction", "timestamp"],
        })
    );
    assert_eq!(
        HttpApi::operation(&config, &forecast),
        "elastic-forecast: creating a forecast of ML job cpu job on https://es.example:9200/proxy/_ml/anomaly_detectors/cpu%20job/_forecast"
    );
    // Renewal once less than lookAhead of the window (2 x lookAhead) remains.
    let created = now;
    let later = |ms: i64| {
        now.checked_add(jiff::SignedDuration::from_millis(ms))
            .expect("time")
    };
    assert!(!config.due(created, later(90_499)));
    assert!(config.due(created, later(90_500)));
    assert!(config.due(created, later(-1)), "a clock set back renews");
}

#[test]
fn answers_are_read_as_keda_reads_them() {
    use super::response::{forecast_id, prediction};
    assert_eq!(
        forecast_id(br#"{"acknowledged":true,"forecast_id":"7o4_IJEBzZjl4wmFl6nm"}"#),
        Ok("7o4_IJEBzZjl4wmFl6nm".into())
    );
    for bad in [
        &br#"{"acknowledged":true}"#[..],
        br#"{"forecast_id":""}"#,
        br#"{"forecast_id":7}"#,
    ] {
        assert_eq!(
            forecast_id(bad),
            Err("the forecast API's answer contained no forecast_id".into())
        );
    }
    let err = forecast_id(b"<html>SECRET</html>").expect_err("not json");
    assert!(!err.contains("SECRET"), "{err}");

    let hit = |source: &str| {
        format!(
            r#"{{"took":3,"timed_out":false,"hits":{{"total":{{"value":1,"relation":"eq"}},"max_score":null,"hits":[{{"_index":".ml-anomalies-shared","_id":"x","_score":null,"_source":{source},"sort":[1700000000000]}}]}}}}"#
        )
    };
    assert_eq!(
        prediction(hit(r#"{"forecast_prediction":42.5,"timestamp":1}"#).as_bytes()),
        Ok(Some(42.5))
    );
    assert_eq!(
        prediction(hit(r#"{"forecast_prediction":"17.25"}"#).as_bytes()),
        Ok(Some(17.25))
    );
    assert_eq!(
        prediction(hit(r#"{"forecast_prediction":"3.5 units"}"#).as_bytes()),
        Ok(Some(3.5))
    );
    assert_eq!(
        prediction(hit(r#"{"forecast_prediction":null}"#).as_bytes()),
        Ok(None)
    );
    assert_eq!(prediction(hit(r#"{"timestamp":1}"#).as_bytes()), Ok(None));
    assert_eq!(
        prediction(br#"{"hits":{"total":{"value":0,"relation":"eq"},"hits":[]}}"#),
        Ok(None)
    );
    for (source, naming) in [
        (r#"{"forecast_prediction":"SECRET"}"#, "not numeric"),
        (r#"{"forecast_prediction":true}"#, "a boolean"),
        (r#"{"forecast_prediction":[1]}"#, "an array"),
    ] {
        let err = prediction(hit(source).as_bytes()).expect_err(source);
        assert!(err.contains(naming) && !err.contains("SECRET"), "{err}");
    }
}
