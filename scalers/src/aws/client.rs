//! A pooled AWS client: one per (service, region, endpoint, credentials, timeout), however
//! many triggers use it, leased from the shared [`ClientPools`](crate::pool::ClientPools). It
//! signs each request with Signature Version 4 and speaks the two protocols the aws-* scalers
//! need: JSON (`X-Amz-Target`, SQS and DynamoDB) and query (form-encoded `Action=...`, XML
//! answers: CloudWatch and STS). For `awsRoleArn` it assumes the role with STS and keeps the
//! temporary credentials until shortly before they expire.

use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use tokio::sync::Mutex;

use super::sigv4::{self, Credentials, Scope};
use crate::context::{Clock, ScalerContext};
use crate::error::ScalerError;
use crate::http_client::describe_url;
use crate::pool::Lease;
use crate::rest::{ErrorStyle, RestClient, RestError};
use crate::secret::Secret;

/// How long assumed-role credentials are asked for (the AWS SDKs' default, 15 minutes).
pub const ASSUME_ROLE_SECONDS: u32 = 900;
/// Assumed-role credentials are renewed this long before they expire.
pub const REFRESH_BEFORE_EXPIRY: jiff::SignedDuration = jiff::SignedDuration::from_secs(60);

/// How a service is spoken to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// `application/x-amz-json-<version>` with `X-Amz-Target: <prefix>.<Operation>`.
    Json {
        /// `AmazonSQS`, `DynamoDB_20120810`, `Kinesis_20131202`.
        target_prefix: &'static str,
        /// `1.0` (SQS, DynamoDB) or `1.1` (Kinesis, DynamoDB Streams).
        version: &'static str,
    },
    /// Form-encoded `Action=<Operation>&Version=<version>&...`, XML answers.
    Query {
        /// The API version, e.g. `2010-08-01` for CloudWatch.
        version: &'static str,
    },
}

/// A service the scalers call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Service {
    /// The signing name (`sqs`, `monitoring`, `dynamodb`, `sts`).
    pub signing_name: &'static str,
    /// The first label of its regional host (`sqs.us-east-1.amazonaws.com`).
    pub endpoint_prefix: &'static str,
    /// Its protocol.
    pub protocol: Protocol,
    /// How it is named in messages.
    pub display: &'static str,
}

/// Amazon SQS over its JSON protocol.
pub const SQS: Service = Service {
    signing_name: "sqs",
    endpoint_prefix: "sqs",
    protocol: Protocol::Json {
        target_prefix: "AmazonSQS",
        version: "1.0",
    },
    display: "SQS",
};

/// Amazon CloudWatch over its query protocol.
pub const CLOUDWATCH: Service = Service {
    signing_name: "monitoring",
    endpoint_prefix: "monitoring",
    protocol: Protocol::Query {
        version: "2010-08-01",
    },
    display: "CloudWatch",
};

/// Amazon DynamoDB over its JSON protocol.
pub const DYNAMODB: Service = Service {
    signing_name: "dynamodb",
    endpoint_prefix: "dynamodb",
    protocol: Protocol::Json {
        target_prefix: "DynamoDB_20120810",
        version: "1.0",
    },
    display: "DynamoDB",
};

/// Amazon DynamoDB Streams over its JSON 1.0 protocol (signed as `dynamodb`, at
/// `streams.dynamodb.<region>.amazonaws.com`).
pub const DYNAMODB_STREAMS: Service = Service {
    signing_name: "dynamodb",
    endpoint_prefix: "streams.dynamodb",
    protocol: Protocol::Json {
        target_prefix: "DynamoDBStreams_20120810",
        version: "1.0",
    },
    display: "DynamoDB Streams",
};

/// Amazon Kinesis Data Streams over its JSON 1.1 protocol.
pub const KINESIS: Service = Service {
    signing_name: "kinesis",
    endpoint_prefix: "kinesis",
    protocol: Protocol::Json {
        target_prefix: "Kinesis_20131202",
        version: "1.1",
    },
    display: "Kinesis",
};

/// AWS STS over its query protocol.
pub const STS: Service = Service {
    signing_name: "sts",
    endpoint_prefix: "sts",
    protocol: Protocol::Query {
        version: "2011-06-15",
    },
    display: "STS",
};

/// Credentials ready to sign with, or a role to assume with base credentials.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Signer {
    /// Sign with these.
    Static(Credentials),
    /// Assume `role_arn` through STS at `sts_endpoint` with `base`, sign with the result.
    AssumeRole {
        /// The role.
        role_arn: String,
        /// `awsExternalId`.
        external_id: Option<Secret>,
        /// The operator's own credentials.
        base: Credentials,
        /// STS's endpoint.
        sts_endpoint: url::Url,
    },
}

