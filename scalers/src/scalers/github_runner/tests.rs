use super::*;
use crate::context::test_context;

fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<GithubRunnerConfig, String> {
    GithubRunnerConfig::parse(&test_context("github-runner", 0, metadata, &[], auth))
        .map_err(|e| e.to_string())
}

const META: &[(&str, &str)] = &[
    ("githubApiURL", "https://api.github.com"),
    ("runnerScope", "org"),
    ("owner", "ownername"),
    ("repos", "reponame,otherrepo"),
    ("labels", "golang"),
    ("targetWorkflowQueueLength", "1"),
];
const PAT: &[(&str, &str)] = &[("personalAccessToken", "ghp_t0ken")];

fn without(name: &str) -> Vec<(&'static str, &'static str)> {
    META.iter().copied().filter(|(k, _)| *k != name).collect()
}

fn with(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let mut m = META.to_vec();
    m.extend_from_slice(extra);
    m
}

/// KEDA's `testGitHubRunnerMetadata` (`pkg/scalers/github_runner_scaler_test.go`).
#[test]
fn keda_s_metadata_cases() {
    let config = parse(META, PAT).unwrap();
    assert_eq!(config.metric_name, "s0-github-runner-ownername");
    assert_eq!(config.scope, RunnerScope::Org);
    assert_eq!(
        config.repos.as_deref(),
        Some(&["reponame".to_string(), "otherrepo".to_string()][..])
    );
    assert_eq!(config.labels.runner_labels, ["golang"]);
    assert_eq!(config.target, 1);
    assert!(matches!(config.credentials, Credentials::Token));
    let key = config.endpoint.as_ref().unwrap().1.clone();
    assert_eq!(key.origin, "https://api.github.com:443");
    // Defaults: the API URL, the target, no repos or labels.
    let config = parse(&[("runnerScope", "repo"), ("owner", "ownername")], PAT).unwrap();
    assert_eq!(
        config.endpoint.as_ref().unwrap().0.as_str(),
        "https://api.github.com/"
    );
    assert_eq!((config.target, config.repos.is_none()), (1, true));
    assert!(config.labels.runner_labels.is_empty());

    for (name, metadata) in [
        ("runnerScope", without("runnerScope")),
        ("runnerScope", with(&[("runnerScope", "")])),
        ("owner", without("owner")),
    ] {
        let err = parse(&metadata, PAT).unwrap_err();
        assert!(err.contains(&format!("\"{name}\"")), "{err}");
    }
    let err = parse(&with(&[("runnerScope", "team")]), PAT).unwrap_err();
    assert!(err.contains("runnerScope"), "{err}");
    // Labels and repos may be absent or empty.
    parse(&without("labels"), PAT).unwrap();
    parse(&with(&[("repos", "")]), PAT).unwrap();
    // No credentials at all.
    let err = parse(META, &[]).unwrap_err();
    assert!(
        err.contains("\"personalAccessToken\" or \"appKey\""),
        "{err}"
    );
    // An App needs all three, in KEDA's order.
    for (extra, missing) in [
        (&[("applicationID", "1")][..], "installationID"),
        (&[("installationID", "1")][..], "applicationID"),
        (
            &[("applicationID", "1"), ("installationID", "1")][..],
            "appKey",
        ),
    ] {
        let err = parse(&with(extra), PAT).unwrap_err();
        assert!(err.contains(&format!("no \"{missing}\" given")), "{err}");
    }
    let err = parse(
        &with(&[("applicationID", "id"), ("installationID", "1")]),
        PAT,
    )
    .unwrap_err();
    assert!(err.contains("\"applicationID\""), "{err}");
    // An appKey that is no RSA key is refused naming it, never showing it.
    let err = parse(
        &with(&[("applicationID", "1"), ("installationID", "2")]),
        &[("appKey", "SECRETSECRET")],
    )
    .unwrap_err();
    assert!(
        err.contains("\"appKey\"") && !err.contains("SECRETSECRET"),
        "{err}"
    );
    let err = parse(&with(&[("targetWorkflowQueueLength", "many")]), PAT).unwrap_err();
    assert!(err.contains("\"targetWorkflowQueueLength\""), "{err}");
}

#[test]
fn the_urls_are_keda_s() {
    let config = parse(
        &with(&[("githubApiURL", "https://ghe.example.com/api/v3/")]),
        PAT,
    )
    .unwrap();
    let base = config.endpoint.as_ref().unwrap().0.clone();
    assert_eq!(
        config.repos_url(&base, 2).as_str(),
        "https://ghe.example.com/api/v3/orgs/ownername/repos?page=2"
    );
    assert_eq!(
        config.runs_url(&base, "my repo", "in_progress").as_str(),
        "https://ghe.example.com/api/v3/repos/ownername/my%20repo/actions/runs?status=in_progress&per_page=100"
    );
    assert_eq!(
        config.jobs_url(&base, "r", 30433642).as_str(),
        "https://ghe.example.com/api/v3/repos/ownername/r/actions/runs/30433642/jobs?per_page=100"
    );
    let user = parse(&with(&[("runnerScope", "repo")]), PAT).unwrap();
    assert!(
        user.repos_url(&base, 1)
            .path()
            .starts_with("/api/v3/users/ownername/")
    );
}

