//! What `elasticsearch` and `opensearch` share: a query (`POST /<index>/_search`) or a stored
//! search template (`POST /<index>/_search/template`) on one of the cluster's addresses, and the
//! number at `valueLocation` (a GJSON path, [`JsonPath`]) in the answer, read as KEDA's
//! `getValueFromSearch` does.
//!
//! The APIs: Elasticsearch <https://www.elastic.co/docs/api/doc/elasticsearch/operation/operation-search>
//! and <https://www.elastic.co/docs/api/doc/elasticsearch/operation/operation-search-template>;
//! OpenSearch <https://docs.opensearch.org/latest/api-reference/search-apis/search/> and
//! <https://docs.opensearch.org/latest/api-reference/search-apis/search-template/>.
//!
//! Several addresses are tried in turn, starting one further at each read (the Go clients'
//! round robin, kept in the shared [`Servers`] client of the addresses); a connection failure, a timeout or a 502/503/504 moves on to the next one
//! (their retries), any other answer ends the read.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use bytes::Bytes;
use http::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;

use crate::context::ScalerContext;
use crate::error::{MetadataError, ScalerError, TriggerId};
use crate::http_client::{HttpClientKey, HttpGetError, describe_url};
use crate::http_servers::{self, Servers, ServersKey};
use crate::metadata::{MetadataParser, Param};
use crate::metric::{MetricTargetType, external_metric_spec, metric_target_milli};
use crate::pool::Lease;
use crate::pooled::{PooledSource, ReadCtx};
use crate::remote::{Classify, Failure, Kind};
use crate::scaler::MetricsAndActivity;
use crate::scalers::metrics_api::json_path::{JsonPath, type_name};

/// The error `type`s of Elasticsearch and OpenSearch answers that may be shown (the body's
/// `error.type`); the `reason` is the cluster's text and is not.
pub const ERROR_TYPES: &[&str] = &[
    "index_not_found_exception",
    "search_phase_execution_exception",
    "parsing_exception",
    "x_content_parse_exception",
    "query_shard_exception",
    "illegal_argument_exception",
    "resource_not_found_exception",
    "script_exception",
    "security_exception",
    "es_rejected_execution_exception",
    "opensearch_rejected_execution_exception",
    "rejected_execution_exception",
    "circuit_breaking_exception",
    "too_many_buckets_exception",
    "cluster_block_exception",
    "no_shard_available_action_exception",
];

/// What to send: a query, or a search template with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Search {
    /// `query`: the body of `_search`, as written.
    Query(String),
    /// `searchTemplateName` and `parameters` (`key:value;key2:value2`).
    Template {
        /// The stored template's id.
        id: String,
        /// The `params`.
        params: Vec<(String, String)>,
    },
}

impl Search {
    /// `/<index,index2>/_search` or `/<index,...>/_search/template` under `base`'s path.
    pub fn url(&self, base: &url::Url, indices: &[String]) -> url::Url {
        let mut url = base.clone();
        url.set_query(None);
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(&indices.join(","));
            segments.push("_search");
            if matches!(self, Self::Template { .. }) {
                segments.push("template");
            }
        }
        url
    }

    /// The request body: the query as written, or `{"id": ..., "params": {...}}` (`params`
    /// only when there are some, as KEDA builds it).
    pub fn body(&self) -> Bytes {
        match self {
            Self::Query(query) => Bytes::from(query.clone()),
            Self::Template { id, params } => {
                let mut body = serde_json::json!({ "id": id });
                if !params.is_empty() {
                    let params: serde_json::Map<String, Value> = params
                        .iter()
                        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                        .collect();
                    body["params"] = Value::Object(params);
                }
                Bytes::from(body.to_string())
            }
        }
    }
}

/// The parameters both scalers read the same way.
pub struct SearchParams {
    /// `index` (`;`-separated).
    pub index: Param,
    /// `searchTemplateName`.
    pub search_template_name: Param,
    /// `query`.
    pub query: Param,
    /// `parameters` (`;`-separated `key:value`).
    pub parameters: Param,
    /// `valueLocation`.
    pub value_location: Param,
}

