//! `selenium-grid`: scales browser nodes on the session requests a Selenium Grid queues and the
//! sessions it runs that match the trigger's browser, version and platform (one GraphQL `POST`
//! to `url`). Compatible with KEDA's `selenium-grid` trigger
//! (`pkg/scalers/selenium_grid_scaler.go`): the same matching of queued requests to free
//! slots of the nodes that are up, and to new nodes of `nodeMaxSessions` slots each.
//!
//! Every trigger on the same Grid with the same credentials, TLS settings and timeout shares
//! one HTTP client.

use std::borrow::Cow;

use http::HeaderValue;
use http::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap};
use k8s_openapi::api::autoscaling::v2::MetricSpec;
use serde_json::{Map, Value};

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url, parse_http_url};
use crate::metadata::{AUTH_ENV, AUTH_METADATA, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;
use crate::tls::TlsSettings;

const URL: Param = Param::required("url").order(AUTH_METADATA);
const AUTH_TYPE: Param = Param::optional("authType").order(AUTH_ENV);
const USERNAME: Param = Param::optional("username").order(AUTH_ENV);
const PASSWORD: Param = Param::optional("password").order(AUTH_ENV).secret();
const ACCESS_TOKEN: Param = Param::optional("accessToken").order(AUTH_ENV).secret();
const BROWSER_NAME: Param = Param::optional("browserName");
const SESSION_BROWSER_NAME: Param = Param::optional("sessionBrowserName");
const BROWSER_VERSION: Param = Param::optional("browserVersion");
const PLATFORM_NAME: Param = Param::optional("platformName");
const ACTIVATION_THRESHOLD: Param = Param::optional("activationThreshold").default("0");
const UNSAFE_SSL: Param = Param::optional("unsafeSsl").default("false");
const NODE_MAX_SESSIONS: Param = Param::optional("nodeMaxSessions").default("1");
const ENABLE_MANAGED_DOWNLOADS: Param = Param::optional("enableManagedDownloads").default("true");
const CAPABILITIES: Param = Param::optional("capabilities");

/// The parameters of `selenium-grid`.
pub const PARAMS: &[Param] = &[
    URL,
    AUTH_TYPE,
    USERNAME,
    PASSWORD,
    ACCESS_TOKEN,
    BROWSER_NAME,
    SESSION_BROWSER_NAME,
    BROWSER_VERSION,
    PLATFORM_NAME,
    ACTIVATION_THRESHOLD,
    UNSAFE_SSL,
    NODE_MAX_SESSIONS,
    ENABLE_MANAGED_DOWNLOADS,
    CAPABILITIES,
];

/// KEDA's fixed target: one session (queued or running) per replica.
pub const SESSIONS_PER_REPLICA: f64 = 1.0;

/// KEDA's GraphQL query, as it sends it.
pub const QUERY: &str = "{ grid { sessionCount, maxSession, totalSlots }, nodesInfo { nodes { id, status, sessionCount, maxSession, slotCount, stereotypes, sessions { id, capabilities, slot { id, stereotype } } } }, sessionsInfo { sessionQueueRequests } }";

const MANAGED_DOWNLOADS: &str = "se:downloadsEnabled";
const EXTENSION_PREFIXES: &[&str] = &["goog:", "moz:", "ms:", "se:"];

/// What a session request, slot or session must match.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Matcher {
    /// `browserName`.
    pub browser_name: String,
    /// `browserVersion`.
    pub browser_version: String,
    /// `sessionBrowserName` (`browserName` when absent).
    pub session_browser_name: String,
    /// `platformName`.
    pub platform_name: String,
    /// `nodeMaxSessions`: the slots of a new node.
    pub node_max_sessions: i64,
    /// `capabilities` (a JSON object), with `se:downloadsEnabled: true` added when
    /// `enableManagedDownloads` is true.
    pub capabilities: Map<String, Value>,
}

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct SeleniumGridConfig {
    /// The GraphQL URL and the client key, or why `url` cannot be used.
    pub endpoint: Result<(url::Url, HttpClientKey), MetadataError>,
    /// What is counted.
    pub matcher: Matcher,
    /// Active iff the count is above this.
    pub activation: i64,
    /// `s<index>-selenium-grid[-<browserName>][-<browserVersion>][-<platformName>]`, normalized.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    headers: HeaderMap,
}

