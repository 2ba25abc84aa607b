use super::*;
use crate::context::test_context;

fn parse(
    metadata: &[(&str, &str)],
    env: &[(&str, &str)],
    auth: &[(&str, &str)],
) -> Result<SeleniumGridConfig, String> {
    SeleniumGridConfig::parse(&test_context("selenium-grid", 0, metadata, env, auth))
        .map_err(|e| e.to_string())
}

/// Every case of KEDA's `Test_getCountFromSeleniumResponse` (extracted from
/// `pkg/scalers/selenium_grid_scaler_test.go` at the pinned commit into `keda_cases.json`):
/// the same answer and parameters give the same new nodes plus running sessions.
#[test]
fn keda_s_count_cases() {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Case {
        name: String,
        body: Option<String>,
        #[serde(default)]
        browser_name: String,
        #[serde(default)]
        session_browser_name: String,
        #[serde(default)]
        browser_version: String,
        #[serde(default)]
        platform_name: String,
        #[serde(default)]
        capabilities: String,
        node_max_sessions: i64,
        enable_managed_downloads: bool,
        want_new_request_nodes: i64,
        want_on_going_sessions: i64,
        want_err: bool,
    }
    let cases: Vec<Case> =
        serde_json::from_str(include_str!("keda_cases.json")).expect("the cases");
    assert!(cases.len() > 40, "{}", cases.len());
    for case in cases {
        let mut capabilities: Map<String, Value> = if case.capabilities.is_empty() {
            Map::new()
        } else {
            serde_json::from_str(&case.capabilities).expect("capabilities")
        };
        if case.enable_managed_downloads {
            capabilities.insert(MANAGED_DOWNLOADS.into(), Value::Bool(true));
        }
        let matcher = Matcher {
            browser_name: case.browser_name,
            browser_version: case.browser_version,
            session_browser_name: case.session_browser_name,
            platform_name: case.platform_name,
            node_max_sessions: case.node_max_sessions,
            capabilities,
        };
        let got = session_count(case.body.unwrap_or_default().as_bytes(), &matcher);
        if case.want_err {
            assert!(got.is_err(), "{}", case.name);
        } else {
            assert_eq!(
                got,
                Ok(case.want_new_request_nodes + case.want_on_going_sessions),
                "{}",
                case.name
            );
        }
    }
}

#[test]
fn keda_s_metadata_cases() {
    let config = parse(
        &[
            ("url", "http://selenium-hub:4444/graphql"),
            ("browserName", "chrome"),
            ("browserVersion", "91.0"),
            ("platformName", "Linux"),
            ("unsafeSsl", "true"),
            ("activationThreshold", "10"),
        ],
        &[],
        &[("username", "user"), ("password", "pass")],
    )
    .unwrap();
    assert_eq!(config.metric_name, "s0-selenium-grid-chrome-91-0-Linux");
    assert_eq!(config.matcher.session_browser_name, "chrome");
    assert_eq!(config.matcher.node_max_sessions, 1);
    assert_eq!(config.activation, 10);
    assert!(is_true(&config.matcher.capabilities, MANAGED_DOWNLOADS));
    let (url, key) = config.endpoint.as_ref().unwrap();
    assert_eq!(url.as_str(), "http://selenium-hub:4444/graphql");
    assert!(key.auth.tls.insecure);
    assert_eq!(key.auth.modes, vec![AuthMode::Basic]);

    // url: the TriggerAuthentication before the metadata.
    let config = parse(
        &[("url", "http://meta:4444/graphql")],
        &[],
        &[("url", "http://auth:4444/graphql")],
    )
    .unwrap();
    assert_eq!(config.endpoint.unwrap().0.host_str(), Some("auth"));
    assert_eq!(config.metric_name, "s0-selenium-grid");

    // A token with a non-Basic authType: `Authorization: <authType> <token>`.
    let config = parse(
        &[("url", "http://h/graphql")],
        &[],
        &[("authType", "OAuth"), ("accessToken", "t0k")],
    )
    .unwrap();
    let (_, key) = config.endpoint.unwrap();
    assert_eq!(key.auth.modes, vec![AuthMode::Custom]);
    assert_eq!(
        key.auth
            .custom
            .as_ref()
            .map(|(_, v)| v.expose().to_string()),
        Some("OAuth t0k".into())
    );
    // Basic authType with only a token: nothing is sent, as in KEDA.
    let config = parse(
        &[("url", "http://h/graphql")],
        &[],
        &[("authType", "Basic"), ("accessToken", "t0k")],
    )
    .unwrap();
    assert!(config.endpoint.unwrap().1.auth.modes.is_empty());
    // Credentials from the environment (`<name>FromEnv`), never from metadata.
    let config = parse(
        &[
            ("url", "http://h/graphql"),
            ("usernameFromEnv", "U"),
            ("passwordFromEnv", "P"),
        ],
        &[("U", "user"), ("P", "pass")],
        &[],
    )
    .unwrap();
    assert_eq!(config.endpoint.unwrap().1.auth.modes, vec![AuthMode::Basic]);

    for (metadata, name) in [
        (&[("browserName", "chrome")][..], "\"url\""),
        (
            &[("url", "http://h/graphql"), ("activationThreshold", "AA")][..],
            "\"activationThreshold\"",
        ),
        (
            &[("url", "http://h/graphql"), ("capabilities", "{not json")][..],
            "\"capabilities\"",
        ),
        (
            &[("url", "http://h/graphql"), ("nodeMaxSessions", "x")][..],
            "\"nodeMaxSessions\"",
        ),
    ] {
        let err = parse(metadata, &[], &[]).unwrap_err();
        assert!(err.contains(name), "{err}");
    }
    let err = parse(
        &[("url", "http://h/graphql")],
        &[],
        &[("authType", "Bearer"), ("accessToken", "SECRET\nX")],
    )
    .unwrap_err();
    assert!(
        err.contains("\"accessToken\"") && !err.contains("SECRET"),
        "{err}"
    );
    let config = parse(&[("url", "selenium-hub:4444")], &[], &[]).unwrap();
    assert!(config.endpoint.unwrap_err().to_string().contains("\"url\""));
}

#[test]
fn platforms_follow_selenium() {
    assert!(same_platform("Linux", "linux"));
    assert!(same_platform("", "ANY"));
    assert!(same_platform("Windows 10", "win11")); // same family
    assert!(!same_platform("windows", "win10")); // the family itself has none
    assert!(!same_platform("linux", ""));
    assert!(same_platform("Plan 9", "plan 9"));
}

#[test]
fn errors_never_quote_the_answer() {
    let matcher = Matcher::default();
    for garbage in [
        "",
        "SECRETSECRET",
        r#"{"data":{"sessionsInfo":{"sessionQueueRequests":"SECRETSECRET"}}}"#,
        r#"{"data":{"nodesInfo":{"nodes":[{"maxSession":"SECRETSECRET"}]}}}"#,
    ] {
        let err = session_count(garbage.as_bytes(), &matcher).unwrap_err();
        assert!(!err.contains("SECRETSECRET"), "{err}");
    }
    assert_eq!(session_count(b"null", &matcher), Ok(0));
    assert_eq!(session_count(b"{}", &matcher), Ok(0));
}