/// The search part of a trigger: indices, what to send, where the value is.
#[derive(Clone, Debug)]
pub struct SearchSpec {
    /// The indices (or aliases, data streams, patterns).
    pub indices: Vec<String>,
    /// The query or the template, or why it cannot be sent (`parameters` not `key:value`, a
    /// query that is not JSON where the scaler checks it): each read fails with this, as in
    /// KEDA.
    pub search: Result<Search, MetadataError>,
    /// `valueLocation`, or why it is not a path keda-rs can follow (each read fails with it).
    pub value_location: Result<JsonPath, MetadataError>,
    /// `valueLocation` as written, for messages.
    pub location: String,
    /// `searchTemplateName`, if the trigger uses a template.
    pub template: Option<String>,
}

impl SearchSpec {
    /// Reads `index`, `searchTemplateName` or `query` (exactly one), `parameters` and
    /// `valueLocation`; `check_json` refuses (at the reads) a query that is not JSON, as
    /// KEDA's `opensearch` does.
    ///
    /// # Errors
    /// `index` or `valueLocation` is missing, or neither or both of `searchTemplateName` and
    /// `query` are given (KEDA's messages).
    pub fn parse(
        p: &MetadataParser<'_>,
        params: &SearchParams,
        check_json: bool,
    ) -> Result<Self, MetadataError> {
        let template: Option<String> = p.get_opt(&params.search_template_name)?;
        let query: Option<String> = p.get_opt(&params.query)?;
        let template_name = template.clone();
        let search = match (template, query) {
            (None, None) => {
                return Err(p.rule("either searchTemplateName or query must be provided"));
            }
            (Some(_), Some(_)) => {
                return Err(p.rule("cannot provide both searchTemplateName and query"));
            }
            (Some(id), None) => {
                let items: Vec<String> = p.get_opt(&params.parameters)?.unwrap_or_default();
                items
                    .iter()
                    .map(|item| {
                        item.split_once(':')
                            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
                            .ok_or_else(|| {
                                p.rule(format!(
                                    "parameter \"parameters\": invalid parameter format \"{item}\", expected key:value"
                                ))
                            })
                    })
                    .collect::<Result<Vec<_>, _>>()
                    .map(|params| Search::Template { id, params })
            }
            (None, Some(query)) => {
                if check_json && serde_json::from_str::<serde::de::IgnoredAny>(&query).is_err() {
                    Err(p.rule("parameter \"query\" is not valid JSON (invalid query JSON)"))
                } else {
                    Ok(Search::Query(query))
                }
            }
        };
        let indices: Vec<String> = p.get(&params.index)?;
        let location: String = p.get(&params.value_location)?;
        let value_location = JsonPath::parse(&location)
            .map_err(|why| p.rule(format!("parameter \"valueLocation\" ({location}): {why}")));
        Ok(Self {
            indices,
            search,
            value_location,
            location,
            template: template_name,
        })
    }

    /// The metric name's stem: `<system>-<searchTemplateName>` or `<system>-query`.
    pub fn metric_stem(&self, system: &str) -> String {
        match &self.template {
            Some(id) => format!("{system}-{id}"),
            None => format!("{system}-query"),
        }
    }
}