/// KEDA's `canRunnerMatchLabels` cases.
#[test]
fn labels_match_as_in_keda() {
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let m = LabelMatch {
        runner_labels: s(&["golang", "GPU"]),
        ..LabelMatch::default()
    };
    assert!(m.matches(&s(&["self-hosted", "linux", "x64", "golang"])));
    assert!(m.matches(&s(&["gpu"]))); // case-insensitive
    assert!(m.matches(&[])); // a job without labels runs anywhere
    assert!(!m.matches(&s(&["self-hosted", "windows"])));
    let bare = LabelMatch {
        no_default_labels: true,
        ..m.clone()
    };
    assert!(!bare.matches(&s(&["self-hosted", "golang"])));
    let unlabeled = LabelMatch {
        match_unlabeled: true,
        ..m.clone()
    };
    assert!(!unlabeled.matches(&[]));
    assert!(
        LabelMatch {
            match_unlabeled: true,
            ..LabelMatch::default()
        }
        .matches(&[])
    );
}

#[test]
fn the_answers_are_read_and_never_quoted() {
    let runs = br#"{"total_count":3,"workflow_runs":[
        {"id":1,"status":"queued","repository":{"name":"a"}},
        {"id":2,"status":"completed","repository":{"name":"a"}},
        {"id":3,"status":"in_progress","repository":{"name":"b"}}]}"#;
    assert_eq!(
        live_runs(runs).unwrap(),
        vec![(1, "a".to_string()), (3, "b".to_string())]
    );
    let jobs = br#"{"total_count":3,"jobs":[
        {"id":1,"status":"queued","labels":["self-hosted","golang"]},
        {"id":2,"status":"completed","labels":["golang"]},
        {"id":3,"status":"in_progress","labels":["windows"]}]}"#;
    let labels = LabelMatch {
        runner_labels: vec!["golang".into()],
        ..LabelMatch::default()
    };
    assert_eq!(matching_jobs(jobs, &labels), Ok(1));
    assert_eq!(
        repo_names(br#"[{"name":"x","id":1},{"name":"y"}]"#).unwrap(),
        ["x", "y"]
    );
    for garbage in ["", "SECRETSECRET", r#"[{"name":7}]"#] {
        for err in [
            live_runs(garbage.as_bytes()).map(drop).unwrap_err(),
            matching_jobs(garbage.as_bytes(), &labels)
                .map(drop)
                .unwrap_err(),
        ] {
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
    let err = matching_jobs(br#"{"jobs":"SECRETSECRET"}"#, &labels).unwrap_err();
    assert!(!err.contains("SECRETSECRET"), "{err}");
    let err = live_runs(br#"{"workflow_runs":[{"id":"SECRETSECRET"}]}"#).unwrap_err();
    assert!(!err.contains("SECRETSECRET"), "{err}");
    assert!(
        repo_names(b"SECRETSECRET")
            .unwrap_err()
            .find("SECRETSECRET")
            .is_none()
    );
}

#[test]
fn the_rate_limit_is_read_from_the_headers() {
    let now = jiff::Timestamp::from_second(1_700_000_000).unwrap();
    let mut h = HeaderMap::new();
    assert_eq!(RateLimit::from_headers(&h, now), None);
    h.insert("x-ratelimit-remaining", HeaderValue::from_static("0"));
    h.insert("x-ratelimit-reset", HeaderValue::from_static("1700000060"));
    let limit = RateLimit::from_headers(&h, now).unwrap();
    assert_eq!(
        limit.limited_until(now).map(|t| t.as_second()),
        Some(1_700_000_060)
    );
    assert_eq!(
        limit.limited_until(jiff::Timestamp::from_second(1_700_000_060).unwrap()),
        None
    );
    h.insert("x-ratelimit-remaining", HeaderValue::from_static("10"));
    h.insert("retry-after", HeaderValue::from_static("30"));
    let limit = RateLimit::from_headers(&h, now).unwrap();
    assert_eq!(
        limit.limited_until(now).map(|t| t.as_second()),
        Some(1_700_000_030)
    );
}

#[test]
fn an_installation_token_answer_is_read() {
    let (token, expires) = installation_token(
        br#"{"token":"ghs_16C7e42F292c6912E7710c838347Ae178B4a","expires_at":"2016-07-11T22:14:10Z","permissions":{"actions":"read"},"repository_selection":"all"}"#,
    )
    .unwrap();
    assert_eq!(token.expose(), "ghs_16C7e42F292c6912E7710c838347Ae178B4a");
    assert_eq!(expires.as_second(), 1_468_275_250);
    assert!(installation_token(br#"{"token":"","expires_at":"2016-07-11T22:14:10Z"}"#).is_err());
    let err = installation_token(br#"{"token":"x","expires_at":"SECRETSECRET"}"#).unwrap_err();
    assert!(!err.contains("SECRETSECRET"), "{err}");
}
