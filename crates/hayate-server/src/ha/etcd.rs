//! The few etcd v3 calls the HA coordinator needs, through etcd's JSON gateway (`/v3/...`,
//! keys and values base64, 64-bit integers as strings): leases (grant, keep alive, revoke)
//! and keys (read, put, create-if-absent, replace-if-equal, delete). Every call has a short
//! timeout; endpoints are tried in order until one answers.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine as _;
use serde_json::{json, Value};

/// How long one call may take (connecting included).
const CALL_TIMEOUT: Duration = Duration::from_millis(1_000);

/// A failed call: unreachable, refused or an answer that does not parse.
#[derive(Debug)]
pub struct EtcdError(pub String);

impl std::fmt::Display for EtcdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "etcd: {}", self.0)
    }
}

pub type EtcdResult<T> = Result<T, EtcdError>;

/// A key's value and the lease it is attached to (0: none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    pub value: Vec<u8>,
    pub lease: i64,
}

/// A client of one etcd cluster.
#[derive(Clone)]
pub struct Etcd {
    agent: ureq::Agent,
    endpoints: Vec<String>,
}

fn b64(bytes: &[u8]) -> String {
    BASE64.encode(bytes)
}

/// An int64 of the gateway's JSON (a string, or a number).
fn int(value: &Value) -> i64 {
    match value {
        Value::String(text) => text.parse().unwrap_or(0),
        Value::Number(number) => number.as_i64().unwrap_or(0),
        _ => 0,
    }
}

impl Etcd {
    /// `endpoints`: comma-separated URLs such as `http://127.0.0.1:2379`.
    pub fn new(endpoints: &str) -> Etcd {
        Etcd {
            agent: ureq::AgentBuilder::new().timeout(CALL_TIMEOUT).build(),
            endpoints: endpoints
                .split(',')
                .map(|url| url.trim().trim_end_matches('/').to_string())
                .filter(|url| !url.is_empty())
                .collect(),
        }
    }

    fn call(&self, path: &str, body: Value) -> EtcdResult<Value> {
        let mut last = EtcdError("no endpoint given".into());
        for endpoint in &self.endpoints {
            match self
                .agent
                .post(&format!("{endpoint}{path}"))
                .send_json(&body)
            {
                Ok(response) => {
                    return response
                        .into_json::<Value>()
                        .map_err(|error| EtcdError(format!("{endpoint}{path}: {error}")))
                }
                Err(ureq::Error::Status(code, response)) => {
                    let text = response.into_string().unwrap_or_default();
                    last = EtcdError(format!("{endpoint}{path}: HTTP {code}: {text}"));
                }
                // ureq's message names the URL already.
                Err(error) => last = EtcdError(error.to_string()),
            }
        }
        Err(last)
    }

    /// A new lease of `ttl_seconds`; returns its id and granted TTL.
    pub fn grant(&self, ttl_seconds: u64) -> EtcdResult<(i64, u64)> {
        let answer = self.call("/v3/lease/grant", json!({ "TTL": ttl_seconds }))?;
        let id = int(&answer["ID"]);
        if id == 0 {
            return Err(EtcdError(format!("lease grant answered {answer}")));
        }
        Ok((id, int(&answer["TTL"]).max(0) as u64))
    }

    /// Renews the lease; returns its TTL, or None if it no longer exists (expired).
    pub fn keep_alive(&self, lease: i64) -> EtcdResult<Option<u64>> {
        let answer = self.call("/v3/lease/keepalive", json!({ "ID": lease.to_string() }))?;
        let ttl = int(&answer["result"]["TTL"]);
        Ok((ttl > 0).then_some(ttl as u64))
    }

    /// Ends the lease now; keys attached to it are deleted.
    pub fn revoke(&self, lease: i64) -> EtcdResult<()> {
        self.call("/v3/lease/revoke", json!({ "ID": lease.to_string() }))
            .map(|_| ())
    }

    /// The key's value, if it exists.
    pub fn get(&self, key: &str) -> EtcdResult<Option<KeyValue>> {
        Ok(self
            .range(json!({ "key": b64(key.as_bytes()) }))?
            .into_iter()
            .next())
    }

    /// Every key starting with `prefix`, in key order.
    pub fn get_prefix(&self, prefix: &str) -> EtcdResult<Vec<KeyValue>> {
        let mut end = prefix.as_bytes().to_vec();
        if let Some(last) = end.last_mut() {
            *last += 1;
        }
        self.range(json!({ "key": b64(prefix.as_bytes()), "range_end": b64(&end) }))
    }

    /// The key-values a range request answers.
    fn range(&self, request: Value) -> EtcdResult<Vec<KeyValue>> {
        let answer = self.call("/v3/kv/range", request)?;
        let mut values = Vec::new();
        for kv in answer["kvs"].as_array().into_iter().flatten() {
            values.push(KeyValue {
                value: BASE64
                    .decode(kv["value"].as_str().unwrap_or(""))
                    .map_err(|error| EtcdError(format!("a value in {answer}: {error}")))?,
                lease: int(&kv["lease"]),
            });
        }
        Ok(values)
    }

    fn put_request(key: &str, value: &[u8], lease: i64) -> Value {
        let mut put = json!({ "key": b64(key.as_bytes()), "value": b64(value) });
        if lease != 0 {
            put["lease"] = json!(lease.to_string());
        }
        put
    }

    /// Writes the key (attached to `lease` unless 0).
    pub fn put(&self, key: &str, value: &[u8], lease: i64) -> EtcdResult<()> {
        self.call("/v3/kv/put", Self::put_request(key, value, lease))
            .map(|_| ())
    }

    fn txn(&self, key: &str, compare: Value, success: Value) -> EtcdResult<bool> {
        let mut compare = compare;
        compare["key"] = json!(b64(key.as_bytes()));
        let answer = self.call(
            "/v3/kv/txn",
            json!({ "compare": [compare], "success": [success] }),
        )?;
        Ok(answer["succeeded"].as_bool().unwrap_or(false))
    }

    /// Creates the key only if it does not exist; true if this call created it.
    pub fn create(&self, key: &str, value: &[u8], lease: i64) -> EtcdResult<bool> {
        self.txn(
            key,
            json!({ "target": "CREATE", "result": "EQUAL", "create_revision": "0" }),
            json!({ "request_put": Self::put_request(key, value, lease) }),
        )
    }

    /// Replaces the key's value only if it is `expected` now; true if replaced.
    pub fn replace(
        &self,
        key: &str,
        expected: &[u8],
        value: &[u8],
        lease: i64,
    ) -> EtcdResult<bool> {
        self.txn(
            key,
            json!({ "target": "VALUE", "result": "EQUAL", "value": b64(expected) }),
            json!({ "request_put": Self::put_request(key, value, lease) }),
        )
    }

    /// Deletes the key only if its value is `expected`; true if deleted.
    pub fn delete_if(&self, key: &str, expected: &[u8]) -> EtcdResult<bool> {
        self.txn(
            key,
            json!({ "target": "VALUE", "result": "EQUAL", "value": b64(expected) }),
            json!({ "request_delete_range": { "key": b64(key.as_bytes()) } }),
        )
    }
}