/// What a pooled client is shared by. Triggers that agree on all of it share one client, its
/// connections and (for a role) its temporary credentials.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AwsClientKey {
    /// The service.
    pub service: Service,
    /// `awsRegion`.
    pub region: String,
    /// `awsEndpoint`, or the service's regional endpoint.
    pub endpoint: url::Url,
    /// The credentials.
    pub signer: Signer,
    /// Timeout of one request.
    pub timeout: Duration,
}

/// Why a call failed. Never contains a secret key or a session token.
#[derive(Debug, thiserror::Error)]
pub enum AwsError {
    /// Sending, reading the answer, or an error answer (AWS' error code, such as
    /// `AWS.SimpleQueueService.NonExistentQueue` or `SignatureDoesNotMatch`, and its message).
    #[error(transparent)]
    Rest(#[from] RestError),
    /// The answer is not what the operation returns.
    #[error("unexpected answer: {0}")]
    Decode(String),
    /// The role of `awsRoleArn` could not be assumed.
    #[error("assuming awsRoleArn {role_arn} through STS at {endpoint} failed: {source}")]
    AssumeRole {
        /// The role.
        role_arn: String,
        /// STS's endpoint, without credentials or query.
        endpoint: String,
        /// The cause.
        #[source]
        source: Box<AwsError>,
    },
}

/// AWS' codes for credentials it does not accept.
fn credentials_hint(code: &str) -> &'static str {
    const CODES: &[&str] = &[
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "UnrecognizedClientException",
        "IncompleteSignature",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidAccessKeyId",
        "AccessDenied",
        "AccessDeniedException",
        "MissingAuthenticationToken",
    ];
    if CODES.iter().any(|c| code.ends_with(c)) {
        "; check the trigger's AWS credentials (awsAccessKeyID/awsSecretAccessKey, awsRoleArn) and their permissions"
    } else {
        ""
    }
}

/// How AWS' error answers read: the code of the `x-amzn-query-error` header (before its `;`),
/// else the body's; the message shortened to 300 characters.
const ERRORS: ErrorStyle = ErrorStyle {
    details: |headers: &HeaderMap, body: &[u8]| {
        let query_error = headers
            .get("x-amzn-query-error")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .map(str::to_string);
        let (code, message) = error_details(body);
        (query_error.or(code), message.chars().take(300).collect())
    },
    hint: credentials_hint,
    codes: &[
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "UnrecognizedClientException",
        "IncompleteSignature",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidAccessKeyId",
        "AccessDenied",
        "AccessDeniedException",
        "MissingAuthenticationToken",
        "InvalidSignatureException",
        "RequestExpired",
        "OptInRequired",
        "QueueDoesNotExist",
        "AWS.SimpleQueueService.NonExistentQueue",
        "ResourceNotFoundException",
        "ResourceNotFound",
        "ValidationException",
        "ValidationError",
        "InvalidParameterValue",
        "InvalidParameterCombination",
        "MissingParameter",
        "InvalidAction",
        "InvalidQueryParameter",
        "Throttling",
        "ThrottlingException",
        "RequestLimitExceeded",
        "ProvisionedThroughputExceededException",
        "RequestThrottled",
        "InternalFailure",
        "InternalError",
        "InternalServerError",
        "ServiceUnavailable",
        "RegionDisabledException",
    ],
};

impl crate::remote::Classify for AwsError {
    fn classify(&self) -> crate::remote::Failure {
        match self {
            Self::Rest(e) => e.classify(),
            // Built by keda-rs from the trigger and fixed words; a nested error answer shows
            // as its RestError does.
            other => crate::remote::Failure::local(other.to_string()),
        }
    }
}

/// Why a client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("building the AWS client failed: {0}")]
pub struct BuildError(String);

/// Credentials assumed from a role, and when they stop working.
pub(crate) struct Assumed {
    pub(crate) credentials: Credentials,
    pub(crate) expires: jiff::Timestamp,
}

/// A pooled client. See the module docs.
pub struct AwsClient {
    rest: RestClient,
    key: AwsClientKey,
    assumed: Mutex<Option<Assumed>>,
}