impl SeleniumGridConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// `url` missing, a malformed number or boolean, `capabilities` not a JSON object (KEDA
    /// logs it and then fails every poll), or a token an HTTP header cannot carry.
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let url: String = p.get(&URL)?;
            let auth_type: String = p.get_opt(&AUTH_TYPE)?.unwrap_or_default();
            let username: String = p.get_opt(&USERNAME)?.unwrap_or_default();
            let password: Option<Secret> = p.get_opt(&PASSWORD)?;
            let access_token: Option<Secret> = p.get_opt(&ACCESS_TOKEN)?;
            let browser_name: String = p.get_opt(&BROWSER_NAME)?.unwrap_or_default();
            let session_browser_name: Option<String> = p.get_opt(&SESSION_BROWSER_NAME)?;
            let browser_version: String = p.get_opt(&BROWSER_VERSION)?.unwrap_or_default();
            let platform_name: String = p.get_opt(&PLATFORM_NAME)?.unwrap_or_default();
            let activation: i64 = p.get(&ACTIVATION_THRESHOLD)?;
            let unsafe_ssl: bool = p.get(&UNSAFE_SSL)?;
            let node_max_sessions: i64 = p.get(&NODE_MAX_SESSIONS)?;
            let managed_downloads: bool = p.get(&ENABLE_MANAGED_DOWNLOADS)?;
            let capabilities: Option<String> = p.get_opt(&CAPABILITIES)?;
            let mut capabilities = match capabilities {
                None => Map::new(),
                Some(text) => serde_json::from_str::<Map<String, Value>>(&text).map_err(|_| {
                    p.rule(format!(
                        "parameter \"{}\" is not a JSON object of capabilities",
                        CAPABILITIES.name
                    ))
                })?,
            };
            if managed_downloads {
                capabilities.insert(MANAGED_DOWNLOADS.into(), Value::Bool(true));
            }
            // KEDA's choice: Basic when authType is empty or Basic and both user and password
            // are given; else `Authorization: <authType> <accessToken>` when authType is not
            // Basic and a token is given; else nothing.
            let is_basic = auth_type.is_empty() || auth_type.eq_ignore_ascii_case("basic");
            let mut auth = HttpAuth {
                tls: TlsSettings {
                    insecure: unsafe_ssl,
                    ca: None,
                    client: None,
                },
                ..HttpAuth::default()
            };
            match (password, access_token) {
                (Some(password), _) if is_basic && !username.is_empty() => {
                    auth.modes = vec![AuthMode::Basic];
                    auth.basic = Some((username, password));
                }
                (_, Some(token)) if !auth_type.eq_ignore_ascii_case("basic") => {
                    let value = format!("{auth_type} {}", token.expose());
                    if HeaderValue::from_str(&value).is_err() {
                        return Err(p.rule(format!(
                            "parameters \"{}\" and \"{}\" hold characters an HTTP header cannot carry",
                            AUTH_TYPE.name, ACCESS_TOKEN.name
                        )));
                    }
                    auth.modes = vec![AuthMode::Custom];
                    auth.custom = Some((AUTHORIZATION, Secret::new(value)));
                }
                _ => {}
            }
            let endpoint = parse_http_url(p, &URL, &url).map(|server| {
                let key = HttpClientKey {
                    origin: http_client::origin(&server),
                    auth,
                    timeout: ctx.global_http_timeout,
                };
                (server, key)
            });
            let mut name = vec!["selenium-grid"];
            for part in [&browser_name, &browser_version, &platform_name] {
                if !part.is_empty() {
                    name.push(part.as_str());
                }
            }
            let metric_name = ctx.metric_name(&name.join("-"));
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            Ok(Self {
                endpoint,
                matcher: Matcher {
                    session_browser_name: session_browser_name
                        .unwrap_or_else(|| browser_name.clone()),
                    browser_name,
                    browser_version,
                    platform_name,
                    node_max_sessions,
                    capabilities,
                },
                activation,
                metric_name,
                metric_type,
                headers,
            })
        })?)
    }
}

