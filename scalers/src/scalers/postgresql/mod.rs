//! `postgresql`: scales on the number a SQL query returns. Compatible with KEDA's `postgresql`
//! trigger (`pkg/scalers/postgresql_scaler.go`): a libpq connection string (keyword or URL
//! form, as pgx reads it) or `host`, `port`, `userName`, `password`, `dbName`, `sslmode`.
//!
//! Triggers with the same connection settings share one pool of connections (at most
//! [`DEFAULT_POOL_SIZE`], or the string's `pool_max_conns`), opened on demand.

pub mod conninfo;
pub mod listen;
pub mod tls;

use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

use futures::TryStreamExt;
use tokio_postgres::types::{FromSql, ToSql, Type};

use self::conninfo::ConnInfo;
use self::tls::{RustlsConnect, SslMode};
use super::sql::{
    self, Answer, CONNECT_TIMEOUT, DEFAULT_POOL_SIZE, QueryFailure, SqlDatabase, SqlQueryConfig,
    SqlScaler, target_value,
};
use crate::context::ScalerContext;
use crate::error::{BoxError, ScalerError, error_chain};
use crate::metadata::{AUTH_ENV, AUTH_METADATA, Param};
use crate::remote::Failure;
use crate::scaler::BuiltScaler;
use crate::secret::Secret;
use crate::tls::TlsSettings;

const TARGET_QUERY_VALUE: Param = Param::optional("targetQueryValue");
const ACTIVATION_TARGET_QUERY_VALUE: Param =
    Param::optional("activationTargetQueryValue").default("0");
const CONNECTION: Param = Param::optional("connection").order(AUTH_ENV).secret();
const QUERY: Param = Param::required("query");
const HOST: Param = Param::optional("host").order(AUTH_METADATA);
const PORT: Param = Param::optional("port").order(AUTH_METADATA);
const USER_NAME: Param = Param::optional("userName").order(AUTH_METADATA);
const DB_NAME: Param = Param::optional("dbName").order(AUTH_METADATA);
const SSLMODE: Param = Param::optional("sslmode")
    .order(AUTH_METADATA)
    .allowed(SslMode::NAMES);
const PASSWORD: Param = Param::optional("password").order(AUTH_ENV).secret();

/// Every parameter of the `postgresql` trigger.
pub const PARAMS: &[Param] = &[
    CONNECTION,
    HOST,
    PORT,
    USER_NAME,
    PASSWORD,
    DB_NAME,
    SSLMODE,
    QUERY,
    TARGET_QUERY_VALUE,
    ACTIVATION_TARGET_QUERY_VALUE,
    listen::LISTEN_CHANNEL,
];

/// Keys tokio-postgres reads itself.
const DRIVER_KEYS: &[&str] = &[
    "user",
    "password",
    "dbname",
    "options",
    "application_name",
    "host",
    "hostaddr",
    "port",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_retries",
    "target_session_attrs",
    "channel_binding",
    "load_balance_hosts",
];

/// Keys of pgx, pgxpool or libpq that configure the client itself and have no meaning here;
/// dropped. Any other unknown key is sent to the server as a run-time parameter, as pgx does.
const IGNORED_KEYS: &[&str] = &[
    "pool_min_conns",
    "pool_min_idle_conns",
    "pool_max_conn_lifetime",
    "pool_max_conn_lifetime_jitter",
    "pool_max_conn_idle_time",
    "pool_health_check_period",
    "statement_cache_capacity",
    "description_cache_capacity",
    "default_query_exec_mode",
    "min_read_buffer_size",
    "servicefile",
    "service",
    "passfile",
    "sslcompression",
    "sslcrl",
    "sslcrldir",
    "sslsni",
    "sslnegotiation",
    "requiressl",
    "krbsrvname",
    "gsslib",
    "gssencmode",
    "client_encoding",
    "fallback_application_name",
];

