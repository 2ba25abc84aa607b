//! What the aws-* scalers share: their common parameters (`awsRegion`, `awsEndpoint`,
//! `identityOwner` and the credentials), KEDA's rules for choosing the credentials
//! (`pkg/scalers/aws/aws_common.go` `GetAwsAuthorization`), and a small pooled AWS client of our
//! own: Signature Version 4 ([`sigv4`]) over the shared reqwest stack, the JSON and query
//! protocols, and STS `AssumeRole` for `awsRoleArn` ([`client`]).
//!
//! Credentials, in KEDA's order (with `identityOwner` absent or `pod`):
//! 1. `awsRoleArn` (+ `awsExternalId`) from the TriggerAuthentication: the role is assumed with
//!    the operator's own credentials;
//! 2. `awsAccessKeyID` (or `awsAccessKeyId`), `awsSecretAccessKey`, `awsSessionToken` from the
//!    TriggerAuthentication;
//! 3. `awsAccessKeyID` (metadata) or `awsAccessKeyIDFromEnv`, with `awsSecretAccessKeyFromEnv`.
//!
//! With `identityOwner: operator` the operator's own credentials are used (and `awsRoleArn`, if
//! set, is assumed with them). The operator's own credentials are the `AWS_ACCESS_KEY_ID`,
//! `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN` of its environment; the rest of the AWS SDK's
//! default chain (web identity tokens, profiles, instance metadata) and the `aws` pod identity
//! provider are not supported yet, and say so.
//!
//! The operator's identity is the administrator's: a trigger uses it on a namespace's behalf
//! only as [`check_operator_identity`] allows (a ClusterTriggerAuthentication's `awsRoleArn`,
//! or everything with `--allow-namespace-aws-operator-identity`).

pub mod client;
pub mod sigv4;
pub mod source;

use crate::context::{ProcessEnv, ScalerContext};
use crate::error::{MetadataError, MetadataErrorKind, ScalerError, Source};
use crate::metadata::{AUTH, METADATA, METADATA_AUTH, MetadataParser, Param};
use crate::secret::Secret;

pub use client::{AwsClient, AwsClientKey, AwsError, Protocol};
pub use sigv4::Credentials;

/// Lookup order: `<name>FromEnv` only.
const ENV: &[Source] = &[Source::Env];
/// Lookup order: metadata, then `<name>FromEnv`.
const METADATA_ENV: &[Source] = &[Source::Metadata, Source::Env];

/// `awsRegion` (metadata, then TriggerAuthentication; required).
pub const AWS_REGION: Param = Param::required("awsRegion").order(METADATA_AUTH);
/// `awsEndpoint`: a base URL replacing the service's regional endpoint.
pub const AWS_ENDPOINT: Param = Param::optional("awsEndpoint").order(METADATA);
/// `identityOwner`: `pod` (default) or `operator`.
pub const IDENTITY_OWNER: Param = Param::optional("identityOwner")
    .order(METADATA)
    .allowed(&["pod", "operator"]);
/// `awsRoleArn` (TriggerAuthentication).
pub const AWS_ROLE_ARN: Param = Param::optional("awsRoleArn").order(AUTH);
/// `awsExternalId` (TriggerAuthentication), sent with `awsRoleArn`.
pub const AWS_EXTERNAL_ID: Param = Param::optional("awsExternalId").order(AUTH).secret();
/// `awsAccessKeyID` / `awsAccessKeyId` (TriggerAuthentication).
pub const AWS_ACCESS_KEY_ID_AUTH: Param = Param::optional("awsAccessKeyID")
    .aliases(&["awsAccessKeyId"])
    .order(AUTH);
/// `awsSecretAccessKey` (TriggerAuthentication).
pub const AWS_SECRET_ACCESS_KEY_AUTH: Param =
    Param::optional("awsSecretAccessKey").order(AUTH).secret();
/// `awsSessionToken` (TriggerAuthentication).
pub const AWS_SESSION_TOKEN: Param = Param::optional("awsSessionToken").order(AUTH).secret();
/// `awsAccessKeyID` in the metadata or `awsAccessKeyIDFromEnv`.
pub const AWS_ACCESS_KEY_ID_METADATA: Param = Param::optional("awsAccessKeyID").order(METADATA_ENV);
/// `awsSecretAccessKeyFromEnv` (never the metadata itself).
pub const AWS_SECRET_ACCESS_KEY_ENV: Param =
    Param::optional("awsSecretAccessKey").order(ENV).secret();

