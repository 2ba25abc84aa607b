//! Reading New Relic's answer to an NRQL query through NerdGraph (`POST /graphql`,
//! `actor.account.nrql.results`) the way KEDA's `new-relic` scaler does
//! (`executeNewRelicQuery` in `pkg/scalers/newrelic_scaler.go`): the first row's numeric
//! field; no row, or a first row without a number, is 0, or an error with `noDataError`.
//!
//! The answer is a GraphQL response
//! (<https://docs.newrelic.com/docs/apis/nerdgraph/examples/nerdgraph-nrql-tutorial/>):
//! `{"data":{"actor":{"account":{"nrql":{"results":[{"count": 12}]}}}}}`, or `{"errors":[...]}`
//! (with HTTP 200) when the query fails. KEDA takes whichever numeric field Go's map iteration
//! gives first, which varies when a row has several; here it is the first by field name.
//! Errors never quote the answer; a GraphQL error's `extensions.errorClass` is shown only when
//! it is one of New Relic's documented classes.

use serde::Deserialize;
use serde_json::{Map, Value};

/// The `errorClass` values NerdGraph documents; others are not shown.
pub const ERROR_CLASSES: &[&str] = &[
    "TIMEOUT",
    "SERVER_ERROR",
    "INVALID_INPUT",
    "FORBIDDEN",
    "NOT_FOUND",
    "TOO_MANY_REQUESTS",
    "INTERNAL_SERVER_ERROR",
];

#[derive(Debug, Deserialize)]
struct GraphQlResponse {
    #[serde(default)]
    data: Option<Data>,
    #[serde(default)]
    errors: Option<Vec<GraphQlError>>,
}

#[derive(Debug, Deserialize)]
struct GraphQlError {
    #[serde(default)]
    extensions: Option<Extensions>,
}

#[derive(Debug, Deserialize)]
struct Extensions {
    #[serde(default, rename = "errorClass")]
    error_class: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Data {
    #[serde(default)]
    actor: Option<Actor>,
}

#[derive(Debug, Deserialize)]
struct Actor {
    #[serde(default)]
    account: Option<Account>,
}

#[derive(Debug, Deserialize)]
struct Account {
    #[serde(default)]
    nrql: Option<Nrql>,
}

#[derive(Debug, Deserialize)]
struct Nrql {
    #[serde(default)]
    results: Option<Vec<Map<String, Value>>>,
}

/// The value of the answer `body` to `nrql`.
///
/// # Errors
/// The body is not a NerdGraph answer, holds GraphQL errors, or (with `no_data_error`) no
/// row or no number in the first row. Messages name the NRQL, never the answer's text.
pub fn nrql_value(body: &[u8], nrql: &str, no_data_error: bool) -> Result<f64, String> {
    let response: GraphQlResponse = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the answer to NRQL `{nrql}` is not a NerdGraph response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    if let Some(errors) = response.errors.filter(|e| !e.is_empty()) {
        let class = errors
            .iter()
            .filter_map(|e| e.extensions.as_ref()?.error_class.as_ref()?.as_str())
            .find_map(|c| ERROR_CLASSES.iter().find(|k| **k == c));
        return Err(match class {
            Some(class) => format!("New Relic refused NRQL `{nrql}` (errorClass {class})"),
            None => format!("New Relic refused NRQL `{nrql}`"),
        });
    }
    let Some(account) = response
        .data
        .ok_or_else(|| format!("the answer to NRQL `{nrql}` has no \"data\""))?
        .actor
        .and_then(|a| a.account)
    else {
        return Err(format!(
            "the answer to NRQL `{nrql}` has no account (check the account ID)"
        ));
    };
    let rows = account.nrql.and_then(|n| n.results).unwrap_or_default();
    let Some(first) = rows.first() else {
        return if no_data_error {
            Err(format!("NRQL `{nrql}` returned no results"))
        } else {
            Ok(0.0)
        };
    };
    match first.values().find_map(Value::as_f64) {
        Some(value) if value.is_finite() => Ok(value),
        _ if no_data_error => Err(format!("NRQL `{nrql}` returned no numeric results")),
        _ => Ok(0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(rows: &str) -> String {
        format!(r#"{{"data":{{"actor":{{"account":{{"nrql":{{"results":{rows}}}}}}}}}}}"#)
    }

    #[test]
    fn values_follow_keda() {
        let q = "SELECT count(*) FROM Transaction";
        let cases: Vec<(String, bool, Result<f64, String>)> = vec![
            (rows(r#"[{"count":12}]"#), false, Ok(12.0)),
            (rows(r#"[{"average.duration":0.25,"facet":"a"},{"x":9}]"#), true, Ok(0.25)),
            (rows(r#"[{"name":"a","z":3,"b":2}]"#), false, Ok(2.0)),
            (rows("[]"), false, Ok(0.0)),
            (rows("[]"), true, Err(format!("NRQL `{q}` returned no results"))),
            (rows(r#"[{"facet":"a"}]"#), false, Ok(0.0)),
            (
                rows(r#"[{"facet":"a"}]"#),
                true,
                Err(format!("NRQL `{q}` returned no numeric results")),
            ),
            (
                r#"{"data":{"actor":{"account":{"nrql":null}}}}"#.into(),
                false,
                Ok(0.0),
            ),
            (
                r#"{"data":{"actor":{"account":null}},"errors":[{"message":"SECRET","extensions":{"errorClass":"FORBIDDEN"}}]}"#.into(),
                false,
                Err(format!("New Relic refused NRQL `{q}` (errorClass FORBIDDEN)")),
            ),
            (
                r#"{"errors":[{"message":"SECRET","extensions":{"errorClass":"SECRET"}}]}"#.into(),
                false,
                Err(format!("New Relic refused NRQL `{q}`")),
            ),
            (
                r#"{"data":{"actor":{"account":null}}}"#.into(),
                false,
                Err(format!("the answer to NRQL `{q}` has no account (check the account ID)")),
            ),
        ];
        for (i, (body, no_data_error, expected)) in cases.into_iter().enumerate() {
            assert_eq!(
                nrql_value(body.as_bytes(), q, no_data_error),
                expected,
                "row {i}: {body}"
            );
        }
    }

    #[test]
    fn garbage_is_an_error_never_quoting_the_answer() {
        for body in ["", "SECRETSECRET", "[]", r#"{"data":"SECRETSECRET"}"#] {
            let err = nrql_value(body.as_bytes(), "q", false).expect_err(body);
            assert!(!err.contains("SECRETSECRET"), "{err}");
        }
    }
}