/// Where to connect and how, from a connection string or the separate parameters.
#[derive(Clone, Debug)]
pub struct PgSettings {
    /// The settings as given, which is also what pools are shared by.
    pub info: Secret,
    /// The driver's configuration (TLS negotiation included).
    pub config: tokio_postgres::Config,
    /// `sslmode` (default `prefer`).
    pub ssl_mode: SslMode,
    /// `sslrootcert`, `sslcert`, `sslkey`: files read when connecting.
    pub ssl_files: [Option<String>; 3],
    /// Where those files may be read ([`crate::files`]; the context's, set by `parse`).
    pub files: crate::files::TriggerFiles,
    /// `pool_max_conns`, or [`DEFAULT_POOL_SIZE`].
    pub pool_size: usize,
    /// `PostgreSQL at <hosts>:<port>/<dbname>`, for messages (no user, no password).
    pub server: String,
    /// `listenChannel` (keda-rs): a `NOTIFY` on it wakes the trigger ([`listen`]).
    pub listen: Option<String>,
}

impl PgSettings {
    /// Reads the settings of a connection string.
    ///
    /// # Errors
    /// A message naming the malformed setting, without values.
    pub fn new(mut info: ConnInfo) -> Result<Self, String> {
        let key = Secret::new(info.to_keywords());
        let ssl_mode = match info.take("sslmode") {
            Some(mode) => SslMode::parse(&mode)
                .ok_or_else(|| format!("sslmode is not one of {}", SslMode::NAMES.join(", ")))?,
            None => SslMode::Prefer,
        };
        let ssl_files = [
            info.take("sslrootcert"),
            info.take("sslcert"),
            info.take("sslkey"),
        ];
        if ssl_files[1].is_some() != ssl_files[2].is_some() {
            return Err("sslcert and sslkey must be given together".to_string());
        }
        if info.take("sslpassword").is_some() {
            return Err(
                "sslpassword is not supported: give an unencrypted key in sslkey".to_string(),
            );
        }
        let pool_size = match info.take("pool_max_conns") {
            Some(n) => n
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=100).contains(n))
                .ok_or("pool_max_conns is not a whole number between 1 and 100")?,
            None => DEFAULT_POOL_SIZE,
        };
        for ignored in IGNORED_KEYS {
            info.take(ignored);
        }
        let (known, runtime): (Vec<_>, Vec<_>) = info
            .0
            .into_iter()
            .partition(|(k, _)| DRIVER_KEYS.contains(&k.as_str()));
        let mut driver = ConnInfo(known.into_iter().collect());
        if !runtime.is_empty() {
            // pgx sends unknown keys as run-time parameters; `-c key=value` in `options` does
            // the same at session start.
            let escape = |s: &str| s.replace('\\', "\\\\").replace(' ', "\\ ");
            let mut options: Vec<String> = driver
                .get("options")
                .map(str::to_string)
                .into_iter()
                .collect();
            options.extend(
                runtime
                    .iter()
                    .map(|(k, v)| format!("-c {}={}", escape(k), escape(v))),
            );
            driver.set("options", &options.join(" "));
        }
        let mut config =
            tokio_postgres::Config::from_str(&driver.to_keywords()).map_err(|e| error_chain(&e))?;
        if config.get_hosts().is_empty() && config.get_hostaddrs().is_empty() {
            return Err("no host: set host=... or use a postgres://host/... URL".to_string());
        }
        config.ssl_mode(ssl_mode.negotiation());
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        let server = describe(&driver);
        Ok(Self {
            info: key,
            config,
            ssl_mode,
            ssl_files,
            files: crate::files::TriggerFiles::default(),
            pool_size,
            server,
            listen: None,
        })
    }

    async fn tls(&self) -> Result<RustlsConnect, String> {
        // Off the runtime, under the trigger file root, regular files only, bounded.
        let read = |path: Option<String>, key: &'static str| async move {
            match path {
                Some(path) => self
                    .files
                    .read(&path)
                    .await
                    .map(|pem| Some(Secret::new(pem)))
                    .map_err(|e| format!("{key}: {e}")),
                None => Ok(None),
            }
        };
        let [root, cert, key] = self.ssl_files.clone();
        let ca = read(root, "sslrootcert").await?;
        let client = match (read(cert, "sslcert").await?, read(key, "sslkey").await?) {
            (Some(c), Some(k)) => Some((c, k)),
            _ => None,
        };
        let settings = TlsSettings {
            insecure: false,
            ca,
            client,
        };
        let config = self
            .ssl_mode
            .client_config(&settings)
            .map_err(|e| e.to_string())?;
        Ok(RustlsConnect::new(config))
    }

    async fn open(&self) -> Result<PgPool, Failure> {
        let tls = self.tls().await.map_err(Failure::local)?;
        let manager = deadpool_postgres::Manager::from_config(
            self.config.clone(),
            tls.clone(),
            deadpool_postgres::ManagerConfig {
                recycling_method: deadpool_postgres::RecyclingMethod::Fast,
            },
        );
        let pool = deadpool_postgres::Pool::builder(manager)
            .max_size(self.pool_size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(CONNECT_TIMEOUT))
            .create_timeout(Some(CONNECT_TIMEOUT))
            .recycle_timeout(Some(CONNECT_TIMEOUT))
            .build()
            .map_err(|e| Failure::local(error_chain(&e)))?;
        let secrets = self.secrets();
        drop(pool.get().await.map_err(|e| {
            Failure::of_scrubbed("PostgreSQL", &e, |raw| {
                crate::scalers::rabbitmq::url::anonymize(raw, &secrets)
            })
        })?);
        Ok(PgPool { pool, tls })
    }
}

