//! Every failure the metrics-apiserver answers, classified once into a Kubernetes `Status`.

use actix_web::http::StatusCode;
use actix_web::{HttpResponse, ResponseError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use keda_api::annotations::SCALED_OBJECT_NAME_LABEL;
use keda_api::external_metrics::GROUP;

/// What the metrics-apiserver answers instead of a value. Each variant maps to one HTTP status
/// and one Kubernetes `Status.reason`; messages say what the caller must fix.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The `labelSelector` does not name a ScaledObject.
    #[error(
        "scaledObject name is not specified: the labelSelector must contain \
         {SCALED_OBJECT_NAME_LABEL}=<ScaledObject name>"
    )]
    MissingScaledObjectName,
    /// The `labelSelector` cannot be parsed.
    #[error("invalid labelSelector {selector:?}: {reason}")]
    InvalidSelector {
        /// The selector as given.
        selector: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The caller did not authenticate as the front proxy (kube-apiserver aggregator).
    #[error("Unauthorized: {0}")]
    Unauthenticated(String),
    /// The SubjectAccessReview denied the request.
    #[error(
        "{GROUP} \"{metric}\" is forbidden: User \"{user}\" cannot list resource \"{metric}\" in \
         API group \"{GROUP}\" in the namespace \"{namespace}\"{}",
        reason_suffix(.reason)
    )]
    Forbidden {
        /// The requesting user.
        user: String,
        /// The metric (the resource of the review).
        metric: String,
        /// The namespace.
        namespace: String,
        /// The authorizer's reason, if it gave one.
        reason: String,
    },
    /// Asking the API server for a SubjectAccessReview failed.
    #[error("authorizing the request failed: {0}")]
    AuthorizationFailed(String),
    /// The operator does not know the ScaledObject, or the ScaledObject has no such metric.
    #[error("{0}")]
    NotFound(String),
    /// No route matches.
    #[error("the server could not find the requested resource {0}")]
    NoSuchPath(String),
    /// The operator cannot be reached or says it cannot answer now.
    #[error("the keda-rs operator's metric service is unavailable: {0}")]
    OperatorUnavailable(String),
    /// The operator did not answer in time.
    #[error("the keda-rs operator's metric service did not answer in time: {0}")]
    OperatorTimeout(String),
    /// The operator answered that reading the metric failed, or answered something unusable.
    #[error("{0}")]
    Internal(String),
}

fn reason_suffix(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(": {reason}")
    }
}

impl ApiError {
    /// The Kubernetes `Status.reason` of this error.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::MissingScaledObjectName | Self::InvalidSelector { .. } => "BadRequest",
            Self::Unauthenticated(_) => "Unauthorized",
            Self::Forbidden { .. } => "Forbidden",
            Self::NotFound(_) | Self::NoSuchPath(_) => "NotFound",
            Self::OperatorUnavailable(_) => "ServiceUnavailable",
            Self::OperatorTimeout(_) => "Timeout",
            Self::AuthorizationFailed(_) | Self::Internal(_) => "InternalError",
        }
    }

    /// The `Status` object of this error.
    pub fn to_status(&self) -> Status {
        Status {
            code: Some(i32::from(self.status_code().as_u16())),
            message: Some(self.to_string()),
            reason: Some(self.reason().to_string()),
            status: Some("Failure".to_string()),
            ..Status::default()
        }
    }
}

impl ResponseError for ApiError {
    fn status_code(&self) -> StatusCode {
        match self {
            Self::MissingScaledObjectName | Self::InvalidSelector { .. } => StatusCode::BAD_REQUEST,
            Self::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            Self::Forbidden { .. } => StatusCode::FORBIDDEN,
            Self::NotFound(_) | Self::NoSuchPath(_) => StatusCode::NOT_FOUND,
            Self::OperatorUnavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::OperatorTimeout(_) => StatusCode::GATEWAY_TIMEOUT,
            Self::AuthorizationFailed(_) | Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    fn error_response(&self) -> HttpResponse {
        HttpResponse::build(self.status_code()).json(self.to_status())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_become_kubernetes_status_objects_with_their_code() {
        let error = ApiError::MissingScaledObjectName;
        let json = serde_json::to_value(error.to_status()).expect("serializes");
        assert_eq!(json["kind"], "Status");
        assert_eq!(json["apiVersion"], "v1");
        assert_eq!(json["status"], "Failure");
        assert_eq!(json["reason"], "BadRequest");
        assert_eq!(json["code"], 400);
        assert!(
            json["message"]
                .as_str()
                .is_some_and(|m| m.contains("scaledobject.keda.sh/name")),
            "{json}"
        );
    }

    #[test]
    fn forbidden_names_the_user_the_metric_and_the_namespace_as_kubernetes_does() {
        let error = ApiError::Forbidden {
            user: "bob".into(),
            metric: "s0-redis-jobs".into(),
            namespace: "apps".into(),
            reason: String::new(),
        };
        assert_eq!(
            error.to_string(),
            "external.metrics.k8s.io \"s0-redis-jobs\" is forbidden: User \"bob\" cannot list \
             resource \"s0-redis-jobs\" in API group \"external.metrics.k8s.io\" in the namespace \
             \"apps\""
        );
        assert_eq!(error.status_code(), StatusCode::FORBIDDEN);
    }

    #[test]
    fn each_error_has_the_status_code_kubernetes_clients_expect() {
        for (error, code) in [
            (ApiError::Unauthenticated("x".into()), 401),
            (ApiError::NotFound("x".into()), 404),
            (ApiError::OperatorUnavailable("x".into()), 503),
            (ApiError::OperatorTimeout("x".into()), 504),
            (ApiError::Internal("x".into()), 500),
        ] {
            assert_eq!(error.status_code().as_u16(), code, "{error}");
            assert_eq!(error.to_status().code, Some(i32::from(code)));
        }
    }
}
