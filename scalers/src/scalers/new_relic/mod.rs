//! `new-relic`: scales on the value of an NRQL query run through New Relic's NerdGraph API
//! (`POST https://api.newrelic.com/graphql`, or `api.eu.newrelic.com` for `region: EU`).
//! Compatible with KEDA's `new-relic` trigger (`pkg/scalers/newrelic_scaler.go`).
//!
//! The host is New Relic's own, chosen by `region`; the key goes in the `Api-Key` header
//! (the client KEDA uses sends a personal API key so). Every trigger with the same region,
//! key and timeout shares one HTTP client.

pub mod response;

use std::borrow::Cow;

use http::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use crate::authentication::{AuthMode, HttpAuth};
use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError};
use crate::http_client::{self, HttpClientKey, describe_url};
use crate::metadata::{AUTH_METADATA, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pooled::{ApiRequest, HttpApi, Pooled};
use crate::remote::{Failure, Kind};
use crate::scaler::MetricsAndActivity;
use crate::secret::Secret;

const ACCOUNT: Param = Param::required("account").order(AUTH_METADATA);
const REGION: Param = Param::optional("region").order(AUTH_METADATA).default("US");
const QUERY_KEY: Param = Param::required("queryKey").order(AUTH_METADATA).secret();
const NO_DATA_ERROR: Param = Param::optional("noDataError").default("false");
const NRQL: Param = Param::required("nrql");
const THRESHOLD: Param = Param::required("threshold");
const ACTIVATION_THRESHOLD: Param = Param::optional("activationThreshold").default("0");

/// The parameters of `new-relic`.
pub const PARAMS: &[Param] = &[
    ACCOUNT,
    REGION,
    QUERY_KEY,
    NO_DATA_ERROR,
    NRQL,
    THRESHOLD,
    ACTIVATION_THRESHOLD,
];

/// NerdGraph's endpoint of each region the trigger may name (compared case-insensitively, as
/// the New Relic client does). The client's `Local` region (a NerdGraph on the operator's own
/// `localhost`) is refused: a namespace must not reach the operator's loopback.
pub const REGIONS: &[(&str, &str)] = &[
    ("US", "https://api.newrelic.com/graphql"),
    ("EU", "https://api.eu.newrelic.com/graphql"),
    ("Staging", "https://staging-api.newrelic.com/graphql"),
];

/// The header of the key.
pub const API_KEY_HEADER: &str = "Api-Key";

/// The GraphQL query sent: NRQL `$query` on account `$accountId`, its result rows.
pub const GRAPHQL_QUERY: &str = "query($query: Nrql!, $accountId: Int!) { actor { account(id: $accountId) { nrql(query: $query) { results } } } }";

/// The parsed trigger.
#[derive(Clone, Debug)]
pub struct NewRelicConfig {
    /// NerdGraph's URL for `region`.
    pub url: url::Url,
    /// The pooled client's key: the endpoint, `Api-Key`, the timeout.
    pub client: HttpClientKey,
    /// `account`.
    pub account: i64,
    /// The NRQL query.
    pub nrql: String,
    /// `noDataError`.
    pub no_data_error: bool,
    /// The target (0 when the trigger feeds `scalingModifiers`).
    pub threshold: f64,
    /// Active iff the value is above this.
    pub activation_threshold: f64,
    /// `s<index>-new-relic`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// `Content-Type: application/json`.
    headers: HeaderMap,
}

impl NewRelicConfig {
    /// Parses the trigger.
    ///
    /// # Errors
    /// `account` (TriggerAuthentication or metadata) missing or not an integer, `queryKey`,
    /// `nrql` or `threshold` missing, a malformed number or boolean, or a `region` other than
    /// `US`, `EU` and `Staging` (KEDA's client refuses it when the scaler is made).
    pub fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let account: i64 = p.get(&ACCOUNT)?;
            let region: String = p.get(&REGION)?;
            let key: Secret = p.get(&QUERY_KEY)?;
            let nrql: String = p.get(&NRQL)?;
            let threshold: f64 = p.get(&THRESHOLD)?;
            let Some((_, endpoint)) = REGIONS
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(&region))
            else {
                return Err(p.rule(format!(
                    "parameter \"region\" must be US, EU or Staging, not {region:?}"
                )));
            };
            if HeaderValue::from_str(key.expose()).is_err() {
                return Err(
                    p.rule("parameter \"queryKey\" holds characters an HTTP header cannot carry")
                );
            }
            let url = url::Url::parse(endpoint)
                .map_err(|e| p.rule(format!("parameter \"region\": {e}")))?;
            let url = ctx.vendor_endpoints.redirect(url);
            let auth = HttpAuth {
                modes: vec![AuthMode::Custom],
                custom: Some((HeaderName::from_static("api-key"), key)),
                ..HttpAuth::default()
            };
            let mut headers = HeaderMap::new();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
            Ok(Self {
                client: HttpClientKey {
                    origin: http_client::origin(&url),
                    auth,
                    timeout: ctx.global_http_timeout,
                },
                url,
                account,
                nrql,
                no_data_error: p.get(&NO_DATA_ERROR)?,
                threshold: if ctx.as_metric_source { 0.0 } else { threshold },
                activation_threshold: p.get(&ACTIVATION_THRESHOLD)?,
                metric_name: ctx.metric_name("new-relic"),
                metric_type,
                headers,
            })
        })?)
    }

    /// The GraphQL request body: [`GRAPHQL_QUERY`] with the NRQL and the account as variables
    /// (never pasted into the query text).
    pub fn body(&self) -> String {
        serde_json::json!({
            "query": GRAPHQL_QUERY,
            "variables": { "accountId": self.account, "query": self.nrql },
        })
        .to_string()
    }
}