/// `PostgreSQL at host:port/dbname`.
fn describe(driver: &ConnInfo) -> String {
    let hosts = driver.get("host").or(driver.get("hostaddr")).unwrap_or("");
    let mut server = format!(
        "PostgreSQL at {hosts}:{}",
        driver.get("port").unwrap_or("5432")
    );
    if let Some(db) = driver.get("dbname") {
        server.push('/');
        server.push_str(db);
    }
    server
}

/// A pool of connections with one connection string, shared by triggers.
pub struct PgPool {
    pool: deadpool_postgres::Pool,
    tls: RustlsConnect,
}

/// The parsed `postgresql` trigger.
pub type PostgresConfig = SqlQueryConfig<PgSettings>;

/// A `postgresql` scaler.
pub type PostgresScaler = SqlScaler<PgSettings>;

impl SqlDatabase for PgSettings {
    type Pool = PgPool;

    fn parse(ctx: &ScalerContext) -> Result<PostgresConfig, ScalerError> {
        let metric_type = ctx.external_metric_type()?;
        Ok(ctx.parse(|p| {
            let (info, origin) = match p.get_opt::<Secret>(&CONNECTION)? {
                Some(connection) => (
                    ConnInfo::parse(connection.expose())
                        .map_err(|why| p.rule(format!("parameter \"connection\": {why}")))?,
                    "parameter \"connection\"",
                ),
                None => {
                    let mut info = ConnInfo::default();
                    info.set("host", &p.get::<String>(&HOST.require())?);
                    info.set("port", &p.get::<u16>(&PORT.require())?.to_string());
                    info.set("user", &p.get::<String>(&USER_NAME.require())?);
                    info.set("dbname", &p.get::<String>(&DB_NAME.require())?);
                    info.set("sslmode", &p.get::<String>(&SSLMODE.require())?);
                    if let Some(password) = p.get_opt::<Secret>(&PASSWORD)? {
                        info.set("password", password.expose());
                    }
                    (
                        info,
                        "parameters \"host\", \"port\", \"userName\", \"password\", \"dbName\", \"sslmode\"",
                    )
                }
            };
            Ok(SqlQueryConfig {
                database: PgSettings {
                    files: ctx.trigger_files.clone(),
                    listen: match p.get_opt::<String>(&listen::LISTEN_CHANNEL)? {
                        Some(c) if !listen::valid_channel(&c) => {
                            return Err(p.rule(format!(
                                "parameter \"listenChannel\" must be 1 to {} bytes",
                                listen::MAX_CHANNEL_BYTES
                            )));
                        }
                        channel => channel,
                    },
                    ..PgSettings::new(info)
                        .map_err(|why| p.rule(format!("{origin}: {why}")))?
                },
                connection_params: origin,
                query: p.get(&QUERY)?,
                target: target_value(p, &TARGET_QUERY_VALUE, ctx.as_metric_source)?,
                activation: p.get(&ACTIVATION_TARGET_QUERY_VALUE)?,
                metric_name: ctx.metric_name("postgresql"),
                metric_type,
            })
        })?)
    }

    fn key(&self) -> Secret {
        self.info.clone()
    }

