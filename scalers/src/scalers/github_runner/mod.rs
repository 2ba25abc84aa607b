//! `github-runner`: scales self-hosted GitHub Actions runners on the number of queued and
//! running jobs whose labels a runner with `labels` can take, read from the GitHub REST API.
//! Compatible with KEDA's `github-runner` trigger (`pkg/scalers/github_runner_scaler.go`).
//!
//! A read is KEDA's: the repositories (`repos`, or every repository of the organization or
//! user, page by page), then each repository's workflow runs `queued` and `in_progress`, then
//! each live run's jobs; the value is the number of queued or running jobs whose labels match.
//! GitHub's rate limit is followed as KEDA does: while the limit is spent (`X-RateLimit-Remaining:
//! 0` until `X-RateLimit-Reset`, or a `Retry-After`), no request is sent and the last counted
//! value is reported. Authentication is a personal access token, or a GitHub App (a JWT signed
//! with the App's RSA key, exchanged for an installation token).
//!
//! Every trigger on the same API server with the same token and timeout shares one HTTP
//! client; the ETag cache, the rate limit and the App's installation token are the trigger's.

mod app;

use std::collections::HashMap;

use http::header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderName, HeaderValue, IF_NONE_MATCH};
use http::{Method, StatusCode};
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use tokio::sync::Mutex;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, Source};
use crate::http_client::{self, HttpAnswer, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{AUTH, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target};
use crate::pooled::{ApiRequest, HttpApi, HttpCall, Pooled};
use crate::remote::Classify;
use crate::scaler::{MetricValue, MetricsAndActivity};
use crate::secret::Secret;

pub use app::{AppCredentials, installation_token};

const METADATA_ENV: &[Source] = &[Source::Metadata, Source::Env];

const GITHUB_API_URL: Param = Param::optional("githubApiURL")
    .default(DEFAULT_API_URL)
    .order(METADATA_ENV);
const OWNER: Param = Param::required("owner").order(METADATA_ENV);
const RUNNER_SCOPE: Param = Param::required("runnerScope")
    .order(METADATA_ENV)
    .allowed(&["org", "ent", "repo"]);
const PERSONAL_ACCESS_TOKEN: Param = Param::optional("personalAccessToken").order(AUTH).secret();
const REPOS: Param = Param::optional("repos").order(METADATA_ENV);
const LABELS: Param = Param::optional("labels").order(METADATA_ENV);
const NO_DEFAULT_LABELS: Param = Param::optional("noDefaultLabels")
    .default("false")
    .order(METADATA_ENV);
const ENABLE_ETAGS: Param = Param::optional("enableEtags")
    .default("false")
    .order(METADATA_ENV);
const MATCH_UNLABELED: Param = Param::optional("matchUnlabeledJobsWithUnlabeledRunners")
    .default("false")
    .order(METADATA_ENV);
const TARGET_WORKFLOW_QUEUE_LENGTH: Param = Param::optional("targetWorkflowQueueLength")
    .default("1")
    .order(METADATA_ENV);
const APPLICATION_ID: Param = Param::optional("applicationID").order(METADATA_ENV);
const INSTALLATION_ID: Param = Param::optional("installationID").order(METADATA_ENV);
const APP_KEY: Param = Param::optional("appKey").order(AUTH).secret();

/// The parameters of `github-runner`.
pub const PARAMS: &[Param] = &[
    GITHUB_API_URL,
    OWNER,
    RUNNER_SCOPE,
    PERSONAL_ACCESS_TOKEN,
    REPOS,
    LABELS,
    NO_DEFAULT_LABELS,
    ENABLE_ETAGS,
    MATCH_UNLABELED,
    TARGET_WORKFLOW_QUEUE_LENGTH,
    APPLICATION_ID,
    INSTALLATION_ID,
    APP_KEY,
];

/// KEDA's default API server.
pub const DEFAULT_API_URL: &str = "https://api.github.com";
/// The labels every self-hosted runner has unless `noDefaultLabels` (KEDA's `reservedLabels`).
pub const RESERVED_LABELS: &[&str] = &["self-hosted", "linux", "x64"];
/// GitHub's default page size: a repository page with fewer ends the listing (as in KEDA).
pub const DEFAULT_PER_PAGE: usize = 30;
/// The most repository pages one read lists (30,000 repositories): KEDA has no bound.
pub const MAX_REPO_PAGES: usize = 1_000;
/// The most answers the ETag cache keeps (KEDA's `githubScalerMaxCacheEntries`).
pub const MAX_CACHE_ENTRIES: usize = 5_000;

/// Whose repositories are listed when `repos` is not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunnerScope {
    /// `org`: `/orgs/{owner}/repos`.
    Org,
    /// `ent`: `/orgs/{owner}/repos` too, as in KEDA.
    Ent,
    /// `repo`: `/users/{owner}/repos`.
    Repo,
}