impl std::fmt::Debug for AwsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsClient")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl AwsClient {
    /// The client of `key`. Does not connect.
    ///
    /// # Errors
    /// reqwest refuses the configuration.
    pub fn new(key: AwsClientKey) -> Result<Self, BuildError> {
        let rest = RestClient::new(key.timeout).map_err(|e| BuildError(e.to_string()))?;
        Ok(Self {
            rest,
            key,
            assumed: Mutex::new(None),
        })
    }

    /// The key the client was built for.
    pub fn key(&self) -> &AwsClientKey {
        &self.key
    }

    /// Calls `operation` with `body` (JSON protocol) or `params` (query protocol) and returns
    /// the body of a 2xx answer. For the JSON protocol `input` is the JSON request; for the
    /// query protocol it is the form parameters after `Action` and `Version`.
    ///
    /// # Errors
    /// Sending fails or times out, AWS answers an error, assuming the role fails.
    pub async fn call(
        &self,
        operation: &str,
        input: &Input<'_>,
        clock: &Clock,
    ) -> Result<Bytes, AwsError> {
        let credentials = self.credentials(clock).await?;
        send(
            &self.rest,
            self.key.service,
            &self.key.region,
            &self.key.endpoint,
            &credentials,
            operation,
            input,
            clock.now(),
        )
        .await
    }

    /// The credentials to sign with now (see [`Self::credentials`]), for requests signed
    /// outside this client, such as the MSK IAM token of the `kafka` trigger.
    ///
    /// # Errors
    /// Assuming the role fails.
    pub async fn signing_credentials(&self, clock: &Clock) -> Result<Credentials, AwsError> {
        self.credentials(clock).await
    }

    /// The credentials to sign with now: the static ones, or the role's, assumed again when
    /// they expire within [`REFRESH_BEFORE_EXPIRY`].
    async fn credentials(&self, clock: &Clock) -> Result<Credentials, AwsError> {
        let (role_arn, external_id, base, sts_endpoint) = match &self.key.signer {
            Signer::Static(credentials) => return Ok(credentials.clone()),
            Signer::AssumeRole {
                role_arn,
                external_id,
                base,
                sts_endpoint,
            } => (role_arn, external_id, base, sts_endpoint),
        };
        // One refresh at a time: the others wait for it and use its result.
        let mut assumed = self.assumed.lock().await;
        let now = clock.now();
        if let Some(current) = assumed.as_ref()
            && now
                .checked_add(REFRESH_BEFORE_EXPIRY)
                .is_ok_and(|t| t < current.expires)
        {
            return Ok(current.credentials.clone());
        }
        let fresh = self
            .assume_role(role_arn, external_id.as_ref(), base, sts_endpoint, now)
            .await
            .map_err(|e| AwsError::AssumeRole {
                role_arn: role_arn.clone(),
                endpoint: describe_url(sts_endpoint),
                source: Box::new(e),
            })?;
        let credentials = fresh.credentials.clone();
        *assumed = Some(fresh);
        Ok(credentials)
    }

    async fn assume_role(
        &self,
        role_arn: &str,
        external_id: Option<&Secret>,
        base: &Credentials,
        sts_endpoint: &url::Url,
        now: jiff::Timestamp,
    ) -> Result<Assumed, AwsError> {
        let session = format!("keda-rs-{}", now.as_second());
        let duration = ASSUME_ROLE_SECONDS.to_string();
        let mut params = vec![
            ("RoleArn", role_arn),
            ("RoleSessionName", session.as_str()),
            ("DurationSeconds", duration.as_str()),
        ];
        if let Some(external_id) = external_id {
            params.push(("ExternalId", external_id.expose()));
        }
        let body = send(
            &self.rest,
            STS,
            &self.key.region,
            sts_endpoint,
            base,
            "AssumeRole",
            &Input::Query(&params),
            now,
        )
        .await?;
        parse_assume_role(&body)
    }
}

