//! The (Cluster)TriggerAuthentication rules of KEDA's webhook.

use crate::trigger_authentication::{
    ClusterTriggerAuthentication, OAUTH2_CLIENT_CREDENTIALS, POD_IDENTITY_AWS,
    POD_IDENTITY_AZURE_WORKLOAD, TriggerAuthentication, TriggerAuthenticationSpec,
};

use super::{ValidationError, ValidationErrors, into_result};

/// Validates a namespaced TriggerAuthentication: the rules of
/// [`validate_trigger_authentication_spec`], and `filePath` is refused (cluster-scoped only).
///
/// # Errors
/// Every violation found, see [`ValidationErrors`].
pub fn validate_trigger_authentication(ta: &TriggerAuthentication) -> Result<(), ValidationErrors> {
    let mut errors = spec_errors(&ta.spec);
    if ta.spec.file_path.as_deref().is_some_and(|p| !p.is_empty()) {
        errors.push(ValidationError::FilePathNotClusterScoped);
    }
    into_result(errors)
}

/// Validates a ClusterTriggerAuthentication: the rules of
/// [`validate_trigger_authentication_spec`].
///
/// # Errors
/// Every violation found, see [`ValidationErrors`].
pub fn validate_cluster_trigger_authentication(
    cta: &ClusterTriggerAuthentication,
) -> Result<(), ValidationErrors> {
    validate_trigger_authentication_spec(&cta.spec)
}

/// Rules of KEDA's (Cluster)TriggerAuthentication webhook:
/// - `azure-workload`: `identityId` and `identityTenantId` not empty when set;
///   `identityAuthorityHost` needs `identityTenantId`;
/// - `aws`: `roleArn` not with `identityOwner: workload`; `externalID` needs `roleArn`;
/// - `oauth2`: type `clientCredentials`, `clientId` and `tokenUrl` required, `tokenUrl` an
///   http(s) URL with a host.
///
/// Deliberate difference: KEDA skips the oauth2 checks when `podIdentity` names another provider
/// (an early return); keda-rs always checks oauth2.
///
/// # Errors
/// Every violation found, see [`ValidationErrors`].
pub fn validate_trigger_authentication_spec(
    spec: &TriggerAuthenticationSpec,
) -> Result<(), ValidationErrors> {
    into_result(spec_errors(spec))
}

fn spec_errors(spec: &TriggerAuthenticationSpec) -> Vec<ValidationError> {
    const P: &str = "spec.";
    let mut errors = Vec::new();
    if let Some(pi) = &spec.pod_identity {
        let set_nonempty = |v: &Option<String>| v.as_deref().is_some_and(|s| !s.is_empty());
        match pi.provider.as_str() {
            POD_IDENTITY_AZURE_WORKLOAD => {
                if pi.identity_id.as_deref() == Some("") {
                    errors.push(ValidationError::EmptyIdentityId { prefix: P });
                }
                if set_nonempty(&pi.identity_authority_host) {
                    if !set_nonempty(&pi.identity_tenant_id) {
                        errors.push(ValidationError::AuthorityHostWithoutTenant { prefix: P });
                    }
                } else if pi.identity_tenant_id.as_deref() == Some("") {
                    errors.push(ValidationError::EmptyIdentityTenantId { prefix: P });
                }
            }
            POD_IDENTITY_AWS => {
                if set_nonempty(&pi.role_arn) && pi.is_workload_identity_owner() {
                    errors.push(ValidationError::RoleArnWithWorkloadOwner { prefix: P });
                }
                if set_nonempty(&pi.external_id) && !set_nonempty(&pi.role_arn) {
                    errors.push(ValidationError::ExternalIdWithoutRoleArn { prefix: P });
                }
            }
            _ => {}
        }
    }
    if let Some(o) = &spec.oauth2 {
        if o.grant_type() != OAUTH2_CLIENT_CREDENTIALS {
            errors.push(ValidationError::OAuth2Type {
                type_: o.grant_type().to_string(),
            });
        }
        if o.client_id.is_empty() {
            errors.push(ValidationError::OAuth2ClientIdMissing);
        }
        if o.token_url.is_empty() {
            errors.push(ValidationError::OAuth2TokenUrlMissing);
        } else if !is_http_url_with_host(&o.token_url) {
            errors.push(ValidationError::OAuth2TokenUrlInvalid {
                url: o.token_url.clone(),
            });
        }
    }
    errors
}

/// `http://host...` or `https://host...` with a non-empty host (case-insensitive scheme).
fn is_http_url_with_host(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return false;
    }
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    !host.is_empty() && !host.starts_with(':')
}
