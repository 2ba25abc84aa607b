//! `rabbitmq`: scales on a RabbitMQ queue, read over AMQP (ready messages, from a passive
//! queue declare) or over the management plugin's HTTP API (messages, ready messages, publish
//! and deliver rates; one queue or every queue matching a regex). Compatible with KEDA's
//! `rabbitmq` trigger.
//!
//! Clients are shared: one AMQP connection per (URL with credentials, vhost, TLS settings), one
//! HTTP client per (TLS settings, timeout) and one OAuth2 token source per (token URL, client,
//! scopes), however many triggers use them.

pub mod amqp;
pub mod config;
pub mod http;
pub mod url;

use async_trait::async_trait;
use k8s_openapi::api::autoscaling::v2::MetricSpec;

use self::amqp::{AmqpClient, AmqpKey};
pub use self::config::{Mode, Operation, PARAMS, Protocol, RabbitMqConfig};
use self::http::{HttpKey, QueueInfo, QueuePage, QueueStatus};
use crate::context::ScalerContext;
use crate::error::{ScalerError, TriggerId};
use crate::metric::{external_metric_spec, metric_target_milli};
use crate::oauth2::{ClientCredentials, TokenError, TokenSource};
use crate::pool::Lease;
use crate::remote::{Classify, Failure};
use crate::scaler::{BuiltScaler, MetricValue, MetricsAndActivity, Scaler};

/// The metric value and activity KEDA reports for `status` in `mode` (`GetMetricsAndActivity`
/// of KEDA's scaler, including the empty-queue rule of ExpectedQueueConsumptionTime).
pub fn evaluate(mode: Mode, activation: f64, status: QueueStatus) -> (f64, bool) {
    let messages = status.messages as f64;
    let (publish, deliver) = (status.publish_rate, status.deliver_get_rate);
    match mode {
        Mode::QueueLength => (messages, messages > activation),
        Mode::MessageRate => (publish, publish > activation || messages > activation),
        Mode::DeliverGetRate => (deliver, deliver > activation),
        Mode::PublishedToDeliveredRatio => {
            let stalled = publish > 0.0 && deliver == 0.0;
            let ratio = if stalled {
                activation
            } else if publish > 0.0 && deliver > 0.0 {
                publish / deliver
            } else {
                0.0
            };
            (ratio, ratio > activation || stalled)
        }
        Mode::ExpectedQueueConsumptionTime => {
            let eta = if status.messages == 0 {
                0.0
            } else if deliver == 0.0 {
                activation
            } else {
                (publish - deliver) / deliver + messages / deliver
            };
            (
                eta,
                eta > activation || (deliver == 0.0 && status.messages > 0),
            )
        }
    }
}

enum Client {
    Amqp(Lease<AmqpKey, AmqpClient>),
    Http(
        Lease<HttpKey, reqwest::Client>,
        Option<Lease<ClientCredentials, TokenSource>>,
    ),
}

/// A `rabbitmq` scaler holding its share of a pooled client.
pub struct RabbitMqScaler {
    config: RabbitMqConfig,
    trigger: TriggerId,
    client: std::sync::Mutex<Option<std::sync::Arc<Client>>>,
}