/// The number at `path` (written `location`) in the search answer `body`, as KEDA reads it:
/// a number; a string holding one; nothing there or `null` is 0 with `ignore_null_values`
/// and an error without. NaN and ±Inf are errors.
///
/// # Errors
/// The answer is not JSON, or the value is missing (without `ignore_null_values`), not a
/// number, or not finite; messages name `valueLocation`, never the answer's text.
pub fn value_at(
    body: &[u8],
    path: &JsonPath,
    location: &str,
    ignore_null_values: bool,
) -> Result<f64, String> {
    let root: Value = crate::remote::from_json(body)
        .map_err(|e| format!("the search answer is {}", crate::remote::json_error(&e)))?;
    let null = |why: String| {
        if ignore_null_values {
            Ok(0.0)
        } else {
            Err(format!(
                "valueLocation \"{location}\" must point to a value of type number but points to nothing ({why}); with ignoreNullValues \"true\" this reads as 0"
            ))
        }
    };
    let value = match path.resolve(&root) {
        Ok(Value::Null) => return null("null".to_string()),
        Ok(value) => value,
        Err(why) => return null(why),
    };
    let number = match &value {
        Value::Number(n) => n.as_f64(),
        Value::String(text) => Some(text.trim().parse::<f64>().map_err(|_| {
            format!(
                "valueLocation \"{location}\" must point to a value of type number but points to a string ({} bytes) that is not a number",
                text.len()
            )
        })?),
        other => {
            return Err(format!(
                "valueLocation \"{location}\" must point to a value of type number but points to {}",
                type_name(other)
            ));
        }
    };
    match number {
        Some(v) if v.is_finite() => Ok(v),
        _ => Err(format!(
            "valueLocation \"{location}\" points to a value that is not a finite number"
        )),
    }
}

/// The failure of an error answer of `system`: 401 and 403 with KEDA's hints, the error
/// `type` when it is one of [`ERROR_TYPES`], else the status; the body at debug level only.
pub fn error_answer(system: &'static str, error: &HttpGetError) -> Failure {
    let HttpGetError::Status { status, body, .. } = error else {
        return error.classify();
    };
    let raw = Some(String::from_utf8_lossy(body).into_owned());
    match status.as_u16() {
        401 => {
            return Failure::new(
                Kind::Local(format!(
                    "{system} authentication failed (HTTP 401): check username and password"
                )),
                raw,
            );
        }
        403 => {
            return Failure::new(
                Kind::Local(format!(
                    "{system} authorization failed (HTTP 403): user has insufficient permissions"
                )),
                raw,
            );
        }
        _ => {}
    }
    let shown = crate::remote::from_json::<Value>(body).ok().and_then(|v| {
        let t = v["error"]["type"].as_str()?.to_string();
        ERROR_TYPES.iter().find(|known| **known == t).copied()
    });
    match shown {
        Some(error_type) => Failure::new(
            Kind::Server {
                system: if system == "opensearch" {
                    "OpenSearch"
                } else {
                    "Elasticsearch"
                },
                code: Some(format!("{error_type} (HTTP {})", status.as_u16())),
            },
            raw,
        ),
        None => error.classify(),
    }
}

/// Whether the Go clients retry on another address after `error`.
fn retried(error: &HttpGetError) -> bool {
    match error {
        HttpGetError::Send(_) | HttpGetError::TimedOut(_) | HttpGetError::Busy(_) => true,
        HttpGetError::Status { status, .. } => matches!(status.as_u16(), 502..=504),
        HttpGetError::Body(_) | HttpGetError::TooLarge | HttpGetError::Budget(_) => false,
    }
}

