//! How the [`Client`] sends a request and reads the reply, which every
//! endpoint shares: the URL of a path, a JSON reply or the error it carries,
//! and a List read page by page.

use serde_json::Value;

use super::{Client, ClientError, GROUP_PATH, REQUEST_TIMEOUT};

/// How many objects relayctl asks for per page of a list, as kubectl does
/// (the root refuses a list without `limit` past 10,000 objects).
const PAGE_SIZE: usize = 500;

impl Client {
    /// The `items` of every page of the List of `resource` in relaymesh's
    /// group.
    pub(super) async fn list(&self, resource: &str) -> Result<Vec<Value>, ClientError> {
        let mut list = self
            .get_pages(&format!("{GROUP_PATH}/{resource}"), None)
            .await?;
        match list.get_mut("items").map(Value::take) {
            Some(Value::Array(items)) => Ok(items),
            Some(Value::Null) | None => Ok(Vec::new()),
            Some(_) => Err(ClientError::Decode(format!(
                "the {resource} list's items are not a list"
            ))),
        }
    }

    /// Every page of the List (or, with a Table `accept`, the Table) at
    /// `path`, asked for [`PAGE_SIZE`] objects at a time and joined into the
    /// first page: the `items` (or `rows`) of the later ones appended, and
    /// no `continue` left.
    pub(crate) async fn get_pages(
        &self,
        path: &str,
        accept: Option<&'static str>,
    ) -> Result<Value, ClientError> {
        let mut joined: Option<Value> = None;
        let mut next: Option<String> = None;
        loop {
            let mut query = vec![("limit", PAGE_SIZE.to_string())];
            if let Some(token) = next.take() {
                query.push(("continue", token));
            }
            let mut request = self
                .http
                .get(self.url(path))
                .query(&query)
                .timeout(REQUEST_TIMEOUT);
            if let Some(accept) = accept {
                request = request.header("Accept", accept);
            }
            let mut page = self.send_json(request).await?;
            next = page["metadata"]["continue"]
                .as_str()
                .filter(|token| !token.is_empty())
                .map(str::to_string);
            let key = if page.get("rows").is_some() {
                "rows"
            } else {
                "items"
            };
            match joined.as_mut() {
                None => joined = Some(page),
                Some(first) => {
                    let more = match page.get_mut(key).map(Value::take) {
                        Some(Value::Array(more)) => more,
                        _ => Vec::new(),
                    };
                    if let Some(Value::Array(items)) = first.get_mut(key) {
                        items.extend(more);
                    }
                }
            }
            if next.is_none() {
                break;
            }
        }
        let mut joined = joined.unwrap_or(Value::Null);
        if let Some(Value::Object(metadata)) = joined.get_mut("metadata") {
            metadata.remove("continue");
        }
        Ok(joined)
    }

    pub(super) async fn get_json(&self, path: &str) -> Result<Value, ClientError> {
        let request = self.http.get(self.url(path)).timeout(REQUEST_TIMEOUT);
        self.send_json(request).await
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server)
    }

    /// Sends `request` and decodes a JSON reply, or the error it carries.
    pub(super) async fn send_json(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<Value, ClientError> {
        let response = request
            .send()
            .await
            .map_err(|source| ClientError::unreachable(&self.server, source))?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .map_err(|source| ClientError::unreachable(&self.server, source))?;
        if status.is_success() {
            return serde_json::from_slice(&body)
                .map_err(|error| ClientError::Decode(format!("the reply is not JSON: {error}")));
        }
        Err(ClientError::from_reply(status, &body))
    }
}