    fn server(&self) -> &str {
        &self.server
    }

    fn secrets(&self) -> Vec<&str> {
        self.config
            .get_password()
            .and_then(|p| std::str::from_utf8(p).ok())
            .into_iter()
            .collect()
    }

    fn connect(&self) -> impl Future<Output = Result<PgPool, Failure>> + Send {
        self.open()
    }

    async fn wake(&self, ctx: &ScalerContext) -> Option<sql::WakeHandle> {
        let channel = self.listen.as_deref()?;
        let (wake, registration) = listen::register(ctx, self, channel).await;
        Some((wake, Box::new(registration)))
    }

    async fn query(pool: &PgPool, query: &str, timeout: Duration) -> Result<Answer, QueryFailure> {
        let client = pool
            .pool
            .get()
            .await
            .map_err(|e| QueryFailure::Failed(Box::new(e)))?;
        match tokio::time::timeout(timeout, first_answer(&client, query)).await {
            Ok(answer) => answer.map_err(|e| QueryFailure::Failed(Box::new(e))),
            Err(_) => {
                // Stop the statement on the server, then close this connection rather than
                // hand it to the next query.
                let cancel = client.cancel_token();
                let _ =
                    tokio::time::timeout(CONNECT_TIMEOUT, cancel.cancel_query(pool.tls.clone()))
                        .await;
                drop(deadpool_postgres::Object::take(client));
                Err(QueryFailure::TimedOut)
            }
        }
    }
}

/// A NUMERIC (or any integer or float) column as a float.
struct PgNumber(f64);

impl<'a> FromSql<'a> for PgNumber {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> Result<Self, BoxError> {
        Ok(Self(match *ty {
            Type::INT2 => f64::from(i16::from_sql(ty, raw)?),
            Type::INT4 => f64::from(i32::from_sql(ty, raw)?),
            Type::OID => f64::from(u32::from_sql(ty, raw)?),
            // Rounds to the nearest float above 2^53, as Go's float64(int64) does.
            Type::INT8 => i64::from_sql(ty, raw)? as f64,
            Type::FLOAT4 => f64::from(f32::from_sql(ty, raw)?),
            Type::FLOAT8 => f64::from_sql(ty, raw)?,
            Type::NUMERIC => numeric(raw)?,
            _ => return Err(format!("type {ty} is not a number").into()),
        }))
    }

    fn accepts(ty: &Type) -> bool {
        NUMBER_TYPES.contains(ty)
    }
}

const NUMBER_TYPES: &[Type] = &[
    Type::INT2,
    Type::INT4,
    Type::INT8,
    Type::OID,
    Type::FLOAT4,
    Type::FLOAT8,
    Type::NUMERIC,
];

/// PostgreSQL's binary NUMERIC: digit count, weight (of the first base-10000 digit), sign,
/// display scale, then the base-10000 digits.
pub(crate) fn numeric(raw: &[u8]) -> Result<f64, BoxError> {
    let word = |i: usize| -> Result<i16, BoxError> {
        let bytes = raw.get(i * 2..i * 2 + 2).ok_or("truncated NUMERIC value")?;
        Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
    };
    let ndigits = usize::try_from(word(0)?).map_err(|_| "negative NUMERIC digit count")?;
    let weight = i32::from(word(1)?);
    let sign = u16::from_be_bytes(word(2)?.to_be_bytes());
    match sign {
        0xC000 => return Ok(f64::NAN),
        0xD000 => return Ok(f64::INFINITY),
        0xF000 => return Ok(f64::NEG_INFINITY),
        _ => {}
    }
    let mut value = 0.0_f64;
    for i in 0..ndigits {
        value = value * 10_000.0 + f64::from(word(4 + i)?);
    }
    // The last digit is worth 10000^(weight - (ndigits - 1)).
    let last = i32::try_from(ndigits).map_err(|_| "too many NUMERIC digits")? - 1;
    value *= 10_000_f64.powi(weight - last);
    Ok(if sign == 0x4000 { -value } else { value })
}

