//! [`ObjectStore`] on S3 and the stores that speak its API (MinIO,
//! SeaweedFS, Ceph): requests signed by `rusty-s3` (SigV4 presigned URLs,
//! its XML parsing), sent by `ureq`, a blocking client, on the tier's own
//! threads. Neither needs an async runtime, so nothing here touches a
//! shard's.

use crate::error::StoreError;
use crate::store::{ObjectInfo, ObjectStore};
use rusty_s3::actions::ListObjectsV2;
use rusty_s3::{Bucket, Credentials, S3Action, UrlStyle};
use std::io::Read;
use std::ops::Range;
use std::time::Duration;
use url::Url;

/// How long a signed URL stays valid: longer than any request takes.
const SIGNED_FOR: Duration = Duration::from_secs(3600);
/// The most a GET body may be (a chunk is far smaller).
const MAX_BODY: u64 = 1 << 30;

/// Where a tier lives: `s3://BUCKET/PREFIX` and the endpoint that serves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct S3Location {
    /// The bucket.
    pub bucket: String,
    /// The key prefix, empty or ending in `/`.
    pub prefix: String,
    /// The endpoint (`http://127.0.0.1:8333`); AWS's for the region when
    /// not set.
    pub endpoint: Option<String>,
    /// The region (`AWS_REGION`, else `us-east-1`).
    pub region: String,
}

impl S3Location {
    /// Parses `s3://BUCKET[/PREFIX]`.
    pub fn parse(url: &str, endpoint: Option<&str>) -> Result<S3Location, String> {
        let rest = url
            .strip_prefix("s3://")
            .ok_or_else(|| format!("`{url}`: a tier is named s3://BUCKET/PREFIX"))?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(format!("`{url}`: no bucket"));
        }
        let prefix = prefix.trim_matches('/');
        let region = std::env::var("AWS_REGION")
            .or_else(|_| std::env::var("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|_| "us-east-1".into());
        Ok(S3Location {
            bucket: bucket.into(),
            prefix: if prefix.is_empty() {
                String::new()
            } else {
                format!("{prefix}/")
            },
            endpoint: endpoint.map(str::to_owned),
            region,
        })
    }

    /// `s3://BUCKET/PREFIX`.
    pub fn url(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }
}

/// An S3(-compatible) bucket and prefix.
pub struct S3Store {
    location: S3Location,
    bucket: Bucket,
    credentials: Credentials,
    agent: ureq::Agent,
}

impl std::fmt::Debug for S3Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Store")
            .field("location", &self.location)
            .field("access_key", &self.credentials.key())
            .finish()
    }
}

impl S3Store {
    /// A store with credentials from the environment, the way AWS's tools
    /// read them: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` (and
    /// `AWS_SESSION_TOKEN` when set).
    pub fn from_env(location: S3Location) -> Result<S3Store, String> {
        let var = |name: &str| {
            std::env::var(name).map_err(|_| format!("{}: {name} is not set", location.url()))
        };
        let key = var("AWS_ACCESS_KEY_ID")?;
        let secret = var("AWS_SECRET_ACCESS_KEY")?;
        let credentials = match std::env::var("AWS_SESSION_TOKEN") {
            Ok(token) => Credentials::new_with_token(key, secret, token),
            Err(_) => Credentials::new(key, secret),
        };
        S3Store::new(location, credentials)
    }

    /// A store with these credentials.
    pub fn new(location: S3Location, credentials: Credentials) -> Result<S3Store, String> {
        let (endpoint, style) = match &location.endpoint {
            Some(e) => (e.clone(), UrlStyle::Path),
            None => (
                format!("https://s3.{}.amazonaws.com", location.region),
                UrlStyle::VirtualHost,
            ),
        };
        let url: Url = endpoint
            .parse()
            .map_err(|e| format!("endpoint `{endpoint}`: {e}"))?;
        let bucket = Bucket::new(url, style, location.bucket.clone(), location.region.clone())
            .map_err(|e| format!("endpoint `{endpoint}`: {e}"))?;
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            // A store that stops answering fails the request within
            // seconds; one that answers slowly may take as long as a large
            // segment takes to send (a body shorter than its length, which
            // makes ureq spin, cannot come from a sealed segment, and is
            // bounded by `timeout_send_body` all the same).
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_per_read(Some(Duration::from_secs(30)))
            .timeout_per_write(Some(Duration::from_secs(30)))
            .timeout_recv_response(Some(Duration::from_secs(60)))
            .timeout_send_body(Some(Duration::from_secs(1800)))
            .build()
            .into();
        Ok(S3Store {
            location,
            bucket,
            credentials,
            agent,
        })
    }