/// The Grid's answer, as KEDA reads it (absent fields are empty).
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Answer {
    data: Data,
}

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Data {
    nodes_info: NodesInfo,
    sessions_info: SessionsInfo,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct NodesInfo {
    nodes: Option<Vec<Node>>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct SessionsInfo {
    session_queue_requests: Option<Vec<String>>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Node {
    id: String,
    status: String,
    session_count: i64,
    max_session: i64,
    stereotypes: String,
    sessions: Option<Vec<Session>>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Session {
    slot: Slot,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Slot {
    stereotype: String,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct Stereotype {
    slots: i64,
    stereotype: Map<String, Value>,
}

/// Selenium's platform (`org.openqa.selenium.Platform`): its name and its family's.
fn platform(input: &str) -> (Cow<'static, str>, Option<&'static str>) {
    const WINDOWS: Option<&str> = Some("windows");
    const MAC: Option<&str> = Some("mac");
    const UNIX: Option<&str> = Some("unix");
    let lower = input.to_lowercase();
    let (name, family) = match lower.as_str() {
        "windows" => ("windows", None),
        "windows server 2003" | "xp" | "winnt" | "windows_nt" | "windows nt" => {
            ("Windows XP", WINDOWS)
        }
        "windows server 2008" | "windows vista" => ("Windows Vista", WINDOWS),
        "windows 7" | "win7" => ("Windows 7", WINDOWS),
        "windows server 2012" | "windows 8" | "win8" => ("Windows 8", WINDOWS),
        "windows 8.1" | "win8.1" => ("Windows 8.1", WINDOWS),
        "windows 10" | "win10" => ("Windows 10", WINDOWS),
        "windows 11" | "win11" => ("Windows 11", WINDOWS),
        "mac" | "darwin" | "macos" | "mac os x" | "os x" => ("mac", None),
        "os x 10.6" | "macos 10.6" | "snow leopard" => ("OS X 10.6", MAC),
        "os x 10.8" | "macos 10.8" | "mountain lion" => ("OS X 10.8", MAC),
        "os x 10.9" | "macos 10.9" | "mavericks" => ("OS X 10.9", MAC),
        "os x 10.10" | "macos 10.10" | "yosemite" => ("OS X 10.10", MAC),
        "os x 10.11" | "macos 10.11" | "el capitan" => ("OS X 10.11", MAC),
        "os x 10.12" | "macos 10.12" | "sierra" => ("macOS 10.12", MAC),
        "os x 10.13" | "macos 10.13" | "high sierra" => ("macOS 10.13", MAC),
        "os x 10.14" | "macos 10.14" | "mojave" => ("macOS 10.14", MAC),
        "os x 10.15" | "macos 10.15" | "catalina" => ("macOS 10.15", MAC),
        "os x 11.0" | "macos 11.0" | "big sur" => ("macOS 11.0", MAC),
        "os x 12.0" | "macos 12.0" | "monterey" => ("macOS 12.0", MAC),
        "os x 13.0" | "macos 13.0" | "ventura" => ("macOS 13.0", MAC),
        "os x 14.0" | "macos 14.0" | "sonoma" => ("macOS 14.0", MAC),
        "os x 15.0" | "macos 15.0" | "sequoia" => ("macOS 15.0", MAC),
        "linux" => ("linux", UNIX),
        "bsd" => ("bsd", UNIX),
        "solaris" => ("solaris", UNIX),
        "android" | "dalvik" => ("android", None),
        "ios" => ("iOS", None),
        "any" | "" => ("any", None),
        _ => return (Cow::Owned(lower), None),
    };
    (Cow::Borrowed(name), family)
}

fn same_platform(a: &str, b: &str) -> bool {
    let (a, fa) = platform(a);
    let (b, fb) = platform(b);
    a.to_lowercase() == b.to_lowercase() || (fa.is_some() && fa == fb)
}

/// A string capability (anything else counts as absent).
fn capability<'a>(map: &'a Map<String, Value>, key: &str) -> &'a str {
    map.get(key).and_then(Value::as_str).unwrap_or("")
}

fn is_true(map: &Map<String, Value>, key: &str) -> bool {
    map.get(key).and_then(Value::as_bool) == Some(true)
}

/// KEDA's `managedDownloadsEnabled(first, second)`: when `second` asks for managed downloads,
/// `first` must offer them.
fn managed_downloads(first: &Map<String, Value>, second: &Map<String, Value>) -> bool {
    !is_true(second, MANAGED_DOWNLOADS) || is_true(first, MANAGED_DOWNLOADS)
}

/// JSON equality as Go compares decoded values (numbers as float64).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}

impl Matcher {
    /// Every capability of the trigger's other than extension ones (`goog:`, `moz:`, `ms:`,
    /// `se:`) is in `stereotype` with the same value.
    fn extensions_match(&self, stereotype: &Map<String, Value>) -> bool {
        self.capabilities
            .iter()
            .filter(|(key, _)| {
                key.as_str() != MANAGED_DOWNLOADS
                    && !EXTENSION_PREFIXES.iter().any(|p| key.starts_with(p))
            })
            .all(|(key, value)| stereotype.get(key).is_some_and(|v| json_eq(v, value)))
    }

    fn version_and_platform(&self, caps: &Map<String, Value>) -> bool {
        let version = capability(caps, "browserVersion");
        let version_match = (version.is_empty() && self.browser_version.is_empty())
            || (!version.is_empty() && self.browser_version.starts_with(version));
        version_match
            && same_platform(&self.platform_name, capability(caps, "platformName"))
            && managed_downloads(&self.capabilities, caps)
            && self.extensions_match(caps)
    }

    /// A queued session request this trigger serves.
    fn request_matches(&self, request: &Map<String, Value>) -> bool {
        let browser = capability(request, "browserName");
        let browser_match = (browser.is_empty() && self.browser_name.is_empty())
            || self.browser_name.to_lowercase() == browser.to_lowercase();
        browser_match && self.version_and_platform(request)
    }

    /// A node's slot stereotype (or a running session's) this trigger's nodes offer.
    fn stereotype_matches(&self, stereotype: &Map<String, Value>) -> bool {
        let browser = capability(stereotype, "browserName").to_lowercase();
        let browser_match = (browser.is_empty() && self.browser_name.is_empty())
            || self.browser_name.to_lowercase() == browser
            || self.session_browser_name.to_lowercase() == browser;
        browser_match && self.version_and_platform(stereotype)
    }

    fn matching_sessions(&self, sessions: Option<&Vec<Session>>) -> i64 {
        let count = sessions
            .into_iter()
            .flatten()
            .filter_map(|s| {
                crate::remote::from_json::<Map<String, Value>>(s.slot.stereotype.as_bytes()).ok()
            })
            .filter(|caps| self.stereotype_matches(caps))
            .count();
        i64::try_from(count).unwrap_or(i64::MAX)
    }
}

/// A node with slots reserved for queued requests in this count.
struct Reserved {
    id: String,
    slots: i64,
}

fn reserved_slots(reserved: &[Reserved], id: &str, free: i64) -> i64 {
    reserved
        .iter()
        .find(|r| r.id.to_lowercase() == id.to_lowercase())
        .map_or(free, |r| r.slots)
}

fn reserve(reserved: &mut Vec<Reserved>, id: &str, slots: i64) {
    match reserved
        .iter_mut()
        .find(|r| r.id.to_lowercase() == id.to_lowercase())
    {
        Some(r) => r.slots = slots,
        None => reserved.push(Reserved {
            id: id.to_string(),
            slots,
        }),
    }
}

/// KEDA's count of a Grid answer: the new nodes the matching queued requests need (after
/// filling the free matching slots of nodes that are up, and `nodeMaxSessions` slots per new
/// node), plus the matching sessions running. Entries that are not JSON objects are skipped,
/// as KEDA skips them.
///
/// # Errors
/// The body is not the GraphQL answer's shape. Messages never quote it.
pub fn session_count(body: &[u8], matcher: &Matcher) -> Result<i64, String> {
    let answer: Option<Answer> = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the Selenium Grid answer is not the GraphQL answer KEDA's query expects: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let answer = answer.unwrap_or_default();
    let nodes = answer.data.nodes_info.nodes.unwrap_or_default();
    let requests = answer
        .data
        .sessions_info
        .session_queue_requests
        .unwrap_or_default();
    let mut reserved: Vec<Reserved> = Vec::new();
    let mut new_nodes: Vec<Reserved> = Vec::new();
    for (index, request) in requests.iter().enumerate() {
        let matched = crate::remote::from_json::<Map<String, Value>>(request.as_bytes())
            .is_ok_and(|caps| matcher.request_matches(&caps));
        if !matched {
            continue;
        }
        let mut placed = false;
        for node in &nodes {
            let free = node.max_session.saturating_sub(node.session_count);
            if !node.status.eq_ignore_ascii_case("up")
                || reserved_slots(&reserved, &node.id, free) <= 0
            {
                continue;
            }
            let matching_slots: i64 =
                crate::remote::from_json::<Vec<Stereotype>>(node.stereotypes.as_bytes())
                    .map(|stereotypes| {
                        stereotypes
                            .iter()
                            .filter(|s| matcher.stereotype_matches(&s.stereotype))
                            .fold(0i64, |sum, s| sum.saturating_add(s.slots))
                    })
                    .unwrap_or(0);
            if matching_slots == 0 {
                continue;
            }
            let running = matcher.matching_sessions(node.sessions.as_ref());
            let left = reserved_slots(&reserved, &node.id, free);
            if matching_slots > running {
                reserve(&mut reserved, &node.id, left - 1);
                placed = true;
                break;
            }
        }
        if !placed && let Some(node) = new_nodes.iter_mut().find(|n| n.slots > 0) {
            node.slots -= 1;
            placed = true;
        }
        if !placed {
            new_nodes.push(Reserved {
                id: index.to_string(),
                slots: matcher.node_max_sessions.saturating_sub(1),
            });
        }
    }
    let running = nodes.iter().fold(0i64, |sum, node| {
        sum.saturating_add(matcher.matching_sessions(node.sessions.as_ref()))
    });
    Ok(i64::try_from(new_nodes.len())
        .unwrap_or(i64::MAX)
        .saturating_add(running))
}

/// A `selenium-grid` scaler.
pub type SeleniumGridScaler = Pooled<SeleniumGridConfig>;

impl HttpApi for SeleniumGridConfig {
    /// A self-hosted server: polled sooner after a sign of activity.
    const ADAPTIVE_POLLING: bool = true;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        SeleniumGridConfig::parse(ctx)
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
            metric_target_milli(self.metric_type, SESSIONS_PER_REPLICA),
        )]
    }

    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        let (url, _) = self.endpoint.as_ref().map_err(Clone::clone)?;
        let body = serde_json::json!({ "query": QUERY }).to_string();
        Ok(ApiRequest::post(
            url.clone(),
            Cow::Borrowed(&self.headers),
            body,
        ))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "Selenium Grid sessions query on url {}",
            describe_url(&request.url)
        )
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let count = session_count(body, &self.matcher)?;
        #[allow(clippy::cast_precision_loss)]
        let value = count as f64;
        #[allow(clippy::cast_precision_loss)]
        let activation = self.activation as f64;
        Ok(MetricsAndActivity::single(metric_name, value, activation))
    }
}

#[cfg(test)]
mod tests;
