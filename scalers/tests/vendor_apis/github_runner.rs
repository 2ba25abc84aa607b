//! `github-runner` against a fake of the GitHub REST API, following
//! <https://docs.github.com/en/rest/repos/repos#list-organization-repositories> (`GET
//! /orgs/{org}/repos?page=N`, 30 per page by default, a JSON array),
//! <https://docs.github.com/en/rest/actions/workflow-runs#list-workflow-runs-for-a-repository>
//! (`GET /repos/{owner}/{repo}/actions/runs?status=...&per_page=100`, `{"total_count",
//! "workflow_runs"}`), <https://docs.github.com/en/rest/actions/workflow-jobs#list-jobs-for-a-workflow-run>
//! (`{"total_count", "jobs"}` with `status` and `labels`), authentication
//! (<https://docs.github.com/en/rest/authentication/authenticating-to-the-rest-api>: `401
//! {"message":"Bad credentials"}`), the rate limit
//! (<https://docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api>:
//! `X-RateLimit-Remaining`/`-Reset` on every answer, `403` with remaining 0, `429` with
//! `Retry-After`), conditional requests (`ETag`, `If-None-Match`, `304` without a body) and a
//! GitHub App's installation token
//! (<https://docs.github.com/en/rest/apps/apps#create-an-installation-access-token-for-an-app>:
//! `POST /app/installations/{id}/access_tokens` with an RS256 JWT, `201 {"token",
//! "expires_at"}`), whose signature the fake verifies with the App's public key.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::StatusCode;

use crate::common::{Harness, Setup, conformance};
use crate::with_headers::{Answer, Fake, Request};

const TOKEN: &str = "ghp_fakeT0ken";
const APP_TOKEN: &str = "ghs_inst4llation";