impl RabbitMqScaler {
    /// Parses the trigger and leases the shared client for it (connecting over AMQP if this is
    /// the first trigger on the broker).
    ///
    /// # Errors
    /// Invalid metadata, or the first connection fails. Errors never contain credentials.
    pub async fn build(ctx: &ScalerContext) -> Result<Self, ScalerError> {
        let config = RabbitMqConfig::parse(ctx)?;
        let client = match config.protocol {
            Protocol::Amqp => {
                let key = AmqpKey {
                    host: config.host.clone(),
                    vhost: config.vhost_name.clone(),
                    credentials: config.credentials.clone(),
                    tls: config.tls.clone(),
                };
                let lease = ctx
                    .clients
                    .pool::<AmqpKey, AmqpClient>()
                    .get_or_connect(key.clone(), || AmqpClient::connect(&key))
                    .await
                    .map_err(|e| ScalerError::Connect {
                        trigger: ctx.trigger_id(),
                        target: describe(&config),
                        source: anonymized(&config, &e),
                    })?;
                Client::Amqp(lease)
            }
            Protocol::Http => {
                let key = HttpKey {
                    tls: config.tls.clone(),
                    timeout: config.timeout,
                };
                let lease = ctx
                    .clients
                    .pool::<HttpKey, reqwest::Client>()
                    .get_or_connect(key.clone(), || async { http::client(&key) })
                    .await
                    .map_err(|e| ScalerError::Connect {
                        trigger: ctx.trigger_id(),
                        target: describe(&config),
                        source: anonymized(&config, &e),
                    })?;
                // The token source asks nothing until the first query, as KEDA's.
                let tokens = match &config.oauth2 {
                    Some(settings) => Some(
                        ctx.clients
                            .pool::<ClientCredentials, TokenSource>()
                            .get_or_connect(settings.clone(), || async {
                                Ok::<_, std::convert::Infallible>(TokenSource::new(
                                    settings.clone(),
                                ))
                            })
                            .await
                            .unwrap_or_else(|never| match never {}),
                    ),
                    None => None,
                };
                Client::Http(lease, tokens)
            }
        };
        Ok(Self {
            config,
            trigger: ctx.trigger_id(),
            client: std::sync::Mutex::new(Some(std::sync::Arc::new(client))),
        })
    }

    /// The parsed trigger.
    pub fn config(&self) -> &RabbitMqConfig {
        &self.config
    }

    /// The queue's message count and rates now (rates are 0 over AMQP).
    ///
    /// # Errors
    /// The broker cannot be reached or answers an error (a missing queue, wrong credentials);
    /// the scaler is closed.
    pub async fn status(&self) -> Result<QueueStatus, ScalerError> {
        let client = self
            .client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .ok_or_else(|| ScalerError::Closed {
                trigger: self.trigger.clone(),
            })?;
        let query_error = |source: Failure| ScalerError::Query {
            trigger: self.trigger.clone(),
            operation: format!(
                "reading queue \"{}\" from {}",
                self.config.queue_name,
                describe(&self.config)
            ),
            source,
        };
        match client.as_ref() {
            Client::Amqp(amqp) => {
                let ready = amqp
                    .ready_messages(&self.config.queue_name)
                    .await
                    .map_err(|e| query_error(anonymized(&self.config, &e)))?;
                Ok(QueueStatus {
                    messages: i64::from(ready),
                    ..QueueStatus::default()
                })
            }
            Client::Http(http, tokens) => self
                .http_status(http, tokens.as_deref())
                .await
                .map_err(query_error),
        }
    }

