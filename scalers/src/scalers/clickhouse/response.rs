//! Reading ClickHouse's answers: the `JSONCompact` format
//! (<https://clickhouse.com/docs/interfaces/formats/JSONCompact>:
//! `{"meta":[{"name":..,"type":..}],"data":[[v, ...], ...],"rows":N,...}`) and the
//! `Code: <number>` an error answer starts with
//! (<https://clickhouse.com/docs/interfaces/http>).

use serde_json::Value;

/// The first column of the first row, as KEDA's `QueryRow(query).Scan(&float64)` reads it: a
/// number, or a string holding one (ClickHouse quotes 64-bit integers and decimals in JSON);
/// no row is 0 (`sql.ErrNoRows`).
///
/// # Errors
/// Not a `JSONCompact` answer, a first row without columns, or a first value that is `NULL`
/// (ClickHouse writes NaN and ±Inf as `null` too), a boolean, an array, an object, or a
/// string that is not a finite number. Messages never quote the answer.
pub fn first_value(body: &[u8]) -> Result<f64, String> {
    #[derive(serde::Deserialize)]
    struct Answer {
        data: Vec<Vec<Value>>,
    }
    let answer: Answer = crate::remote::from_json(body).map_err(|e| {
        format!(
            "the ClickHouse answer is not in the JSONCompact format (a FORMAT clause in the query overrides it): {}",
            crate::remote::json_error(&e)
        )
    })?;
    let Some(row) = answer.data.first() else {
        return Ok(0.0);
    };
    let Some(value) = row.first() else {
        return Err("the query's first row has no column".into());
    };
    let number = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(text) => Some(text.trim().parse::<f64>().map_err(|_| {
            format!(
                "the query's first value is a string ({} bytes) that is not a number",
                text.len()
            )
        })?),
        Value::Null => {
            return Err(
                "the query's first value is NULL (or NaN or infinite, which ClickHouse writes as null)"
                    .into(),
            );
        }
        other => {
            return Err(format!(
                "the query's first value is {}, not a number",
                crate::remote::json_type(other)
            ));
        }
    };
    match number {
        Some(v) if v.is_finite() => Ok(v),
        _ => Err("the query's first value is not a finite number".into()),
    }
}

/// The error code of an error answer (`Code: 60. DB::Exception: ...`, or
/// `Code: 60, e.displayText() = ...` before ClickHouse 20): a number from ClickHouse's fixed
/// list of error codes, safe to show.
pub fn error_code(body: &[u8]) -> Option<u32> {
    let text = body.trim_ascii_start().strip_prefix(b"Code: ")?;
    let digits = text.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || digits > 6 {
        return None;
    }
    std::str::from_utf8(&text[..digits]).ok()?.parse().ok()
}