/// What the fake serves and has seen.
#[derive(Default)]
struct GitHub {
    /// Repository names of organization `my-org`.
    repos: Vec<String>,
    /// (repo, run id, status) of the runs.
    runs: Vec<(String, i64, &'static str)>,
    /// Jobs by run id: (status, labels).
    jobs: HashMap<i64, Vec<(&'static str, Vec<&'static str>)>>,
    /// The rate limit is spent: 403 with remaining 0 until an hour from now.
    exhausted: bool,
    /// Secondary limit: 429 with `Retry-After: 60`.
    secondary: bool,
    /// The App's public key (RSAPublicKey DER), when App authentication is tested.
    app_public_key: Option<Vec<u8>>,
    /// Requests seen: (method, path and query, If-None-Match).
    seen: Vec<(String, String, Option<String>)>,
    /// Answers 304 given.
    not_modified: usize,
}

type Shared = Arc<Mutex<GitHub>>;

fn json(status: StatusCode, body: String, headers: Vec<(&'static str, String)>) -> Answer {
    (status, headers, body)
}

fn now() -> i64 {
    jiff::Timestamp::now().as_second()
}

fn answer(gh: &Shared, method: &str, uri: &str, headers: &http::HeaderMap) -> Answer {
    let header = |n: &str| {
        headers
            .get(n)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let mut gh = gh.lock().expect("github");
    gh.seen
        .push((method.into(), uri.into(), header("if-none-match")));
    let url = url::Url::parse(&format!("http://x{uri}")).expect("uri");
    let query = |n: &str| {
        url.query_pairs()
            .find(|(k, _)| k == n)
            .map(|(_, v)| v.into_owned())
    };
    let bad_credentials = || {
        json(
            StatusCode::UNAUTHORIZED,
            r#"{"message":"Bad credentials SECRET-TEXT","documentation_url":"https://docs.github.com/rest"}"#.into(),
            vec![],
        )
    };
    // The App's token exchange.
    if method == "POST" {
        let Some(public) = gh.app_public_key.clone() else {
            return bad_credentials();
        };
        if url.path() != "/app/installations/7654321/access_tokens" {
            return json(
                StatusCode::NOT_FOUND,
                r#"{"message":"Not Found"}"#.into(),
                vec![],
            );
        }
        let Some(jwt) =
            header("authorization").and_then(|a| a.strip_prefix("Bearer ").map(str::to_string))
        else {
            return bad_credentials();
        };
        let parts: Vec<&str> = jwt.split('.').collect();
        let verified = parts.len() == 3
            && URL_SAFE_NO_PAD
                .decode(parts[2])
                .ok()
                .is_some_and(|signature| {
                    ring::signature::UnparsedPublicKey::new(
                        &ring::signature::RSA_PKCS1_2048_8192_SHA256,
                        &public,
                    )
                    .verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &signature)
                    .is_ok()
                });
        let claims: serde_json::Value = URL_SAFE_NO_PAD
            .decode(parts.get(1).copied().unwrap_or_default())
            .ok()
            .and_then(|c| serde_json::from_slice(&c).ok())
            .unwrap_or_default();
        let (iat, exp) = (
            claims["iat"].as_i64().unwrap_or(0),
            claims["exp"].as_i64().unwrap_or(0),
        );
        // GitHub: iss the App id, iat not in the future, exp at most 10 minutes on.
        if !verified
            || claims["iss"] != "123456"
            || iat > now() + 1
            || exp <= now()
            || exp - iat > 600
        {
            return bad_credentials();
        }
        let expires = jiff::Timestamp::from_second(now() + 3600).expect("a time");
        return json(
            StatusCode::CREATED,
            serde_json::json!({"token": APP_TOKEN, "expires_at": expires.to_string(),
                "permissions": {"actions": "read"}, "repository_selection": "all"})
            .to_string(),
            vec![],
        );
    }
    let expected = if gh.app_public_key.is_some() {
        format!("token {APP_TOKEN}")
    } else {
        format!("Bearer {TOKEN}")
    };
    if header("authorization").as_deref() != Some(expected.as_str()) {
        return bad_credentials();
    }
    if header("accept").as_deref() != Some("application/vnd.github.v3+json")
        || header("x-github-api-version").as_deref() != Some("2022-11-28")
    {
        return json(
            StatusCode::BAD_REQUEST,
            r#"{"message":"bad headers"}"#.into(),
            vec![],
        );
    }
    let reset = (now() + 3600).to_string();
    if gh.exhausted {
        return json(
            StatusCode::FORBIDDEN,
            r#"{"message":"API rate limit exceeded for user ID 1. SECRET-TEXT"}"#.into(),
            vec![
                ("x-ratelimit-limit", "5000".into()),
                ("x-ratelimit-remaining", "0".into()),
                ("x-ratelimit-reset", reset),
            ],
        );
    }
    if gh.secondary {
        return json(
            StatusCode::TOO_MANY_REQUESTS,
            r#"{"message":"You have exceeded a secondary rate limit."}"#.into(),
            vec![
                ("x-ratelimit-remaining", "4000".into()),
                ("x-ratelimit-reset", reset),
                ("retry-after", "60".into()),
            ],
        );
    }
    let limits = vec![
        ("x-ratelimit-limit", "5000".to_string()),
        ("x-ratelimit-remaining", "4999".to_string()),
        ("x-ratelimit-reset", reset),
    ];
    let segments: Vec<&str> = url.path().trim_start_matches('/').split('/').collect();
    let body = match segments.as_slice() {
        ["orgs", "my-org", "repos"] => {
            let page: usize = query("page").and_then(|p| p.parse().ok()).unwrap_or(1);
            let names: Vec<serde_json::Value> = gh
                .repos
                .iter()
                .skip((page - 1) * 30)
                .take(30)
                .map(|name| serde_json::json!({"id": 1, "name": name, "full_name": format!("my-org/{name}"), "private": false}))
                .collect();
            serde_json::Value::from(names).to_string()
        }
        ["repos", "my-org", "gone", "actions", "runs"] => {
            return json(
                StatusCode::NOT_FOUND,
                r#"{"message":"Not Found"}"#.into(),
                limits,
            );
        }
        ["repos", "my-org", repo, "actions", "runs"] => {
            let status = query("status").unwrap_or_default();
            assert_eq!(query("per_page").as_deref(), Some("100"));
            let runs: Vec<serde_json::Value> = gh
                .runs
                .iter()
                .filter(|(r, _, s)| r == repo && *s == status)
                .map(|(r, id, s)| serde_json::json!({"id": id, "name": "Build", "status": s, "conclusion": null, "repository": {"id": 1, "name": r, "full_name": format!("my-org/{r}")}}))
                .collect();
            serde_json::json!({"total_count": runs.len(), "workflow_runs": runs}).to_string()
        }
        ["repos", "my-org", _, "actions", "runs", id, "jobs"] => {
            let id: i64 = id.parse().unwrap_or_default();
            let jobs: Vec<serde_json::Value> = gh
                .jobs
                .get(&id)
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .map(|(status, labels)| serde_json::json!({"id": 1, "run_id": id, "status": status, "labels": labels, "name": "test"}))
                .collect();
            serde_json::json!({"total_count": jobs.len(), "jobs": jobs}).to_string()
        }
        _ => {
            return json(
                StatusCode::NOT_FOUND,
                r#"{"message":"Not Found"}"#.into(),
                limits,
            );
        }
    };
    let etag = format!(
        "\"{:x}\"",
        body.len() * 7919 + body.bytes().map(usize::from).sum::<usize>()
    );
    if header("if-none-match").as_deref() == Some(etag.as_str()) {
        gh.not_modified += 1;
        let mut headers = limits;
        headers.push(("etag", etag));
        return (StatusCode::NOT_MODIFIED, headers, String::new());
    }
    let mut headers = limits;
    headers.push(("etag", etag));
    json(StatusCode::OK, body, headers)
}

async fn start(gh: Shared) -> (SocketAddr, Fake) {
    let fake = Fake::start(move |r: &Request| answer(&gh, &r.method, &r.uri, &r.headers)).await;
    (fake.addr, fake)
}

async fn harness(addr: SocketAddr, metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Harness {
    let api = format!("http://{addr}");
    let mut all = vec![("githubApiURL", api.as_str())];
    all.extend_from_slice(metadata);
    conformance(
        "github-runner",
        Setup {
            metadata: &all,
            auth,
            ..Setup::default()
        },
    )
    .await
}

fn world() -> Shared {
    // 35 repositories: two pages (30 + 5); "gone" answers 404 for its runs.
    let mut repos: Vec<String> = (0..33).map(|i| format!("repo{i:02}")).collect();
    repos.extend(["api".to_string(), "gone".to_string()]);
    let jobs = HashMap::from([
        (
            11,
            vec![
                ("queued", vec!["self-hosted", "linux", "golang"]),
                ("queued", vec!["windows"]),
                ("completed", vec!["golang"]),
            ],
        ),
        (12, vec![("in_progress", vec!["GPU"])]),
        (13, vec![("queued", vec!["golang"])]),
    ]);
    let gh = GitHub {
        repos,
        runs: vec![
            ("api".into(), 11, "queued"),
            ("repo31".into(), 12, "in_progress"),
            ("repo02".into(), 13, "completed"),
        ],
        jobs,
        ..GitHub::default()
    };
    Arc::new(Mutex::new(gh))
}

#[tokio::test]
async fn jobs_are_counted_over_every_page_of_repositories_and_errors_show_the_status_only() {
    let gh = world();
    let (addr, _server) = start(gh.clone()).await;
    let h = harness(addr, &[("repos", "")], &[("personalAccessToken", TOKEN)]).await;
    assert_eq!(h.metric_name, "s0-github-runner-my-org");
    // Run 11: one golang job (self-hosted and linux are default labels), the windows one
    // does not match; run 12: a gpu job (labels match case-insensitively); run 13 is over.
    h.expect(2.0, true).await;
    {
        let gh = gh.lock().unwrap();
        let pages: Vec<&str> = gh
            .seen
            .iter()
            .filter(|(_, uri, _)| uri.starts_with("/orgs/"))
            .map(|(_, uri, _)| uri.as_str())
            .collect();
        assert_eq!(
            pages,
            ["/orgs/my-org/repos?page=1", "/orgs/my-org/repos?page=2"]
        );
        assert!(
            gh.seen
                .iter()
                .any(|(_, uri, _)| uri == "/repos/my-org/api/actions/runs/11/jobs?per_page=100")
        );
        assert!(
            !gh.seen
                .iter()
                .any(|(_, uri, _)| uri.contains("/runs/13/jobs"))
        );
    }
    gh.lock().unwrap().jobs.insert(12, vec![]);
    h.expect(1.0, true).await; // targetWorkflowQueueLength 1 reached
    gh.lock().unwrap().jobs.insert(11, vec![]);
    h.expect(0.0, false).await;
    h.close().await;

    let wrong = harness(addr, &[], &[("personalAccessToken", "ghp_wr0ng")]).await;
    let text = wrong.expect_error().await.to_string();
    assert!(
        text.contains("401") && text.contains("github-runner"),
        "{text}"
    );
    assert!(
        !text.contains("ghp_wr0ng") && !text.contains("SECRET-TEXT"),
        "{text}"
    );
    wrong.close().await;
}

#[tokio::test]
async fn a_spent_rate_limit_reports_the_last_count_without_asking() {
    let gh = world();
    let (addr, _server) = start(gh.clone()).await;
    let h = harness(addr, &[("repos", "api")], &[("personalAccessToken", TOKEN)]).await;
    h.expect(1.0, true).await;
    gh.lock().unwrap().exhausted = true;
    // The first 403 says the limit is spent: the last count stands.
    h.expect(1.0, true).await;
    let asked = gh.lock().unwrap().seen.len();
    h.expect(1.0, true).await;
    assert_eq!(
        gh.lock().unwrap().seen.len(),
        asked,
        "no request while the limit is spent"
    );
    h.close().await;

    // A trigger that never counted fails, saying so, without GitHub's text.
    let fresh = harness(addr, &[("repos", "api")], &[("personalAccessToken", TOKEN)]).await;
    let text = fresh.expect_error().await.to_string();
    assert!(text.contains("rate limit"), "{text}");
    assert!(!text.contains("SECRET-TEXT"), "{text}");
    fresh.close().await;

    // A secondary limit (429 with Retry-After) holds the same way.
    gh.lock().unwrap().exhausted = false;
    gh.lock().unwrap().secondary = true;
    let other = harness(addr, &[("repos", "api")], &[("personalAccessToken", TOKEN)]).await;
    let text = other.expect_error().await.to_string();
    assert!(text.contains("rate limit"), "{text}");
    let asked = gh.lock().unwrap().seen.len();
    let _ = other.expect_error().await;
    assert_eq!(
        gh.lock().unwrap().seen.len(),
        asked,
        "no request before Retry-After"
    );
    other.close().await;
}

#[tokio::test]
async fn etags_make_unchanged_answers_304_and_reuse_the_last_answer() {
    let gh = world();
    let (addr, _server) = start(gh.clone()).await;
    let h = harness(
        addr,
        &[("repos", "api,gone"), ("enableEtags", "true")],
        &[("personalAccessToken", TOKEN)],
    )
    .await;
    h.expect(1.0, true).await;
    assert_eq!(gh.lock().unwrap().not_modified, 0);
    h.expect(1.0, true).await;
    // api's two run lists and run 11's jobs came back 304 ("gone" is a 404 each time).
    assert_eq!(gh.lock().unwrap().not_modified, 3);
    gh.lock()
        .unwrap()
        .jobs
        .get_mut(&11)
        .unwrap()
        .push(("queued", vec!["golang"]));
    h.expect(2.0, true).await;
    h.close().await;
}

/// An RSA key pair made by openssl at test time: the PKCS #1 PEM private key and the
/// RSAPublicKey DER.
fn rsa_key() -> Option<(String, Vec<u8>)> {
    let dir = std::env::temp_dir().join(format!("keda-rs-gh-app-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let key = dir.join("key.pem");
    let public = dir.join("public.der");
    let made = std::process::Command::new("openssl")
        .args(["genrsa", "-traditional", "-out"])
        .arg(&key)
        .arg("2048")
        .output()
        .ok()?
        .status
        .success()
        && std::process::Command::new("openssl")
            .args(["rsa", "-RSAPublicKey_out", "-outform", "DER", "-in"])
            .arg(&key)
            .arg("-out")
            .arg(&public)
            .output()
            .ok()?
            .status
            .success();
    let pair = made.then(|| {
        Some((
            std::fs::read_to_string(&key).ok()?,
            std::fs::read(&public).ok()?,
        ))
    });
    let _ = std::fs::remove_dir_all(&dir);
    pair.flatten()
}

#[tokio::test]
async fn a_github_app_exchanges_a_signed_jwt_for_an_installation_token() {
    let Some((private, public)) = rsa_key() else {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "openssl is needed"
        );
        eprintln!("skipped: no openssl to make an RSA key");
        return;
    };
    let gh = world();
    gh.lock().unwrap().app_public_key = Some(public);
    let (addr, _server) = start(gh.clone()).await;
    let metadata = [
        ("repos", "api"),
        ("applicationID", "123456"),
        ("installationID", "7654321"),
    ];
    let h = harness(addr, &metadata, &[("appKey", &private)]).await;
    h.expect(1.0, true).await;
    h.expect(1.0, true).await;
    let exchanges = gh
        .lock()
        .unwrap()
        .seen
        .iter()
        .filter(|(method, _, _)| method == "POST")
        .count();
    assert_eq!(
        exchanges, 1,
        "the installation token is reused until it nearly expires"
    );
    h.close().await;

    // Another App's key: the exchange is refused, the poll fails with the status only.
    let (other, _) = rsa_key().expect("openssl worked once");
    let wrong = harness(addr, &metadata, &[("appKey", &other)]).await;
    let text = wrong.expect_error().await.to_string();
    assert!(
        text.contains("installation token") && text.contains("401"),
        "{text}"
    );
    assert!(
        !text.contains("SECRET-TEXT") && !text.contains("PRIVATE KEY"),
        "{text}"
    );
    wrong.close().await;
}