/// The parameters every aws-* scaler declares, for docs and checks.
pub const COMMON_PARAMS: [Param; 10] = [
    AWS_REGION,
    AWS_ENDPOINT,
    IDENTITY_OWNER,
    AWS_ROLE_ARN,
    AWS_EXTERNAL_ID,
    AWS_ACCESS_KEY_ID_AUTH,
    AWS_SECRET_ACCESS_KEY_AUTH,
    AWS_SESSION_TOKEN,
    AWS_ACCESS_KEY_ID_METADATA,
    AWS_SECRET_ACCESS_KEY_ENV,
];

/// The operator's own credentials, in its environment.
pub const ENV_ACCESS_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
/// See [`ENV_ACCESS_KEY_ID`].
pub const ENV_SECRET_ACCESS_KEY: &str = "AWS_SECRET_ACCESS_KEY";
/// See [`ENV_ACCESS_KEY_ID`].
pub const ENV_SESSION_TOKEN: &str = "AWS_SESSION_TOKEN";
/// The AWS SDKs' endpoint override for STS, then for every service (`AWS_ENDPOINT_URL`): where
/// `awsRoleArn` is assumed. `awsEndpoint` applies to the scaler's own service only, as in KEDA.
pub const ENV_ENDPOINT_URL_STS: &str = "AWS_ENDPOINT_URL_STS";
/// See [`ENV_ENDPOINT_URL_STS`].
pub const ENV_ENDPOINT_URL: &str = "AWS_ENDPOINT_URL";

/// Whose credentials a trigger uses, as parsed (before the operator's own are read).
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum AwsIdentity {
    /// An access key from the TriggerAuthentication or the target's environment.
    Static(Credentials),
    /// The operator's own credentials (`identityOwner: operator`).
    Operator,
    /// `awsRoleArn`, assumed with the operator's own credentials.
    AssumeRole {
        /// The role.
        role_arn: String,
        /// `awsExternalId`.
        external_id: Option<Secret>,
    },
}

impl std::fmt::Debug for AwsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Static(c) => f.debug_tuple("Static").field(c).finish(),
            Self::Operator => f.write_str("Operator"),
            Self::AssumeRole { role_arn, .. } => f
                .debug_struct("AssumeRole")
                .field("role_arn", role_arn)
                .finish_non_exhaustive(),
        }
    }
}

/// The AWS settings of one trigger.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AwsSettings {
    /// `awsRegion`.
    pub region: String,
    /// `awsEndpoint`, parsed.
    pub endpoint: Option<url::Url>,
    /// Whose credentials.
    pub identity: AwsIdentity,
}

impl AwsSettings {
    /// Parses `awsRegion`, `awsEndpoint`, `identityOwner` and the credentials, with KEDA's
    /// rules.
    ///
    /// # Errors
    /// `awsRegion` missing or not a region name, `awsEndpoint` not an http(s) URL,
    /// `identityOwner` not `pod`/`operator`, no credentials, or an access key without its
    /// secret.
    pub fn parse(p: &MetadataParser<'_>) -> Result<Self, MetadataError> {
        let region: String = p.get(&AWS_REGION)?;
        if !region
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            // Only from metadata is it shown: the parser's rule for values.
            let found = p.find(&AWS_REGION)?;
            return Err(match found {
                Some(found) => p.invalid(&AWS_REGION, found, "an AWS region name like us-east-1"),
                None => p.error(MetadataErrorKind::Missing {
                    param: AWS_REGION.name.to_string(),
                }),
            });
        }
        let endpoint = match p.get_opt::<String>(&AWS_ENDPOINT)? {
            Some(raw) => Some(crate::http_client::parse_http_url(p, &AWS_ENDPOINT, &raw)?),
            None => None,
        };
        let owner: Option<String> = p.get_opt(&IDENTITY_OWNER)?;
        let role_arn: Option<String> = p.get_opt(&AWS_ROLE_ARN)?;
        let external_id: Option<Secret> = p.get_opt(&AWS_EXTERNAL_ID)?;
        let identity = match (owner.as_deref(), role_arn) {
            (_, Some(role_arn)) => AwsIdentity::AssumeRole {
                role_arn,
                external_id,
            },
            (Some("operator"), None) => AwsIdentity::Operator,
            (_, None) => AwsIdentity::Static(static_credentials(p)?),
        };
        Ok(Self {
            region,
            endpoint,
            identity,
        })
    }
}