/// How a job's labels are matched with the runner's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LabelMatch {
    /// `labels`.
    pub runner_labels: Vec<String>,
    /// `noDefaultLabels`.
    pub no_default_labels: bool,
    /// `matchUnlabeledJobsWithUnlabeledRunners`.
    pub match_unlabeled: bool,
}

impl LabelMatch {
    /// KEDA's `canRunnerMatchLabels`: every label of the job is one of the runner's (or of the
    /// reserved ones unless `noDefaultLabels`), case-insensitively; with
    /// `matchUnlabeledJobsWithUnlabeledRunners`, a job without labels only matches a runner
    /// without labels.
    pub fn matches(&self, job_labels: &[String]) -> bool {
        if self.match_unlabeled && job_labels.is_empty() {
            return self.runner_labels.is_empty();
        }
        let reserved: &[&str] = if self.no_default_labels {
            &[]
        } else {
            RESERVED_LABELS
        };
        job_labels.iter().all(|label| {
            self.runner_labels
                .iter()
                .map(String::as_str)
                .chain(reserved.iter().copied())
                .any(|runner| runner.eq_ignore_ascii_case(label))
        })
    }
}

/// How requests are authenticated.
#[derive(Debug)]
pub enum Credentials {
    /// `personalAccessToken`: `Authorization: Bearer <token>` (in the pooled client's key).
    Token,
    /// `applicationID`, `installationID` and `appKey`: an installation token per trigger.
    App(AppCredentials),
}

/// What a trigger keeps between reads.
#[derive(Debug, Default)]
struct ReadState {
    /// `enableEtags`: the last 200 answer of each URL and its `ETag`.
    etags: HashMap<String, (String, bytes::Bytes)>,
    /// The rate limit of the last answer that had one.
    rate_limit: RateLimit,
    /// The last value counted, for reads while the rate limit is spent.
    previous: Option<i64>,
    /// The App's installation token and when it expires.
    app_token: Option<(Secret, jiff::Timestamp)>,
}

/// GitHub's rate-limit headers of an answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateLimit {
    /// `X-RateLimit-Remaining`.
    pub remaining: i64,
    /// `X-RateLimit-Reset` (seconds since the epoch).
    pub reset: Option<jiff::Timestamp>,
    /// `Retry-After` seconds after the answer.
    pub retry_after: Option<jiff::Timestamp>,
}

impl RateLimit {
    /// The rate limit an answer's headers give, when it has `X-RateLimit-Remaining` (KEDA only
    /// looks at answers with it). Headers that are not numbers leave the previous limit.
    pub fn from_headers(headers: &HeaderMap, now: jiff::Timestamp) -> Option<Self> {
        let number = |name: &str| -> Option<Option<i64>> {
            match headers.get(name) {
                None => Some(None),
                Some(v) => v.to_str().ok()?.trim().parse().ok().map(Some),
            }
        };
        let remaining = number("x-ratelimit-remaining")??;
        let reset = number("x-ratelimit-reset")?;
        let retry_after = number("retry-after")?;
        Some(Self {
            remaining,
            reset: reset.and_then(|s| jiff::Timestamp::from_second(s).ok()),
            retry_after: retry_after.and_then(|s| {
                now.checked_add(jiff::SignedDuration::from_secs(s.max(0)))
                    .ok()
            }),
        })
    }