/// Runs `query` and reads its first row.
async fn first_answer(
    client: &tokio_postgres::Client,
    query: &str,
) -> Result<Answer, tokio_postgres::Error> {
    let params: [&(dyn ToSql + Sync); 0] = [];
    let rows = client.query_raw(query, params).await?;
    futures::pin_mut!(rows);
    let Some(row) = rows.try_next().await? else {
        return Ok(Answer::NoRow);
    };
    // The rest of the rows are discarded when the stream is dropped.
    if row.len() != 1 {
        return Ok(Answer::Columns(row.len()));
    }
    let column = &row.columns()[0];
    if !NUMBER_TYPES.contains(column.type_()) {
        return Ok(Answer::NotANumber {
            column: column.name().to_string(),
            what: format!("of type {}", column.type_()),
        });
    }
    Ok(match row.try_get::<_, Option<PgNumber>>(0)? {
        Some(PgNumber(n)) => Answer::Number(n),
        None => Answer::Null,
    })
}

/// Factory of `postgresql`.
///
/// # Errors
/// See [`SqlScaler::build`].
pub async fn build(ctx: ScalerContext) -> Result<BuiltScaler, ScalerError> {
    sql::build::<PgSettings>(ctx).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::metric_target_milli;

    fn ctx(
        metadata: &[(&str, &str)],
        env: &[(&str, &str)],
        auth: &[(&str, &str)],
    ) -> ScalerContext {
        crate::context::test_context("postgresql", 1, metadata, env, auth)
    }

    const QUERY_META: &[(&str, &str)] = &[("query", "SELECT 1"), ("targetQueryValue", "2.5")];

    #[test]
    fn separate_parameters_build_the_connection_keda_builds() {
        let params = [
            QUERY_META,
            &[
                ("host", "db.svc"),
                ("port", "6432"),
                ("userName", "app"),
                ("dbName", "jobs"),
                ("sslmode", "disable"),
                ("passwordFromEnv", "PG_PASSWORD"),
            ],
        ]
        .concat();
        let config = PgSettings::parse(&ctx(&params, &[("PG_PASSWORD", "s3cret")], &[])).unwrap();
        let c = &config.database.config;
        assert_eq!(c.get_user(), Some("app"));
        assert_eq!(c.get_dbname(), Some("jobs"));
        assert_eq!(c.get_ports(), &[6432]);
        assert_eq!(c.get_password(), Some(&b"s3cret"[..]));
        assert_eq!(config.database.ssl_mode, SslMode::Disable);
        assert_eq!(config.database.server, "PostgreSQL at db.svc:6432/jobs");
        assert_eq!(config.metric_name, "s1-postgresql");
        let target = metric_target_milli(config.metric_type, config.target);
        assert_eq!(target.average_value.map(|q| q.0), Some("2500m".to_string()));
        assert_eq!(config.activation, 0.0);
    }

    #[test]
    fn connection_strings_come_from_auth_or_env_never_metadata() {
        let from_env = PgSettings::parse(&ctx(
            &[QUERY_META, &[("connectionFromEnv", "PG")]].concat(),
            &[(
                "PG",
                "postgres://u:p@db:5433/x?sslmode=verify-full&search_path=jobs",
            )],
            &[],
        ))
        .unwrap();
        assert_eq!(from_env.database.ssl_mode, SslMode::VerifyFull);
        assert_eq!(from_env.database.config.get_ports(), &[5433]);
        assert_eq!(
            from_env.database.config.get_options(),
            Some("-c search_path=jobs")
        );
        let from_auth = PgSettings::parse(&ctx(
            QUERY_META,
            &[],
            &[(
                "connection",
                "host=db user=u pool_max_conns=9 statement_cache_capacity=0",
            )],
        ))
        .unwrap();
        assert_eq!(from_auth.database.pool_size, 9);
        assert_eq!(from_auth.database.ssl_mode, SslMode::Prefer);
        let err = PgSettings::parse(&ctx(
            &[QUERY_META, &[("connection", "host=db")]].concat(),
            &[],
            &[],
        ))
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"trigger 1 (postgresql): missing required parameter "host""#
        );
    }

    #[test]
    fn bad_input_names_the_parameter_and_hides_the_password() {
        type Row<'a> = (Vec<(&'a str, &'a str)>, Vec<(&'a str, &'a str)>, &'a str);
        let rows: Vec<Row<'_>> = vec![
            (
                vec![("targetQueryValue", "1")],
                vec![("connection", "host=db")],
                r#"trigger 1 (postgresql): missing required parameter "query""#,
            ),
            (
                vec![("query", "SELECT 1")],
                vec![("connection", "host=db")],
                r#"trigger 1 (postgresql): missing required parameter "targetQueryValue""#,
            ),
            (
                vec![("query", "SELECT 1"), ("targetQueryValue", "0")],
                vec![("connection", "host=db")],
                r#"trigger 1 (postgresql): parameter "targetQueryValue": "0" is not greater than 0"#,
            ),
            (
                QUERY_META.to_vec(),
                vec![("connection", "host=db password='s3cret port=x")],
                r#"trigger 1 (postgresql): parameter "connection": the quoted value of "password" is not closed"#,
            ),
            (
                QUERY_META.to_vec(),
                vec![("connection", "host=db password=s3cret port=x")],
                "trigger 1 (postgresql): parameter \"connection\": invalid connection string: invalid value for option `port`",
            ),
            (
                QUERY_META.to_vec(),
                vec![("connection", "password=s3cret sslmode=verify")],
                "trigger 1 (postgresql): parameter \"connection\": sslmode is not one of disable, allow, prefer, require, verify-ca, verify-full",
            ),
            (
                QUERY_META.to_vec(),
                vec![("connection", "user=u password=s3cret")],
                "trigger 1 (postgresql): parameter \"connection\": no host: set host=... or use a postgres://host/... URL",
            ),
            (
                [
                    QUERY_META,
                    &[
                        ("host", "db"),
                        ("port", "5432"),
                        ("userName", "u"),
                        ("dbName", "d"),
                    ],
                ]
                .concat(),
                vec![],
                r#"trigger 1 (postgresql): missing required parameter "sslmode""#,
            ),
            (
                [
                    QUERY_META,
                    &[
                        ("host", "db"),
                        ("port", "x"),
                        ("userName", "u"),
                        ("dbName", "d"),
                        ("sslmode", "disable"),
                    ],
                ]
                .concat(),
                vec![],
                r#"trigger 1 (postgresql): parameter "port": "x" is not a valid integer"#,
            ),
        ];
        for (metadata, auth, expected) in rows {
            let err = PgSettings::parse(&ctx(&metadata, &[], &auth)).unwrap_err();
            assert_eq!(err.to_string(), expected);
            assert!(!err.to_string().contains("s3cret"));
        }
    }

    #[test]
    fn scaling_modifier_sources_need_no_target() {
        let mut c = ctx(&[("query", "SELECT 1")], &[], &[("connection", "host=db")]);
        c.as_metric_source = true;
        assert_eq!(PgSettings::parse(&c).unwrap().target, 0.0);
    }

    #[test]
    fn numeric_values_decode_to_floats() {
        // (ndigits, weight, sign, dscale, digits, value)
        type Row<'a> = (i16, i16, u16, i16, &'a [i16], f64);
        let rows: &[Row<'_>] = &[
            (0, 0, 0, 0, &[], 0.0),
            (1, 0, 0, 0, &[42], 42.0),
            (2, 1, 0, 0, &[1, 2345], 12345.0),    // 1 2345
            (2, 0, 0x4000, 2, &[3, 1200], -3.12), // -3.1200
            (1, -1, 0, 4, &[5000], 0.5),          // 0.5000
            (0, 0, 0xC000, 0, &[], f64::NAN),
            (0, 0, 0xD000, 0, &[], f64::INFINITY),
        ];
        for (ndigits, weight, sign, dscale, digits, value) in rows {
            let mut raw = Vec::new();
            for w in [*ndigits, *weight] {
                raw.extend_from_slice(&w.to_be_bytes());
            }
            raw.extend_from_slice(&sign.to_be_bytes());
            raw.extend_from_slice(&dscale.to_be_bytes());
            for d in *digits {
                raw.extend_from_slice(&d.to_be_bytes());
            }
            let got = numeric(&raw).unwrap();
            assert!(
                got == *value || (got.is_nan() && value.is_nan()) || (got - value).abs() < 1e-9,
                "{digits:?}: {got} != {value}"
            );
        }
        assert!(numeric(&[0, 1, 0, 0]).is_err());
    }
}