impl AwsSettings {
    /// The parameter that chose the endpoint, for errors: `awsEndpoint`, or `awsRegion` for
    /// the service's regional endpoint.
    pub fn endpoint_parameter(&self) -> &'static str {
        if self.endpoint.is_some() {
            AWS_ENDPOINT.name
        } else {
            AWS_REGION.name
        }
    }
}

/// KEDA's cases 2 and 3: a key from the TriggerAuthentication, else from the metadata or the
/// target's environment.
fn static_credentials(p: &MetadataParser<'_>) -> Result<Credentials, MetadataError> {
    if let Some(access_key_id) = p.get_opt::<String>(&AWS_ACCESS_KEY_ID_AUTH)? {
        let secret: Secret = p.get_opt(&AWS_SECRET_ACCESS_KEY_AUTH)?.ok_or_else(|| {
            p.rule(
                "missing required parameter \"awsSecretAccessKey\" (TriggerAuthentication) for \
                 awsAccessKeyID",
            )
        })?;
        return Ok(Credentials {
            access_key_id,
            secret_access_key: secret,
            session_token: p.get_opt(&AWS_SESSION_TOKEN)?,
        });
    }
    let Some(access_key_id) = p.get_opt::<String>(&AWS_ACCESS_KEY_ID_METADATA)? else {
        return Err(p.rule(
            "no AWS credentials: set awsRoleArn, or awsAccessKeyID and awsSecretAccessKey, in a \
             TriggerAuthentication (or awsAccessKeyID/awsAccessKeyIDFromEnv with \
             awsSecretAccessKeyFromEnv in the metadata), or identityOwner: operator",
        ));
    };
    let secret: Secret = p.get_opt(&AWS_SECRET_ACCESS_KEY_ENV)?.ok_or_else(|| {
        p.rule(
            "missing required parameter \"awsSecretAccessKeyFromEnv\" for awsAccessKeyID: the \
             secret access key must come from the target's environment",
        )
    })?;
    Ok(Credentials {
        access_key_id,
        secret_access_key: secret,
        session_token: None,
    })
}

/// The operator flag that lets every namespace use the operator's own AWS identity.
pub const ALLOW_NAMESPACE_OPERATOR_IDENTITY_FLAG: &str = "--allow-namespace-aws-operator-identity";

/// Whether the trigger may use what `settings` asks of the operator's own AWS identity
/// (`ctx.operator_identity`):
/// - `identityOwner: operator` is written in the ScaledObject, by a tenant: it needs the
///   administrator's [`ALLOW_NAMESPACE_OPERATOR_IDENTITY_FLAG`];
/// - `awsRoleArn` is assumed with the operator's credentials: from a
///   ClusterTriggerAuthentication (the administrator's) it may be, from a namespaced
///   TriggerAuthentication only with that flag;
/// - either with `awsEndpoint`, the requests signed with those credentials (and their session
///   token) would go to a server the tenant names: only with that flag.
///
/// # Errors
/// A metadata error naming the parameter, what it would do and the flag; nothing of the
/// credentials.
pub fn check_operator_identity(
    ctx: &ScalerContext,
    settings: &AwsSettings,
) -> Result<(), ScalerError> {
    let grant = ctx.operator_identity;
    if grant.namespaces {
        return Ok(());
    }
    let refuse = |message: String| {
        Err(ScalerError::Metadata(MetadataError {
            trigger: ctx.trigger_id(),
            kind: MetadataErrorKind::Rule(message),
        }))
    };
    let flag = ALLOW_NAMESPACE_OPERATOR_IDENTITY_FLAG;
    match &settings.identity {
        AwsIdentity::Static(_) => Ok(()),
        AwsIdentity::Operator => refuse(format!(
            "parameter \"{}\": \"operator\" would make keda-rs sign this namespace's requests \
             with the operator's own AWS credentials, which the administrator has not allowed: \
             use awsRoleArn in a ClusterTriggerAuthentication, or credentials of this namespace \
             in a TriggerAuthentication (the administrator may allow it with {flag})",
            IDENTITY_OWNER.name
        )),
        AwsIdentity::AssumeRole { .. } if !grant.cluster_auth => refuse(format!(
            "parameter \"{}\" of a namespaced TriggerAuthentication would make keda-rs assume \
             the role with the operator's own AWS credentials, which the administrator has not \
             allowed: put the role in a ClusterTriggerAuthentication, or use credentials of this \
             namespace (the administrator may allow it with {flag})",
            AWS_ROLE_ARN.name
        )),
        AwsIdentity::AssumeRole { .. } if settings.endpoint.is_some() => refuse(format!(
            "parameter \"{}\" with awsRoleArn would send requests signed with credentials the \
             operator obtained to a server this namespace names; remove awsEndpoint (the \
             administrator may allow it with {flag})",
            AWS_ENDPOINT.name
        )),
        AwsIdentity::AssumeRole { .. } => Ok(()),
    }
}