/// The input of one call.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// The JSON request body.
    Json(&'a serde_json::Value),
    /// Query parameters besides `Action` and `Version`.
    Query(&'a [(&'a str, &'a str)]),
}

#[allow(clippy::too_many_arguments)]
async fn send(
    rest: &RestClient,
    service: Service,
    region: &str,
    endpoint: &url::Url,
    credentials: &Credentials,
    operation: &str,
    input: &Input<'_>,
    now: jiff::Timestamp,
) -> Result<Bytes, AwsError> {
    let (content_type, target, body) = match (service.protocol, input) {
        (
            Protocol::Json {
                target_prefix,
                version,
            },
            Input::Json(json),
        ) => (
            if version == "1.1" {
                "application/x-amz-json-1.1"
            } else {
                "application/x-amz-json-1.0"
            },
            Some(format!("{target_prefix}.{operation}")),
            serde_json::to_vec(json).map_err(|e| AwsError::Decode(e.to_string()))?,
        ),
        (Protocol::Query { version }, Input::Query(params)) => {
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            form.append_pair("Action", operation)
                .append_pair("Version", version);
            for (k, v) in *params {
                form.append_pair(k, v);
            }
            (
                "application/x-www-form-urlencoded; charset=utf-8",
                None,
                form.finish().into_bytes(),
            )
        }
        _ => {
            return Err(AwsError::Decode(format!(
                "{operation}: the input does not match {}'s protocol",
                service.display
            )));
        }
    };
    let mut signed: Vec<(&str, &str)> = vec![("content-type", content_type)];
    if let Some(target) = &target {
        signed.push(("x-amz-target", target.as_str()));
    }
    let auth_headers = sigv4::sign(
        credentials,
        Scope {
            region,
            service: service.signing_name,
        },
        now,
        &sigv4::Request {
            method: "POST",
            url: endpoint,
            headers: &signed,
            body: &body,
        },
    );
    let mut request = rest.http().post(endpoint.clone()).body(body);
    for (name, value) in signed.iter().copied() {
        request = request.header(name, value);
    }
    for (name, value) in &auth_headers {
        request = request.header(*name, value);
    }
    let secrets = [
        credentials.secret_access_key.expose(),
        credentials
            .session_token
            .as_ref()
            .map_or("", |t| t.expose()),
    ];
    Ok(rest.send(request, &secrets, &ERRORS).await?.body)
}

/// The code and message of an AWS error body: JSON (`__type`, `message`/`Message`) or XML
/// (`<Code>`, `<Message>`).
pub fn error_details(body: &[u8]) -> (Option<String>, String) {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if let Ok(json) = crate::remote::from_json::<serde_json::Value>(text.as_bytes()) {
        let code = json
            .get("__type")
            .or_else(|| json.get("code"))
            .and_then(|v| v.as_str())
            // `com.amazonaws.sqs#QueueDoesNotExist` -> `QueueDoesNotExist`
            .map(|t| t.rsplit('#').next().unwrap_or(t).to_string());
        let message = json
            .get("message")
            .or_else(|| json.get("Message"))
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .trim()
            .to_string();
        return (code, message);
    }
    if let Ok(doc) = crate::remote::xml(text) {
        let find = |name: &str| {
            doc.descendants()
                .find(|n| n.has_tag_name(name))
                .and_then(|n| n.text())
                .map(|t| t.trim().to_string())
        };
        return (find("Code"), find("Message").unwrap_or_default());
    }
    (None, text.chars().take(300).collect())
}

/// The temporary credentials of an `AssumeRole` answer.
pub(crate) fn parse_assume_role(body: &[u8]) -> Result<Assumed, AwsError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| AwsError::Decode("AssumeRole answered no UTF-8 text".into()))?;
    let doc = crate::remote::xml(text).map_err(|e| {
        AwsError::Decode(format!(
            "AssumeRole answered {}",
            crate::remote::xml_error(&e)
        ))
    })?;
    let credentials = doc
        .descendants()
        .find(|n| n.has_tag_name("Credentials"))
        .ok_or_else(|| AwsError::Decode("AssumeRole answered no Credentials".into()))?;
    let field = |name: &str| {
        credentials
            .children()
            .find(|n| n.has_tag_name(name))
            .and_then(|n| n.text())
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| AwsError::Decode(format!("AssumeRole answered no Credentials.{name}")))
    };
    let expires: jiff::Timestamp = field("Expiration")?
        .parse()
        .map_err(|e| AwsError::Decode(format!("AssumeRole answered an invalid Expiration: {e}")))?;
    Ok(Assumed {
        credentials: Credentials {
            access_key_id: field("AccessKeyId")?.to_string(),
            secret_access_key: Secret::new(field("SecretAccessKey")?),
            session_token: Some(Secret::new(field("SessionToken")?)),
        },
        expires,
    })
}

/// A lease on the pooled client of `key`, building it if no trigger holds one. Does not
/// connect: a wrong endpoint or credentials show at the first call.
///
/// # Errors
/// The HTTP client cannot be built.
pub async fn lease(
    ctx: &ScalerContext,
    key: AwsClientKey,
) -> Result<Lease<AwsClientKey, AwsClient>, ScalerError> {
    let target = format!("{} at {}", key.service.display, describe_url(&key.endpoint));
    ctx.clients
        .pool::<AwsClientKey, AwsClient>()
        .get_or_connect(key.clone(), || async move { AwsClient::new(key) })
        .await
        .map_err(|e| ScalerError::Connect {
            trigger: ctx.trigger_id(),
            target,
            source: crate::remote::Failure::local(e.to_string()),
        })
}

