//! The answer parsers that are private to their scalers, reachable by the fuzz targets of
//! `fuzz/` (`response_parsers`). Only with the `fuzzing` feature, which nothing but the fuzz
//! crate enables: the parsers stay private to the product.
//!
//! Each function returns what the parser found, or its error as the text the scaler puts in
//! its own error.

/// `AssumeRole`'s XML answer (STS, `aws::client`): the credentials' expiry, or the error.
///
/// # Errors
/// The parser's error, as text.
pub fn aws_assume_role(body: &[u8]) -> Result<jiff::Timestamp, String> {
    crate::aws::client::parse_assume_role(body)
        .map(|assumed| assumed.expires)
        .map_err(|e| e.to_string())
}

/// SQS `GetQueueAttributes`' JSON answer: the sum of `attributes`.
///
/// # Errors
/// The parser's error.
pub fn aws_sqs_attributes(body: &[u8], attributes: &[&str]) -> Result<i64, String> {
    crate::scalers::aws_sqs_queue::sum_attributes(body, attributes)
}

/// CloudWatch `GetMetricData`'s XML answer: each result's values.
///
/// # Errors
/// The parser's error.
pub fn aws_cloudwatch_values(body: &[u8]) -> Result<Vec<Vec<f64>>, String> {
    crate::scalers::aws_cloudwatch::result_values(body)
}

/// Azure Queue's Peek Messages XML answer: the number of messages.
///
/// # Errors
/// The parser's error.
pub fn azure_queue_messages(body: &[u8]) -> Result<usize, String> {
    crate::scalers::azure_queue::count_messages(body)
}

/// Azure Blob's List Blobs XML answer: the blob names and the next marker.
///
/// # Errors
/// The parser's error.
pub fn azure_blob_page(body: &[u8]) -> Result<(Vec<String>, Option<String>), String> {
    crate::scalers::azure_blob::parse_page(body).map(|page| (page.names, page.next))
}

/// PostgreSQL's binary NUMERIC, as the server sends a query's result.
///
/// # Errors
/// The decoder's error, as text.
pub fn postgresql_numeric(raw: &[u8]) -> Result<f64, String> {
    crate::scalers::postgresql::numeric(raw).map_err(|e| e.to_string())
}