    /// Until when no request may be sent, if the limit is spent at `now`.
    pub fn limited_until(&self, now: jiff::Timestamp) -> Option<jiff::Timestamp> {
        if self.remaining == 0
            && let Some(reset) = self.reset
            && now < reset
        {
            return Some(reset);
        }
        self.retry_after.filter(|at| now < *at)
    }
}

/// The parsed trigger.
#[derive(Debug)]
pub struct GithubRunnerConfig {
    /// The API server (`githubApiURL`, its path kept) and the client key, or why it cannot be
    /// used.
    pub endpoint: Result<(url::Url, HttpClientKey), MetadataError>,
    /// `owner`.
    pub owner: String,
    /// `runnerScope`.
    pub scope: RunnerScope,
    /// `repos`, when given.
    pub repos: Option<Vec<String>>,
    /// Label matching.
    pub labels: LabelMatch,
    /// `enableEtags`.
    pub enable_etags: bool,
    /// `targetWorkflowQueueLength`: the target, and active iff the count reaches it.
    pub target: i64,
    /// Token or App.
    pub credentials: Credentials,
    /// `s<index>-github-runner-<owner>`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
    state: Mutex<ReadState>,
}

impl GithubRunnerConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// `owner` or `runnerScope` missing or `runnerScope` not `org`, `ent` or `repo`; neither
    /// `personalAccessToken` nor `appKey`; an App without all of `applicationID`,
    /// `installationID` and `appKey`, or an `appKey` that is no RSA private key; a malformed
    /// number or boolean.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let api_url: String = p.get(&GITHUB_API_URL)?;
            let owner: String = p.get(&OWNER)?;
            let scope = match p.get::<String>(&RUNNER_SCOPE)?.as_str() {
                "org" => RunnerScope::Org,
                "ent" => RunnerScope::Ent,
                _ => RunnerScope::Repo,
            };
            let token: Option<Secret> = p.get_opt(&PERSONAL_ACCESS_TOKEN)?;
            let repos: Option<Vec<String>> = p.get_opt(&REPOS)?;
            let labels = LabelMatch {
                runner_labels: p.get_opt(&LABELS)?.unwrap_or_default(),
                no_default_labels: p.get(&NO_DEFAULT_LABELS)?,
                match_unlabeled: p.get(&MATCH_UNLABELED)?,
            };
            let enable_etags: bool = p.get(&ENABLE_ETAGS)?;
            let target: i64 = p.get(&TARGET_WORKFLOW_QUEUE_LENGTH)?;
            let application_id: Option<i64> = p.get_opt(&APPLICATION_ID)?;
            let installation_id: Option<i64> = p.get_opt(&INSTALLATION_ID)?;
            let app_key: Option<Secret> = p.get_opt(&APP_KEY)?;
            // KEDA's `Validate`, in its order and words.
            if app_key.is_none() && token.is_none() {
                return Err(p.rule(format!(
                    "no \"{}\" or \"{}\" given",
                    PERSONAL_ACCESS_TOKEN.name, APP_KEY.name
                )));
            }
            let application_id = application_id.filter(|id| *id != 0);
            let installation_id = installation_id.filter(|id| *id != 0);
            let app = application_id.is_some() || installation_id.is_some() || app_key.is_some();
            let credentials = if app {
                let (Some(application_id), Some(installation_id), Some(key)) =
                    (application_id, installation_id, app_key)
                else {
                    let missing = if application_id.is_none() {
                        APPLICATION_ID.name
                    } else if installation_id.is_none() {
                        INSTALLATION_ID.name
                    } else {
                        APP_KEY.name
                    };
                    return Err(p.rule(format!("no \"{missing}\" given")));
                };
                let key = AppCredentials::new(application_id, installation_id, &key)
                    .map_err(|why| p.rule(format!("parameter \"{}\": {why}", APP_KEY.name)))?;
                Credentials::App(key)
            } else {
                Credentials::Token
            };
            // KEDA sends the token only without an App.
            let mut auth = HttpAuth::default();
            if let (Credentials::Token, Some(token)) = (&credentials, &token) {
                let value = format!("Bearer {}", token.expose());
                if HeaderValue::from_str(&value).is_err() {
                    return Err(p.rule(format!(
                        "parameter \"{}\" holds characters an HTTP header cannot carry",
                        PERSONAL_ACCESS_TOKEN.name
                    )));
                }
                auth.modes = vec![AuthMode::Custom];
                auth.custom = Some((AUTHORIZATION, Secret::new(value)));
            }
            let endpoint =
                parse_http_url(p, &GITHUB_API_URL, api_url.trim_end_matches('/')).map(|url| {
                    // github.com's API host is a vendor's fixed host: the process may move it
                    // (tests), a namespace cannot. Any other host is the user's server.
                    let url = ctx.vendor_endpoints.redirect(url);
                    let key = HttpClientKey {
                        origin: http_client::origin(&url),
                        auth,
                        timeout: ctx.global_http_timeout,
                    };
                    (url, key)
                });
            let mut headers = HeaderMap::new();
            headers.insert(
                ACCEPT,
                HeaderValue::from_static("application/vnd.github.v3+json"),
            );
            headers.insert(
                HeaderName::from_static("x-github-api-version"),
                HeaderValue::from_static("2022-11-28"),
            );
            Ok(Self {
                endpoint,
                metric_name: ctx.metric_name(&format!("github-runner-{owner}")),
                owner,
                scope,
                repos,
                labels,
                enable_etags,
                target,
                credentials,
                metric_type,
                headers,
                state: Mutex::new(ReadState::default()),
            })
        })?)
    }

    fn base(&self) -> Result<&url::Url, ScalerError> {
        self.endpoint
            .as_ref()
            .map(|(url, _)| url)
            .map_err(|e| ScalerError::Metadata(e.clone()))
    }

    /// `base` with `segments` appended (each percent-encoded) and `query`.
    fn url(base: &url::Url, segments: &[&str], query: &[(&str, &str)]) -> url::Url {
        let mut url = base.clone();
        url.set_query(None);
        url.set_fragment(None);
        if let Ok(mut path) = url.path_segments_mut() {
            path.pop_if_empty().extend(segments);
        }
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in query {
                pairs.append_pair(k, v);
            }
        }
        url
    }

    /// The repositories listing's URL for `page` (KEDA's `getRepositories`).
    pub fn repos_url(&self, base: &url::Url, page: usize) -> url::Url {
        let kind = match self.scope {
            RunnerScope::Org | RunnerScope::Ent => "orgs",
            RunnerScope::Repo => "users",
        };
        Self::url(
            base,
            &[kind, &self.owner, "repos"],
            &[("page", &page.to_string())],
        )
    }

    /// A repository's runs in `status` (KEDA's `getWorkflowRuns`).
    pub fn runs_url(&self, base: &url::Url, repo: &str, status: &str) -> url::Url {
        Self::url(
            base,
            &["repos", &self.owner, repo, "actions", "runs"],
            &[("status", status), ("per_page", "100")],
        )
    }

    /// A run's jobs (KEDA's `jobsAPIURL`).
    pub fn jobs_url(&self, base: &url::Url, repo: &str, run: i64) -> url::Url {
        Self::url(
            base,
            &[
                "repos",
                &self.owner,
                repo,
                "actions",
                "runs",
                &run.to_string(),
                "jobs",
            ],
            &[("per_page", "100")],
        )
    }

    fn operation(&self, url: &url::Url) -> String {
        format!("GitHub REST API {}", describe_url(url))
    }

    /// One GET: the token or App authentication, KEDA's headers, the ETag of the last answer.
    async fn get(
        &self,
        call: &HttpCall<'_>,
        state: &mut ReadState,
        url: url::Url,
    ) -> Result<bytes::Bytes, ScalerError> {
        let mut retried = false;
        loop {
            let mut headers = self.headers.clone();
            if let Credentials::App(_) = &self.credentials {
                let token = self.app_token(call, state).await?;
                let value =
                    HeaderValue::from_str(&format!("token {}", token.expose())).map_err(|_| {
                        call.read
                            .unexpected("the GitHub App installation token is not a header value")
                    })?;
                headers.insert(AUTHORIZATION, value);
            }
            let cached = self
                .enable_etags
                .then(|| state.etags.get(url.as_str()).cloned())
                .flatten();
            if let Some((etag, _)) = &cached
                && !retried
                && let Ok(value) = HeaderValue::from_str(etag)
            {
                headers.insert(IF_NONE_MATCH, value);
            }
            let answer = call
                .client
                .exchange(Method::GET, url.clone(), &headers, None)
                .await
                .map_err(|e| self.query_error(call, &url, e.classify()))?;
            let now = call.read.now();
            if let Some(limit) = RateLimit::from_headers(&answer.headers, now) {
                state.rate_limit = limit;
            }
            match answer.status {
                StatusCode::OK => {
                    if self.enable_etags
                        && let Some(etag) = answer.header("etag")
                    {
                        if state.etags.len() >= MAX_CACHE_ENTRIES {
                            state.etags.clear();
                        }
                        state
                            .etags
                            .insert(url.as_str().to_string(), (etag, answer.body.clone()));
                    }
                    return Ok(answer.body);
                }
                StatusCode::NOT_MODIFIED if self.enable_etags && !retried => {
                    if let Some((_, body)) = cached {
                        return Ok(body);
                    }
                    // A 304 without the answer it stands for: ask again without the ETag.
                    state.etags.remove(url.as_str());
                    retried = true;
                }
                status => return Err(self.status_error(call, state, &url, status, answer)),
            }
        }
    }

    fn status_error(
        &self,
        call: &HttpCall<'_>,
        state: &ReadState,
        url: &url::Url,
        status: StatusCode,
        answer: HttpAnswer,
    ) -> ScalerError {
        if status == StatusCode::NOT_FOUND {
            return ScalerError::Query {
                trigger: call.read.trigger.clone(),
                operation: self.operation(url),
                source: answer.into_status_error().classify(),
            };
        }
        if let Some(until) = state.rate_limit.limited_until(call.read.now()) {
            return call.read.unexpected(format!(
                "the GitHub API rate limit is exceeded until {until} (status {})",
                status.as_u16()
            ));
        }
        self.query_error(call, url, answer.into_status_error().classify())
    }

    fn query_error(
        &self,
        call: &HttpCall<'_>,
        url: &url::Url,
        source: crate::remote::Failure,
    ) -> ScalerError {
        ScalerError::Query {
            trigger: call.read.trigger.clone(),
            operation: self.operation(url),
            source,
        }
    }

    /// The App's installation token, exchanged again a minute before it expires (as
    /// `ghinstallation` does).
    async fn app_token(
        &self,
        call: &HttpCall<'_>,
        state: &mut ReadState,
    ) -> Result<Secret, ScalerError> {
        let Credentials::App(app) = &self.credentials else {
            return Err(call.read.unexpected("no GitHub App configured"));
        };
        let now = call.read.now();
        if let Some((token, expires)) = &state.app_token
            && now
                .checked_add(jiff::SignedDuration::from_secs(60))
                .is_ok_and(|t| t < *expires)
        {
            return Ok(token.clone());
        }
        let base = self.base()?;
        let url = Self::url(
            base,
            &[
                "app",
                "installations",
                &app.installation_id.to_string(),
                "access_tokens",
            ],
            &[],
        );
        let jwt = app
            .jwt(now)
            .map_err(|why| call.read.unexpected(format!("parameter \"appKey\": {why}")))?;
        let mut headers = HeaderMap::new();
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/vnd.github.v3+json"),
        );
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let bearer = HeaderValue::from_str(&format!("Bearer {jwt}")).map_err(|_| {
            call.read
                .unexpected("the GitHub App JWT is not a header value")
        })?;
        headers.insert(AUTHORIZATION, bearer);
        let operation = format!(
            "GitHub App installation token of installationID {} on {}",
            app.installation_id,
            describe_url(&url)
        );
        let answer = call
            .client
            .exchange(Method::POST, url, &headers, Some(bytes::Bytes::new()))
            .await
            .map_err(|e| e.classify())
            .and_then(|answer| {
                if answer.status.is_success() {
                    Ok(answer)
                } else {
                    Err(answer.into_status_error().classify())
                }
            })
            .map_err(|source| ScalerError::Query {
                trigger: call.read.trigger.clone(),
                operation,
                source,
            })?;
        let (token, expires) =
            app::installation_token(&answer.body).map_err(|m| call.read.unexpected(m))?;
        state.app_token = Some((token.clone(), expires));
        Ok(token)
    }

    /// KEDA's `GetWorkflowQueueLength`, without the rate-limit fallback.
    async fn count(&self, call: &HttpCall<'_>, state: &mut ReadState) -> Result<i64, ScalerError> {
        let base = self.base()?.clone();
        let repos = match &self.repos {
            Some(repos) => repos.clone(),
            None => {
                let mut names = Vec::new();
                for page in 1..=MAX_REPO_PAGES {
                    let url = self.repos_url(&base, page);
                    let body = self.get(call, state, url).await?;
                    let page_names = repo_names(&body).map_err(|m| call.read.unexpected(m))?;
                    let last = page_names.len() < DEFAULT_PER_PAGE;
                    names.extend(page_names);
                    if last {
                        break;
                    }
                }
                names
            }
        };
        let mut runs = Vec::new();
        for repo in &repos {
            for status in ["queued", "in_progress"] {
                let url = self.runs_url(&base, repo, status);
                match self.get(call, state, url).await {
                    Ok(body) => {
                        runs.extend(live_runs(&body).map_err(|m| call.read.unexpected(m))?);
                    }
                    // KEDA: a repository that answers 404 has no runs.
                    Err(ScalerError::Query { source, .. })
                        if matches!(
                            source.kind(),
                            crate::remote::Kind::Status { code: 404, .. }
                        ) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        let mut count = 0_i64;
        for (run, repo) in runs {
            let url = self.jobs_url(&base, &repo, run);
            let body = self.get(call, state, url).await?;
            let jobs = matching_jobs(&body, &self.labels).map_err(|m| call.read.unexpected(m))?;
            count = count.saturating_add(jobs);
        }
        Ok(count)
    }

    fn answer(&self, metric_name: &str, count: i64) -> MetricsAndActivity {
        #[allow(clippy::cast_precision_loss)]
        let value = count as f64;
        MetricsAndActivity {
            values: vec![MetricValue::new(metric_name, value)],
            // KEDA: active iff the queue reaches targetWorkflowQueueLength.
            active: count >= self.target,
        }
    }
}

/// The names of a repository listing page (`GET /orgs/{org}/repos`: a JSON array of
/// repositories).
///
/// # Errors
/// Not a JSON array of repositories. Messages never quote the answer.
pub fn repo_names(body: &[u8]) -> Result<Vec<String>, String> {
    #[derive(serde::Deserialize)]
    struct Repo {
        #[serde(default)]
        name: String,
    }
    let repos: Option<Vec<Repo>> = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the GitHub answer is not a list of repositories: {}",
            crate::remote::json_error(&e)
        )
    })?;
    Ok(repos
        .unwrap_or_default()
        .into_iter()
        .map(|r| r.name)
        .collect())
}