    async fn http_status(
        &self,
        client: &reqwest::Client,
        tokens: Option<&TokenSource>,
    ) -> Result<QueueStatus, Failure> {
        let c = &self.config;
        let request = url::management_request(
            c.host.expose(),
            c.vhost_name.as_deref(),
            c.credentials.as_ref(),
            &c.queue_name,
            c.use_regex.then_some(c.page_size),
        )
        .map_err(Failure::local)?;
        let mut builder = client.get(&request.url);
        // With OAuth2 the bearer token replaces any user info of `host`, as in KEDA (Go's
        // oauth2 transport overwrites the basic authorization the URL would give).
        let token = match tokens {
            Some(tokens) => Some(
                tokens
                    .token(client)
                    .await
                    .map_err(|e| Failure::local(token_error(&e, &tokens.settings().scopes)))?,
            ),
            None => None,
        };
        match (&token, &request.credentials) {
            (Some(token), _) => {
                builder = builder.header(reqwest::header::AUTHORIZATION, token.header_value());
            }
            (None, Some((user, password))) => {
                builder = builder.basic_auth(user, Some(password.expose()));
            }
            (None, None) => {}
        }
        let mut secrets: Vec<&str> = request
            .credentials
            .iter()
            .map(|(_, p)| p.expose())
            .collect();
        if let Some(token) = &token {
            secrets.push(token.header_value());
            if let Some((_, bare)) = token.header_value().split_once(' ') {
                secrets.push(bare);
            }
        }
        if let Some(oauth2) = &c.oauth2 {
            secrets.push(oauth2.client_secret.expose());
        }
        let scrub = |text: &str| url::anonymize(text, &secrets);
        let failed =
            |e: reqwest::Error| Failure::of_scrubbed("HTTP client", &e.without_url(), scrub);
        let mut response = crate::request_metrics::send(builder)
            .await
            .map_err(failed)?;
        let status = response.status();
        // The answer, at most MAX_BODY_BYTES (a larger one is an error, not a large operator).
        let mut body = Vec::new();
        let mut reading = crate::answers::Reading::new();
        while let Some(chunk) = response.chunk().await.map_err(failed)? {
            if body.len() + chunk.len() > crate::http_client::MAX_BODY_BYTES {
                return Err(Failure::local(format!(
                    "the answer is larger than {} bytes",
                    crate::http_client::MAX_BODY_BYTES
                )));
            }
            reading
                .add(chunk.len())
                .map_err(|e| Failure::local(e.to_string()))?;
            body.extend_from_slice(&chunk);
        }
        if !status.is_success() {
            let content_type = response
                .headers()
                .get(reqwest::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let answered = Failure::status(
                status.as_u16(),
                content_type.as_deref(),
                scrub(&String::from_utf8_lossy(&body)).as_bytes(),
            );
            if let (Some(tokens), Some(token)) = (tokens, &token)
                && status == reqwest::StatusCode::UNAUTHORIZED
            {
                // A new token next time: the broker may have rotated its keys, or revoked it.
                tokens.refused(token).await;
                return Err(Failure::local(format!(
                    "{answered}; the broker refused the OAuth2 access token from \"oauthTokenURI\": check that RabbitMQ's OAuth 2 backend (rabbitmq_auth_backend_oauth2) trusts the token's signing key and audience, and that its scopes grant the management API (a tag such as monitoring) and the vhost",
                )));
            }
            return Err(answered);
        }
        let ready_only = c.exclude_unacknowledged;
        let not_json = |e: crate::remote::JsonError| {
            Failure::answer(
                format!(
                    "the management API's answer is {}",
                    crate::remote::json_error(&e)
                ),
                scrub(&String::from_utf8_lossy(&body)).as_bytes(),
            )
        };
        if c.use_regex {
            let page: QueuePage = crate::remote::from_json(&body).map_err(not_json)?;
            if page.page_count > 1 {
                return Err(Failure::local(format!(
                    "regex matches more queues than can be recovered at once (more than pageSize {}); raise \"pageSize\" or narrow the regex",
                    c.page_size
                )));
            }
            Ok(http::compose(&page.items, c.operation, ready_only))
        } else {
            let info: QueueInfo = crate::remote::from_json(&body).map_err(not_json)?;
            Ok(info.status(ready_only))
        }
    }
}

/// A failed OAuth2 token request, naming this trigger's parameters (`oauthTokenURI`,
/// `clientID`, `clientSecret`, `scopes`).
fn token_error(error: &TokenError, scopes: &[String]) -> String {
    match error {
        TokenError::Request { url, reason } => {
            format!("OAuth2 token request to {url} (parameter \"oauthTokenURI\") failed: {reason}")
        }
        TokenError::Refused {
            url, status, code, ..
        } => format!(
            "OAuth2 token request to {url} was refused: {status}{}; check parameters \"clientID\" and \"clientSecret\" (TriggerAuthentication spec.oauth2){}",
            code.map(|c| format!(" ({c})")).unwrap_or_default(),
            if scopes.is_empty() {
                ""
            } else {
                " and that the client may ask for \"scopes\""
            }
        ),
        TokenError::Answer { url, reason } => format!(
            "OAuth2 token endpoint {url} (parameter \"oauthTokenURI\") gave no usable token: {reason}"
        ),
    }
}

/// `RabbitMQ at <scheme>://<host>[:port]`: what errors name instead of the URL.
fn describe(config: &RabbitMqConfig) -> String {
    let host = config.host.expose();
    let (scheme, rest) = host.split_once("://").unwrap_or(("", host));
    let (_, rest) = url::split_user_info(rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let protocol = match config.protocol {
        Protocol::Amqp => "AMQP",
        Protocol::Http => "management API",
    };
    format!("RabbitMQ {protocol} at {scheme}://{authority}")
}

/// The failure of `error`, its raw text (debug level) with credentials removed.
fn anonymized(
    config: &RabbitMqConfig,
    error: &(impl Classify + std::error::Error + 'static),
) -> Failure {
    let mut secrets: Vec<&str> = vec![];
    if let Some((_, password)) = &config.credentials {
        secrets.push(password.expose());
    }
    // The URL's own password, as written and decoded; found by hand rather than by a URL
    // parser, which refuses a URL whose password holds an unencoded `/`.
    if let Some(password) = url::raw_password(config.host.expose()) {
        let decoded = percent_encoding::percent_decode_str(password)
            .decode_utf8_lossy()
            .into_owned();
        let all = [&secrets[..], &[password, &decoded]].concat();
        return scrubbed(error, |raw| url::anonymize(raw, &all));
    }
    scrubbed(error, |raw| url::anonymize(raw, &secrets))
}

/// `error`'s failure with its raw text passed through `scrub`.
fn scrubbed(error: &impl Classify, scrub: impl Fn(&str) -> String) -> Failure {
    error.classify().scrub_raw(scrub)
}

#[async_trait]
impl Scaler for RabbitMqScaler {
    fn metric_specs(&self) -> Vec<MetricSpec> {
        vec![external_metric_spec(
            self.config.metric_name.clone(),
            metric_target_milli(self.config.metric_type, self.config.value),
        )]
    }

    async fn metrics_and_activity(
        &self,
        metric_name: &str,
    ) -> Result<MetricsAndActivity, ScalerError> {
        let status = self.status().await?;
        let (value, active) = evaluate(self.config.mode, self.config.activation_value, status);
        Ok(MetricsAndActivity {
            values: vec![MetricValue::new(metric_name, value)],
            active,
        })
    }

    async fn close(&self) {
        let client = self
            .client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        drop(client);
    }

    /// The broker's management API or AMQP: polled sooner after a sign of activity.
    fn adaptive_polling(&self) -> bool {
        true
    }
}

/// Factory of `rabbitmq`.
///
/// # Errors
/// See [`RabbitMqScaler::build`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    Ok(BuiltScaler::Pull(Box::new(
        RabbitMqScaler::build(&ctx).await?,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(messages: i64, publish: f64, deliver: f64) -> QueueStatus {
        QueueStatus {
            messages,
            publish_rate: publish,
            deliver_get_rate: deliver,
        }
    }

    #[test]
    fn values_and_activity_follow_keda_per_mode() {
        use Mode::*;
        // (mode, activation, messages, publish, deliver, value, active)
        let rows = [
            (QueueLength, 0.0, 0, 0.0, 0.0, 0.0, false),
            (QueueLength, 3.0, 3, 0.0, 0.0, 3.0, false), // equal to activation: inactive
            (QueueLength, 3.0, 4, 0.0, 0.0, 4.0, true),
            (MessageRate, 1.0, 0, 1.0, 0.0, 1.0, false),
            (MessageRate, 1.0, 2, 0.5, 0.0, 0.5, true), // messages above activation
            (MessageRate, 1.0, 0, 1.5, 0.0, 1.5, true),
            (DeliverGetRate, 0.0, 10, 5.0, 0.0, 0.0, false),
            (DeliverGetRate, 0.0, 0, 0.0, 2.0, 2.0, true),
            (PublishedToDeliveredRatio, 0.0, 0, 0.0, 0.0, 0.0, false),
            (PublishedToDeliveredRatio, 2.0, 0, 4.0, 0.0, 2.0, true), // stalled consumers
            (PublishedToDeliveredRatio, 2.0, 0, 4.0, 2.0, 2.0, false),
            (PublishedToDeliveredRatio, 1.0, 0, 3.0, 2.0, 1.5, true),
            (PublishedToDeliveredRatio, 1.0, 0, 0.0, 2.0, 0.0, false),
            (ExpectedQueueConsumptionTime, 5.0, 0, 0.0, 0.0, 0.0, false), // empty, idle
            (ExpectedQueueConsumptionTime, 5.0, 10, 0.0, 0.0, 5.0, true), // nobody consumes
            (ExpectedQueueConsumptionTime, 5.0, 10, 1.0, 2.0, 4.5, false), // -0.5 + 5
            (ExpectedQueueConsumptionTime, 1.0, 10, 4.0, 2.0, 6.0, true), // 1 + 5
        ];
        for (i, (mode, activation, messages, publish, deliver, value, active)) in
            rows.into_iter().enumerate()
        {
            assert_eq!(
                evaluate(mode, activation, status(messages, publish, deliver)),
                (value, active),
                "row {i}: {mode:?}"
            );
        }
    }

    #[test]
    fn targets_are_milli_quantities_of_value() {
        let ctx = ScalerContext {
            metadata: [
                ("host", "http://h:15672"),
                ("queueName", "q"),
                ("mode", "MessageRate"),
                ("value", "0.5"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            metric_type: Some("Value".into()),
            ..ScalerContext::new("rabbitmq", 3)
        };
        let config = RabbitMqConfig::parse(&ctx).unwrap();
        let target = metric_target_milli(config.metric_type, config.value);
        assert_eq!(target.type_, "Value");
        assert_eq!(target.value.map(|q| q.0), Some("500m".to_string()));
        assert_eq!(config.metric_name, "s3-rabbitmq-q");
    }

    #[test]
    fn descriptions_never_contain_credentials() {
        let ctx = ScalerContext {
            metadata: [
                ("host", "amqps://user:hunter2@rabbit.svc:5671/vh"),
                ("queueName", "q"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            ..ScalerContext::new("rabbitmq", 0)
        };
        let config = RabbitMqConfig::parse(&ctx).unwrap();
        assert_eq!(
            describe(&config),
            "RabbitMQ AMQP at amqps://rabbit.svc:5671"
        );
        let err =
            std::io::Error::other("dial amqps://user:hunter2@rabbit.svc:5671 refused; hunter2");
        let failure = anonymized(&config, &err);
        assert_eq!(failure.to_string(), "I/O error (other error)");
        // The raw text (debug level only) is scrubbed too.
        let message = failure.raw().unwrap().to_string();
        assert!(!message.contains("hunter2"), "{message}");
        assert!(
            message.contains("amqps://user:password@rabbit.svc"),
            "{message}"
        );
    }

    #[test]
    fn a_password_with_an_unencoded_slash_is_never_shown() {
        let ctx = ScalerContext {
            metadata: [
                ("host", "amqp://user:hunter/zz@rabbit.svc:5672/vh"),
                ("queueName", "q"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
            ..ScalerContext::new("rabbitmq", 0)
        };
        let config = RabbitMqConfig::parse(&ctx).unwrap();
        // Before, the authority was cut at the password's `/`: "amqp://user:hunter".
        assert_eq!(describe(&config), "RabbitMQ AMQP at amqp://rabbit.svc:5672");
        // A message that quotes the password alone, as a library might, is scrubbed too.
        let err = std::io::Error::other(
            "dial amqp://user:hunter/zz@rabbit.svc:5672/vh refused (password hunter/zz)",
        );
        let failure = anonymized(&config, &err);
        assert_eq!(failure.to_string(), "I/O error (other error)");
        // The raw text (debug level only) is scrubbed too.
        let message = failure.raw().unwrap().to_string();
        assert!(!message.contains("hunter"), "{message}");
        assert!(!message.contains("zz"), "{message}");
        assert!(
            message.contains("amqp://user:password@rabbit.svc:5672/vh refused"),
            "{message}"
        );
    }
}
