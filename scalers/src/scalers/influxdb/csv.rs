//! Reading InfluxDB's annotated CSV (the answer of `POST /api/v2/query` to a Flux query):
//! <https://docs.influxdata.com/influxdb/v2/reference/syntax/annotated-csv/>.
//!
//! Each table starts with annotation rows (`#datatype`, `#group`, `#default`), then a header
//! row, then data rows; the first column is the annotation column (empty in header and data
//! rows); tables are separated by an empty line. A query that fails while the answer is
//! streamed ends with a table whose columns are `error` and `reference`.
//!
//! KEDA's `influxdb` scaler reads `_value` of the first record (`queryInfluxDB`). Errors are in
//! keda-rs' own words: they never quote the answer.

/// The `_value` of the first record of the answer `body`, as a number.
///
/// A `double`, `long` or `unsignedLong` column is read; an empty value takes the column's
/// `#default`.
///
/// # Errors
/// The body is not annotated CSV, holds an error table, has no record, or the first record's
/// `_value` is missing, of another type, not a number, NaN or infinite.
pub fn first_value(body: &[u8]) -> Result<f64, String> {
    let text = std::str::from_utf8(body)
        .map_err(|_| "the answer is not UTF-8 text, so not annotated CSV".to_string())?;
    let mut datatypes: Option<Vec<String>> = None;
    let mut defaults: Vec<String> = Vec::new();
    let mut header: Option<Vec<String>> = None;
    for record in Records::new(text) {
        let record = record?;
        if record.len() == 1 && record[0].is_empty() {
            // An empty line: the next table starts with its own annotations.
            datatypes = None;
            defaults.clear();
            header = None;
            continue;
        }
        match record[0].as_str() {
            "#datatype" => {
                datatypes = Some(record);
                header = None;
                continue;
            }
            "#default" => {
                defaults = record;
                continue;
            }
            annotation if annotation.starts_with('#') => continue,
            _ => {}
        }
        let Some(columns) = &header else {
            if datatypes.is_none() {
                return Err(
                    "the answer is not annotated CSV (a table has no #datatype annotation)"
                        .to_string(),
                );
            }
            if record.iter().skip(1).any(|c| c == "error")
                && record.iter().skip(1).any(|c| c == "reference")
            {
                return Err(
                    "InfluxDB reported an error in the query's result (its text is logged at debug level)"
                        .to_string(),
                );
            }
            header = Some(record);
            continue;
        };
        let at = columns
            .iter()
            .position(|c| c == "_value")
            .ok_or_else(|| "the first record has no _value column".to_string())?;
        let mut value = record.get(at).map(String::as_str).unwrap_or_default();
        if value.is_empty() {
            value = defaults.get(at).map(String::as_str).unwrap_or_default();
        }
        if value.is_empty() {
            return Err("the first record's _value is empty".to_string());
        }
        let datatype = datatypes
            .as_ref()
            .and_then(|d| d.get(at))
            .map(String::as_str)
            .unwrap_or_default();
        let number = match datatype {
            "double" => value.parse::<f64>().ok(),
            "long" => value.parse::<i64>().ok().map(|v| v as f64),
            "unsignedLong" => value.parse::<u64>().ok().map(|v| v as f64),
            "string" | "boolean" | "base64Binary" | "duration" => {
                return Err(format!(
                    "the first record's _value is of type {datatype}, which cannot be converted into a number"
                ));
            }
            t if t.starts_with("dateTime") => {
                return Err(
                    "the first record's _value is of type dateTime, which cannot be converted into a number"
                        .to_string(),
                );
            }
            _ => {
                return Err(
                    "the first record's _value is of an unknown type, which cannot be converted into a number"
                        .to_string(),
                );
            }
        };
        return match number {
            Some(v) if v.is_finite() => Ok(v),
            Some(_) => Err("the first record's _value is NaN or infinite".to_string()),
            None => Err(format!(
                "the first record's _value is not a valid {datatype} ({} bytes)",
                value.len()
            )),
        };
    }
    // KEDA's message.
    Err("no results found from query".to_string())
}

/// The records of an RFC 4180 CSV text: fields separated by `,`, a field in double quotes may
/// hold `,`, line breaks and `""` (a quote); records end at `\n` or `\r\n`. An empty line is a
/// record of one empty field.
struct Records<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Records<'a> {
    fn new(text: &'a str) -> Self {
        Self { text, at: 0 }
    }
}