/// The queued or in-progress runs of a workflow runs answer (`{"total_count": N,
/// "workflow_runs": [...]}`): each run's id and its repository's name (KEDA's
/// `stripDeadRuns`).
///
/// # Errors
/// Not the documented shape.
pub fn live_runs(body: &[u8]) -> Result<Vec<(i64, String)>, String> {
    #[derive(serde::Deserialize)]
    struct Runs {
        #[serde(default)]
        workflow_runs: Option<Vec<Run>>,
    }
    #[derive(serde::Deserialize)]
    struct Run {
        #[serde(default)]
        id: i64,
        #[serde(default)]
        status: Option<String>,
        #[serde(default)]
        repository: Option<RepoName>,
    }
    #[derive(serde::Deserialize)]
    struct RepoName {
        #[serde(default)]
        name: String,
    }
    let runs: Runs = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the GitHub answer is not a list of workflow runs: {}",
            crate::remote::json_error(&e)
        )
    })?;
    Ok(runs
        .workflow_runs
        .unwrap_or_default()
        .into_iter()
        .filter(|r| matches!(r.status.as_deref(), Some("queued" | "in_progress")))
        .map(|r| (r.id, r.repository.map(|r| r.name).unwrap_or_default()))
        .collect())
}

/// The queued or in-progress jobs of a jobs answer (`{"total_count": N, "jobs": [...]}`) whose
/// labels `labels` matches.
///
/// # Errors
/// Not the documented shape.
pub fn matching_jobs(body: &[u8], labels: &LabelMatch) -> Result<i64, String> {
    #[derive(serde::Deserialize)]
    struct Jobs {
        #[serde(default)]
        jobs: Option<Vec<Job>>,
    }
    #[derive(serde::Deserialize)]
    struct Job {
        #[serde(default)]
        status: Option<String>,
        #[serde(default)]
        labels: Option<Vec<String>>,
    }
    let jobs: Jobs = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the GitHub answer is not a list of jobs: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let count = jobs
        .jobs
        .unwrap_or_default()
        .into_iter()
        .filter(|j| matches!(j.status.as_deref(), Some("queued" | "in_progress")))
        .filter(|j| labels.matches(j.labels.as_deref().unwrap_or_default()))
        .count();
    Ok(i64::try_from(count).unwrap_or(i64::MAX))
}

