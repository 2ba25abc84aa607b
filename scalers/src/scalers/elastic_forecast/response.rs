//! Reading the answers of Elasticsearch's forecast API (`{"acknowledged":true,"forecast_id":".."}`)
//! and of the search of a forecast's results (`hits.hits.0._source.forecast_prediction`).

use serde_json::Value;

/// The longest forecast id kept (Elasticsearch's are 20-character ids).
const MAX_FORECAST_ID: usize = 256;

/// The `forecast_id` of a forecast API answer.
///
/// # Errors
/// Not JSON, or no non-empty `forecast_id` string (KEDA: "forecast API response contained no
/// forecast_id"), or one longer than 256 bytes. Messages never quote the answer.
pub fn forecast_id(body: &[u8]) -> Result<String, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        #[serde(default)]
        forecast_id: Option<Value>,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the forecast API's answer is not a forecast response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    match answer.forecast_id {
        Some(Value::String(id)) if !id.is_empty() && id.len() <= MAX_FORECAST_ID => Ok(id),
        Some(Value::String(id)) if id.len() > MAX_FORECAST_ID => Err(format!(
            "the forecast API's forecast_id is longer than {MAX_FORECAST_ID} bytes"
        )),
        _ => Err("the forecast API's answer contained no forecast_id".into()),
    }
}

/// `hits.hits.0._source.forecast_prediction` of a search answer, as KEDA reads it with GJSON:
/// a number; a string starting with one (Go's `Sscanf("%f")`); missing or `null` is no bucket
/// (`None`).
///
/// # Errors
/// Not JSON, a prediction of another type, a string without a leading number, or a value that
/// is not finite. Messages never quote the answer.
pub fn prediction(body: &[u8]) -> Result<Option<f64>, String> {
    let root: Value = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the forecast search answer is not a search response: {}",
            crate::remote::json_error(&e)
        )
    })?;
    let value = &root["hits"]["hits"][0]["_source"]["forecast_prediction"];
    let number = match value {
        Value::Null => return Ok(None),
        Value::Number(n) => n.as_f64(),
        Value::String(text) => Some(leading_float(text).ok_or_else(|| {
            format!(
                "forecast_prediction is a string ({} bytes) that is not numeric",
                text.len()
            )
        })?),
        other => {
            return Err(format!(
                "unexpected forecast_prediction type: {}",
                crate::remote::json_type(other)
            ));
        }
    };
    match number {
        Some(v) if v.is_finite() => Ok(Some(v)),
        _ => Err("forecast_prediction is not a finite number".into()),
    }
}

/// The float at the start of `text` after spaces, as Go's `fmt.Sscanf(text, "%f")` reads it
/// (the longest prefix that parses).
fn leading_float(text: &str) -> Option<f64> {
    let text = text.trim_start();
    let end = text
        .char_indices()
        .take_while(|(_, c)| c.is_ascii_digit() || matches!(c, '+' | '-' | '.' | 'e' | 'E'))
        .map(|(i, c)| i + c.len_utf8())
        .last()?;
    (1..=end)
        .rev()
        .find_map(|len| text[..len].parse::<f64>().ok())
}