/// The client key of a trigger of `service` with `settings`: the endpoint (`awsEndpoint` or
/// the regional one) and the credentials, the operator's own read from `ctx.process_env`.
///
/// # Errors
/// The trigger needs the operator's credentials and may not use them
/// ([`super::check_operator_identity`]), or the operator has none.
pub fn client_key(
    ctx: &ScalerContext,
    service: Service,
    settings: &super::AwsSettings,
) -> Result<AwsClientKey, ScalerError> {
    use super::AwsIdentity;
    let unexpected = |message: String| ScalerError::Unexpected {
        trigger: ctx.trigger_id(),
        message,
    };
    let endpoint = match &settings.endpoint {
        Some(endpoint) => endpoint.clone(),
        None => super::regional_endpoint(service.endpoint_prefix, &settings.region)
            .map_err(unexpected)?,
    };
    super::check_operator_identity(ctx, settings)?;
    let env = &ctx.process_env;
    let signer = match &settings.identity {
        AwsIdentity::Static(credentials) => Signer::Static(credentials.clone()),
        AwsIdentity::Operator => Signer::Static(super::operator_credentials(
            ctx,
            env,
            "identityOwner: operator",
        )?),
        AwsIdentity::AssumeRole {
            role_arn,
            external_id,
        } => {
            let base = super::operator_credentials(ctx, env, "awsRoleArn")?;
            let sts_endpoint = match env
                .get(super::ENV_ENDPOINT_URL_STS)
                .or_else(|| env.get(super::ENV_ENDPOINT_URL))
            {
                Some(raw) => url::Url::parse(raw.trim()).map_err(|e| {
                    unexpected(format!(
                        "the operator's {} / {} is not a URL: {e}",
                        super::ENV_ENDPOINT_URL_STS,
                        super::ENV_ENDPOINT_URL
                    ))
                })?,
                None => super::regional_endpoint(STS.endpoint_prefix, &settings.region)
                    .map_err(unexpected)?,
            };
            Signer::AssumeRole {
                role_arn: role_arn.clone(),
                external_id: external_id.clone(),
                base,
                sts_endpoint,
            }
        }
    };
    Ok(AwsClientKey {
        service,
        region: settings.region.clone(),
        endpoint,
        signer,
        timeout: ctx.global_http_timeout,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_of_both_protocols_give_code_and_message() {
        let (code, message) = error_details(
            br#"{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}"#,
        );
        assert_eq!(code.as_deref(), Some("QueueDoesNotExist"));
        assert_eq!(message, "The specified queue does not exist.");
        let (code, message) = error_details(
            b"<ErrorResponse><Error><Type>Sender</Type><Code>InvalidClientTokenId</Code>\
              <Message>The security token included in the request is invalid.</Message></Error></ErrorResponse>",
        );
        assert_eq!(code.as_deref(), Some("InvalidClientTokenId"));
        let code = code.unwrap();
        let err = AwsError::from(RestError::Service {
            status: http::StatusCode::FORBIDDEN,
            hint: credentials_hint(&code),
            shown: ERRORS.shown(&code),
            code,
            message,
        });
        assert_eq!(
            err.to_string(),
            "answered HTTP 403 Forbidden (InvalidClientTokenId); \
             check the trigger's AWS credentials (awsAccessKeyID/awsSecretAccessKey, awsRoleArn) and their permissions"
        );
        assert_eq!(
            ERRORS.shown("com.amazonaws.sqs#QueueDoesNotExist"),
            Some("QueueDoesNotExist")
        );
        assert_eq!(ERRORS.shown("SECRET-MARKER"), None);
    }

    #[test]
    fn an_assume_role_answer_gives_temporary_credentials() {
        let body = b"<AssumeRoleResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><AssumeRoleResult>\
            <Credentials><AccessKeyId>ASIA1</AccessKeyId><SecretAccessKey>sk</SecretAccessKey>\
            <SessionToken>tok</SessionToken><Expiration>2024-01-01T00:15:00Z</Expiration></Credentials>\
            </AssumeRoleResult></AssumeRoleResponse>";
        let assumed = parse_assume_role(body).unwrap();
        assert_eq!(assumed.credentials.access_key_id, "ASIA1");
        assert_eq!(assumed.credentials.secret_access_key.expose(), "sk");
        assert_eq!(
            assumed
                .credentials
                .session_token
                .as_ref()
                .map(Secret::expose),
            Some("tok")
        );
        assert_eq!(assumed.expires.to_string(), "2024-01-01T00:15:00Z");
        let err = parse_assume_role(b"<x/>").err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("unexpected answer: AssumeRole answered no Credentials")
        );
    }
}