/// A `github-runner` scaler.
pub type GithubRunnerScaler = Pooled<GithubRunnerConfig>;

#[async_trait::async_trait]
impl HttpApi for GithubRunnerConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        GithubRunnerConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        self.endpoint
            .as_ref()
            .map(|(_, key)| key.clone())
            .map_err(Clone::clone)
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target(self.metric_type, self.target),
        )]
    }

    /// The first request of a read: the first repository page, or the first repository's
    /// queued runs (a read makes many: see `fetch`).
    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (base, _) = self.endpoint.as_ref().map_err(Clone::clone)?;
        let url = match self.repos.as_ref().and_then(|r| r.first()) {
            Some(repo) => self.runs_url(base, repo, "queued"),
            None => self.repos_url(base, 1),
        };
        Ok(ApiRequest::get(url, &self.headers))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        GithubRunnerConfig::operation(self, &request.url)
    }

    /// A jobs answer read alone: its matching jobs.
    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        Ok(self.answer(metric_name, matching_jobs(body, &self.labels)?))
    }

    /// KEDA's read: repositories, runs, jobs; while the rate limit is spent, the last count
    /// without a request (an error before any count).
    async fn fetch(
        &self,
        call: &HttpCall<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let mut state = self.state.lock().await;
        let limited = |state: &ReadState| {
            state
                .rate_limit
                .limited_until(call.read.now())
                .map(|until| match state.previous {
                    Some(count) => Ok(self.answer(metric_name, count)),
                    None => Err(call.read.unexpected(format!(
                        "the GitHub API rate limit is exceeded until {until} and no count was \
                         made before"
                    ))),
                })
        };
        if let Some(cached) = limited(&state) {
            return cached;
        }
        match self.count(call, &mut state).await {
            Ok(count) => {
                state.previous = Some(count);
                Ok(self.answer(metric_name, count))
            }
            Err(e) => limited(&state).unwrap_or(Err(e)),
        }
    }
}

#[cfg(test)]
mod tests;