/// A `new-relic` scaler.
pub type NewRelicScaler = Pooled<NewRelicConfig>;

impl HttpApi for NewRelicConfig {
    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        NewRelicConfig::parse(ctx)
    }

    fn client_key(&self) -> Result<HttpClientKey, MetadataError> {
        Ok(self.client.clone())
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.threshold),
        )]
    }

    fn request(&self, _now: jiff::Timestamp) -> Result<ApiRequest<'_>, MetadataError> {
        Ok(ApiRequest::post(
            self.url.clone(),
            Cow::Borrowed(&self.headers),
            self.body(),
        ))
    }

    fn operation(&self, request: &ApiRequest<'_>) -> String {
        format!(
            "new-relic NRQL `{}` for account {} on {}",
            self.nrql,
            self.account,
            describe_url(&request.url)
        )
    }

    /// NerdGraph's refusals of the key (401, 403) and its rate limit (429), named.
    fn error_answer(&self, status: http::StatusCode, body: &[u8]) -> Option<Failure> {
        let code = match status.as_u16() {
            401 | 403 => format!(
                "unauthorized (HTTP {}): check queryKey and its access to the account",
                status.as_u16()
            ),
            429 => "rate limited (HTTP 429): the account reached NerdGraph's rate limit".into(),
            _ => return None,
        };
        Some(Failure::new(
            Kind::Server {
                system: "New Relic",
                code: Some(code),
            },
            Some(String::from_utf8_lossy(body).into_owned()),
        ))
    }

    fn read(&self, body: &[u8], metric_name: &str) -> Result<MetricsAndActivity, String> {
        let value = response::nrql_value(body, &self.nrql, self.no_data_error)?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.activation_threshold,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    /// (metadata, TriggerAuthentication parameters, what the error names if any).
    type Case<'a> = (
        Vec<(&'a str, &'a str)>,
        Vec<(&'a str, &'a str)>,
        Option<&'a str>,
    );

    const NRQL_TEXT: &str = "SELECT average(cpuUsedCores) as result FROM K8sContainerSample WHERE containerName='coredns'";

    fn parse(metadata: &[(&str, &str)], auth: &[(&str, &str)]) -> Result<NewRelicConfig, String> {
        NewRelicConfig::parse(&test_context("new-relic", 1, metadata, &[], auth))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn keda_s_metadata_cases() {
        let base = [
            ("account", "0"),
            ("threshold", "100"),
            ("queryKey", "somekey"),
            ("nrql", NRQL_TEXT),
        ];
        let with = |extra: &[(&'static str, &'static str)], drop: &str| -> Vec<(&str, &str)> {
            let mut m: Vec<(&str, &str)> =
                base.iter().copied().filter(|(k, _)| *k != drop).collect();
            m.retain(|(k, _)| !extra.iter().any(|(e, _)| e == k));
            m.extend_from_slice(extra);
            m
        };
        // (metadata, auth, error naming)
        let rows: Vec<Case<'_>> = vec![
            (vec![], vec![], Some("\"account\"")),
            (with(&[], ""), vec![], None),
            (
                with(&[("region", "EU"), ("activationThreshold", "20")], ""),
                vec![],
                None,
            ),
            (
                with(&[("region", "EU")], "account"),
                vec![("account", "0")],
                None,
            ),
            (with(&[], ""), vec![("region", "EU")], None),
            (with(&[("account", "ABC")], ""), vec![], Some("\"account\"")),
            (with(&[], "account"), vec![], Some("\"account\"")),
            (
                with(&[("threshold", "one")], ""),
                vec![],
                Some("\"threshold\""),
            ),
            (
                with(&[("activationThreshold", "notanint")], ""),
                vec![],
                Some("\"activationThreshold\""),
            ),
            (with(&[], "threshold"), vec![], Some("\"threshold\"")),
            (with(&[], "nrql"), vec![], Some("\"nrql\"")),
            (
                with(&[("noDataError", "invalid")], ""),
                vec![],
                Some("\"noDataError\""),
            ),
            (with(&[("noDataError", "1")], ""), vec![], None),
            (with(&[("region", "Mars")], ""), vec![], Some("\"region\"")),
            (with(&[("region", "local")], ""), vec![], Some("\"region\"")),
            (with(&[], "queryKey"), vec![], Some("\"queryKey\"")),
        ];
        for (i, (metadata, auth, error)) in rows.iter().enumerate() {
            match (parse(metadata, auth), error) {
                (Ok(_), None) => {}
                (Err(e), Some(name)) => assert!(e.contains(name), "row {i}: {e}"),
                (got, _) => panic!("row {i}: {:?}", got.map(|c| c.metric_name)),
            }
        }
        let config = parse(&with(&[("region", "eu")], ""), &[("account", "7")]).unwrap();
        // TriggerAuthentication first, then metadata.
        assert_eq!(config.account, 7);
        assert_eq!(config.url.as_str(), "https://api.eu.newrelic.com/graphql");
        assert_eq!(config.metric_name, "s1-new-relic");
        let body: serde_json::Value = serde_json::from_str(&config.body()).unwrap();
        assert_eq!(body["variables"]["accountId"], 7);
        assert_eq!(body["variables"]["query"], NRQL_TEXT);
        assert_eq!(body["query"], GRAPHQL_QUERY);
    }
}