/// The operator's own credentials from its environment.
///
/// # Errors
/// `AWS_ACCESS_KEY_ID` or `AWS_SECRET_ACCESS_KEY` is not set; the message says what uses them
/// (`why`) and what is not supported.
pub fn operator_credentials(
    ctx: &ScalerContext,
    env: &ProcessEnv,
    why: &str,
) -> Result<Credentials, ScalerError> {
    match (env.get(ENV_ACCESS_KEY_ID), env.get(ENV_SECRET_ACCESS_KEY)) {
        (Some(access_key_id), Some(secret)) => Ok(Credentials {
            access_key_id,
            secret_access_key: Secret::new(secret),
            session_token: env.get(ENV_SESSION_TOKEN).map(Secret::new),
        }),
        _ => Err(ScalerError::Metadata(MetadataError {
            trigger: ctx.trigger_id(),
            kind: MetadataErrorKind::Rule(format!(
                "{why} uses the operator's own AWS credentials, and the operator has none: set \
                 {ENV_ACCESS_KEY_ID} and {ENV_SECRET_ACCESS_KEY} in its environment (web identity \
                 tokens, profiles, instance metadata and podIdentity provider aws are not \
                 supported by keda-rs yet)"
            )),
        })),
    }
}

/// The host suffix of a region's endpoints.
fn dns_suffix(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "amazonaws.com.cn"
    } else {
        "amazonaws.com"
    }
}