    /// Creates the bucket (a first setup, a test's store); one that exists
    /// already and is this account's is no error.
    pub fn create_bucket(&self) -> Result<(), StoreError> {
        let url = self
            .bucket
            .create_bucket(&self.credentials)
            .sign(SIGNED_FOR);
        match self.answer("PUT", "", self.agent.put(url.as_str()).send_empty()) {
            Ok(_) => Ok(()),
            Err(StoreError::Failed { message, .. })
                if message.starts_with("BucketAlreadyOwnedByYou") =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn full_key(&self, key: &str) -> String {
        format!("{}{key}", self.location.prefix)
    }

    /// The signed URL of a GET of `key`.
    fn get_url(&self, key: &str) -> Url {
        self.bucket
            .get_object(Some(&self.credentials), &self.full_key(key))
            .sign(SIGNED_FOR)
    }

    fn unreachable(&self, e: ureq::Error) -> StoreError {
        StoreError::Unreachable {
            store: self.describe(),
            reason: e.to_string(),
        }
    }

    /// The error for a failed answer: `status` and the body's S3 `<Code>`
    /// and `<Message>`.
    fn refused(&self, op: &'static str, key: &str, status: u16, body: &str) -> StoreError {
        let field = |name: &str| {
            let open = format!("<{name}>");
            let close = format!("</{name}>");
            body.split_once(&open)
                .and_then(|(_, rest)| rest.split_once(&close))
                .map(|(v, _)| v.to_owned())
        };
        let code = field("Code").unwrap_or_default();
        let message = match (code.is_empty(), field("Message")) {
            (true, None) => format!("{} bytes of answer", body.len()),
            (_, Some(m)) if !code.is_empty() => format!("{code}: {m}"),
            (_, Some(m)) => m,
            (false, None) => code.clone(),
        };
        match (status, code.as_str()) {
            (404, "NoSuchBucket") => StoreError::NoBucket {
                store: self.describe(),
                bucket: self.location.bucket.clone(),
            },
            (404, _) => StoreError::NotFound {
                store: self.describe(),
                key: key.into(),
            },
            (401 | 403, _) => StoreError::Credentials {
                store: self.describe(),
                access_key: self.credentials.key().into(),
                status,
                message,
            },
            _ => StoreError::Failed {
                store: self.describe(),
                op,
                key: key.into(),
                status,
                message,
            },
        }
    }

    /// Sends a request; a non-2xx answer becomes the error for it.
    fn answer(
        &self,
        op: &'static str,
        key: &str,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> Result<ureq::http::Response<ureq::Body>, StoreError> {
        let mut resp = sent.map_err(|e| self.unreachable(e))?;
        let status = resp.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(resp);
        }
        let body = resp
            .body_mut()
            .with_config()
            .limit(64 << 10)
            .read_to_string()
            .unwrap_or_default();
        Err(self.refused(op, key, status, &body))
    }
}

impl ObjectStore for S3Store {
    fn describe(&self) -> String {
        match &self.location.endpoint {
            Some(e) => format!("{} at {e}", self.location.url()),
            None => self.location.url(),
        }
    }

    fn object_name(&self, key: &str) -> String {
        format!("s3://{}/{}", self.location.bucket, self.full_key(key))
    }

    fn check(&self) -> Result<(), StoreError> {
        // A listing needs the bucket and accepted credentials, and reads
        // at most one key.
        let mut list = ListObjectsV2::new(&self.bucket, Some(&self.credentials));
        list.with_prefix(self.location.prefix.clone());
        list.with_max_keys(1);
        let url = list.sign(SIGNED_FOR);
        self.answer("LIST", "", self.agent.get(url.as_str()).call())
            .map(|_| ())
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<(), StoreError> {
        let full = self.full_key(key);
        let url = self
            .bucket
            .put_object(Some(&self.credentials), &full)
            .sign(SIGNED_FOR);
        let sent = self
            .agent
            .put(url.as_str())
            .header("Content-Type", content_type(key))
            .send(bytes);
        self.answer("PUT", key, sent).map(|_| ())
    }

    fn put_reader(&self, key: &str, body: &mut dyn Read, len: u64) -> Result<(), StoreError> {
        let mut body = body.take(len);
        let full = self.full_key(key);
        let url = self
            .bucket
            .put_object(Some(&self.credentials), &full)
            .sign(SIGNED_FOR);
        let sent = self
            .agent
            .put(url.as_str())
            .header("Content-Length", len.to_string())
            .header("Content-Type", content_type(key))
            .send(ureq::SendBody::from_reader(&mut body));
        self.answer("PUT", key, sent).map(|_| ())
    }

    fn get(&self, key: &str, range: Option<Range<u64>>) -> Result<Vec<u8>, StoreError> {
        let url = self.get_url(key);
        let mut req = self.agent.get(url.as_str());
        let mut want = 0;
        if let Some(r) = &range {
            if r.is_empty() {
                return Ok(Vec::new());
            }
            want = (r.end - r.start).min(MAX_BODY);
            req = req.header("Range", format!("bytes={}-{}", r.start, r.end - 1));
        }
        let mut resp = self.answer("GET", key, req.call())?;
        // A ranged body is read into a buffer of its size: no regrowth
        // (each a copy of what came so far) and no zeroing twice.
        let mut body = Vec::with_capacity(want as usize);
        resp.body_mut()
            .with_config()
            .limit(MAX_BODY)
            .reader()
            .read_to_end(&mut body)
            .map_err(|e| self.unreachable(ureq::Error::Io(e)))?;
        Ok(body)
    }

    fn get_into(&self, key: &str, range: Range<u64>, buf: &mut [u8]) -> Result<usize, StoreError> {
        let want = usize::try_from(range.end.saturating_sub(range.start))
            .unwrap_or(usize::MAX)
            .min(buf.len());
        if want == 0 {
            return Ok(0);
        }
        let url = self.get_url(key);
        let req = self
            .agent
            .get(url.as_str())
            .header("Range", format!("bytes={}-{}", range.start, range.end - 1));
        let mut resp = self.answer("GET", key, req.call())?;
        // A whole object (200) where a range was asked is the range only
        // when the range starts at 0: read no further than it.
        if resp.status().as_u16() != 206 && range.start != 0 {
            return Err(self.refused(
                "GET",
                key,
                resp.status().as_u16(),
                "the store sent the whole object, not the range asked for",
            ));
        }
        let mut body = resp.body_mut().with_config().limit(MAX_BODY).reader();
        let mut n = 0;
        while n < want {
            match body.read(&mut buf[n..want]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(self.unreachable(ureq::Error::Io(e))),
            }
        }
        Ok(n)
    }

    fn delete(&self, key: &str) -> Result<(), StoreError> {
        let full = self.full_key(key);
        let url = self
            .bucket
            .delete_object(Some(&self.credentials), &full)
            .sign(SIGNED_FOR);
        match self.answer("DELETE", key, self.agent.delete(url.as_str()).call()) {
            Ok(_) | Err(StoreError::NotFound { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<ObjectInfo>, StoreError> {
        let full = self.full_key(prefix);
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let mut list = ListObjectsV2::new(&self.bucket, Some(&self.credentials));
            list.with_prefix(full.clone());
            if let Some(t) = &token {
                list.with_continuation_token(t.clone());
            }
            let url = list.sign(SIGNED_FOR);
            let mut resp = self.answer("LIST", prefix, self.agent.get(url.as_str()).call())?;
            let body = resp
                .body_mut()
                .with_config()
                .limit(64 << 20)
                .read_to_vec()
                .map_err(|e| self.unreachable(e))?;
            let parsed = ListObjectsV2::parse_response(&body).map_err(|e| StoreError::Failed {
                store: self.describe(),
                op: "LIST",
                key: prefix.into(),
                status: 200,
                message: format!("unreadable listing: {e}"),
            })?;
            for c in parsed.contents {
                if let Some(key) = c.key.strip_prefix(&self.location.prefix) {
                    out.push(ObjectInfo {
                        key: key.to_owned(),
                        size: c.size,
                    });
                }
            }
            match parsed.next_continuation_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => break,
            }
        }
        Ok(out)
    }
}

/// The `Content-Type` an object is stored with: manifests are JSON, the
/// rest (segments and indexes) binary, stated so that a store that goes by
/// the type need not guess it from the bytes. SeaweedFS 4.48 still gzips a
/// chunk that compresses well, whatever the type (docs/bench/profiles.md,
/// section 7).
fn content_type(key: &str) -> &'static str {
    if key.ends_with(".json") {
        "application/json"
    } else {
        "application/octet-stream"
    }
}
