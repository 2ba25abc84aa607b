use super::*;
use crate::context::test_context;

fn parse_with(
    metadata: &[(&str, &str)],
    env: &[(&str, &str)],
    auth: &[(&str, &str)],
) -> Result<ClickHouseConfig, String> {
    ClickHouseConfig::parse(&test_context("clickhouse", 0, metadata, env, auth))
        .map_err(|e| e.to_string())
}

fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<ClickHouseConfig, String> {
    parse_with(metadata, &[], auth)
}

const QUERY: (&str, &str) = ("query", "SELECT COUNT(*) FROM table");
const TARGET: (&str, &str) = ("targetQueryValue", "5");

fn endpoint(config: &ClickHouseConfig) -> (String, HttpClientKey) {
    let (url, key) = config.endpoint.as_ref().expect("usable endpoint");
    (url.to_string(), key.clone())
}

fn user(key: &HttpClientKey) -> (String, String) {
    let (user, password) = key.auth.basic.clone().expect("basic auth");
    (user, password.expose().to_string())
}

/// KEDA's `testClickHouseMetadata` cases (`clickhouse_scaler_test.go`), in its order.
#[test]
fn keda_s_metadata_cases_parse_or_fail_as_in_keda() {
    let env = [
        ("CLICKHOUSE_PASSWORD", "test_password"),
        (
            "CLICKHOUSE_CONN_STR",
            "clickhouse://user:pass@localhost:9000/default",
        ),
    ];
    let dsn = (
        "connectionString",
        "clickhouse://user:pass@localhost:9000/default",
    );
    type Pairs<'a> = &'a [(&'a str, &'a str)];
    // (metadata, auth, env, error naming)
    let rows: &[(Pairs<'_>, Pairs<'_>, Pairs<'_>, Option<&str>)] = &[
        (&[], &[], &[], Some("\"query\"")),
        (&[TARGET], &[], &[], Some("\"query\"")),
        (&[QUERY], &[], &[], Some("\"targetQueryValue\"")),
        (
            &[QUERY, TARGET],
            &[],
            &[],
            Some("either connectionString or host must be set"),
        ),
        (&[QUERY, TARGET], &[dsn], &[], None),
        (
            &[
                QUERY,
                TARGET,
                ("host", "test_host"),
                ("port", "9000"),
                ("username", "test_user"),
                ("password", "test_pass"),
                ("database", "test_db"),
            ],
            &[],
            &[],
            None,
        ),
        (&[QUERY, TARGET, ("host", "test_host")], &[], &[], None),
        (
            &[
                QUERY,
                TARGET,
                ("host", "test_host"),
                ("password", "CLICKHOUSE_PASSWORD"),
            ],
            &[],
            &env,
            None,
        ),
        (
            &[QUERY, TARGET],
            &[
                ("host", "test_host"),
                ("port", "9000"),
                ("username", "test_user"),
                ("password", "test_pass"),
                ("database", "test_db"),
            ],
            &[],
            None,
        ),
        (
            &[QUERY, ("targetQueryValue", "0")],
            &[dsn],
            &[],
            Some("\"targetQueryValue\""),
        ),
        (
            &[QUERY, TARGET, ("activationTargetQueryValue", "3")],
            &[dsn],
            &[],
            None,
        ),
        (
            &[QUERY, TARGET],
            &[
                dsn,
                ("tls", "true"),
                ("cert", "test-cert"),
                ("key", "test-key"),
            ],
            &[],
            None,
        ),
        (
            &[QUERY, TARGET],
            &[dsn, ("tls", "true"), ("cert", "test-cert")],
            &[],
            Some("both cert and key must be provided when TLS is enabled"),
        ),
        (
            &[QUERY, TARGET],
            &[dsn, ("tls", "true"), ("key", "test-key")],
            &[],
            Some("both cert and key must be provided when TLS is enabled"),
        ),
        (&[QUERY, TARGET], &[dsn, ("tls", "true")], &[], None),
    ];
    for (i, (metadata, auth, env, error)) in rows.iter().enumerate() {
        match (parse_with(metadata, env, auth), error) {
            (Ok(_), None) => {}
            (Err(e), Some(expected)) => assert!(e.contains(expected), "row {i}: {e}"),
            (other, _) => panic!("row {i}: {:?}", other.map(|c| c.metric_name)),
        }
    }
    // targetQueryValue 0 is fine for a trigger that feeds scalingModifiers.
    let mut ctx = test_context(
        "clickhouse",
        0,
        &[QUERY, ("targetQueryValue", "0")],
        &[],
        &[dsn],
    );
    ctx.as_metric_source = true;
    assert!(ClickHouseConfig::parse(&ctx).is_ok());
}

#[test]
fn the_metric_name_is_keda_s() {
    for (index, name) in [(0, "s0-clickhouse"), (2, "s2-clickhouse")] {
        let ctx = test_context(
            "clickhouse",
            index,
            &[QUERY, TARGET, ("host", "h")],
            &[],
            &[],
        );
        let config = ClickHouseConfig::parse(&ctx).expect("parses");
        assert_eq!(config.metric_name, name);
        let spec = &HttpApi::metric_specs(&config)[0];
        let target = &spec.external.as_ref().expect("external").target;
        assert_eq!(
            target.average_value.as_ref().map(|q| q.0.as_str()),
            Some("5")
        );
    }
}

#[test]
fn host_parameters_map_onto_the_http_interface_with_keda_s_defaults() {
    let config = parse(&[QUERY, TARGET, ("host", "ch.example")], &[]).expect("parses");
    let (url, key) = endpoint(&config);
    // Native 9000 (KEDA's default port) is HTTP on 8123; database and user are KEDA's defaults.
    assert_eq!(
        url,
        "http://ch.example:8123/?database=default&default_format=JSONCompact"
    );
    assert_eq!(key.origin, "http://ch.example:8123");
    assert_eq!(user(&key), ("default".into(), String::new()));

    let config = parse(
        &[
            QUERY,
            TARGET,
            ("host", "ch"),
            ("port", "9440"),
            ("database", "jobs db"),
        ],
        &[
            ("username", "keda"),
            ("password", "s3cret"),
            ("tls", "true"),
        ],
    )
    .expect("parses");
    let (url, key) = endpoint(&config);
    assert_eq!(
        url,
        "https://ch:8443/?database=jobs+db&default_format=JSONCompact"
    );
    assert_eq!(user(&key), ("keda".into(), "s3cret".into()));

    // An unusual native port needs httpPort; the trigger builds and every read names both.
    let config = parse(&[QUERY, TARGET, ("host", "ch"), ("port", "19000")], &[]).expect("parses");
    let err = config.endpoint.expect_err("no HTTP port").to_string();
    assert!(
        err.contains("\"port\"") && err.contains("\"httpPort\""),
        "{err}"
    );
    let config = parse(
        &[
            QUERY,
            TARGET,
            ("host", "ch"),
            ("port", "19000"),
            ("httpPort", "18123"),
        ],
        &[],
    )
    .expect("parses");
    assert_eq!(
        endpoint(&config).0,
        "http://ch:18123/?database=default&default_format=JSONCompact"
    );
    // IPv6 hosts are bracketed.
    let config = parse(&[QUERY, TARGET, ("host", "::1")], &[]).expect("parses");
    assert!(endpoint(&config).0.starts_with("http://[::1]:8123/"));
    let config = parse(&[QUERY, TARGET, ("host", "http://ch")], &[]).expect("parses");
    let err = config.endpoint.expect_err("a URL is no host").to_string();
    assert!(err.contains("\"host\""), "{err}");
}

#[test]
fn connection_strings_are_read_as_clickhouse_go_reads_them() {
    let from = |dsn: &str, auth: &[(&str, &str)]| {
        let mut all = vec![("connectionString", dsn)];
        all.extend_from_slice(auth);
        parse(&[QUERY, TARGET], &all).expect("parses")
    };
    let config = from(
        "clickhouse://us%40er:p%3Ass@ch-1:9000,ch-2:9000/analytics",
        &[],
    );
    let (url, key) = endpoint(&config);
    assert_eq!(
        url,
        "http://ch-1:8123/?database=analytics&default_format=JSONCompact"
    );
    assert_eq!(user(&key), ("us@er".into(), "p:ss".into()));
    assert!(!key.auth.tls.insecure);

    // secure and skip_verify; a setting passes through (booleans as 1/0); driver options and
    // the parameters keda-rs sets itself do not; username/password/database options win.
    let config = from(
        "clickhouse://ch:9440?secure=true&skip_verify=true&max_execution_time=60&use_uncompressed_cache=false&dial_timeout=5s&default_format=TSV&username=u&password=p&database=d",
        &[],
    );
    let (url, key) = endpoint(&config);
    assert_eq!(
        url,
        "https://ch:8443/?database=d&max_execution_time=60&use_uncompressed_cache=0&default_format=JSONCompact"
    );
    assert_eq!(user(&key), ("u".into(), "p".into()));
    assert!(key.auth.tls.insecure);

    // No port: the native default of the transport. The tls parameter turns TLS on as
    // KEDA's secure=true; unsafeSsl as skip_verify.
    let config = from("clickhouse://ch", &[("tls", "true"), ("unsafeSsl", "true")]);
    let (url, key) = endpoint(&config);
    assert_eq!(url, "https://ch:8443/?default_format=JSONCompact");
    assert!(key.auth.tls.insecure);
    assert_eq!(user(&key).0, "default");

    // http(s) DSNs name the HTTP interface itself; http_path is its path.
    let config = from("https://ch.example:8443/db?http_path=proxy/clickhouse", &[]);
    assert_eq!(
        endpoint(&config).0,
        "https://ch.example:8443/proxy/clickhouse?database=db&default_format=JSONCompact"
    );
    let config = from("http://ch.example/db", &[]);
    assert_eq!(
        endpoint(&config).0,
        "http://ch.example/?database=db&default_format=JSONCompact"
    );

    // From the environment (connectionStringFromEnv) too.
    let config = parse_with(
        &[
            QUERY,
            TARGET,
            ("connectionStringFromEnv", "CLICKHOUSE_CONN_STR"),
        ],
        &[(
            "CLICKHOUSE_CONN_STR",
            "clickhouse://user:pass@localhost:9000/default",
        )],
        &[],
    )
    .expect("parses");
    assert_eq!(user(&endpoint(&config).1), ("user".into(), "pass".into()));

    for (dsn, naming) in [
        ("user:SECRET-PW@ch:9000", "is not a DSN"),
        ("clickhouse://user:SECRET-PW@/db", "has no host"),
        (
            "clickhouse://user:SECRET-PW@ch:port/db",
            "the port is not a number",
        ),
        ("clickhouse://user:SECRET-PW@ch:7000/db", "\"httpPort\""),
        (
            "clickhouse://user:SECRET-PW@ch/db?secure=maybe",
            "option secure",
        ),
    ] {
        let config = parse(&[QUERY, TARGET], &[("connectionString", dsn)]);
        let err = match config {
            Ok(config) => config.endpoint.expect_err(dsn).to_string(),
            Err(e) => e,
        };
        assert!(err.contains("\"connectionString\""), "{dsn}: {err}");
        assert!(err.contains(naming), "{dsn}: {err}");
        assert!(!err.contains("SECRET-PW"), "{err}");
    }
}

#[test]
fn the_request_posts_the_query_to_the_http_interface() {
    let config = parse(&[QUERY, TARGET, ("host", "ch")], &[]).expect("parses");
    let request = HttpApi::request(&config, jiff::Timestamp::UNIX_EPOCH).expect("request");
    assert_eq!(
        request.body.as_deref(),
        Some(&b"SELECT COUNT(*) FROM table"[..])
    );
    assert_eq!(
        HttpApi::operation(&config, &request),
        "clickhouse query on http://ch:8123/"
    );
}

#[test]
fn answers_are_read_as_keda_scans_the_first_value() {
    use super::response::{error_code, first_value};
    let answer = |data: &str| {
        format!(
            r#"{{"meta":[{{"name":"c","type":"UInt64"}}],"data":{data},"rows":1,"statistics":{{"elapsed":0.0001,"rows_read":1,"bytes_read":1}}}}"#
        )
    };
    assert_eq!(first_value(answer(r#"[["42", 7]]"#).as_bytes()), Ok(42.0));
    assert_eq!(first_value(answer("[[2.5]]").as_bytes()), Ok(2.5));
    assert_eq!(first_value(answer("[[-3]],[[9]]").as_bytes()).ok(), None);
    assert_eq!(first_value(answer("[[-3],[9]]").as_bytes()), Ok(-3.0));
    // No row: 0, as KEDA treats sql.ErrNoRows.
    assert_eq!(first_value(answer("[]").as_bytes()), Ok(0.0));
    for (data, naming) in [
        ("[[null]]", "NULL"),
        ("[[true]]", "a boolean"),
        (
            r#"[["SECRET-TEXT"]]"#,
            "a string (11 bytes) that is not a number",
        ),
        (r#"[["inf"]]"#, "not a finite number"),
        ("[[]]", "no column"),
    ] {
        let err = first_value(answer(data).as_bytes()).expect_err(data);
        assert!(err.contains(naming), "{data}: {err}");
        assert!(!err.contains("SECRET"), "{err}");
    }
    let err = first_value(b"42\tSECRET-TEXT\n").expect_err("TSV");
    assert!(
        err.contains("JSONCompact") && !err.contains("SECRET"),
        "{err}"
    );

    assert_eq!(
        error_code(b"Code: 60. DB::Exception: Table default.x does not exist. (UNKNOWN_TABLE)"),
        Some(60)
    );
    assert_eq!(
        error_code(b"Code: 193, e.displayText() = DB::Exception: Wrong password for user keda"),
        Some(193)
    );
    assert_eq!(error_code(b"<html>SECRET</html>"), None);
    assert_eq!(error_code(b"Code: x"), None);
}