/// `https://<prefix>.<region>.amazonaws.com/` (`.com.cn` in China).
///
/// # Errors
/// Never for a region that passed [`AwsSettings::parse`]; the error names the region.
pub fn regional_endpoint(prefix: &str, region: &str) -> Result<url::Url, String> {
    url::Url::parse(&format!(
        "https://{prefix}.{region}.{}/",
        dns_suffix(region)
    ))
    .map_err(|e| format!("no endpoint for region {region}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::test_context;

    fn parse(
        metadata: &[(&str, &str)],
        env: &[(&str, &str)],
        auth: &[(&str, &str)],
    ) -> Result<AwsSettings, MetadataError> {
        test_context("aws-sqs-queue", 1, metadata, env, auth).parse(AwsSettings::parse)
    }

    fn key(id: &str, secret: &str, token: Option<&str>) -> AwsIdentity {
        AwsIdentity::Static(Credentials {
            access_key_id: id.into(),
            secret_access_key: Secret::new(secret),
            session_token: token.map(Secret::new),
        })
    }

    #[test]
    fn credentials_follow_keda_order() {
        let region = ("awsRegion", "eu-west-1");
        let role = AwsIdentity::AssumeRole {
            role_arn: "arn:aws:iam::1:role/r".into(),
            external_id: Some(Secret::new("ext")),
        };
        // (metadata, env, auth, identity)
        type Row<'a> = (
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, &'a str)],
            AwsIdentity,
        );
        let rows: &[Row<'_>] = &[
            // awsRoleArn wins over keys in the same TriggerAuthentication
            (
                &[region],
                &[],
                &[
                    ("awsRoleArn", "arn:aws:iam::1:role/r"),
                    ("awsExternalId", "ext"),
                    ("awsAccessKeyID", "AKIA1"),
                    ("awsSecretAccessKey", "s1"),
                ],
                role.clone(),
            ),
            // keys from the TriggerAuthentication, either spelling, with a session token
            (
                &[region, ("awsAccessKeyID", "AKIAMETA")],
                &[],
                &[
                    ("awsAccessKeyId", "AKIA2"),
                    ("awsSecretAccessKey", "s2"),
                    ("awsSessionToken", "t2"),
                ],
                key("AKIA2", "s2", Some("t2")),
            ),
            // metadata key with the secret from the target's environment
            (
                &[
                    region,
                    ("awsAccessKeyIDFromEnv", "KEY"),
                    ("awsSecretAccessKeyFromEnv", "SECRET"),
                ],
                &[("KEY", "AKIA3"), ("SECRET", "s3")],
                &[],
                key("AKIA3", "s3", None),
            ),
            // identityOwner: operator ignores keys; with a role it assumes it
            (
                &[region, ("identityOwner", "operator")],
                &[],
                &[("awsAccessKeyID", "AKIA1"), ("awsSecretAccessKey", "s1")],
                AwsIdentity::Operator,
            ),
            (
                &[region, ("identityOwner", "operator")],
                &[],
                &[
                    ("awsRoleArn", "arn:aws:iam::1:role/r"),
                    ("awsExternalId", "ext"),
                ],
                role,
            ),
        ];
        for (i, (metadata, env, auth, expected)) in rows.iter().enumerate() {
            let settings = parse(metadata, env, auth).unwrap_or_else(|e| panic!("row {i}: {e}"));
            assert_eq!(&settings.identity, expected, "row {i}");
            assert_eq!(settings.region, "eu-west-1");
        }
    }

    #[test]
    fn errors_name_the_parameter_and_never_the_secret() {
        // (metadata, auth, error)
        type Row<'a> = (&'a [(&'a str, &'a str)], &'a [(&'a str, &'a str)], &'a str);
        let rows: &[Row<'_>] = &[
            (
                &[],
                &[
                    ("awsAccessKeyID", "AKIA1"),
                    ("awsSecretAccessKey", "s3cret-key"),
                ],
                r#"trigger 1 (aws-sqs-queue): missing required parameter "awsRegion""#,
            ),
            (
                &[("awsRegion", "eu west")],
                &[
                    ("awsAccessKeyID", "AKIA1"),
                    ("awsSecretAccessKey", "s3cret-key"),
                ],
                r#"trigger 1 (aws-sqs-queue): parameter "awsRegion": "eu west" is not an AWS region name like us-east-1"#,
            ),
            (
                &[("awsRegion", "eu-west-1")],
                &[],
                "trigger 1 (aws-sqs-queue): no AWS credentials: set awsRoleArn, or awsAccessKeyID and awsSecretAccessKey, in a TriggerAuthentication (or awsAccessKeyID/awsAccessKeyIDFromEnv with awsSecretAccessKeyFromEnv in the metadata), or identityOwner: operator",
            ),
            (
                &[("awsRegion", "eu-west-1")],
                &[("awsAccessKeyID", "AKIA1")],
                r#"trigger 1 (aws-sqs-queue): missing required parameter "awsSecretAccessKey" (TriggerAuthentication) for awsAccessKeyID"#,
            ),
            (
                &[("awsRegion", "eu-west-1"), ("awsAccessKeyID", "AKIA1")],
                &[],
                "trigger 1 (aws-sqs-queue): missing required parameter \"awsSecretAccessKeyFromEnv\" for awsAccessKeyID: the secret access key must come from the target's environment",
            ),
            (
                &[("awsRegion", "eu-west-1"), ("identityOwner", "keda")],
                &[],
                r#"trigger 1 (aws-sqs-queue): parameter "identityOwner": "keda" is not one of pod, operator"#,
            ),
            (
                &[
                    ("awsRegion", "eu-west-1"),
                    ("awsEndpoint", "localhost:4566"),
                ],
                &[
                    ("awsAccessKeyID", "AKIA1"),
                    ("awsSecretAccessKey", "s3cret-key"),
                ],
                r#"trigger 1 (aws-sqs-queue): parameter "awsEndpoint" must be an http:// or https:// URL, not localhost:"#,
            ),
        ];
        for (i, (metadata, auth, expected)) in rows.iter().enumerate() {
            let err = parse(metadata, &[], auth).expect_err("invalid").to_string();
            assert_eq!(err, *expected, "row {i}");
            assert!(!err.contains("s3cret-key"), "row {i}: {err}");
        }
    }

    #[test]
    fn regional_endpoints() {
        assert_eq!(
            regional_endpoint("sqs", "eu-west-1").unwrap().as_str(),
            "https://sqs.eu-west-1.amazonaws.com/"
        );
        assert_eq!(
            regional_endpoint("monitoring", "cn-north-1")
                .unwrap()
                .as_str(),
            "https://monitoring.cn-north-1.amazonaws.com.cn/"
        );
    }

    #[test]
    fn the_operator_credentials_come_from_its_environment() {
        let ctx = test_context("aws-sqs-queue", 0, &[], &[], &[]);
        let env = ProcessEnv::from_pairs(&[
            ("AWS_ACCESS_KEY_ID", "AKIAOP"),
            ("AWS_SECRET_ACCESS_KEY", "op-secret"),
        ]);
        let creds = operator_credentials(&ctx, &env, "awsRoleArn").unwrap();
        assert_eq!(creds.access_key_id, "AKIAOP");
        assert_eq!(creds.session_token, None);
        let err = operator_credentials(&ctx, &ProcessEnv::from_pairs(&[]), "awsRoleArn")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "trigger 0 (aws-sqs-queue): awsRoleArn uses the operator's own AWS credentials, and the operator has none"
            ),
            "{err}"
        );
    }

    #[test]
    fn the_operator_identity_is_used_only_where_the_administrator_granted_it() {
        use crate::context::OperatorIdentityGrant;
        let region = ("awsRegion", "eu-west-1");
        let endpoint = ("awsEndpoint", "http://tenant.example:4566");
        let role = ("awsRoleArn", "arn:aws:iam::1:role/r");
        let operator_env = ProcessEnv::from_pairs(&[
            ("AWS_ACCESS_KEY_ID", "AKIAOP"),
            ("AWS_SECRET_ACCESS_KEY", "op-secret"),
            ("AWS_SESSION_TOKEN", "op-token"),
        ]);
        let none = OperatorIdentityGrant::default();
        let cluster = OperatorIdentityGrant {
            cluster_auth: true,
            namespaces: false,
        };
        let namespaces = OperatorIdentityGrant {
            cluster_auth: false,
            namespaces: true,
        };
        // (metadata, auth, grant, refused parameter or None)
        type Row<'a> = (
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, &'a str)],
            OperatorIdentityGrant,
            Option<&'a str>,
        );
        let rows: &[Row<'_>] = &[
            // the tenant's own keys need no grant, whatever the endpoint
            (
                &[region, endpoint],
                &[("awsAccessKeyID", "AKIA1"), ("awsSecretAccessKey", "s1")],
                none,
                None,
            ),
            // identityOwner: operator, written by the tenant: only with the flag
            (
                &[region, ("identityOwner", "operator")],
                &[],
                none,
                Some("\"identityOwner\""),
            ),
            (
                &[region, ("identityOwner", "operator")],
                &[],
                cluster,
                Some("\"identityOwner\""),
            ),
            (
                &[region, ("identityOwner", "operator")],
                &[],
                namespaces,
                None,
            ),
            // a role of a namespaced TriggerAuthentication: only with the flag
            (
                &[region],
                &[role],
                none,
                Some("\"awsRoleArn\" of a namespaced"),
            ),
            (&[region], &[role], namespaces, None),
            // a role of a ClusterTriggerAuthentication: yes, but not towards the tenant's server
            (&[region], &[role], cluster, None),
            (
                &[region, endpoint],
                &[role],
                cluster,
                Some("\"awsEndpoint\""),
            ),
            (&[region, endpoint], &[role], namespaces, None),
        ];
        for (i, (metadata, auth, grant, refused)) in rows.iter().enumerate() {
            let mut ctx = test_context("aws-sqs-queue", 1, metadata, &[], auth);
            ctx.operator_identity = *grant;
            ctx.process_env = operator_env.clone();
            let settings = ctx
                .parse(AwsSettings::parse)
                .unwrap_or_else(|e| panic!("row {i}: {e}"));
            let result = client::client_key(&ctx, client::SQS, &settings);
            match (refused, result) {
                (None, Ok(_)) => {}
                (Some(param), Err(e)) => {
                    let e = e.to_string();
                    assert!(
                        e.starts_with("trigger 1 (aws-sqs-queue): parameter "),
                        "row {i}: {e}"
                    );
                    assert!(e.contains(param), "row {i}: {e}");
                    assert!(
                        e.contains(ALLOW_NAMESPACE_OPERATOR_IDENTITY_FLAG),
                        "row {i}: {e}"
                    );
                    for secret in ["op-secret", "op-token", "AKIAOP"] {
                        assert!(!e.contains(secret), "row {i}: {e}");
                    }
                }
                (refused, Ok(_)) => panic!("row {i}: built, expected refusal of {refused:?}"),
                (None, Err(e)) => panic!("row {i}: {e}"),
            }
        }
    }
}