impl Iterator for Records<'_> {
    type Item = Result<Vec<String>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        let bytes = self.text.as_bytes();
        if self.at >= bytes.len() {
            return None;
        }
        let mut fields = Vec::new();
        let mut field = String::new();
        let mut quoted = false;
        let mut start_of_field = true;
        let mut chars = self.text[self.at..].char_indices();
        while let Some((i, c)) = chars.next() {
            if quoted {
                if c == '"' {
                    if self.text[self.at + i + 1..].starts_with('"') {
                        field.push('"');
                        chars.next();
                    } else {
                        quoted = false;
                    }
                } else {
                    field.push(c);
                }
                continue;
            }
            match c {
                '"' if start_of_field => {
                    quoted = true;
                    start_of_field = false;
                }
                ',' => {
                    fields.push(std::mem::take(&mut field));
                    start_of_field = true;
                }
                '\n' => {
                    if field.ends_with('\r') {
                        field.pop();
                    }
                    fields.push(field);
                    self.at += i + 1;
                    return Some(Ok(fields));
                }
                c => {
                    field.push(c);
                    start_of_field = false;
                }
            }
        }
        self.at = bytes.len();
        if quoted {
            return Some(Err(
                "the answer is not valid CSV (a quoted field is not closed)".to_string(),
            ));
        }
        if field.ends_with('\r') {
            field.pop();
        }
        fields.push(field);
        Some(Ok(fields))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of the annotated CSV reference (one table of `double` values).
    const DOC_TABLE: &str = "#datatype,string,long,dateTime:RFC3339,dateTime:RFC3339,dateTime:RFC3339,double,string,string,string,string\r\n\
#group,false,false,true,true,false,false,true,true,true,true\r\n\
#default,_result,,,,,,,,,\r\n\
,result,table,_start,_stop,_time,_value,_field,_measurement,host,region\r\n\
,,0,2018-05-08T20:50:00Z,2018-05-08T20:51:00Z,2018-05-08T20:50:00Z,10.5,used_percent,mem,host1,us-west\r\n\
,,0,2018-05-08T20:50:00Z,2018-05-08T20:51:00Z,2018-05-08T20:50:20Z,11,used_percent,mem,host1,us-west\r\n\
\r\n";

    fn table(datatype: &str, value: &str, default: &str) -> String {
        format!(
            "#datatype,string,long,{datatype},string\n#group,false,false,false,true\n#default,_result,,{default},\n,result,table,_value,_field\n,,0,{value},n\n\n"
        )
    }

    #[test]
    fn the_first_records_value_is_read_by_its_datatype() {
        assert_eq!(first_value(DOC_TABLE.as_bytes()), Ok(10.5));
        // (datatype, value, #default, expected)
        let rows: &[(&str, &str, &str, Result<f64, &str>)] = &[
            ("long", "42", "", Ok(42.0)),
            (
                "unsignedLong",
                "18446744073709551615",
                "",
                Ok(18_446_744_073_709_551_615.0),
            ),
            ("double", "-0.25", "", Ok(-0.25)),
            ("double", "1e3", "", Ok(1000.0)),
            ("double", "", "7", Ok(7.0)),
            ("double", "", "", Err("the first record's _value is empty")),
            (
                "double",
                "+Inf",
                "",
                Err("the first record's _value is NaN or infinite"),
            ),
            (
                "double",
                "NaN",
                "",
                Err("the first record's _value is NaN or infinite"),
            ),
            (
                "long",
                "1.5",
                "",
                Err("the first record's _value is not a valid long (3 bytes)"),
            ),
            (
                "string",
                "12",
                "",
                Err(
                    "the first record's _value is of type string, which cannot be converted into a number",
                ),
            ),
            (
                "dateTime:RFC3339",
                "2018-05-08T20:50:00Z",
                "",
                Err(
                    "the first record's _value is of type dateTime, which cannot be converted into a number",
                ),
            ),
        ];
        for (datatype, value, default, expected) in rows {
            let body = table(datatype, value, default);
            assert_eq!(
                first_value(body.as_bytes()),
                expected.map_err(str::to_string),
                "{datatype} {value:?}"
            );
        }
    }

    #[test]
    fn quoted_fields_error_tables_and_empty_answers() {
        let quoted = "#datatype,string,string,double\n#default,_result,,\n,result,\"a,\"\"b\"\"\n\",_value\n,,\"x\ny\",3\n";
        assert_eq!(first_value(quoted.as_bytes()), Ok(3.0));
        // The error table of a query that failed while streaming; its text is not shown.
        let error = "#datatype,string,string\n#group,true,true\n#default,,\n,error,reference\n,failed to execute query: SECRET-TEXT,897\n";
        let err = first_value(error.as_bytes()).unwrap_err();
        assert!(err.starts_with("InfluxDB reported an error"), "{err}");
        assert!(!err.contains("SECRET"), "{err}");
        assert_eq!(first_value(b""), Err("no results found from query".into()));
        assert_eq!(
            first_value(b"\r\n"),
            Err("no results found from query".into())
        );
        let header_only = "#datatype,string,long,double\n,result,table,_value\n";
        assert_eq!(
            first_value(header_only.as_bytes()),
            Err("no results found from query".into())
        );
        for garbage in [
            &b"<html>SECRET</html>"[..],
            b"a,b\n1,2\n",
            b"\xff\xfe",
            b"#datatype,\"x\n",
        ] {
            let err = first_value(garbage).unwrap_err();
            assert!(!err.contains("SECRET"), "{err}");
        }
        let no_value = "#datatype,string,long\n,result,table\n,,0\n";
        assert_eq!(
            first_value(no_value.as_bytes()),
            Err("the first record has no _value column".into())
        );
    }
}