/// Runs `spec`'s search on the cluster's `servers` (tried in turn from the next one of a round
/// robin, the Go clients' order; `addresses` are their URLs and keys) and returns the value at
/// `valueLocation`.
///
/// # Errors
/// The search or `valueLocation` cannot be used (naming the parameter); every address
/// failed, or one answered an error (the last failure, naming that address); the answer
/// has no usable value; the scaler is closed.
pub async fn value(
    servers: &Servers,
    system: &'static str,
    trigger: &TriggerId,
    addresses: &[(url::Url, HttpClientKey)],
    spec: &SearchSpec,
    ignore_null_values: bool,
) -> Result<f64, ScalerError> {
    let search = spec
        .search
        .as_ref()
        .map_err(|e| ScalerError::Metadata(e.clone()))?;
    let path = spec
        .value_location
        .as_ref()
        .map_err(|e| ScalerError::Metadata(e.clone()))?;
    let body = search.body();
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let n = servers.len().min(addresses.len()).max(1);
    let first = servers.position().fetch_add(1, Ordering::Relaxed) % n;
    let mut last = None;
    for i in 0..n {
        let index = (first + i) % n;
        let (Some((base, _)), Some(client)) = (addresses.get(index), servers.get(index)) else {
            continue;
        };
        let url = search.url(base, &spec.indices);
        let operation = || {
            let what = match search {
                Search::Query(_) => "query".to_string(),
                Search::Template { id, .. } => format!("search template {id}"),
            };
            format!("{system} {what} on {}", describe_url(&url))
        };
        match client.post(url.clone(), &headers, body.clone()).await {
            Ok(answer) => {
                return value_at(&answer, path, &spec.location, ignore_null_values).map_err(
                    |why| ScalerError::Query {
                        trigger: trigger.clone(),
                        operation: operation(),
                        source: Failure::answer(why, &answer),
                    },
                );
            }
            Err(e) => {
                let again = retried(&e);
                let error = ScalerError::Query {
                    trigger: trigger.clone(),
                    operation: operation(),
                    source: error_answer(system, &e),
                };
                if !again {
                    return Err(error);
                }
                last = Some(error);
            }
        }
    }
    Err(last.unwrap_or_else(|| ScalerError::Closed {
        trigger: trigger.clone(),
    }))
}

/// `elasticsearch` or `opensearch`: what differs between the two trigger types.
pub trait SearchSystem: Send + Sync + Sized + 'static {
    /// The trigger type, in messages.
    const TYPE: &'static str;

    /// Parses a trigger of this type.
    ///
    /// # Errors
    /// See [`PooledSource::parse`].
    fn parse(ctx: &ScalerContext) -> Result<SearchTrigger<Self>, ScalerError>;
}

/// A parsed `elasticsearch` or `opensearch` trigger.
#[derive(Clone, Debug)]
pub struct SearchTrigger<S> {
    /// Each address and its pooled client's key.
    pub servers: Vec<(url::Url, HttpClientKey)>,
    /// Indices, search, value location. A search that cannot be sent fails every read, as in
    /// KEDA.
    pub search: SearchSpec,
    /// The target.
    pub target_value: f64,
    /// Active iff the value is above this.
    pub activation_target_value: f64,
    /// A missing or null value is 0 instead of an error.
    pub ignore_null_values: bool,
    /// `s<index>-<type>-<searchTemplateName>` or `s<index>-<type>-query`.
    pub metric_name: String,
    /// AverageValue or Value.
    pub metric_type: MetricTargetType,
    /// Which of the two.
    pub system: PhantomData<S>,
}

#[async_trait]
impl<S: SearchSystem> PooledSource for SearchTrigger<S> {
    type Key = ServersKey;
    type Client = Servers;

    fn parse(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        S::parse(ctx)
    }

    fn client_key(&self) -> Result<ServersKey, MetadataError> {
        Ok(self.servers.iter().map(|(_, key)| key.clone()).collect())
    }

    async fn connect(
        ctx: &ScalerContext,
        key: ServersKey,
    ) -> Result<Lease<ServersKey, Servers>, ScalerError> {
        http_servers::lease(ctx, key).await
    }

    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.metric_name.clone(),
            metric_target_milli(self.metric_type, self.target_value),
        )]
    }

    async fn read(
        &self,
        servers: &Servers,
        read: ReadCtx<'_>,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let value = value(
            servers,
            S::TYPE,
            read.trigger,
            &self.servers,
            &self.search,
            self.ignore_null_values,
        )
        .await?;
        Ok(MetricsAndActivity::single(
            metric_name,
            value,
            self.activation_target_value,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_follow_the_search_and_search_template_apis() {
        let base = url::Url::parse("https://es.example:9200/proxy/?x=1").unwrap();
        let indices = vec!["logs-*".to_string(), "jobs".to_string()];
        let query = Search::Query(r#"{"query":{"match_all":{}}}"#.into());
        assert_eq!(
            query.url(&base, &indices).as_str(),
            "https://es.example:9200/proxy/logs-*,jobs/_search"
        );
        assert_eq!(&query.body()[..], br#"{"query":{"match_all":{}}}"#);
        let template = Search::Template {
            id: "jobs-count".into(),
            params: vec![("queue".into(), "orders".into())],
        };
        let base = url::Url::parse("http://es:9200").unwrap();
        assert_eq!(
            template.url(&base, &indices).as_str(),
            "http://es:9200/logs-*,jobs/_search/template"
        );
        let body: Value = serde_json::from_slice(&template.body()).unwrap();
        assert_eq!(
            body,
            serde_json::json!({"id": "jobs-count", "params": {"queue": "orders"}})
        );
        let bare = Search::Template {
            id: "t".into(),
            params: vec![],
        };
        assert_eq!(&bare.body()[..], br#"{"id":"t"}"#);
    }

    #[test]
    fn values_are_read_as_keda_reads_them() {
        let body = br#"{"hits":{"total":{"value":42,"relation":"eq"}},"aggregations":{"avg":{"value":null},"s":{"value":"2.5"},"t":{"value":"SECRET-TEXT"},"o":{"value":{}}}}"#;
        let at = |location: &str, ignore: bool| {
            value_at(body, &JsonPath::parse(location).unwrap(), location, ignore)
        };
        assert_eq!(at("hits.total.value", false), Ok(42.0));
        assert_eq!(at("aggregations.s.value", false), Ok(2.5));
        assert_eq!(at("aggregations.avg.value", true), Ok(0.0));
        assert_eq!(at("aggregations.missing.value", true), Ok(0.0));
        assert_eq!(
            at("aggregations.avg.value", false),
            Err("valueLocation \"aggregations.avg.value\" must point to a value of type number but points to nothing (null); with ignoreNullValues \"true\" this reads as 0".into())
        );
        let err = at("aggregations.missing.value", false).unwrap_err();
        assert!(err.contains("key \"missing\" not found"), "{err}");
        let err = at("aggregations.t.value", false).unwrap_err();
        assert!(
            err.contains("a string (11 bytes) that is not a number"),
            "{err}"
        );
        assert!(!err.contains("SECRET"), "{err}");
        let err = at("aggregations.o.value", true).unwrap_err();
        assert!(err.ends_with("points to an object"), "{err}");
        let err = value_at(
            b"<html>SECRET</html>",
            &JsonPath::parse("a").unwrap(),
            "a",
            true,
        )
        .unwrap_err();
        assert!(
            err.starts_with("the search answer is not valid JSON"),
            "{err}"
        );
    }

    #[test]
    fn error_answers_show_the_error_type_from_the_vocabulary_only() {
        let status = |code: u16, body: &str| HttpGetError::Status {
            status: http::StatusCode::from_u16(code).unwrap(),
            content_type: Some("application/json".into()),
            body: Bytes::from(body.to_string()),
        };
        let f = error_answer(
            "elasticsearch",
            &status(
                404,
                r#"{"error":{"type":"index_not_found_exception","reason":"no such index [SECRET]"},"status":404}"#,
            ),
        );
        assert_eq!(
            f.to_string(),
            "Elasticsearch answered error index_not_found_exception (HTTP 404)"
        );
        let f = error_answer(
            "opensearch",
            &status(400, r#"{"error":{"type":"SECRET"},"status":400}"#),
        );
        assert!(
            f.to_string().starts_with("answered HTTP 400 Bad Request"),
            "{f}"
        );
        let f = error_answer("elasticsearch", &status(401, "{}"));
        assert_eq!(
            f.to_string(),
            "elasticsearch authentication failed (HTTP 401): check username and password"
        );
        assert!(retried(&status(503, "")));
        assert!(!retried(&status(404, "")));
    }
}
